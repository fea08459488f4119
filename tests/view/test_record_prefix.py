"""A forget's record keeps the prefix below its fork point by reference (the session's own record
holds it, unchanged, after the forget) and sketches only the suffix; reading the record back
joins the prefix again, from the session's record or, once a later forget forked below this
one's fork point, from that forget's record. A real agent, two forgets, the embedded home."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.forget_agents import SECRET, build, say
from unsee import RevocationEvent, Unsee
from unsee.plugins.view import forget_records, load_forget_record
from unsee.plugins.view.records import _sketches, expand_sketches

CODE = "ZEBRA-7788"
TURNS = ["hello", f"my door code is {CODE}", "hi again", "how are you", "look at T1", "thanks", "bye"]


def _whole(graph) -> list[dict]:
    """The graph's sketches, parents whole: what a record read back must give."""
    return expand_sketches(_sketches(graph))


@pytest.fixture
def two_forgets(tmp_path):
    """Forget the card (entered late, through a tool), then the door code (entered early, by the
    user: its fork point lies below the first forget's)."""
    u = Unsee(home=tmp_path / "h")
    agent, store = build(u)
    for text in TURNS:
        say(agent, "s", text)
    first = RevocationEvent(target=SECRET)
    before_first = _whole(u.graph("s"))
    r1 = u.forget("s", first, agent=agent)
    before_second = _whole(u.graph("s"))
    second = RevocationEvent(target=CODE)
    r2 = u.forget("s", second, agent=agent)
    assert r1.committed and r2.committed
    yield {"u": u, "home": tmp_path / "h", "events": (first.event_id, second.event_id),
           "before": (before_first, before_second), "reports": (r1, r2)}
    u.close()


def _stored(home: Path, event_id: str) -> dict:
    return json.loads((home / "forgets" / f"{event_id}.json").read_text())


def test_a_record_stores_the_suffix_and_its_prefix_by_reference(two_forgets):
    home, (e1, e2) = two_forgets["home"], two_forgets["events"]
    for eid, before in zip((e1, e2), two_forgets["before"]):
        stored = _stored(home, eid)
        ref = stored["before_prefix"]
        assert stored["version"] == 3 and ref and ref["artifacts"] > 0
        assert len(stored["before_artifacts"]) + ref["artifacts"] == len(before)
        assert all(d["seq"] >= ref["below_seq"] for d in stored["before_artifacts"])
    # the second forget forked below the first's fork point
    assert _stored(home, e2)["before_prefix"]["below_seq"] < _stored(home, e1)["before_prefix"]["below_seq"]


def test_reading_a_record_back_gives_the_whole_graph_before_its_forget(two_forgets):
    u, home, (e1, e2) = two_forgets["u"], two_forgets["home"], two_forgets["events"]
    b1, b2 = two_forgets["before"]
    # the second forget's prefix is the session's record now; the first's is partly in the second's record
    for graph in (None, u.graph("s")):
        r1, r2 = load_forget_record(home, e1, graph=graph), load_forget_record(home, e2, graph=graph)
        assert r1.before_prefix is None and r1.before_artifacts == b1
        assert r2.before_prefix is None and r2.before_artifacts == b2
    assert [r.before_artifacts for r in forget_records(home, "s")] == [b1, b2]
    page = u.view("s", event=e1, detect=False)
    assert len(page["forget"]["before"]["artifacts"]) == len(b1)


def test_a_prefix_found_nowhere_stays_a_reference_and_the_suffix_still_loads(two_forgets):
    home, (e1, e2) = two_forgets["home"], two_forgets["events"]
    (home / "forgets" / f"{e2}.json").unlink()  # the record that held the first's changed prefix
    r1 = load_forget_record(home, e1)
    assert r1.before_prefix is not None
    assert 0 < len(r1.before_artifacts) < len(two_forgets["before"][0])
    assert r1.entry in {d["id"] for d in r1.before_artifacts} and set(r1.closure) <= {
        d["id"] for d in r1.before_artifacts}
