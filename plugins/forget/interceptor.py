"""The replay interceptor: a thin adapter that walks the recorded transcript.

Installed on the scratch thread a replay runs in. It keeps a cursor over the
recorded model turns until the counterfactual run diverges from them:

- a model turn whose prompt manifest is disjoint from I(z) is re-materialised
  from the record (when the strategy re-materialises; never for B5/B5'),
  everything else is decoded again; a decoded turn that differs from the
  record ends the walk (the run has diverged);
- after a divergence, a model call whose prompt is, entry for entry, the
  recorded prompt of a turn outside I(z) (same artifacts, same content
  hashes, no prompt blocks) is answered from the record again (resync): the
  model would see exactly what it saw then. This is where independent turns
  pay, e.g. behind a context window that has moved past everything derived
  from the target. Resync stops for the rest of the replay once the run
  injects a prompt block (memory) or executes a ``write`` tool, since an
  injection the recorder only sees after the call could then differ;
- each tool call is answered as ``decide`` (pure, in ``decide``) says: from
  the record (the tau observation with the target removed), by running the
  tool, or not at all (a deferred side effect). An answer from the record is
  the original tool message (content blocks, artifact, status: the session's
  live state holds it, ``ReplayPlan.originals``) whenever it still says what
  the record says, the target removed where it is an entry; else a message
  with the recorded text.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware.types import ModelResponse
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.types import Command

from unsee.middleware.hooks import _ai_message_of, text_of
from unsee.middleware.recorder import current_scope
from unsee.middleware.tools import effect_of, not_executed

from .decide import Action, Decision, SideEffectPolicy, ToolCall, decide, same_args
from .deferral import deferred_request
from .plan import RecordedCall, RecordedTurn, ReplayPlan
from .report import ReplayCounts, SideEffect
from .sanitize import sanitize, sanitize_message, sanitize_value

__all__ = ["ReplayInterceptor", "ReplayStats", "SideEffectPolicy"]


def sanitize_update(update: dict, target: str) -> dict:
    """A ``Command``'s state update without ``target``: its messages (content, tool call
    arguments; ids kept) and every other JSON-able value."""
    out: dict = {}
    for key, value in update.items():
        if isinstance(value, list) and any(hasattr(v, "content") for v in value):
            out[key] = [sanitize_message(v, target) if hasattr(v, "content") else sanitize_value(v, target)
                        for v in value]
        elif hasattr(value, "content"):
            out[key] = sanitize_message(value, target)
        else:
            out[key] = sanitize_value(value, target)
    return out


@dataclass
class ReplayStats:
    #: the counters the report carries (declared once, in ``report.ReplayCounts``)
    counts: ReplayCounts = field(default_factory=ReplayCounts)
    deferred: list[SideEffect] = field(default_factory=list)
    deduplicated: list[SideEffect] = field(default_factory=list)
    diverged_at: str | None = None
    #: the recorded transitions (artifact ids of the old world) by what the replay did with them
    decoded_ids: list[str] = field(default_factory=list)
    rematerialised_ids: list[str] = field(default_factory=list)
    from_record_ids: list[str] = field(default_factory=list)
    #: the tools the replay executed (name and call id)
    executed_calls: list[tuple[str, str]] = field(default_factory=list)
    #: the tools the replay met that declare no effect and have none to infer: treated as external
    assumed_external: set[str] = field(default_factory=set)


def _same_calls(made: list[dict], recorded: tuple[RecordedCall, ...]) -> bool:
    return len(made) == len(recorded) and all(
        m["name"] == r.name and same_args(m["args"], r.args) for m, r in zip(made, recorded))


class RecordedReply(BaseChatModel):
    """A chat model that answers with a recorded message: a re-materialised turn made to pass
    through the agent's own output handling (a structured-output call gets its answer and the
    ``structured_response`` as it did in the run)."""

    reply: AIMessage

    @property
    def _llm_type(self) -> str:
        return "unsee-recorded-reply"

    def bind_tools(self, tools, **kwargs) -> "RecordedReply":
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.reply)])


def _through_agent(request: Any, recorded: ModelResponse) -> Any | None:
    """The request with the recorded reply as its model, when the reply calls a tool the agent
    does not run (a structured-output call: ``create_agent`` answers it itself, after the
    model); None when the recorded reply can be given as it is."""
    ai = recorded.result[0]
    if getattr(request, "response_format", None) is None or not ai.tool_calls:
        return None
    tools = {getattr(t, "name", None) for t in getattr(request, "tools", None) or ()}
    if all(c["name"] in tools for c in ai.tool_calls):
        return None
    return request.override(model=RecordedReply(reply=ai))


class ReplayInterceptor:
    def __init__(self, plan: ReplayPlan, target: str, side_effects: SideEffectPolicy = "defer"):
        self.plan = plan
        self.target = target
        self.side_effects = side_effects
        self.stats = ReplayStats()
        self._cursor = 0
        self._diverged = False
        self._current: RecordedTurn | None = None
        self._used: set[str] = set()
        #: recorded turns answered from the record (each answers one call)
        self._turns_used: set[str] = set()
        self._resync = True
        self._lock = threading.Lock()
        #: the first call into the agent's own code that raised: (which call, the exception);
        #: ``run_replay`` names it in ``ReplayFailed`` (the framework may wrap the exception)
        self.failure: tuple[str, BaseException] | None = None

    def _failed(self, call: str, exc: BaseException) -> None:
        with self._lock:
            if self.failure is None:
                self.failure = (call, exc)

    def _model_call_name(self) -> str:
        # the calls that reached the model so far, this one included: what a scripted model must answer
        return f"the model (asked for reply #{self.stats.counts.model_turns_decoded + 1} of this replay)"

    # -- model calls ------------------------------------------------------
    def _next_recorded(self) -> RecordedTurn | None:
        with self._lock:
            rec = None
            if not self._diverged and self._cursor < len(self.plan.model_turns):
                rec = self.plan.model_turns[self._cursor]
            self._cursor += 1
            self._current = rec
            return rec

    def _resynced(self) -> RecordedTurn | None:
        """After a divergence: the recorded turn outside I(z) whose prompt this call repeats."""
        scope = current_scope.get()
        if scope is None or not scope.prompt or scope.blocks:
            return None
        with self._lock:
            if not (self._diverged and self._resync and self.plan.rematerialise):
                return None
            for rec in self.plan.model_turns:
                if rec.prompt == scope.prompt and not rec.in_closure and rec.artifact_id not in self._turns_used:
                    self._current = rec
                    return rec
        return None

    def _rematerialise(self, rec: RecordedTurn) -> ModelResponse:
        self._turns_used.add(rec.artifact_id)
        self.stats.counts.model_turns_rematerialised += 1
        self.stats.rematerialised_ids.append(rec.artifact_id)
        calls = [{"name": c.name, "args": c.args, "id": c.call_id, "type": "tool_call"} for c in rec.calls]
        ai = AIMessage(content=rec.text, id=rec.message_id, tool_calls=calls,
                       response_metadata={"unsee": {"rematerialised": True}})
        return ModelResponse(result=[ai])

    def _after_decode(self, rec: RecordedTurn | None, response: Any) -> Any:
        self.stats.counts.model_turns_decoded += 1
        if rec is not None:
            self.stats.decoded_ids.append(rec.artifact_id)
        ai = _ai_message_of(response)
        if rec is None or ai is None:
            return response
        if text_of(ai) == rec.text and _same_calls(ai.tool_calls or [], rec.calls):
            # The same artifact as in the record: keep its identity (ids of the message and calls).
            self._turns_used.add(rec.artifact_id)  # (a resync must not answer another call with it)
            if rec.message_id:
                ai.id = rec.message_id
            for tc, rc in zip(ai.tool_calls or [], rec.calls):
                tc["id"] = rc.call_id
        else:
            with self._lock:
                self._diverged = True
                self._current = None
                self.stats.diverged_at = rec.artifact_id
        return response

    def _use_record(self, rec: RecordedTurn | None) -> bool:
        return rec is not None and self.plan.rematerialise and not rec.in_closure

    def _blocks_seen(self) -> None:
        scope = current_scope.get()
        if scope is not None and scope.blocks:
            self._resync = False  # a memory injection: later prompts may differ after the fact

    def _recorded_answer(self) -> tuple[RecordedTurn | None, ModelResponse | None]:
        """The recorded turn at this model call and its recorded answer when the record answers
        it (B7 outside I(z), or a resync; None when the model must decode it)."""
        rec = self._next_recorded()
        if self._use_record(rec):
            return rec, self._rematerialise(rec)
        if (again := self._resynced()) is not None:
            return rec, self._rematerialise(again)
        return rec, None

    def model_call(self, request, handler):
        rec, recorded = self._recorded_answer()
        if recorded is not None:
            if (through := _through_agent(request, recorded)) is not None:
                return handler(through)
            return recorded
        try:
            response = handler(request)
        except Exception as e:
            self._failed(self._model_call_name(), e)
            raise
        self._blocks_seen()
        return self._after_decode(rec, response)

    async def amodel_call(self, request, handler):
        rec, recorded = self._recorded_answer()
        if recorded is not None:
            if (through := _through_agent(request, recorded)) is not None:
                return await handler(through)
            return recorded
        try:
            response = await handler(request)
        except Exception as e:
            self._failed(self._model_call_name(), e)
            raise
        self._blocks_seen()
        return self._after_decode(rec, response)

    # -- tool calls -------------------------------------------------------
    def _match(self, call: ToolCall) -> RecordedCall | None:
        """The recorded counterpart of this call, if the run still follows the record (marked used)."""
        with self._lock:
            if self._current is None:  # (None once diverged, until a resync)
                return None
            for c in self._current.calls:
                if c.call_id == call.call_id and c.name == call.name and same_args(c.args, call.args):
                    self._used.add(c.artifact_id)
                    return c
            return None

    def _identical(self, call: ToolCall) -> list[RecordedCall]:
        """Recorded calls not matched yet with the same tool and arguments (de-duplication candidates)."""
        with self._lock:
            return [c for t in self.plan.model_turns for c in t.calls
                    if c.artifact_id not in self._used and c.name == call.name and same_args(c.args, call.args)]

    def _recorded_message(self, call: ToolCall, c: RecordedCall) -> ToolMessage:
        status = "error" if c.return_status == "error" else "success"
        original = self.plan.originals.get(c.call_id)
        if isinstance(original, ToolMessage) and text_of(original) == (c.return_content or ""):
            # the message the agent saw then, as it was (content blocks, artifact, status, name)
            msg = ToolMessage(content=original.content, tool_call_id=call.call_id or c.call_id,
                              name=original.name or call.name, status=original.status,
                              artifact=original.artifact, additional_kwargs=dict(original.additional_kwargs),
                              response_metadata=dict(original.response_metadata))
            if self.plan.sanitizes(c.return_id) or self.target in str(msg.content) or \
                    self.target in str(msg.artifact):
                msg = sanitize_message(msg, self.target)  # o_tau without z
                msg.artifact = sanitize_value(msg.artifact, self.target)
            return msg
        content = c.return_content or ""
        if self.plan.sanitizes(c.return_id):
            content = sanitize(content, self.target)  # o_tau without z
        return ToolMessage(content=content, tool_call_id=call.call_id or c.call_id, name=call.name,
                           status=status)

    def _decide(self, request) -> tuple[Decision, ToolMessage | None]:
        """``decide`` for this request, its bookkeeping, and the message that answers it (if any)."""
        tc = request.tool_call
        call = ToolCall(name=tc.get("name"), args=tc.get("args"), call_id=tc.get("id"),
                        effect=effect_of(request.tool))
        rec = self._match(call)
        if call.effect is None and not (rec is not None and rec.command):
            with self._lock:
                self.stats.assumed_external.add(str(call.name or ""))
        d = decide(call, rec, self.side_effects, self._identical(call),  # decide() says when candidates count
                   hosts_runs=call.name in self.plan.run_hosts)
        if d.action is Action.RECORD:
            self.stats.from_record_ids.append(d.record.artifact_id)
            if d.status == "deduplicated":
                with self._lock:
                    self._used.add(d.record.artifact_id)
                self.stats.deduplicated.append(SideEffect(
                    tool=d.record.name, args=d.record.args, effect=call.effect,
                    call_artifact_id=d.record.artifact_id, result=d.record.return_content, status="deduplicated"))
            return d, self._recorded_message(call, d.record)
        if d.action is Action.DEFER:  # (counted by ``_deferred`` once the call reaches its tool)
            return d, not_executed(
                f"[unsee] {call.name} was not executed: external side effects are {d.status} during replay.",
                call.call_id, call.name, "replay")
        return d, None

    def _observed(self, result: Any) -> Any:
        """A tool's result as the counterfactual observes it: without the target (the world may
        still hold it: the session where it was never seen never sees it there either; what the
        tool did is not undone, only what the agent is shown)."""
        if isinstance(result, ToolMessage) and self.target in str(result.content):
            return sanitize_message(result, self.target)
        if isinstance(result, Command) and isinstance(result.update, dict) and self.target in str(result.update):
            # a state effect's update: what it writes is observed by the counterfactual too
            return Command(graph=result.graph, update=sanitize_update(result.update, self.target),
                           resume=result.resume, goto=result.goto)
        return result

    def _executing(self, request) -> None:
        self.stats.counts.tool_calls_executed += 1
        tc = request.tool_call
        self.stats.executed_calls.append((str(tc.get("name") or ""), str(tc.get("id") or "")))
        if effect_of(request.tool) in ("write", "state"):
            self._resync = False  # a write the record may not have: later injections could differ

    def _deferred(self, request, d: Decision, answer: ToolMessage):
        """``request`` passed on with its tool standing in for the deferral (``deferral``), and the
        deferral counted when reached; None: answer at once (no tool to stand in for)."""
        tc = request.tool_call
        effect = SideEffect(tool=tc.get("name") or "", args=tc.get("args") or {}, effect=effect_of(request.tool),
                            status=d.status)

        def reached() -> None:
            with self._lock:
                self.stats.deferred.append(effect)

        inner = deferred_request(request, answer, reached)
        if inner is None:
            reached()
        return inner

    def tool_call(self, request, handler):
        d, msg = self._decide(request)
        if msg is not None and d.action is Action.DEFER:
            inner = self._deferred(request, d, msg)
            if inner is not None:
                return handler(inner)
        if msg is not None:
            self.stats.counts.tool_calls_from_record += d.action is Action.RECORD
            return msg
        self._executing(request)
        try:
            return self._observed(handler(request))
        except Exception as e:
            self._failed(f"tool {request.tool_call.get('name')!r}", e)
            raise

    async def atool_call(self, request, handler):
        d, msg = self._decide(request)
        if msg is not None and d.action is Action.DEFER:
            inner = self._deferred(request, d, msg)
            if inner is not None:
                return await handler(inner)
        if msg is not None:
            self.stats.counts.tool_calls_from_record += d.action is Action.RECORD
            return msg
        self._executing(request)
        try:
            return self._observed(await handler(request))
        except Exception as e:
            self._failed(f"tool {request.tool_call.get('name')!r}", e)
            raise

    # -- after the run ----------------------------------------------------
    def assumed_external(self) -> list[str]:
        """The tools of this replay and of the replayed record that declare no effect and have
        none to infer (``middleware.tools.effect_basis``): treated as external, never fired twice."""
        names = set(self.stats.assumed_external)
        names.update(c.name for t in self.plan.model_turns for c in t.calls
                     if c.effect is None and not c.command and c.fired)
        return sorted(n for n in names if n)

    def orphaned(self) -> list[SideEffect]:
        """External calls the original world fired that the counterfactual did not make."""
        out = []
        for c in self.plan.fired_external():
            if c.artifact_id not in self._used:
                out.append(SideEffect(tool=c.name, args=c.args, effect=c.effect, call_artifact_id=c.artifact_id,
                                      result=c.return_content, status="orphaned"))
        return out
