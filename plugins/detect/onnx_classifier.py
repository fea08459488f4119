"""Bring your own classifier, exported: a local ONNX sequence classifier run with onnxruntime.

:class:`OnnxClassifierDetector` is :class:`~.classifier.ClassifierDetector`
for a model exported to ONNX (``torch.onnx.export``, optimum, ...): a folder
holding ``model.onnx`` (or ``onnx/model.onnx``, as optimum exports), the
tokenizer files (``tokenizer.json`` ...) and ``config.json`` with the
labels (``id2label``). It windows, picks the injection label and reports
findings as the transformers detector does (the functions of
:mod:`.classifier`); the graph runs on the CPU, fed only the inputs it
declares. Nothing is downloaded. Needs ``pip install 'unsee[onnx]'``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .base import Finding
from .classifier import (check_threshold, label_index, load_tokenizer, token_windows, window_findings,
                         window_scores, window_sizes)
from .errors import InvalidDetector

#: where a model folder may hold its graph, in the order looked at
ONNX_FILES = ("model.onnx", "onnx/model.onnx")
INSTALL = "pip install 'unsee[onnx]'"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_DTYPES = {"tensor(int64)": "int64", "tensor(int32)": "int32"}


def onnx_model_file(path: str | Path) -> Path | None:
    """The ONNX graph of the model folder ``path`` (``model.onnx``, else ``onnx/model.onnx``), or None."""
    path = Path(path)
    return next((path / f for f in ONNX_FILES if (path / f).is_file()), None)


def _config(folders: list[Path]) -> dict[str, Any]:
    for folder in folders:
        if (folder / "config.json").is_file():
            try:
                return json.loads((folder / "config.json").read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise InvalidDetector(f"{folder / 'config.json'} cannot be read: {exc}") from exc
    return {}


class OnnxClassifierDetector:
    """A local ONNX sequence classifier as a detector (see the module doc)."""

    def __init__(self, path: str | Path, *, label: str | int | None = None, threshold: float = 0.5,
                 max_length: int = 512, stride: int = 64, name: str | None = None):
        try:
            import onnxruntime
        except ImportError as exc:
            raise InvalidDetector(f"OnnxClassifierDetector needs onnxruntime ({INSTALL})") from exc
        path = Path(path)
        what = f"ONNX classifier {str(path)!r}"
        if not path.is_dir():
            raise InvalidDetector(f"{what}: not a model directory")
        graph = onnx_model_file(path)
        if graph is None:
            raise InvalidDetector(f"{what}: no {' or '.join(ONNX_FILES)} in it")
        check_threshold(threshold)
        # the tokenizer and config.json sit beside the graph or in the folder above (optimum's onnx/)
        folders = [path] if graph.parent == path else [path, graph.parent]
        tok_home = next((f for f in folders if any(f.glob("tokenizer*"))), path)
        self.tokenizer = load_tokenizer(tok_home, what, INSTALL)
        try:
            self.session = onnxruntime.InferenceSession(str(graph), providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's own errors (bad protobuf, bad graph)
            raise InvalidDetector(f"{what}: {graph} cannot be loaded: {exc}") from exc
        self.inputs = {i.name: _DTYPES.get(i.type, "int64") for i in self.session.get_inputs()}
        unknown = sorted(set(self.inputs) - set(_INPUTS))
        if "input_ids" not in self.inputs or unknown:
            raise InvalidDetector(f"{what}: the graph's inputs {sorted(self.inputs)} are not "
                                  f"{', '.join(_INPUTS)} (input_ids needed)")
        outputs = self.session.get_outputs()
        self.output = next((o.name for o in outputs if o.name == "logits"), outputs[0].name)
        config = _config(folders)
        width = next((o.shape[-1] for o in outputs if o.name == self.output and o.shape), None)
        n = width if isinstance(width, int) else config.get("num_labels") or len(config.get("id2label") or {})
        if not n:
            raise InvalidDetector(f"{what}: how many labels? neither config.json nor the graph says")
        self.index = label_index(config.get("id2label"), n, label)
        self.threshold = threshold
        self.max_length, self.stride = window_sizes(self.tokenizer, max_length, stride)
        self.name = name or f"onnx:{path.name}"

    def scores(self, text: str) -> list[tuple[int, int, float]]:
        """Each window of ``text``: (first character, end character, injection probability)."""
        import numpy as np

        enc, spans = token_windows(self.tokenizer, text, self.max_length, self.stride, "np")
        ids = enc["input_ids"]
        feed = {k: np.asarray(enc[k] if k in enc else (np.ones_like(ids) if k == "attention_mask"
                                                        else np.zeros_like(ids)), dtype=dtype)
                for k, dtype in self.inputs.items()}
        logits = np.asarray(self.session.run([self.output], feed)[0], dtype=np.float64)
        e = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return window_scores(spans, (e[:, self.index] / e.sum(axis=-1)).tolist())

    def detect(self, text: str, artifact_id: str | None = None) -> list[Finding]:
        if not text.strip():
            return []
        return window_findings(text, self.scores(text), self.threshold, self.name, artifact_id)

    def __repr__(self) -> str:
        return f"OnnxClassifierDetector(name={self.name!r})"


__all__ = ["ONNX_FILES", "OnnxClassifierDetector", "onnx_model_file"]
