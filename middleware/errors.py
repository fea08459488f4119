"""Typed errors of the middleware layer.

Each error subclasses the nearest builtin so callers can catch either the
unsee type or the builtin they already handle.
"""

from __future__ import annotations

import os
import sqlite3


class UnseeError(Exception):
    """Base class of every error unsee raises on purpose."""


class SessionNotFound(UnseeError, LookupError):
    """No recorded session has this id."""

    def __init__(self, session_id: str):
        super().__init__(f"unknown session {session_id!r}: no recording of it in this unsee home")
        self.session_id = session_id


class TargetNotFound(UnseeError, LookupError):
    """The forget target occurs in no recorded artifact (of the given source)."""

    exit_code = 1  # (done: the answer is "no")

    def __init__(self, target: str, session_id: str | None = None, source: str | None = None):
        where = f" of session {session_id!r}" if session_id else ""
        src = f" from source {source!r}" if source else ""
        super().__init__(f"target not found in any recorded artifact{where}{src}")
        self.target = target
        self.session_id = session_id
        self.source = source


class AmbiguousTarget(UnseeError, LookupError):
    """The target entered through several distinct sources; name one with source=."""

    def __init__(self, sources: list[str]):
        super().__init__(self.message(sources, "source="))
        self.sources = sources

    @staticmethod
    def message(sources: list[str], how: str) -> str:
        """The message with ``how`` naming the way to pass a source (``source=``, ``--source``)."""
        return f"target occurs in several sources; pass {how} one of: " + ", ".join(sources)


class UnknownArtifact(UnseeError, LookupError):
    """An artifact id that is not part of the graph."""


class IncompleteSession(UnseeError, RuntimeError):
    """The session's recording is partial; forgetting on it would trust a partial graph."""

    def __init__(self, session_id: str, failures: int):
        super().__init__(
            f"session {session_id!r} was recorded incompletely ({failures} recording failure(s)); "
            "refusing to act on a partial provenance graph"
        )
        self.session_id = session_id
        self.failures = failures


class RecordsBehind(IncompleteSession):
    """A run of the session died (its process was killed) before the run's records were all
    written: the agent's LangGraph state holds messages the records do not. A strategy that
    trusts the recorded transcript (B7 and the rest) refuses; B5, a full replay from the user's
    inputs (the unrecorded ones taken from the agent's state), is always correct."""

    def __init__(self, session_id: str, missing: int, strategy: str):
        RuntimeError.__init__(
            self,
            f"session {session_id!r}: its records stop short of the agent's state ({missing} message(s) of a "
            f"run whose process died before they were written); {strategy} would trust a partial record. "
            "Forget with B5 (--strategy B5: a full replay from the user's inputs, the unrecorded ones "
            "taken from the agent's state), which is always correct")
        self.session_id = session_id
        self.failures = 0
        self.missing = missing
        self.strategy = strategy


class InvalidArgument(UnseeError, ValueError):
    """A caller passed a value unsee cannot use (empty target, bad format...)."""


class ExportError(UnseeError, RuntimeError):
    """Sending or writing a recorded session failed (the receiver refused it, or is not there)."""

    exit_code = 3  # the environment (the receiver) failed, not the command


class EndpointUnreachable(ExportError, ConnectionError):
    """Nothing answers at the export endpoint: no TCP connection within the reachability
    check's timeout. Raised before any span is handed to the OTLP exporter."""

    def __init__(self, endpoint: str, address: str, reason: str):
        super().__init__(f"OTLP endpoint {endpoint} is unreachable (no TCP connection to {address}: {reason}); "
                         "nothing was sent")
        self.endpoint = endpoint
        self.address = address
        self.reason = reason


class SessionBusy(UnseeError, RuntimeError):
    """An agent run is in progress on the session."""

    exit_code = 3  # (try again when the run or forget is over)

    def __init__(self, session_id: str, waited: float | None = None):
        how = f" after waiting {waited:.0f} s" if waited else " (asked not to wait)"
        super().__init__(f"session {session_id!r} has an agent run in progress{how}")
        self.session_id = session_id


class SessionChanged(SessionBusy):
    """A run loaded the session's state while a forget (in some process) replaced it."""

    def __init__(self, session_id: str):
        UnseeError.__init__(self, f"session {session_id!r} was rebuilt by a forget while this run was starting: "
                                  "its input was not applied; run it again (it continues from the rebuilt state)")
        self.session_id = session_id


class StoreDamaged(UnseeError, sqlite3.DatabaseError):
    """A store file of the unsee home is damaged (truncated, garbled, not ours).

    Raised before anything is written to it: the file is left as it was.
    """

    exit_code = 3

    def __init__(self, path: str | os.PathLike, reason: str):
        super().__init__(
            f"the unsee store {os.fspath(path)} is damaged ({reason}); nothing was changed: "
            "restore it from a backup, or move it away to start an empty store"
        )
        self.path = os.fspath(path)
        self.reason = reason


class HomeNotADirectory(UnseeError, NotADirectoryError):
    """The unsee home (or a folder above it) exists and is not a directory."""

    exit_code = 2

    def __init__(self, home: str | os.PathLike, blocker: str | os.PathLike | None = None):
        blocker = os.fspath(blocker if blocker is not None else home)
        where = "is not a directory" if blocker == os.fspath(home) else f"cannot be made: {blocker} is not a directory"
        super().__init__(
            f"the unsee home {os.fspath(home)} {where}; point --home, $UNSEE_HOME or Unsee(home=...) "
            "at a directory, or move the file away"
        )
        self.home = os.fspath(home)
        self.blocker = blocker


class InvalidStoreUrl(UnseeError, ValueError):
    """``Unsee(store=...)`` is not a store unsee can open (a PostgreSQL URL psycopg rejects)."""

    def __init__(self, url: str, reason: str):
        super().__init__(f"cannot use the store {url!r}: {reason}")
        self.url = url
        self.reason = reason


class StoreDriverMissing(InvalidStoreUrl):
    """A PostgreSQL store was named, but psycopg 3 is not installed here (an environment
    problem, not a bad URL)."""

    exit_code = 3


class StoreUnavailable(UnseeError, ConnectionError):
    """The store's server (PostgreSQL) could not be reached, or dropped the connection.

    The statement's transaction was rolled back by the server: nothing of it is
    stored. Retry once the server is back (a forget rolls forward from its journal).
    """

    def __init__(self, where: str, reason: str):
        super().__init__(f"the unsee store {where} is unavailable ({reason.strip()}); nothing of the failed "
                         "operation was stored: retry once the server is back")
        self.where = where
        self.reason = reason


class Interrupted(UnseeError, RuntimeError):
    """A journaled operation (a forget's commit, an erasure) stopped part-way because a service
    failed under it. Its journal keeps what is done; running it again finishes it."""

    exit_code = 3  # (run it again: the journal finishes it)

    def __init__(self, what: str, session_id: str, event_id: str, cause: BaseException, finish: str):
        super().__init__(f"the {what} of forget {event_id} on session {session_id!r} was interrupted "
                         f"({type(cause).__name__}: {str(cause).strip() or 'no detail'}); it is journaled: "
                         f"{finish}")
        self.session_id = session_id
        self.event_id = event_id
        self.cause = cause


class InjectedCrash(UnseeError, RuntimeError):
    """Raised by the crash-injection test hook (``unsee.middleware.faults``) at a named step."""


class NoUnseeHome(UnseeError, LookupError):
    """The home a command names holds no unsee records (it does not exist, or nothing was
    recorded into it)."""

    exit_code = 2

    def __init__(self, home: str | os.PathLike):
        home = os.fspath(home)
        what = "holds no unsee records" if os.path.isdir(home) else "does not exist"
        super().__init__(f"the unsee home {home} {what}: point --home or $UNSEE_HOME at the home the agent "
                         "records into (Unsee(home=...))")
        self.home = home
