"""Every input a thread's graph received, as LangGraph got it.

A run of an agent starts with an input: a state update (``{"messages": [...],
other keys}``) or a ``Command(resume=..., update=..., goto=...)`` (a human's
decision at an interrupt is one). The recording middleware sees the state
after that input was applied, and a resumed run skips ``before_agent``
altogether, so the input itself is taken from LangChain's callbacks: the root
graph run's ``on_chain_start`` receives it as given. ``RunInputs`` keeps, per
thread, the latest root run's input until the thread's recording middleware
takes it (``take``) and records it as a ``run_input`` artifact of the session
(``payload_of`` is its body); it also keeps the interrupts each root run
stopped at (a node's ``GraphInterrupt``), so a resume records the question its
decision answered.

An application's ``update_state`` between runs is no run input here: the
messages it adds are recorded as user inputs of the next run (which the state
then holds), and a replay gives them with that run's input; other keys it sets
are not recorded.

It also tells which root run of a thread is under way (``running``): every run
nested in it (a worker, a subgraph, a subagent on the same thread id) belongs
to that one run, whatever the checkpointer has written so far.

The cost is a test of ``parent_run_id`` per chain event, a set membership test
per chain start with a parent, and a few dictionary writes per root graph run;
nothing is kept per node. ``RunInputs`` is fed by the process-wide run-end
watcher (``run_end``).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

#: roots and threads remembered at most (a thread nobody records keeps its last input until then)
MAX_THREADS = 4096
#: inputs kept per thread until taken
MAX_UNTAKEN = 16

#: the configurable key a forget's replay names the recorded input it gives with (its id stays)
REPLAYED_INPUT = "unsee_run_input"


@dataclass(frozen=True)
class RunInput:
    """What one root graph run of a thread was given. ``answers``: for a ``Command`` with a resume
    value, the interrupts the thread was waiting at when it started, each ``{"id", "value"}``
    (None: not known in this process, e.g. the interrupted run ran elsewhere)."""

    run_id: UUID
    thread_id: str
    value: Any
    answers: tuple[dict[str, Any], ...] | None = None
    #: the recorded input a forget's replay gives again with this run (its id is kept)
    replayed_id: str | None = None


class RunInputs:
    """Root graph runs' inputs, per thread, until a recorder takes them (module docstring)."""

    def __init__(self) -> None:
        #: thread -> inputs of its root runs not taken yet, in order (a run that reached no node of
        #: the recording middleware, e.g. a ``Command(update=...)`` that ran no node, is given
        #: with the next run's)
        self._pending: dict[str, list[RunInput]] = {}
        self._roots: dict[UUID, str] = {}
        #: root runs a node of which started (their graph ran: a recorder in it took the input)
        self._ran: set[UUID] = set()
        #: thread -> its root run under way (LangGraph runs one at a time per thread)
        self._running: dict[str, UUID] = {}
        self._raised: dict[UUID, list[dict[str, Any]]] = {}
        #: thread -> the interrupts its latest root run stopped at (() none)
        self._waiting: dict[str, tuple[dict[str, Any], ...]] = {}
        self._lock = threading.Lock()

    def started(self, run_id: UUID, thread_id: str, value: Any, replayed_id: str | None = None) -> None:
        with self._lock:
            if len(self._roots) >= MAX_THREADS:
                for key in list(self._roots)[: MAX_THREADS // 2]:  # (runs whose end was never seen)
                    thread = self._roots.pop(key)
                    if self._running.get(thread) == key:
                        del self._running[thread]
                    self._raised.pop(key, None)
                    self._ran.discard(key)
            if len(self._pending) >= MAX_THREADS:
                for key in list(self._pending)[: MAX_THREADS // 2]:
                    del self._pending[key]
            self._roots[run_id] = thread_id
            self._running[thread_id] = run_id
            answers = self._waiting.get(thread_id) if _resumes(value) else None
            runs = self._pending.setdefault(thread_id, [])
            if len(runs) >= MAX_UNTAKEN:  # (a thread nobody records)
                del runs[0]
            runs.append(RunInput(run_id, thread_id, value, answers, replayed_id))

    def child_started(self, parent_run_id: UUID) -> None:
        """A run whose parent is ``parent_run_id`` started: where that is a root run, its graph
        runs nodes (one membership test per chain start)."""
        if parent_run_id in self._roots:
            self._ran.add(parent_run_id)

    def interrupted(self, parent_run_id: UUID | None, error: BaseException) -> None:
        """A node of a root run raised ``GraphInterrupt``: the run stops at its interrupts."""
        if parent_run_id is None or parent_run_id not in self._roots:
            return
        found = [{"id": getattr(i, "id", None), "value": getattr(i, "value", None)}
                 for i in (error.args[0] if error.args else ()) or ()]
        with self._lock:
            self._raised.setdefault(parent_run_id, []).extend(found)

    def ended(self, run_id: UUID, failed: bool = False) -> None:
        """A root run ended; ``failed``: with an error (its input, if no recorder took it, changed
        nothing a replay must give again, and is dropped)."""
        if run_id not in self._roots:
            return
        with self._lock:
            thread = self._roots.pop(run_id, None)
            raised = self._raised.pop(run_id, [])
            ran = run_id in self._ran
            self._ran.discard(run_id)
            if thread is None:  # (its end was reported twice, from two threads)
                return
            if self._running.get(thread) == run_id:
                del self._running[thread]
            # An input nobody took is dropped when the run failed, and when its graph ran
            # to its end without stopping at an interrupt: no recorder is in that graph (a
            # recorder takes the input at its first hook), so it is another graph's on the
            # same thread id, and never a run of this session to record or give again. An
            # input that ran no node (a ``Command(update=...)``), or whose run stopped at an
            # interrupt before a recorder's hook, is given with the next run's.
            if (failed or (ran and not raised)) and (runs := self._pending.get(thread)):
                runs[:] = [r for r in runs if r.run_id != run_id]
            self._waiting[thread] = tuple(raised)
            if len(self._waiting) > MAX_THREADS:
                for key in list(self._waiting)[: MAX_THREADS // 2]:
                    del self._waiting[key]

    def running(self, thread_id: str) -> UUID | None:
        """The root run of the thread under way (None: none seen, e.g. it began before unsee's
        watcher was installed). Every run nested in it (a worker, a subgraph, a subagent on the
        same thread id) is under that one run, whatever the checkpointer has written so far."""
        return self._running.get(thread_id)

    def take(self, thread_id: str) -> list[RunInput]:
        """The inputs of the thread's root runs not taken yet, in order, once ([]: none)."""
        if thread_id not in self._pending:
            return []
        with self._lock:
            return self._pending.pop(thread_id, None) or []

    def latest(self, thread_id: str) -> RunInput | None:
        """The input of the thread's latest root run not taken yet (None: none), left in place."""
        with self._lock:
            runs = self._pending.get(thread_id)
            return runs[-1] if runs else None


def _resumes(value: Any) -> bool:
    return getattr(value, "resume", None) is not None


def is_root_graph_start(parent_run_id: UUID | None, metadata: Mapping[str, Any] | None,
                        name: str | None = None) -> str | None:
    """The thread of a root graph run's start (None: a nested run, a run without a thread, or a
    graph's ``update_state``: its writers run as a root run named ``<graph>UpdateState``; the
    messages such an update adds are recorded with the next run, see the module docstring)."""
    if parent_run_id is not None or not metadata or (name and name.endswith("UpdateState")):
        return None
    thread = metadata.get("thread_id")
    return str(thread) if thread is not None and metadata.get("ls_integration") else None


# -- the recorded body -------------------------------------------------------------------------
MessageRef = Callable[[Any], "str | None"]


def payload_of(value: Any, message_ref: MessageRef, answers: Sequence[dict[str, Any]] | None) -> dict[str, Any]:
    """The JSON-able body of a run input: ``kind`` (``input``, ``command`` or ``none``), and
    ``keys`` (a state update's keys), or ``resume``/``update``/``goto`` (a command). Messages are
    references to their recorded artifacts (``{"$artifact": id}``) where ``message_ref`` knows
    one, else LangChain's serialized form; ``answers``: the interrupts a resume answered."""
    if value is None:
        return {"kind": "none"}
    if _is_command(value):
        out: dict[str, Any] = {"kind": "command"}
        if value.resume is not None:
            out["resume"] = _jsonable(value.resume, message_ref)
            out["answers"] = None if answers is None else [_jsonable(a, message_ref) for a in answers]
        if value.update is not None:
            out["update"] = _jsonable(_update_dict(value.update), message_ref)
        if value.goto:
            out["goto"] = _jsonable(value.goto, message_ref)
        if value.graph is not None:
            out["graph"] = str(value.graph)
        return out
    if isinstance(value, Mapping):
        return {"kind": "input", "keys": _jsonable(dict(value), message_ref)}
    return {"kind": "input", "value": _jsonable(value, message_ref)}


def json_value(value: Any) -> Any:
    """``value`` as a run input's body holds it (messages in LangChain's serialized form)."""
    return _jsonable(value, lambda m: None)


def _is_command(value: Any) -> bool:
    from langgraph.types import Command

    return isinstance(value, Command)


def _update_dict(update: Any) -> Any:
    if isinstance(update, Mapping):
        return dict(update)
    if isinstance(update, (list, tuple)) and all(isinstance(x, (list, tuple)) and len(x) == 2 for x in update):
        return {"$pairs": [[k, v] for k, v in update]}
    return update


def _jsonable(value: Any, message_ref: MessageRef) -> Any:
    from langchain_core.load import dumpd
    from langchain_core.messages import BaseMessage
    from langchain_core.load.serializable import Serializable

    if isinstance(value, BaseMessage):
        aid = message_ref(value)
        return {"$artifact": aid} if aid else {"$lc": dumpd(value)}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v, message_ref) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, message_ref) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Serializable):
        return {"$lc": dumpd(value)}
    if hasattr(value, "model_dump"):
        return _jsonable(value.model_dump(), message_ref)
    return str(value)


def is_ref(value: Any) -> bool:
    """Whether a recorded body's value is a reference to a recorded message (``{"$artifact": id}``):
    a name, not text (a short target can be a part of its id, and is not in the message for that)."""
    return type(value) is dict and len(value) == 1 and "$artifact" in value


def without_refs(text: str) -> str:
    """A recorded body's text (``payload_text``) without its references: what it says itself."""
    return _REF_TEXT.sub("", text) if '"$artifact"' in text else text


_REF_TEXT = re.compile(r'\{"\$artifact": "[^"]*"\}')


def revive(value: Any, message_of: Callable[[str], Any]) -> Any:
    """A recorded body's value as the graph takes it again: ``{"$artifact": id}`` -> the message
    ``message_of(id)`` rebuilds, ``{"$lc": ...}`` -> the LangChain object, ``{"$pairs": ...}`` ->
    a list of (key, value) updates."""
    if isinstance(value, dict):
        if is_ref(value):
            return message_of(value["$artifact"])
        if set(value) == {"$lc"}:
            from langchain_core.load import load

            return load(value["$lc"], allowed_objects="core")  # (what unsee itself serialized)
        if set(value) == {"$pairs"}:
            return [(k, revive(v, message_of)) for k, v in value["$pairs"]]
        return {k: revive(v, message_of) for k, v in value.items()}
    if isinstance(value, list):
        return [revive(v, message_of) for v in value]
    return value


def payload_text(payload: dict[str, Any]) -> str:
    return json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)


_registry = RunInputs()  # (a few empty dictionaries: made with the module, no lock needed)


def run_inputs() -> RunInputs:
    """The process's registry (fed by the run-end watcher once it is installed)."""
    return _registry
