"""Detect plugin: prompt-injection detectors over observation text (pure core).

- :mod:`.base` — the :class:`Detector` protocol, :class:`Finding` records,
  :func:`merge_findings`; :class:`ToolSpec` and :class:`ToolAware` (detectors
  that use the agent's own tools, bound with :func:`bind_tools`).
- :mod:`.rules` — :class:`RuleDetector`, the template rules.
- :mod:`.signals` — :class:`SignalDetector`, the default detector: the rules
  plus signals that do not depend on one template (the agent's own tools among
  them).
- :mod:`.hooks` — :class:`CallableDetector` for user classifiers,
  :func:`run_detectors`.
- :mod:`.llm_judge` — :class:`LLMJudgeDetector`, a judge over any
  OpenAI-compatible endpoint.
- :mod:`.classifier` — :class:`ClassifierDetector` (a local transformers
  sequence classifier by path) and :class:`EnsembleDetector` (any / weighted).
- :mod:`.onnx_classifier` — :class:`OnnxClassifierDetector` (the same for an
  exported ONNX model, run with onnxruntime; :func:`onnx_model_file` finds a
  folder's graph).
- errors in :mod:`.errors`.
"""

from __future__ import annotations

from .base import Detector, Finding, ToolAware, ToolSpec, bind_tools, finding, merge_findings
from .classifier import ClassifierDetector, EnsembleDetector
from .errors import DetectError, DetectorFailed, InvalidDetector, InvalidFinding
from .hooks import CallableDetector, as_detector, run_detectors
from .llm_judge import LLMJudgeDetector
from .onnx_classifier import OnnxClassifierDetector, onnx_model_file
from .rules import DEFAULT_RULES, Rule, RuleDetector
from .signals import SignalDetector

__all__ = [
    "DEFAULT_RULES", "CallableDetector", "ClassifierDetector", "DetectError", "Detector", "DetectorFailed",
    "EnsembleDetector", "Finding", "InvalidDetector", "InvalidFinding", "LLMJudgeDetector",
    "OnnxClassifierDetector", "Rule", "RuleDetector", "SignalDetector", "ToolAware", "ToolSpec", "as_detector",
    "bind_tools", "finding", "merge_findings", "onnx_model_file", "run_detectors",
]
