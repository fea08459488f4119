"""unsee.sandbox.storage: find, read and delete what an environment stored, without it.

Local always; docker against a real daemon (``@docker``: skipped without one
unless UNSEE_REQUIRE_DOCKER=1). The image reader is also checked on a
synthetic OCI-layout ``docker save`` stream (gzip and plain layers), the format
Docker 25+ writes.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile

import pytest

from unsee.sandbox import (
    NotSupported,
    SnapshotId,
    StorageInUse,
    StorageRefused,
    StoredItem,
    StoredItemNotFound,
    delete_item,
    delete_items,
    environment_items,
    open_environment,
    read_item,
    snapshot_item,
)

docker = pytest.mark.docker

SECRET = b"SECRET-4242-do-not-keep"
LATER = b"LATER-7777-added-after"


def holders(items, needle: bytes) -> set[StoredItem]:
    return {i for i in items if any(needle in data for _, data in read_item(i))}


def read_in_new_process(item: StoredItem) -> dict[str, bytes]:
    """read_item in a fresh interpreter: only the item's four fields cross over."""
    code = (
        "import json, sys\n"
        "from unsee.sandbox import StoredItem, read_item\n"
        "item = StoredItem(*json.loads(sys.argv[1]))\n"
        "print(json.dumps({p: d.hex() for p, d in read_item(item)}))\n"
    )
    arg = json.dumps([item.backend, item.kind, item.env_id, item.ref])
    out = subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True, check=True,
                         env=dict(os.environ))
    return {p: bytes.fromhex(h) for p, h in json.loads(out.stdout).items()}


# -- local ----------------------------------------------------------------------


@pytest.fixture
def lenv(tmp_path):
    env = open_environment("local", root=tmp_path / "env", keep=True)
    yield env
    env.close()


def test_local_items_read_and_delete(lenv):
    lenv.write_file("notes/secret.txt", SECRET)
    s1 = lenv.snapshot()
    lenv.write_file("later.txt", LATER)
    s2 = lenv.snapshot()

    items = environment_items(s1)
    snaps = [i for i in items if i.kind == "snapshot"]
    assert [i.ref for i in snaps] == [s1.ref, s2.ref]
    assert [i for i in items if i.kind == "workspace"] == [StoredItem("local", "workspace", lenv.env_id,
                                                                       str(lenv.workspace))]
    assert environment_items(s2) == items  # any snapshot of the environment will do
    assert snapshot_item(s2) == snaps[1] and "local snapshot" in snaps[1].describe()

    assert dict(read_item(snapshot_item(s1))) == {"notes/secret.txt": SECRET}
    assert holders(items, SECRET) == set(items)
    assert holders(items, LATER) == {snaps[1], items[-1]}

    # the later snapshot goes; the earlier still restores
    assert delete_item(snapshot_item(s2)) is True
    assert delete_item(snapshot_item(s2)) is False  # idempotent
    assert [i.ref for i in environment_items(s1) if i.kind == "snapshot"] == [s1.ref]
    with pytest.raises(StoredItemNotFound):
        list(read_item(snapshot_item(s2)))
    lenv.restore(s1)
    assert lenv.read_file("notes/secret.txt") == SECRET
    with pytest.raises(FileNotFoundError):
        lenv.read_file("later.txt")


def test_local_read_in_a_new_process(lenv):
    lenv.write_file("a/b.txt", SECRET)
    snap = lenv.snapshot()
    assert read_in_new_process(snapshot_item(snap)) == {"a/b.txt": SECRET}


def test_local_delete_refuses_anything_but_snapshot_and_workspace_dirs(lenv, tmp_path):
    snap = lenv.snapshot()
    victim = tmp_path / "precious"
    victim.mkdir()
    (victim / "f").write_bytes(b"keep me")
    bad = [
        StoredItem("local", "snapshot", "x", str(victim)),
        StoredItem("local", "snapshot", "x", str(tmp_path / "snapshots-not" / "000001")),
        StoredItem("local", "snapshot", "x", str(lenv.root / "snapshots" / ".." / ".." / "precious")),
        StoredItem("local", "workspace", "x", str(victim)),
        StoredItem("local", "snapshot", "x", str(lenv.workspace)),  # the kind must match
        StoredItem("local", "workspace", "x", snap.ref),
        StoredItem("local", "image", "x", snap.ref),
    ]
    for item in bad:
        with pytest.raises(StorageRefused):
            delete_item(item)
    assert (victim / "f").read_bytes() == b"keep me"
    # a symlink in a snapshot's place is refused too (rmtree would not follow it anyway)
    link = lenv.root / "snapshots" / "000099"
    link.symlink_to(victim)
    with pytest.raises(StorageRefused):
        delete_item(StoredItem("local", "snapshot", "x", str(link)))
    assert (victim / "f").exists() and os.path.isdir(snap.ref)
    # the workspace of a (retired) environment can go
    assert delete_item(StoredItem("local", "workspace", lenv.env_id, str(lenv.workspace))) is True
    assert not lenv.workspace.exists()


def test_python_backend_stores_nothing():
    snap = SnapshotId("python", "e1", 1, "mem")
    with pytest.raises(NotSupported):
        environment_items(snap)
    with pytest.raises(NotSupported):
        snapshot_item(snap)


# -- the image reader on a synthetic OCI layout (Docker 25+ `docker save`) -------


def _tar(files: dict[str, bytes], *, gz: bool = False) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
        link = tarfile.TarInfo("bin/sh")
        link.type, link.linkname = tarfile.SYMTYPE, "busybox"
        tf.addfile(link)
    raw = buf.getvalue()
    return gzip.compress(raw) if gz else raw


class _FakeImages:
    def __init__(self, saved: bytes):
        self.saved = saved

    def get(self, ref):
        saved = self.saved

        class Img:
            def save(self, chunk_size=1000):
                return (saved[i:i + chunk_size] for i in range(0, len(saved), chunk_size))

        return Img()


class _FakeClient:
    def __init__(self, saved: bytes):
        self.images = _FakeImages(saved)


def test_image_reader_handles_oci_layout_and_gzip_layers():
    plain = _tar({"etc/base.txt": b"base", "home/u/.wh.gone.txt": b""})
    gz = _tar({"home/u/secret.txt": SECRET}, gz=True)
    saved = _tar({
        "oci-layout": b'{"imageLayoutVersion": "1.0.0"}',
        "index.json": b'{"manifests": []}',
        "blobs/sha256/" + "a" * 64: plain,
        "blobs/sha256/" + "b" * 64: gz,
        "blobs/sha256/" + "c" * 64: b'{"config": {}}',
        "manifest.json": b"[]",
    })
    item = StoredItem("docker", "snapshot", "e1", "sha256:" + "d" * 64)
    files = list(read_item(item, client=_FakeClient(saved)))
    assert files == [("etc/base.txt", b"base"), ("home/u/secret.txt", SECRET)]


# -- docker ---------------------------------------------------------------------


@pytest.fixture
def kept_env(docker_image):
    from unsee.sandbox.docker_env import DockerEnvironment, cleanup

    envs = []

    def make(**opts):
        env = DockerEnvironment(docker_image, keep_snapshots=True, **opts)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.discard()
        cleanup(env_id=env.env_id)


def settle(env) -> None:
    """Wait for the containers a restore replaced to be removed (a background thread does it)."""
    for t in env._reaper:
        t.join(timeout=30)


def _exists(client, ref: str) -> bool:
    import docker.errors

    try:
        client.images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


@docker
def test_docker_items_read_and_delete(kept_env):
    env = kept_env()
    client = env.client
    env.write_file("secret.txt", SECRET)
    s1 = env.snapshot()
    env.restore(s1)  # later snapshots are committed on top of s1: they share its layers
    env.write_file("later.txt", LATER)
    s2 = env.snapshot()
    assert client.images.get(s2.ref).attrs["Parent"] == s1.ref
    settle(env)

    items = environment_items(s1)
    assert environment_items(s2, client=client) == items
    snaps = [i for i in items if i.kind == "snapshot"]
    containers = [i for i in items if i.kind == "container"]
    assert [i.ref for i in snaps] == [s1.ref, s2.ref]
    assert [c.ref for c in containers] == [env.container.id]
    assert {i.kind for i in items} == {"snapshot", "container"}

    assert holders(items, SECRET) == set(items)  # s2's image holds s1's layer too
    assert holders(items, LATER) == {snaps[1], containers[0]}
    workdir = env.workdir.strip("/")
    assert dict(read_item(snaps[0]))[f"{workdir}/secret.txt"] == SECRET

    # an earlier image a kept later one was committed on top of: the daemon refuses
    with pytest.raises(StorageInUse):
        delete_item(snapshot_item(s1))
    assert _exists(client, s1.ref) and _exists(client, s2.ref)
    # the later one goes (its own layer is freed); the earlier still restores
    assert delete_item(snapshot_item(s2)) is True
    assert not _exists(client, s2.ref)
    assert delete_item(snapshot_item(s2)) is False
    with pytest.raises(StoredItemNotFound):
        list(read_item(snapshot_item(s2)))
    env.restore(s1)
    assert env.read_file("secret.txt") == SECRET and env.exec("test -e later.txt").exit_code != 0
    settle(env)
    assert [i.ref for i in environment_items(s1) if i.kind == "snapshot"] == [s1.ref]

    # a retired environment: its container (running from s1) and then s1 itself
    rest = environment_items(s1)
    assert sorted(i.kind for i in delete_items(reversed(rest))) == ["container", "snapshot"]
    assert environment_items(s1) == []


@docker
def test_docker_read_in_a_new_process(kept_env):
    env = kept_env()
    env.write_file("secret.txt", SECRET)
    snap = env.snapshot()
    files = read_in_new_process(snapshot_item(snap))
    assert [p for p, d in files.items() if SECRET in d] and any(p.endswith("secret.txt") for p in files)


@docker
def test_docker_flattened_snapshot_reads(kept_env):
    env = kept_env(flatten_every=2)
    env.write_file("secret.txt", SECRET)
    snap = env.snapshot()
    img = env.client.images.get(snap.ref)
    assert len(img.attrs["RootFS"]["Layers"]) == 1 and not img.attrs.get("Parent")  # export + import
    assert holders([snapshot_item(snap)], SECRET)
    assert any(p.endswith("bin/busybox") for p, _ in read_item(snapshot_item(snap)))


@docker
def test_docker_shadow_base_image_is_the_shadows(kept_env):
    env = kept_env()
    env.write_file("secret.txt", SECRET)
    sh = env.shadow()
    sh.write_file("in-shadow.txt", LATER)
    ss = sh.snapshot()
    items = environment_items(ss)
    base = [i for i in items if i.kind == "image"]
    assert [i.ref for i in base] == sh._owned_images and base[0].env_id == sh.env_id
    assert {i.kind for i in items} == {"image", "snapshot", "container"}
    assert holders(base, SECRET) and not holders(base, LATER)
    assert all(i.env_id == sh.env_id for i in items)
    assert env.container.id not in {i.ref for i in items}
    # the shadow's snapshot was committed on top of its base image: delete_items orders them
    assert env.client.images.get(ss.ref).attrs["Parent"] == base[0].ref
    assert set(delete_items(items)) == set(items) and environment_items(ss) == []
