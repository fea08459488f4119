"""Detect plugin: prompt-injection detectors over observation text (pure core).

- :mod:`.base` — the :class:`Detector` protocol, :class:`Finding` records,
  :func:`merge_findings`; :class:`ToolSpec` and :class:`ToolAware` (detectors
  that use the agent's own tools, bound with :func:`bind_tools`).
- :mod:`.rules` — :class:`RuleDetector`, the template rules.
- :mod:`.signals` — :class:`SignalDetector`, the default detector: the rules
  plus signals that do not depend on one template (the agent's own tools among
  them); its parts are :mod:`.lexicon` (the words and phrases, data),
  :mod:`.clauses` (where a clause, span or quotation ends) and :mod:`.scorer`
  (the weights and their noisy-OR).
- :mod:`.normalize` — :func:`reader_view`: the text as its reader sees it (invisible
  characters gone, escapes decoded, NFKC) with a map back to the original.
- :mod:`.learned` — :class:`LearnedDetector`, a logistic regression over hashed n-grams and
  the signals, its weights shipped beside it (``python -m unsee.eval.train_detector``).
- :mod:`.hooks` — :class:`CallableDetector` for user classifiers,
  :func:`run_detectors`.
- :mod:`.llm_judge` — :class:`LLMJudgeDetector`, a judge over any
  OpenAI-compatible endpoint.
- :mod:`.classifier` — :class:`ClassifierDetector` (a local transformers
  sequence classifier by path) and :class:`EnsembleDetector` (any / weighted).
- :mod:`.onnx_classifier` — :class:`OnnxClassifierDetector` (the same for an
  exported ONNX model, run with onnxruntime; :func:`onnx_model_file` finds a
  folder's graph).
- :mod:`.revocation` — :class:`DetectionService`: findings become revocation
  events (``u.detect``), and an endorser for the IFC plugin.
- errors in :mod:`.errors`.

Public names are imported lazily (on first use), so importing the face loads
no detector; other plugins and the facade use only these names.
"""

from __future__ import annotations

from unsee.plugins import lazy_exports

_EXPORTS = {
    "Detector": ".base",
    "Finding": ".base",
    "ToolAware": ".base",
    "ToolSpec": ".base",
    "bind_tools": ".base",
    "finding": ".base",
    "merge_findings": ".base",
    "ClassifierDetector": ".classifier",
    "EnsembleDetector": ".classifier",
    "DetectError": ".errors",
    "DetectorFailed": ".errors",
    "InvalidDetector": ".errors",
    "InvalidFinding": ".errors",
    "CallableDetector": ".hooks",
    "as_detector": ".hooks",
    "run_detectors": ".hooks",
    "LLMJudgeDetector": ".llm_judge",
    "OnnxClassifierDetector": ".onnx_classifier",
    "onnx_model_file": ".onnx_classifier",
    "DEFAULT_RULES": ".rules",
    "Rule": ".rules",
    "RuleDetector": ".rules",
    "SignalDetector": ".signals",
    "LEARNED_SHAPE": ".learned",
    "LEARNED_WEIGHTS": ".learned",
    "LearnedDetector": ".learned",
    "LearnedWeights": ".learned",
    "load_learned_weights": ".learned",
    "save_learned_weights": ".learned",
    "text_features": ".learned",
    "unit_scores": ".learned",
    "reader_view": ".normalize",
    "DetectionService": ".revocation",
    "DetectionService": ".revocation",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
