"""LangChain 1.x ``create_agent`` adapter: the recording middleware.

``UnseeMiddleware`` maps agent events to the recorder: user inputs at
``before_agent``, model calls (with their prompt manifest, compactions
detected in the prompt) in ``wrap_model_call``, tool calls in
``wrap_tool_call``. Sync and async twins share the same pre/post code.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import uuid
from collections.abc import Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.types import Command
from opentelemetry import trace

from . import semconv as sc
from .context import current_session
from .discovery import find_agent
from .hashing import short_id
from .interception import acompose, compose
from .recorder import (ModelCallScope, Recorder, current_producer, current_scope, error_status, record_json,
                       session_attributes)
from .records import ArtifactType, CheckpointKind
from .run_guard import check_head
from .session_state import MESSAGE_TYPES, SessionState
from .tools import effect_of, was_executed

log = logging.getLogger("unsee.hooks")



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
    """The artifact id a state message stands for.

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


def provider_of(model: Any) -> tuple[str, str]:
    """(gen_ai.provider.name, model name) from LangChain's tracing params."""
    try:
        params = model._get_ls_params()
        return str(params.get("ls_provider") or "unknown"), str(params.get("ls_model_name") or type(model).__name__)
    except Exception:
        return "unknown", type(model).__name__


class UnseeMiddleware(AgentMiddleware):
    """Records every input, model call, tool call and compaction of an agent."""

    def __init__(self, recorder: Recorder):
        super().__init__()
        self.recorder = recorder

    @property
    def name(self) -> str:
        return "UnseeMiddleware"

    # -- before/after agent ----------------------------------------------
    def before_agent(self, state, runtime) -> dict[str, Any] | None:
        self._begin_turn(state)
        return None

    async def abefore_agent(self, state, runtime) -> dict[str, Any] | None:
        # in a worker thread: waiting for a lease must not hold the loop, and the head check
        # may call an async checkpointer's sync API (which refuses to run on its own loop)
        import asyncio

        await asyncio.to_thread(self._begin_turn, state)
        return None

    def after_agent(self, state, runtime) -> dict[str, Any] | None:
        self._end_turn()
        return None

    async def aafter_agent(self, state, runtime) -> dict[str, Any] | None:
        self._end_turn()
        return None

    def _begin_turn(self, state) -> None:
        sid, lg_ckpt = current_session()
        # Outside the observer's try: a run that cannot get its session (a forget holds it in
        # another process) or whose state a forget replaced must not go on.
        why = self.recorder.acquire_run(sid)
        if why is not None:
            try:
                self._check_head(sid, lg_ckpt, strict=why == "waited")
            except BaseException:
                self.recorder.release_run(sid)
                raise
        try:
            rec = self.recorder
            st = rec.state(sid)
            with st.lock:
                if st.root is not None:  # a previous run died before after_agent
                    st.root.set_attribute("unsee.run.abandoned", True)
                    st.root.end()
                    st.root = None
                    rec.mark_running(sid, False)  # its count (the session's lease is this run's now)
                st.turn += 1
                rec.mark_running(sid, True)
                if sid not in rec.agents:
                    agent = find_agent(self)
                    if agent is not None:
                        rec.learn_agent(sid, agent)
                st.root = rec.tracer.start_span(
                    f"{sc.OP_INVOKE_AGENT} agent",
                    attributes={
                        sc.GEN_AI_OPERATION: sc.OP_INVOKE_AGENT,
                        **session_attributes(st),
                        sc.TURN: st.turn,
                    },
                )
                kind = CheckpointKind.TURN if st.started else CheckpointKind.SESSION_START
                st.started = True
                rec.checkpoint(st, kind, langgraph_checkpoint_id=lg_ckpt, env=True)
                for m in state.get("messages", []):
                    self._record_message(st, m)
        except Exception as exc:
            self.recorder.fail(sid, exc)

    def _check_head(self, sid: str, lg_ckpt: str | None, strict: bool) -> None:
        agent = self.recorder.agents.get(sid) or find_agent(self)
        check_head(getattr(agent, "checkpointer", None), sid, lg_ckpt, strict=strict)

    def _end_turn(self, failed: BaseException | None = None) -> None:
        sid, _ = current_session()
        try:
            st = self.recorder.state(sid)
            with st.lock:
                if st.root is not None:
                    if failed is not None:
                        error_status(st.root, failed)
                    st.root.end()
                    st.root = None
        except Exception as exc:
            self.recorder.fail(sid, exc)
        finally:
            self.recorder.mark_running(sid, False)
            self.recorder.release_run(sid)

    def _record_message(self, st: SessionState, m: BaseMessage, current: set[str] = frozenset(),
                        history: Sequence[BaseMessage] = ()) -> str | None:
        """Record a state message not seen before; return its artifact id.

        ``history`` is the prompt it came in: a tool message we did not see
        executed is recorded with the model turn that made its call (valid or
        invalid) as its parent, so taint through the turn reaches it."""
        mapped = message_artifact(st.session_id, m)
        if mapped is None:
            return None
        aid, type_ = mapped
        if aid in st.known:
            return aid
        rec = self.recorder
        text = text_of(m)
        if type_ is ArtifactType.USER_INPUT:
            a = rec.artifact(st, type_, aid, text, source_ids=("user",), step=st.next_step(),
                             attrs={"message_id": m.id})
            rec.emit(st, "user_input", a)
        elif type_ is ArtifactType.SUMMARY:
            return self._record_compaction(st, m, aid, current)
        elif type_ is ArtifactType.TOOL_RETURN:
            # A tool message we did not see executed: the answer to an invalid or
            # cut-off call (LangChain adds an error ToolMessage for it), or one added by
            # other middleware or input. Its parent is the call when we recorded one,
            # else the model turn that made the call.
            call_aid = tool_call_artifact_id(st.session_id, m.tool_call_id or "")
            issuer = None if call_aid in st.known else tool_call_issuer(history, m.tool_call_id or "")
            if call_aid in st.known:
                parents: tuple[str, ...] = (call_aid,)
            elif issuer is not None and issuer in st.known:
                parents = (issuer,)
            else:
                parents = ()
            a = rec.artifact(st, type_, aid, text, parents=parents, source_ids=(f"tool:{m.name or 'unknown'}",),
                             step=st.next_step(), attrs={"tool_call_id": m.tool_call_id, "unobserved": True,
                                                         "status": getattr(m, "status", "success")})
            rec.emit(st, "tool_return", a)
        else:
            # A model message that did not come from a recorded call (given as input).
            a = rec.artifact(st, ArtifactType.MODEL_TURN, aid, text, source_ids=("input",),
                             attrs={"message_id": m.id, "unobserved": True})
            rec.emit(st, "model_turn", a)
        return aid

    def _record_compaction(self, st: SessionState, m: BaseMessage, aid: str, current: set[str]) -> str:
        """A summary message appeared: its parents are the live messages it replaced."""
        rec = self.recorder
        _, lg_ckpt = current_session()
        rec.checkpoint(st, CheckpointKind.COMPACTION, langgraph_checkpoint_id=lg_ckpt)
        replaced = [x for x in st.live if x not in current]
        a = rec.artifact(st, ArtifactType.SUMMARY, aid, text_of(m), parents=replaced,
                         source_ids=("summarization",), attrs={"message_id": m.id, "replaced": len(replaced)})
        span = rec.start_span(st, "summarize", a, {sc.GEN_AI_OPERATION: "summarize"})
        st.remember(a, span.get_span_context())
        span.end()
        for r in replaced:
            st.live.pop(r, None)
        return aid

    # -- shared plumbing of the sync and async wraps ------------------------
    def _intercepted(self, method: str, handler, is_async: bool):
        """``handler`` routed through the interceptors installed for this session."""
        chain = self.recorder.interceptors.chain(current_session()[0])
        if not chain:
            return handler
        if is_async:
            return lambda req: acompose(chain, method, req, handler)
        return lambda req: compose(chain, method, req, handler)

    @contextlib.contextmanager
    def _inside(self, call: dict[str, Any], var: contextvars.ContextVar, value: Any):
        """Run the operation inside its span (and context variable); end the span on failure."""
        token = var.set(value)
        # A run resumed after an interrupt (or going on after an outer retry caught an error)
        # skips before_agent: it takes its session's lease here.
        self.recorder.acquire_run(current_session()[0])
        try:
            with trace.use_span(call["span"], end_on_exit=False):
                yield
        except BaseException as exc:
            error_status(call["span"], exc)
            call["span"].end()
            # An error escaping a model or tool call ends the run (after_agent will not
            # run): close the turn so a forget does not wait for a run that is over.
            self._end_turn(failed=exc)
            raise
        finally:
            var.reset(token)

    # -- model calls ------------------------------------------------------
    def wrap_model_call(self, request, handler):
        handler = self._intercepted("model_call", handler, is_async=False)
        call = self._pre_model(request)
        if call is None:
            return handler(request)
        with self._inside(call, current_scope, call["scope"]):
            response = handler(request)
        return self._post_model(call, request, response)

    async def awrap_model_call(self, request, handler):
        handler = self._intercepted("model_call", handler, is_async=True)
        call = self._pre_model(request)
        if call is None:
            return await handler(request)
        with self._inside(call, current_scope, call["scope"]):
            response = await handler(request)
        return self._post_model(call, request, response)

    def _pre_model(self, request) -> dict[str, Any] | None:
        sid, _ = current_session()
        try:
            rec = self.recorder
            st = rec.state(sid, request.model)
            scope = current_scope.get() or ModelCallScope()
            with st.lock:
                manifest: list[str] = []
                if request.system_message is not None:
                    sys_text = text_of(request.system_message)
                    for _, block in scope.blocks:  # an outer memory middleware already injected
                        sys_text = sys_text.replace("\n\n" + block, "")
                    manifest.append(rec.ensure_system_prompt(st, sys_text))
                # The manifest is what the model sees; the live set is what the agent's state
                # holds. They differ when an outer middleware trims the model's view
                # (``request.override(messages=...)``): the state keeps what the view left out,
                # and a fork from a later checkpoint must keep it too.
                in_state = _state_messages(request)
                seen = {a for m in request.messages if (a := _artifact_id(sid, m))}
                state_ids = [_artifact_id(sid, m) for m in in_state]
                current = seen | {a for a in state_ids if a}
                for m, a in zip(in_state, state_ids):  # new in the state, hidden from the model (a summary)
                    if a not in seen:
                        self._record_message(st, m, current, in_state)
                for m in request.messages:
                    aid = self._record_message(st, m, current, request.messages)
                    if aid is not None:
                        manifest.append(aid)
                scope.prompt = tuple((a, st.hashes.get(a, "")) for a in manifest)
                shown = set(manifest)
                live = [a for a in state_ids if a and a not in shown and a in st.known] + manifest
                provider, model_name = provider_of(request.model)
                span = rec.start_span(
                    st,
                    f"{sc.OP_CHAT} {model_name}",
                    attributes={
                        sc.GEN_AI_OPERATION: sc.OP_CHAT,
                        sc.GEN_AI_PROVIDER: provider,
                        sc.GEN_AI_REQUEST_MODEL: model_name,
                    },
                )
                # Link what is new since the previous model call (and that call's turn,
                # which links the rest): links stay O(new inputs) in long threads while
                # the full manifest is on the unsee.artifact.parents attribute.
                prev = st.last_manifest
                rec.link(st, span, [a for a in manifest if a not in prev])
            return {"sid": sid, "st": st, "scope": scope, "span": span, "manifest": manifest, "live": live,
                    "model_name": model_name}
        except Exception as exc:
            self.recorder.fail(sid, exc)
            return None

    def _post_model(self, call, request, response):
        rec, st, span = self.recorder, call["st"], call["span"]
        try:
            ai = _ai_message_of(response)
            with st.lock:
                blocks = [aid for aid, _ in call["scope"].blocks]
                rec.link(st, span, blocks)
                manifest = list(call["manifest"]) + blocks
                if ai is None:
                    span.end()
                    return response
                if ai.id is None:
                    ai.id = f"lc_unsee-{uuid.uuid4()}"
                meta = (ai.response_metadata or {}).get("unsee") or {}
                if meta.get("cache_handle"):
                    st.cache_handle = str(meta["cache_handle"])
                    st.cache_offset = int(meta.get("offset_end", 0)) or None
                mt_id = short_id("mt", ai.id)
                calls = list(ai.tool_calls or [])
                invalid = list(ai.invalid_tool_calls or [])
                body = text_of(ai)
                record = body
                if calls:
                    record += "\n" + record_json([{"name": c["name"], "args": c["args"]} for c in calls])
                if invalid:  # what the model wrote is in the turn, even when it is not a valid call
                    record += "\n" + record_json([{"name": c.get("name"), "args": c.get("args")} for c in invalid])
                attrs = {"message_id": ai.id, "tool_calls": len(calls)}
                if invalid:
                    attrs["invalid_tool_calls"] = len(invalid)
                mt = rec.artifact(st, ArtifactType.MODEL_TURN, mt_id, record, parents=manifest,
                                  source_ids=("model:" + call["model_name"],), attrs=attrs)
                usage = ai.usage_metadata or {}
                span.set_attributes({
                    sc.GEN_AI_RESPONSE_ID: ai.id,
                    sc.GEN_AI_INPUT_TOKENS: int(usage.get("input_tokens", 0)),
                    sc.GEN_AI_OUTPUT_TOKENS: int(usage.get("output_tokens", mt.token_span[1] - mt.token_span[0])),
                    sc.GEN_AI_FINISH_REASONS: ["tool_calls" if calls else "stop"],
                })
                rec.set_primary(st, span, mt)
                if body:
                    kind = ArtifactType.PLAN if calls else ArtifactType.REPLY
                    part = rec.artifact(st, kind, short_id(kind.value[:4], ai.id), body,
                                        parents=(mt_id,), count_tokens=False)
                    rec.add_artifact_event(st, span, part)
                tools_by_name = {getattr(t, "name", None): t for t in request.tools or []}
                for c in calls:
                    cid = tool_call_artifact_id(st.session_id, c.get("id") or "")
                    ret_step = st.next_step()
                    st.return_steps[cid] = ret_step
                    tc = rec.artifact(
                        st, ArtifactType.TOOL_CALL, cid, record_json({"name": c["name"], "args": c["args"]}),
                        parents=(mt_id,), committed=False, count_tokens=False,
                        attrs={"tool": c["name"], "call_id": c.get("id"), "return_step": ret_step,
                               "effect": effect_of(tools_by_name.get(c["name"]))},
                    )
                    rec.add_artifact_event(st, span, tc)
                st.live = {k: None for k in call["live"] + blocks if st.types.get(k) in MESSAGE_TYPES}
                st.live[mt_id] = None
                st.last_manifest = frozenset(manifest)
            span.end()
        except Exception as exc:
            rec.fail_span(st.session_id, span, exc)
        return response

    # -- tool calls -------------------------------------------------------
    def wrap_tool_call(self, request, handler):
        handler = self._intercepted("tool_call", handler, is_async=False)
        call = self._pre_tool(request)
        if call is None:
            return handler(request)
        with self._inside(call, current_producer, (call["sid"], call["cid"])):
            result = handler(request)
        return self._post_tool(call, result)

    async def awrap_tool_call(self, request, handler):
        handler = self._intercepted("tool_call", handler, is_async=True)
        call = self._pre_tool(request)
        if call is None:
            return await handler(request)
        with self._inside(call, current_producer, (call["sid"], call["cid"])):
            result = await handler(request)
        return self._post_tool(call, result)

    def _pre_tool(self, request) -> dict[str, Any] | None:
        sid, lg_ckpt = current_session()
        try:
            rec = self.recorder
            st = rec.state(sid)
            tc = request.tool_call
            name = tc.get("name", "unknown")
            cid = tool_call_artifact_id(sid, tc.get("id") or "")
            effect = effect_of(request.tool)
            with st.lock:
                step = st.return_steps.pop(cid, None)
                if step is None:
                    step = st.next_step()
                if effect != "read":
                    # Consequential (write/external/undeclared): a splice point before it.
                    rec.checkpoint(st, CheckpointKind.TOOL_CALL, step=step, langgraph_checkpoint_id=lg_ckpt,
                                   env=True)
                attrs = {
                    sc.GEN_AI_OPERATION: sc.OP_EXECUTE_TOOL,
                    sc.GEN_AI_TOOL_NAME: name,
                    sc.GEN_AI_TOOL_CALL_ID: tc.get("id") or "",
                    sc.GEN_AI_TOOL_TYPE: "function",
                    sc.EFFECT: effect or "undeclared",
                }
                span = rec.start_span(st, f"{sc.OP_EXECUTE_TOOL} {name}", attributes=attrs)
                rec.link(st, span, [cid])
            return {"sid": sid, "st": st, "cid": cid, "name": name, "step": step, "effect": effect,
                    "span": span, "call_id": tc.get("id")}
        except Exception as exc:
            self.recorder.fail(sid, exc)
            return None

    def _post_tool(self, call, result):
        rec, st, span = self.recorder, call["st"], call["span"]
        try:
            msg = _tool_message_of(result)
            text = text_of(msg) if msg is not None else ""
            with st.lock:
                aid = tool_return_artifact_id(call["call_id"] or "")
                a = rec.artifact(
                    st, ArtifactType.TOOL_RETURN, aid, text, parents=(call["cid"],),
                    source_ids=(f"tool:{call['name']}",), step=call["step"],
                    attrs={"tool": call["name"], "call_id": call["call_id"], "effect": call["effect"],
                           "status": getattr(msg, "status", "success") if msg is not None else "command",
                           "executed": was_executed(msg)},
                )
                span.set_attribute(sc.COMMITS, [call["cid"]])
                rec.set_primary(st, span, a)
            span.end()
        except Exception as exc:
            rec.fail_span(st.session_id, span, exc)
        return result



def _ai_message_of(response: Any) -> AIMessage | None:
    if isinstance(response, AIMessage):
        return response
    inner = getattr(response, "model_response", None)  # ExtendedModelResponse
    if inner is not None:
        response = inner
    for m in reversed(getattr(response, "result", None) or []):
        if isinstance(m, AIMessage):
            return m
    return None


def _tool_message_of(result: Any) -> ToolMessage | None:
    if isinstance(result, ToolMessage):
        return result
    if isinstance(result, Command):
        update = result.update or {}
        msgs = update.get("messages", []) if isinstance(update, dict) else []
        for m in msgs:
            if isinstance(m, ToolMessage):
                return m
    return None


def _artifact_id(session_id: str, message: BaseMessage) -> str | None:
    mapped = message_artifact(session_id, message)
    return mapped[0] if mapped is not None else None


def _state_messages(request: Any) -> Sequence[BaseMessage]:
    """The messages of the agent's state a model request was made from (its own messages when
    the request carries no state)."""
    state = getattr(request, "state", None)
    msgs = state.get("messages") if isinstance(state, dict) else None
    return msgs if isinstance(msgs, list) else request.messages
