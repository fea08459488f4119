"""Re-running a recorded write sequence from a snapshot (a retry in a new
process: a new Ledger on the same file) reproduces the same filesystem, on
every backend; the external effects in it fire once."""

from __future__ import annotations

import pytest

from unsee.sandbox import FILES, SNAPSHOT, PathNotFound
from unsee.sandbox.ledger import Ledger

# A recorded session: (tool, args). Writes, overwrites, deletions, modes, and
# one external call in the middle.
SEQUENCE = [
    ("write", {"path": "notes/todo.md", "data": "- buy milk\n", "mode": 0o644}),
    ("write", {"path": "bin/run", "data": "#!/bin/sh\necho run\n", "mode": 0o755}),
    ("write", {"path": "draft.txt", "data": "v1", "mode": 0o600}),
    ("notify", {"to": "ops", "msg": "draft ready"}),
    ("write", {"path": "draft.txt", "data": "v2", "mode": 0o640}),
    ("remove", {"path": "notes/todo.md"}),
    ("write", {"path": "notes/done.md", "data": "- milk\n", "mode": 0o644}),
]
PATHS = ["notes/todo.md", "bin/run", "draft.txt", "notes/done.md", "seed.txt"]


def fs_state(env) -> dict[str, tuple[bytes, int] | None]:
    state = {}
    for p in PATHS:
        try:
            state[p] = (env.read_file(p), env.file_mode(p))
        except PathNotFound:
            state[p] = None
    return state


def play(env, ledger: Ledger, session: str, outbox: list) -> list:
    outcomes = []
    for tool, args in SEQUENCE:
        if tool == "write":
            fn = lambda a=args: env.write_file(a["path"], a["data"], mode=a["mode"])  # noqa: E731
            effect = "write"
        elif tool == "remove":
            fn = lambda a=args: env.remove_file(a["path"])  # noqa: E731
            effect = "write"
        else:
            fn = lambda a=args: outbox.append(a) or "sent"  # noqa: E731
            effect = "external"
        outcomes.append(ledger.run(session, tool, args, fn, effect=effect).disposition)
    return outcomes


def test_replay_from_snapshot_reproduces_filesystem(env, tmp_path):
    if not (env.supports(FILES) and env.supports(SNAPSHOT)):
        pytest.skip("needs files and snapshots")
    env.write_file("seed.txt", b"before the session")
    start = env.snapshot()
    ledger = Ledger(tmp_path / "ledger.sqlite")
    outbox: list = []

    live = play(env, ledger, "sess", outbox)
    assert live.count("fired") == 1
    original = fs_state(env)
    assert original["notes/todo.md"] is None and original["draft.txt"] == (b"v2", 0o640)

    env.write_file("seed.txt", b"drift after the session")
    env.restore(start)
    with Ledger(ledger.path) as retry:  # a new process: the call ids start again
        replayed = play(env, retry, "sess", outbox)
    assert fs_state(env) == original
    assert replayed.count("replayed") == 1 and "fired" not in replayed
    assert len(outbox) == 1  # the notification went out once

    # a re-run in a shadow restored to the same snapshot agrees too, and leaves env alone
    env.write_file("seed.txt", b"live state")
    with env.shadow() as sh:
        sh.restore(start)
        with Ledger(ledger.path) as retry:
            play(sh, retry, "sess", outbox)
        assert fs_state(sh) == original
    assert env.read_file("seed.txt") == b"live state"
    assert len(outbox) == 1
    ledger.close()
