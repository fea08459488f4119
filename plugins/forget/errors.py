"""Typed errors of the forget operator (errors of the graph layer live in unsee.middleware.errors)."""

from __future__ import annotations

from unsee.middleware.errors import InjectedCrash, Interrupted, UnseeError

__all__ = ["AgentUnknown", "CommitInterrupted", "InjectedCrash", "ReplayIncomplete", "UnknownStrategy"]


class AgentUnknown(UnseeError, LookupError):
    """The operator must replay through the agent but does not know it."""

    def __init__(self, session_id: str):
        super().__init__(
            f"no agent known for session {session_id!r} in this process: pass agent= "
            "(or --agent module:attribute on the command line)"
        )


class UnknownStrategy(UnseeError, ValueError):
    def __init__(self, strategy: str, known: tuple[str, ...]):
        super().__init__(f"unknown strategy {strategy!r}: use one of {' '.join(known)}")


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


class CommitInterrupted(Interrupted):
    """A begun commit stopped part-way (e.g. the database went away): its journal entry is
    kept, so the next forget, ``recover`` or erasure of the session rolls it forward; until
    then the session keeps whichever state each store last committed."""

    def __init__(self, session_id: str, event_id: str, cause: BaseException):
        super().__init__("commit", session_id, event_id, cause,
                         "run the forget again (same event) once the service is back to finish it")
