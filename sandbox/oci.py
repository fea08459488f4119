"""A small client of the OCI distribution API (a registry such as ``docker-registry`` 2.8).

Sandbox snapshots live off the machine in an OCI registry so that any worker can
restore (or erase) them: the docker backend pushes its snapshot images through
the engine, the local backend pushes its snapshot directories as OCI artifacts
through this client (:class:`~unsee.sandbox.remote.OciSnapshotStore`), and
:mod:`unsee.sandbox.storage` reads and deletes both through it.

Addresses are ``host:port`` (plain HTTP for a loopback host, HTTPS otherwise) or
carry their scheme (``https://host:port``, ``http://host:port``). A remote
reference names one manifest by digest: ``<address>/<repository>@sha256:<hex>``
(:func:`parse_ref`, :func:`format_ref`).

No authentication: the registry is a private one on a trusted network (a bearer
token realm answers 401, reported as :class:`RegistryError`).

Errors: :class:`RegistryUnavailable` (a ``SandboxUnavailable``) when the
registry cannot be reached, :class:`RegistryCannotDelete` when it answers a
delete with 405 (deletes disabled), :class:`RegistryError` for other answers.
Missing manifests and blobs are ``None`` / ``False`` results, not errors.

Deleting a manifest removes it from the API at once; the blob *data* leaves the
registry's disk only when ``docker-registry garbage-collect`` runs on its config
(:func:`garbage_collect`; see :func:`unsee.sandbox.storage.collect_registry_garbage`).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import re
import shutil
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .errors import RegistryCannotDelete, RegistryError, RegistryUnavailable

__all__ = [
    "RegistryClient",
    "RemoteRef",
    "parse_ref",
    "format_ref",
    "is_remote_ref",
    "garbage_collect",
    "referenced_blobs",
    "OCI_MANIFEST",
    "DOCKER_MANIFEST",
    "MANIFEST_TYPES",
    "SNAPSHOT_CONFIG_TYPE",
    "SNAPSHOT_LAYER_TYPE",
]

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
#: what ``manifest()`` accepts (the registry converts nothing when the client accepts the stored type)
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST, OCI_INDEX, DOCKER_LIST)
#: the local backend's snapshot artifacts: a small JSON config and one gzipped tar layer
SNAPSHOT_CONFIG_TYPE = "application/vnd.unsee.sandbox.snapshot.config.v1+json"
SNAPSHOT_LAYER_TYPE = "application/vnd.unsee.sandbox.snapshot.v1.tar+gzip"

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
#: the distribution spec's repository name grammar
_REPO = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class RemoteRef:
    """One manifest in a registry, by digest: ``<registry>/<repository>@<digest>``."""

    registry: str
    repository: str
    digest: str

    def __str__(self) -> str:
        return format_ref(self.registry, self.repository, self.digest)


def format_ref(registry: str, repository: str, digest: str) -> str:
    return f"{registry.rstrip('/')}/{repository}@{digest}"


def parse_ref(ref: str) -> RemoteRef:
    """Split ``<registry>/<repository>@sha256:<hex>`` (the registry may carry a scheme).
    Raises ValueError for anything else."""
    if not isinstance(ref, str) or "@" not in ref:
        raise ValueError(f"not a remote snapshot reference (<registry>/<repository>@sha256:...): {ref!r}")
    name, _, digest = ref.rpartition("@")
    scheme = ""
    if "://" in name:
        scheme, _, name = name.partition("://")
        scheme += "://"
    registry, sep, repository = name.partition("/")
    if not sep or not registry or not _REPO.fullmatch(repository) or not _DIGEST.fullmatch(digest):
        raise ValueError(f"not a remote snapshot reference (<registry>/<repository>@sha256:...): {ref!r}")
    return RemoteRef(scheme + registry, repository, digest)


def is_remote_ref(ref: str) -> bool:
    try:
        parse_ref(ref)
    except ValueError:
        return False
    return True


def check_repository(repository: str) -> str:
    """``repository`` when it is a valid distribution repository name, else ValueError."""
    if not isinstance(repository, str) or not _REPO.fullmatch(repository) or len(repository) > 255:
        raise ValueError(f"not a valid OCI repository name (lowercase, [a-z0-9._-/]): {repository!r}")
    return repository


def check_tag(tag: str) -> str:
    if not isinstance(tag, str) or not _TAG.fullmatch(tag):
        raise ValueError(f"not a valid OCI tag: {tag!r}")
    return tag


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def host_of(address: str) -> str:
    """``host:port`` of an address (its scheme dropped): what the docker engine tags with."""
    return address.split("://", 1)[-1].rstrip("/")


def _is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def base_url(address: str) -> str:
    """``http://host:port`` for a loopback address without a scheme, ``https://`` for another."""
    address = address.rstrip("/")
    if "://" in address:
        scheme = address.split("://", 1)[0]
        if scheme not in ("http", "https"):
            raise ValueError(f"an OCI registry address is host:port or http(s)://host:port, not {address!r}")
        return address
    if not address or "/" in address:
        raise ValueError(f"an OCI registry address is host:port or http(s)://host:port, not {address!r}")
    host = urllib.parse.urlsplit("//" + address).hostname or ""
    return ("http://" if _is_loopback(host) else "https://") + address


class RegistryClient:
    """The distribution API of one registry (``address``: ``host:port`` or with a scheme)."""

    def __init__(self, address: str, *, timeout: float = 60.0):
        self.address = address.rstrip("/")
        self.url = base_url(self.address)
        self.timeout = timeout
        # never through a proxy: the registry is private (and loopback in the tests)
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirectToOtherHosts())

    def __repr__(self) -> str:
        return f"RegistryClient({self.address!r})"

    # -- plumbing ---------------------------------------------------------------
    def _request(self, method: str, path: str, *, data: Any = None, headers: dict[str, str] | None = None,
                 ok: tuple[int, ...] = (200,), missing_ok: bool = False, stream: bool = False):
        """One request; returns the response (``stream``) or ``(status, headers, body)``;
        None for a 404 when ``missing_ok``."""
        url = path if path.startswith(("http://", "https://")) else self.url + path
        req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
        try:
            resp = self._opener.open(req, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            body = _read_quietly(exc)
            if exc.code == 404 and missing_ok:
                return None
            if exc.code == 405 and method == "DELETE":
                raise RegistryCannotDelete(self.address, path) from None
            if exc.code in ok:
                return exc if stream else (exc.code, exc.headers, body)
            raise RegistryError(f"OCI registry {self.address}: {method} {path} answered {exc.code}: "
                                f"{_errors_text(body)}", address=self.address, status=exc.code) from None
        except (urllib.error.URLError, OSError, socket.timeout) as exc:
            reason = getattr(exc, "reason", exc)
            raise RegistryUnavailable(self.address, f"{method} {path}: {reason}") from exc
        if resp.status not in ok:
            body = resp.read()
            resp.close()
            raise RegistryError(f"OCI registry {self.address}: {method} {path} answered {resp.status}: "
                                f"{_errors_text(body)}", address=self.address, status=resp.status)
        if stream:
            return resp
        with resp:
            try:
                body = resp.read()
            except (OSError, socket.timeout) as exc:
                raise RegistryUnavailable(self.address, f"{method} {path}: {exc}") from exc
            return resp.status, resp.headers, body

    # -- reading ----------------------------------------------------------------
    def ping(self) -> None:
        """Raise :class:`RegistryUnavailable` unless ``GET /v2/`` answers like a registry."""
        try:
            _, headers, _ = self._request("GET", "/v2/")
        except RegistryError as exc:
            raise RegistryUnavailable(self.address, f"GET /v2/ answered {exc.status}") from None
        version = headers.get("Docker-Distribution-API-Version", "")
        if version and not version.startswith("registry/2"):
            raise RegistryUnavailable(self.address, f"not a distribution v2 registry ({version})")

    def catalog(self) -> list[str]:
        """Every repository (following the API's pages)."""
        return self._paged("/v2/_catalog?n=1000", "repositories")

    def tags(self, repository: str) -> list[str]:
        """The tags of ``repository`` (empty when it does not exist)."""
        check_repository(repository)
        return self._paged(f"/v2/{repository}/tags/list?n=1000", "tags")

    def _paged(self, path: str, key: str) -> list[str]:
        out: list[str] = []
        while path:
            res = self._request("GET", path, missing_ok=True)
            if res is None:
                return out
            _, headers, body = res
            out += json.loads(body or b"{}").get(key) or []
            path = _next_link(headers.get("Link", ""))
        return out

    def manifest(self, repository: str, reference: str) -> tuple[str, str, dict] | None:
        """``(digest, media_type, manifest)`` of a tag or digest; None when it does not exist."""
        check_repository(repository)
        res = self._request("GET", f"/v2/{repository}/manifests/{reference}",
                            headers={"Accept": ", ".join(MANIFEST_TYPES)}, missing_ok=True)
        if res is None:
            return None
        _, headers, body = res
        digest = headers.get("Docker-Content-Digest") or sha256_digest(body)
        doc = json.loads(body)
        return digest, headers.get("Content-Type") or doc.get("mediaType", ""), doc

    def manifest_digest(self, repository: str, reference: str) -> str | None:
        """The digest of a tag (HEAD); None when it does not exist."""
        check_repository(repository)
        res = self._request("HEAD", f"/v2/{repository}/manifests/{reference}",
                            headers={"Accept": ", ".join(MANIFEST_TYPES)}, missing_ok=True)
        return None if res is None else res[1].get("Docker-Content-Digest")

    def has_blob(self, repository: str, digest: str) -> bool:
        check_repository(repository)
        return self._request("HEAD", f"/v2/{repository}/blobs/{digest}", missing_ok=True) is not None

    def blob(self, repository: str, digest: str) -> Iterator[bytes] | None:
        """The blob's bytes in chunks (streamed), None when the repository has no such blob.
        The digest of what streams is checked at the end (a mismatch raises RegistryError)."""
        check_repository(repository)
        if not _DIGEST.fullmatch(digest):
            raise ValueError(f"not a sha256 digest: {digest!r}")
        resp = self._request("GET", f"/v2/{repository}/blobs/{digest}", missing_ok=True, stream=True)
        if resp is None:
            return None

        def chunks() -> Iterator[bytes]:
            h = hashlib.sha256()
            with resp:
                while True:
                    try:
                        chunk = resp.read(_CHUNK)
                    except (OSError, socket.timeout) as exc:
                        raise RegistryUnavailable(self.address, f"reading blob {digest}: {exc}") from exc
                    if not chunk:
                        break
                    h.update(chunk)
                    yield chunk
            if "sha256:" + h.hexdigest() != digest:
                raise RegistryError(f"OCI registry {self.address}: blob {digest} arrived with another digest",
                                    address=self.address)

        return chunks()

    def blob_bytes(self, repository: str, digest: str) -> bytes | None:
        chunks = self.blob(repository, digest)
        return None if chunks is None else b"".join(chunks)

    # -- writing ----------------------------------------------------------------
    def push_blob(self, repository: str, data: bytes) -> str:
        """Upload ``data`` as a blob of ``repository`` (POST + PUT); returns its digest.

        Always uploads, even when the registry says it has the blob: a registry run with
        the in-memory blob descriptor cache keeps answering "present" for a blob that
        garbage-collect removed since, and a manifest pushed over it would not pull.
        """
        check_repository(repository)
        digest = sha256_digest(data)
        _, headers, _ = self._request("POST", f"/v2/{repository}/blobs/uploads/", data=b"", ok=(202,))
        location = headers.get("Location") or ""
        if not location:
            raise RegistryError(f"OCI registry {self.address}: blob upload without a Location",
                                address=self.address)
        location = urllib.parse.urljoin(self.url + "/", location)
        sep = "&" if "?" in location else "?"
        self._request("PUT", f"{location}{sep}digest={urllib.parse.quote(digest)}", data=data,
                      headers={"Content-Type": "application/octet-stream",
                               "Content-Length": str(len(data))}, ok=(201,))
        return digest

    def push_manifest(self, repository: str, reference: str, manifest: dict | bytes,
                      media_type: str = OCI_MANIFEST, *, verify: bool = True) -> str:
        """PUT a manifest under a tag (or its digest); returns its digest.

        ``verify`` reads it back (HEAD by digest): docker-registry 2.8 run with
        ``cache: blobdescriptor: inmemory`` accepts (201) a manifest whose bytes equal one
        that garbage-collect removed since it started, and then answers 404 for it
        (measured). Such a push raises RegistryError instead of leaving a snapshot that
        cannot be fetched."""
        check_repository(repository)
        body = manifest if isinstance(manifest, bytes) else json.dumps(manifest, separators=(",", ":")).encode()
        _, headers, _ = self._request("PUT", f"/v2/{repository}/manifests/{reference}", data=body,
                                      headers={"Content-Type": media_type}, ok=(201,))
        digest = headers.get("Docker-Content-Digest") or sha256_digest(body)
        if verify and self.manifest_digest(repository, digest) is None:
            raise RegistryError(
                f"OCI registry {self.address} accepted manifest {digest} of {repository} but does not serve "
                "it (a registry with the in-memory blob descriptor cache after a garbage-collect: restart "
                "it, or run it without `cache: blobdescriptor: inmemory`)", address=self.address)
        return digest

    def delete_manifest(self, repository: str, digest: str) -> bool:
        """Delete a manifest (and so every tag on it); False when it was already gone.
        Raises :class:`RegistryCannotDelete` when the registry has deletes disabled."""
        check_repository(repository)
        if not _DIGEST.fullmatch(digest):
            raise ValueError(f"manifests are deleted by digest, not {digest!r}")
        return self._request("DELETE", f"/v2/{repository}/manifests/{digest}", ok=(202, 200),
                             missing_ok=True) is not None

    def delete_blob(self, repository: str, digest: str) -> bool:
        """Delete ``repository``'s link to a blob (its data stays until garbage-collect);
        False when the repository had no such blob."""
        check_repository(repository)
        if not _DIGEST.fullmatch(digest):
            raise ValueError(f"not a sha256 digest: {digest!r}")
        return self._request("DELETE", f"/v2/{repository}/blobs/{digest}", ok=(202, 200),
                             missing_ok=True) is not None

    # -- a repository's manifests ------------------------------------------------
    def tagged_manifests(self, repository: str, prefix: str = "") -> dict[str, str]:
        """``{tag: digest}`` of the tags of ``repository`` that start with ``prefix``."""
        out = {}
        for tag in self.tags(repository):
            if tag.startswith(prefix):
                digest = self.manifest_digest(repository, tag)
                if digest:
                    out[tag] = digest
        return out


def referenced_blobs(manifest: dict) -> set[str]:
    """The blob digests a manifest refers to (config and layers)."""
    out = {d["digest"] for d in manifest.get("layers") or [] if isinstance(d, dict) and "digest" in d}
    cfg = manifest.get("config")
    if isinstance(cfg, dict) and "digest" in cfg:
        out.add(cfg["digest"])
    return out


def garbage_collect(config_path: str | os.PathLike[str], *, timeout: float = 600.0) -> str:
    """Run ``docker-registry garbage-collect --delete-untagged CONFIG``: removes from the
    registry's storage the blobs no manifest references and the untagged manifests. Returns
    what it reported (its last lines). Raises RegistryError when the tool is missing or fails.

    The registry's docs ask for it to run while the registry is read-only or stopped (an
    upload racing it may lose a blob); unsee runs it after an erasure, when nothing of that
    session is being pushed.
    """
    tool = shutil.which("docker-registry") or shutil.which("registry")
    if tool is None:
        raise RegistryError("docker-registry is not installed here: cannot run its garbage-collect")
    if not os.path.isfile(config_path):
        raise RegistryError(f"registry config {config_path} does not exist")
    try:
        proc = subprocess.run([tool, "garbage-collect", "--delete-untagged", os.fspath(config_path)],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise RegistryError(f"garbage-collect ran past {timeout:g} s") from exc
    out = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        raise RegistryError(f"garbage-collect failed ({proc.returncode}): {out[-500:]}")
    return out


# -- helpers --------------------------------------------------------------------------


class _NoRedirectToOtherHosts(urllib.request.HTTPRedirectHandler):
    """A blob GET may redirect (to a storage backend); never follow one off http(s)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if not newurl.startswith(("http://", "https://")):
            return None
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _read_quietly(resp: Any) -> bytes:
    try:
        return resp.read()
    except Exception:
        return b""


def _errors_text(body: bytes) -> str:
    try:
        errs = json.loads(body).get("errors") or []
        return "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errs) or body[:200].decode("utf-8", "replace")
    except (ValueError, AttributeError):
        return body[:200].decode("utf-8", "replace") or "(no body)"


def _next_link(link: str) -> str:
    """The path of a ``Link: </v2/...>; rel="next"`` header, '' when none."""
    m = re.match(r'\s*<([^>]+)>\s*;\s*rel="?next"?', link or "")
    return m.group(1) if m else ""
