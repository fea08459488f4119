"""The value-level audit from stored rows: decode only the rows whose bytes can hide the target.

The value-level audit asks, of every checkpoint of a thread, whether its
values, pending writes or metadata hold the target (``history._holds``), and of
every memory store item whether its value does. Decoding every checkpoint
through the saver API is O(n²) in turns (each full-state checkpoint carries
the whole message list, rebuilt as LangChain messages and rendered as text):
~6 MB/s. Where unsee can read the saver's storage raw, each stored row
(a checkpoint blob, a channel blob, a pending write, a metadata document) is
judged from its serialized bytes instead:

- a *faithful* form of the target (``utf-8``, ``json-escaped``,
  ``json-unicode``: how JsonPlusSerializer's msgpack and SQLite's JSON store a
  string) in a plaintext row -> the row holds the target;
- a *lossy* form only (``casefold``, ``no-separators``, ``utf-16-*``,
  ``pglz``: the value predicate's normalised match is looser and stricter
  than those regexes) -> that row is decoded and tested with the value
  predicate (:func:`~unsee.plugins.erasure.forms.holds_target` over
  :func:`~unsee.plugins.erasure.history.value_text`);
- no form -> the row does not hold the target;
- an opaque row — encrypted (``msgpack+aesgcm:<kid>``, keys.py), pickled, or
  of a type this module does not know — is always decoded, that row only.

What the bytes cannot show, and the full decode would (the limits of this
judgement, the same as the byte-level scan's): text a value only gets when
rendered (a number's digits, ``None``, a ``datetime``'s repr, a field a
model's validator derives on load) and a normalised match spanning two stored
strings. What the bytes show and the decode would not (over-reporting, the
safe side): a target that is also serializer framing — a channel or node
name, a stored class's module path, a checkpoint id or timestamp. One case
is common enough to decode instead: a short target of hex digits only (four
digits of a card, an order number) is in about one random UUID in 3,900, and
LangChain and LangGraph name every message and tool call by one; a row whose
bytes hold a target of at most eight hex digits is decoded, and the value
predicate, which reads no names, judges it (a longer one is in one UUID in
hundreds of millions).

Savers read raw (those whose checkpointer driver, ``unsee.middleware.checkpointers``,
says ``rows_readable``): ``SqliteSaver`` (tables ``checkpoints``/``writes``) and
``InMemorySaver`` (dicts ``storage``/``writes``/``blobs``) and ``PostgresSaver`` on
one connection (``checkpoints``' JSONB — inline primitives and metadata, which
the driver returns decoded and are tested as values — ``checkpoint_blobs``,
``checkpoint_writes``), plain or under ``EncryptingSaver``; stores:
``SqliteStore`` (table ``store``). Anything else returns None here and the
route decodes everything, as before.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

from unsee.middleware.checkpointers import driver_for, driver_or_generic, unwrapped

from .forms import Form, holds_target

__all__ = ["FAITHFUL", "RowJudge", "history_rows_holding", "sqlite_checkpoint_holds", "store_rows_holding"]

#: forms in which a plaintext row stores the target's text exactly (msgpack strings, JSON)
FAITHFUL = ("utf-8", "json-escaped", "json-unicode")
#: serialization types whose bytes are the value's text: judged from the bytes
TRANSPARENT = frozenset({"msgpack", "json", "bytes", "bytearray"})
#: a target that can be a part of a random id (module docstring): its rows are decoded to tell
NAME_LIKE = re.compile(r"[0-9A-Fa-f]{1,8}")


class RowJudge:
    """Whether one stored row holds the target, from its bytes where they can tell.

    ``decode`` turns ``(type, bytes)`` into the value (the saver's serde);
    ``decoded`` counts the rows that had to be."""

    def __init__(self, target: str, forms: Iterable[Form], decode: Callable[[tuple[str, bytes]], Any]):
        from .history import value_text

        forms = tuple(forms)
        self.target = target
        self.faithful = [f.pattern for f in forms if f.name in FAITHFUL and isinstance(f.pattern, bytes)]
        self.lossy = [f.regex for f in forms if f.name not in FAITHFUL]
        self.decode = decode
        self.value_text = value_text
        self.decoded = 0
        self.rows = 0
        #: the bytes' "yes" is checked by a decode (the target may be a part of an id)
        self.confirm = NAME_LIKE.fullmatch(target) is not None

    def value(self, value: Any) -> bool:
        """The value predicate (what the full decode applies)."""
        return holds_target(self.value_text(value), self.target)

    def bytes_say(self, data: bytes) -> bool | None:
        """True: a faithful form is there; False: no form at all; None: only a lossy one, or a
        faithful one of a target an id can hold (decode)."""
        if any(p in data for p in self.faithful):
            return None if self.confirm else True
        return None if any(rx.search(data) for rx in self.lossy) else False

    def row(self, type_: str | None, data: bytes | None, test: Callable[[Any], bool] | None = None) -> bool:
        """Whether the row ``(type_, data)`` holds the target; ``test`` judges its decoded value
        (default: :meth:`value`), e.g. only a checkpoint's ``channel_values``."""
        self.rows += 1
        data = b"" if data is None else bytes(data)
        if type_ in TRANSPARENT:
            said = self.bytes_say(data)
            if said is not None:
                return said
        if type_ == "null":  # None: nothing to decode, but it renders as "None"
            return (test or self.value)(None)
        self.decoded += 1
        value = self.decode((type_, data))
        return (test or self.value)(value)

    def text_row(self, text: str | bytes | None, load: Callable[[Any], Any]) -> bool:
        """A JSON document stored as text (SQLite metadata, store values): ``load`` decodes it."""
        self.rows += 1
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text or b"")
        said = self.bytes_say(data)
        if said is not None:
            return said
        self.decoded += 1
        return self.value(load(text))


def _channel_values_hold(judge: RowJudge) -> Callable[[Any], bool]:
    return lambda ckpt: any(judge.value(v) for v in (ckpt or {}).get("channel_values", {}).values())


def history_rows_holding(saver: Any, thread: str, target: str, forms: Iterable[Form]) -> tuple[int, int] | None:
    """(checkpoints of ``thread`` in every namespace, those holding the target) from the saver's
    stored rows — what ``history.history_holding`` reports by decoding all — or None when the
    saver's storage is not one this module reads (decode everything then)."""
    driver = driver_or_generic(unwrapped(saver))  # (an EncryptingSaver wraps the real saver)
    if not driver.rows_readable():
        return None
    judge = RowJudge(target, forms, driver.saver.serde.loads_typed)
    read = {"sqlite": _sqlite_history, "memory": _memory_history, "postgres": _postgres_history}.get(driver.engine)
    return None if read is None else read(driver.saver, thread, judge)


def _postgres_history(saver: Any, thread: str, judge: RowJudge) -> tuple[int, int]:
    """PostgresSaver: a checkpoint's values are its JSONB's inline primitives overridden by the
    ``checkpoint_blobs`` rows of its channel versions (not ``empty``), as its ``list`` rebuilds them."""
    from psycopg.rows import tuple_row

    driver = driver_for(saver)

    with driver.locked(), driver.connection.cursor(row_factory=tuple_row) as cur:
        cur.execute("SELECT checkpoint_ns, checkpoint_id, checkpoint -> 'channel_values',"
                    " checkpoint -> 'channel_versions', metadata FROM checkpoints WHERE thread_id = %s", (thread,))
        ckpts = cur.fetchall()
        cur.execute("SELECT checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs WHERE thread_id = %s",
                    (thread,))
        blobs = {(ns, ch, ver): (t, b) for ns, ch, ver, t, b in cur.fetchall()}
        cur.execute("SELECT checkpoint_ns, checkpoint_id, type, blob FROM checkpoint_writes WHERE thread_id = %s",
                    (thread,))
        writes: dict[tuple[str, str], list[tuple[str, bytes]]] = {}
        for ns, cid, t, b in cur.fetchall():
            writes.setdefault((ns, cid), []).append((t, b))
    blob_holds: dict[tuple, bool] = {}  # a channel version's blob is shared by many checkpoints
    held = 0
    for ns, cid, inline, versions, meta in ckpts:
        inline, hit = dict(inline or {}), False
        for ch, ver in (versions or {}).items():
            blob = blobs.get((ns, ch, str(ver)))
            if blob is None or blob[0] == "empty":
                continue
            inline.pop(ch, None)  # the blob's value is the one loaded
            key = (ns, ch, str(ver))
            if key not in blob_holds:
                blob_holds[key] = judge.row(*blob)
            if blob_holds[key]:
                hit = True
                break
        hit = (hit or any(judge.value(v) for v in inline.values()) or judge.value(dict(meta or {}))
               or any(judge.row(t, b) for t, b in writes.get((ns, cid), ())))
        held += hit
    return len(ckpts), held


def _sqlite_history(saver: Any, thread: str, judge: RowJudge) -> tuple[int, int]:
    driver = driver_for(saver)
    holding: set[tuple[str, str]] = set()
    ids: list[tuple[str, str]] = []
    values = _channel_values_hold(judge)
    conn = driver.connection
    with driver.locked():
        cur = conn.execute("SELECT checkpoint_ns, checkpoint_id, type, checkpoint, metadata FROM checkpoints"
                           " WHERE thread_id = ?", (thread,))
        for ns, cid, type_, blob, meta in cur:
            key = (ns, cid)
            ids.append(key)
            # metadata: plain JSON in every SqliteSaver (EncryptedSerializer does not reach it)
            if judge.row(type_, blob, values) or (meta is not None and judge.text_row(meta, json.loads)):
                holding.add(key)
        known = set(ids)
        cur = conn.execute("SELECT checkpoint_ns, checkpoint_id, type, value FROM writes WHERE thread_id = ?",
                           (thread,))
        for ns, cid, type_, blob in cur:
            key = (ns, cid)
            if key in known and key not in holding and judge.row(type_, blob):
                holding.add(key)
    return len(ids), len(holding)


def sqlite_checkpoint_holds(saver: Any, judge: RowJudge) -> Callable[[str, str], bool | None]:
    """``holds(thread, checkpoint_id)`` for one root checkpoint of a saver with a SQLite driver: its value
    blob, metadata and pending writes judged as :func:`history_rows_holding` judges them (None:
    no such checkpoint). For checking a few checkpoints without listing the thread."""
    values = _channel_values_hold(judge)
    driver = driver_for(saver)
    conn = driver.connection

    def holds(thread: str, checkpoint_id: str) -> bool | None:
        key = (thread, checkpoint_id)
        with driver.locked():
            row = conn.execute("SELECT type, checkpoint, metadata FROM checkpoints WHERE thread_id = ? "
                               "AND checkpoint_ns = '' AND checkpoint_id = ?", key).fetchone()
            writes = conn.execute("SELECT type, value FROM writes WHERE thread_id = ? AND checkpoint_ns = '' "
                                  "AND checkpoint_id = ?", key).fetchall()
        if row is None:
            return None
        type_, blob, meta = row
        return (judge.row(type_, blob, values) or (meta is not None and judge.text_row(meta, json.loads))
                or any(judge.row(t, b) for t, b in writes))

    return holds


def _memory_history(saver: Any, thread: str, judge: RowJudge) -> tuple[int, int]:
    driver = driver_for(saver)
    total = held = 0
    storage, stored_writes, blobs = driver.dicts()
    serde = driver.saver.serde
    blob_holds: dict[tuple, bool] = {}  # a channel version's blob is shared by many checkpoints
    for ns, by_id in list(storage.get(thread, {}).items()):
        for cid, (ckpt, meta, _parent) in list(by_id.items()):
            total += 1
            # the checkpoint without its values is small: decoded for its channel versions
            versions = (serde.loads_typed(ckpt) or {}).get("channel_versions", {})
            hit = False
            for ch, ver in versions.items():
                key = (ns, ch, ver)
                if key not in blob_holds:
                    blob = blobs.get((thread, ns, ch, ver))
                    blob_holds[key] = blob is not None and blob[0] != "empty" and judge.row(*blob)
                if blob_holds[key]:
                    hit = True
                    break
            hit = hit or judge.row(*meta)
            if not hit:
                writes = stored_writes.get((thread, ns, cid), {})
                hit = any(judge.row(*w[2]) for w in list(writes.values()))
            held += hit
    return total, held


def store_rows_holding(store: Any, target: str, forms: Iterable[Form]) -> tuple[int, int] | None:
    """(items of the store, those whose value holds the target) from its stored rows, or None
    when the store is not one this module reads (``SqliteStore``)."""
    try:
        from langgraph.store.sqlite import SqliteStore
    except ImportError:  # pragma: no cover
        return None
    if not isinstance(store, SqliteStore) or not isinstance(getattr(store, "conn", None), sqlite3.Connection):
        return None
    judge = RowJudge(target, forms, lambda tb: None)
    total = held = 0
    with getattr(store, "lock", None) or contextlib.nullcontext():
        for (value,) in store.conn.execute("SELECT value FROM store"):
            total += 1
            held += judge.text_row(value, json.loads)
    return total, held
