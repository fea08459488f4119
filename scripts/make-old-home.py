"""Record the old-home fixture, ``tests/data/old_home/``, with an EARLIER unsee.

``tests/middleware/test_old_home.py`` opens that home with today's code: a home an earlier
version wrote must still list its sessions, audit and forget. So the fixture must be written by
the earlier version, never by the working tree. Make a frozen install of it (the venv's
editable install untouched) and put it first on ``PYTHONPATH``::

    git -C . worktree add /tmp/unsee-prev <commit>
    .venv/bin/pip install --no-deps --no-build-isolation --target /tmp/unsee-prev-site /tmp/unsee-prev
    PYTHONPATH=/tmp/unsee-prev-site .venv/bin/python scripts/make-old-home.py --commit <commit>
    git worktree remove --force /tmp/unsee-prev

(Run it as a script, as above: ``python -c`` or ``python -m`` from the repository root would put
the root first on ``sys.path`` and import the working tree's ``unsee/``. The script refuses an
``unsee`` imported from this checkout unless ``--allow-working-tree``.)

It runs the session of ``tests/support/old_home_agent.py`` (public API only) into
``tests/data/old_home/home/`` (replaced whole): unsee's files and the agent's ``SqliteSaver``
file ``langgraph.sqlite``. Every SQLite file's WAL is checkpointed (TRUNCATE) before the last
connection closes, and a ``-wal``/``-shm`` left behind is removed, so the home is its main
files only. ``tests/data/old_home/MADE_BY`` says which commit (``--commit``) made it, where
``unsee`` was imported from, and the versions of Python, LangChain and LangGraph.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "old_home"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commit", required=True, help="the commit of the unsee on PYTHONPATH (recorded in MADE_BY)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"where to write (default {OUT.relative_to(ROOT)})")
    ap.add_argument("--allow-working-tree", action="store_true",
                    help="record with this checkout's unsee (not an old-home fixture: for comparisons only)")
    args = ap.parse_args()

    import unsee

    where = Path(unsee.__file__).resolve()
    if where.is_relative_to(ROOT) and not args.allow_working_tree:
        print(f"unsee is imported from this checkout ({where}), not an earlier version: put a frozen install "
              "of it first on PYTHONPATH (see this script's docstring)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT / "tests" / "support"))  # (not the root: its unsee/ would shadow the frozen one)
    import old_home_agent as oh

    out: Path = args.out.resolve()
    home = out / "home"
    if out.exists():
        shutil.rmtree(out)
    home.mkdir(parents=True)

    fired: list = []
    u, agent, close = oh.open_home(home, fired=fired)
    oh.run(agent)
    sessions = [s.session_id for s in u.sessions()]  # (flushes every record to the store)
    close()
    assert sessions == [oh.THREAD], sessions
    assert fired == [("5521", "broken blender")], fired

    for db in sorted(home.glob("*.sqlite")):
        conn = sqlite3.connect(db)
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        conn.close()
        assert busy == 0, f"{db.name}: the WAL checkpoint was blocked (a connection still open?)"
    for extra in [*home.glob("*-wal"), *home.glob("*-shm"), *home.glob("*-journal")]:
        extra.unlink()

    made_by = {
        "commit": args.commit,
        "unsee": str(where.parent),
        "unsee_version": getattr(unsee, "__version__", None),
        "python": sys.version.split()[0],
        **{pkg: metadata.version(pkg) for pkg in ("langchain", "langchain-core", "langgraph",
                                                   "langgraph-checkpoint-sqlite")},
        "thread": oh.THREAD,
        "turns": len(oh.TURNS),
        "files": {p.name: p.stat().st_size for p in sorted(home.iterdir())},
    }
    (out / "MADE_BY").write_text(json.dumps(made_by, indent=2) + "\n")
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"wrote {out} ({total} bytes) with unsee from {where.parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
