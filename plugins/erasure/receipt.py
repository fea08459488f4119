"""Signed erasure receipts: what was erased where, signed with the home's Ed25519 key.

A receipt names the target only by a keyed hash. Its signature covers
:func:`canonical_bytes` (the receipt without its signature, as sorted compact
JSON), and the receipt embeds the public key, so anyone can check it was not
changed; pinning the home's key (``trusted_public_pem``) also checks who
signed it.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import secrets
from datetime import datetime, timezone
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, ValidationError, field_validator

from unsee.middleware.errors import InvalidArgument
from unsee.plugins.erasure.errors import ReceiptInvalid, ReceiptKeyInvalid

RECEIPT_VERSION = 1
KEY_FILE = "receipt.key"
PUB_FILE = "receipt.pub"


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename (readers never see half a file)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)  # the mode asked for, whatever the umask
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class SigningKey:
    """The home's Ed25519 receipt signing key."""

    def __init__(self, private_key: Ed25519PrivateKey):
        self._key = private_key

    @classmethod
    def load_or_create(cls, home: str | os.PathLike) -> SigningKey:
        """Load ``home/receipt.key``, creating it (0600) on first use; (re)write ``home/receipt.pub`` (0644).

        The new key goes to a temporary file linked to its final name, so a
        key another process created first is never replaced: both end up
        using the first one.
        """
        home = Path(home)
        path = home / KEY_FILE
        if not path.exists():
            home.mkdir(parents=True, exist_ok=True)
            pem = Ed25519PrivateKey.generate().private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
            tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(pem)
                    f.flush()
                    os.fsync(f.fileno())
                os.link(tmp, path)  # never replace a key another process wrote first
            except FileExistsError:
                pass
            finally:
                tmp.unlink(missing_ok=True)
        try:
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
            raise ReceiptKeyInvalid(path, str(exc) or type(exc).__name__) from exc
        if not isinstance(key, Ed25519PrivateKey):
            raise ReceiptKeyInvalid(path, f"a {type(key).__name__}, not an Ed25519 key")
        signing = cls(key)
        pub = home / PUB_FILE
        public = signing.public_pem().encode("ascii")
        if not pub.exists() or pub.read_bytes() != public:
            _atomic_write(pub, public, 0o644)
        return signing

    def public_pem(self) -> str:
        """The public key as PEM SubjectPublicKeyInfo."""
        return (
            self._key.public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            .decode("ascii")
        )

    def sign(self, data: bytes) -> bytes:
        """The Ed25519 signature of ``data`` (64 bytes)."""
        return self._key.sign(data)


class RouteReceipt(BaseModel):
    """What one erasure route (a store, a file set) did: copies before and after, files left."""

    model_config = ConfigDict(extra="forbid")

    name: str
    method: str
    copies_before: NonNegativeInt
    copies_after: NonNegativeInt
    value_copies_after: NonNegativeInt | None = None
    files: dict[str, str] = Field(default_factory=dict)  # path -> sha256 of the file after erasure
    notes: list[str] = Field(default_factory=list)
    #: copies other sessions hold on this route after erasure (session -> copies): not in this
    #: erasure's scope, so not in ``copies_after``; None when there are none (the signed bytes of
    #: a receipt without any are those of receipts written before this field existed)
    other_sessions: dict[str, NonNegativeInt] | None = None


class SubjectFacts(BaseModel):
    """What a subject erasure's receipt says it was about. Names are keyed hashes (a namespace
    path or a subject name often names the person)."""

    model_config = ConfigDict(extra="forbid")

    subject_hash: str | None = None
    namespace_hashes: list[str] = Field(default_factory=list)
    target_hashes: list[str] = Field(default_factory=list)
    #: how many keyed fingerprints of the sessions' recorded content the audit searched for
    fingerprints: NonNegativeInt = 0


class Receipt(BaseModel):
    """A signed erasure receipt. ``target_hash`` is a keyed hash: a receipt never holds the target."""

    model_config = ConfigDict(extra="forbid")

    version: int = RECEIPT_VERSION
    unsee_version: str
    event_id: str
    target_hash: str
    sessions: list[str]
    routes: list[RouteReceipt]
    unreachable: list[str]
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    public_key: str
    #: copies other sessions hold after erasure, every route (session -> copies): listed, not in
    #: this erasure's scope; None when there are none (signed as if absent, like older receipts)
    other_sessions: dict[str, NonNegativeInt] | None = None
    #: a data subject's erasure (``subject.py``): what was selected, by keyed hashes; None for
    #: an erasure of one forget (signed as if absent, like older receipts)
    subject: SubjectFacts | None = None
    #: the forget this erasure belongs to, when it ran under another event id (``unsee erase``
    #: without ``--event-id`` after a forget erased the record first); None when ``event_id`` is the
    #: forget's own, or no forget of this target is known (signed as if absent, like older receipts)
    forget_event: str | None = None
    signature: str | None = None  # base64 of the Ed25519 signature of canonical_bytes

    @field_validator("version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        if v != RECEIPT_VERSION:
            raise ValueError(f"unknown receipt version {v} (this unsee reads version {RECEIPT_VERSION})")
        return v

    @field_validator("created_at")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        if v.tzinfo is None or v.utcoffset() is None:
            raise ValueError("created_at must carry a time zone")
        return v.astimezone(timezone.utc)


def canonical_bytes(receipt: Receipt) -> bytes:
    """The signed bytes: the receipt without signature as JSON, keys sorted, no spaces, UTF-8."""
    data = receipt.model_copy(update={"signature": None}).model_dump(mode="json")
    for optional in ("other_sessions", "subject", "forget_event"):
        if data.get(optional) is None:
            data.pop(optional, None)
    for route in data.get("routes", []):
        if route.get("other_sessions") is None:  # absent and None sign the same (older receipts)
            route.pop("other_sessions", None)
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _raw_public(pem: str) -> bytes:
    key = serialization.load_pem_public_key(pem.encode("ascii"))
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError(f"a {type(key).__name__}, not an Ed25519 public key")
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def sign_receipt(receipt: Receipt, key: SigningKey) -> Receipt:
    """A copy of ``receipt`` signed with ``key``; its ``public_key`` must be that key's (InvalidArgument if not)."""
    try:
        same = _raw_public(receipt.public_key) == _raw_public(key.public_pem())
    except (ValueError, UnsupportedAlgorithm):
        same = False
    if not same:
        raise InvalidArgument("the receipt's public_key is not the public key of the signing key")
    signature = base64.b64encode(key.sign(canonical_bytes(receipt))).decode("ascii")
    return receipt.model_copy(update={"signature": signature})


def verify_signature(receipt: Receipt, trusted_public_pem: str | None = None) -> bool:
    """Whether the receipt's signature holds for its content under its embedded public key.

    With ``trusted_public_pem`` (the home's ``receipt.pub``), also False when
    the receipt was signed by any other key. An unsigned receipt, a garbled
    key or signature: False. A garbled ``trusted_public_pem`` is the caller's
    error: InvalidArgument.
    """
    if trusted_public_pem is not None:
        try:
            trusted = _raw_public(trusted_public_pem)
        except (ValueError, UnsupportedAlgorithm) as exc:
            raise InvalidArgument(f"trusted_public_pem is not an Ed25519 public key: {exc}") from exc
    if receipt.signature is None:
        return False
    try:
        embedded = _raw_public(receipt.public_key)
        signature = base64.b64decode(receipt.signature, validate=True)
    except (ValueError, UnsupportedAlgorithm, binascii.Error):
        return False
    if trusted_public_pem is not None and embedded != trusted:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(embedded).verify(signature, canonical_bytes(receipt))
    except InvalidSignature:
        return False
    return True


def write_receipt(receipt: Receipt, path: str | os.PathLike) -> None:
    """Write the receipt as indented JSON, atomically, mode 0644 (creating the parent folder)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, (receipt.model_dump_json(indent=2) + "\n").encode("utf-8"), 0o644)


def read_receipt(path: str | os.PathLike) -> Receipt:
    """Read a receipt; FileNotFoundError when missing, ReceiptInvalid for bad JSON or schema."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"no erasure receipt at {path}") from None
    try:
        return Receipt.model_validate_json(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        reason = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'document'}: {e['msg']}" for e in errors[:5])
        raise ReceiptInvalid(reason, path) from None


def receipts_in(folder: str | os.PathLike) -> list[tuple[Path, Receipt]]:
    """Every receipt file of ``folder`` that reads as a receipt, newest first (by ``created_at``).

    A file that does not read (garbled, another version, half of a foreign write) is left out:
    ``read_receipt`` names what is wrong with one."""
    folder = Path(folder)
    out = []
    for path in folder.glob("*.json") if folder.is_dir() else ():
        try:
            out.append((path, read_receipt(path)))
        except (OSError, ReceiptInvalid):
            continue
    return sorted(out, key=lambda pr: pr[1].created_at, reverse=True)
