"""The exit codes of every ``unsee`` command, and the one-line message of an error (pure).

One scheme for every command (docs/cli.md "Exit codes" is this table):

====  =====================================================================
code  meaning
====  =====================================================================
0     done
1     done, and the answer is "no": a copy remains in scope or an audit
      could not read every route (``audit``, ``erase``, ``surface --target``,
      a ``forget`` whose record is not erased clean), a receipt's signature
      is invalid, the target occurs in no recorded artifact
2     bad usage or input: an unknown option, session, event or thread, a
      value unsee cannot use, a session or agent a forget refused before
      changing anything; nothing was changed
3     an environment problem: the store, the Docker daemon, an OTLP endpoint
      or the model is unavailable, the session is busy (a run or a forget in
      another process), a service failed part-way through a journaled
      operation (run it again to finish it); retrying may succeed
4     the operation failed and changed nothing: the user's own model, tool or
      store raised during a replay (``ReplayFailed``), the replay's state was
      refused before the commit (``NotDerived``, ``TargetRemains``), the
      recording is partial, an internal error
130   interrupted (Ctrl-C)
====  =====================================================================

An error class says its code with a class attribute ``exit_code`` (its own or
a parent's, below the base classes); one that does not is placed by the
builtin it subclasses (``LookupError``/``ValueError``/``TypeError``: 2,
``ConnectionError``/``TimeoutError``/``OSError``: 3, ``RuntimeError``: 4).
An exception that is not unsee's (nor click's) is an internal error (4),
except ``OSError``s (3; a missing file or directory: 2).
"""

from __future__ import annotations

import re
import sqlite3

OK = 0
NO = 1
USAGE = 2
ENVIRONMENT = 3
FAILED = 4
INTERRUPTED = 130

#: (code, what it means), the table docs/cli.md shows
TABLE: tuple[tuple[int, str], ...] = (
    (OK, "done"),
    (NO, 'done, and the answer is "no": a copy remains in scope or an audit could not read every route (audit, '
         "erase, surface --target, a forget whose record is not erased clean), a receipt's signature is invalid, "
         "the target occurs in no recorded artifact"),
    (USAGE, "bad usage or input: an unknown option, session, event or thread, a value unsee cannot use, a "
            "session or agent a forget refused before changing anything (a shape a replay cannot rebuild yet, "
            "an agent that cannot read the thread); nothing was changed"),
    (ENVIRONMENT, "an environment problem: the store, the Docker daemon, an OTLP endpoint or the model is "
                  "unavailable, the session is busy, a service failed part-way through a journaled operation "
                  "(run it again to finish it); retrying may succeed"),
    (FAILED, "the operation failed and changed nothing: the user's model, tool or store raised during a replay "
             "(ReplayFailed), the replay's state was refused before the commit (NotDerived, TargetRemains), the "
             "recording is partial, an internal error"),
    (INTERRUPTED, "interrupted (Ctrl-C)"),
)

_MISSING_PATH = (FileNotFoundError, NotADirectoryError, IsADirectoryError)
_ENVIRONMENT = (ConnectionError, TimeoutError, sqlite3.OperationalError, sqlite3.DatabaseError)


def _own_code(exc: BaseException) -> int | None:
    """The ``exit_code`` an error class (or a parent) states, if any; click's exceptions state
    theirs too (1, usage errors 2)."""
    for cls in type(exc).__mro__:
        code = cls.__dict__.get("exit_code")
        if isinstance(code, int):
            return code
    code = getattr(exc, "exit_code", None)  # (click sets it on the instance)
    return code if isinstance(code, int) else None


def is_ours(exc: BaseException) -> bool:
    """An error unsee (or its sandbox layer) raises on purpose: its message is for the user."""
    return any(c.__name__ in ("UnseeError", "SandboxError") and c.__module__.startswith("unsee.")
               for c in type(exc).__mro__)


def code_for(exc: BaseException) -> int:
    """The exit code of a command that ended with ``exc``."""
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED
    code = _own_code(exc)
    if code is not None:
        return code
    if is_validation_error(exc):
        return USAGE
    if isinstance(exc, _MISSING_PATH):
        return USAGE
    if isinstance(exc, (*_ENVIRONMENT, OSError, ImportError)):
        return ENVIRONMENT
    if not is_ours(exc):
        return FAILED
    if isinstance(exc, (NotImplementedError, LookupError, ValueError, TypeError)):
        return USAGE
    return FAILED


def is_validation_error(exc: BaseException) -> bool:
    return type(exc).__name__ == "ValidationError" and type(exc).__module__.startswith("pydantic")


_PYDANTIC_PREFIX = re.compile(r"^(Value|Assertion) error, ")


def validation_message(exc: BaseException) -> str:
    """A pydantic ``ValidationError`` as one line in unsee's words: ``field: message; ...``
    (no "1 validation error for ...", no "Value error," prefix, no input echo)."""
    parts = []
    for e in exc.errors():  # type: ignore[attr-defined]
        loc = ".".join(str(x) for x in e.get("loc") or ())
        msg = _PYDANTIC_PREFIX.sub("", str(e.get("msg", "")))
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts) or str(exc)


_CLICK_INVALID = re.compile(r"^Invalid value(?: for (?P<hint>.+?))?: ")


def usage_message(text: str) -> str:
    """A click usage message without click's own prefix ("Invalid value for '--x': " -> "--x: ")."""
    m = _CLICK_INVALID.match(text)
    if not m:
        return text
    hint = (m.group("hint") or "").replace("'", "")
    return (f"{hint}: " if hint else "") + _PYDANTIC_PREFIX.sub("", text[m.end():])


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def message_for(exc: BaseException) -> str:
    """The one line an error prints (without "error: ")."""
    if is_validation_error(exc):
        return one_line(validation_message(exc))
    if is_ours(exc):
        return one_line(str(exc))
    text = str(exc).strip()
    return one_line(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


__all__ = ["ENVIRONMENT", "FAILED", "INTERRUPTED", "NO", "OK", "TABLE", "USAGE", "code_for", "is_ours",
           "message_for", "one_line", "usage_message", "validation_message"]
