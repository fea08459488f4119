"""Reading SQLite files byte by byte without breaking SQLite's locks.

SQLite locks its files with POSIX advisory locks, which belong to the process
and are all dropped when the process closes *any* descriptor of the file. An
audit that opened and closed ``lg.sqlite`` or its ``-shm`` in a process whose
saver holds a connection to it would silently drop that connection's locks:
another process then believes it is alone, re-initialises the shared WAL
index, and this process dies of SIGBUS or corrupts the database (seen in the
cross-process tests). So files of a SQLite database are read in a child
process (``python -I -m unsee.plugins.erasure.isolated``): it holds no lock,
and its closes drop nothing of ours. The target goes to the child on stdin,
never on its command line (visible to other users in ``/proc``).

Other files (sandbox directories, Jaeger JSON) are read in this process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db", "-wal", "-shm", "-journal")


def is_sqlite_family(path: str | Path) -> bool:
    """A SQLite database file or one of its companions, by name (reading it to look would be
    the very thing to avoid)."""
    return str(path).endswith(SQLITE_SUFFIXES)


def scan_isolated(paths: list[str], target: str | None = None, *, needles: list[bytes] = (),
                  digests: bool = False, timeout: float = 600) -> dict[str, dict]:
    """``{path: {"copies": n, "forms": {...}, "sha256": hex or None, "error": str or None}}``,
    read in a child process: copies of ``target`` in every form it takes on disk, or of the
    literal byte strings ``needles`` (e.g. destroyed key bytes). Missing files are left out."""
    return start_scan(paths, target, needles=needles, digests=digests, timeout=timeout)()


def start_scan(paths: list[str], target: str | None = None, *, needles: list[bytes] = (),
               digests: bool = False, timeout: float = 600) -> Callable[[], dict[str, dict]]:
    """:func:`scan_isolated` begun: the child reads the files while this process goes on (e.g.
    judges a saver's rows); the function returned waits for it and returns the same answer."""
    if not paths:
        return dict
    req = json.dumps({"paths": paths, "target": target, "needles": [n.hex() for n in needles],
                      "digests": digests})
    proc = subprocess.Popen([sys.executable, "-I", "-m", "unsee.plugins.erasure.isolated"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        proc.stdin.write(req)  # (the child reads all of stdin before it writes anything)
        proc.stdin.close()
    except BrokenPipeError:
        pass  # the child died at start: its stderr says why, below
    proc.stdin = None  # closed: communicate() must not flush it

    def result() -> dict[str, dict]:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        if proc.returncode != 0:
            raise OSError(f"the isolated scan failed: {err.strip()[-500:]}")
        return json.loads(out)

    return result


def _child() -> None:
    from .forms import Form, target_forms
    from .scan import scan_file, sha256_file

    req = json.loads(sys.stdin.read())
    forms = (list(target_forms(req["target"])) if req.get("target") else []) + [
        Form(f"needle {i}", bytes.fromhex(h)) for i, h in enumerate(req.get("needles") or [])]
    out: dict[str, dict] = {}
    for p in req["paths"]:
        if not Path(p).is_file():
            continue
        try:
            hit = scan_file(p, forms)
            out[p] = {"copies": hit.copies, "forms": hit.forms,
                      "sha256": sha256_file(p) if req.get("digests") else None, "error": None}
        except OSError as exc:
            out[p] = {"copies": 0, "forms": {}, "sha256": None, "error": str(exc)}
    sys.stdout.write(json.dumps(out))


if __name__ == "__main__":
    _child()
