"""The call ledger's pure rules (sandbox/ledger_states.py), without a database: the outbox
table, ids, and redacted text."""

from __future__ import annotations

import pytest

from unsee.sandbox.ledger import canonical_json, make_call_id
from unsee.sandbox.ledger_states import Occurrences, hash_id, is_redacted, outbox_step, redacted


@pytest.mark.parametrize(("status", "step"), [
    (None, "claim"), ("pending", "claim"), ("released", "claim"),
    ("done", "replayed"), ("failed", "failed"), ("fired", "settle"),
])
def test_the_outbox_table(status, step):
    assert outbox_step(status) == step


def test_ids_follow_the_canonical_arguments_and_the_occurrence():
    assert canonical_json({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
    first = make_call_id("s", "send", {"b": 1, "a": 2}, 0)
    assert first == make_call_id("s", "send", {"a": 2, "b": 1}, 0) == hash_id("s", "send", '{"a":2,"b":1}', 0)
    assert first != make_call_id("s", "send", {"a": 2, "b": 1}, 1)


def test_occurrences_count_identical_calls_only():
    occ = Occurrences()
    assert [occ.next("s", "t", "{}"), occ.next("s", "t", "{}"), occ.next("s", "t", '{"x":1}')] == [0, 1, 0]


def test_redacted_text_is_recognised():
    text = redacted('{"to":"x"}', lambda s: "d" + str(len(s)))
    assert is_redacted(text) and not is_redacted('{"to":"x"}')
