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
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.types import Command
from opentelemetry import trace

from . import semconv as sc
from .context import configurable, current_session, enclosing_graph, outer_run_id
from .discovery import find_agent, find_thread_graph
from .fork_memory import replaying
from .hashing import short_id
from .interception import acompose, compose
from .messages import (ai_message_of, message_artifact, same_messages, state_messages, text_of,  # noqa: F401
                       tool_call_artifact_id, tool_call_issuer, tool_message_of, tool_return_artifact_id)
from .recorder import (ModelCallScope, Recorder, current_producer, current_scope, error_status, record_json,
                       session_attributes)
from .records import ArtifactType, CheckpointKind
from .run_end import node_run_id, run_end_watcher
from .run_inputs import payload_of, payload_text, run_inputs
from .run_guard import check_head
from .session_state import SessionState
from . import state_flow
from .harness import register_graph
from .messages import command_keys
from .tools import effect_of, idempotent, was_executed

log = logging.getLogger("unsee.hooks")



def provider_of(model: Any) -> tuple[str, str]:
    """(gen_ai.provider.name, model name) from LangChain's tracing params."""
    try:
        params = model._get_ls_params()
        return str(params.get("ls_provider") or "unknown"), str(params.get("ls_model_name") or type(model).__name__)
    except Exception:
        return "unknown", type(model).__name__


#: the name a compiled graph has when the application gave none (``create_agent(name=None)``)
_DEFAULT_GRAPH_NAME = "LangGraph"


def agent_name_of(agent: Any) -> str | None:
    """``gen_ai.agent.name``: the name the application gave its agent (``create_agent(name=...)``),
    None when it gave none."""
    name = getattr(agent, "name", None)
    return name if isinstance(name, str) and name and name != _DEFAULT_GRAPH_NAME else None


@dataclass
class _RunStart:
    """What the steps of a run's start (``UnseeMiddleware._begin_turn``) share."""

    sid: str
    lg_ckpt: str | None
    state: Any
    runtime: Any
    st: SessionState = None  # type: ignore[assignment]  # (set once the run holds its lease)
    #: the enclosing graph's namespace (None: the run is not nested in another graph)
    ns: Any = None
    #: a later agent of the outer run that began this turn (no new turn, no checkpoint)
    same_run: bool = False
    #: the session's first run
    first: bool = False
    msgs: Sequence[BaseMessage] = ()
    #: the state's messages' artifact ids, the positions of those not recorded yet, and what
    #: ``MessageIds.settle`` takes once they are
    ids: list[str | None] = field(default_factory=list)
    new: list[int] = field(default_factory=list)
    fresh: list = field(default_factory=list)
    #: the artifacts the run's state starts with, when it lost messages the session had live
    fork: list[str] | None = None
    #: a session's first run starting from state recorded in another thread
    thread_fork: list[str] | None = None


class UnseeMiddleware(AgentMiddleware):
    """Records every input, model call, tool call and compaction of an agent."""

    def __init__(self, recorder: Recorder):
        super().__init__()
        self.recorder = recorder
        # installed now, before any run's callback manager is configured: a run configured
        # before the watcher existed would never tell its end
        self._run_end = run_end_watcher()

    @property
    def name(self) -> str:
        return "UnseeMiddleware"

    # -- before/after agent ----------------------------------------------
    def before_agent(self, state, runtime) -> dict[str, Any] | None:
        self._begin_turn(state, runtime)
        return None

    async def abefore_agent(self, state, runtime) -> dict[str, Any] | None:
        # in a worker thread: waiting for a lease must not hold the loop, and the head check
        # may call an async checkpointer's sync API (which refuses to run on its own loop)
        import asyncio

        await asyncio.to_thread(self._begin_turn, state, runtime)
        return None

    # No after_agent hook: it would be a graph node, a superstep in every run. The run's end
    # comes from LangChain's callback on the graph's run (``run_end``), after its last checkpoint.

    def _watch_end(self, st: SessionState) -> None:
        """Have the run's end (the graph run's, from its callbacks) end the turn; once per run."""
        if st.watched:
            return
        node = node_run_id()
        if node is None:
            return  # outside a graph or without callbacks: the next run's start closes this one
        st.watched = True
        sid = st.session_id
        self._run_end.watch(node, lambda error: self._end_turn(failed=error, session_id=sid))

    def _begin_turn(self, state, runtime=None) -> None:
        """A run starts (``before_agent``): the steps of its start, in order, on one :class:`_RunStart`."""
        sid, lg_ckpt = current_session()
        start = _RunStart(sid, lg_ckpt, state, runtime)
        # Outside the observer's try: a run that cannot get its session (a forget holds it in
        # another process) or whose state a forget replaced must not go on.
        self._take_run_lease(start)
        try:
            start.st = self.recorder.state(sid)
            with start.st.lock:
                if self._joins_recording_run(start):
                    return
                for step in self._RUN_START_STEPS:
                    step(self, start)
        except Exception as exc:
            self.recorder.fail(sid, exc)
        self._follow_fork(start)

    def _take_run_lease(self, start: _RunStart) -> None:
        """The session's run lease; the state the run loaded is checked against the thread's
        head when a forget overlapped or just ended (the lease goes back if that fails)."""
        why = self.recorder.run_leases.acquire(start.sid)
        if why is not None:
            try:
                self._check_head(start.sid, start.lg_ckpt, strict=why == "waited")
            except BaseException:
                self.recorder.run_leases.release(start.sid)
                raise

    def _joins_recording_run(self, start: _RunStart) -> bool:
        """Whether the run is nested in a run of this thread that is recording now (a subagent a
        tool invokes): a part of that run's turn, its input derived from the call that started
        it; no turn, span, checkpoint or end of its own. (An open run whose end is not watched
        and that no call of is executing may be one whose end was never seen: it is closed by
        :meth:`_close_abandoned_run` instead.)"""
        st = start.st
        start.ns = enclosing_graph()
        producer = current_producer.get()
        if start.ns is not None and st.root is not None and (st.watched or (producer or ("",))[0] == start.sid):
            self._nested_inputs(st, start.state.get("messages", []))
            return True
        return False

    def _join_outer_run(self, start: _RunStart) -> None:
        """A nested run whose outer graph records nothing itself (a StateGraph node, a swarm
        agent, a supervisor's worker) begins the outer run's turn; a later one of the same
        outer run (the agent a handoff went to) goes on in that turn (``same_run``)."""
        st = start.st
        outer = outer_run_id() if start.ns is not None else None
        start.same_run = outer is not None and outer == st.outer_run and st.started
        if start.ns is not None:
            st.outer_run = outer

    def _close_abandoned_run(self, start: _RunStart) -> None:
        """A previous run whose end was never seen (no callbacks): its span ends, marked abandoned."""
        st, rec = start.st, self.recorder
        if st.root is None:
            return
        rec.settle_events(st, st.root)
        rec.run_tasks()  # (its spans end before it does)
        st.root.set_attribute("unsee.run.abandoned", True)
        st.root.end()
        st.root = None
        st.watched = False
        rec.activity.mark_running(start.sid, False)  # its count (the session's lease is this run's now)

    def _count_turn(self, start: _RunStart) -> None:
        if not start.same_run:
            start.st.turn += 1

    def _learn_agent(self, start: _RunStart) -> None:
        """The compiled agent that runs the session, found once (a run nested in another graph:
        that graph owns the thread)."""
        rec = self.recorder
        if start.sid not in rec.agents:
            agent = find_thread_graph(self) if enclosing_graph() is not None else find_agent(self)
            if agent is not None:
                rec.agents.learn(start.sid, agent)

    def _open_run_span(self, start: _RunStart) -> None:
        """The run's ``invoke_agent`` span; the run counts as running until its end closes it."""
        st, rec = start.st, self.recorder
        agent_name = agent_name_of(rec.agents.get(start.sid))
        attrs = {sc.GEN_AI_OPERATION: sc.OP_INVOKE_AGENT, **session_attributes(st), sc.TURN: st.turn}
        if agent_name:
            attrs[sc.GEN_AI_AGENT_NAME] = agent_name
        if st.provider:
            attrs[sc.GEN_AI_PROVIDER] = st.provider
        # (the conventions: ``invoke_agent {gen_ai.agent.name}``, ``invoke_agent`` without one)
        st.root = rec.tracer.start_span(
            f"{sc.OP_INVOKE_AGENT} {agent_name}" if agent_name else sc.OP_INVOKE_AGENT, attributes=attrs)
        rec.activity.mark_running(start.sid, True)  # (a run whose span is open: its end unmarks it)
        self._watch_end(st)

    def _checkpoint_turn(self, start: _RunStart) -> None:
        """The turn's checkpoint (the session's start for its first run): a splice point is where
        the thread's own graph takes input, so a later agent of the same outer run adds none."""
        st = start.st
        start.first = not st.started
        kind = CheckpointKind.TURN if st.started else CheckpointKind.SESSION_START
        st.started = True
        if not start.same_run:
            self.recorder.checkpoint_later(st, kind, langgraph_checkpoint_id=start.lg_ckpt, env=True)

    def _find_fork(self, start: _RunStart) -> None:
        """Whether the run's state starts a new branch: it lost messages the session had live
        (``fork``: the artifacts it starts with), or it is a new thread whose state already holds
        model turns, perhaps copied from another's (``thread_fork``). Not in a forget's replay."""
        st, forks = start.st, self.recorder.forks
        msgs = start.state.get("messages", [])
        start.msgs = msgs
        start.ids, start.new, start.fresh = st.message_ids.of(msgs, st.known)
        if forks is None or replaying(start.sid, configurable()):
            return
        if forks.abandoned(st.live, start.ids):
            start.fork = [i for i in start.ids if i is not None and i in st.known]  # (before the new input)
        elif start.first and any(isinstance(m, (AIMessage, ToolMessage)) for m in msgs):
            start.thread_fork = [i for i in start.ids if i is not None]

    def _record_run_start_input(self, start: _RunStart) -> None:
        """The messages not recorded yet (the new input), then what the run was given."""
        st = start.st
        for i in start.new:
            self._record_message(st, start.msgs[i])
        st.message_ids.settle(start.msgs, start.ids, start.fresh)
        self._record_run_input(st, start.msgs)

    #: what a run's start does once it has its lease and is not part of a recording run, in order
    _RUN_START_STEPS = (_join_outer_run, _close_abandoned_run, _count_turn, _learn_agent, _open_run_span,
                        _checkpoint_turn, _find_fork, _record_run_start_input)

    def _follow_fork(self, start: _RunStart) -> None:
        """Outside the session's lock: the fork policy for a branch the run starts (``_on_fork``)."""
        if start.fork is not None:
            self._on_fork(start.sid, start.fork, start.lg_ckpt, start.runtime)
        elif start.thread_fork is not None:
            self._on_fork(start.sid, start.thread_fork, start.lg_ckpt, start.runtime, thread=True)

    def _nested_inputs(self, st: SessionState, msgs: Sequence[BaseMessage]) -> None:
        """Record the messages a nested run starts with that the session has not seen: its input,
        made by the outer call now executing (``current_producer``: the tool call that invoked
        it), is a ``NESTED_INPUT`` child of that call, never a user turn. (Lock held.)"""
        ids, new, fresh = st.message_ids.of(msgs, st.known)
        producer = current_producer.get()
        parent = producer[1] if producer is not None and producer[0] == st.session_id else None
        for i in new:
            self._record_message(st, msgs[i], history=msgs, nested_in=parent or "")
        st.message_ids.settle(msgs, ids, fresh)

    def _record_run_input(self, st: SessionState, state_messages: Sequence[BaseMessage] = ()) -> None:
        """Record what the graph's current run was given (``run_inputs``), once per run: a
        ``run_input`` artifact whose messages refer to their recorded user inputs. Its id is the
        recorded one a forget's replay gives again (``REPLAYED_INPUT``), else the run's.
        ``state_messages``: the run's state, whose latest user inputs stand for input messages
        that reached the state as copies (a ``Command``'s update: no id on the given object)."""
        taken = run_inputs().take(st.session_id)
        if not taken:
            return
        sid = st.session_id
        recent: dict[str, list[str]] | None = None  # (built only for a copy: a rare case)

        def ref(m: BaseMessage) -> str | None:
            nonlocal recent
            mapped = message_artifact(sid, m)
            if mapped and mapped[1] is ArtifactType.USER_INPUT and mapped[0] in st.known:
                return mapped[0]
            if m.type != "human":
                return None
            if recent is None:  # a copy with an id of its own: its latest recorded twin in the state
                recent = {}
                for s_m in state_messages[-64:]:  # (the run's input is at the end of the state)
                    got = message_artifact(sid, s_m)
                    if got and got[1] is ArtifactType.USER_INPUT and got[0] in st.known:
                        recent.setdefault(text_of(s_m), []).append(got[0])
            found = recent.get(text_of(m))
            return found.pop(0) if found else None

        for given in taken:
            payload = payload_of(given.value, ref, given.answers)
            aid = str(given.replayed_id or short_id("run", sid, str(given.run_id)))
            a = self.recorder.record(st, ArtifactType.RUN_INPUT, aid, payload_text(payload),
                                     source_ids=("human" if "resume" in payload else "user",), step=st.step,
                                     count_tokens=False, attrs=_run_facts({"kind": payload["kind"]}))
            self.recorder.emit_later(st, "run_input", a)

    def _on_fork(self, sid: str, branch: list[str], lg_ckpt: str | None, runtime, thread: bool = False) -> None:
        """The run starts a new branch: the session's fork policy for the memory the abandoned
        branch wrote (``fork_watch``); ``thread``: the branch was forked from another thread's
        state (its writes are only reported). A rollback that cannot finish ends the run."""
        rec = self.recorder
        st = rec.state(sid)
        stores = (getattr(runtime, "store", None), getattr(rec.agents.get(sid), "store", None))
        try:
            if thread:
                found = rec.forks.on_thread_fork(st, branch, stores, turn=st.turn, checkpoint=lg_ckpt)
            else:
                found = rec.forks.on_fork(st, branch, stores, turn=st.turn, checkpoint=lg_ckpt)
        except BaseException as exc:
            self._end_turn(failed=exc)
            raise
        with st.lock:
            rec.forks.report(st.root, found, rec.forks.policy(sid))

    def _check_head(self, sid: str, lg_ckpt: str | None, strict: bool) -> None:
        agent = self.recorder.agents.get(sid) or find_agent(self)
        check_head(getattr(agent, "checkpointer", None), sid, lg_ckpt, strict=strict)

    def _end_turn(self, failed: BaseException | None = None, session_id: str | None = None) -> None:
        """The run is over (the graph's run ended, or an error escaped a model or tool call). It
        returns without waiting for its records: the store's writer finishes the queued work
        (span ends included) and writes it within milliseconds, then gives the run lease back.
        Every reader flushes first (read-your-writes). A second call for the same run (the
        graph's end after an escaped error) only gives back what the first did not."""
        sid = session_id if session_id is not None else current_session()[0]
        rec = self.recorder
        try:
            st = rec.state(sid)
            with st.lock:
                st.watched = False
                st.message_ids.release()
                root, st.root = st.root, None
                rec.settle_events(st, root)  # (records no operation span took: onto the run's span)
            if root is not None:
                if failed is not None:
                    error_status(root, failed)
                rec.end_later(st, root)  # (after the run's other spans: tasks run in order)
                rec.activity.mark_running(sid, False)
        except Exception as exc:
            rec.fail(sid, exc)
        finally:
            rec.run_leases.release(sid)  # (by the writer, once the run's records are written)
            # the writer writes the run's records now, unless the next run is already on its way
            # (it looks after a moment: ``store_writer``)
            rec.store.kick(write=True)

    def _record_message(self, st: SessionState, m: BaseMessage, current: set[str] = frozenset(),
                        history: Sequence[BaseMessage] = (), nested_in: str | None = None) -> str | None:
        """Record a state message not seen before; return its artifact id.

        ``history`` is the prompt it came in: a tool message we did not see
        executed is recorded with the model turn that made its call (valid or
        invalid) as its parent, so taint through the turn reaches it.
        ``nested_in``: the message starts a run nested in a recording run of the thread (the
        artifact id of the call that started it, "" when none is known): a human message
        there is that run's input (``NESTED_INPUT``), not the user's."""
        mapped = message_artifact(st.session_id, m)
        if mapped is None:
            return None
        aid, type_ = mapped
        if aid in st.known:
            return aid
        rec = self.recorder
        text = text_of(m)
        if type_ is ArtifactType.USER_INPUT and nested_in is not None:
            a = rec.record(st, ArtifactType.NESTED_INPUT, aid, text, parents=(nested_in,) if nested_in else (),
                           source_ids=("run:" + (enclosing_graph() or ""),),
                           attrs=_run_facts({"message_id": m.id}))
            rec.emit_later(st, "nested_input", a)
        elif type_ is ArtifactType.USER_INPUT:
            a = rec.record(st, type_, aid, text, source_ids=("user",), step=st.next_step(),
                           attrs=_run_facts({"message_id": m.id}))
            rec.emit_later(st, "user_input", a)
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
            a = rec.record(st, type_, aid, text, parents=parents, source_ids=(f"tool:{m.name or 'unknown'}",),
                           step=st.next_step(), attrs={"tool_call_id": m.tool_call_id, "unobserved": True,
                                                       "status": getattr(m, "status", "success")})
            rec.emit_later(st, "tool_return", a)
        else:
            # A model message that did not come from a recorded call (given as input).
            a = rec.record(st, ArtifactType.MODEL_TURN, aid, text, source_ids=("input",),
                           attrs={"message_id": m.id, "unobserved": True})
            rec.emit_later(st, "model_turn", a)
        return aid

    def _record_compaction(self, st: SessionState, m: BaseMessage, aid: str, current: set[str]) -> str:
        """A summary message appeared: its parents are the live messages it replaced."""
        rec = self.recorder
        _, lg_ckpt = current_session()
        rec.checkpoint_later(st, CheckpointKind.COMPACTION, langgraph_checkpoint_id=lg_ckpt)
        replaced = [x for x in st.live if x not in current]
        a = rec.record(st, ArtifactType.SUMMARY, aid, text_of(m), parents=replaced,
                       source_ids=("summarization",), attrs={"message_id": m.id, "replaced": len(replaced)})
        rec.emit_later(st, "summarize", a, {sc.GEN_AI_OPERATION: "summarize"})
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
        rec, st = self.recorder, call["st"]
        rec.run_leases.acquire(call["sid"])
        self._watch_end(st)  # (a resumed run's: its end gives the lease back)
        rec.activity.hand_over_backlog()
        began = rec.activity.call_began(var)  # (one waiting-time estimate per kind of call: model, tool)
        if rec.tasks and rec.activity.worth_waking(var):
            rec.store.kick()  # the agent waits on the call now: the queued work is done meanwhile
        try:
            with trace.use_span(call["span"], end_on_exit=False):
                yield
        except BaseException as exc:
            rec.activity.call_ended(var, began)
            rec.run_tasks()  # (what is queued for the span first)
            error_status(call["span"], exc)
            call["span"].end()
            # The graph's end (its callback) ends the turn: an outer retry may still catch the
            # error and go on. Without that callback, an escaping error ends the turn now, so a
            # forget does not wait for a run that is over.
            if not st.watched:
                self._end_turn(failed=exc)
            raise
        else:
            rec.activity.call_ended(var, began)
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
                # Each message is mapped once per session (MessageIds) and only the ones not
                # recorded yet are visited: O(new messages) Python work per call, not O(history).
                msgs, in_state = request.messages, state_messages(request)
                req_ids, new, fresh = st.message_ids.of(msgs, st.known)
                same = same_messages(in_state, msgs)
                state_ids, hidden_new, state_fresh = (req_ids, (), ()) if same else st.message_ids.of(in_state,
                                                                                                     st.known)
                if new or hidden_new:
                    seen = set(req_ids)
                    seen.discard(None)
                    current = seen.union(state_ids)
                    current.discard(None)
                    for i in hidden_new:  # new in the state, hidden from the model (a summary)
                        if state_ids[i] not in seen:
                            self._record_message(st, in_state[i], current, in_state)
                    for i in new:
                        self._record_message(st, msgs[i], current, msgs)
                if not same:
                    st.message_ids.settle(None, state_ids, state_fresh)
                st.message_ids.settle(msgs, req_ids, fresh)
                if st.root is None:  # a run that skipped before_agent (resumed): its input now
                    self._record_run_input(st, in_state)
                manifest.extend(filter(None, req_ids))
                scope.prompt_from(manifest, st.hashes)
                if same:  # every state message is in the prompt
                    live = manifest
                else:
                    shown = set(manifest)
                    live = [a for a in state_ids if a and a not in shown and a in st.known] + manifest
                provider, model_name = provider_of(request.model)
                if st.provider != provider:  # (the run's agent span: provider.name is required there)
                    st.provider = provider
                    if st.root is not None:
                        st.root.set_attribute(sc.GEN_AI_PROVIDER, provider)
                span = rec.open_span(
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
                rec.link_later(st, span, st.new_in(manifest))
            return {"sid": sid, "st": st, "scope": scope, "span": span, "manifest": manifest, "live": live,
                    "model_name": model_name, "resumed": _resumed(st)}
        except Exception as exc:
            self.recorder.fail(sid, exc)
            return None

    def _post_model(self, call, request, response):
        rec, st, span = self.recorder, call["st"], call["span"]
        try:
            ai = ai_message_of(response)
            with st.lock:
                blocks = [aid for aid, _ in call["scope"].blocks]
                rec.link_later(st, span, blocks)
                manifest = list(call["manifest"]) + blocks
                if ai is None:
                    rec.end_later(st, span)
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
                # each call's JSON once: the turn's list of them is the same text, joined
                call_json = [record_json({"name": c["name"], "args": c["args"]}) for c in calls]
                if calls:
                    record += "\n[" + ", ".join(call_json) + "]"
                if invalid:  # what the model wrote is in the turn, even when it is not a valid call
                    record += "\n" + record_json([{"name": c.get("name"), "args": c.get("args")} for c in invalid])
                attrs = _run_facts({"message_id": ai.id, "tool_calls": len(calls)}, call["resumed"])
                if meta.get("numerics"):  # what the local model's logits depend on (a replay compares it)
                    attrs["numerics"] = str(meta["numerics"])
                if invalid:
                    attrs["invalid_tool_calls"] = len(invalid)
                distinct = st.set_manifest(manifest)  # (the next call links what is new since)
                # stored as what it changed in an earlier turn's (context_delta): O(new) a turn
                parents, ref = st.turn_contexts.encode(mt_id, manifest if distinct else list(dict.fromkeys(manifest)))
                mt = rec.record(st, ArtifactType.MODEL_TURN, mt_id, record, parents=parents, distinct=True,
                                context=ref, source_ids=("model:" + call["model_name"],), attrs=attrs)
                if ref is not None:  # (the span that holds the base: a reader of this one follows it)
                    rec.link_later(st, span, (ref.base,))
                _note_nested_result(st, mt_id)
                rec.set_attributes_later(st, span, _chat_attributes(ai, bool(calls), mt))
                rec.set_primary_later(st, span, mt)
                if body:
                    kind = ArtifactType.PLAN if calls else ArtifactType.REPLY
                    part = rec.record(st, kind, short_id(kind.value[:4], ai.id), body,
                                      parents=(mt_id,), count_tokens=False)
                    rec.add_artifact_event_later(st, span, part)
                tools_by_name = {getattr(t, "name", None): t for t in request.tools or []}
                for c, text in zip(calls, call_json):
                    cid = tool_call_artifact_id(st.session_id, c.get("id") or "")
                    ret_step = st.next_step()
                    st.return_steps[cid] = ret_step
                    tc = rec.record(
                        st, ArtifactType.TOOL_CALL, cid, text, parents=(mt_id,), committed=False, count_tokens=False,
                        attrs={"tool": c["name"], "call_id": c.get("id"), "return_step": ret_step,
                               "effect": self._effect(tools_by_name.get(c["name"]))},
                    )
                    rec.add_artifact_event_later(st, span, tc)
                st.live = dict.fromkeys(filter(st.message_artifacts.__contains__, chain(call["live"], blocks)))
                st.live[mt_id] = None
            rec.end_later(st, span)
            if not calls:  # the run's last turn, most likely: its records are written as the run ends
                rec.store.kick(write=True)
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

    def _effect(self, tool: Any) -> str | None:
        """A tool's effect (``tools.effect_of``), once the tools this middleware's agent gets from
        its other middleware are known (looked up once: ``harness``)."""
        if not getattr(self, "_harness_known", False):
            self._harness_known = True
            register_graph(find_agent(self))
        return effect_of(tool)

    def _pre_tool(self, request) -> dict[str, Any] | None:
        sid, lg_ckpt = current_session()
        try:
            rec = self.recorder
            st = rec.state(sid)
            tc = request.tool_call
            name = tc.get("name", "unknown")
            cid = tool_call_artifact_id(sid, tc.get("id") or "")
            effect = self._effect(request.tool)
            with st.lock:
                if st.root is None:  # a run that skipped before_agent (resumed): its input now
                    self._record_run_input(st)
                step = st.return_steps.pop(cid, None)
                if step is None:
                    step = st.next_step()
                if effect != "read" and enclosing_graph() is None:
                    # Consequential (write/external/undeclared): a splice point before it (not in
                    # a nested run: the thread's own graph is forked at its own checkpoints only).
                    rec.checkpoint_later(st, CheckpointKind.TOOL_CALL, step=step, langgraph_checkpoint_id=lg_ckpt,
                                         env=True)
                attrs = {
                    sc.GEN_AI_OPERATION: sc.OP_EXECUTE_TOOL,
                    sc.GEN_AI_TOOL_NAME: name,
                    sc.GEN_AI_TOOL_CALL_ID: tc.get("id") or "",
                    sc.GEN_AI_TOOL_TYPE: "function",
                    sc.EFFECT: effect or "undeclared",
                }
                span = rec.open_span(st, f"{sc.OP_EXECUTE_TOOL} {name}", attributes=attrs)
                rec.link_later(st, span, [cid])
            if tc.get("id"):
                self._run_end.expect_tool(tc["id"])  # (did its tool run, or a middleware answer it?)
            return {"sid": sid, "st": st, "cid": cid, "name": name, "step": step, "effect": effect,
                    "span": span, "call_id": tc.get("id"), "resumed": _resumed(st),
                    "idempotent": idempotent(request.tool), "sent": state_flow.mark()}
        except Exception as exc:
            self.recorder.fail(sid, exc)
            return None

    def _post_tool(self, call, result):
        rec, st, span = self.recorder, call["st"], call["span"]
        try:
            msg = tool_message_of(result, call["call_id"])  # (a Command's update: this call's answer)
            text = text_of(msg) if msg is not None else ""
            with st.lock:
                aid = tool_return_artifact_id(call["call_id"] or "")
                # a run nested in the call (a subagent it invoked): its result is the return's parent too
                nested = st.nested_results.pop(call["cid"], None)
                parents = state_flow.return_parents(rec, st, call, text)  # (the call, state it read back)
                a = rec.record(
                    st, ArtifactType.TOOL_RETURN, aid, text, parents=(*parents, nested) if nested else parents,
                    source_ids=(f"tool:{call['name']}",), step=call["step"],
                    attrs=_run_facts({"tool": call["name"], "call_id": call["call_id"], "effect": call["effect"],
                                      "status": getattr(msg, "status", "success") if msg is not None else "command",
                                      "executed": _executed(self._run_end, call["call_id"], msg),
                                      **_return_facts(call, result)},
                                     call["resumed"]),
                )
                rec.set_attributes_later(st, span, {sc.COMMITS: [call["cid"]]})
                rec.set_primary_later(st, span, a)
                state_flow.record_tool_writes(rec, st, call, result, aid)  # state keys besides messages it wrote
            rec.end_later(st, span)
        except Exception as exc:
            rec.fail_span(st.session_id, span, exc)
        return result


def _executed(watcher: Any, call_id: str | None, msg: Any) -> bool:
    """Whether the call's tool ran: not when unsee answered it without running it
    (``not_executed``), nor when a middleware inside unsee's answered it with an error and the
    tool never started (a classifier's block, a limit). An answer that is not an error counts as
    run even without its start seen (a tool run some other way): never taken for unfired."""
    started = watcher.tool_started(call_id) if call_id else False
    if not was_executed(msg):
        return False
    return started or getattr(msg, "status", "success") != "error"


def _return_facts(call: dict[str, Any], result: Any) -> dict[str, Any]:
    """What a replay must know of how a tool answered: ``command`` (it returned a LangGraph
    ``Command``: a state effect, run again by a replay) and the state keys its update writes
    (``update_keys``); ``idempotent`` (the tool says so: an MCP ``idempotentHint``)."""
    out: dict[str, Any] = {}
    if isinstance(result, Command):
        out["command"] = True
        out["update_keys"] = command_keys(result)
    if call.get("idempotent"):
        out["idempotent"] = True
    return out


def _note_nested_result(st: SessionState, mt_id: str) -> None:
    """A model turn of a run nested in a recorded tool call (``current_producer``) is, until a
    later one, that run's result: the call's return gets it as a parent. (Lock held.)"""
    producer = current_producer.get()
    if producer is not None and producer[0] == st.session_id and enclosing_graph() is not None:
        st.nested_results[producer[1]] = mt_id


def _resumed(st: SessionState) -> bool:
    """Whether this model or tool call belongs to a run that did not start with ``before_agent``:
    a run resumed after an interrupt (``Command(resume=...)``: a human's decision is an input a
    replay must give again). Never true inside a forget's replay (its own runs)."""
    return st.root is None and not replaying(st.session_id, configurable())


def _run_facts(attrs: dict[str, Any], resumed: bool = False) -> dict[str, Any]:
    """``attrs`` with what a forget must know of the run that made the record: ``graph_ns``, the
    namespace of the graph it ran nested in (``context.enclosing_graph``), with ``in_turn``: its
    run was recorded as a part of the outer run's turn (a record without it is an older one, whose
    nested runs were turns of their own), and ``resumed``."""
    ns = enclosing_graph()
    if ns is not None:
        attrs["graph_ns"] = ns
        attrs["in_turn"] = True
    if resumed:
        attrs["resumed"] = True
    return attrs


def _chat_attributes(ai, calls: bool, mt):
    """The chat span's response attributes, as of now; the output token fallback (the turn's
    own token count) once the turn's record is made."""
    usage = dict(ai.usage_metadata or {})
    rid, finish = ai.id, ["tool_calls" if calls else "stop"]

    def attributes() -> dict[str, Any]:
        span = mt.artifact.token_span if "output_tokens" not in usage else (0, 0)
        return {
            sc.GEN_AI_RESPONSE_ID: rid,
            sc.GEN_AI_INPUT_TOKENS: int(usage.get("input_tokens", 0)),
            sc.GEN_AI_OUTPUT_TOKENS: int(usage.get("output_tokens", span[1] - span[0])),
            sc.GEN_AI_FINISH_REASONS: finish,
        }

    return attributes


_ai_message_of = ai_message_of  # (its older name, imported elsewhere)
