"""A forget's request (checked and parsed once) and the leases one revocation holds.

``ForgetRequest.of`` is pure: it is tested directly. The lease test runs a real agent: the
session's lease is held from the forget's first step to its record, the erasure inside it.
"""

from __future__ import annotations

import contextlib

import pytest

from tests.support.forget_agents import SECRET, build, say
from unsee import RevocationEvent, Unsee
from unsee.middleware.errors import InvalidArgument
from unsee.plugins.forget import ForgetRequest, Strategy, UnknownStrategy
from unsee.plugins.forget.held import HeldSessions

EVENT = RevocationEvent(target="x")


def test_the_request_parses_the_strategy_once_into_its_member():
    assert ForgetRequest.of("s", EVENT).strategy is Strategy.B7
    assert ForgetRequest.of("s", EVENT, "unsee").strategy is Strategy.B7
    assert ForgetRequest.of("s", EVENT, "B5'").spec.code == "B5'"
    assert ForgetRequest.of("s", EVENT, Strategy.B3).strategy is Strategy.B3


@pytest.mark.parametrize("kw, error, says", [
    (dict(erase="yes"), InvalidArgument, "erase must be True or False"),
    (dict(scope="everywhere"), InvalidArgument, "scope must be 'session' or 'all'"),
    (dict(strategy="B77"), UnknownStrategy, "B77"),
    (dict(side_effects="fire"), InvalidArgument, "side_effects must be one of defer, execute, ask"),
    (dict(dry_run=1), InvalidArgument, "dry_run must be True or False"),
    (dict(commit=None), InvalidArgument, "commit must be True or False"),
    (dict(wait="no"), InvalidArgument, "wait must be True or False"),
    (dict(agent="pkg.mod:agent"), InvalidArgument, "import it and pass the object"),
    (dict(session=""), InvalidArgument, "thread_id must be a non-empty string"),
    (dict(event="x"), InvalidArgument, "event must be a RevocationEvent"),
])
def test_every_argument_is_checked_with_its_name(kw, error, says):
    args = dict(session="s", event=EVENT, strategy="B7")
    args.update({k: kw.pop(k) for k in list(kw) if k in args})
    with pytest.raises(error, match=says):
        ForgetRequest.of(args["session"], args["event"], args["strategy"], **kw)


def test_a_spread_request_is_the_same_forget_of_another_session_erased_by_the_pipeline():
    req = ForgetRequest.of("a", EVENT, "B5", side_effects="execute", scope="all")
    ev = RevocationEvent(target="x", source="memory_read:1")
    sub = req.spread_to("b", ev)
    assert (sub.session, sub.event, sub.strategy, sub.side_effects) == ("b", ev, Strategy.B5, "execute")
    assert (sub.erase, sub.scope) == (False, "session")


class CountingRuns:
    """A ``Runs`` that counts its leases (entered, left) per session."""

    def __init__(self):
        self.log = []

    @contextlib.contextmanager
    def exclusive(self, session_id, wait=True):
        self.log.append(("take", session_id))
        try:
            yield
        finally:
            self.log.append(("give", session_id))


def test_held_sessions_take_each_lease_once_and_give_it_back_at_the_end():
    runs = CountingRuns()
    with contextlib.ExitStack() as stack:
        held = HeldSessions(runs, stack)
        held.hold("a")
        held.hold("a")
        held.hold("b")
        view = held.runs_view(runs)
        with view.exclusive("a"):  # held: the erasure's own lease is the hold
            pass
        with view.exclusive("c"):  # not held: taken and given back as usual
            pass
        assert runs.log == [("take", "a"), ("take", "b"), ("take", "c"), ("give", "c")]
    assert runs.log[-2:] == [("give", "b"), ("give", "a")]
    assert held.runs_view(None) is None


def test_one_lease_is_held_from_the_forget_to_its_record(tmp_path, monkeypatch):
    u = Unsee(home=tmp_path / "h")
    agent, _ = build(u)
    for text in ["hello", "look at T1", "bye"]:
        say(agent, "s", text)
    seen = []
    real = u.recorder.exclusive

    @contextlib.contextmanager
    def exclusive(session_id, wait=True):
        seen.append(("take", session_id))
        with real(session_id, wait=wait):
            yield
        seen.append(("give", session_id))

    monkeypatch.setattr(u.recorder, "exclusive", exclusive)
    from unsee.plugins.forget import pipeline

    real_erase, real_keep = pipeline.erase_record, pipeline.RevocationPipeline.record

    def erase(*a, **k):
        seen.append(("erase", a[3]))
        return real_erase(*a, **k)

    def record(self, r):
        seen.append(("record", r.request.session))
        return real_keep(self, r)

    monkeypatch.setattr(pipeline, "erase_record", erase)
    monkeypatch.setattr(pipeline.RevocationPipeline, "record", record)
    report = u.forget("s", RevocationEvent(target=SECRET))
    assert report.committed and report.erased_clean is True
    assert seen == [("take", "s"), ("erase", "s"), ("record", "s"), ("give", "s")]
    assert {"locate", "plan", "replay", "commit", "erase"} <= set(report.timings)
