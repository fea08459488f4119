"""The revocation pipeline: one object every entry point calls, built from ports only.

Its steps are each a module named for its job (request, locate, forgetter, spread, erase);
these tests drive it on real agents and real SQLite, through the ports a facade
would hand it, and check that each entry point (``Unsee.forget``, the detection
service, ``unsee serve``) reaches the same object."""

from __future__ import annotations

import logging

import pytest

from tests.support.forget_agents import SECRET, build, say, state_of
from unsee import RevocationEvent, Unsee
from unsee.middleware.errors import SessionNotFound, TargetNotFound
from unsee.plugins.erasure import ErasureContext
from unsee.plugins.forget import (ForgetContext, Located, RevocationContext, RevocationPipeline, SessionView,
                                  locate)


def _ctx(u: Unsee, **kw) -> RevocationContext:
    forget = ForgetContext(records=u.store, runs=u.recorder, hasher=u.hasher,
                           sessions=SessionView(session=u.session, graph=u.graph, sessions=u.sessions))
    return RevocationContext(forget=forget, **kw)


def _session(tmp_path):
    u = Unsee(home=tmp_path / "h")
    agent, store = build(u)
    for text in ["hello", "look at T1", "bye"]:
        say(agent, "s", text)
    return u, agent, store


class Keeper:
    def __init__(self, fail: bool = False):
        self.kept, self.fail = [], fail

    def keep(self, report, graph, entry, closure, raised_by):
        if self.fail:
            raise OSError("disk full")
        self.kept.append((report.event_id, entry.id, frozenset(closure), raised_by, len(list(graph))))


def test_a_pipeline_from_ports_forgets_erases_and_keeps_the_record(tmp_path):
    u, agent, store = _session(tmp_path)
    before = locate(u, "s", RevocationEvent(target=SECRET))
    keeper = Keeper()
    erasure = ErasureContext(home=u.home, records=u.store, hasher=u.hasher, ledger=lambda: None, runs=u.recorder)
    pipeline = RevocationPipeline(_ctx(u, erasure=lambda: erasure, flush=u.flush, records=keeper))
    event = RevocationEvent(target=SECRET, raised_by="operator")
    report = pipeline.run("s", event)
    assert report.committed and report.erased_clean is True and report.receipt
    assert SECRET not in str(state_of(agent, store, "s"))
    assert u.audit("s", SECRET).clean
    # the view's record is of the graph before the forget: tau's entry and I(z) as they were
    (eid, entry, closure, raised_by, n), = keeper.kept
    assert (eid, entry, closure, raised_by) == (event.event_id, before.entry.id, before.closure, "operator")
    assert n == len(list(before.graph))


def test_without_the_erasure_port_the_record_is_kept_and_the_forget_still_commits(tmp_path):
    u, agent, store = _session(tmp_path)
    report = RevocationPipeline(_ctx(u)).run("s", RevocationEvent(target=SECRET))
    assert report.committed and report.receipt is None and report.erased_clean is None
    assert SECRET not in str(state_of(agent, store, "s"))


def test_a_failing_record_keeper_is_logged_and_never_fails_the_forget(tmp_path, caplog):
    u, agent, store = _session(tmp_path)
    caplog.set_level(logging.WARNING, logger="unsee.forget")
    report = RevocationPipeline(_ctx(u, records=Keeper(fail=True))).run("s", RevocationEvent(target=SECRET))
    assert report.committed
    assert any("could not keep the record" in r.getMessage() for r in caplog.records)
    # committed: the failure is the report's, never an exception
    assert [(e.step, e.error) for e in report.errors] == [("view record", "OSError")]


def test_a_failing_erasure_after_the_commit_is_on_the_report_never_raised(tmp_path):
    u, agent, store = _session(tmp_path)

    class Broken:  # an erasure context whose every read fails (e.g. its home went read-only)
        def __getattr__(self, name):
            raise PermissionError(f"erasure context: {name} unavailable")

    report = RevocationPipeline(_ctx(u, erasure=lambda: Broken(), flush=u.flush)).run("s",
                                                                                  RevocationEvent(target=SECRET))
    assert report.committed and report.erased_clean is False
    assert report.errors and report.errors[0].step == "erase"
    assert SECRET not in str(state_of(agent, store, "s"))


def test_locate_raises_the_typed_error_the_forget_raises(tmp_path):
    u, _, _ = _session(tmp_path)
    with pytest.raises(SessionNotFound):
        locate(u, "nope", RevocationEvent(target=SECRET))
    with pytest.raises(TargetNotFound):
        locate(u, "s", RevocationEvent(target="never seen"))
    for bad in (RevocationEvent(target="never seen"), RevocationEvent(target=SECRET, source="no such tool")):
        with pytest.raises(type(_raised(lambda: locate(u, "s", bad)))):
            u.forget("s", bad)  # the same error, from the one search
    hit = locate(u, "s", RevocationEvent(target=SECRET))
    assert isinstance(hit, Located) and hit.entry.id in hit.closure


def _raised(fn):
    try:
        fn()
    except Exception as e:
        return e
    raise AssertionError("did not raise")


def test_every_entry_point_reaches_the_facades_one_pipeline(tmp_path, monkeypatch):
    u, agent, _ = _session(tmp_path)
    assert u.revocations is u.revocations  # built once
    calls = []
    real = u.revocations.run

    def spy(*a, **kw):
        calls.append(a[:2])
        return real(*a, **kw)

    monkeypatch.setattr(u.revocations, "run", spy)
    u.forget("s", RevocationEvent(target=SECRET))
    assert calls == [("s", calls[0][1])]
    svc = u.detect(timing="async", policy="auto")
    assert svc.forget == spy and svc.ctx is u.revocations.ctx.forget


def test_a_strategy_named_by_its_descriptive_name_is_reported_by_its_code(tmp_path):
    u, agent, store = _session(tmp_path)
    plan = u.forget("s", RevocationEvent(target=SECRET), strategy="prefix-replay", agent=agent, dry_run=True)
    assert plan.strategy == "B5'"
    report = u.forget("s", RevocationEvent(target=SECRET), strategy="unsee", agent=agent)
    assert report.committed and report.strategy == "B7"
    assert SECRET not in str(state_of(agent, store, "s"))


def test_where_the_target_spread_is_read_before_anything_changes(tmp_path, monkeypatch):
    """The spread is read between locate and plan: a failure to read it raises, and the session
    keeps its state and its record."""
    u, agent, store = _session(tmp_path)
    from unsee.plugins.forget import pipeline

    def broken(*a, **k):
        raise OSError("store unreachable")

    monkeypatch.setattr(pipeline, "spread_from", broken)
    with pytest.raises(OSError, match="store unreachable"):
        u.forget("s", RevocationEvent(target=SECRET))
    assert SECRET in str(state_of(agent, store, "s"))
    assert not u.audit("s", SECRET).clean
    monkeypatch.undo()
    report = u.forget("s", RevocationEvent(target=SECRET))
    assert report.committed and report.erased_clean is True
