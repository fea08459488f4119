"""Bring your own classifier, exported: an ONNX sequence classifier run with onnxruntime. A tiny
random-init BERT is built and exported here (nothing downloaded); the ONNX detector must score,
window and report exactly as the transformers detector does on the same weights."""

import shutil
import sys

import pytest
from tests.support.tiny_classifiers import export_onnx, tiny_classifier
from typer.testing import CliRunner

from unsee import Unsee
from unsee.plugins.detect import ClassifierDetector, InvalidDetector, OnnxClassifierDetector
from unsee.eval import make_eval_app
from unsee.eval.detector_eval import load_detector

LONG = " ".join(f"w{(7 * i) % 50}" for i in range(90)) + " , unknown words. w3 w4!"


RANDOM = {"hidden": 32, "weight_std": 3.0, "init_range": 0.2, "seed": 1}  # scores vary by window


@pytest.fixture(scope="module")
def random_model(tmp_path_factory):
    """A random-init classifier, transformers folder only."""
    return tiny_classifier(tmp_path_factory.mktemp("rand") / "m", **RANDOM)


@pytest.fixture(scope="module", params=[(True, True), (False, True), (True, False)],
                ids=["graph+tokenizer_token_types", "tokenizer_token_types_only", "graph_token_types_only"])
def exported(request, tmp_path_factory):
    """The same weights with ``model.onnx`` beside them: (folder, graph takes token_type_ids,
    tokenizer makes them). What the graph does not declare is not fed; what it declares and the
    tokenizer does not make is zeros."""
    graph_types, tokenizer_types = request.param
    d = tiny_classifier(tmp_path_factory.mktemp("onnx") / "m", **RANDOM, token_types=tokenizer_types)
    export_onnx(d, token_type_ids=graph_types)
    return d, graph_types, tokenizer_types


def test_the_onnx_detector_scores_windows_as_the_transformers_one_does(random_model, exported):
    exported, graph_types, tokenizer_types = exported
    ref = ClassifierDetector(random_model, max_length=16, stride=4)
    onnx = OnnxClassifierDetector(exported, max_length=16, stride=4)
    assert onnx.index == ref.index == 1 and onnx.name == "onnx:m"
    assert ("token_type_ids" in onnx.tokenizer("w1")) == tokenizer_types
    assert set(onnx.inputs) == {"input_ids", "attention_mask"} | ({"token_type_ids"} if graph_types else set())
    for text in ["w1 w2 w3", "w9", LONG]:
        want, got = ref.scores(text), onnx.scores(text)
        assert [w[:2] for w in got] == [w[:2] for w in want]  # the same windows
        assert max(abs(p - q) for (*_, p), (*_, q) in zip(want, got)) < 1e-4
    probs = sorted(p for *_, p in ref.scores(LONG))
    assert len(probs) > 5 and probs[-1] - probs[0] > 0.05  # windows that differ
    # a threshold between two windows' scores: the same findings, same spans
    gaps = max(zip(probs, probs[1:]), key=lambda ab: ab[1] - ab[0])
    t = sum(gaps) / 2
    a = ClassifierDetector(random_model, max_length=16, stride=4, threshold=t).detect(LONG, "art-1")
    b = OnnxClassifierDetector(exported, max_length=16, stride=4, threshold=t).detect(LONG, "art-1")
    assert a and [(f.start, f.end, f.text) for f in a] == [(f.start, f.end, f.text) for f in b]
    assert all(abs(f.score - g.score) < 1e-4 and g.artifact_id == "art-1" for f, g in zip(a, b))


def test_long_texts_are_windowed_and_merged(tmp_path):
    d = tiny_classifier(tmp_path / "m", [-4.0, 4.0])
    export_onnx(d)
    det = OnnxClassifierDetector(d, max_length=16, stride=4)
    windows = det.scores(LONG)
    assert len(windows) > 5 and windows[0][0] == 0 and windows[-1][1] == len(LONG)
    assert all(a < prev_end for (_, prev_end, _), (a, _, _) in zip(windows, windows[1:]))  # they overlap
    (f,) = det.detect(LONG)
    assert (f.start, f.end) == (0, len(LONG)) and f.score > 0.99 and "injection p=" in f.reason
    assert det.detect("   ") == []


def test_labels_are_found_by_name_and_bad_settings_are_typed_errors(tmp_path):
    d = tiny_classifier(tmp_path / "m", [4.0, -4.0], labels=("jailbreak", "benign"))
    export_onnx(d)
    det = OnnxClassifierDetector(d)
    assert det.index == 0 and det.detect("w1 w2 w3")
    assert OnnxClassifierDetector(d, label="benign").detect("w1 w2 w3") == []
    for kw in [{"label": "MAYBE"}, {"label": 7}, {"threshold": 0.0}]:
        with pytest.raises(InvalidDetector):
            OnnxClassifierDetector(d, **kw)


def test_load_detector_picks_the_onnx_adapter_when_the_folder_holds_a_graph(tmp_path):
    plain = tiny_classifier(tmp_path / "plain", [0.0, 0.0])
    assert type(load_detector(f"classifier:{plain}")) is ClassifierDetector
    with_graph = tiny_classifier(tmp_path / "g", [0.0, 0.0])
    export_onnx(with_graph)
    assert type(load_detector(f"classifier:{with_graph}")) is OnnxClassifierDetector
    assert type(load_detector(f"onnx:{with_graph}")) is OnnxClassifierDetector
    optimum = tiny_classifier(tmp_path / "o", [0.0, 0.0])  # optimum's layout: onnx/model.onnx
    export_onnx(optimum, graph="onnx/model.onnx")
    assert type(load_detector(f"classifier:{optimum}")) is OnnxClassifierDetector
    with pytest.raises(ValueError, match="no model.onnx or onnx/model.onnx"):
        load_detector(f"onnx:{plain}")


def test_bad_folders_are_typed_errors_naming_the_path(tmp_path, monkeypatch):
    with pytest.raises(InvalidDetector, match="not a model directory"):
        OnnxClassifierDetector(tmp_path / "nowhere")
    plain = tiny_classifier(tmp_path / "plain", [0.0, 0.0])
    with pytest.raises(InvalidDetector, match=f"{plain}.*no model.onnx"):
        OnnxClassifierDetector(plain)
    (plain / "model.onnx").write_bytes(b"not a graph")
    with pytest.raises(InvalidDetector, match="model.onnx cannot be loaded"):
        OnnxClassifierDetector(plain)
    graph_only = tmp_path / "graph-only"
    graph_only.mkdir()
    shutil.copy(export_onnx(tiny_classifier(tmp_path / "g", [0.0, 0.0])), graph_only)
    with pytest.raises(InvalidDetector, match="graph-only"):  # no tokenizer
        OnnxClassifierDetector(graph_only)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if the extra were not installed
    with pytest.raises(InvalidDetector, match=r"onnxruntime \(pip install 'unsee\[onnx\]'\)"):
        OnnxClassifierDetector(tmp_path / "g")


def test_eval_detectors_runs_an_onnx_classifier(random_model, tmp_path):
    exported = shutil.copytree(random_model, tmp_path / "m")
    export_onnx(exported)
    res = CliRunner().invoke(make_eval_app(Unsee), ["detectors", "--detector", f"classifier:{exported}",
                                                    "--suites", "banking", "--attacks", "direct", "--limit", "2",
                                                    "--no-hard-cases"])
    assert res.exit_code == 0, res.output
    assert "onnx:m" in res.output and "recall" in res.output
