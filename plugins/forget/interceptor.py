"""The replay interceptor: decides, call by call, how the suffix is re-enacted.

Installed on the scratch thread a replay runs in. It walks the recorded
transcript in order (a cursor over recorded model turns) until the
counterfactual run diverges from it:

- a model turn whose prompt manifest is disjoint from I(z) is re-materialised
  from the record (B7; never for B5/B5'), everything else is decoded again;
- a read-only tool call identical to the recorded one is answered with the
  recorded return (the tau observation with the target removed); a read-only
  call with changed arguments runs for real (in the restored environment);
- ``write`` calls run again (against the restored environment and store);
- ``external`` (and undeclared) calls never fire twice: an identical call
  that already fired is answered with its recorded result (de-duplication), a
  new one goes to the side-effect policy (``defer`` | ``ask`` | ``execute``).

A recorded call that never ran (an IFC block, a deferral: ``executed`` false on
its return) or that returned an error is not reused: the counterfactual may now
meet the precondition the original lacked, so it counts as a new call.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain.agents.middleware.types import ModelResponse
from langchain_core.messages import AIMessage, ToolMessage

from unsee.middleware.hooks import _ai_message_of, text_of
from unsee.middleware.tools import effect_of, not_executed

from .event import sanitize
from .plan import RecordedCall, RecordedTurn, ReplayPlan
from .report import SideEffect

SideEffectPolicy = Literal["defer", "execute", "ask"]


def _canon(args: Any) -> str:
    return json.dumps(args, sort_keys=True, default=str)


@dataclass
class ReplayStats:
    model_turns_decoded: int = 0
    model_turns_rematerialised: int = 0
    tool_calls_from_record: int = 0
    tool_calls_executed: int = 0
    deferred: list[SideEffect] = field(default_factory=list)
    deduplicated: list[SideEffect] = field(default_factory=list)
    diverged_at: str | None = None


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
        self._lock = threading.Lock()

    # -- model calls ------------------------------------------------------
    def _next_recorded(self) -> RecordedTurn | None:
        with self._lock:
            rec = None
            if not self._diverged and self._cursor < len(self.plan.model_turns):
                rec = self.plan.model_turns[self._cursor]
            self._cursor += 1
            self._current = rec
            return rec

    def _rematerialise(self, rec: RecordedTurn) -> ModelResponse:
        self.stats.model_turns_rematerialised += 1
        calls = [{"name": c.name, "args": c.args, "id": c.call_id, "type": "tool_call"} for c in rec.calls]
        ai = AIMessage(content=rec.text, id=rec.message_id, tool_calls=calls,
                       response_metadata={"unsee": {"rematerialised": True}})
        return ModelResponse(result=[ai])

    def _after_decode(self, rec: RecordedTurn | None, response: Any) -> Any:
        self.stats.model_turns_decoded += 1
        ai = _ai_message_of(response)
        if rec is None or ai is None:
            return response
        same = text_of(ai) == rec.text and [(c["name"], _canon(c["args"])) for c in ai.tool_calls or []] == [
            (c.name, _canon(c.args)) for c in rec.calls
        ]
        if same:
            # The same artifact as in the record: keep its identity (ids of the message and calls).
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

    def model_call(self, request, handler):
        rec = self._next_recorded()
        if self._use_record(rec):
            return self._rematerialise(rec)
        return self._after_decode(rec, handler(request))

    async def amodel_call(self, request, handler):
        rec = self._next_recorded()
        if self._use_record(rec):
            return self._rematerialise(rec)
        return self._after_decode(rec, await handler(request))

    # -- tool calls -------------------------------------------------------
    def _match(self, tc: dict) -> RecordedCall | None:
        """The recorded counterpart of this call, if the run still follows the record."""
        with self._lock:
            if self._diverged or self._current is None:
                return None
            for c in self._current.calls:
                if c.call_id == tc.get("id") and c.name == tc.get("name") and _canon(c.args) == _canon(tc.get("args")):
                    self._used.add(c.artifact_id)
                    return c
            return None

    def _fired_identical(self, tc: dict) -> RecordedCall | None:
        """Any recorded, fired, not yet matched call with the same tool and arguments."""
        with self._lock:
            for t in self.plan.model_turns:
                for c in t.calls:
                    if (c.artifact_id not in self._used and c.name == tc.get("name") and c.reusable
                            and _canon(c.args) == _canon(tc.get("args"))):
                        self._used.add(c.artifact_id)
                        return c
        return None

    def _recorded_message(self, tc: dict, c: RecordedCall) -> ToolMessage:
        content = c.return_content or ""
        if c.return_id == self.plan.entry.id:
            content = sanitize(content, self.target)  # o_tau without z
        status = "error" if c.return_status == "error" else "success"
        return ToolMessage(content=content, tool_call_id=tc.get("id") or c.call_id, name=tc.get("name"),
                           status=status)

    def _decide(self, request) -> tuple[str, Any]:
        tc = request.tool_call
        effect = effect_of(request.tool)
        rec = self._match(tc)
        if rec is not None and not rec.reusable:
            # it never ran (blocked, deferred) or reported failure: nothing recorded to reuse or de-duplicate;
            # the counterfactual may meet the precondition the original call lacked
            rec = None
        if effect == "read":
            if rec is not None and rec.return_content is not None:
                return "record", self._recorded_message(tc, rec)
            return "execute", None
        if effect == "write":
            return "execute", None
        # external or undeclared: never fire during replay
        rec = rec if rec is not None and rec.return_id is not None else self._fired_identical(tc)
        if rec is not None:
            self.stats.deduplicated.append(SideEffect(
                tool=rec.name, args=rec.args, effect=effect, call_artifact_id=rec.artifact_id,
                result=rec.return_content, status="deduplicated"))
            return "record", self._recorded_message(tc, rec)
        if self.side_effects == "execute":
            return "execute_external", None
        status = "awaiting_approval" if self.side_effects == "ask" else "deferred"
        self.stats.deferred.append(SideEffect(tool=tc.get("name", ""), args=tc.get("args", {}), effect=effect,
                                              status=status))
        msg = not_executed(
            f"[unsee] {tc.get('name')} was not executed: external side effects are {status} during replay.",
            tc.get("id"), tc.get("name"), "replay")
        return "deferred", msg

    def tool_call(self, request, handler):
        what, msg = self._decide(request)
        if msg is not None:
            self.stats.tool_calls_from_record += what == "record"
            return msg
        self.stats.tool_calls_executed += 1
        return handler(request)

    async def atool_call(self, request, handler):
        what, msg = self._decide(request)
        if msg is not None:
            self.stats.tool_calls_from_record += what == "record"
            return msg
        self.stats.tool_calls_executed += 1
        return await handler(request)

    # -- after the run ----------------------------------------------------
    def orphaned(self) -> list[SideEffect]:
        """External calls the original world fired that the counterfactual did not make."""
        out = []
        for c in self.plan.fired_external():
            if c.artifact_id not in self._used:
                out.append(SideEffect(tool=c.name, args=c.args, effect=c.effect, call_artifact_id=c.artifact_id,
                                      result=c.return_content, status="orphaned"))
        return out
