"""SQLite provenance store and content vault under the unsee home.

``provenance.sqlite`` holds sessions, artifacts, checkpoints and the spans
they came from (for export). ``vault.sqlite`` holds payload text keyed by
artifact id, in its own file so it can be erased without touching structure.

Writes go through one background writer thread in batches: recording is an
observer and must not put SQLite commits on the agent's hot path. ``flush()``
waits until everything submitted so far is durable; readers call it first.
A failed write never raises into the agent: it is logged, counted, and the
session is marked incomplete.

Opening checks both files first, read-only (``check_db``): a damaged file
(truncated, garbled, another program's) is ``StoreDamaged`` naming it, and is
never rebuilt as an empty store. The schema is made in one transaction and
stamped with ``STORE_VERSION`` (``PRAGMA user_version``).
"""

from __future__ import annotations

import json
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import SessionNotFound, StoreDamaged
from .records import Artifact, ArtifactType, Checkpoint, CheckpointKind, SessionInfo
from .store_files import (PROVENANCE_TABLES, STORE_VERSION, VAULT_TABLES, _vault_has_content, check_db,
                          ensure_home)

log = logging.getLogger("unsee.store")

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
  session_id TEXT PRIMARY KEY,
  created_ns INTEGER NOT NULL,
  updated_ns INTEGER NOT NULL,
  incomplete INTEGER NOT NULL DEFAULT 0,
  failures INTEGER NOT NULL DEFAULT 0,
  tokenizer TEXT,
  meta TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS artifacts (
  session_id TEXT NOT NULL,
  id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  parents TEXT NOT NULL,
  source_ids TEXT NOT NULL,
  token_start INTEGER NOT NULL,
  token_end INTEGER NOT NULL,
  turn INTEGER NOT NULL,
  step INTEGER NOT NULL,
  committed INTEGER NOT NULL,
  content_hash TEXT NOT NULL,
  labels TEXT NOT NULL,
  attrs TEXT NOT NULL,
  trace_id TEXT,
  span_id TEXT,
  PRIMARY KEY (session_id, id)
);
CREATE INDEX IF NOT EXISTS artifacts_seq ON artifacts(session_id, seq);
CREATE TABLE IF NOT EXISTS checkpoints (
  session_id TEXT NOT NULL,
  id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  kind TEXT NOT NULL,
  step INTEGER NOT NULL,
  turn INTEGER NOT NULL,
  token_offset INTEGER NOT NULL,
  cache_handle TEXT,
  env_snapshot_id TEXT,
  prompt_manifest TEXT NOT NULL,
  langgraph_checkpoint_id TEXT,
  created_ns INTEGER NOT NULL,
  langgraph_thread_id TEXT,
  PRIMARY KEY (session_id, id)
);
CREATE TABLE IF NOT EXISTS spans (
  session_id TEXT NOT NULL,
  trace_id TEXT NOT NULL,
  span_id TEXT NOT NULL,
  parent_span_id TEXT,
  name TEXT NOT NULL,
  kind TEXT NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL,
  attributes TEXT NOT NULL,
  events TEXT NOT NULL,
  links TEXT NOT NULL,
  status_code TEXT NOT NULL,
  status_description TEXT,
  resource TEXT NOT NULL,
  scope TEXT NOT NULL,
  PRIMARY KEY (trace_id, span_id)
);
CREATE INDEX IF NOT EXISTS spans_session ON spans(session_id, start_ns);
CREATE TABLE IF NOT EXISTS commits (
  event_id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  scratch_id TEXT NOT NULL,
  since_ns INTEGER NOT NULL,
  state TEXT NOT NULL,
  created_ns INTEGER NOT NULL,
  payload TEXT
);
"""

VAULT_SCHEMA = """
CREATE TABLE IF NOT EXISTS content (
  session_id TEXT NOT NULL,
  artifact_id TEXT NOT NULL,
  content TEXT NOT NULL,
  PRIMARY KEY (session_id, artifact_id)
);
CREATE TABLE IF NOT EXISTS store_journal (
  session_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  namespace TEXT NOT NULL,
  key TEXT NOT NULL,
  old_value TEXT,
  new_value TEXT,
  PRIMARY KEY (session_id, seq, namespace, key)
);
"""


def _create_schema(conn: sqlite3.Connection, schema: str, tables: frozenset[str]) -> None:
    """Make the tables and stamp the version in one transaction (no half-made store)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    found = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if version == STORE_VERSION and tables <= found:
        return
    conn.executescript(f"BEGIN IMMEDIATE;\n{schema}\nPRAGMA user_version={STORE_VERSION};\nCOMMIT;")


@dataclass
class SpanRow:
    session_id: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[dict[str, Any]]
    links: list[dict[str, Any]]
    status_code: str
    status_description: str | None
    resource: dict[str, Any]
    scope: str


@dataclass
class Batch:
    """What one finished span (or one recorder action) contributes to the store."""

    session_id: str
    artifacts: list[Artifact] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    span: SpanRow | None = None
    content: dict[str, str] = field(default_factory=dict)
    tokenizer: str | None = None
    #: memory-store writes: (seq, namespace, key, old JSON or None, new JSON or None)
    journal: list[tuple[int, tuple[str, ...], str, str | None, str | None]] = field(default_factory=list)


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


class ProvenanceStore:
    """Provenance tables + vault, with a batching writer thread."""

    def __init__(self, home: Path):
        self.home = ensure_home(Path(home))
        self.path = self.home / "provenance.sqlite"
        self.vault_path = self.home / "vault.sqlite"
        # Check both files before either is written: a damaged store is an error, never rebuilt.
        has_db = check_db(self.path, PROVENANCE_TABLES)
        check_db(self.vault_path, VAULT_TABLES)
        if not has_db and self.path.exists() and _vault_has_content(self.vault_path):
            raise StoreDamaged(self.path, f"empty, but {self.vault_path.name} holds recorded content")
        self._db = _connect(self.path)
        try:
            _create_schema(self._db, SCHEMA, PROVENANCE_TABLES)
            self._vault = _connect(self.vault_path)
        except BaseException:
            self._db.close()
            raise
        try:
            _create_schema(self._vault, VAULT_SCHEMA, VAULT_TABLES)
        except BaseException:
            self._db.close()
            self._vault.close()
            raise
        self._read_lock = threading.RLock()
        self._queue: queue.Queue[Batch | None] = queue.Queue()
        self._pending = 0
        self._cond = threading.Condition()
        self.failures = 0
        self._incomplete: dict[str, int] = {}
        self._closed = False
        self._writer = threading.Thread(target=self._run, name="unsee-store-writer", daemon=True)
        self._writer.start()

    # -- writing ----------------------------------------------------------
    def submit(self, batch: "Batch | Callable[[], Batch | None]") -> None:
        """Queue a batch, or a thunk the writer thread turns into one (decoding
        finished spans there keeps that work off the agent's thread)."""
        if self._closed:
            if isinstance(batch, Batch):
                self.mark_failure(batch.session_id, "store closed")
            return
        with self._cond:
            self._pending += 1
        self._queue.put(batch)

    def flush(self, timeout: float = 30.0) -> None:
        """Block until every batch submitted so far is written (or failed)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning("store flush timed out with %d batches pending", self._pending)
                    return
                self._cond.wait(left)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            # Drain what is already queued: one transaction for many spans.
            while len(batch) < 512:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._write_all(batch)
                    return
                batch.append(nxt)
            self._write_all(batch)

    def _write_all(self, items: list) -> None:
        batches: list[Batch] = []
        for item in items:
            if isinstance(item, Batch):
                batches.append(item)
                continue
            try:
                made = item()
            except Exception as exc:
                log.exception("could not decode a span")
                self.failures += 1
                sid = getattr(item, "session_id", None)
                if sid:
                    self.mark_failure(sid, repr(exc))
                continue
            if made is not None:
                batches.append(made)
        try:
            self._write(batches)
        except Exception as exc:  # observer: never propagate, count and mark
            log.exception("provenance write failed")
            for b in batches:
                self.mark_failure(b.session_id, repr(exc))
        finally:
            with self._cond:
                self._pending -= len(items)
                self._cond.notify_all()

    def _write(self, batches: list[Batch]) -> None:
        now = time.time_ns()
        with self._read_lock:
            db, vault = self._db, self._vault
            vault.execute("BEGIN")
            try:
                for b in batches:
                    for aid, text in b.content.items():
                        vault.execute(
                            "INSERT OR REPLACE INTO content VALUES (?,?,?)", (b.session_id, aid, text)
                        )
                    for seq, ns, key, old, new in b.journal:
                        vault.execute(
                            "INSERT OR REPLACE INTO store_journal VALUES (?,?,?,?,?,?)",
                            (b.session_id, seq, json.dumps(list(ns)), key, old, new),
                        )
                vault.execute("COMMIT")
            except Exception:
                vault.execute("ROLLBACK")
                raise
            db.execute("BEGIN")
            try:
                for b in batches:
                    db.execute(
                        "INSERT INTO sessions(session_id, created_ns, updated_ns, tokenizer) VALUES (?,?,?,?)"
                        " ON CONFLICT(session_id) DO UPDATE SET updated_ns=excluded.updated_ns,"
                        " tokenizer=COALESCE(excluded.tokenizer, sessions.tokenizer)",
                        (b.session_id, now, now, b.tokenizer),
                    )
                    for a in b.artifacts:
                        db.execute(
                            "INSERT OR IGNORE INTO artifacts VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                            _artifact_row(a),
                        )
                    for c in b.checkpoints:
                        db.execute(
                            "INSERT OR IGNORE INTO checkpoints VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                            _checkpoint_row(c),
                        )
                    for aid in b.commits:
                        db.execute(
                            "UPDATE artifacts SET committed=1 WHERE session_id=? AND id=?",
                            (b.session_id, aid),
                        )
                    if b.span is not None:
                        s = b.span
                        db.execute(
                            "INSERT OR REPLACE INTO spans VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                            (
                                s.session_id, s.trace_id, s.span_id, s.parent_span_id, s.name, s.kind,
                                s.start_ns, s.end_ns, json.dumps(s.attributes), json.dumps(s.events),
                                json.dumps(s.links), s.status_code, s.status_description,
                                json.dumps(s.resource), s.scope,
                            ),
                        )
                db.execute("COMMIT")
            except Exception:
                db.execute("ROLLBACK")
                raise

    def mark_failure(self, session_id: str, why: str) -> None:
        """Count a recording failure and mark the session incomplete (best effort)."""
        self.failures += 1
        self._incomplete[session_id] = self._incomplete.get(session_id, 0) + 1
        log.warning("recording of session %s is incomplete: %s", session_id, why)
        try:
            with self._read_lock:
                now = time.time_ns()
                self._db.execute(
                    "INSERT INTO sessions(session_id, created_ns, updated_ns, incomplete, failures)"
                    " VALUES (?,?,?,1,1) ON CONFLICT(session_id) DO UPDATE SET incomplete=1,"
                    " failures=sessions.failures+1, updated_ns=excluded.updated_ns",
                    (session_id, now, now),
                )
        except Exception:
            # The store itself is what failed; the in-memory mark still refuses forgetting.
            log.exception("could not persist the incomplete mark of %s", session_id)

    # -- reading ----------------------------------------------------------
    def _rows(self, sql: str, args: Iterable[Any] = ()) -> list[tuple]:
        self.flush()
        with self._read_lock:
            return self._db.execute(sql, tuple(args)).fetchall()

    def has_session(self, session_id: str, flush: bool = True) -> bool:
        """Whether a session is recorded. ``flush=False`` sees only what is already
        written (enough for sessions of other processes; no wait on the writer)."""
        if not flush:
            with self._read_lock:
                return bool(self._db.execute(
                    "SELECT 1 FROM sessions WHERE session_id=?", (session_id,)).fetchone())
        return bool(self._rows("SELECT 1 FROM sessions WHERE session_id=?", (session_id,)))

    def require(self, session_id: str) -> None:
        if not self.has_session(session_id):
            raise SessionNotFound(session_id)

    def sessions(self) -> list[SessionInfo]:
        rows = self._rows(
            "SELECT s.session_id, s.created_ns, s.updated_ns, s.incomplete, s.failures, s.tokenizer,"
            " (SELECT COUNT(*) FROM artifacts a WHERE a.session_id=s.session_id),"
            " (SELECT COUNT(*) FROM checkpoints c WHERE c.session_id=s.session_id),"
            " (SELECT COALESCE(MAX(turn),0) FROM artifacts a WHERE a.session_id=s.session_id)"
            " FROM sessions s ORDER BY s.created_ns"
        )
        return [
            SessionInfo(
                session_id=r[0], created_ns=r[1], updated_ns=r[2],
                incomplete=bool(r[3]) or r[0] in self._incomplete,
                failures=max(r[4], self._incomplete.get(r[0], 0)), tokenizer=r[5],
                artifacts=r[6], checkpoints=r[7], turns=r[8],
            )
            for r in rows
        ]

    def session(self, session_id: str) -> SessionInfo:
        for s in self.sessions():
            if s.session_id == session_id:
                return s
        raise SessionNotFound(session_id)

    def artifacts(self, session_id: str) -> list[Artifact]:
        rows = self._rows(
            "SELECT * FROM artifacts WHERE session_id=? ORDER BY seq", (session_id,)
        )
        return [_artifact_from_row(r) for r in rows]

    def checkpoints(self, session_id: str) -> list[Checkpoint]:
        rows = self._rows(
            "SELECT * FROM checkpoints WHERE session_id=? ORDER BY seq", (session_id,)
        )
        return [_checkpoint_from_row(r) for r in rows]

    def spans(self, session_id: str) -> list[SpanRow]:
        rows = self._rows(
            "SELECT * FROM spans WHERE session_id=? ORDER BY start_ns", (session_id,)
        )
        return [
            SpanRow(
                r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], json.loads(r[8]),
                json.loads(r[9]), json.loads(r[10]), r[11], r[12], json.loads(r[13]), r[14],
            )
            for r in rows
        ]

    def content(self, session_id: str, artifact_id: str) -> str | None:
        self.flush()
        with self._read_lock:
            row = self._vault.execute(
                "SELECT content FROM content WHERE session_id=? AND artifact_id=?",
                (session_id, artifact_id),
            ).fetchone()
        return row[0] if row else None

    def contents(self, session_id: str) -> dict[str, str]:
        self.flush()
        with self._read_lock:
            rows = self._vault.execute(
                "SELECT artifact_id, content FROM content WHERE session_id=?", (session_id,)
            ).fetchall()
        return dict(rows)

    # -- forking and replacing (used by the forget operator) --------------
    def clone_prefix(self, src: str, dst: str, before_seq: int) -> None:
        """Copy ``src``'s artifacts and checkpoints with seq < ``before_seq`` (and their
        content) into session ``dst``, replacing whatever ``dst`` held."""
        self.flush()
        now = time.time_ns()
        with self._read_lock:
            self._vault.execute("BEGIN")
            self._vault.execute("DELETE FROM content WHERE session_id=?", (dst,))
            self._vault.execute(
                "INSERT INTO content SELECT ?, artifact_id, content FROM content WHERE session_id=?",
                (dst, src),
            )
            self._vault.execute("COMMIT")
            db = self._db
            db.execute("BEGIN")
            for table in ("artifacts", "checkpoints", "spans", "sessions"):
                db.execute(f"DELETE FROM {table} WHERE session_id=?", (dst,))
            db.execute(
                "INSERT INTO sessions(session_id, created_ns, updated_ns, tokenizer, meta)"
                " SELECT ?, ?, ?, tokenizer, ? FROM sessions WHERE session_id=?",
                (dst, now, now, json.dumps({"scratch_of": src}), src),
            )
            cols = ",".join(c for c in _ARTIFACT_COLS if c != "session_id")
            db.execute(
                f"INSERT INTO artifacts(session_id,{cols}) SELECT ?,{cols} FROM artifacts"
                " WHERE session_id=? AND seq<?", (dst, src, before_seq),
            )
            cols = ",".join(c for c in _CHECKPOINT_COLS if c != "session_id")
            db.execute(
                f"INSERT INTO checkpoints(session_id,{cols}) SELECT ?,{cols} FROM checkpoints"
                " WHERE session_id=? AND seq<?", (dst, src, before_seq),
            )
            db.execute("COMMIT")
            kept = [r[0] for r in db.execute("SELECT id FROM artifacts WHERE session_id=?", (dst,))]
            self._vault.execute("BEGIN")
            self._vault.execute("CREATE TEMP TABLE IF NOT EXISTS keep_ids(id TEXT PRIMARY KEY)")
            self._vault.execute("DELETE FROM keep_ids")
            self._vault.executemany("INSERT OR IGNORE INTO keep_ids VALUES (?)", [(k,) for k in kept])
            self._vault.execute(
                "DELETE FROM content WHERE session_id=? AND artifact_id NOT IN (SELECT id FROM keep_ids)", (dst,)
            )
            self._vault.execute("COMMIT")

    def begin_commit(self, event_id: str, session_id: str, scratch_id: str, since_ns: int,
                     payload: str | None = None) -> None:
        """Journal a commit before its first write: from here on it is rolled forward."""
        self.flush()
        with self._read_lock:
            self._db.execute(
                "INSERT OR REPLACE INTO commits VALUES (?,?,?,?,?,?,?)",
                (event_id, session_id, scratch_id, since_ns, "started", time.time_ns(), payload),
            )

    def commit_state(self, event_id: str) -> str | None:
        rows = self._rows("SELECT state FROM commits WHERE event_id=?", (event_id,))
        return rows[0][0] if rows else None

    def pending_commits(self, session_id: str) -> list[tuple[str, str, int, str | None]]:
        rows = self._rows(
            "SELECT event_id, scratch_id, since_ns, payload FROM commits WHERE session_id=? AND state!='done'",
            (session_id,),
        )
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def replace_session(self, session_id: str, scratch_id: str, event_id: str, since_ns: int) -> None:
        """Make ``scratch_id``'s records the records of ``session_id`` (one transaction per file).

        Idempotent: a retry after a crash between the two files finishes the job.
        """
        self.flush()
        with self._read_lock:
            db, vault = self._db, self._vault
            scratch_left = db.execute(
                "SELECT COUNT(*) FROM artifacts WHERE session_id=?", (scratch_id,)
            ).fetchone()[0]
            if scratch_left:
                vault.execute("BEGIN")
                vault.execute("DELETE FROM content WHERE session_id=?", (session_id,))
                vault.execute("UPDATE content SET session_id=? WHERE session_id=?", (session_id, scratch_id))
                vault.execute("COMMIT")
                db.execute("BEGIN")
                db.execute("DELETE FROM artifacts WHERE session_id=?", (session_id,))
                db.execute("DELETE FROM checkpoints WHERE session_id=?", (session_id,))
                db.execute("DELETE FROM spans WHERE session_id=? AND start_ns>=?", (session_id, since_ns))
                for table in ("artifacts", "checkpoints", "spans"):
                    db.execute(f"UPDATE {table} SET session_id=? WHERE session_id=?", (session_id, scratch_id))
                db.execute("DELETE FROM sessions WHERE session_id=?", (scratch_id,))
                db.execute(
                    "UPDATE sessions SET updated_ns=?, incomplete=0, failures=0 WHERE session_id=?",
                    (time.time_ns(), session_id),
                )
                db.execute("UPDATE commits SET state='done' WHERE event_id=?", (event_id,))
                db.execute("COMMIT")
            else:
                db.execute("UPDATE commits SET state='done' WHERE event_id=?", (event_id,))
        self._incomplete.pop(session_id, None)

    def drop_session(self, session_id: str) -> None:
        """Remove every record of a (scratch) session."""
        self.flush()
        with self._read_lock:
            self._vault.execute("DELETE FROM content WHERE session_id=?", (session_id,))
            self._vault.execute("DELETE FROM store_journal WHERE session_id=?", (session_id,))
            for table in ("artifacts", "checkpoints", "spans", "sessions"):
                self._db.execute(f"DELETE FROM {table} WHERE session_id=?", (session_id,))

    def store_journal(self, session_id: str, since_seq: int = 0) -> list[tuple[int, tuple[str, ...], str, str | None, str | None]]:
        """Memory-store writes of a session from ``since_seq`` on, in order."""
        self.flush()
        with self._read_lock:
            rows = self._vault.execute(
                "SELECT seq, namespace, key, old_value, new_value FROM store_journal"
                " WHERE session_id=? AND seq>=? ORDER BY seq", (session_id, since_seq),
            ).fetchall()
        return [(r[0], tuple(json.loads(r[1])), r[2], r[3], r[4]) for r in rows]

    def replace_journal(self, session_id: str, scratch_id: str, since_seq: int) -> None:
        """The session's journal from ``since_seq`` on becomes the scratch session's."""
        self.flush()
        with self._read_lock:
            v = self._vault
            v.execute("BEGIN")
            v.execute("DELETE FROM store_journal WHERE session_id=? AND seq>=?", (session_id, since_seq))
            v.execute("DELETE FROM store_journal WHERE session_id=? AND seq<?", (scratch_id, since_seq))
            v.execute("UPDATE store_journal SET session_id=? WHERE session_id=?", (session_id, scratch_id))
            v.execute("COMMIT")

    def set_content(self, session_id: str, artifact_id: str, content: str | None) -> None:
        """Replace (or with None delete) one artifact's content in the vault."""
        self.flush()
        with self._read_lock:
            if content is None:
                self._vault.execute(
                    "DELETE FROM content WHERE session_id=? AND artifact_id=?", (session_id, artifact_id)
                )
            else:
                self._vault.execute(
                    "INSERT OR REPLACE INTO content VALUES (?,?,?)", (session_id, artifact_id, content)
                )

    def close(self) -> None:
        if self._closed:
            return
        self.flush()
        self._closed = True
        self._queue.put(None)
        self._writer.join(timeout=10)
        with self._read_lock:
            self._db.close()
            self._vault.close()


_ARTIFACT_COLS = (
    "session_id", "id", "seq", "type", "parents", "source_ids", "token_start", "token_end", "turn", "step",
    "committed", "content_hash", "labels", "attrs", "trace_id", "span_id",
)
_CHECKPOINT_COLS = (
    "session_id", "id", "seq", "kind", "step", "turn", "token_offset", "cache_handle", "env_snapshot_id",
    "prompt_manifest", "langgraph_checkpoint_id", "created_ns", "langgraph_thread_id",
)


def _artifact_row(a: Artifact) -> tuple:
    return (
        a.session_id, a.id, a.seq, a.type.value, json.dumps(list(a.parents)),
        json.dumps(list(a.source_ids)), a.token_span[0], a.token_span[1], a.turn, a.step,
        int(a.committed), a.content_hash, json.dumps(list(a.labels)), json.dumps(a.attrs),
        a.trace_id, a.span_id,
    )


def _artifact_from_row(r: tuple) -> Artifact:
    return Artifact(
        session_id=r[0], id=r[1], seq=r[2], type=ArtifactType(r[3]), parents=tuple(json.loads(r[4])),
        source_ids=tuple(json.loads(r[5])), token_span=(r[6], r[7]), turn=r[8], step=r[9],
        committed=bool(r[10]), content_hash=r[11], labels=tuple(json.loads(r[12])),
        attrs=json.loads(r[13]), trace_id=r[14], span_id=r[15],
    )


def _checkpoint_row(c: Checkpoint) -> tuple:
    return (
        c.session_id, c.id, c.seq, c.kind.value, c.step, c.turn, c.token_offset, c.cache_handle,
        c.env_snapshot_id, json.dumps(list(c.prompt_manifest)), c.langgraph_checkpoint_id, c.created_ns,
        c.langgraph_thread_id,
    )


def _checkpoint_from_row(r: tuple) -> Checkpoint:
    return Checkpoint(
        session_id=r[0], id=r[1], seq=r[2], kind=CheckpointKind(r[3]), step=r[4], turn=r[5],
        token_offset=r[6], cache_handle=r[7], env_snapshot_id=r[8],
        prompt_manifest=tuple(json.loads(r[9])), langgraph_checkpoint_id=r[10], created_ns=r[11],
        langgraph_thread_id=r[12],
    )
