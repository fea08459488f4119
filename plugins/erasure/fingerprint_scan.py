"""Byte-level audit by keyed fingerprints (``subject_plan.Fingerprinter``), files of SQLite
databases read in a child process like every other byte scan (``isolated.py``: closing a
descriptor of a database this process has open would drop its locks).

For each file: how many word pairs of its bytes are fingerprints. For each SQLite database
(main file): the same per owner of its live rows (``owners.OWNER_COLUMNS``), so hits inside
another session's rows are attributed to it, as ``owners.attribute_sqlite`` does for a
target's copies. The key and the fingerprints go to the child on stdin; no text is involved.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .isolated import is_sqlite_family
from .subject_plan import Fingerprinter


def scan_fingerprints(paths: list[str], fp: Fingerprinter, fingerprints: list[str],
                      timeout: float = 600) -> dict[str, dict]:
    """``{"files": {path: hits}, "rows": {database: {owner: hits}}}``; other files than SQLite
    ones are read here; missing files are left out."""
    out: dict[str, dict] = {"files": {}, "rows": {}}
    if not fingerprints:
        return out
    fps = frozenset(fingerprints)
    lite = [p for p in paths if is_sqlite_family(p)]
    for p in paths:
        if p not in lite and Path(p).is_file():
            out["files"][p] = fp.hits(Path(p).read_bytes(), fps)
    if lite:
        req = json.dumps({"paths": lite, "key": fp.key.hex(), "fingerprints": sorted(fps)})
        res = subprocess.run([sys.executable, "-I", "-m", "unsee.plugins.erasure.fingerprint_scan"], input=req,
                             capture_output=True, text=True, timeout=timeout)
        if res.returncode != 0:
            raise OSError(f"the isolated fingerprint scan failed: {res.stderr.strip()[-500:]}")
        got = json.loads(res.stdout)
        out["files"].update(got["files"])
        out["rows"].update(got["rows"])
    return out


def tree_files(paths: list[Path]) -> list[str]:
    """Files of ``paths``, directories walked (a local sandbox's stored items)."""
    out = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            for root, _, files in os.walk(p):
                out += [str(Path(root) / f) for f in files if (Path(root) / f).is_file()]
        elif p.is_file():
            out.append(str(p))
    return out


def _rows(path: str, fp: Fingerprinter, fps: frozenset) -> dict[str, int]:
    import sqlite3

    from .owners import OWNER_COLUMNS

    per: dict[str, int] = {}
    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
            cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
            owner = next((c for c in OWNER_COLUMNS if c in cols), None)
            others = [c for c in cols if c != owner]
            if owner is None or not others:
                continue
            sel = ", ".join(f'"{c}"' for c in [owner, *others])
            for row in conn.execute(f'SELECT {sel} FROM "{table}"'):
                n = sum(fp.hits(bytes(v) if isinstance(v, memoryview) else v, fps)
                        for v in row[1:] if isinstance(v, (str, bytes, memoryview)))
                if n:
                    per[str(row[0])] = per.get(str(row[0]), 0) + n
    finally:
        conn.close()
    return per


def _child() -> None:
    from .owners import main_file

    req = json.loads(sys.stdin.read())
    fp, fps = Fingerprinter(bytes.fromhex(req["key"])), frozenset(req["fingerprints"])
    out: dict[str, dict] = {"files": {}, "rows": {}}
    for p in req["paths"]:
        if not Path(p).is_file():
            continue
        with open(p, "rb") as f:
            out["files"][p] = fp.hits(f.read(), fps)
        db = main_file(p)
        if db == p and out["files"][p]:
            try:
                out["rows"][p] = _rows(p, fp, fps)
            except Exception:  # (not a database, or unreadable: its bytes stay in scope)
                pass
    sys.stdout.write(json.dumps(out))


if __name__ == "__main__":
    _child()
