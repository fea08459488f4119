"""A learned injection detector whose weights ship with unsee (no download, numpy only).

:class:`LearnedDetector` cuts an observation into *units* (lines, sentences,
string values of a rendered data structure: :func:`unit_spans`), describes
each unit by

- hashed word unigrams and bigrams and character 3-5-grams of the text as read
  (:func:`~.normalize.reader_view`: zero-width characters gone, escapes
  decoded, NFKC), binary, L2-normalised per unit (:data:`WORD_BUCKETS` +
  :data:`CHAR_BUCKETS` columns);
- what the default detector (:class:`~.signals.SignalDetector`, bound to the
  same tools) says about it: the highest score of its findings over the unit,
  over the unit before and over the whole text, and which kinds of signal they
  name (:data:`SIGNAL_FEATURES`);

and scores it with a logistic regression. A unit scoring ``threshold`` or more
is a finding over the unit and every signals finding that overlaps it (those
know how far a tag block or a YAML value reaches).

The weights (``learned_detector.npz`` beside this module, ~100 KB of float16)
are made by ``python -m unsee.eval.train_detector`` from shipped and generated
text only (AgentDojo's injection tasks and clean outputs, the hard cases,
templated injections and human-addressed texts, tool outputs written by hand for
training by eight authors, installed packages' docs); see
docs/detector-learned.md. A unit is a finding from :data:`THRESHOLD` (0.8).
Training is deterministic: the same corpus and seed give the same file.

Pure logic apart from reading the weights; :func:`unit_features` is what the
training uses too, so the two cannot drift apart.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from .base import Detector, Finding, ToolSpec, finding, merge_findings
from .errors import InvalidDetector
from .normalize import reader_view

#: the shipped weights
LEARNED_WEIGHTS = Path(__file__).with_name("learned_detector.npz")
#: format of the weights file (a file of another version is refused); 2: five more signals features and
#: the share in quotation marks
FORMAT = 2
WORD_BUCKETS = 1 << 14
CHAR_BUCKETS = 1 << 15
HASHED = WORD_BUCKETS + CHAR_BUCKETS
#: the unit probability from which a unit is a finding: chosen by leave-one-author-out validation on
#: the hand-written training texts for about 0.1 false positives per text (docs/detector-learned.md)
THRESHOLD = 0.8
#: a unit longer than this is cut at a space
MAX_UNIT = 320

#: the signals features: (name, pattern a signals finding's reason must match; None: the score)
SIGNAL_FEATURES: tuple[tuple[str, str | None], ...] = (
    ("score", None),
    ("score_before", None),
    ("score_text", None),
    ("flagged", None),
    ("addressed", r"addressed to an AI|addressed_to_model"),
    ("imperative", r"imperative"),
    ("marker", r"marker|label|role heading|role_heading|role_line"),
    ("hidden", r"hidden from a human"),
    ("action", r"action"),
    ("tool", r"names one of the agent's tools"),
    ("third_person", r"third person \(the assistant"),
    ("identifier", r"account, address or URL"),
    ("principal", r"the user in the third person"),
    ("processing", r"whoever processes"),
    ("handle", r"by handle"),
    ("template", r"tag_block|override|new_instructions|chat_template|role_tokens"),
    ("processor", r"whatever processes the text"),
    ("conceal", r"keeps something from"),
    ("decode", r"decode a passage"),
    ("encoded", r"base64|spaced out|look-alike|URL to be filled"),
    ("role", r"new role for the reader|standing order"),
)
DENSE = len(SIGNAL_FEATURES) + 3  # (+ its share in quotation marks, the unit's length, log-scaled, and its share of capitals)
#: a passage in quotation marks (an article quoting an attack mentions it; it does not give it)
_QUOTATION = re.compile(r"\"[^\"\n]{3,300}\"|“[^”\n]{3,300}”|«[^»\n]{3,300}»|„[^“\n]{3,300}“")
#: (hashed features, dense features): the shape of the weights
LEARNED_SHAPE = (HASHED, DENSE)

_UNIT_END = re.compile(r"\n|\\n|(?<=[.!?])\s+(?=\S)|(?<=[.!?][\"'])\s+(?=\S)")
_WORD = re.compile(r"\w+")
_P = 0x100000001B3
_SALT = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9)


def unit_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each unit of ``text``: a line (also one escaped as ``\\n``) or sentence,
    cut at a space when longer than :data:`MAX_UNIT`; blank ones left out."""
    out = []
    start = 0
    for m in _UNIT_END.finditer(text):
        out.extend(_cut(text, start, m.start()))
        start = m.end()
    out.extend(_cut(text, start, len(text)))
    return out


def _cut(text: str, a: int, b: int) -> list[tuple[int, int]]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    out = []
    while b - a > MAX_UNIT:
        cut = text.rfind(" ", a + MAX_UNIT // 2, a + MAX_UNIT)
        cut = a + MAX_UNIT if cut < 0 else cut
        out.append((a, cut))
        a = cut
        while a < b and text[a].isspace():
            a += 1
    if b > a:
        out.append((a, b))
    return out


@lru_cache(maxsize=1 << 16)
def _word_hash(word: str) -> int:
    return zlib.crc32(word.encode("utf-8"))


@dataclass(frozen=True, slots=True)
class UnitFeatures:
    """The units of one text and their features: ``rows``/``cols`` index the hashed features
    (``vals`` their values), ``dense`` is units x :data:`DENSE`."""

    spans: list[tuple[int, int]]
    rows: Any
    cols: Any
    vals: Any
    dense: Any


def _np() -> Any:
    try:
        import numpy
    except ImportError as exc:  # the ``learned`` extra brings it
        raise InvalidDetector("the learned detector needs numpy (pip install -e '.[learned]')") from exc
    return numpy


#: a signals finding as the features see it: (start, end, score, reason)
Signal = tuple[int, int, float, str]


def unit_features(text: str, signals: Sequence[Signal]) -> UnitFeatures:
    """The units of ``text`` (the text as read: see the module doc) and their features;
    ``signals``: the signals detector's findings on ``text`` (all scores)."""
    np = _np()
    spans = unit_spans(text)
    n = len(spans)
    if not n:
        empty = np.zeros(0, dtype=np.int64)
        return UnitFeatures(spans, empty, empty, np.zeros(0, dtype=np.float32), np.zeros((0, DENSE), np.float32))
    low = text.lower()
    starts = np.fromiter((a for a, _ in spans), dtype=np.int64, count=n)
    ends = np.fromiter((b for _, b in spans), dtype=np.int64, count=n)

    def unit_of(pos: Any) -> Any:
        u = np.searchsorted(starts, pos, side="right") - 1
        ok = (u >= 0) & (pos < ends[np.clip(u, 0, n - 1)])
        return u, ok

    rows, cols = [], []
    # words and word pairs (a pair within one unit)
    words = [(m.start(), _word_hash(m.group())) for m in _WORD.finditer(low)]
    if words:
        pos = np.fromiter((p for p, _ in words), dtype=np.int64, count=len(words))
        h = np.fromiter((x for _, x in words), dtype=np.uint64, count=len(words))
        u, ok = unit_of(pos)
        rows.append(u[ok])
        cols.append((h[ok] % WORD_BUCKETS).astype(np.int64))
        if len(words) > 1:
            pair = (h[:-1] * np.uint64(1000003) + h[1:] + np.uint64(7)) % np.uint64(WORD_BUCKETS)
            same = ok[:-1] & ok[1:] & (u[:-1] == u[1:])
            rows.append(u[:-1][same])
            cols.append(pair[same].astype(np.int64))
    # character 3-, 4- and 5-grams (rolling hashes over the code points, in one pass each)
    codes = np.frombuffer(low.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    for k, size in enumerate((3, 4, 5)):
        if len(codes) < size:
            continue
        m = len(codes) - size + 1
        h = np.zeros(m, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for j in range(size):
                h = h * np.uint64(_P) + codes[j:j + m]
            h = (h ^ np.uint64(_SALT[k])) * np.uint64(0xFF51AFD7ED558CCD)
        u, ok = unit_of(np.arange(m, dtype=np.int64))
        ok &= np.arange(m) + size <= ends[np.clip(u, 0, n - 1)]
        rows.append(u[ok])
        cols.append(WORD_BUCKETS + ((h[ok] >> np.uint64(17)) % np.uint64(CHAR_BUCKETS)).astype(np.int64))
    r = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
    key = np.unique(r * HASHED + c)  # binary features
    r, c = key // HASHED, key % HASHED
    counts = np.bincount(r, minlength=n).astype(np.float32)
    vals = (1.0 / np.sqrt(np.maximum(counts, 1.0)))[r].astype(np.float32)
    return UnitFeatures(spans, r, c, vals, _dense(text, spans, signals))


_FLAGS = [(i, re.compile(p)) for i, (_, p) in enumerate(SIGNAL_FEATURES) if p is not None]


def _dense(text: str, spans: list[tuple[int, int]], found: Sequence[Signal]) -> Any:
    np = _np()
    d = np.zeros((len(spans), DENSE), dtype=np.float32)
    top = max((f[2] for f in found), default=0.0)
    for i, (a, b) in enumerate(spans):
        over = [f for f in found if f[0] < b and a < f[1]]
        if over:
            best = max(f[2] for f in over)
            d[i, 0] = best
            d[i, 3] = best >= 0.5
            reasons = " ".join(f[3] for f in over)
            for j, rx in _FLAGS:
                d[i, j] = rx.search(reasons) is not None
    d[:, 2] = top
    # the unit's length and its share of capitals (letters: ASCII ones and anything beyond ASCII),
    # counted with running sums over the code points (a loop over characters costs more than the rest)
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    upper = np.concatenate(([0], np.cumsum((codes >= 65) & (codes <= 90))))
    letters = np.concatenate(([0], np.cumsum(((codes >= 65) & (codes <= 90)) | ((codes >= 97) & (codes <= 122))
                                             | (codes > 127))))
    a = np.fromiter((x for x, _ in spans), dtype=np.int64, count=len(spans))
    b = np.fromiter((y for _, y in spans), dtype=np.int64, count=len(spans))
    n_letters = letters[b] - letters[a]
    if quotes := [m.span() for m in _QUOTATION.finditer(text)]:
        inside = np.zeros(len(codes) + 1, dtype=np.int64)
        for qa, qb in quotes:
            inside[qa] += 1
            inside[qb] -= 1
        inside = np.concatenate(([0], np.cumsum(np.cumsum(inside)[:-1] > 0)))
        d[:, -3] = (inside[b] - inside[a]) / np.maximum(b - a, 1)
    d[:, -2] = np.log1p(b - a) / 6.0
    d[:, -1] = np.where(n_letters > 0, (upper[b] - upper[a]) / np.maximum(n_letters, 1), 0.0)
    d[1:, 1] = d[:-1, 0]
    return d


def text_features(text: str, signals: Detector) -> tuple[UnitFeatures, list[tuple[int, int]], list[Finding]]:
    """The features of ``text``'s units (read as its reader sees it), each unit's span in
    ``text``, and the ``signals`` detector's findings on ``text``: what the detector scores and
    the training learns from."""
    found = signals.detect(text)
    read = reader_view(text)
    if read is None:
        feats = unit_features(text, [(f.start, f.end, f.score, f.reason) for f in found])
        return feats, list(feats.spans), found
    view, where = read
    feats = unit_features(view, [(where.to_view(f.start), where.to_view(f.end), f.score, f.reason) for f in found])
    return feats, [where.span(a, b) for a, b in feats.spans], found


@dataclass(frozen=True, slots=True)
class LearnedWeights:
    """The logistic regression: one weight per hashed feature, per dense feature, and a bias."""

    hashed: Any
    dense: Any
    bias: float
    meta: Mapping[str, Any]


def load_learned_weights(path: str | Path = LEARNED_WEIGHTS) -> LearnedWeights:
    """The weights in ``path`` (an ``.npz`` written by :func:`save_learned_weights`); InvalidDetector
    when it is missing, unreadable or of another format."""
    np = _np()
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            fmt = int(z["format"])
            hashed, dense, bias = z["hashed"].astype(np.float32), z["dense"].astype(np.float32), float(z["bias"])
            meta = {k[5:]: z[k].item() if z[k].shape == () else z[k].tolist() for k in z.files if k.startswith("meta_")}
    except (OSError, KeyError, ValueError) as exc:
        raise InvalidDetector(f"learned detector weights {str(path)!r} cannot be read: {exc}") from exc
    if fmt != FORMAT or hashed.shape != (HASHED,) or dense.shape != (DENSE,):
        raise InvalidDetector(f"learned detector weights {str(path)!r}: format {fmt}, shapes {hashed.shape}, "
                              f"{dense.shape}; this unsee reads format {FORMAT} ({HASHED}, {DENSE})")
    return LearnedWeights(hashed, dense, bias, meta)


def save_learned_weights(path: str | Path, weights: LearnedWeights) -> None:
    """Write ``weights`` to ``path``: an ``.npz`` (float16, compressed: the file is shipped) whose
    bytes depend on the weights only (no timestamps), written through a temporary file."""
    import io
    import os
    import zipfile

    np = _np()
    arrays = {"format": np.asarray(FORMAT), "hashed": np.asarray(weights.hashed, dtype=np.float16),
              "dense": np.asarray(weights.dense, dtype=np.float16), "bias": np.asarray(weights.bias),
              **{f"meta_{k}": np.asarray(v) for k, v in sorted(weights.meta.items())}}
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, arr, allow_pickle=False)
            zf.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0)), buf.getvalue(),
                        compress_type=zipfile.ZIP_DEFLATED)
    os.replace(tmp, path)


def unit_scores(features: UnitFeatures, weights: LearnedWeights) -> Any:
    """The injection probability of each unit."""
    np = _np()
    n = len(features.spans)
    z = np.bincount(features.rows, weights=weights.hashed[features.cols] * features.vals, minlength=n)
    z = z + features.dense @ weights.dense + weights.bias
    return 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))


class LearnedDetector:
    """The learned detector (see the module doc). ``weights``: a path to an ``.npz`` or
    :class:`LearnedWeights` (default: the shipped file); ``tools``: the agent's tools (they reach the
    signals it reads)."""

    def __init__(self, weights: str | Path | LearnedWeights | None = None, tools: Sequence[ToolSpec] = (), *,
                 threshold: float = THRESHOLD, name: str = "learned"):
        from .classifier import check_threshold
        from .signals import SignalDetector

        self.weights = (weights if isinstance(weights, LearnedWeights)
                        else load_learned_weights(weights or LEARNED_WEIGHTS))
        self.threshold = check_threshold(threshold)
        self.tools = tuple(tools)
        self.name = name
        self._signals = SignalDetector(self.tools)

    def with_tools(self, tools: Sequence[ToolSpec]) -> LearnedDetector:
        return LearnedDetector(self.weights, tools, threshold=self.threshold, name=self.name)

    def scores(self, text: str) -> list[tuple[int, int, float]]:
        """(start, end, injection probability) of each unit of ``text`` (offsets into ``text``)."""
        return [(a, b, p) for a, b, p, _ in self._units(text)]

    def _units(self, text: str) -> list[tuple[int, int, float, list[Finding]]]:
        """Each unit: (start, end, probability, the signals findings over it), on ``text``."""
        feats, spans, found = text_features(text, self._signals)
        return [(a, b, p, [f for f in found if f.start < b and a < f.end])
                for (a, b), p in zip(spans, unit_scores(feats, self.weights).tolist())]

    def detect(self, text: str, artifact_id: str | None = None) -> list[Finding]:
        if not text.strip():
            return []
        out = []
        for a, b, p, over in self._units(text):
            if p < self.threshold:
                continue
            s, e = min([a, *(f.start for f in over)]), max([b, *(f.end for f in over)])
            why = f"learned: injection p={p:.2f}" + (f" ({over[0].reason})" if over else "")
            out.append(finding(text, s, e, round(min(p, 0.99), 3), why, self.name, artifact_id))
        return merge_findings(out, text)

    def __repr__(self) -> str:
        return f"LearnedDetector(name={self.name!r}, tools={len(self.tools)})"


__all__ = ["CHAR_BUCKETS", "DENSE", "HASHED", "LEARNED_SHAPE", "LEARNED_WEIGHTS", "LearnedDetector", "LearnedWeights",
           "SIGNAL_FEATURES", "Signal", "THRESHOLD", "UnitFeatures", "WORD_BUCKETS", "load_learned_weights", "save_learned_weights",
           "text_features", "unit_features", "unit_scores", "unit_spans"]
