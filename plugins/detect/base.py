"""The detector interface: text in, findings (span, score, reason) out.

A detector is anything with a ``name`` and a ``detect(text, artifact_id=None)``
method returning :class:`Finding` records; it never mutates its input. Spans
are character offsets into the text given (end exclusive) and ``text`` is that
slice, so a caller can redact or revoke exactly what was flagged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .errors import InvalidFinding


@dataclass(frozen=True, slots=True)
class Finding:
    """One suspicious span of an observation."""

    start: int
    end: int
    text: str
    score: float
    reason: str
    detector: str
    artifact_id: str | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.start, int) and isinstance(self.end, int) and 0 <= self.start <= self.end):
            raise InvalidFinding(f"bad span ({self.start!r}, {self.end!r}) from detector {self.detector!r}")
        if not isinstance(self.score, (int, float)) or not 0.0 <= float(self.score) <= 1.0:
            raise InvalidFinding(f"score {self.score!r} from detector {self.detector!r} is outside 0..1")
        if len(self.text) != self.end - self.start:
            raise InvalidFinding(f"text of a finding from {self.detector!r} does not match its span")

    @property
    def span(self) -> tuple[int, int]:
        return (self.start, self.end)


@runtime_checkable
class Detector(Protocol):
    """An injection detector."""

    name: str

    def detect(self, text: str, artifact_id: str | None = None) -> list[Finding]: ...


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool of the agent whose observations are screened: what only unsee knows of it.

    ``effect`` is the tool's declared effect (``read`` | ``write`` | ``external``; None:
    undeclared); ``args`` its argument names."""

    name: str
    description: str = ""
    args: tuple[str, ...] = ()
    effect: str | None = None


@runtime_checkable
class ToolAware(Protocol):
    """A detector that also uses the agent's tools: ``with_tools`` returns a detector bound to
    them (the receiver is not changed)."""

    def with_tools(self, tools: Sequence[ToolSpec]) -> Detector: ...


def bind_tools(detector: Detector, tools: Sequence[ToolSpec]) -> Detector:
    """``detector`` bound to the agent's ``tools`` when it is :class:`ToolAware`, else as is."""
    if tools and isinstance(detector, ToolAware) and callable(getattr(detector, "with_tools", None)):
        return detector.with_tools(tuple(tools))
    return detector


def finding(text: str, start: int, end: int, score: float, reason: str, detector: str,
            artifact_id: str | None = None) -> Finding:
    """A :class:`Finding` for ``text[start:end]`` (span clamped to the text)."""
    start = max(0, min(start, len(text)))
    end = max(start, min(end, len(text)))
    return Finding(start, end, text[start:end], float(score), reason, detector, artifact_id)


def _join(parts: Iterable[str], sep: str) -> str:
    return sep.join(dict.fromkeys(p for part in parts for p in part.split(sep) if p))


def merge_findings(findings: Iterable[Finding], text: str, *, touching: bool = False) -> list[Finding]:
    """Merge overlapping findings into one per region, ordered by position.

    A merged finding spans the union, keeps the highest score, and lists every
    distinct reason (``"; "``) and detector (``"+"``). ``touching=True`` also
    merges findings that only meet (one ends where the next starts).
    """
    ordered = sorted(findings, key=lambda f: (f.start, -f.end))
    groups: list[list[Finding]] = []
    end = -1
    for f in ordered:
        if groups and (f.start < end or (touching and f.start == end) or f.start == f.end == end):
            groups[-1].append(f)
            end = max(end, f.end)
        else:
            groups.append([f])
            end = f.end
    out = []
    for g in groups:
        if len(g) == 1:
            out.append(g[0])
            continue
        s, e = min(f.start for f in g), max(f.end for f in g)
        ids = {f.artifact_id for f in g}
        out.append(Finding(
            s, e, text[s:e], max(f.score for f in g),
            _join((f.reason for f in g), "; "), _join((f.detector for f in g), "+"),
            ids.pop() if len(ids) == 1 else None,
        ))
    return out
