"""The conformance suite every sandbox backend passes (local, python, docker).

A backend that declares it lacks a capability (``env.capabilities``) has the
tests for it skipped, and must raise NotSupported when the capability is used.
"""

from __future__ import annotations

import time

import pytest

from unsee.sandbox import (
    EXEC,
    FILES,
    SHADOW,
    SNAPSHOT,
    EnvironmentClosed,
    ExecFailed,
    ExecResult,
    ExecTimeout,
    NotSupported,
    PathNotFound,
    SnapshotId,
    SnapshotNotFound,
)


def need(env, *caps):
    missing = [c for c in caps if not env.supports(c)]
    if missing:
        pytest.skip(f"{env.backend} lacks {missing}")


# -- exec -----------------------------------------------------------------------


def test_exec_echo(env):
    need(env, EXEC)
    res = env.exec("echo hello world")
    assert isinstance(res, ExecResult)
    assert res.exit_code == 0 and res.ok
    assert res.stdout == b"hello world\n"
    assert res.text == "hello world\n"


def test_exec_argv_form(env):
    need(env, EXEC)
    assert env.exec(["echo", "a b"]).stdout == b"a b\n"


def test_exec_nonzero_exit_is_a_result(env):
    need(env, EXEC)
    res = env.exec("exit 3")
    assert res.exit_code == 3 and not res.ok
    with pytest.raises(ExecFailed):
        res.check()


def test_exec_timeout_kills(env):
    need(env, EXEC)
    t0 = time.monotonic()
    with pytest.raises(ExecTimeout) as ei:
        env.exec("sleep 5", timeout=0.5)
    assert isinstance(ei.value, TimeoutError)
    assert time.monotonic() - t0 < 4
    assert env.exec("echo alive").stdout == b"alive\n"  # still usable


def test_exec_unstartable_program(env):
    need(env, EXEC)
    with pytest.raises(ExecFailed):
        env.exec(["/nonexistent/program-xyz"])


def test_exec_not_supported_is_typed(tmp_path):
    from unsee.sandbox import open_environment

    env = open_environment("python", obj={})
    assert EXEC not in env.capabilities
    with pytest.raises(NotSupported) as ei:
        env.exec("echo hi")
    assert isinstance(ei.value, NotImplementedError)


# -- files ------------------------------------------------------------------------


def test_write_read_roundtrip(env):
    need(env, FILES)
    blob = bytes(range(256)) * 10
    env.write_file("data.bin", blob)
    env.write_file("nested/dir/note.txt", "héllo")
    assert env.read_file("data.bin") == blob
    assert env.read_file("nested/dir/note.txt") == "héllo".encode()
    env.write_file("data.bin", b"replaced")
    assert env.read_file("data.bin") == b"replaced"


def test_file_modes(env):
    need(env, FILES)
    env.write_file("plain.txt", b"x")
    env.write_file("tool.sh", b"#!/bin/sh\necho hi\n", mode=0o755)
    env.write_file("secret", b"s", mode=0o600)
    assert env.file_mode("plain.txt") == 0o644
    assert env.file_mode("tool.sh") == 0o755
    assert env.file_mode("secret") == 0o600


def test_exec_sees_written_files(env):
    need(env, FILES, EXEC)
    if env.backend == "python":
        pytest.skip("python commands act on the object, not a shell")
    env.write_file("in.txt", b"42\n")
    assert env.exec("cat in.txt").stdout == b"42\n"
    env.exec("echo out > out.txt").check()
    assert env.read_file("out.txt") == b"out\n"


def test_bad_paths(env):
    need(env, FILES)
    for op in (env.read_file, env.remove_file, env.file_mode):
        with pytest.raises(PathNotFound) as ei:
            op("no/such/file")
        assert isinstance(ei.value, FileNotFoundError)


def test_remove_file(env):
    need(env, FILES)
    env.write_file("gone.txt", b"bye")
    env.remove_file("gone.txt")
    with pytest.raises(FileNotFoundError):
        env.read_file("gone.txt")


# -- snapshot / restore --------------------------------------------------------------


def test_snapshot_restore_is_exact(env):
    need(env, FILES, SNAPSHOT)
    env.write_file("keep.txt", b"original")
    env.write_file("run.sh", b"#!/bin/sh\n", mode=0o755)
    env.write_file("dir/deep.txt", b"deep")
    snap = env.snapshot()
    assert isinstance(snap, SnapshotId) and snap.backend == env.backend

    env.write_file("keep.txt", b"changed")
    env.remove_file("run.sh")  # a deleted file must come back
    env.remove_file("dir/deep.txt")
    env.write_file("new.txt", b"added after the snapshot")  # must disappear
    env.write_file("keep2.txt", b"x", mode=0o600)

    env.restore(snap)
    assert env.read_file("keep.txt") == b"original"
    assert env.read_file("run.sh") == b"#!/bin/sh\n"
    assert env.file_mode("run.sh") == 0o755
    assert env.read_file("dir/deep.txt") == b"deep"
    for gone in ("new.txt", "keep2.txt"):
        with pytest.raises(PathNotFound):
            env.read_file(gone)


def test_restore_back_and_forth(env):
    need(env, FILES, SNAPSHOT)
    env.write_file("v", b"1")
    s1 = env.snapshot()
    env.write_file("v", b"2")
    s2 = env.snapshot()
    assert s1 != s2 and s2.seq > s1.seq
    env.restore(s1)
    assert env.read_file("v") == b"1"
    env.restore(s2)
    assert env.read_file("v") == b"2"
    env.restore(s1)
    env.write_file("v", b"3")  # restoring does not consume the snapshot
    env.restore(s1)
    assert env.read_file("v") == b"1"


def test_unknown_snapshot(env):
    need(env, SNAPSHOT)
    bogus = SnapshotId(env.backend, env.env_id, 999, "sha256:" + "0" * 64)
    with pytest.raises(SnapshotNotFound) as ei:
        env.restore(bogus)
    assert isinstance(ei.value, LookupError)
    other = SnapshotId("no-such-backend", env.env_id, 1, "x")
    with pytest.raises(SnapshotNotFound):
        env.restore(other)


# -- shadow -------------------------------------------------------------------------


def test_shadow_isolation(env):
    need(env, FILES, SHADOW)
    env.write_file("shared.txt", b"before")
    shadow = env.shadow()
    try:
        assert shadow.read_file("shared.txt") == b"before"  # clone of the current state
        shadow.write_file("shared.txt", b"shadow wrote")
        shadow.write_file("only-in-shadow.txt", b"x")
        shadow.remove_file("shared.txt")
        env.write_file("after.txt", b"parent wrote later")
        assert env.read_file("shared.txt") == b"before"
        with pytest.raises(PathNotFound):
            env.read_file("only-in-shadow.txt")
        with pytest.raises(PathNotFound):
            shadow.read_file("after.txt")
    finally:
        shadow.close()
    assert env.read_file("shared.txt") == b"before"  # closing the shadow leaves us alone


def test_shadow_has_its_own_snapshots(env):
    need(env, FILES, SHADOW, SNAPSHOT)
    env.write_file("f", b"parent")
    shadow = env.shadow()
    try:
        s = shadow.snapshot()
        shadow.write_file("f", b"changed")
        shadow.restore(s)
        assert shadow.read_file("f") == b"parent"
    finally:
        shadow.close()
    assert env.read_file("f") == b"parent"


def test_closed_environment(env):
    env.close()
    env.close()  # idempotent
    assert env.closed
    with pytest.raises(EnvironmentClosed):
        env.read_file("x") if env.supports(FILES) else env.exec("echo")
