"""A target that spread to other sessions through shared memory is found and forgotten there too."""

import json

from langgraph.store.memory import InMemoryStore

from tests.support.forget_agents import SECRET, build, say, state_of
from unsee import RevocationEvent, Unsee


def record(tmp_path, name):
    u = Unsee(home=tmp_path / name)
    agent, store = build(u, store=None)
    store.inner = InMemoryStore()
    say(agent, "D", "unrelated")                     # before the write: D never saw it
    say(agent, "A", "hello")
    say(agent, "A", f"remember my card is {SECRET}")  # a memory write holding the target
    say(agent, "B", "hello, anything for me?")       # B's prompt gets that memory: B now holds it
    say(agent, "B", "thanks")
    say(agent, "C", "hi")                            # ... and C's
    return u, agent, store


def holds(agent, store, thread):
    return SECRET in json.dumps(state_of(agent, store, thread), default=str)


def test_default_scope_names_the_other_sessions(tmp_path):
    u, agent, store = record(tmp_path, "one")
    assert all(holds(agent, store, s) for s in "ABC")
    report = u.forget("A", RevocationEvent(target=SECRET))
    assert not holds(agent, store, "A")
    assert sorted(o.split()[0] for o in report.other_sessions) == ["B", "C"]  # named, not silently left
    assert holds(agent, store, "B")


def test_scope_all_forgets_it_everywhere(tmp_path):
    u, agent, store = record(tmp_path, "all")
    report = u.forget("A", RevocationEvent(target=SECRET), scope="all")
    assert [r.session_id for r in report.also_forgotten] == ["B", "C"]
    assert all(r.committed and r.erased_clean for r in [report, *report.also_forgotten])
    for s in "ABCD":
        assert not holds(agent, store, s), s
    assert SECRET not in json.dumps([i.value for i in store.inner.search((), limit=100)])
    assert "unrelated" in json.dumps(state_of(agent, store, "D"))  # untouched
    for s in "ABC":
        assert u.audit(s, SECRET).clean
    from unsee.plugins.view import load_forget_record

    for r in [report, *report.also_forgotten]:  # each session's forget has its record for unsee view
        assert load_forget_record(u.home, r.event_id).session_id == r.session_id


def test_b7_equals_b5_in_each_affected_session(tmp_path):
    """Theorem 1 across sessions: with scope='all', unsee's replay (B7) leaves every affected
    session as a full reset and replay (B5) does."""
    states = {}
    for strategy in ("B7", "B5"):
        u, agent, store = record(tmp_path, strategy)
        report = u.forget("A", RevocationEvent(target=SECRET), strategy, scope="all")
        assert [r.session_id for r in report.also_forgotten] == ["B", "C"]
        assert all(r.strategy == strategy for r in [report, *report.also_forgotten])
        states[strategy] = {s: state_of(agent, store, s) for s in "ABCD"}
        u.close()
    for s in "ABCD":
        assert states["B7"][s] == states["B5"][s], s
