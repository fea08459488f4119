"""Sandbox snapshots in a real OCI registry (``unsee.sandbox.oci``, ``unsee.sandbox.remote``, the
``registry=`` option of the docker and local backends, remote items in ``unsee.sandbox.storage``).

The registry tests use the shared private registry (``registry`` fixture). Those that need deletes
disabled, or that run garbage-collect (which must not race other sessions' pushes), start a
registry of their own (``own_registry``) on a temp dir.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import tarfile
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from unsee.sandbox import (
    OciSnapshotStore,
    RegistryCannotDelete,
    RegistryClient,
    RegistryUnavailable,
    SandboxUnavailable,
    SnapshotId,
    SnapshotNotFound,
    SnapshotStore,
    StoredItemNotFound,
    collect_registry_garbage,
    delete_items,
    environment_items,
    open_environment,
    read_item,
    remote_item,
    snapshot_items,
)
from unsee.sandbox.oci import OCI_MANIFEST, base_url, format_ref, parse_ref
from unsee.sandbox.remote import pack_dir, unpack_to

SECRET = b"the secret the user asked to forget"


def _repo() -> str:
    return f"unsee/t-{uuid.uuid4().hex[:8]}"


# -- pure logic -------------------------------------------------------------------------------


def test_refs_and_addresses():
    ref = format_ref("127.0.0.1:5000", "unsee/s-ab12", "sha256:" + "a" * 64)
    assert ref == "127.0.0.1:5000/unsee/s-ab12@sha256:" + "a" * 64
    r = parse_ref(ref)
    assert (r.registry, r.repository, r.digest) == ("127.0.0.1:5000", "unsee/s-ab12", "sha256:" + "a" * 64)
    assert str(r) == ref
    assert parse_ref("https://reg.example:443/a/b@sha256:" + "0" * 64).registry == "https://reg.example:443"
    for bad in ("no-digest", "127.0.0.1:5000@sha256:" + "a" * 64, "r/Upper@sha256:" + "a" * 64,
                "r/x@sha256:short"):
        with pytest.raises(ValueError):
            parse_ref(bad)
    assert base_url("127.0.0.1:5000") == "http://127.0.0.1:5000"
    assert base_url("localhost:5000") == "http://localhost:5000"
    assert base_url("reg.example:5000") == "https://reg.example:5000"
    assert base_url("http://reg.example:5000") == "http://reg.example:5000"
    with pytest.raises(ValueError):
        base_url("ftp://x")


def test_snapshot_id_remote_is_optional_and_not_in_str():
    s = SnapshotId("local", "e1", 1, "/r/snapshots/000001")
    assert s.remote == "" and str(s) == "local:e1:1"
    t = SnapshotId("local", "e1", 1, "/r/snapshots/000001", "h:1/unsee/x@sha256:" + "0" * 64)
    assert str(t) == "local:e1:1" and t.remote.startswith("h:1/")


def _tree(root: Path) -> None:
    (root / "d/e").mkdir(parents=True)
    (root / "d/e/f.txt").write_bytes(SECRET)
    (root / "run.sh").write_bytes(b"#!/bin/sh\n")
    os.chmod(root / "run.sh", 0o755)
    (root / "private").write_bytes(b"p")
    os.chmod(root / "private", 0o600)
    os.symlink("/etc/hostname", root / "abs-link")
    os.symlink("d/e/f.txt", root / "rel-link")


def test_pack_dir_is_deterministic_and_round_trips(tmp_path):
    a = tmp_path / "a"
    a.mkdir()
    _tree(a)
    first = pack_dir(a)
    time.sleep(0.01)
    assert pack_dir(a) == first  # same tree, same bytes (same digest)
    b = tmp_path / "b"
    shutil.copytree(a, b, symlinks=True)
    assert pack_dir(b) == first  # and another copy of it too (mtimes kept by copytree)
    with tarfile.open(fileobj=io.BytesIO(first), mode="r:gz") as tf:
        members = tf.getmembers()
    assert [m.name for m in members] == [".", "abs-link", "d", "private", "rel-link", "run.sh", "d/e",
                                         "d/e/f.txt"]  # sorted within each directory, top-down
    assert {(m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, "", "")}
    out = unpack_to(first, tmp_path / "out")
    assert (out / "d/e/f.txt").read_bytes() == SECRET
    assert (out / "run.sh").stat().st_mode & 0o777 == 0o755
    assert (out / "private").stat().st_mode & 0o777 == 0o600
    assert os.readlink(out / "abs-link") == "/etc/hostname"
    assert os.readlink(out / "rel-link") == "d/e/f.txt"


def test_unpack_refuses_names_outside_the_destination(tmp_path):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tf:
        ti = tarfile.TarInfo("../escaped.txt")
        ti.size = 1
        tf.addfile(ti, io.BytesIO(b"x"))
    with pytest.raises(tarfile.FilterError):
        unpack_to(raw.getvalue(), tmp_path / "out")
    assert not (tmp_path / "escaped.txt").exists()
    assert not (tmp_path / "out").exists()  # a failed unpack leaves nothing
    assert [p.name for p in tmp_path.iterdir()] == []


def test_local_options_are_checked_before_anything(tmp_path):
    with pytest.raises(ValueError):
        open_environment("local", root=tmp_path / "x", repository="unsee/a")  # no registry
    with pytest.raises(ValueError):
        open_environment("local", root=tmp_path / "x", registry="127.0.0.1:1", repository="Bad Name")
    with pytest.raises(ValueError):
        open_environment("local", root=tmp_path / "x", registry="127.0.0.1:1", snapshot_store=_DictStore())
    with pytest.raises(TypeError):
        open_environment("local", root=tmp_path / "x", snapshot_store=object())


class _DictStore:
    """A SnapshotStore in a dict: the contract's shape, as another plugin implements it."""

    def __init__(self):
        self.data: dict[str, bytes] = {}

    def put(self, name: str, data: bytes) -> str:
        ref = f"dict:{name}:{uuid.uuid4().hex[:6]}"
        self.data[ref] = data
        return ref

    def get(self, ref: str) -> bytes:
        try:
            return self.data[ref]
        except KeyError:
            raise StoredItemNotFound(ref) from None

    def delete(self, ref: str) -> bool:
        return self.data.pop(ref, None) is not None


def test_local_backend_with_any_snapshot_store(tmp_path):
    store = _DictStore()
    assert isinstance(store, SnapshotStore)
    env = open_environment("local", root=tmp_path / "a", keep=True, snapshot_store=store)
    env.write_file("notes/s.txt", SECRET)
    snap = env.snapshot()
    assert snap.remote in store.data and snap.remote.startswith(f"dict:{env.env_id}-1:")
    other = open_environment("local", root=tmp_path / "b", keep=False, snapshot_store=store)
    shutil.rmtree(snap.ref)  # this machine never had it
    other.restore(snap)
    assert other.read_file("notes/s.txt") == SECRET
    other.close()
    assert not (tmp_path / "b").exists()  # its pulled copy went with it
    assert remote_item(snap) is None  # not a registry: the store's owner erases it
    env.discard()
    assert store.data == {}  # discard deletes what it pushed
    with pytest.raises(SnapshotNotFound):
        open_environment("local", root=tmp_path / "c", snapshot_store=store).restore(snap)


# -- the registry API -------------------------------------------------------------------------


@pytest.mark.registry
def test_client_round_trip(registry):
    c = RegistryClient(registry)
    c.ping()
    repo = _repo()
    assert c.tags(repo) == []
    # unique bytes: the shared registry may have garbage-collected an earlier run's (see push_manifest)
    cfg, layer = f'{{"repo":"{repo}"}}'.encode(), f"layer bytes of {repo}".encode()
    cd, ld = c.push_blob(repo, cfg), c.push_blob(repo, layer)
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                "config": {"mediaType": "application/vnd.unsee.test+json", "digest": cd, "size": len(cfg)},
                "layers": [{"mediaType": "application/vnd.unsee.test.layer", "digest": ld, "size": len(layer)}]}
    digest = c.push_manifest(repo, "t1", manifest)
    assert repo in c.catalog()
    assert c.tags(repo) == ["t1"]
    got = c.manifest(repo, "t1")
    assert got[0] == digest and got[1] == OCI_MANIFEST and got[2]["layers"][0]["digest"] == ld
    assert c.manifest_digest(repo, "t1") == digest
    assert b"".join(c.blob(repo, ld)) == layer
    assert c.delete_manifest(repo, digest) is True
    assert c.delete_manifest(repo, digest) is False
    assert c.manifest(repo, digest) is None and c.tags(repo) == []
    assert c.delete_blob(repo, ld) is True and c.delete_blob(repo, ld) is False
    assert c.blob(repo, ld) is None
    c.delete_blob(repo, cd)


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_unreachable_registry_is_typed():
    addr = f"127.0.0.1:{_free_port()}"
    with pytest.raises(RegistryUnavailable) as ei:
        RegistryClient(addr, timeout=2).ping()
    assert isinstance(ei.value, SandboxUnavailable) and ei.value.address == addr


@pytest.fixture
def own_registry(tmp_path_factory):
    """Start a registry of this test's own: ``start(delete=True)`` -> (address, config path, storage)."""
    if shutil.which("docker-registry") is None:
        pytest.skip("docker-registry is not installed (scripts/registry-up.sh installs it)")
    procs = []

    def start(delete: bool = True, cache: bool = False):
        d = tmp_path_factory.mktemp("registry")
        port = _free_port()
        (d / "storage").mkdir()
        (d / "config.yml").write_text(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
            f"    rootdirectory: {d}/storage\n  delete:\n    enabled: {'true' if delete else 'false'}\n"
            + ("  cache:\n    blobdescriptor: inmemory\n" if cache else "")
            + f"http:\n  addr: 127.0.0.1:{port}\n")
        log = open(d / "registry.log", "wb")
        procs.append(subprocess.Popen(["docker-registry", "serve", str(d / "config.yml")], stdout=log,
                                      stderr=subprocess.STDOUT))
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        return f"127.0.0.1:{port}", d / "config.yml", d / "storage"

    yield start
    for p in procs:
        p.terminate()
        p.wait(timeout=10)


@pytest.mark.registry
def test_a_registry_without_deletes_is_named(own_registry, tmp_path):
    addr, _, _ = own_registry(delete=False)
    store = OciSnapshotStore(addr, "unsee/nodelete")
    ref = store.put("e-1", b"data")
    with pytest.raises(RegistryCannotDelete) as ei:
        store.delete(ref)
    assert ei.value.address == addr and ei.value.status == 405 and isinstance(ei.value, PermissionError)
    assert store.get(ref) == b"data"  # nothing changed


@pytest.mark.registry
def test_a_manifest_the_registry_accepts_but_does_not_serve_is_an_error(own_registry):
    """docker-registry 2.8 with the in-memory blob descriptor cache, after a garbage-collect,
    accepts a manifest with the bytes of one it collected and then answers 404 for it."""
    from unsee.sandbox import RegistryError
    from unsee.sandbox.oci import garbage_collect

    def push(c):
        cd, ld = c.push_blob("a/b", b'{"a":1}'), c.push_blob("a/b", b"L")
        return c.push_manifest("a/b", "t", {
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.unsee.test+json", "digest": cd, "size": 7},
            "layers": [{"mediaType": "application/vnd.unsee.test.layer", "digest": ld, "size": 1}]})

    for cache in (True, False):
        addr, config, _ = own_registry(cache=cache)
        c = RegistryClient(addr)
        c.delete_manifest("a/b", push(c))
        assert "blob eligible for deletion" in garbage_collect(config)
        if cache:
            with pytest.raises(RegistryError, match="does not serve it"):
                push(c)
        else:
            assert c.manifest("a/b", push(c)) is not None


# -- local backend + registry -------------------------------------------------------------------


@pytest.mark.registry
def test_local_snapshot_is_pushed_and_restores_on_another_root(registry, tmp_path):
    repo = _repo()
    env = open_environment("local", root=tmp_path / "a", keep=True, registry=registry, repository=repo)
    env.write_file("notes/s.txt", SECRET)
    env.write_file("tool.sh", b"#!/bin/sh\n", mode=0o755)
    snap = env.snapshot()
    r = parse_ref(snap.remote)
    assert (r.registry, r.repository) == (registry, repo)
    assert RegistryClient(registry).tags(repo) == [f"{env.env_id}-1"]
    shutil.rmtree(snap.ref)  # as on a machine that never had it
    other = open_environment("local", root=tmp_path / "elsewhere", keep=False)  # no registry option
    other.restore(snap)
    assert other.read_file("notes/s.txt") == SECRET and other.file_mode("tool.sh") == 0o755
    assert not any((tmp_path / "elsewhere" / "pulled").iterdir())  # it became the workspace
    other.close()
    # a shadow pushes to the same repository under its own env id
    sh = env.shadow()
    s2 = sh.snapshot()
    assert parse_ref(s2.remote).repository == repo
    assert f"{sh.env_id}-1" in RegistryClient(registry).tags(repo)
    sh.discard()
    assert f"{sh.env_id}-1" not in RegistryClient(registry).tags(repo)
    env.discard()
    assert RegistryClient(registry).tags(repo) == []
    with pytest.raises(SnapshotNotFound):
        open_environment("local", root=tmp_path / "third", keep=False).restore(snap)


@pytest.mark.registry
def test_a_failed_push_leaves_no_snapshot(tmp_path):
    env = open_environment("local", root=tmp_path / "a", keep=True, registry=f"127.0.0.1:{_free_port()}")
    env.write_file("f", b"x")
    with pytest.raises(RegistryUnavailable):
        env.snapshot()
    assert list((tmp_path / "a" / "snapshots").iterdir()) == []
    env.discard()


@pytest.mark.registry
def test_local_remote_items_read_delete_and_collect(own_registry, tmp_path, monkeypatch):
    addr, config, storage = own_registry()
    repo = "unsee/s-local"
    env = open_environment("local", root=tmp_path / "a", keep=True, registry=addr, repository=repo)
    env.write_file("notes/s.txt", SECRET)
    s1 = env.snapshot()
    env.write_file("other.txt", b"later")
    s2 = env.snapshot()
    items = environment_items(s2)
    remote = [i for i in items if i.kind == "remote"]
    assert sorted(i.ref for i in remote) == sorted([s1.remote, s2.remote])
    assert [i.kind for i in snapshot_items(s1)] == ["snapshot", "remote"]
    files = dict(read_item(remote_item(s1)))
    assert files == {"notes/s.txt": SECRET}
    layer = RegistryClient(addr).manifest(repo, parse_ref(s1.remote).digest)[2]["layers"][0]["digest"]
    blob_data = storage / "docker/registry/v2/blobs/sha256" / layer[7:9] / layer[7:] / "data"
    assert blob_data.is_file()
    deleted = delete_items(items)
    assert {i.ref for i in deleted} >= {s1.remote, s2.remote}
    assert RegistryClient(addr).tags(repo) == []
    assert RegistryClient(addr).blob(repo, layer) is None  # the repository's link is gone
    with pytest.raises(StoredItemNotFound):
        list(read_item(remote_item(s1)))
    assert blob_data.is_file()  # the data stays until garbage-collect
    sentence = collect_registry_garbage(addr, config)
    assert sentence.startswith("blobs removed by garbage-collect")
    assert not blob_data.exists()
    monkeypatch.delenv("UNSEE_REGISTRY_CONFIG", raising=False)
    assert "stays until the registry's garbage-collect runs" in collect_registry_garbage(addr)
    env.discard()


# -- docker backend + registry ---------------------------------------------------------------


@pytest.mark.docker
@pytest.mark.registry
def test_docker_snapshot_is_pushed_and_pulled_back(docker_image, registry):
    from unsee.sandbox.docker_env import cleanup, docker_client

    repo = _repo()
    env = open_environment("docker", image=docker_image, registry=registry, repository=repo, keep_snapshots=True)
    try:
        env.write_file("notes/s.txt", SECRET)
        snap = env.snapshot()
        r = parse_ref(snap.remote)
        assert (r.registry, r.repository) == (registry, repo)
        assert RegistryClient(registry).tags(repo) == [f"{env.env_id}-1"]
        docker_client().images.remove(snap.ref, force=True)  # as on a daemon that never had it
        other = open_environment("docker", image=docker_image)  # no registry option
        try:
            other.restore(snap)
            assert other.read_file("notes/s.txt") == SECRET
        finally:
            other.close()
        # the remote item reads the session's file, and not the base image's
        files = dict(read_item(remote_item(snap)))
        assert any(v == SECRET for v in files.values())
        assert not any(p.endswith("bin/busybox") for p in files)
    finally:
        env.discard()
        cleanup(env_id=env.env_id)
    assert RegistryClient(registry).tags(repo) == []
    with pytest.raises(SnapshotNotFound):
        o = open_environment("docker", image=docker_image)
        try:
            o.restore(snap)
        finally:
            o.close()


@pytest.mark.docker
@pytest.mark.registry
def test_docker_environment_items_include_remote_manifests(docker_image, registry):
    from unsee.sandbox.docker_env import cleanup

    repo = _repo()
    env = open_environment("docker", image=docker_image, registry=registry, repository=repo, keep_snapshots=True)
    try:
        env.write_file("f", SECRET)
        s1 = env.snapshot()
        s2 = env.snapshot()
        env.close()
        items = environment_items(s1)
        assert {i.ref for i in items if i.kind == "remote"} == {s1.remote, s2.remote}
        delete_items(items)
        assert RegistryClient(registry).tags(repo) == []
        assert [i for i in environment_items(s1) if i.kind != "container"] == []
    finally:
        env.discard()
        cleanup(env_id=env.env_id)
