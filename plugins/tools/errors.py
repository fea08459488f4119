"""Typed errors of the tools plugin (errors of the graph layer live in unsee.middleware.errors)."""

from __future__ import annotations

from unsee.middleware.errors import UnseeError

__all__ = ["SnapshotElsewhere"]


class SnapshotElsewhere(UnseeError, LookupError):
    """A sandbox snapshot a forget needs cannot be had on this machine: the catalog does not
    know it, or knows it but it has neither a copy here nor one off the machine it was made on
    (no registry and no shared store were configured there). A ``LookupError`` too, as the
    error raised here before it was. ``home``: where it was made (``host:path``), "" when
    unknown. Exit code 3: an environment problem, fixed by configuration, not by the input."""

    exit_code = 3

    def __init__(self, key: str, home: str = "", here: str = ""):
        self.key = key
        self.home = home
        self.here = here
        where = (f"it was made at {home} and never left that machine" if home else
                 f"no catalog this process reads knows it (this home: {here}); it was made on another "
                 "machine or home" if here else "this process's catalog does not know it")
        super().__init__(
            f"snapshot {key!r} cannot be restored here: {where}. Sandbox snapshots leave the machine only "
            "with an OCI registry (Unsee(registry='host:port'), $UNSEE_REGISTRY or --registry) or, for the "
            "local backend, a shared PostgreSQL store (Unsee(store='postgresql://...')); configure one on every "
            "worker, or run this forget where the session's tools ran"
        )
