"""The erasure journal: one small JSON document per event, written before each step is
taken as done, so a rerun after a crash skips what is done and finishes the rest.

It holds step states and ids (thread names, key ids), never the target.

Where it lives (:meth:`Journal.open`): a file ``<folder>/<name>.json`` on a SQLite home
(fsync'd, renamed into place); on a shared PostgreSQL store a row of unsee's
``erasure_journals`` table keyed by ``name`` (``shared.py``), so a run begun on one
machine is found and finished by a rerun of the same event on another.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from unsee.middleware.sqldb import Db

from .shared import read_journal, shared_db, write_journal


class Journal:
    def __init__(self, path: Path, session: str, db: Db | None = None):
        """The journal named ``path.stem``: the file ``path``, or with ``db`` (a shared store
        with the erasure tables, ``shared.shared_db``) that store's row of the same name."""
        self.path = Path(path)
        self.name = self.path.stem
        self._db = db
        self.data: dict[str, Any] = {"session": session}
        if db is not None:
            stored = read_journal(db, self.name)
            if stored is not None:
                self.data.update(json.loads(stored))
        elif self.path.exists():
            self.data.update(json.loads(self.path.read_text()))

    @classmethod
    def open(cls, folder: str | os.PathLike, name: str, session: str, records: Any = None) -> Journal:
        """Journal ``name``: in the shared store of ``records`` (a ``ProvenanceStore`` on
        PostgreSQL), else the file ``<folder>/<name>.json`` (``folder``: ``<home>/erasures``)."""
        return cls(Path(folder) / f"{name}.json", session, shared_db(records) if records is not None else None)

    @property
    def shared(self) -> bool:
        """Whether the journal lives in a shared store (a row), not a file of this machine."""
        return self._db is not None

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def set(self, **values: Any) -> None:
        """Record ``values`` durably: a file written to a temporary name, fsync'd, renamed; a
        store row in one committed statement."""
        self.data.update(values)
        if self._db is not None:
            write_journal(self._db, self.name, json.dumps(self.data, sort_keys=True))
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "w") as f:
            json.dump(self.data, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    @property
    def exists(self) -> bool:
        """Whether a run of this journal's event wrote it (now, in any process sharing it)."""
        if self._db is not None:
            return read_journal(self._db, self.name) is not None
        return self.path.exists()

    @property
    def finished(self) -> bool:
        return self.data.get("state") == "done"

    @property
    def pending(self) -> bool:
        """A run of this event began and did not finish: only a rerun of its steps completes it."""
        return self.exists and not self.finished
