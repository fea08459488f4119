"""The hand-written hard cases are data (unsee/eval/hard_cases.jsonl): the reader loads every line
into the corpus ``unsee eval detectors`` uses, and refuses a malformed line naming it."""

import json

import pytest

from unsee.eval import hard_cases as hc


def test_the_corpus_loads_every_case_with_its_kind():
    cases = hc.HARD_CASES
    assert len(cases) == 77 and len(hc.NEGATIVES) == 47 and len(hc.POSITIVES) == 30
    assert {c.kind for c in hc.NEGATIVES} == set(hc.NEGATIVE_KINDS)
    assert {c.kind for c in hc.POSITIVES} == set(hc.POSITIVE_KINDS)
    assert all(c.text.strip() and c.note for c in cases)
    # the invisible ones keep their characters (written as \u escapes in the file)
    assert any("\u200b" in c.text for c in hc.POSITIVES) and any("\U000e0041" <= ch <= "\U000e007a"
                                                                 for c in hc.POSITIVES for ch in c.text)
    assert hc.load() == cases  # one line a case, in the file's order


@pytest.mark.parametrize("line, error", [
    ("not json", "not JSON"),
    ("[1]", "an object is wanted"),
    ('{"text": "", "injection": false, "kind": "chat"}', "'text'"),
    ('{"text": "x", "injection": "yes", "kind": "chat"}', "'injection'"),
    ('{"text": "x", "injection": true, "kind": "chat"}', "'kind' must be one of"),
    ('{"text": "x", "injection": false, "kind": "chat", "note": 3}', "'note'"),
    ('{"text": "x", "injection": false, "kind": "chat", "label": 1}', "unknown fields"),
])
def test_a_malformed_line_is_refused_naming_it(tmp_path, line, error):
    f = tmp_path / "cases.jsonl"
    good = json.dumps({"text": "Please pay by Friday.", "injection": False, "kind": "human-instruction"})
    f.write_text(good + "\n\n" + line + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=error) as exc:
        hc.load(f)
    assert f"{f}:3" in str(exc.value)


def test_an_empty_file_has_no_cases(tmp_path):
    f = tmp_path / "cases.jsonl"
    f.write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no cases"):
        hc.load(f)
