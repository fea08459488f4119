"""Bring your own classifier: a local sequence-classification model, and ensembles of detectors.

:class:`ClassifierDetector` runs a transformers sequence classifier from a
local directory (``AutoModelForSequenceClassification`` + its tokenizer,
``local_files_only``: nothing is downloaded at run time) over an observation
in overlapping token windows; a window whose injection probability reaches
``threshold`` is a finding over that window's characters. Which output is
"injection" is read from the model's ``id2label`` (a label naming injection,
jailbreak, malicious, unsafe or attack), else given as ``label``.
:mod:`.onnx_classifier` runs an exported model the same way with onnxruntime;
both use this module's :func:`load_tokenizer`, :func:`window_sizes`,
:func:`label_index`, :func:`token_windows`, :func:`window_scores` and
:func:`window_findings`.

:class:`EnsembleDetector` combines detectors: ``any`` reports what any of them
finds (the union, merged); ``weighted`` scores every stretch of text by the
weighted mean of the detectors' scores there and reports the stretches that
reach ``threshold``. Both pass the agent's tools to members that use them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .base import Detector, Finding, ToolSpec, bind_tools, finding, merge_findings
from .errors import InvalidDetector

_INJECTION_LABEL = re.compile(r"inject|jailbreak|malicious|unsafe|attack|harmful", re.IGNORECASE)


def check_threshold(threshold: float) -> float:
    """``threshold`` when it is in (0, 1], else :class:`InvalidDetector`."""
    if not 0.0 < threshold <= 1.0:
        raise InvalidDetector(f"threshold must be in (0, 1], got {threshold!r}")
    return threshold


def load_tokenizer(path: Path, what: str, install: str) -> Any:
    """The fast tokenizer of the model folder ``path`` (transformers' ``AutoTokenizer``, local
    files only), with a pad token; :class:`InvalidDetector` naming ``what`` (the folder, in the
    detector's words) and what to ``install`` when transformers is missing."""
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise InvalidDetector(f"{what} needs transformers ({install})") from exc
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise InvalidDetector(f"{what} cannot be loaded: {exc}") from exc
    if tokenizer.pad_token is None:  # (windows of one text are padded to one length)
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    if not getattr(tokenizer, "is_fast", False):
        raise InvalidDetector(f"{what}: a fast tokenizer is needed (character offsets)")
    return tokenizer


def window_sizes(tokenizer: Any, max_length: int, stride: int) -> tuple[int, int]:
    """(window length, overlap) in tokens: ``max_length`` within the tokenizer's limit (at
    least 16), ``stride`` at most half a window."""
    max_length = max(16, min(max_length, getattr(tokenizer, "model_max_length", max_length)))
    return max_length, max(0, min(stride, max_length // 2))


def label_index(id2label: Mapping[Any, Any] | None, num_labels: int, label: str | int | None) -> int:
    """Which of a classifier's ``num_labels`` outputs means injection: ``label`` (an index or a
    name in ``id2label``), else the first label naming injection, jailbreak, ..., else output 1
    of a binary classifier; :class:`InvalidDetector` otherwise."""
    labels = {int(k): str(v) for k, v in (id2label or {}).items()}
    n = int(num_labels)
    if isinstance(label, int):
        if not 0 <= label < n:
            raise InvalidDetector(f"label index {label} is not one of the model's {n} outputs")
        return label
    if isinstance(label, str):
        hits = [i for i, v in labels.items() if v == label]
        if not hits:
            raise InvalidDetector(f"label {label!r} is not one of {sorted(labels.values())}")
        return hits[0]
    named = [i for i, v in labels.items() if _INJECTION_LABEL.search(v)]
    if named:
        return named[0]
    if n == 2:
        return 1  # the positive class of a binary classifier
    raise InvalidDetector(f"which of the labels {sorted(labels.values())} means injection? pass label=")


def token_windows(tokenizer: Any, text: str, max_length: int, stride: int,
                  tensors: str) -> tuple[dict[str, Any], list[tuple[int, int] | None]]:
    """``text`` in overlapping windows of ``max_length`` tokens (``stride`` shared), padded to one
    length: the model inputs as ``tensors`` (``"pt"``, ``"np"``), and each window's characters
    (first, end) — None for a window without a token of the text."""
    enc = tokenizer(text, truncation=True, max_length=max_length, stride=stride,
                    return_overflowing_tokens=True, return_offsets_mapping=True, padding=True,
                    return_tensors=tensors)
    offsets = enc.pop("offset_mapping")
    enc.pop("overflow_to_sample_mapping", None)
    spans: list[tuple[int, int] | None] = []
    for window in offsets.tolist():
        tokens = [(int(a), int(b)) for a, b in window if b > a]
        spans.append((tokens[0][0], tokens[-1][1]) if tokens else None)
    return dict(enc), spans


def window_scores(spans: Sequence[tuple[int, int] | None], probs: Iterable[float]) -> list[tuple[int, int, float]]:
    """(first character, end character, injection probability) of each window with text."""
    return [(s[0], s[1], float(p)) for s, p in zip(spans, probs) if s is not None]


def window_findings(text: str, windows: Iterable[tuple[int, int, float]], threshold: float, name: str,
                    artifact_id: str | None = None) -> list[Finding]:
    """A finding over each window whose injection probability reaches ``threshold``, merged."""
    out = [finding(text, a, b, min(1.0, p), f"classifier {name}: injection p={p:.2f}", name, artifact_id)
           for a, b, p in windows if p >= threshold]
    return merge_findings(out, text)


class ClassifierDetector:
    """A local sequence classifier as a detector (see the module doc)."""

    def __init__(self, path: str | Path, *, label: str | int | None = None, threshold: float = 0.5,
                 max_length: int = 512, stride: int = 64, name: str | None = None):
        try:
            from transformers import AutoModelForSequenceClassification
        except ImportError as exc:  # the ``local`` extra brings transformers
            raise InvalidDetector("ClassifierDetector needs transformers (pip install -e '.[local]')") from exc
        path = Path(path)
        if not path.is_dir():
            raise InvalidDetector(f"classifier {str(path)!r}: not a model directory")
        check_threshold(threshold)
        what = f"classifier {str(path)!r}"
        self.tokenizer = load_tokenizer(path, what, "pip install -e '.[local]'")
        try:
            self.model = AutoModelForSequenceClassification.from_pretrained(path, local_files_only=True).eval()
        except (OSError, ValueError) as exc:
            raise InvalidDetector(f"{what} cannot be loaded: {exc}") from exc
        self.index = label_index(self.model.config.id2label, self.model.config.num_labels, label)
        self.threshold = threshold
        self.max_length, self.stride = window_sizes(self.tokenizer, max_length, stride)
        self.name = name or f"classifier:{path.name}"

    def scores(self, text: str) -> list[tuple[int, int, float]]:
        """Each window of ``text``: (first character, end character, injection probability)."""
        import torch

        enc, spans = token_windows(self.tokenizer, text, self.max_length, self.stride, "pt")
        with torch.no_grad():
            probs = torch.softmax(self.model(**enc).logits.float(), dim=-1)[:, self.index]
        return window_scores(spans, probs.tolist())

    def detect(self, text: str, artifact_id: str | None = None) -> list[Finding]:
        if not text.strip():
            return []
        return window_findings(text, self.scores(text), self.threshold, self.name, artifact_id)

    def __repr__(self) -> str:
        return f"ClassifierDetector(name={self.name!r})"


MODES = ("any", "weighted")


class EnsembleDetector:
    """Several detectors as one (see the module doc)."""

    def __init__(self, detectors: Iterable[Detector], *, mode: str = "any", weights: Sequence[float] | None = None,
                 threshold: float = 0.5, name: str | None = None):
        from .hooks import as_detector

        self.detectors = [as_detector(d) for d in detectors]
        if not self.detectors:
            raise InvalidDetector("an ensemble needs at least one detector")
        if mode not in MODES:
            raise InvalidDetector(f"ensemble mode must be one of {MODES}, not {mode!r}")
        weights = [1.0] * len(self.detectors) if weights is None else [float(w) for w in weights]
        if len(weights) != len(self.detectors) or any(w < 0 for w in weights) or not sum(weights):
            raise InvalidDetector(f"weights {weights!r}: one non-negative weight per detector, not all zero")
        check_threshold(threshold)
        self.mode, self.weights, self.threshold = mode, weights, threshold
        self.name = name or f"{mode}(" + "+".join(getattr(d, "name", "?") for d in self.detectors) + ")"

    def with_tools(self, tools: Sequence[ToolSpec]) -> EnsembleDetector:
        return EnsembleDetector([bind_tools(d, tools) for d in self.detectors], mode=self.mode,
                                weights=self.weights, threshold=self.threshold, name=self.name)

    def detect(self, text: str, artifact_id: str | None = None) -> list[Finding]:
        per = [list(d.detect(text, artifact_id)) for d in self.detectors]
        if self.mode == "any":
            return merge_findings([f for fs in per for f in fs], text)
        # weighted: cut the text where any finding starts or ends; score each piece
        cuts = sorted({0, len(text), *(x for fs in per for f in fs for x in (f.start, f.end))})
        total = sum(self.weights)
        kept: list[Finding] = []
        for a, b in zip(cuts, cuts[1:]):
            if b <= a:
                continue
            score, why = 0.0, []
            for w, fs in zip(self.weights, per):
                s = max((f.score for f in fs if f.start <= a and b <= f.end), default=0.0)
                if s:
                    score += w * s
                    why.extend(f.reason for f in fs if f.start <= a and b <= f.end)
            score /= total
            if score >= self.threshold:
                kept.append(finding(text, a, b, min(1.0, score), "; ".join(dict.fromkeys(why)), self.name,
                                    artifact_id))
        return merge_findings(kept, text, touching=True)

    def __repr__(self) -> str:
        return f"EnsembleDetector({self.name!r})"


__all__ = ["ClassifierDetector", "EnsembleDetector", "MODES", "check_threshold", "label_index", "load_tokenizer",
           "token_windows", "window_findings", "window_scores", "window_sizes"]
