"""Crypto-shredding of LangGraph checkpoints: per-thread AES-GCM keys.

Bytes a delete cannot reach (PostgreSQL WAL, backups, replicas, WAL archives)
are made unreadable by storing every serialized value encrypted under a key of
its thread and, on forget, destroying the key. :class:`KeyStore` keeps the keys
in a local SQLite file (``secure_delete=ON``; a destroy checkpoints and
truncates the WAL and vacuums). :class:`ThreadCipher` is LangGraph's
``CipherProtocol`` over it; :func:`encrypted_serde` wraps it in an
``EncryptedSerializer``; :class:`EncryptingSaver` (built by :func:`encrypting`)
sets the thread of each write from its config, so every write of a thread uses
that thread's key whichever thread of Python runs it.

Limits (what this does NOT encrypt):

- checkpoint ``metadata`` and extra ``configurable`` keys are written in
  plaintext by every LangGraph saver;
- ``PostgresSaver`` stores plain strings, numbers, booleans and None of the
  state as JSONB in ``checkpoints``, outside the serializer;
- thread ids, checkpoint ids, channel names and the cipher name
  (``<type>+aesgcm:<kid>``) are plaintext; kids are random, never derived from
  the thread id;
- LangGraph stores (``SqliteStore``, ``InMemoryStore``) take no ``serde``: their
  values are plain JSON. Values encrypted outside a thread (no
  ``current_thread``) use the shared key of thread ``""`` and are erasable only
  by destroying that shared key;
- after a shred every read of that thread raises :class:`KeyDestroyed`, and so
  does ``list(None)`` across all threads; ``delete_thread`` works without the
  key (and destroys the thread's keys). A key destroyed elsewhere is gone here
  at the next read: no key is cached in memory.

:class:`EncryptingSaver` has exactly the optional methods (``copy_thread``,
``prune``, ``delete_for_runs``, ...) of the saver it wraps, and keeps the keys in
step with them: see its docstring for what each guarantees.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from unsee.middleware.checkpointers import CheckpointerDriver, Convert, driver_or_generic
from unsee.middleware.errors import UnseeError

from .history import implemented
from .sqlite_scrub import scrub

__all__ = ["EncryptingSaver", "KeyDestroyed", "KeyStore", "OPTIONAL_METHODS", "RekeyUnsupported", "ThreadCipher",
           "current_thread", "encrypted_serde", "encrypting", "implemented"]

#: The thread whose key encrypts the next value; None -> the shared key (thread "").
current_thread: contextvars.ContextVar[str | None] = contextvars.ContextVar("unsee_current_thread", default=None)
SHARED = ""
PREFIX = "aesgcm:"


class KeyDestroyed(UnseeError, LookupError):
    """The key a value was encrypted under has been destroyed (or never existed here)."""

    def __init__(self, kid: str):
        super().__init__(f"encryption key {kid!r} was destroyed: the data it protected is shredded")
        self.kid = kid


class KeyStore:
    """Per-thread AES-256 keys in a SQLite file; thread-safe (one connection, one lock).

    A thread has at most one active key (the one new values use) and any number
    of inactive ones (left by :meth:`rotate`, still used to decrypt old values)
    until :meth:`destroy`.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        os.chmod(self.path, 0o600)
        with self._lock:
            self._conn.execute("PRAGMA secure_delete=ON")
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("CREATE TABLE IF NOT EXISTS keys (kid TEXT PRIMARY KEY, thread TEXT NOT NULL,"
                               " key BLOB NOT NULL, created REAL NOT NULL, active INT NOT NULL)")
            self._conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS keys_one_active ON keys(thread) WHERE active=1")
            self._conn.execute("CREATE INDEX IF NOT EXISTS keys_thread ON keys(thread)")

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _new(self, conn: sqlite3.Connection, thread: str) -> tuple[str, bytes]:
        kid, key = secrets.token_hex(8), AESGCM.generate_key(bit_length=256)
        conn.execute("INSERT INTO keys VALUES (?, ?, ?, ?, 1)", (kid, thread, key, time.time()))
        return kid, key

    def key_for(self, thread: str) -> tuple[str, bytes]:
        """``(kid, key)`` of the thread's active key, created atomically on first use."""
        find = "SELECT kid, key FROM keys WHERE thread=? AND active=1"
        with self._lock:
            if row := self._conn.execute(find, (thread,)).fetchone():
                return row[0], bytes(row[1])
            with self._tx() as conn:  # re-read under the write lock: another process may have made it
                row = conn.execute(find, (thread,)).fetchone()
                return (row[0], bytes(row[1])) if row else self._new(conn, thread)

    def key(self, kid: str) -> bytes:
        """The key ``kid``; :class:`KeyDestroyed` when it is gone."""
        with self._lock:
            row = self._conn.execute("SELECT key FROM keys WHERE kid=?", (kid,)).fetchone()
        if row is None:
            raise KeyDestroyed(kid)
        return bytes(row[0])

    def rotate(self, thread: str) -> tuple[str | None, str]:
        """Make a new active key for the thread; the old one stays (inactive) until destroyed.
        Returns ``(old kid or None, new kid)``."""
        with self._tx() as conn:
            row = conn.execute("SELECT kid FROM keys WHERE thread=? AND active=1", (thread,)).fetchone()
            conn.execute("UPDATE keys SET active=0 WHERE thread=? AND active=1", (thread,))
            return (row[0] if row else None), self._new(conn, thread)[0]

    def kids_of(self, thread: str) -> list[str]:
        """Every kid of the thread, oldest first (active and inactive)."""
        with self._lock:
            rows = self._conn.execute("SELECT kid FROM keys WHERE thread=? ORDER BY created, rowid", (thread,))
            return [r[0] for r in rows]

    def threads(self) -> list[str]:
        """Threads that have at least one key."""
        with self._lock:
            return [r[0] for r in self._conn.execute("SELECT DISTINCT thread FROM keys ORDER BY thread")]

    def destroy(self, kids: Iterable[str]) -> bool:
        """Delete the keys, then VACUUM and ``wal_checkpoint(TRUNCATE)`` so their bytes are in
        neither the db nor its -wal/-shm. True when both completed (False: another connection
        held the file; the rows are gone, zeroed by secure_delete, but old pages may linger in -wal)."""
        kids = list(kids)
        with self._lock:
            with self._tx() as conn:
                conn.executemany("DELETE FROM keys WHERE kid=?", [(k,) for k in kids])
            return scrub(self._conn).complete  # the one WAL-truncate + VACUUM of the erasure plugin

    def shred(self, thread: str) -> bool:
        """Destroy every key of the thread (see :meth:`destroy`)."""
        return self.destroy(self.kids_of(thread))

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class ThreadCipher:
    """LangGraph ``CipherProtocol``: AES-256-GCM under the key of :data:`current_thread`.

    ``encrypt`` -> ``("aesgcm:<kid>", nonce(12) + ciphertext+tag)`` with the kid as
    associated data; ``decrypt`` finds the key by the kid in the name, so reads need
    no thread. A destroyed key raises :class:`KeyDestroyed`; a tampered value raises
    ``cryptography.exceptions.InvalidTag``.
    """

    def __init__(self, store: KeyStore):
        self.store = store

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        thread = current_thread.get()
        kid, key = self.store.key_for(SHARED if thread is None else thread)
        nonce = os.urandom(12)
        return PREFIX + kid, nonce + AESGCM(key).encrypt(nonce, plaintext, kid.encode())

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        if not ciphername.startswith(PREFIX):
            raise ValueError(f"unsupported cipher {ciphername!r} (expected {PREFIX}<kid>)")
        kid = ciphername[len(PREFIX):]
        return AESGCM(self.store.key(kid)).decrypt(ciphertext[:12], ciphertext[12:], kid.encode())


def encrypted_serde(store: KeyStore, serde: SerializerProtocol | None = None) -> EncryptedSerializer:
    """``EncryptedSerializer(ThreadCipher(store), serde or JsonPlusSerializer())``."""
    return EncryptedSerializer(ThreadCipher(store), serde or JsonPlusSerializer())


def _ours(serde: Any, store: KeyStore) -> bool:
    return (isinstance(serde, EncryptedSerializer) and isinstance(serde.cipher, ThreadCipher)
            and serde.cipher.store is store)


@contextmanager
def _thread_of(config: dict) -> Iterator[None]:
    token = current_thread.set(str((config.get("configurable") or {}).get("thread_id", SHARED)))
    try:
        yield
    finally:
        current_thread.reset(token)


class RekeyUnsupported(UnseeError, NotImplementedError):
    """The wrapped saver's storage is not one :class:`EncryptingSaver` can re-encrypt in place
    (needed by ``copy_thread`` and ``prune(strategy="keep_latest")``); nothing was changed."""


#: BaseCheckpointSaver methods a saver may or may not implement. An EncryptingSaver has each one
#: exactly when the saver it wraps has it (LangGraph and its conformance suite detect a capability
#: by ``type(saver).<method> is not BaseCheckpointSaver.<method>``).
OPTIONAL_METHODS = ("get_tuple", "list", "put", "put_writes", "delete_thread", "delete_for_runs", "copy_thread",
                    "prune", "get_delta_channel_history", "get_next_version",
                    "aget_tuple", "alist", "aput", "aput_writes", "adelete_thread", "adelete_for_runs",
                    "acopy_thread", "aprune", "aget_delta_channel_history")


class EncryptingSaver(BaseCheckpointSaver):
    """Delegates to ``inner`` (whose serde must be :func:`encrypted_serde` over ``store``),
    setting :data:`current_thread` from ``config["configurable"]["thread_id"]`` around every
    write so each value is encrypted under its own thread's key.

    ``EncryptingSaver(inner, store)`` returns an instance of a subclass that has exactly the
    :data:`OPTIONAL_METHODS` ``type(inner)`` implements, sync and async (so a capability the
    inner saver lacks is not advertised); ``isinstance(x, EncryptingSaver)`` holds for all.

    Key bookkeeping (each only where the inner saver has the method):

    - ``delete_thread(t)`` / ``prune([t], strategy="delete")``: the rows are deleted first,
      then every key of ``t`` is destroyed. A crash between the two leaves no rows and a live
      key: calling it again destroys the key. (A ``t`` written again later gets a new key.)
    - ``prune([t], strategy="keep_latest")``: the inner saver prunes; then ``t`` gets a new key
      (:meth:`KeyStore.rotate`), every value it kept is re-encrypted under it in one transaction
      of the inner saver's storage, and only then are ``t``'s old keys destroyed: the kept
      checkpoints stay readable, the pruned ones' ciphertext (anywhere it survives: WAL,
      backups) is unreadable. A crash at any point leaves every kept value under a key that
      still exists (the old keys are destroyed last); calling it again finishes the shred.
    - ``copy_thread(src, dst)``: the inner saver copies, then :meth:`rekey_thread` re-encrypts
      ``dst``'s values under ``dst``'s own key, so destroying either thread's keys leaves the
      other readable. Until it returns (or after a crash inside it) the copy may still depend on
      ``src``'s keys: call :meth:`rekey_thread` on ``dst`` (idempotent) before shredding ``src``.
    - ``delete_for_runs``: delegated; the remaining checkpoints keep their keys (and stay
      readable). The deleted runs' ciphertext is NOT shredded: it shares its thread's key with
      the checkpoints that remain.

    Re-encryption in place is implemented where the inner saver's checkpointer driver
    ``reencrypts`` (``unsee.middleware.checkpointers``): ``InMemorySaver`` (and subclasses),
    ``PostgresSaver`` and ``AsyncPostgresSaver``; over another storage ``copy_thread`` and
    ``prune(keep_latest)`` raise :class:`RekeyUnsupported` before changing anything.
    """

    _variants: dict[frozenset[str], type] = {}
    _variants_lock = threading.Lock()

    def __new__(cls, inner: BaseCheckpointSaver | None = None, store: KeyStore | None = None):
        # (no arguments: copy.copy / pickle re-creating an instance of a variant)
        if cls is EncryptingSaver and inner is not None:
            cls = _variant(frozenset(m for m in OPTIONAL_METHODS if implemented(type(inner), m)))
        return super().__new__(cls)

    def __init__(self, inner: BaseCheckpointSaver, store: KeyStore):
        if not _ours(inner.serde, store):
            raise ValueError("the inner saver must use serde=encrypted_serde(store); build it with encrypting()")
        super().__init__(serde=inner.serde)
        self.inner, self.store = inner, store

    @property
    def config_specs(self) -> list:
        return self.inner.config_specs

    def with_allowlist(self, extra_allowlist) -> EncryptingSaver:
        inner = self.inner.with_allowlist(extra_allowlist)
        return self if inner is self.inner else EncryptingSaver(inner, self.store)

    # --- re-encryption in place -------------------------------------------------------------

    def rekey_thread(self, thread_id: str) -> int:
        """Re-encrypt every value of ``thread_id`` that is not under one of its own keys (e.g. a
        copy's values, under the source thread's keys) under its active key; returns how many.
        Idempotent; one transaction of the inner saver's storage. :class:`RekeyUnsupported` over
        a storage it cannot rewrite, :class:`KeyDestroyed` (nothing changed) when a value's key
        is already gone."""
        thread = str(thread_id)
        rows = _rows(self.inner)
        new = self.store.key_for(thread)[0]
        return rows.rekey(thread, self._converter(new, keep=set(self.store.kids_of(thread))))

    async def arekey_thread(self, thread_id: str) -> int:
        """Async :meth:`rekey_thread`."""
        thread = str(thread_id)
        rows = _rows(self.inner)
        new = (await asyncio.to_thread(self.store.key_for, thread))[0]
        keep = set(await asyncio.to_thread(self.store.kids_of, thread))
        return await rows.arekey(thread, self._converter(new, keep=keep))

    def _converter(self, new_kid: str, keep: set[str]) -> Callable[[str, bytes], tuple[str, bytes] | None]:
        """(type, data) -> the same value under ``new_kid``; None when it is not ours or already
        under a kid in ``keep``. Works on the ciphertext: nothing is deserialized."""
        new_key, mark = self.store.key(new_kid), "+" + PREFIX
        keep = keep | {new_kid}

        def convert(typ: str, data: bytes) -> tuple[str, bytes] | None:
            if not isinstance(typ, str) or mark not in typ or data is None:
                return None
            base, kid = typ.rsplit(mark, 1)
            if kid in keep:
                return None
            data = bytes(data)
            plain = AESGCM(self.store.key(kid)).decrypt(data[:12], data[12:], kid.encode())
            nonce = os.urandom(12)
            return f"{base}{mark}{new_kid}", nonce + AESGCM(new_key).encrypt(nonce, plain, new_kid.encode())

        return convert

    def _rotate_rekey_destroy(self, thread: str, old: list[str]) -> None:
        """prune(keep_latest)'s key bookkeeping for one thread (class docstring)."""
        if not old:  # nothing of this thread was ever encrypted here
            return
        new = self.store.rotate(thread)[1]
        _rows(self.inner).rekey(thread, self._converter(new, keep=set()))
        self.store.destroy(old)

    async def _arotate_rekey_destroy(self, thread: str, old: list[str]) -> None:
        if not old:
            return
        new = (await asyncio.to_thread(self.store.rotate, thread))[1]
        await _rows(self.inner).arekey(thread, self._converter(new, keep=set()))
        await asyncio.to_thread(self.store.destroy, old)

    def _shred(self, thread: str) -> None:
        if self.store.kids_of(thread):  # (no key: skip the key store's VACUUM)
            self.store.shred(thread)


def _thread_list(thread_ids) -> list[str]:
    if isinstance(thread_ids, str):
        raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
    return [str(t) for t in thread_ids]


class _Methods:
    """The implementations of :data:`OPTIONAL_METHODS`; each EncryptingSaver variant gets those
    its inner saver has."""

    def get_tuple(self, config):
        return self.inner.get_tuple(config)

    def list(self, config, *, filter=None, before=None, limit=None):
        return self.inner.list(config, filter=filter, before=before, limit=limit)

    def put(self, config, checkpoint, metadata, new_versions):
        with _thread_of(config):
            return self.inner.put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""):
        with _thread_of(config):
            return self.inner.put_writes(config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        self.inner.delete_thread(thread_id)  # rows first: a crash after it leaves a key, never unreadable rows
        self._shred(str(thread_id))

    def delete_for_runs(self, run_ids) -> None:
        return self.inner.delete_for_runs(run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        _rows(self.inner)  # RekeyUnsupported before anything is copied
        self.store.key_for(str(target_thread_id))  # the target's own key exists before its rows
        self.inner.copy_thread(source_thread_id, target_thread_id)
        self.rekey_thread(target_thread_id)

    def prune(self, thread_ids, *, strategy: str = "keep_latest") -> None:
        threads = _thread_list(thread_ids)
        if strategy != "keep_latest":  # "delete" (an unknown strategy: the inner saver's error)
            self.inner.prune(threads, strategy=strategy)
            if strategy == "delete":
                for t in threads:
                    self._shred(t)
            return
        driver = driver_or_generic(self.inner)
        if driver.async_only:  # e.g. AsyncPostgresSaver: its storage is reached from its loop
            return driver.on_loop(self.aprune(threads, strategy=strategy))
        _rows(self.inner)  # RekeyUnsupported before anything is pruned
        old = {t: self.store.kids_of(t) for t in threads}
        self.inner.prune(threads, strategy=strategy)
        for t in threads:
            self._rotate_rekey_destroy(t, old[t])

    def get_delta_channel_history(self, *, config, channels):
        return self.inner.get_delta_channel_history(config=config, channels=channels)

    def get_next_version(self, current, channel):
        return self.inner.get_next_version(current, channel)

    async def aget_tuple(self, config):
        return await self.inner.aget_tuple(config)

    async def alist(self, config, *, filter=None, before=None, limit=None) -> AsyncIterator:
        async for item in self.inner.alist(config, filter=filter, before=before, limit=limit):
            yield item

    async def aput(self, config, checkpoint, metadata, new_versions):
        with _thread_of(config):
            return await self.inner.aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config, writes, task_id: str, task_path: str = ""):
        with _thread_of(config):
            return await self.inner.aput_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self.inner.adelete_thread(thread_id)
        await asyncio.to_thread(self._shred, str(thread_id))

    async def adelete_for_runs(self, run_ids) -> None:
        return await self.inner.adelete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        _rows(self.inner)
        await asyncio.to_thread(self.store.key_for, str(target_thread_id))
        await self.inner.acopy_thread(source_thread_id, target_thread_id)
        await self.arekey_thread(target_thread_id)

    async def aprune(self, thread_ids, *, strategy: str = "keep_latest") -> None:
        threads = _thread_list(thread_ids)
        if strategy != "keep_latest":
            await self.inner.aprune(threads, strategy=strategy)
            if strategy == "delete":
                for t in threads:
                    await asyncio.to_thread(self._shred, t)
            return
        _rows(self.inner)
        old = {t: await asyncio.to_thread(self.store.kids_of, t) for t in threads}
        await self.inner.aprune(threads, strategy=strategy)
        for t in threads:
            await self._arotate_rekey_destroy(t, old[t])

    async def aget_delta_channel_history(self, *, config, channels):
        return await self.inner.aget_delta_channel_history(config=config, channels=channels)


def _variant(methods: frozenset[str]) -> type:
    """The EncryptingSaver subclass with exactly ``methods`` of :data:`OPTIONAL_METHODS` (cached)."""
    with EncryptingSaver._variants_lock:
        cls = EncryptingSaver._variants.get(methods)
        if cls is None:
            body = {m: _Methods.__dict__[m] for m in OPTIONAL_METHODS if m in methods}
            body.update(__module__=__name__, __qualname__="EncryptingSaver", __doc__=EncryptingSaver.__doc__)
            cls = EncryptingSaver._variants[methods] = type("EncryptingSaver", (EncryptingSaver,), body)
        return cls


class _Rows:
    """A thread's stored values re-encrypted in place through the inner saver's checkpointer
    driver (``unsee.middleware.checkpointers``): only values of ours (their type holds
    ``+aesgcm:``) are candidates; all new values are computed before any is stored."""

    def __init__(self, driver: CheckpointerDriver):
        self.driver = driver

    def rekey(self, thread: str, convert: Convert) -> int:
        return self.driver.reencrypt(thread, convert, "+" + PREFIX)

    async def arekey(self, thread: str, convert: Convert) -> int:
        return await self.driver.areencrypt(thread, convert, "+" + PREFIX)


def _rows(inner: BaseCheckpointSaver) -> _Rows:
    """How ``inner``'s stored values are re-encrypted in place; :class:`RekeyUnsupported` if its
    driver cannot (``reencrypts``)."""
    driver = driver_or_generic(inner)
    if not driver.reencrypts():
        raise RekeyUnsupported(f"cannot re-encrypt {type(inner).__name__}'s stored values in place: copy_thread "
                               "and prune(strategy='keep_latest') are refused over it (nothing was changed)")
    return _Rows(driver)


def encrypting(saver: BaseCheckpointSaver | Callable[..., BaseCheckpointSaver], store: KeyStore) -> EncryptingSaver:
    """An :class:`EncryptingSaver` over ``store``.

    ``saver`` is either a factory called as ``saver(serde=encrypted_serde(store))``
    (e.g. ``lambda serde: SqliteSaver(conn, serde=serde)`` or ``InMemorySaver``), or a
    saver instance: if its serde is not yet ours it is wrapped IN PLACE
    (``EncryptedSerializer(ThreadCipher(store), saver.serde)``); values it already
    holds stay plaintext (and still load) until rewritten.
    """
    if not isinstance(saver, BaseCheckpointSaver):
        saver = saver(serde=encrypted_serde(store))
    elif not _ours(saver.serde, store):
        saver.serde = encrypted_serde(store, saver.serde)
    return EncryptingSaver(saver, store)
