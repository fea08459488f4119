"""Typed errors of the forget operator (errors of the graph layer live in unsee.middleware.errors)."""

from __future__ import annotations

from unsee.middleware.errors import Interrupted, UnseeError


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


class InjectedCrash(UnseeError, RuntimeError):
    """Raised by the crash-injection test hook at a named step."""


class CommitInterrupted(Interrupted):
    """A begun commit stopped part-way (e.g. the database went away): its journal entry is
    kept, so the next forget, ``recover`` or erasure of the session rolls it forward; until
    then the session keeps whichever state each store last committed."""

    def __init__(self, session_id: str, event_id: str, cause: BaseException):
        super().__init__("commit", session_id, event_id, cause,
                         "run the forget again (same event) once the service is back to finish it")
