"""Typed errors of the injection-detector plugin.

Each error subclasses the nearest builtin so callers that do not know unsee can
still catch them.
"""

from __future__ import annotations

from unsee.middleware.errors import UnseeError


class DetectError(UnseeError):
    """Base class of every error raised by the detect plugin."""


class InvalidFinding(DetectError, ValueError):
    """A finding with a bad span or a score outside 0..1."""


class InvalidDetector(DetectError, TypeError):
    """Something that is not a detector (no ``name``/``detect``, or not callable)."""


class DetectorFailed(DetectError, RuntimeError):
    """A detector raised or returned something unusable; ``detector`` names it."""

    def __init__(self, detector: str, reason: str):
        super().__init__(f"detector {detector!r} failed: {reason}")
        self.detector = detector
        self.reason = reason


class InvalidSetting(DetectError, ValueError):
    """A detection setting (mode, policy, side-effect policy) outside its allowed values."""

    def __init__(self, name: str, value: object, allowed: tuple[str, ...]):
        super().__init__(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
        self.name, self.value, self.allowed = name, value, allowed
