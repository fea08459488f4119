"""Keyed content hashes: spans and records carry these, never the text.

A plain hash of a short secret (a card number) is brute-forceable; an HMAC
with a per-home key is not, and erasing the key makes every hash unlinkable.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path


class ContentHasher:
    def __init__(self, key: bytes):
        if len(key) < 16:
            raise ValueError("hash key must be at least 16 bytes")
        self._key = key

    @classmethod
    def from_home(cls, home: Path) -> "ContentHasher":
        """Load the home's key, creating it (0600) on first use."""
        path = Path(home) / "hash.key"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
            try:
                os.link(tmp, path)  # never replace a key another process wrote first
            except FileExistsError:
                pass
            finally:
                tmp.unlink(missing_ok=True)
        return cls(path.read_bytes())

    def hash(self, text: str) -> str:
        return "hmac-sha256:" + hmac.new(self._key, text.encode("utf-8"), hashlib.sha256).hexdigest()[:32]


def short_id(prefix: str, *parts: str) -> str:
    """A deterministic artifact id: stable across processes for the same inputs."""
    h = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:12]
    return f"{prefix}-{h}"


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks (a receipt records what an erased file
    looked like after; a model's numerics fingerprint names the weights it loaded)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
