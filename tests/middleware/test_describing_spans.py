"""Spans that describe a session without being its records (a forget's trace, a detector's
verdict, an IFC decision: ``semconv.DESCRIBING_SCOPES``) are kept with the session's spans, never
touch the session's row, never make a session, and losing one never marks the session incomplete."""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver

from tests.support.recording_agents import make_agent, say
from unsee import Unsee


def _describing_span(u, session, scope="unsee.forget", name="invoke_workflow unsee.forget"):
    tracer = u.tracer_provider.get_tracer(scope)
    with tracer.start_as_current_span(name, attributes={"gen_ai.conversation.id": session}):
        pass


def test_kept_with_the_session_and_its_row_untouched(tmp_path):
    u = Unsee(home=tmp_path)
    say(make_agent(u, InMemorySaver()), "s", "look at T1")
    u.flush()
    before = u.session("s")
    _describing_span(u, "s")
    _describing_span(u, "nobody")  # a session that does not exist is not made
    _describing_span(u, "s", scope="someone.else", name="other")  # not one of unsee's describing tracers
    u.flush()
    names = [r.name for r in u.store.spans("s")]
    assert "invoke_workflow unsee.forget" in names and "other" not in names
    assert u.session("s") == before  # (updated_ns included)
    assert not u.store.has_session("nobody")


def test_losing_one_never_marks_the_session_incomplete(tmp_path, monkeypatch):
    u = Unsee(home=tmp_path)
    say(make_agent(u, InMemorySaver()), "s", "look at T1")
    u.flush()

    def refuse(batches):
        raise OSError("disk full")

    monkeypatch.setattr(u.store, "_write", refuse)
    _describing_span(u, "s")
    u.flush()
    monkeypatch.undo()
    info = u.session("s")
    assert not info.incomplete and info.failures == 0
