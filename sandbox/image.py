"""Build the sandbox base images offline, from local material only.

Two flavors, both imported with ``docker import`` (no registry needed):

``python`` (default tag ``unsee-sandbox:latest``)
    A minimal Debian bookworm rootfs with python3, made with
    ``debootstrap --variant=minbase --include=python3`` from the Debian mirror
    configured in ``/etc/apt/sources.list(.d)``, trimmed (apt lists, docs, man
    pages, locales). ~80 s the first time; the rootfs tarball is cached under
    ``<cache>/sandbox/`` so later builds (e.g. on a fresh daemon) import it in
    ~4 s. Needs root; a missing ``debootstrap`` is installed (as root) with
    ``apt-get install -y debootstrap``.

``busybox`` (tag ``unsee-sandbox:busybox``)
    The host's static busybox (``busybox-static``, installed the same way) with an
    applet symlink farm: ~2 MB, built in well under a second. No python3 inside.
    The test suite and CI use it; tools that need python3 use the python flavor.

Both have a non-root user ``sandbox`` (uid/gid 1000) owning ``/workspace``
(the working directory and HOME), a keep-alive ``CMD`` and the labels
``unsee.sandbox=1``, ``unsee.role=base``, ``unsee.flavor=<flavor>``.
Builds are idempotent: an existing tag is kept unless ``force=True``.

Users with a registry can build the equivalent image from ``sandbox/Dockerfile``.
"""

from __future__ import annotations

import io
import logging
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Literal

from .docker_api import docker_client, translate_errors
from .errors import ImageBuildError

__all__ = [
    "Flavor",
    "DEFAULT_IMAGE",
    "BUSYBOX_IMAGE",
    "SANDBOX_UID",
    "build_image",
    "image_tag",
    "debian_mirror",
    "cache_dir",
    "ensure_host_package",
]

log = logging.getLogger(__name__)

Flavor = Literal["python", "busybox"]
DEFAULT_IMAGE = "unsee-sandbox:latest"
BUSYBOX_IMAGE = "unsee-sandbox:busybox"
SANDBOX_UID = 1000
SUITE = "bookworm"

KEEPALIVE = ["sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"]


def image_tag(flavor: Flavor) -> str:
    return {"python": DEFAULT_IMAGE, "busybox": BUSYBOX_IMAGE}[flavor]


def cache_dir() -> Path:
    """``$UNSEE_HOME/cache/sandbox``, else ``$XDG_CACHE_HOME/unsee/sandbox`` (~/.cache)."""
    home = os.environ.get("UNSEE_HOME")
    if home:
        return Path(home) / "cache" / "sandbox"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "unsee" / "sandbox"


def _changes(flavor: str) -> list[str]:
    import json

    return [
        f"USER {SANDBOX_UID}:{SANDBOX_UID}",
        "WORKDIR /workspace",
        "ENV HOME=/workspace",
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ENV LANG=C.UTF-8",
        f"CMD {json.dumps(KEEPALIVE)}",
        "LABEL unsee.sandbox=1",
        "LABEL unsee.role=base",
        f"LABEL unsee.flavor={flavor}",
    ]


def build_image(
    flavor: Flavor = "python",
    *,
    tag: str | None = None,
    client=None,
    force: bool = False,
    mirror: str | None = None,
    cached_only: bool = False,
) -> str | None:
    """Build (or find) the sandbox image; returns its tag.

    ``cached_only``: for the python flavor, import only if the rootfs tarball
    is already cached (never run debootstrap); returns None when it is not.
    Raises ImageBuildError saying what to install when material is missing,
    SandboxUnavailable when no daemon is reachable.
    """
    tag = tag or image_tag(flavor)
    client = client or docker_client()
    if not force and _image_exists(client, tag):
        log.info("sandbox image %s exists; skipping build", tag)
        return tag
    t0 = time.monotonic()
    if flavor == "busybox":
        data = busybox_rootfs_tar()
        _import(client, data, tag, flavor)
    elif flavor == "python":
        tar = cache_dir() / f"rootfs-{SUITE}-minbase-python3.tar"
        if not tar.exists():
            if cached_only:
                return None
            debootstrap_rootfs_tar(tar, mirror=mirror)
        _import(client, tar, tag, flavor)
    else:
        raise ImageBuildError(f"unknown image flavor {flavor!r} (python or busybox)")
    log.info("built sandbox image %s in %.1f s", tag, time.monotonic() - t0)
    return tag


def _image_exists(client, tag: str) -> bool:
    import docker.errors

    with translate_errors():
        try:
            client.images.get(tag)
            return True
        except docker.errors.ImageNotFound:
            return False


def _import(client, src, tag: str, flavor: str) -> None:
    repo, _, name = tag.rpartition(":")
    if not repo or "/" in name:
        repo, name = tag, "latest"
    with translate_errors():
        if isinstance(src, (bytes, bytearray)):
            client.api.import_image_from_data(src, repository=repo, tag=name, changes=_changes(flavor))
        else:  # a path: uploaded with a Content-Length (docker rejects a chunked file upload)
            client.api.import_image_from_file(str(src), repository=repo, tag=name, changes=_changes(flavor))
    if not _image_exists(client, tag):
        raise ImageBuildError(f"docker import did not produce {tag}")


# -- busybox -----------------------------------------------------------------


def ensure_host_package(binary: str, package: str) -> str:
    """The path of ``binary``; installs Debian's ``package`` first when it is missing and we are root.

    Not root (or no apt-get): ImageBuildError with the exact command to run.
    """
    path = shutil.which(binary)
    if path:
        return path
    command = f"apt-get install -y {package}"
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise ImageBuildError(f"{binary} not found; install it (as root): {command}")
    log.warning("%s not found; installing it: %s", binary, command)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", package]):
        proc = subprocess.run(argv, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise ImageBuildError(f"`{' '.join(argv)}` failed ({proc.returncode}): {proc.stderr[-400:]}; "
                                  f"install it by hand: {command}")
    path = shutil.which(binary)
    if not path:
        raise ImageBuildError(f"{binary} still not found after `{command}`")
    return path


def _static_busybox() -> Path:
    path = ensure_host_package("busybox", "busybox-static")
    data = Path(path).read_bytes()
    if b"/lib64/ld-linux" in data or b"/lib/ld-linux" in data:
        raise ImageBuildError(
            f"{path} is dynamically linked; install the static one: apt-get install -y busybox-static"
        )
    return Path(path)


def busybox_rootfs_tar() -> bytes:
    """A tarball of a tiny rootfs around the host's static busybox."""
    bb = _static_busybox()
    applets = subprocess.run(
        [str(bb), "--list-full"], capture_output=True, text=True, check=True
    ).stdout.split()
    buf = io.BytesIO()
    now = int(time.time())

    def add_dir(tf: tarfile.TarFile, name: str, mode: int = 0o755, uid: int = 0) -> None:
        ti = tarfile.TarInfo(name)
        ti.type, ti.mode, ti.uid, ti.gid, ti.mtime = tarfile.DIRTYPE, mode, uid, uid, now
        tf.addfile(ti)

    def add_file(tf: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
        ti = tarfile.TarInfo(name)
        ti.size, ti.mode, ti.mtime = len(data), mode, now
        tf.addfile(ti, io.BytesIO(data))

    with tarfile.open(fileobj=buf, mode="w") as tf:
        for d in ("bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "dev", "proc", "sys", "var", "run"):
            add_dir(tf, d)
        add_dir(tf, "tmp", 0o1777)
        add_dir(tf, "var/tmp", 0o1777)
        add_dir(tf, "root", 0o700)
        add_dir(tf, "workspace", 0o755, SANDBOX_UID)
        add_file(tf, "bin/busybox", bb.read_bytes(), 0o755)
        seen = {"bin/busybox"}
        for applet in applets:
            applet = applet.lstrip("/")
            if applet in seen or "/" not in applet:
                continue
            seen.add(applet)
            ti = tarfile.TarInfo(applet)
            ti.type, ti.linkname, ti.mtime = tarfile.SYMTYPE, "/bin/busybox", now
            tf.addfile(ti)
        add_file(
            tf,
            "etc/passwd",
            b"root:x:0:0:root:/root:/bin/sh\n"
            b"sandbox:x:1000:1000:unsee sandbox:/workspace:/bin/sh\n"
            b"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
        )
        add_file(tf, "etc/group", b"root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n")
    return buf.getvalue()


# -- debootstrap -----------------------------------------------------------

_TRIM = [
    "var/lib/apt/lists",
    "var/cache/apt",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "usr/share/lintian",
    "var/log",
]


def debian_mirror() -> str:
    """The Debian mirror for ``bookworm`` main from /etc/apt/sources.list(.d)."""
    files = [Path("/etc/apt/sources.list")]
    d = Path("/etc/apt/sources.list.d")
    if d.is_dir():
        files += sorted(d.iterdir())
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        if f.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                fields = dict(
                    (m.group(1).lower(), m.group(2).strip())
                    for m in re.finditer(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M)
                )
                if SUITE in fields.get("suites", "").split() and "main" in fields.get("components", "").split():
                    return fields["uris"].split()[0]
        else:
            for line in text.splitlines():
                parts = re.sub(r"\[[^]]*\]", "", line).split()
                if len(parts) >= 4 and parts[0] == "deb" and parts[2] == SUITE and "main" in parts[3:]:
                    return parts[1]
    raise ImageBuildError(
        f"no Debian {SUITE} mirror found in /etc/apt/sources.list(.d); pass mirror=..."
    )


def debootstrap_rootfs_tar(dest: Path, *, mirror: str | None = None) -> Path:
    """Run debootstrap into a temp dir, trim it, add the sandbox user, tar it to ``dest``."""
    if os.geteuid() != 0:
        raise ImageBuildError("debootstrap needs root; run `unsee sandbox build-image` as root")
    ensure_host_package("debootstrap", "debootstrap")
    mirror = mirror or debian_mirror()
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="unsee-rootfs-"))
    root = work / "rootfs"
    try:
        proc = subprocess.run(
            ["debootstrap", "--variant=minbase", "--include=python3", SUITE, str(root), mirror],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise ImageBuildError(f"debootstrap failed ({proc.returncode}): {proc.stdout[-800:]}{proc.stderr[-800:]}")
        for rel in _TRIM:
            p = root / rel
            if p.is_dir():
                for child in p.iterdir():
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink(missing_ok=True)
        with open(root / "etc/passwd", "a") as f:
            f.write(f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:unsee sandbox:/workspace:/bin/sh\n")
        with open(root / "etc/group", "a") as f:
            f.write(f"sandbox:x:{SANDBOX_UID}:\n")
        ws = root / "workspace"
        ws.mkdir(exist_ok=True)
        os.chown(ws, SANDBOX_UID, SANDBOX_UID)
        tmp = dest.with_suffix(".tmp")
        proc = subprocess.run(
            ["tar", "--numeric-owner", "-C", str(root), "-cf", str(tmp), "."],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise ImageBuildError(f"tar of the rootfs failed: {proc.stderr[-800:]}")
        os.replace(tmp, dest)
        return dest
    finally:
        shutil.rmtree(work, ignore_errors=True)
