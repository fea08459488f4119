"""Typed errors of the erasure plugin (bad arguments use ``unsee.middleware.errors.InvalidArgument``)."""

from __future__ import annotations

import os

from unsee.middleware.errors import Interrupted, UnseeError


class ReceiptInvalid(UnseeError, ValueError):
    """A receipt file is not valid JSON or does not follow the receipt schema."""

    def __init__(self, reason: str, path: str | os.PathLike | None = None):
        where = f" {os.fspath(path)}" if path is not None else ""
        super().__init__(f"the erasure receipt{where} is invalid: {reason}")
        self.reason = reason
        self.path = os.fspath(path) if path is not None else None


class ReceiptKeyInvalid(UnseeError, ValueError):
    """A receipt signing key is not an Ed25519 private key: the home's ``receipt.key``, the file
    ``$UNSEE_RECEIPT_KEY`` names (or no file there), or the key a shared store holds."""

    def __init__(self, path: str | os.PathLike, reason: str, hint: str | None = None):
        super().__init__(
            f"the receipt signing key {os.fspath(path)} is unusable ({reason}); nothing was changed: "
            + (hint or "restore it from a backup, or move it away to create a new key "
                       "(old receipts keep their embedded key)")
        )
        self.path = os.fspath(path)
        self.reason = reason


class NotForgotten(UnseeError, RuntimeError):
    """Erasure was asked for a session whose live records still hold the target."""

    exit_code = 2  # (erase follows a committed forget of the target)

    def __init__(self, session_id: str):
        super().__init__(
            f"session {session_id!r} still holds the target in its live state: erasure follows a committed "
            "forget and never replaces one; forget it first (u.forget / unsee forget), which erases by default")
        self.session_id = session_id


class ErasureInterrupted(Interrupted):
    """A store, checkpointer or sandbox failed part-way through an erasure (e.g. the database
    went away). Its journal keeps what is done: the same call again, once the service is back,
    finishes it. The forget before it is committed either way."""

    def __init__(self, session_id: str, event_id: str, cause: BaseException):
        super().__init__("erasure", session_id, event_id, cause,
                         "run it again (u.erase / unsee erase, or the same forget event) to finish it")
