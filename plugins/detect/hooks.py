"""Hooks for user classifiers, and running several detectors as one.

:class:`CallableDetector` turns any function into a :class:`~.base.Detector`.
The function gets the text (and the artifact id, if it accepts a second
argument) and may return:

- ``None``, ``False`` or ``0``: nothing found;
- a number or ``True``: a score for the whole text (``True`` is 1.0);
- a :class:`~.base.Finding`, or an iterable of findings, ``(start, end, score)``
  / ``(start, end, score, reason)`` tuples or mappings with those keys.

:func:`run_detectors` runs detectors on one text and merges overlapping
findings. Detectors are interceptors' inputs, so by default a failing detector
fails closed (:class:`~.errors.DetectorFailed`); ``fail_open=True`` logs and
skips it instead.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .base import Detector, Finding, finding, merge_findings
from .errors import DetectorFailed, InvalidDetector, InvalidFinding

log = logging.getLogger(__name__)


def _takes_two(fn: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2


class CallableDetector:
    """A user classifier as a detector.

    ``threshold``: a whole-text score below it yields no finding (default:
    any positive score is reported).
    """

    def __init__(self, fn: Callable[..., Any], name: str | None = None, *, reason: str | None = None,
                 threshold: float = 0.0):
        if not callable(fn):
            raise InvalidDetector(f"not callable: {fn!r}")
        self.fn = fn
        self.name = name or getattr(fn, "__name__", None) or type(fn).__name__
        self.reason = reason or f"flagged by classifier {self.name!r}"
        self.threshold = threshold
        self._two = _takes_two(fn)

    def detect(self, text: str, artifact_id: str | None = None) -> list[Finding]:
        result = self.fn(text, artifact_id) if self._two else self.fn(text)
        return self._convert(result, text, artifact_id)

    def _whole(self, score: float, text: str, artifact_id: str | None) -> list[Finding]:
        if score <= 0 or score < self.threshold or not text:
            return []
        return [finding(text, 0, len(text), min(1.0, float(score)), self.reason, self.name, artifact_id)]

    def _one(self, item: Any, text: str, artifact_id: str | None) -> Finding:
        if isinstance(item, Finding):
            if item.detector == self.name and item.artifact_id == artifact_id:
                return item
            return Finding(item.start, item.end, item.text, item.score, item.reason, self.name,
                           artifact_id if item.artifact_id is None else item.artifact_id)
        if isinstance(item, Mapping):
            start, end, score = item["start"], item["end"], item.get("score", 1.0)
            reason = item.get("reason") or self.reason
        elif isinstance(item, (tuple, list)) and len(item) in (3, 4):
            start, end, score = item[:3]
            reason = item[3] if len(item) == 4 else self.reason
        else:
            raise InvalidFinding(f"classifier {self.name!r} returned {item!r}; expected a Finding, "
                                 "(start, end, score[, reason]) or a mapping")
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= len(text)):
            raise InvalidFinding(f"classifier {self.name!r} returned span ({start!r}, {end!r}) "
                                 f"outside a text of {len(text)} chars")
        return Finding(start, end, text[start:end], float(score), str(reason), self.name, artifact_id)

    def _convert(self, result: Any, text: str, artifact_id: str | None) -> list[Finding]:
        if result is None or result is False:
            return []
        if result is True:
            return self._whole(1.0, text, artifact_id)
        if isinstance(result, (int, float)):
            if not 0.0 <= float(result) <= 1.0:
                raise InvalidFinding(f"classifier {self.name!r} returned score {result!r} outside 0..1")
            return self._whole(float(result), text, artifact_id)
        if isinstance(result, Finding) or isinstance(result, Mapping):
            return [self._one(result, text, artifact_id)]
        if isinstance(result, tuple) and len(result) in (3, 4) and isinstance(result[0], int):
            return [self._one(result, text, artifact_id)]
        if isinstance(result, Iterable) and not isinstance(result, (str, bytes)):
            return [self._one(item, text, artifact_id) for item in result]
        raise InvalidFinding(f"classifier {self.name!r} returned {type(result).__name__}; "
                             "expected None, a score, or findings")

    def __repr__(self) -> str:
        return f"CallableDetector(name={self.name!r})"


def as_detector(obj: Any, name: str | None = None) -> Detector:
    """A detector as is; a plain callable wrapped in :class:`CallableDetector`."""
    if isinstance(obj, Detector) and callable(getattr(obj, "detect", None)):
        return obj
    if callable(obj):
        return CallableDetector(obj, name)
    raise InvalidDetector(f"{obj!r} is neither a detector (name + detect) nor callable")


def run_detectors(
    detectors: Iterable[Any],
    text: str,
    artifact_id: str | None = None,
    *,
    min_score: float = 0.0,
    fail_open: bool = False,
) -> list[Finding]:
    """Run every detector on ``text`` and merge overlapping findings.

    Plain callables are wrapped with :func:`as_detector`. Findings below
    ``min_score`` are dropped before merging. A detector that raises, or
    returns something other than findings, raises :class:`DetectorFailed`
    (or, with ``fail_open=True``, is logged and skipped).
    """
    found: list[Finding] = []
    for d in detectors:
        det = as_detector(d)
        name = getattr(det, "name", repr(det))
        try:
            result = det.detect(text, artifact_id)
            items = list(result or ())
            bad = [f for f in items if not isinstance(f, Finding)]
            if bad:
                raise InvalidFinding(f"returned {type(bad[0]).__name__}, not Finding")
            if any(f.end > len(text) for f in items):
                raise InvalidFinding("returned a span past the end of the text")
        except Exception as exc:
            if fail_open:
                log.warning("detector %r failed; skipped (fail_open): %s", name, exc)
                continue
            raise DetectorFailed(name, str(exc) or type(exc).__name__) from exc
        found += [f for f in items if f.score >= min_score]
    return merge_findings(found, text)
