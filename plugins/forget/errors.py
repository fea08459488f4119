"""Typed errors of the forget (errors of the graph layer live in unsee.middleware.errors)."""

from __future__ import annotations

from unsee.middleware.errors import InjectedCrash, Interrupted, UnseeError

__all__ = ["AgentCannotReplay", "AgentUnknown", "CommitInterrupted", "ForgetRefused", "IfcNotEnabled", "InjectedCrash",
           "NeedsAsync", "NotDerived", "ReplayFailed", "ReplayIncomplete", "TargetRemains", "UnknownStrategy", "UnsupportedSession"]


class AgentUnknown(UnseeError, LookupError):
    """The operator must replay through the agent but does not know it."""

    def __init__(self, session_id: str):
        super().__init__(
            f"no agent known for session {session_id!r} in this process: pass agent= "
            "(or --agent module:attribute on the command line)"
        )


class UnknownStrategy(UnseeError, ValueError):
    def __init__(self, strategy: str, known: tuple[str, ...], names: tuple[str, ...] = ()):
        also = f" (or a name: {', '.join(names)})" if names else ""
        super().__init__(f"unknown strategy {strategy!r}: use one of {' '.join(known)}{also}")


class ReplayIncomplete(UnseeError, RuntimeError):
    """The replay's own recording failed part-way, so it is not committed.

    The recorder never stops a run for a recording failure (e.g. a turn's sandbox snapshot
    while the Docker daemon is away): it counts it and marks the session incomplete. For a
    replay's scratch thread that mark would be lost by the commit (the scratch records become
    the session's, marked complete), leaving the session with checkpoints that silently lack
    their sandbox snapshots. Nothing was begun: the old state is intact; run the forget again
    once the service is back (the recorder's log says what failed)."""

    def __init__(self, session_id: str, event_id: str, failures: int):
        super().__init__(
            f"the replay of forget {event_id} on session {session_id!r} was recorded incompletely "
            f"({failures} recording failure(s), e.g. a sandbox snapshot with the Docker daemon away; "
            "see the unsee.recorder log); nothing was committed: run the forget again once the service is back"
        )
        self.session_id = session_id
        self.event_id = event_id
        self.failures = failures


class ReplayFailed(UnseeError, RuntimeError):
    """The agent's own code (its model, a tool, its store, checkpointer or middleware) raised while
    a replay re-ran it; the replay was abandoned before its commit, so nothing was changed.

    A replay (B5, B5', B7, B9) calls the user's model and tools again for the replayed turns; a
    scripted test model with a fixed list of replies must hold enough of them (docs/forget.md).
    ``turn`` is the recorded turn being replayed (None while forking, before any turn); ``call``
    which call raised ("the model (asked for reply #2 of this replay)", "tool 'lookup'", or the
    run in general); ``original`` (also ``__cause__``) the exception the agent's code raised.
    Exit code 4: the operation failed and changed nothing."""

    exit_code = 4

    def __init__(self, session_id: str, event_id: str, strategy: str, turn: int | None, call: str,
                 original: BaseException):
        where = f"at recorded turn {turn}, {call}" if turn is not None else call
        detail = " ".join(str(original).split()) or "no message"
        hint = " (a scripted model out of replies?)" if isinstance(original, StopIteration) else ""
        super().__init__(
            f"the {strategy} replay of session {session_id!r} failed {where}: {type(original).__name__}: "
            f"{detail}{hint}; nothing was changed. A replay calls the agent's model and tools again "
            "(docs/forget.md); the traceback: --debug, or the unsee.forget logger at DEBUG"
        )
        self.session_id = session_id
        self.event_id = event_id
        self.strategy = strategy
        self.turn = turn
        self.call = call
        self.original = original


class IfcNotEnabled(UnseeError, NotImplementedError):
    """A strategy that labels I(z) revoked (B8, B9) was asked for while IFC is off. Raised
    before anything is changed. (A ``NotImplementedError`` too, which it used to be.)"""

    exit_code = 2

    def __init__(self, strategy: str):
        super().__init__(f"{strategy} needs IFC enabled first: u.ifc(sinks=[...]) in Python, "
                         "--ifc SINK on the command line")
        self.strategy = strategy


class CommitInterrupted(Interrupted):
    """A begun commit stopped part-way (e.g. the database went away): its journal entry is
    kept, so the next forget, ``recover`` or erasure of the session rolls it forward; until
    then the session keeps whichever state each store last committed."""

    def __init__(self, session_id: str, event_id: str, cause: BaseException):
        super().__init__("commit", session_id, event_id, cause,
                         "run the forget again (same event) once the service is back to finish it")


class ForgetRefused(UnseeError):
    """A forget checked something its later steps need and refused before changing anything:
    the session's state, records, store and history are as they were, nothing is journaled.
    Each subclass says what is missing and how to supply it."""


class AgentCannotReplay(ForgetRefused, LookupError):
    """The agent a forget would replay through cannot read or write the session's thread: it has
    no checkpointer (a subgraph, a supervisor's worker, a swarm agent), its checkpointer does
    not hold the thread, or it is not the graph a journaled commit was written through. Pass
    ``agent=`` the graph the application invokes, compiled with the checkpointer that holds the
    thread. Exit code 2."""

    exit_code = 2

    def __init__(self, session_id: str, why: str, fix: str = ""):
        hint = fix or ("pass agent= the graph your application invokes for this thread, compiled with the "
                       "checkpointer that holds it (--agent module:attribute on the command line)")
        super().__init__(f"cannot replay session {session_id!r} through this agent: {why}; {hint}. "
                         "Nothing was changed")
        self.session_id = session_id
        self.why = why


class UnsupportedSession(ForgetRefused, NotImplementedError):
    """The session holds something a replay cannot give again yet, or its erasure could not run:
    runs nested in another graph on the same thread (subagents, supervisor workers, swarm
    agents), runs resumed after an interrupt whose decision the record does not hold (an older
    unsee), no recorded run to replay, a history erasure cannot rewrite. Refused before anything changes (a refusal, never a half-forget).
    ``reasons``: one line each. Exit code 2."""

    exit_code = 2

    def __init__(self, session_id: str, reasons: list[str]):
        super().__init__(f"session {session_id!r} cannot be forgotten safely yet: " + "; ".join(reasons)
                         + ". Nothing was changed")
        self.session_id = session_id
        self.reasons = list(reasons)


class NeedsAsync(ForgetRefused, TypeError):
    """A replay of this session must run the agent asynchronously (``ainvoke``): tools with no
    synchronous form (``async def`` tools, every MCP tool) or a model only ``ainvoke`` answers.
    Raised by a synchronous ``forget`` before anything changes; ``u.aforget(...)`` replays it.
    ``tools``: the async-only tools found. Exit code 2."""

    exit_code = 2

    def __init__(self, session_id: str, tools: list[str]):
        super().__init__(f"session {session_id!r} needs an asynchronous replay: tool(s) {', '.join(tools)} have no "
                         "synchronous form (async def or MCP tools); forget it with `await u.aforget(...)`, which "
                         "replays the agent with ainvoke. Nothing was changed")
        self.session_id = session_id
        self.tools = list(tools)


class NotDerived(ForgetRefused, RuntimeError):
    """The state a replay left on its scratch thread is not one the commit may write: missing,
    empty where the session was not, not rooted at the fork checkpoint, missing a recorded run
    input, or holding a message id the session's record already gives to another message. The
    replay was abandoned before its commit began. ``problems``: one line each. Exit code 4."""

    exit_code = 4

    def __init__(self, session_id: str, event_id: str, problems: list[str]):
        super().__init__(f"the replay of forget {event_id} on session {session_id!r} did not derive a state "
                         "the commit may write: " + "; ".join(problems) + ". Nothing was committed")
        self.session_id = session_id
        self.event_id = event_id
        self.problems = list(problems)


class TargetRemains(ForgetRefused, RuntimeError):
    """The counterfactual a replay built still holds the target, so committing it would report a
    forget while the target is in the state: where (``places``: state keys, the memory store)
    and the other observations the record shows it entered through (``sources``). Forget
    those observations, or the one the target entered through again, first. Exit code 4."""

    exit_code = 4

    def __init__(self, session_id: str, event_id: str, places: list[str], sources: list[str]):
        where = ", ".join(places)
        came = (f"; the record shows it also entered through {', '.join(sources)}: a forget removes it from "
                "the observation it first entered through, every other observation is kept as it was")
        super().__init__(f"the counterfactual of forget {event_id} on session {session_id!r} still holds the "
                         f"target in {where}{came if sources else ''}. Nothing was committed")
        self.session_id = session_id
        self.event_id = event_id
        self.places = list(places)
        self.sources = list(sources)
