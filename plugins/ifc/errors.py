"""Typed errors of the IFC plugin.

Each error subclasses the nearest builtin (``ValueError`` for bad
configuration, ``LookupError`` for an unknown name, ``PermissionError`` for a
blocked call) so callers that do not know unsee can still catch them.
"""

from __future__ import annotations

from unsee.middleware.errors import UnseeError

from .decision import Decision


class IFCError(UnseeError):
    """Base class of every error raised by the IFC plugin."""


class DuplicateExtractor(IFCError, ValueError):
    """An extractor of this name is registered already (pass ``replace=True``)."""

    def __init__(self, name: str):
        super().__init__(f"an identifier extractor named {name!r} is registered already; "
                         "pass replace=True to replace it")
        self.name = name


class UnknownExtractor(IFCError, LookupError):
    """No extractor of this name is registered."""

    def __init__(self, name: str, known: tuple[str, ...] = ()):
        hint = f" (registered: {', '.join(known)})" if known else ""
        super().__init__(f"no identifier extractor named {name!r}{hint}")
        self.name = name
        self.known = known


class InvalidExtractor(IFCError, TypeError):
    """An extractor is not callable, or returned something other than identifiers."""


class InvalidSinkSpec(IFCError, ValueError):
    """A sink declaration is not of the form ``tool.arg``."""

    def __init__(self, spec: object, why: str = "expected 'tool.arg', e.g. 'send_money.recipient'"):
        super().__init__(f"invalid sink {spec!r}: {why}")
        self.spec = spec


class InvalidMode(IFCError, ValueError):
    """A policy mode other than ``block``, ``ask`` or ``audit``."""

    def __init__(self, mode: object, known: tuple[str, ...]):
        super().__init__(f"invalid IFC mode {mode!r}: use one of {', '.join(known)}")
        self.mode = mode
        self.known = known


class PolicyViolation(IFCError, PermissionError):
    """A tool call was blocked by the IFC policy; carries the full decision.

    Raised by adapters (the pure ``decide`` never raises for a violation, it
    returns a :class:`~unsee.plugins.ifc.decision.Decision`).
    """

    exit_code = 4

    def __init__(self, decision: Decision):
        super().__init__(decision.reason)
        self.decision = decision
