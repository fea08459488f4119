"""Training the learned detector (unsee/eval/train_detector.py, detector_corpus.py): the generated
corpus is labelled where its injections are, training is deterministic (a small subset: the hard
cases, generated texts and package docs, no AgentDojo), and ``--detector learned`` loads."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("scipy")

from unsee.eval.detector_corpus import augmented_docs, corpus, hard_case_docs, package_docs
from unsee.eval.detector_eval import load_detector
from unsee.eval.train_detector import main, train
from unsee.plugins.detect import LearnedDetector, load_learned_weights

SMALL = dict(n_augmented=40, n_docs=20)


def test_generated_injections_know_where_they_are():
    docs = augmented_docs(30, seed=1)
    assert sum(d.injection for d in docs) == 30 and len(docs) == 60
    for d in docs:
        if d.injection:
            (a, b), = d.spans
            assert 0 <= a < b <= len(d.text)
        else:
            assert d.spans == ()
    assert [d.text for d in augmented_docs(30, seed=1)] == [d.text for d in docs]  # seeded
    assert [d.text for d in augmented_docs(30, seed=2)] != [d.text for d in docs]


def test_the_hard_cases_are_weakly_labelled_and_package_docs_benign():
    hard = hard_case_docs()
    assert all(d.spans is None for d in hard if d.injection) and all(d.spans == () for d in hard if not d.injection)
    assert all(not d.injection and "agentdojo" not in d.text.lower() for d in package_docs(20, seed=1))
    with pytest.raises(ValueError, match="unknown corpus source"):
        corpus(["heldout"])


def test_training_is_deterministic(tmp_path):
    sources = ["hard-cases", "augmented", "package-docs"]
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    assert main(["--out", str(a), "--sources", ",".join(sources), "--augmented", "40", "--docs", "20"]) == 0
    assert main(["--out", str(b), "--sources", ",".join(sources), "--augmented", "40", "--docs", "20"]) == 0
    assert a.read_bytes() == b.read_bytes()
    w = load_learned_weights(a)
    assert w.meta["sources"] == ",".join(sources) and w.meta["positives"] > 0
    other = train(sources, seed=36, **SMALL)
    assert other.meta["corpus_sha256"] != w.meta["corpus_sha256"]
    # the file trained here is a detector of its own
    det = load_detector(f"learned:{a}")
    assert isinstance(det, LearnedDetector) and det.weights.meta["corpus_sha256"] == w.meta["corpus_sha256"]


def test_the_eval_loads_the_shipped_learned_detector():
    det = load_detector("learned")
    assert isinstance(det, LearnedDetector) and det.name == "learned"
    with pytest.raises(ValueError, match="cannot be read"):
        load_detector("learned:/nonexistent/weights.npz")


def test_the_written_texts_know_where_their_injections_are():
    from unsee.eval.detector_corpus import WRITTEN, written_docs

    assert len(WRITTEN) == 8  # one file per author
    docs = written_docs()
    assert sum(d.injection for d in docs) == sum(not d.injection for d in docs) == 90 * len(WRITTEN)
    for d in docs:
        assert d.source == "written" and d.kind.startswith("train_written_")
        if d.injection:
            assert d.spans and all(0 <= a < b <= len(d.text) for a, b in d.spans)
        else:
            assert d.spans == ()


@pytest.mark.parametrize("row,error", [
    ('{"injection": true, "kind": "k", "note": "", "text": "Send it.", "payload": []}', "needs its payload"),
    ('{"injection": false, "kind": "k", "note": "", "text": "Hi.", "payload": ["Hi"]}', "needs its payload"),
    ('{"injection": true, "kind": "k", "note": "", "text": "Send it.", "payload": ["Mail it"]}', "not in the text"),
    ('{"injection": true, "text": "x", "payload": ["x"], "extra": 1}', "fields"),
    ("not json", "not JSON"),
])
def test_a_malformed_written_file_is_refused_with_its_line(tmp_path, row, error):
    from unsee.eval.detector_corpus import load_written

    path = tmp_path / "train_written_x.jsonl"
    path.write_text('{"injection": false, "kind": "k", "note": "", "text": "Fine.", "payload": []}\n' + row + "\n")
    with pytest.raises(ValueError, match=error) as exc:
        load_written(path)
    assert f"{path}:2" in str(exc.value)
