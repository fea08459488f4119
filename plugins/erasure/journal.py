"""The erasure journal: one small JSON file per event, written before each step is
taken as done, so a rerun after a crash skips what is done and finishes the rest.

It holds step states and ids (thread names, key ids), never the target.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class Journal:
    def __init__(self, path: Path, session: str):
        self.path = Path(path)
        self.data: dict[str, Any] = {"session": session}
        if self.path.exists():
            self.data.update(json.loads(self.path.read_text()))

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def set(self, **values: Any) -> None:
        """Record ``values`` durably (write a temporary file, fsync, rename)."""
        self.data.update(values)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "w") as f:
            json.dump(self.data, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    @property
    def finished(self) -> bool:
        return self.data.get("state") == "done"

    @property
    def pending(self) -> bool:
        """A run of this event began and did not finish: only a rerun of its steps completes it."""
        return self.path.exists() and not self.finished
