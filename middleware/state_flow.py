"""Data flow through agent state keys other than ``messages``: state writes and their reads.

A tool can write state the model never sees in a message: deepagents' virtual
filesystem (``write_file``/``edit_file`` send the ``files`` channel a new file
while the tool runs), a todo list (``write_todos`` returns
``Command(update={"todos": ...})``), any custom channel a tool updates. What it
wrote comes back later through another door: a ``read_file`` return, a system
prompt a middleware builds from the state. Without an edge between the two,
the read looks like a second, independent source of whatever the value holds,
taint stops at the write, and a forget misses the read.

So the recorder records a ``state_write`` artifact per key a tool call wrote
(parents: the call and its return; text: the written value as JSON; attrs
``key``), and keeps, per session, the latest value of each *slot* (a key, or
one entry of a key written as a dict, like one file of ``files``). A later
tool return or system prompt whose text holds a significant piece of a slot's
value (:func:`pieces`: a line of text of at least :data:`MIN_PIECE` characters
that is not a bare lowercase word such as a status) gets that slot's
``state_write`` as a parent. A ``state_write`` reads the slots its own value
holds pieces of too (an edited file carries the old text on), so the target
reaches each later read through one chain of parents.

The test is a substring test over the value's pieces: an over-approximation
(an unrelated text that repeats a written line gets an edge too: taint grows,
never shrinks), cheap (nothing runs for a session with no state writes), and
independent of how a reader formats the value (line numbers, bullets, JSON).
"""

from __future__ import annotations

import json
import logging
import re
from collections import deque
from collections.abc import Iterable
from typing import Any

from .context import configurable
from .hashing import short_id
from .records import ArtifactType

log = logging.getLogger("unsee.state_flow")

#: LangGraph's config key of the running task's channel writes (``writes.extend`` of its deque)
SEND_KEY = "__pregel_send"
#: the shortest line of a written value that counts as evidence of a read
MIN_PIECE = 8
#: the shortest whole value (a string of one line: a name, a number kept in a key) that counts
MIN_VALUE = 4
#: a longer line is matched by windows of this many characters (a reader may wrap or clip it:
#: deepagents' ``read_file`` cuts lines of over 5000 characters, tools clip long results)
WINDOW = 128
#: pieces kept per slot: a large value is matched on this many of its lines, spread over it
MAX_PIECES = 512
#: characters a read may be scanned for, piece by piece (pieces x text length); past it the
#: text's substrings of :data:`MIN_PIECE` characters pick the slots to scan
DIRECT_BUDGET = 2_000_000
_BARE_WORD = re.compile(r"[a-z_]+")
#: channels a tool's writes never count for: the conversation, LangGraph's own
_SKIP_PREFIXES = ("__", "branch:")


def _counted(key: Any) -> bool:
    return isinstance(key, str) and key != "messages" and not key.startswith(_SKIP_PREFIXES)


# -- what a tool call wrote ------------------------------------------------------------------
def mark() -> tuple[deque, int] | None:
    """Where the running task's channel writes stand now (before a tool runs), or None outside a
    LangGraph task. A tool that writes state while it runs (deepagents' ``StateBackend``) sends
    through the task's ``writes.extend``: what it appends after this mark is the tool's."""
    try:
        send = configurable().get(SEND_KEY)
    except Exception:
        return None
    writes = getattr(send, "__self__", None)
    return (writes, len(writes)) if isinstance(writes, deque) else None


def sent_since(at: tuple[deque, int] | None) -> list[tuple[str, Any]]:
    """The channel writes appended to the task's writes since ``at`` (:func:`mark`)."""
    if at is None:
        return []
    writes, n = at
    for _ in range(3):  # (another tool of the same task may append meanwhile: copy again)
        try:
            return [w for w in list(writes)[n:] if isinstance(w, tuple) and len(w) == 2]
        except RuntimeError:
            continue
    return []


def _update_pairs(command: Any) -> list[tuple[Any, Any]]:
    """A ``Command``'s update as (key, value) pairs, as LangGraph reads it (a dict, pairs, or a
    state object)."""
    try:
        return list(command._update_as_tuples())
    except Exception:  # (a LangGraph without it: the two common forms)
        update = command.update
        if isinstance(update, dict):
            return list(update.items())
        return [u for u in update or () if isinstance(u, tuple) and len(u) == 2]


def written(result: Any, sent: Iterable[tuple[str, Any]] = ()) -> dict[str, Any]:
    """``{key: value}`` a tool call wrote to state keys other than ``messages``: what it sent
    while it ran (``sent``), then its ``Command(update=...)``. Several writes of one key whose
    values are dicts merge (a dict-merge channel like ``files``); otherwise the last one counts."""
    from langgraph.types import Command  # (here: the facade starts without LangGraph)

    pairs = list(sent)
    if isinstance(result, Command):
        pairs += _update_pairs(result)
    out: dict[str, Any] = {}
    for key, value in pairs:
        if not _counted(key):
            continue
        if key in out and isinstance(out[key], dict) and isinstance(value, dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


# -- the values of slots ---------------------------------------------------------------------
def slots(key: str, value: Any) -> list[tuple[str, Any]]:
    """The slots a write of ``value`` to ``key`` sets: one per entry of a dict (``files`` holds
    a file per path, merged), else the key itself."""
    if isinstance(value, dict) and value:
        return [(f"{key}/{k}", v) for k, v in value.items()]
    return [(key, value)]


def _leaves(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):  # (values only: keys are names, a path, a field)
        for v in value.values():
            _leaves(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _leaves(v, out)


def pieces(value: Any) -> tuple[str, ...]:
    """The significant pieces of a written value: each line of its strings, stripped, of at
    least :data:`MIN_PIECE` characters (:data:`MIN_VALUE` for a string of one line: a short
    value kept whole) and not a bare lowercase word (``completed``, ``in_progress``: field
    values every list repeats); a line longer than :data:`WINDOW` as
    windows of that length. At most :data:`MAX_PIECES`, taken evenly over the value when it has
    more."""
    leaves: list[str] = []
    _leaves(value, leaves)
    seen: dict[str, None] = {}
    for text in leaves:
        lines = text.splitlines() or [text]
        least = MIN_VALUE if len(lines) == 1 else MIN_PIECE
        for line in lines:
            line = line.strip()
            if len(line) > WINDOW:
                for i in range(0, len(line), WINDOW):
                    part = line[i:i + WINDOW]
                    if len(part.strip()) >= MIN_PIECE:
                        seen[part] = None
            elif len(line) >= least and not _BARE_WORD.fullmatch(line):
                seen[line] = None
    found = list(seen)
    if len(found) > MAX_PIECES:
        step = len(found) / MAX_PIECES
        found = [found[int(i * step)] for i in range(MAX_PIECES)]
    return tuple(found)


def plain(value: Any) -> str:
    """The strings of a value, one a line (what :func:`reads` tests a written value with: its
    JSON text escapes quotes and line breaks)."""
    leaves: list[str] = []
    _leaves(value, leaves)
    return "\n".join(leaves)


def holds(text: str, of: tuple[str, ...]) -> bool:
    """Whether ``text`` holds one of the pieces ``of``."""
    return any(p in text for p in of)


def anchors(of: tuple[str, ...]) -> frozenset[str] | None:
    """Each piece's first :data:`MIN_PIECE` characters (a text that holds the piece holds its
    anchor); None when a piece is shorter (the slot is always scanned)."""
    if any(len(p) < MIN_PIECE for p in of):
        return None
    return frozenset(p[:MIN_PIECE] for p in of)


def _grams(text: str) -> set[str]:
    """The substrings of ``text`` of :data:`MIN_PIECE` characters (what an anchor can be)."""
    return {text[i:i + MIN_PIECE] for i in range(len(text) - MIN_PIECE + 1)}


# -- a session's slots -----------------------------------------------------------------------
def has_writes(st: Any) -> bool:
    return bool(st.state_writes or st.state_writes_unloaded)


def reads(st: Any, text: str) -> list[str]:
    """The state_write artifacts (latest per slot) whose value ``text`` holds a piece of, in
    the order they were written; [] at once for a session without state writes."""
    if not text or not st.state_writes:
        return []
    slots_ = st.state_writes.values()
    grams = None
    if sum(len(of) for _, of, _ in slots_) * len(text) > DIRECT_BUDGET:
        grams = _grams(text)  # (linear in the text: a slot none of whose anchors it holds is skipped)
    found: dict[str, None] = {}
    for aid, of, anchored in slots_:
        if aid in found or (grams is not None and anchored is not None and anchored.isdisjoint(grams)):
            continue
        if holds(text, of):
            found[aid] = None
    return list(found)


def note(st: Any, aid: str, key: str, value: Any) -> None:
    """``aid`` wrote ``value`` to ``key``: it is now the latest write of the slots it set."""
    for slot, v in slots(key, value):
        if v is None:  # (a deleted entry)
            st.state_writes.pop(slot, None)
        else:
            of = pieces(v)
            st.state_writes[slot] = (aid, of, anchors(of))


def load(rec: Any, st: Any) -> None:
    """The slots of a state rebuilt from the records (a new process, a replay's fork), from the
    written values in the vault; once per rebuilt state, and only when it has state writes."""
    pending, st.state_writes_unloaded = st.state_writes_unloaded, []
    for aid, key in pending:
        try:
            text = rec.store.content(st.session_id, aid)
            if text is not None and key:
                note(st, aid, key, json.loads(text))
        except Exception:  # an observer: a value that cannot be read back links nothing
            log.debug("could not read back state write %s", aid, exc_info=True)


def as_json(value: Any) -> str:
    """The text of a state write: the value as JSON, as ``recorder.record_json`` writes a tool
    call's body (sorted keys, non-ASCII kept, ``str`` for what JSON cannot hold)."""
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def state_write_id(call_id: str, key: str) -> str:
    return short_id("sw", call_id, key)


def return_parents(rec: Any, st: Any, call: dict[str, Any], text: str) -> tuple[str, ...]:
    """The parents of a tool call's return: the call, then the state writes whose values the
    returned text holds (a ``read_file`` of a file a tool wrote), each also a link of the tool's
    span. The caller holds ``st.lock``."""
    if not has_writes(st):
        return (call["cid"],)
    if st.state_writes_unloaded:
        load(rec, st)
    found = reads(st, text)
    if found:
        rec.link_later(st, call["span"], found)
    return (call["cid"], *found)


def prompt_parents(rec: Any, st: Any, text: str) -> tuple[str, ...]:
    """The parents of a system prompt first recorded now: the state writes whose values it
    holds (a middleware that puts the todo list or a file into the system prompt)."""
    if not has_writes(st):
        return ()
    if st.state_writes_unloaded:
        load(rec, st)
    return tuple(reads(st, text))


def record_tool_writes(rec: Any, st: Any, call: dict[str, Any], result: Any, returned: str | None = None) -> list[str]:
    """Record a ``state_write`` per state key the tool call wrote (its ``Command`` update and
    what it sent since ``call["sent"]``, :func:`mark`), each an artifact event on the tool's
    span; the caller holds ``st.lock``. Its parents: the call, the call's return ``returned``
    (what the tool gave back and what it wrote come from the same run: a tool that returns a
    record and keeps it in state too), and the writes its value holds. Returns their ids."""
    values = written(result, sent_since(call.get("sent")))
    if not values:
        return []
    if st.state_writes_unloaded:
        load(rec, st)
    ids = []
    for key, value in values.items():
        text = as_json(value)
        aid = state_write_id(call.get("call_id") or call["cid"], key)
        earlier = (r for r in reads(st, plain(value)) if r != aid)
        parents = [call["cid"], *([returned] if returned else []), *earlier]
        p = rec.record(st, ArtifactType.STATE_WRITE, aid, text, parents=parents, source_ids=(f"state:{key}",),
                       step=call["step"], count_tokens=False, attrs={"key": key, "tool": call["name"]})
        rec.add_artifact_event_later(st, call["span"], p)
        note(st, aid, key, value)
        ids.append(aid)
    return ids
