"""Signed erasure receipts: what was erased where, signed with the home's Ed25519 key.

A receipt names the target only by a keyed hash. Its signature covers
:func:`canonical_bytes` (the receipt without its signature, as sorted compact
JSON), and the receipt embeds the public key, so anyone can check it was not
changed; pinning the home's key (``trusted_public_pem``) also checks who
signed it.

The signing key (:meth:`SigningKey.resolve`): the PEM file ``$UNSEE_RECEIPT_KEY`` names,
else on a shared PostgreSQL store the key held there (``shared.py``: made once, by the
first worker that signs), else ``<home>/receipt.key``. ``<home>/receipt.pub`` is the public
key in use. On a shared store every receipt is also a row of the store (:func:`save_receipt`),
so any worker finds and verifies it (:func:`stored_receipt`).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import secrets
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, ValidationError, field_validator

from unsee.middleware.errors import InvalidArgument
from unsee.middleware.sqldb import Db
from unsee.plugins.erasure.errors import ReceiptInvalid, ReceiptKeyInvalid

from . import shared

RECEIPT_VERSION = 1
KEY_FILE = "receipt.key"
PUB_FILE = "receipt.pub"
#: the environment variable naming a PEM Ed25519 private key file every worker signs with
KEY_ENV = "UNSEE_RECEIPT_KEY"
_ENV_HINT = (f"point ${KEY_ENV} at an Ed25519 private key in PEM (openssl genpkey -algorithm ed25519 "
             f"-out receipt.key), or unset it")
_STORE_HINT = (f"the store's unsee_meta row {shared.KEY_NAME!r} was changed outside unsee: restore it, or delete "
               "the row to make a new key (old receipts keep their embedded key)")


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


def _private_key(data: bytes, where: str | os.PathLike, hint: str | None = None) -> Ed25519PrivateKey:
    """The Ed25519 private key PEM ``data`` holds; ReceiptKeyInvalid naming ``where`` if none."""
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise ReceiptKeyInvalid(where, str(exc) or type(exc).__name__, hint) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise ReceiptKeyInvalid(where, f"a {type(key).__name__}, not an Ed25519 key", hint)
    return key


def _new_pem() -> bytes:
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


class SigningKey:
    """An Ed25519 receipt signing key; ``where`` says which (for messages)."""

    def __init__(self, private_key: Ed25519PrivateKey, where: str = KEY_FILE):
        self._key = private_key
        self.where = where

    @classmethod
    def resolve(cls, home: str | os.PathLike, db: Db | None = None) -> SigningKey:
        """The key erasures of ``home`` sign with: ``$UNSEE_RECEIPT_KEY``'s file, else the key of
        the shared store ``db`` (made there by the first worker that asks), else ``home/receipt.key``
        (:meth:`load_or_create`). Writes ``home/receipt.pub`` with its public key. A bad key is
        ReceiptKeyInvalid naming it, raised before anything is written."""
        key = cls.from_env()
        if key is None and db is not None:
            key = cls.from_store(db, create=True)
        if key is None:
            return cls.load_or_create(home)
        key._write_pub(Path(home))
        return key

    @classmethod
    def from_env(cls) -> SigningKey | None:
        """The key of the PEM file ``$UNSEE_RECEIPT_KEY`` names (None when it is unset or empty);
        a missing, unreadable or non-Ed25519 file is ReceiptKeyInvalid naming it."""
        path = os.environ.get(KEY_ENV)
        if not path:
            return None
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise ReceiptKeyInvalid(path, exc.strerror or type(exc).__name__, _ENV_HINT) from None
        return cls(_private_key(data, path, _ENV_HINT), where=f"${KEY_ENV} ({path})")

    @classmethod
    def from_store(cls, db: Db, create: bool = False) -> SigningKey | None:
        """The shared store's key (``create``: made and stored when there is none, the first
        writer's kept); None when there is none and ``create`` is False."""
        pem = shared.stored_key(db, (lambda: _new_pem().decode("ascii")) if create else None)
        if pem is None:
            return None
        return cls(_private_key(pem.encode("ascii"), f"unsee_meta[{shared.KEY_NAME!r}] of the store", _STORE_HINT),
                   where="the shared store's key")

    def _write_pub(self, home: Path) -> None:
        pub = home / PUB_FILE
        public = self.public_pem().encode("ascii")
        if not pub.exists() or pub.read_bytes() != public:
            home.mkdir(parents=True, exist_ok=True)
            _atomic_write(pub, public, 0o644)

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
            pem = _new_pem()
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
        signing = cls(_private_key(path.read_bytes(), path), where=f"this home's key ({path})")
        signing._write_pub(home)
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


class ReconciledItem(BaseModel):
    """One item of a forget's reconciliation as its receipt states it (names and ids only: no
    arguments, no results)."""

    model_config = ConfigDict(extra="forbid")

    key: str
    #: ``compensate`` | ``run`` | ``report``
    action: str
    #: the call's tool, and what ran for it (the compensator, or the deferred tool)
    tool: str
    runs: str | None = None
    #: the orphaned call (an artifact of the world the forget replaced)
    call_artifact_id: str | None = None
    #: ``planned`` | ``started`` | ``done`` | ``failed`` | ``left``
    state: str
    #: why it is left (``report``: no compensator), or why it failed (the error's type)
    why: str | None = None


class ReconciliationFacts(BaseModel):
    """What the world was brought back to after the forget: what was compensated, what ran, what
    was left and why, as of ``as_of``."""

    model_config = ConfigDict(extra="forbid")

    items: list[ReconciledItem] = Field(default_factory=list)
    as_of: datetime


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
    #: what the audit after erasure should have read and could not (``AuditReport.incomplete``:
    #: "route: what, why, how to supply it"): the copies counted are then not the whole count and
    #: the erasure is not clean; None when the audit was complete (signed as if absent, like older
    #: receipts, which predate the check)
    incomplete: list[str] | None = None
    #: the forget's reconciliation of the world (compensations, deferred calls run, effects left),
    #: signed into the receipt each time a reconcile changes it; None: none was planned (signed as
    #: if absent, like older receipts)
    reconciliation: ReconciliationFacts | None = None
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
    for optional in ("other_sessions", "subject", "forget_event", "incomplete", "reconciliation"):
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


def public_pem(pem: str) -> str:
    """``pem`` when it is an Ed25519 public key (PEM SubjectPublicKeyInfo); InvalidArgument if not."""
    try:
        _raw_public(pem)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise InvalidArgument(f"not an Ed25519 public key in PEM: {exc}") from None
    return pem


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
    _atomic_write(path, _text(receipt).encode("utf-8"), 0o644)


def _text(receipt: Receipt) -> str:
    return receipt.model_dump_json(indent=2) + "\n"


def save_receipt(receipt: Receipt, path: str | os.PathLike, db: Db | None = None) -> None:
    """Write the receipt to the shared store ``db`` (a row keyed by its event id, replacing an
    earlier one of that event), then to the file ``path`` of this machine (:func:`write_receipt`)."""
    if db is not None:
        shared.write_receipt_row(db, receipt.event_id, json.dumps(receipt.sessions), _text(receipt),
                                 int(receipt.created_at.timestamp() * 1e9))
    write_receipt(receipt, path)


def receipt_path(home: str | os.PathLike, event_id: str) -> Path:
    """Where a home keeps the receipt of ``event_id`` (``<home>/receipts/<event id>.json``)."""
    return Path(home) / "receipts" / f"{event_id}.json"


def amend_receipt(home: str | os.PathLike, db: Db | None, event_id: str, **update: Any) -> Receipt | None:
    """The receipt of ``event_id`` with ``update`` (its optional sections, e.g. ``reconciliation``),
    signed again with this deployment's key and saved in place of the old one (store row and file,
    :func:`receipt_path`); None when there is no receipt of that event (nothing is written)."""
    path = receipt_path(home, event_id)
    old = stored_receipt(db, event_id) if db is not None else None
    if old is None:
        if not path.exists():
            return None
        old = read_receipt(path)
    key = SigningKey.resolve(home, db)
    new = sign_receipt(old.model_copy(update={**update, "signature": None, "public_key": key.public_pem()}), key)
    save_receipt(new, path, db)
    return new


def stored_receipt(db: Db, event_id: str) -> Receipt | None:
    """The receipt of ``event_id`` in the shared store (None when it holds none; ReceiptInvalid
    when the row does not read as a receipt). Makes no table."""
    if not shared.has_tables(db):
        return None
    text = shared.read_receipt_row(db, event_id)
    return None if text is None else _parse(text, f"erasure_receipts[{event_id!r}] of the store")


def stored_receipts(db: Db, sessions: list[str] | None = None) -> list[Receipt]:
    """Every receipt in the shared store that reads as one (of exactly ``sessions`` when
    given), newest first; like :func:`receipts_in`, a row that does not read is left out."""
    out = []
    for event_id, text in shared.receipt_rows(db, None if sessions is None else json.dumps(sessions)):
        try:
            out.append(_parse(text, event_id))
        except ReceiptInvalid:
            continue
    return sorted(out, key=lambda r: r.created_at, reverse=True)


def trusted_key(home: str | os.PathLike | None, db: Db | None = None) -> tuple[str | None, str]:
    """(the public key PEM a receipt of this deployment is pinned to, which key that is), in
    the order :meth:`SigningKey.resolve` signs with: ``$UNSEE_RECEIPT_KEY``, the shared store's
    key, ``home/receipt.pub``; (None, ...) when there is none. Creates nothing."""
    key = SigningKey.from_env()
    if key is None and db is not None:
        key = SigningKey.from_store(db)
    if key is not None:
        return key.public_pem(), key.where
    pub = Path(home) / PUB_FILE if home is not None else None
    if pub is not None and pub.exists():
        return pub.read_text(), f"this home's key ({pub})"
    return None, "the key embedded in it (no key to pin it to: no receipt.pub in this home, no shared key)"


def read_receipt(path: str | os.PathLike) -> Receipt:
    """Read a receipt; FileNotFoundError when missing, ReceiptInvalid for bad JSON or schema."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"no erasure receipt at {path}") from None
    return _parse(data, path)


def _parse(data: bytes | str, where: str | os.PathLike) -> Receipt:
    try:
        return Receipt.model_validate_json(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        reason = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'document'}: {e['msg']}" for e in errors[:5])
        raise ReceiptInvalid(reason, where) from None


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
