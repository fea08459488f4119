"""The forms a forgotten target can take on disk, and counting them in bytes.

A store rarely holds the target as plain UTF-8 only: JSON escapes it, some
drivers write UTF-16, a UI strips the dashes of a card number, and
PostgreSQL's pglz compression interleaves control bytes with literal runs.
:func:`target_forms` lists those forms; :class:`FormCounter` counts them in a
byte stream so that one stored copy is counted once, whatever number of forms
match it. :func:`holds_target` is the one value-level matcher (for decoded
strings) of the erasure code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from unsee.middleware.errors import InvalidArgument

# Characters a person or a UI drops or changes in an identifier: "4417-2231" == "4417 2231" == "44172231".
SEPARATORS = frozenset(" \t\r\n-._/")
# "4417 - 2231": at most this many separators between two characters (a bound keeps the match length finite).
MAX_SEPARATORS = 3
_DROP_SEPARATORS = {ord(c): None for c in SEPARATORS}  # str.translate: C speed on long texts
# A normalised target shorter than this would match too much unrelated text.
MIN_NORMALISED = 6
# pglz copies of shorter targets false-positive too often to be worth reporting.
MIN_PGLZ = 8
# pglz writes one control byte before every 8 items of a literal run; tolerate one stray byte between two.
_PGLZ_GAP = b"(?s:.)?"


@dataclass(frozen=True)
class Form:
    """One on-disk form of a target: a literal byte string or a bytes regex of bounded match length."""

    name: str
    pattern: bytes | re.Pattern[bytes]
    #: the same form for bytes ASCII-lowercased (``bytes.lower``): a literal or a regex with a
    #: literal first byte, which ``re`` finds at memchr speed where ``(?:D|d)...`` is ~20x slower.
    #: Set by :func:`target_forms` for ASCII targets only, where it matches exactly where
    #: ``pattern`` matches in the original bytes (same offsets, same lengths).
    folded: bytes | re.Pattern[bytes] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        p = self.pattern
        if not (isinstance(p, bytes) or (isinstance(p, re.Pattern) and isinstance(p.pattern, bytes))):
            raise InvalidArgument(f"form {self.name!r}: pattern must be bytes or a compiled bytes regex")
        if self._width[0] == 0:
            raise InvalidArgument(f"form {self.name!r}: pattern must not match the empty string")

    @cached_property
    def regex(self) -> re.Pattern[bytes]:
        """The pattern compiled (literal bytes escaped)."""
        return re.compile(re.escape(self.pattern)) if isinstance(self.pattern, bytes) else self.pattern

    @cached_property
    def folded_regex(self) -> re.Pattern[bytes] | None:
        """:attr:`folded` compiled (None: match :attr:`regex` against the original bytes)."""
        f = self.folded
        return None if f is None else re.compile(re.escape(f)) if isinstance(f, bytes) else f

    @property
    def max_len(self) -> int:
        """The longest match the pattern can have: a chunked scan keeps that many bytes of overlap."""
        return self._width[1]

    @cached_property
    def _width(self) -> tuple[int, int]:
        if isinstance(self.pattern, bytes):
            return len(self.pattern), len(self.pattern)
        # The stdlib's own regex parser knows a pattern's width; there is no public API for it.
        from re import _parser  # type: ignore[attr-defined]

        lo, hi = _parser.parse(self.pattern.pattern, self.pattern.flags).getwidth()
        if hi >= _parser.MAXREPEAT:
            raise InvalidArgument(f"form {self.name!r}: the regex has no bounded match length")
        return lo, hi

    def key(self) -> tuple[bytes, int]:
        """What makes two forms the same form (used to deduplicate)."""
        rx = self.regex
        return rx.pattern, rx.flags


def _check_target(target: object) -> str:
    if not isinstance(target, str):
        raise InvalidArgument(f"the target must be a string, got {type(target).__name__}")
    if not target.strip():
        raise InvalidArgument("the target must not be empty or whitespace only")
    return target


def normalise(text: str) -> str:
    """``text`` casefolded with the separators (whitespace, ``-._/``) dropped."""
    return text.casefold().translate(_DROP_SEPARATORS)


def holds_target(text: str, target: str) -> bool:
    """Whether the decoded value ``text`` holds ``target``.

    True for a raw substring, or for a substring after :func:`normalise` of
    both sides when the normalised target has at least ``MIN_NORMALISED``
    characters (shorter ones would match unrelated text).
    """
    _check_target(target)
    if not isinstance(text, str):
        raise InvalidArgument(f"the text to match must be a string, got {type(text).__name__}")
    if target in text:
        return True
    norm = normalise(target)
    return len(norm) >= MIN_NORMALISED and norm in normalise(text)


def _case_regex(text: str) -> bytes | None:
    """A bytes regex matching ``text`` in any letter case (UTF-8), or None when it has no cased letter.

    ``re.IGNORECASE`` on bytes folds ASCII only, so each character lists its
    case variants (``ß`` -> ``ß|ss|SS``) as an alternation of encoded strings.
    """
    parts, cased = [], False
    for c in text:
        variants = sorted({c, c.lower(), c.upper(), c.casefold()}, key=lambda v: (-len(v), v))
        if len(variants) == 1:
            parts.append(re.escape(c.encode("utf-8")))
        else:
            cased = True
            parts.append(b"(?:" + b"|".join(re.escape(v.encode("utf-8")) for v in variants) + b")")
    return b"".join(parts) if cased else None


def _separated(bare: str) -> bytes:
    """A bytes regex for ``bare`` in any case with up to ``MAX_SEPARATORS`` separators between characters."""
    gap = b"[" + re.escape("".join(sorted(SEPARATORS)).encode("ascii")) + b"]{0,%d}" % MAX_SEPARATORS
    return gap.join(_case_regex(c) or re.escape(c.encode("utf-8")) for c in bare)


def _separated_lower(bare: str) -> bytes:
    """:func:`_separated` of an ASCII-lowercase ``bare`` for ASCII-lowercased bytes: literal characters."""
    gap = b"[" + re.escape("".join(sorted(SEPARATORS)).encode("ascii")) + b"]{0,%d}" % MAX_SEPARATORS
    return gap.join(re.escape(c.encode("ascii")) for c in bare)


def target_forms(target: str) -> tuple[Form, ...]:
    """Every form of ``target`` a byte scan looks for, most literal first, without duplicates.

    ``utf-8`` (raw), ``json-escaped`` / ``json-unicode`` (``json.dumps`` with
    and without ``ensure_ascii``, when they differ from raw), ``utf-16-le``,
    ``utf-16-be``, ``casefold`` (any letter case), ``no-separators`` (the target
    without separators, in any case, with up to 3 separators between any two
    characters: "44172231", "4417 2231", "4417-2231"; only when >= 6
    characters are left, as :func:`holds_target` would) and ``pglz`` (for
    targets of >= 8 UTF-8 bytes). Raises InvalidArgument for a non-string or
    blank target.
    """
    _check_target(target)
    raw = target.encode("utf-8")
    candidates: list[Form] = [Form("utf-8", raw)]
    for name, ascii_only in (("json-escaped", True), ("json-unicode", False)):
        escaped = json.dumps(target, ensure_ascii=ascii_only)[1:-1].encode("utf-8")
        if escaped != raw:
            candidates.append(Form(name, escaped))
    candidates += [Form("utf-16-le", target.encode("utf-16-le")), Form("utf-16-be", target.encode("utf-16-be"))]
    folded = _case_regex(target)
    # an ASCII target's letters have ASCII case variants only: on ASCII-lowercased bytes the
    # case-blind forms are the lowercased target (the same matches, far faster)
    low = target.lower() if target.isascii() and folded is not None else None
    if folded is not None:
        candidates.append(Form("casefold", re.compile(folded), low.encode("ascii") if low else None))
    bare = "".join(c for c in target if c not in SEPARATORS)
    if len(bare) >= MIN_NORMALISED:
        candidates.append(Form("no-separators", re.compile(_separated(bare)),
                               re.compile(_separated_lower(bare.lower())) if low else None))
    if len(raw) >= MIN_PGLZ:
        candidates.append(Form("pglz", re.compile(_PGLZ_GAP.join(re.escape(bytes([b])) for b in raw))))
    seen: set[tuple[bytes, int]] = set()
    forms = []
    for form in candidates:
        if form.key() not in seen:
            seen.add(form.key())
            forms.append(form)
    return tuple(forms)


class FormCounter:
    """Counts copies of a set of forms in a byte stream fed in chunks.

    The counting rule (the same for one blob and for any chunking of it): each
    form is searched for non-overlapping matches left to right; all matches are
    then taken in order of start offset (ties: the earlier form in ``forms``)
    and a match is one copy unless it overlaps a copy already counted. So a
    region that the raw form, the casefold form and the pglz form all match is
    one copy, credited to the raw form, and ``sum(counts.values())`` is the
    number of distinct copies.
    """

    def __init__(self, forms: Iterable[Form]):
        self.forms = tuple(forms)
        if not all(isinstance(f, Form) for f in self.forms):
            raise InvalidArgument("forms must be Form objects (see target_forms)")
        self.counts = {f.name: 0 for f in self.forms}
        # A match starting before (buffer end - overlap) is whole in the buffer, so it is settled.
        self.overlap = max((f.max_len for f in self.forms), default=0)
        self._buf = b""
        self._base = 0  # absolute offset of self._buf[0]
        self._resume = [0] * len(self.forms)  # absolute offset where each form's search goes on
        self._claimed_end = 0  # end of the last counted copy: copies are counted in start order

    def feed(self, chunk: bytes) -> None:
        self._buf += chunk
        self._settle(final=False)

    def close(self) -> dict[str, int]:
        """Count what is left and return the copies per form name."""
        self._settle(final=True)
        return dict(self.counts)

    def _settle(self, final: bool) -> None:
        end = self._base + len(self._buf)
        limit = end if final else end - self.overlap
        if limit <= self._base:
            return
        found = []
        lowered = self._buf.lower() if any(f.folded is not None for f in self.forms) else None
        for i, form in enumerate(self.forms):
            folded = form.folded is not None
            buf = lowered if folded else self._buf
            literal = form.folded if folded else form.pattern
            for m_start, m_end in _matches(literal if isinstance(literal, bytes) else
                                           (form.folded_regex if folded else form.regex),
                                           buf, max(0, self._resume[i] - self._base)):
                start = self._base + m_start
                if start >= limit:
                    break  # may run past the buffer: the next call finds it again
                found.append((start, i, self._base + m_end))
                self._resume[i] = self._base + m_end
            self._resume[i] = max(self._resume[i], limit)
        for start, i, stop in sorted(found):
            if start >= self._claimed_end:
                self.counts[self.forms[i].name] += 1
                self._claimed_end = stop
        self._buf = self._buf[limit - self._base :]
        self._base = limit


def _matches(pattern: bytes | re.Pattern[bytes], buf: bytes, pos: int):
    """(start, end) of the non-overlapping matches of ``pattern`` in ``buf`` from ``pos``, left to
    right: a literal by ``bytes.find`` (several times faster than ``re`` on the same literal,
    measured in benchmarks/bench_audit.py), a regex by ``finditer``."""
    if isinstance(pattern, bytes):
        n = len(pattern)
        i = buf.find(pattern, pos)
        while i >= 0:
            yield i, i + n
            i = buf.find(pattern, i + n)
    else:
        for m in pattern.finditer(buf, pos):
            yield m.start(), m.end()


def count_forms(data: bytes, forms: Iterable[Form]) -> dict[str, int]:
    """Copies of each form in ``data`` under the :class:`FormCounter` rule (one copy is credited once)."""
    counter = FormCounter(forms)
    counter.feed(bytes(data))
    return counter.close()


def total(data: bytes, forms: Iterable[Form]) -> int:
    """Distinct copies of the target in ``data``: overlapping matches of several forms count once."""
    return sum(count_forms(data, forms).values())


def remove_forms(text: str, target: str) -> str:
    """``text`` without ``target`` in its raw and JSON-escaped forms (a stored text that
    erasure cleans, e.g. a journal row holding the target as JSON)."""
    _check_target(target)
    for form in dict.fromkeys([target, json.dumps(target)[1:-1], json.dumps(target, ensure_ascii=False)[1:-1]]):
        text = text.replace(form, "")
    return text
