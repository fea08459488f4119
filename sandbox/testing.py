"""The conformance suite every sandbox backend passes, third-party ones included.

Needs pytest, a dev dependency (``pip install 'unsee[dev]'``); importing
``unsee.sandbox`` never imports this module. Subclass
:class:`EnvironmentConformance` in a test module and provide an ``env``
fixture (inspect_ai / pytest style)::

    import pytest
    from unsee.sandbox import open_environment, register_backend
    from unsee.sandbox.testing import EnvironmentConformance

    register_backend("mine", MyEnvironment)

    class TestMine(EnvironmentConformance):
        @pytest.fixture
        def env(self):
            e = open_environment("mine")
            yield e
            e.close()

        @pytest.fixture            # optional: a backend that can keep snapshots
        def keeping_env(self, tmp_path):
            e = open_environment("mine", keep=True)
            yield e
            e.discard()

(``pytest.register_assert_rewrite("unsee.sandbox.testing")`` in the
``conftest.py``, before the import, gives detailed assertion messages.)

What the suite assumes of a backend:

- Tests of a capability the environment lacks (``env.capabilities``) are
  skipped; using a lacking capability must raise ``NotSupported``.
- ``exec`` understands ``echo ARGS``, ``exit N`` and ``sleep SECS`` (a shell
  does; the python backend implements them as commands). Set ``shell = False``
  on the subclass when ``exec`` is not a POSIX shell that sees the files.
- ``keeping_env`` opens an environment that keeps its snapshots for later
  processes (``local``: ``keep=True`` with a root; ``docker``:
  ``keep_snapshots=True``); its teardown should ``discard()`` it. Without that
  fixture the tests that need it are skipped.
"""

from __future__ import annotations

import time
from typing import ClassVar

import pytest

from .base import EXEC, FILES, SHADOW, SNAPSHOT, Environment, ExecResult, SnapshotId, options_of
from .errors import (
    EnvironmentClosed,
    ExecFailed,
    ExecTimeout,
    InvalidOption,
    NotSupported,
    PathNotFound,
    SnapshotNotFound,
)

__all__ = ["EnvironmentConformance", "need"]


def need(env: Environment, *caps: str) -> None:
    """Skip the calling test unless ``env`` supports every capability in ``caps``."""
    missing = [c for c in caps if not env.supports(c)]
    if missing:
        pytest.skip(f"{env.backend} lacks {missing}")


class EnvironmentConformance:
    """The suite. Subclasses provide the ``env`` (and optionally ``keeping_env``) fixture."""

    #: ``exec`` runs POSIX shell commands that see the environment's files
    shell: ClassVar[bool] = True

    @pytest.fixture
    def env(self) -> Environment:
        raise NotImplementedError(f"{type(self).__name__} must provide an `env` fixture")

    @pytest.fixture
    def keeping_env(self) -> Environment:
        pytest.skip(f"{type(self).__name__} has no `keeping_env` fixture (the backend keeps no snapshots)")

    # -- exec -------------------------------------------------------------------

    def test_exec_echo(self, env):
        need(env, EXEC)
        res = env.exec("echo hello world")
        assert isinstance(res, ExecResult)
        assert res.exit_code == 0 and res.ok
        assert res.stdout == b"hello world\n"
        assert res.text == "hello world\n"

    def test_exec_argv_form(self, env):
        need(env, EXEC)
        assert env.exec(["echo", "a b"]).stdout == b"a b\n"

    def test_exec_nonzero_exit_is_a_result(self, env):
        need(env, EXEC)
        res = env.exec("exit 3")
        assert res.exit_code == 3 and not res.ok
        with pytest.raises(ExecFailed):
            res.check()

    def test_exec_timeout_kills(self, env):
        need(env, EXEC)
        t0 = time.monotonic()
        with pytest.raises(ExecTimeout) as ei:
            env.exec("sleep 5", timeout=0.5)
        assert isinstance(ei.value, TimeoutError)
        assert time.monotonic() - t0 < 4
        assert env.exec("echo alive").stdout == b"alive\n"  # still usable

    def test_exec_unstartable_program(self, env):
        need(env, EXEC)
        with pytest.raises(ExecFailed):
            env.exec(["/nonexistent/program-xyz"])

    def test_missing_capabilities_raise_not_supported(self, env):
        calls = {
            EXEC: lambda: env.exec("echo hi"),
            FILES: lambda: env.read_file("x"),
            SNAPSHOT: env.snapshot,
            SHADOW: env.shadow,
        }
        missing = [cap for cap in calls if not env.supports(cap)]
        if not missing:
            pytest.skip(f"{env.backend} supports every capability")
        for cap in missing:
            with pytest.raises(NotSupported) as ei:
                calls[cap]()
            assert isinstance(ei.value, NotImplementedError)

    # -- options ----------------------------------------------------------------

    def test_unknown_option_is_rejected(self, env):
        accepted = options_of(type(env))
        if accepted is None:
            pytest.skip(f"{type(env).__name__} accepts any option (its constructor takes **kwargs)")
        with pytest.raises(InvalidOption) as ei:
            type(env).check_options({"no_such_option_xyz": 1})
        assert isinstance(ei.value, TypeError)
        assert ei.value.unknown == ["no_such_option_xyz"]
        type(env).check_options(dict.fromkeys(accepted))  # what it declares passes

    # -- files ------------------------------------------------------------------

    def test_write_read_roundtrip(self, env):
        need(env, FILES)
        blob = bytes(range(256)) * 10
        env.write_file("data.bin", blob)
        env.write_file("nested/dir/note.txt", "héllo")
        assert env.read_file("data.bin") == blob
        assert env.read_file("nested/dir/note.txt") == "héllo".encode()
        env.write_file("data.bin", b"replaced")
        assert env.read_file("data.bin") == b"replaced"

    def test_file_modes(self, env):
        need(env, FILES)
        env.write_file("plain.txt", b"x")
        env.write_file("tool.sh", b"#!/bin/sh\necho hi\n", mode=0o755)
        env.write_file("secret", b"s", mode=0o600)
        assert env.file_mode("plain.txt") == 0o644
        assert env.file_mode("tool.sh") == 0o755
        assert env.file_mode("secret") == 0o600

    def test_exec_sees_written_files(self, env):
        need(env, FILES, EXEC)
        if not self.shell:
            pytest.skip(f"{env.backend}: exec is not a shell that sees the files")
        env.write_file("in.txt", b"42\n")
        assert env.exec("cat in.txt").stdout == b"42\n"
        env.exec("echo out > out.txt").check()
        assert env.read_file("out.txt") == b"out\n"

    def test_bad_paths(self, env):
        need(env, FILES)
        for op in (env.read_file, env.remove_file, env.file_mode):
            with pytest.raises(PathNotFound) as ei:
                op("no/such/file")
            assert isinstance(ei.value, FileNotFoundError)

    def test_remove_file(self, env):
        need(env, FILES)
        env.write_file("gone.txt", b"bye")
        env.remove_file("gone.txt")
        with pytest.raises(FileNotFoundError):
            env.read_file("gone.txt")

    # -- snapshot / restore -----------------------------------------------------

    def test_snapshot_restore_is_exact(self, env):
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

    def test_restore_back_and_forth(self, env):
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

    def test_unknown_snapshot(self, env):
        need(env, SNAPSHOT)
        bogus = SnapshotId(env.backend, env.env_id, 999, "sha256:" + "0" * 64)
        with pytest.raises(SnapshotNotFound) as ei:
            env.restore(bogus)
        assert isinstance(ei.value, LookupError)
        other = SnapshotId("no-such-backend", env.env_id, 1, "x")
        with pytest.raises(SnapshotNotFound):
            env.restore(other)

    # -- shadow -----------------------------------------------------------------

    def test_shadow_isolation(self, env):
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

    def test_shadow_has_its_own_snapshots(self, env):
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

    # -- close / discard ----------------------------------------------------------

    def test_closed_environment(self, env):
        env.close()
        env.close()  # idempotent
        assert env.closed
        with pytest.raises(EnvironmentClosed):
            env.read_file("x") if env.supports(FILES) else env.exec("echo")

    def test_discard_closes_and_is_idempotent(self, env):
        if env.supports(FILES):
            env.write_file("f", b"x")
        env.discard()
        env.discard()  # idempotent
        env.close()  # and close after it is a no-op
        assert env.closed
        with pytest.raises(EnvironmentClosed):
            env.read_file("f") if env.supports(FILES) else env.exec("echo")

    def test_discarding_a_shadow_leaves_the_parent_alone(self, env):
        need(env, FILES, SHADOW)
        env.write_file("f", b"parent")
        shadow = env.shadow()
        shadow.write_file("f", b"shadow")
        shadow.discard()
        shadow.discard()
        assert shadow.closed and not env.closed
        assert env.read_file("f") == b"parent"
        if env.supports(SNAPSHOT):
            snap = env.snapshot()
            env.write_file("f", b"later")
            env.restore(snap)
            assert env.read_file("f") == b"parent"

    def test_shadow_of_a_keeping_environment_keeps_its_snapshots(self, keeping_env):
        """A committed replay makes a shadow the session's environment; the snapshots it took
        are on the new checkpoints, so they outlive the shadow's close."""
        env = keeping_env
        need(env, FILES, SNAPSHOT, SHADOW)
        env.write_file("f", b"parent")
        shadow = env.shadow()
        shadow.write_file("f", b"shadow")
        snap = shadow.snapshot()
        shadow.close()
        assert shadow.closed
        env.restore(snap)  # the shadow is gone; what it kept is not
        assert env.read_file("f") == b"shadow"

    def test_discard_deletes_what_a_keeping_shadow_kept(self, keeping_env):
        env = keeping_env
        need(env, FILES, SNAPSHOT, SHADOW)
        env.write_file("f", b"parent")
        shadow = env.shadow()
        shadow.write_file("f", b"shadow")
        snap = shadow.snapshot()
        shadow.discard()
        shadow.discard()  # idempotent
        assert shadow.closed
        with pytest.raises(SnapshotNotFound):
            env.restore(snap)
        assert env.read_file("f") == b"parent"
