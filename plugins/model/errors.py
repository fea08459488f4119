"""Typed errors of the replay plugin's local-model runtime.

Each error subclasses the nearest builtin so callers that do not know unsee can
still catch them (``ImportError`` for a missing backend, ``ValueError`` for a
bad argument, ``RuntimeError`` for a failed conversion).
"""

from __future__ import annotations

from unsee.middleware.errors import UnseeError


class ReplayError(UnseeError):
    """Base class of every error raised by the replay plugin's model runtime."""

    exit_code = 4


class BackendUnavailableError(ReplayError, ImportError):
    """A runtime backend cannot be used on this machine.

    ``backend`` names it, ``install`` says what to install (a pip requirement
    or a hardware prerequisite), ``reason`` is the underlying failure.
    """

    exit_code = 3

    def __init__(self, backend: str, install: str, reason: str = "") -> None:
        self.backend = backend
        self.install = install
        self.reason = reason
        msg = f"runtime backend {backend!r} is unavailable: install {install}"
        if reason:
            msg += f" ({reason})"
        super().__init__(msg)


class UnknownBackendError(ReplayError, ValueError):
    """``load_runtime`` got a spec that is neither a backend name nor a folder."""

    exit_code = 2

    def __init__(self, spec: str, known: tuple[str, ...]) -> None:
        self.spec = spec
        self.known = known
        super().__init__(
            f"unknown runtime spec {spec!r}: use one of {', '.join(known)} "
            "or the path of a converted model folder"
        )


class ModelNotFoundError(ReplayError, FileNotFoundError):
    """The shipped weights (or a converted folder) are missing."""

    exit_code = 3


class ConversionError(ReplayError, RuntimeError):
    """Converting the GGUF weights to a safetensors folder failed."""


class CacheRangeError(ReplayError, ValueError):
    """A crop/restore offset lies outside the cached sequence or the context."""

    def __init__(self, offset: int, length: int, what: str = "crop") -> None:
        self.offset = offset
        self.length = length
        super().__init__(f"cannot {what} to offset {offset}: cache holds {length} tokens")


class ContextOverflowError(ReplayError, ValueError):
    """A prompt (plus the tokens to decode) does not fit the model context."""

    def __init__(self, needed: int, limit: int) -> None:
        self.needed = needed
        self.limit = limit
        super().__init__(f"{needed} tokens exceed the model context of {limit}")


class GrammarError(ReplayError, ValueError):
    """A tool schema could not be turned into a decoding grammar."""


class ToolCallParseError(ReplayError, ValueError):
    """Decoded text claimed to be a tool call but is not a valid one."""

    def __init__(self, text: str, reason: str) -> None:
        self.text = text
        self.reason = reason
        super().__init__(f"invalid tool call ({reason}): {text[:200]!r}")
