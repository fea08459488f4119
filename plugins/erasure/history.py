"""Rewriting a LangGraph thread's checkpoint history through the generic saver API.

A forget commits by one ``update_state`` on the session's thread, so the
thread's history still holds the tainted checkpoints. Here the history itself
is rebuilt: the clean prefix up to the fork checkpoint, then the
counterfactual checkpoints the replay wrote in its scratch thread, re-parented
onto the fork. Only ``list``/``get_tuple``/``put``/``put_writes``/
``delete_thread`` are used (LangGraph's in-memory, SQLite and PostgreSQL savers all
have them; none has a per-checkpoint delete), so the rewrite is two steps the
caller journals between: :func:`stage_rewrite` builds the new history in a
staging thread (the user's thread untouched), :func:`swap_in` replaces the
thread by it (idempotent: a crash inside it is finished by calling it again).
Only the root namespace ("") is rewritten: the checkpoints of nested runs (see
:data:`NESTED`) are deleted with the old history. Hold the session's lock:
during the swap the thread is partial.

``DeltaChannel`` channels (LangGraph's beta answer to checkpoint bloat) store
no value in most checkpoints: a checkpoint's value is rebuilt from the
nearest ancestor holding one (a ``_DeltaSnapshot``, or a plain value written
before the channel became a delta one) plus the writes stored on the path
between. A rewrite keeps each copied checkpoint's own writes, so the only
checkpoints whose rebuilt value would change are the re-parented ones (the
first counterfactual checkpoints, now children of the fork; the first turn
kept after the commit, now a child of the suffix's head): each of them gets
its value written as a ``_DeltaSnapshot`` — the fix LangGraph's own ``prune``
contract documents — computed where it was (the scratch thread, the commit's
line) before anything is deleted. Their descendants' walks stop there, so
every remaining checkpoint rebuilds to the value it had in its own world.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.channels.base import BaseChannel
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.base.id import uuid6
from pydantic import BaseModel

from unsee.middleware.checkpointers import driver_or_generic, unwrapped
from unsee.middleware.errors import UnseeError

__all__ = ["DeltaFormatUnknown", "HistoryNotRewritable", "RewritePlan", "StagedHistory", "channel_value", "delta_specs", "ThreadReader", "before_turn", "check_rewritable", "config_of", "copied_metadata", "copy_thread", "implemented", "put_copies",
           "drop_thread", "drop_threads", "history_holding", "plan_rewrite", "stage_rewrite", "swap_in",
           "threads_with_prefix", "value_text"]

Holds = Callable[[Any], bool]

#: What a rewrite does with a thread's checkpoints in namespaces other than the root one: the
#: working states of runs nested in a run of the thread (a subagent a tool invoked, a swarm's or
#: supervisor's agent, an agent used as a node, a subgraph). They are deleted, the old world's and
#: the counterfactual's alike, and not copied: the root history alone is the thread's state, its
#: checkpoints hold every nested run's result, and a nested run's checkpoints serve only to resume
#: it inside an unfinished run (a forget refuses a thread waiting at an interrupt). Rewriting them
#: would keep per-run working states no later run reads, each a copy to audit.
NESTED = "deleted"


class HistoryNotRewritable(UnseeError, RuntimeError):
    """The thread's history cannot be rewritten safely (nothing was written to the thread)."""


class DeltaFormatUnknown(HistoryNotRewritable):
    """A ``DeltaChannel`` thread stored in a shape this unsee does not know (nothing was written).

    ``DeltaChannel`` is beta: its on-disk shape may change between LangGraph
    releases. unsee was tested with the versions in :data:`DELTA_TESTED`."""

    def __init__(self, what: str):
        super().__init__(f"{what}: DeltaChannel's on-disk shape is not one unsee knows "
                         f"(installed: {_versions()}; tested: {DELTA_TESTED})")


#: the LangGraph releases whose DeltaChannel shape the rewrite was tested with (docs/erasure.md)
DELTA_TESTED = "langgraph 1.2.24, langgraph-checkpoint 4.3.2"
_COUNTERS = "counters_since_delta_snapshot"


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for dist in ("langgraph", "langgraph-checkpoint"):
        try:
            out.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            out.append(f"{dist} ?")
    return ", ".join(out)


def _snapshot_type() -> type:
    try:  # private module, but the type LangGraph's own prune contract names
        from langgraph.checkpoint.serde.types import _DeltaSnapshot
    except ImportError as e:
        raise DeltaFormatUnknown("langgraph.checkpoint.serde.types._DeltaSnapshot is gone") from e
    return _DeltaSnapshot


def delta_specs(agent: Any) -> dict[str, BaseChannel]:
    """The graph's channels whose value a checkpoint may not store: every ``DeltaChannel``, and a
    ``BinaryOperatorAggregate`` (a thread written while it was a delta channel stores none)."""
    try:
        from langgraph.channels.delta import DeltaChannel
    except ImportError:  # a LangGraph without delta channels: every value is stored
        return {}
    channels = getattr(agent, "channels", None) or {}
    if not any(isinstance(c, DeltaChannel) for c in channels.values()):
        return {}
    return {k: c for k, c in channels.items() if isinstance(c, (DeltaChannel, BinaryOperatorAggregate))}


def channel_value(saver: BaseCheckpointSaver, spec: BaseChannel, name: str, t: CheckpointTuple) -> Any:
    """The value of channel ``name`` at checkpoint ``t``, as LangGraph rebuilds it: the value
    stored there, else the nearest stored ancestor value plus the writes on the path between
    (``saver.get_delta_channel_history``). Raises :class:`DeltaFormatUnknown` on a shape unsee
    does not know."""
    from langgraph.channels.delta import DeltaChannel

    snap = _snapshot_type()
    stored = t.checkpoint.get("channel_values", {})
    if name in stored:
        seed, writes = stored[name], []
    else:
        history = saver.get_delta_channel_history(config=t.config, channels=[name])
        entry = history.get(name) if isinstance(history, dict) else None
        if not isinstance(entry, dict) or not isinstance(entry.get("writes"), list):
            raise DeltaFormatUnknown(f"get_delta_channel_history returned {type(entry).__name__} for {name!r}")
        seed, writes = entry.get("seed"), entry["writes"]
    if seed is not None and isinstance(spec, BinaryOperatorAggregate) and isinstance(seed, snap):
        seed = seed.value  # a snapshot read back into a channel that is no longer a delta one
    ch = spec.from_checkpoint(seed)
    if isinstance(ch, DeltaChannel):
        ch.replay_writes(writes)
    else:
        for _, _, value in writes:  # one update per write, as LangGraph's own replay
            ch.update([value])
    try:
        return ch.get()
    except Exception:  # EmptyChannelError: nothing was ever written
        return None


def _materialize(ckpt: dict, meta: dict, values: dict[str, Any], specs: dict[str, BaseChannel]) -> None:
    """Store ``values`` in ``ckpt`` (a snapshot per delta channel; a plain value per aggregate)
    and reset their snapshot counters in ``meta``."""
    from langgraph.channels.delta import DeltaChannel

    snap = _snapshot_type()
    cv = dict(ckpt.get("channel_values", {}))
    for k, v in values.items():
        cv[k] = snap(v) if isinstance(specs[k], DeltaChannel) else v
    ckpt["channel_values"] = cv
    counters = meta.get(_COUNTERS)
    if counters is not None:
        if not isinstance(counters, dict):
            raise DeltaFormatUnknown(f"metadata {_COUNTERS!r} is a {type(counters).__name__}")
        left = {k: c for k, c in counters.items() if k not in values}
        if left:
            meta[_COUNTERS] = left
        else:
            meta.pop(_COUNTERS)


def _unstored(t: CheckpointTuple, specs: dict[str, BaseChannel]) -> list[str]:
    """The channels of ``specs`` ``t`` has a version of but stores no value for."""
    cv, versions = t.checkpoint.get("channel_values", {}), t.checkpoint.get("channel_versions", {})
    return [k for k in specs if k in versions and k not in cv]


def config_of(thread: str, checkpoint_id: str | None = None) -> dict:
    """A root-namespace config of ``thread`` (at ``checkpoint_id`` when given)."""
    conf = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def value_text(value: Any) -> str:
    """Every text a value carries, for ``lambda v: target in value_text(v)``.

    Messages render all their fields (content, tool-call args,
    additional_kwargs, ...) but their names (ids: ``_NAMES``), other pydantic
    models all their fields, dicts their keys and values,
    sequences their items, bytes decoded with replacement; anything else its
    ``repr``. Parts are joined by newlines."""
    out: list[str] = []
    _render(value, out, {})
    return "\n".join(out)


def _render(value: Any, out: list[str], seen: dict[int, Any]) -> None:
    # Iterative, exact types first: a thread's history renders millions of small values.
    # Parts come out in document order (a stack, children pushed in reverse).
    stack = [value]
    pop, push, append = stack.pop, stack.append, out.append
    while stack:
        v = pop()
        t = type(v)
        if t is str:
            append(v)
            continue
        if v is None or t is bool or t is int or t is float:
            append(repr(v))
            continue
        if id(v) in seen:  # a cycle, or a container met before
            continue
        if t is dict:
            seen[id(v)] = v  # pinned: a freed temporary's id could be reused and skipped
            for k, x in reversed(v.items()):
                push(x)
                push(k)
            continue
        if t is list or t is tuple:
            seen[id(v)] = v
            stack.extend(reversed(v))
            continue
        _render_other(v, out, seen, push)


#: the fields that name a message or a tool call rather than say anything: its id, a tool
#: message's call id, each tool call's id (random names the runtime or the provider gives; a short
#: target, four digits, is in about one random UUID in 3,900 without being in the message)
_NAMES = frozenset(("id", "tool_call_id"))


def _message_fields(m: BaseMessage) -> dict:
    """A message's fields as stored (content, tool calls and their arguments, kwargs, extra
    fields), less its names (``_NAMES``)."""
    fields = {k: v for k, v in m.__dict__.items() if k not in _NAMES}
    if m.__pydantic_extra__:
        fields.update(m.__pydantic_extra__)
    for key in ("tool_calls", "invalid_tool_calls"):
        if calls := fields.get(key):
            fields[key] = [{k: v for k, v in c.items() if k != "id"} if isinstance(c, dict) else c for c in calls]
    return fields


def _render_other(value: Any, out: list[str], seen: dict[int, Any], push: Callable[[Any], None]) -> None:
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        out.append(value if isinstance(value, str) else bytes(value).decode("utf-8", errors="replace"))
        return
    if isinstance(value, (bool, int, float)):
        out.append(repr(value))
        return
    seen[id(value)] = value
    if isinstance(value, dict):
        push(dict(value))  # (a dict subclass: its items as a plain dict's)
    elif isinstance(value, (list, tuple, set, frozenset)):
        push(list(value))
    elif isinstance(value, BaseMessage):
        push(_message_fields(value))
    elif isinstance(value, BaseModel):
        # pydantic models: every field as stored
        # (a superset of model_dump's, without building the dump), then the extra fields
        if value.__pydantic_extra__:
            push(dict(value.__pydantic_extra__))
        push(dict(value.__dict__))
    elif hasattr(value, "model_dump"):  # pydantic v1 style models
        try:
            push(value.model_dump())
        except Exception:  # a model that cannot dump still has a repr
            out.append(repr(value))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        push({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    elif hasattr(value, "__slots__") and not hasattr(value, "__dict__"):
        # e.g. langgraph's Send(node, arg): its repr may escape text, its fields do not
        push({s: getattr(value, s, None) for s in value.__slots__})
    else:
        out.append(repr(value))


def implemented(saver_type: type, method: str) -> bool:
    """Whether ``saver_type`` overrides ``BaseCheckpointSaver.<method>`` (how LangGraph's
    conformance suite detects a capability; the base methods raise NotImplementedError)."""
    return getattr(saver_type, method, None) is not getattr(BaseCheckpointSaver, method, None)


def check_rewritable(agent: Any) -> BaseCheckpointSaver:
    """The agent's saver, if its history can be rewritten; else :class:`HistoryNotRewritable`.

    Needs a checkpointer with ``delete_thread`` and, for a graph with
    ``DeltaChannel`` channels, one with ``get_delta_channel_history`` and a
    LangGraph whose snapshot type unsee knows (:class:`DeltaFormatUnknown`)."""
    saver = getattr(agent, "checkpointer", None)
    if not isinstance(saver, BaseCheckpointSaver):
        raise HistoryNotRewritable(f"the agent has no checkpointer (checkpointer={saver!r})")
    if not implemented(type(saver), "delete_thread"):
        raise HistoryNotRewritable(f"{type(saver).__name__} cannot delete a thread")
    if delta_specs(agent):
        _snapshot_type()
        if not callable(getattr(saver, "get_delta_channel_history", None)):
            raise DeltaFormatUnknown(f"{type(saver).__name__} has no get_delta_channel_history")
    return saver


def _id(t: CheckpointTuple) -> str:
    return t.config["configurable"]["checkpoint_id"]


def _parent(t: CheckpointTuple) -> str | None:
    return (t.parent_config or {}).get("configurable", {}).get("checkpoint_id")


def _tuples(saver: BaseCheckpointSaver, thread: str) -> list[CheckpointTuple]:
    """The thread's root-namespace checkpoints, oldest first (savers list newest first)."""
    return list(reversed(list(saver.list(config_of(thread)))))


class ThreadReader:
    """One erasure's reads of a saver: each thread listed (every checkpoint decoded) once, and
    whether each checkpoint holds the target decided once, until the thread is written.

    Every checkpoint holds the thread's whole state, so a thread of n turns is O(n²) to
    decode and render: an erasure that audits, stages and audits again must not pay that
    once per step. A write to a thread must be followed by :meth:`written` (the next read
    decodes what the saver holds now)."""

    def __init__(self, saver: BaseCheckpointSaver, holds_target: Holds):
        self.saver = saver
        self.holds_target = holds_target
        self._listed: dict[str, list[CheckpointTuple]] = {}
        self._holding: dict[tuple[str, str, str], bool] = {}

    def every(self, thread: str) -> list[CheckpointTuple]:
        """The thread's checkpoints in every namespace, newest first (as ``saver.list``)."""
        if thread not in self._listed:
            self._listed[thread] = list(self.saver.list({"configurable": {"thread_id": thread}}))
        return self._listed[thread]

    def root(self, thread: str) -> list[CheckpointTuple]:
        """The thread's root-namespace checkpoints, oldest first."""
        return [t for t in reversed(self.every(thread)) if not t.config["configurable"].get("checkpoint_ns")]

    def holds(self, t: CheckpointTuple) -> bool:
        conf = t.config["configurable"]
        key = (conf["thread_id"], conf.get("checkpoint_ns", ""), conf["checkpoint_id"])
        if key not in self._holding:
            self._holding[key] = _holds(t, self.holds_target)
        return self._holding[key]

    def written(self, *threads: str) -> None:
        """Forget what was read of ``threads`` (they were written or deleted)."""
        for thread in threads:
            self._listed.pop(thread, None)
        self._holding = {k: v for k, v in self._holding.items() if k[0] not in threads}


def before_turn(saver: BaseCheckpointSaver, thread: str, checkpoint_id: str) -> str | None:
    """The checkpoint a turn started from: the parent of the nearest "input" checkpoint at or
    above ``checkpoint_id`` (None for the thread's first turn).

    The fork to pass :func:`stage_rewrite`: a checkpoint recorded inside a turn
    (its nodes run from it) already holds the turn's input and, as pending
    writes, its continuation; the state the scratch thread was seeded with is
    the one before the input."""
    t = saver.get_tuple(config_of(thread, checkpoint_id))
    while t is not None and (t.metadata or {}).get("source") != "input":
        t = saver.get_tuple(config_of(thread, _parent(t))) if _parent(t) else None
    if t is None:
        raise HistoryNotRewritable(f"no turn input at or above checkpoint {checkpoint_id!r} of {thread!r}")
    return _parent(t)


def _holds(t: CheckpointTuple, holds_target: Holds) -> bool:
    # metadata too: LangGraph copies string configurable keys into it
    return (any(holds_target(v) for v in t.checkpoint.get("channel_values", {}).values())
            or any(holds_target(w[2]) for w in t.pending_writes or ())
            or holds_target(dict(t.metadata or {})))


def _names(value: Any, thread: str) -> bool:
    """Whether a metadata value names ``thread`` (as a whole token: "t" does not name "input")."""
    text = value if isinstance(value, str) else value_text(value)
    return value == thread or re.search(rf"(?<![\w~.-]){re.escape(thread)}(?![\w~.-])", text) is not None


def copied_metadata(metadata: dict | None, *, scrub: str | None, rename_to: str, meta_update: dict | None = None,
                    drop: Iterable[str] = (), step_shift: int = 0) -> dict:
    """A copy's metadata: without ``drop`` keys and keys whose value names ``scrub`` (then
    ``thread_id`` = ``rename_to``), its step shifted, ``meta_update`` merged."""
    meta, named = {}, False
    for k, v in (metadata or {}).items():
        if k in drop:
            continue
        if scrub and _names(v, scrub):  # a copy must not name the thread it came from
            named = True
            continue
        meta[k] = v
    if named:
        meta["thread_id"] = rename_to
    if step_shift and isinstance(meta.get("step"), int):
        meta["step"] += step_shift
    meta.update(meta_update or {})
    return meta


def put_copies(saver: BaseCheckpointSaver, tuples: Iterable[CheckpointTuple], dst: str, *, scrub: str | None,
          rename_to: str, meta_update: dict | None = None, drop: Iterable[str] = (),
          parents: dict[str, str | None] | None = None, ids: dict[str, str] | None = None,
          step_shift: int = 0, taken: set[str] | None = None,
          written: list[CheckpointTuple] | None = None,
          materialize: dict[str, dict[str, Any]] | None = None,
          specs: dict[str, BaseChannel] | None = None) -> dict[str, str]:
    """Put ``tuples`` (oldest first) into ``dst``; returns old id -> new id (``ids`` extended).

    A parent is ``parents[old id]`` when given, else the new id of the old parent
    if it was copied (now or in ``ids``), else none (a root). ``taken``: the ids
    ``dst`` holds, when the caller knows them (it emptied ``dst``), else they are
    listed; ``written`` gets each checkpoint as it was put. ``materialize``: old id
    -> channel values to store in that checkpoint (``specs`` says which are delta
    channels). Pending writes keep their order (a delta channel replays them in it)."""
    ids = {} if ids is None else ids
    taken = ({_id(t) for t in saver.list(config_of(dst))} if taken is None else taken) | set(ids.values())
    drop = frozenset(drop)
    for t in tuples:
        old = _id(t)
        new = old if old not in taken else str(uuid6(clock_seq=len(taken)))  # newer than all: a collision only
        taken.add(new)
        meta = copied_metadata(t.metadata, scrub=scrub, rename_to=rename_to, meta_update=meta_update, drop=drop,
                               step_shift=step_shift)
        if parents is not None and old in parents:
            parent = parents[old]
        else:
            parent = ids.get(_parent(t) or "")
        ckpt = {**t.checkpoint, "id": new}
        if materialize and old in materialize:
            _materialize(ckpt, meta, materialize[old], specs or {})
        # new_versions = all versions: savers that store a blob per channel version then get every one
        cfg = saver.put(config_of(dst, parent), ckpt, meta, dict(ckpt.get("channel_versions", {})))
        by_task: dict[str, list] = {}
        for task_id, channel, value in t.pending_writes or ():
            by_task.setdefault(task_id, []).append((channel, value))
        # get_tuple returns writes in (task_path, task_id, idx) order and the original paths are not
        # read back: a path that sorts as the tasks came keeps that order (a delta channel replays it)
        for i, (task_id, writes) in enumerate(by_task.items()):
            saver.put_writes(cfg, writes, task_id, f"~{i:06d}" if len(by_task) > 1 else "")
        ids[old] = new
        if written is not None:
            written.append(CheckpointTuple(config_of(dst, new), ckpt, meta,
                                           config_of(dst, parent) if parent else None,
                                           list(t.pending_writes or ())))
    return ids


def copy_thread(saver: BaseCheckpointSaver, src: str, dst: str, *, checkpoints: Iterable[CheckpointTuple] | None = None,
                metadata_update: dict | None = None, drop_metadata_keys: Iterable[str] = ()) -> int:
    """Write ``checkpoints`` (default: all of ``src``'s root namespace, oldest first) into ``dst``.

    Parents follow the copied ones (a checkpoint whose parent is not copied
    becomes a root); ids are kept unless already used in ``dst``. Metadata
    loses ``drop_metadata_keys`` and every key whose value names ``src``
    (then ``thread_id`` = ``dst``), and gets ``metadata_update``. Returns the count."""
    tuples = _tuples(saver, src) if checkpoints is None else list(checkpoints)
    put_copies(saver, tuples, dst, scrub=src, rename_to=dst, meta_update=metadata_update, drop=drop_metadata_keys)
    return len(tuples)


@dataclasses.dataclass
class StagedHistory:
    """What :func:`stage_rewrite` staged: ``kept`` prefix (and clean side-branch) checkpoints,
    ``suffix`` counterfactual ones, ``dropped`` checkpoints of the thread left out."""

    kept: int
    suffix: int
    dropped: int
    stage_thread: str
    #: the head of ``thread`` the stage was built from (if it moved, stage again before swapping)
    head: str | None = None
    #: the staged checkpoints as they were put, oldest first (``swap_in``'s ``staged``)
    written: list[CheckpointTuple] = dataclasses.field(default_factory=list, repr=False)


@dataclasses.dataclass
class RewritePlan:
    """What a rewrite keeps, adds and re-parents (:func:`plan_rewrite`); ids are the old ones."""

    prefix: list[CheckpointTuple]
    side: list[CheckpointTuple]
    suffix: list[CheckpointTuple]
    after: list[CheckpointTuple]
    #: suffix checkpoint id -> its new parent (the fork), for those whose parent was the seed
    parents: dict[str, str | None]
    #: added to the suffix's steps (they continue the fork's)
    shift: int
    #: the suffix's head (else the fork): the after-commit turns' new parent
    head: str | None
    #: checkpoint id -> channel values to store there (delta channels of re-parented checkpoints)
    materialize: dict[str, dict[str, Any]]
    #: the thread's root checkpoints, oldest first (as listed)
    tuples: list[CheckpointTuple]

    @property
    def kept_ids(self) -> set[str]:
        return {_id(t) for t in [*self.prefix, *self.side, *self.after]}


def plan_rewrite(saver: BaseCheckpointSaver, thread: str, tuples: list[CheckpointTuple],
                 scratch: list[CheckpointTuple], *, fork_checkpoint_id: str | None, suffix_thread: str,
                 holds: Callable[[CheckpointTuple], bool], holds_value: Holds,
                 continue_after: Callable[[dict], bool] | None,
                 specs: dict[str, BaseChannel] | None, check_prefix: bool = True,
                 load: Callable[[CheckpointTuple], CheckpointTuple] = lambda t: t) -> RewritePlan:
    """Decide :func:`stage_rewrite`'s new history (its docstring) without writing anything.

    ``tuples``: ``thread``'s root checkpoints oldest first; they need only ids,
    parents and metadata when ``load`` returns the whole checkpoint of one (an SQL
    reader lists them without decoding values). ``check_prefix=False``: the prefix
    is not decoded (Lemma 1: it is shared by both worlds; the byte audit proves it
    holds no copy). Raises :class:`HistoryNotRewritable` as :func:`stage_rewrite`."""
    by_id = {_id(t): t for t in tuples}

    def line(cid: str | None) -> list[CheckpointTuple]:
        out = []
        while cid and cid in by_id:
            out.append(by_id[cid])
            cid = _parent(by_id[cid])
        return out[::-1]

    # the head is what get_tuple returns: the greatest id
    main = {_id(t) for t in line(_id(tuples[-1]))} if tuples else set()
    if fork_checkpoint_id and fork_checkpoint_id not in by_id:
        raise HistoryNotRewritable(f"fork checkpoint {fork_checkpoint_id!r} is not in thread {thread!r}")
    prefix = line(fork_checkpoint_id)
    for t in prefix if check_prefix else ():
        if holds(t):
            raise HistoryNotRewritable(f"checkpoint {_id(t)} before the fork holds the target")
    kept = {_id(t) for t in prefix}
    side = []
    for t in tuples:  # oldest first: a parent is decided before its children
        if _id(t) not in main and _id(t) not in kept and _parent(t) in kept and not holds(load(t)):
            kept.add(_id(t))
            side.append(t)

    seed = []
    while len(seed) < len(scratch) and (scratch[len(seed)].metadata or {}).get("source") == "update":
        seed.append(scratch[len(seed)])
    suffix = scratch[len(seed):]
    for t in suffix:
        if holds(t):
            raise HistoryNotRewritable(f"counterfactual checkpoint {_id(t)} of {suffix_thread!r} holds the target")
    fork_id = _id(prefix[-1]) if prefix else None
    head = _id(suffix[-1]) if suffix else fork_id
    after = []  # the turns after the commit, on the head's line
    mainline = line(_id(tuples[-1])) if tuples and continue_after is not None else []
    commits = [i for i, t in enumerate(mainline) if continue_after(t.metadata or {})] if mainline else []
    if commits:
        after = [load(t) for t in mainline[commits[-1] + 1:]]
        for t in after:
            if holds(t):
                raise HistoryNotRewritable(f"checkpoint {_id(t)} after the commit holds the target")
    # a side branch newer than the new head would become the head: drop it (and its descendants)
    side = [t for t in side if head is not None and _id(t) < head]
    seed_ids = {_id(t) for t in seed}
    parents = {_id(t): fork_id for t in suffix if _parent(t) is None or _parent(t) in seed_ids}
    # the seed stands for the fork's state: the suffix's steps continue the fork's
    step = lambda ts, i: (ts[i].metadata or {}).get("step", 0) if ts else 0  # noqa: E731
    shift = (step(prefix, -1) - step(seed, -1)) if seed else (step(prefix, -1) + 1 - step(suffix, 0))
    shift = shift if prefix else 0

    moved = [load(t) for t in suffix if _id(t) in parents] + after[:1] if specs else []
    # (savers storing a blob per checkpoint need no version sharing check over the prefix)
    staged = [*(prefix if check_prefix else ()), *side, *suffix, *after]
    mat = _rebuilt_values(saver, specs or {}, staged, moved)
    for t in moved:
        if _id(t) in mat and any(holds_value(v) for v in mat[_id(t)].values()):
            raise HistoryNotRewritable(f"checkpoint {_id(t)} rebuilds to a value holding the target")
    return RewritePlan(prefix, sorted(side, key=_id), suffix, after, parents, shift, head, mat, tuples)


def stage_rewrite(saver: BaseCheckpointSaver, thread: str, *, fork_checkpoint_id: str | None, suffix_thread: str,
                  stage_thread: str, holds_target: Holds, marker: dict,
                  continue_after: Callable[[dict], bool] | None = None,
                  reader: ThreadReader | None = None,
                  specs: dict[str, BaseChannel] | None = None) -> StagedHistory:
    """Build ``thread``'s new history in ``stage_thread`` (cleared first); ``thread`` is not written.

    The new history: the ancestor line of ``fork_checkpoint_id`` (inclusive,
    from the root; empty when None), side branches of ``thread`` hanging off
    kept checkpoints that hold no target (and are older than the new head),
    then ``suffix_thread``'s checkpoints minus its seed (the leading
    ``source="update"`` checkpoint(s) its single ``update_state`` wrote),
    re-parented onto the fork with steps shifted to continue the fork's.
    Every copy gets ``marker`` merged into its metadata; suffix metadata
    naming ``suffix_thread`` is dropped. Raises :class:`HistoryNotRewritable`
    when a prefix or suffix checkpoint holds the target (values, pending
    writes or metadata) or the fork is not in ``thread``; checkpoints of nested
    runs are left out (:data:`NESTED`). ``continue_after``: the checkpoint of ``thread`` that
    committed the counterfactual (``update_state`` with the suffix's final
    state); the turns taken on the head's line after it (the session went
    on) are kept, re-parented onto the suffix's head — they were computed
    from the counterfactual state, so they hold no target (checked like the
    rest; ``continue_after`` is a test on checkpoint metadata, the last
    checkpoint of the head's line passing it is the commit). When
    ``kept + suffix == 0`` nothing is staged:
    delete the thread instead of calling :func:`swap_in` (which reads an
    empty stage as "already swapped"). Once "staged" is journaled, never
    stage again: after a crash in :func:`swap_in` the thread is partial.
    ``reader``: the erasure's reads (``holds_target`` is then its predicate).
    ``specs``: the graph's channels a checkpoint may not store (:func:`delta_specs`):
    each re-parented checkpoint gets their values stored (module docstring).
    Every checkpoint is decoded and copied twice (here and in :func:`swap_in`): the
    path for any saver; ``history_sql.rewrite_sqlite`` / ``history_pg.rewrite_postgres`` touch the suffix only, on
    a saver whose driver is ``sql_rewritable`` (``unsee.middleware.checkpointers``)."""
    reader = ThreadReader(saver, holds_target) if reader is None else reader
    saver.delete_thread(stage_thread)  # a rerun starts clean
    reader.written(stage_thread)
    # (nested runs' checkpoints: ``swap_in``'s delete_thread takes them, and they are not copied: NESTED)
    tuples = reader.root(thread)
    p = plan_rewrite(saver, thread, tuples, reader.root(suffix_thread), fork_checkpoint_id=fork_checkpoint_id,
                     suffix_thread=suffix_thread, holds=reader.holds, holds_value=reader.holds_target,
                     continue_after=continue_after, specs=specs)
    prefix, side, suffix, after, parents, shift, head, mat = (p.prefix, p.side, p.suffix, p.after, p.parents,
                                                              p.shift, p.head, p.materialize)

    taken: set[str] = set()  # (the stage was emptied above)
    written: list[CheckpointTuple] = []
    ids = put_copies(saver, prefix + sorted(side, key=_id), stage_thread, scrub=None, rename_to=thread,
                meta_update=marker, taken=taken, written=written, materialize=mat, specs=specs)
    put_copies(saver, suffix, stage_thread, scrub=suffix_thread, rename_to=thread, meta_update=marker,
          parents=parents, ids=ids, step_shift=shift, taken=taken, written=written, materialize=mat, specs=specs)
    if after:
        put_copies(saver, after, stage_thread, scrub=None, rename_to=thread, parents={_id(after[0]): ids.get(head or "")},
              ids=ids, taken=taken, written=written, materialize=mat, specs=specs)
    reader.written(stage_thread)
    kept_n = len(prefix) + len(side) + len(after)
    return StagedHistory(kept=kept_n, suffix=len(suffix), dropped=len(tuples) - kept_n, stage_thread=stage_thread,
                         head=_id(tuples[-1]) if tuples else None, written=written)


def _rebuilt_values(saver: BaseCheckpointSaver, specs: dict[str, BaseChannel], staged: list[CheckpointTuple],
                    moved: list[CheckpointTuple]) -> dict[str, dict[str, Any]]:
    """old id -> {channel: value} to store in each staged checkpoint whose rebuilt value would
    change: the ``moved`` (re-parented) ones, and any staged one sharing such a channel version
    (a saver storing one blob per version, e.g. PostgreSQL's, must not see two values of one)."""
    if not specs:
        return {}
    out: dict[str, dict[str, Any]] = {}
    by_version: dict[tuple[str, Any], Any] = {}
    for t in moved:
        names = _unstored(t, specs)
        if names:
            vals = {k: channel_value(saver, specs[k], k, t) for k in names}
            out[_id(t)] = vals
            versions = t.checkpoint.get("channel_versions", {})
            by_version.update({(k, versions[k]): v for k, v in vals.items()})
    if by_version:
        for t in staged:
            versions = t.checkpoint.get("channel_versions", {})
            same = {k: by_version[(k, versions[k])] for k in _unstored(t, specs) if (k, versions[k]) in by_version}
            if same:
                out.setdefault(_id(t), {}).update(same)
    return out


def swap_in(saver: BaseCheckpointSaver, thread: str, stage_thread: str,
            staged: list[CheckpointTuple] | None = None) -> int:
    """Replace ``thread``'s history by ``stage_thread``'s, then delete the stage. Idempotent.

    The caller journals "staged" after :func:`stage_rewrite` and "swapped"
    after this returns; a crash inside is finished by calling this again
    (the stage survives until the copy is complete). An empty or missing
    stage means already swapped: nothing is done and 0 returned. Returns the
    number of checkpoints now in ``thread``. ``staged``: the stage's
    checkpoints as :func:`stage_rewrite` put them in this process
    (``StagedHistory.written``), else they are read from the saver."""
    staged = _tuples(saver, stage_thread) if staged is None else staged
    if not staged:
        saver.delete_thread(stage_thread)  # writes a partial delete may have left
        return 0
    saver.delete_thread(thread)
    put_copies(saver, staged, thread, scrub=stage_thread, rename_to=thread, taken=set())
    saver.delete_thread(stage_thread)
    return len(staged)


def history_holding(saver: BaseCheckpointSaver, thread: str, holds_target: Holds,
                    reader: ThreadReader | None = None) -> tuple[int, int]:
    """(checkpoints of ``thread``, all namespaces; those whose values, pending writes or metadata
    hold the target). ``reader``: the erasure's reads (``holds_target`` is then its predicate)."""
    reader = ThreadReader(saver, holds_target) if reader is None else reader
    every = reader.every(thread)
    return len(every), sum(map(reader.holds, every))


def postgres_saver(saver: Any) -> bool:
    """Whether ``saver``'s suffix may be rewritten with SQL on PostgreSQL tables (its driver's
    ``sql_rewritable``: its own tables, values as its serde wrote them); an encrypting wrapper or
    a subclass storing rows its own way takes the API path."""
    driver = driver_or_generic(saver)
    return driver.engine == "postgres" and driver.sql_rewritable()


def threads_with_prefix(saver: BaseCheckpointSaver, prefix: str) -> list[str]:
    """The saver's thread ids starting with ``prefix`` (e.g. ``<thread>~cf-`` scratch threads), sorted.

    The thread ids are read without loading a checkpoint where the saver's driver allows it
    (SQLite, PostgreSQL: one query; in-memory: its keys); other savers are listed whole
    (``list(None)``), where a row that fails to load (e.g. one written under a destroyed key)
    raises out of here."""
    ids = driver_or_generic(unwrapped(saver)).thread_ids(prefix)  # (an EncryptingSaver wraps the real saver)
    if ids is not None:
        return ids
    return sorted({tid for t in saver.list(None)
                   if (tid := t.config["configurable"]["thread_id"]).startswith(prefix)})


def drop_thread(saver: BaseCheckpointSaver, thread: str) -> None:
    """Delete ``thread``'s checkpoints and writes."""
    saver.delete_thread(thread)


def drop_threads(saver: BaseCheckpointSaver, names: Iterable[str]) -> int:
    """Delete every named thread (scratch threads after a swap); returns how many."""
    names = list(names)
    for name in names:
        saver.delete_thread(name)
    return len(names)
