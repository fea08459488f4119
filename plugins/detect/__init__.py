"""Detect plugin: prompt-injection detectors over observation text (pure core).

- :mod:`.base` — the :class:`Detector` protocol, :class:`Finding` records,
  :func:`merge_findings`.
- :mod:`.rules` — :class:`RuleDetector`, the built-in rule-based detector.
- :mod:`.hooks` — :class:`CallableDetector` for user classifiers,
  :func:`run_detectors`.
- errors in :mod:`.errors`.
"""

from __future__ import annotations

from .base import Detector, Finding, finding, merge_findings
from .errors import DetectError, DetectorFailed, InvalidDetector, InvalidFinding
from .hooks import CallableDetector, as_detector, run_detectors
from .rules import DEFAULT_RULES, Rule, RuleDetector

__all__ = [
    "DEFAULT_RULES", "CallableDetector", "DetectError", "Detector", "DetectorFailed", "Finding",
    "InvalidDetector", "InvalidFinding", "Rule", "RuleDetector", "as_detector", "finding",
    "merge_findings", "run_detectors",
]
