"""Bring your own classifier: a local sequence-classification model, and ensembles of detectors.

:class:`ClassifierDetector` runs a transformers sequence classifier from a
local directory (``AutoModelForSequenceClassification`` + its tokenizer,
``local_files_only``: nothing is downloaded at run time) over an observation
in overlapping token windows; a window whose injection probability reaches
``threshold`` is a finding over that window's characters. Which output is
"injection" is read from the model's ``id2label`` (a label naming injection,
jailbreak, malicious, unsafe or attack), else given as ``label``.

:class:`EnsembleDetector` combines detectors: ``any`` reports what any of them
finds (the union, merged); ``weighted`` scores every stretch of text by the
weighted mean of the detectors' scores there and reports the stretches that
reach ``threshold``. Both pass the agent's tools to members that use them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from .base import Detector, Finding, ToolSpec, bind_tools, finding, merge_findings
from .errors import InvalidDetector

_INJECTION_LABEL = re.compile(r"inject|jailbreak|malicious|unsafe|attack|harmful", re.IGNORECASE)


class ClassifierDetector:
    """A local sequence classifier as a detector (see the module doc)."""

    def __init__(self, path: str | Path, *, label: str | int | None = None, threshold: float = 0.5,
                 max_length: int = 512, stride: int = 64, name: str | None = None):
        try:
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
        except ImportError as exc:  # the ``local`` extra brings transformers
            raise InvalidDetector("ClassifierDetector needs transformers (pip install -e '.[local]')") from exc
        path = Path(path)
        if not path.is_dir():
            raise InvalidDetector(f"classifier {str(path)!r}: not a model directory")
        if not 0.0 < threshold <= 1.0:
            raise InvalidDetector(f"threshold must be in (0, 1], got {threshold!r}")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
            self.model = AutoModelForSequenceClassification.from_pretrained(path, local_files_only=True).eval()
        except (OSError, ValueError) as exc:
            raise InvalidDetector(f"classifier {str(path)!r} cannot be loaded: {exc}") from exc
        if self.tokenizer.pad_token is None:  # (windows of one text are padded to one length)
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token
        if not getattr(self.tokenizer, "is_fast", False):
            raise InvalidDetector(f"classifier {str(path)!r}: a fast tokenizer is needed (character offsets)")
        self.index = self._label_index(label)
        self.threshold = threshold
        self.max_length = max(16, min(max_length, getattr(self.tokenizer, "model_max_length", max_length)))
        self.stride = max(0, min(stride, self.max_length // 2))
        self.name = name or f"classifier:{path.name}"

    def _label_index(self, label: str | int | None) -> int:
        labels = {int(k): str(v) for k, v in (self.model.config.id2label or {}).items()}
        n = int(self.model.config.num_labels)
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

    def detect(self, text: str, artifact_id: str | None = None) -> list[Finding]:
        if not text.strip():
            return []
        import torch

        enc = self.tokenizer(text, truncation=True, max_length=self.max_length, stride=self.stride,
                             return_overflowing_tokens=True, return_offsets_mapping=True, padding=True,
                             return_tensors="pt")
        offsets = enc.pop("offset_mapping")
        enc.pop("overflow_to_sample_mapping", None)
        with torch.no_grad():
            probs = torch.softmax(self.model(**enc).logits.float(), dim=-1)[:, self.index]
        out = []
        for w, p in enumerate(probs.tolist()):
            if p < self.threshold:
                continue
            spans = [(int(a), int(b)) for a, b in offsets[w].tolist() if b > a]
            if spans:
                out.append(finding(text, spans[0][0], spans[-1][1], min(1.0, p),
                                   f"classifier {self.name}: injection p={p:.2f}", self.name, artifact_id))
        return merge_findings(out, text)

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
        if not 0.0 < threshold <= 1.0:
            raise InvalidDetector(f"threshold must be in (0, 1], got {threshold!r}")
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


__all__ = ["ClassifierDetector", "EnsembleDetector", "MODES"]
