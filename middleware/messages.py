"""Agent-state messages and the artifacts they stand for.

A state message maps to an artifact id derived from its LangGraph message id
(or its tool call id) only, never from the thread: a thread forked for replay
maps the same messages to the same artifacts, which is what lets a
counterfactual graph replace the old one.

A model call's prompt holds the whole history, so mapping it message by
message would make recording O(history) per call. :class:`MessageIds`
maps each message once per session: a prompt that extends the previous one
(the same run's next model call) reuses its ids after one identity check,
and any other list is looked up in a memo keyed by (message class, message
id) — C-level passes either way — so the Python work of a call is
proportional to the messages it had not seen.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import repeat
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.types import Command

from .hashing import short_id
from .records import ArtifactType

_MISSING = object()
_ID = operator.attrgetter("id")


def text_of(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "".join(parts)


def is_summary(message: BaseMessage) -> bool:
    return isinstance(message, HumanMessage) and (message.additional_kwargs or {}).get("lc_source") == "summarization"


def message_artifact(session_id: str, message: BaseMessage) -> tuple[str, ArtifactType] | None:
    """The artifact id a state message stands for (and its type); None for none.

    Derived from the LangGraph message id (or tool call id) only, not from the
    thread: a thread forked for replay maps the same messages to the same
    artifacts, which is what lets a counterfactual graph replace the old one.
    """
    if isinstance(message, ToolMessage):
        return tool_return_artifact_id(message.tool_call_id), ArtifactType.TOOL_RETURN
    if message.id is None:
        return None
    if is_summary(message):
        return short_id("sum", message.id), ArtifactType.SUMMARY
    if isinstance(message, HumanMessage):
        return short_id("in", message.id), ArtifactType.USER_INPUT
    if isinstance(message, AIMessage):
        return short_id("mt", message.id), ArtifactType.MODEL_TURN
    return None


def artifact_id_of(session_id: str, message: BaseMessage) -> str | None:
    mapped = message_artifact(session_id, message)
    return mapped[0] if mapped is not None else None


def tool_call_issuer(messages, call_id: str) -> str | None:
    """The model turn artifact id of the AI message in ``messages`` that made the call
    ``call_id``, valid or invalid (malformed, cut-off) alike; None when none did."""
    for m in reversed(messages):
        if isinstance(m, AIMessage) and m.id is not None:
            if any(c.get("id") == call_id for c in [*(m.tool_calls or []), *(m.invalid_tool_calls or [])]):
                return short_id("mt", m.id)
    return None


def tool_call_artifact_id(session_id: str, call_id: str) -> str:
    return short_id("call", call_id)


def tool_return_artifact_id(call_id: str) -> str:
    """The artifact id of the return of tool call ``call_id`` (session-independent, like all ids)."""
    return short_id("tr", call_id)


def state_messages(request: Any) -> Sequence[BaseMessage]:
    """The messages of the agent's state a model request was made from (its own messages when
    the request carries no state)."""
    state = getattr(request, "state", None)
    msgs = state.get("messages") if isinstance(state, dict) else None
    return msgs if isinstance(msgs, list) else request.messages


def same_messages(a: Sequence[BaseMessage], b: Sequence[BaseMessage]) -> bool:
    """The same messages in the same order (one C-level pass: the same objects compare by
    identity; equal messages stand for the same artifacts)."""
    if a is b:
        return True
    if len(a) != len(b):
        return False
    return a == b if isinstance(a, list) and isinstance(b, list) else list(a) == list(b)


def ai_message_of(response: Any) -> AIMessage | None:
    if isinstance(response, AIMessage):
        return response
    inner = getattr(response, "model_response", None)  # ExtendedModelResponse
    if inner is not None:
        response = inner
    for m in reversed(getattr(response, "result", None) or []):
        if isinstance(m, AIMessage):
            return m
    return None


def command_messages(command: Command) -> list[BaseMessage]:
    """The messages a ``Command``'s update writes (its ``messages`` key; an update given as a list
    of (key, value) pairs too)."""
    update = command.update
    if isinstance(update, dict):
        msgs = update.get("messages")
    elif isinstance(update, (list, tuple)):
        msgs = [m for k, v in update if k == "messages" for m in (v if isinstance(v, list) else [v])]
    else:
        msgs = None
    if isinstance(msgs, BaseMessage):
        return [msgs]
    return [m for m in msgs or () if isinstance(m, BaseMessage)]


def command_keys(command: Command) -> list[str]:
    """The state keys a ``Command``'s update writes, in order."""
    update = command.update
    if isinstance(update, dict):
        return [str(k) for k in update]
    if isinstance(update, (list, tuple)):
        return list(dict.fromkeys(str(k) for k, _ in update))
    return []


def tool_message_of(result: Any, call_id: str | None = None) -> ToolMessage | None:
    """The tool message that answers the call ``call_id`` in a tool's result: the result itself,
    or, for a ``Command``, the ToolMessage of its update answering that call (a handoff's update
    may carry the whole history, other calls' answers included: None when none answers it);
    without ``call_id``, the update's first ToolMessage."""
    if isinstance(result, ToolMessage):
        return result
    if isinstance(result, Command):
        tms = [m for m in command_messages(result) if isinstance(m, ToolMessage)]
        if call_id is None:
            return tms[0] if tms else None
        return next((m for m in reversed(tms) if m.tool_call_id == call_id), None)
    return None


class MessageIds:
    """A session's message -> artifact id map, filled once per message.

    ``of(messages, known)`` returns the artifact id of every message (None for
    a message that stands for none), the positions, in order, of those whose
    artifact is not ``known`` yet (to be recorded), and the ids it mapped
    afresh. Once those are recorded, ``settle`` remembers them: only a settled
    message is looked up again (so a recording that failed half-way is retried
    by the next call, as every message used to be), and only a settled prompt
    counts as the prefix of the next one.

    The memo is keyed by message id and checked against the message's class:
    LangGraph identifies a message in the state by its id, and the id fixes the
    artifact (a tool message's by its call id, which a message keeps). Messages
    without an id are mapped afresh every time.
    """

    __slots__ = ("session_id", "_memo", "_classes", "_last", "_last_ids", "mapped")

    def __init__(self, session_id: str):
        self.session_id = session_id
        self._memo: dict[str, str | None] = {}
        self._classes: dict[str, type] = {}
        self._last: list[BaseMessage] = []
        self._last_ids: list[str | None] = []
        #: messages mapped one by one so far: the Python-level work (tests count it)
        self.mapped = 0

    def of(self, messages: Sequence[BaseMessage], known) -> tuple[list[str | None], list[int], list]:
        last = self._last
        n0 = len(last)
        if n0 and len(messages) >= n0 and messages[n0 - 1] is last[-1] and messages[:n0] == last:
            # the previous settled prompt, extended (the same run's next call): its ids hold
            if len(messages) > n0:
                tail = self._lookup(messages[n0:])
                ids, left = self._last_ids + tail, tail.count(_MISSING)
            else:
                ids, left = list(self._last_ids), 0
            start = n0
        else:
            ids = self._lookup(messages)
            start, left = 0, ids.count(_MISSING)
        new: list[int] = []
        fresh: list[tuple[str, type, str | None]] = []
        # the messages not seen yet: almost always at the end, so found from there
        i = len(ids)
        while left and i > start:
            i -= 1
            if ids[i] is not _MISSING:
                continue
            left -= 1
            m = messages[i]
            self.mapped += 1
            aid = ids[i] = artifact_id_of(self.session_id, m)
            if m.id is not None:
                fresh.append((m.id, type(m), aid))
            if aid is not None and aid not in known:
                new.append(i)
        new.reverse()
        return ids, new, fresh

    def settle(self, messages: Sequence[BaseMessage] | None, ids: list[str | None], fresh: list) -> None:
        """What :meth:`of` mapped is recorded: remember it (and ``messages`` as the prompt the
        next call may extend; None: not a prompt)."""
        for mid, cls, aid in fresh:
            self._memo[mid] = aid
            self._classes[mid] = cls
        if messages is not None:
            self._last = list(messages)
            self._last_ids = ids

    def release(self) -> None:
        """The run is over: let go of its prompt (the next run's state holds other objects)."""
        self._last, self._last_ids = [], []

    def _lookup(self, messages: Sequence[BaseMessage]) -> list:
        mids = list(map(_ID, messages))
        ids = list(map(self._memo.get, mids, repeat(_MISSING)))
        classes = list(map(type, messages))
        if classes != list(map(self._classes.get, mids, classes)):  # (an id not seen: its own class)
            # a message replaced by one of another class under the same id: map those afresh
            classes = self._classes
            for i, (m, mid) in enumerate(zip(messages, mids)):
                if classes.get(mid) is not type(m):
                    ids[i] = _MISSING
        return ids
