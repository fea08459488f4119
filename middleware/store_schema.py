"""The tables of the provenance store and the vault, and how records map to rows.

``provenance.sqlite`` holds sessions, artifacts, checkpoints, the spans they
came from (for export) and the forget commit journal; ``vault.sqlite`` holds
payload text keyed by artifact id and the memory-store write journal, in its
own file so it can be erased without touching structure.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .records import Artifact, ArtifactType, Checkpoint, CheckpointKind, ContextRef

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


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    # The WAL is cut back to 4 MB after each checkpoint, not left at its largest size: a long
    # session's record is then the size of what it holds
    conn.execute("PRAGMA journal_size_limit=4194304")
    # Deleted records are overwritten with zeros, not left in free pages (erasure; docs/erasure.md).
    conn.execute("PRAGMA secure_delete=ON")
    return conn


def upsert_sql(table: str, columns: tuple[str, ...], keys: tuple[str, ...]) -> str:
    """``INSERT ... ON CONFLICT (keys) DO UPDATE`` of every other column: SQLite's
    ``INSERT OR REPLACE`` in the SQL both engines speak."""
    rest = ", ".join(f"{c}=excluded.{c}" for c in columns if c not in keys)
    return (f"INSERT INTO {table}({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
            f" ON CONFLICT({', '.join(keys)}) DO " + (f"UPDATE SET {rest}" if rest else "NOTHING"))


SPAN_COLS = ("session_id", "trace_id", "span_id", "parent_span_id", "name", "kind", "start_ns", "end_ns",
             "attributes", "events", "links", "status_code", "status_description", "resource", "scope")
CONTENT_UPSERT = upsert_sql("content", ("session_id", "artifact_id", "content"), ("session_id", "artifact_id"))
JOURNAL_UPSERT = upsert_sql("store_journal", ("session_id", "seq", "namespace", "key", "old_value", "new_value"),
                            ("session_id", "seq", "namespace", "key"))
SPAN_UPSERT = upsert_sql("spans", SPAN_COLS, ("trace_id", "span_id"))
COMMIT_UPSERT = upsert_sql("commits", ("event_id", "session_id", "scratch_id", "since_ns", "state", "created_ns",
                                       "payload"), ("event_id",))
#: the primary key of each table that holds payload text (rows are addressed by it, on both engines)
TEXT_KEYS = {"content": ("session_id", "artifact_id"), "store_journal": ("session_id", "seq", "namespace", "key"),
             "spans": ("trace_id", "span_id"), "commits": ("event_id",)}


@dataclass
class SpanRow:
    """One finished span as stored (what export sends on)."""

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


def span_row(s: SpanRow) -> tuple:
    return (
        s.session_id, s.trace_id, s.span_id, s.parent_span_id, s.name, s.kind,
        s.start_ns, s.end_ns, json.dumps(s.attributes), json.dumps(s.events),
        json.dumps(s.links), s.status_code, s.status_description,
        json.dumps(s.resource), s.scope,
    )


def span_from_row(r: tuple) -> SpanRow:
    return SpanRow(
        r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], json.loads(r[8]),
        json.loads(r[9]), json.loads(r[10]), r[11], r[12], json.loads(r[13]), r[14],
    )


ARTIFACT_COLS = (
    "session_id", "id", "seq", "type", "parents", "source_ids", "token_start", "token_end", "turn", "step",
    "committed", "content_hash", "labels", "attrs", "trace_id", "span_id",
)
CHECKPOINT_COLS = (
    "session_id", "id", "seq", "kind", "step", "turn", "token_offset", "cache_handle", "env_snapshot_id",
    "prompt_manifest", "langgraph_checkpoint_id", "created_ns", "langgraph_thread_id",
)


def manifest_text(ids: tuple[str, ...], ref: ContextRef | None) -> str:
    """A stored manifest (a model turn's parents, a checkpoint's prompt manifest): a JSON list
    when whole, else ``{"base", "added", "dropped"?, "at"?}`` (:mod:`.context_delta`)."""
    if ref is None:
        return json.dumps(list(ids))
    d: dict[str, Any] = {"base": ref.base, "added": list(ids)}
    if ref.dropped:
        d["dropped"] = list(ref.dropped)
    if ref.at:
        d["at"] = list(ref.at)
    return json.dumps(d)


def manifest_of(text: str) -> tuple[tuple[str, ...], ContextRef | None]:
    """:func:`manifest_text` read back; a record written before deltas existed is a list."""
    if text == "[]":
        return (), None
    v = json.loads(text)
    if isinstance(v, list):
        return tuple(v), None
    return tuple(v["added"]), ContextRef.model_construct(base=v["base"], dropped=tuple(v.get("dropped", ())),
                                                          at=tuple(v.get("at", ())))


def artifact_row(a: Artifact) -> tuple:
    return (
        a.session_id, a.id, a.seq, a.type.value, manifest_text(a.parents, a.context),
        json.dumps(list(a.source_ids)), a.token_span[0], a.token_span[1], a.turn, a.step,
        int(a.committed), a.content_hash, json.dumps(list(a.labels)), json.dumps(a.attrs, sort_keys=True, default=str),
        a.trace_id, a.span_id,
    )


def _strings(text: str) -> tuple[str, ...]:
    return () if text == "[]" else tuple(json.loads(text))


def artifact_from_row(r: tuple) -> Artifact:
    # Rows are written by artifact_row from validated records, so they are built without
    # validating again (model_construct, every field typed here): reading a long session's
    # artifacts is on the path of every graph, state rebuild and forget.
    parents, ref = manifest_of(r[4])
    return Artifact.model_construct(
        session_id=r[0], id=r[1], seq=r[2], type=ArtifactType(r[3]), parents=parents, context=ref,
        source_ids=_strings(r[5]), token_span=(r[6], r[7]), turn=r[8], step=r[9],
        committed=bool(r[10]), content_hash=r[11], labels=_strings(r[12]),
        attrs={} if r[13] == "{}" else json.loads(r[13]), trace_id=r[14], span_id=r[15],
    )


def checkpoint_row(c: Checkpoint) -> tuple:
    return (
        c.session_id, c.id, c.seq, c.kind.value, c.step, c.turn, c.token_offset, c.cache_handle,
        c.env_snapshot_id, manifest_text(c.prompt_manifest, c.context), c.langgraph_checkpoint_id, c.created_ns,
        c.langgraph_thread_id,
    )


def checkpoint_from_row(r: tuple) -> Checkpoint:
    # Built without validating again, as artifact_from_row (rows written by checkpoint_row).
    manifest, ref = manifest_of(r[9])
    return Checkpoint.model_construct(
        session_id=r[0], id=r[1], seq=r[2], kind=CheckpointKind(r[3]), step=r[4], turn=r[5],
        token_offset=r[6], cache_handle=r[7], env_snapshot_id=r[8],
        prompt_manifest=manifest, context=ref, langgraph_checkpoint_id=r[10], created_ns=r[11] or 0,
        langgraph_thread_id=r[12],
    )
