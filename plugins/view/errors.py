"""Errors of the view plugin (one-line messages; the CLI exits 2 on them: bad input)."""

from __future__ import annotations

from unsee.middleware.errors import UnseeError


class ViewError(UnseeError, ValueError):
    """A view that cannot be made from what was asked."""

    exit_code = 2


class UnknownEvent(ViewError, LookupError):
    """No forget record for that event id in this home."""
