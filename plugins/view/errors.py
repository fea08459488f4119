"""Errors of the view plugin (one-line messages; the CLI exits 2 on them)."""

from __future__ import annotations


class ViewError(ValueError):
    """A view that cannot be made from what was asked."""


class UnknownEvent(ViewError, LookupError):
    """No forget record for that event id in this home."""
