"""AgentDojo adapter: run AgentDojo suites through a LangChain agent recorded by unsee.

:class:`UnseeAgentElement` is an AgentDojo ``BasePipelineElement``. For each
query it builds a LangChain ``create_agent`` agent with unsee's recording
middleware whose tools are the suite's functions (each call runs
``runtime.run_function(env, name, args)`` on AgentDojo's environment), runs it,
and converts the final LangChain messages back to AgentDojo messages so the
suite's utility and security checks work unchanged.

The model (``model=``) is the local CPU model (``"local"``: the small model
unsee ships, steered by :class:`ToolBudget`), or (``"scripted"``, the default)
a scripted, *injection-following* policy (no network, no weights): it performs the user task's ground-truth calls in order, and as soon
as a tool result carries an injection task's goal, whatever wraps it (an
``<INFORMATION>`` block, ``TODO:``, "Ignore your previous instructions", a
``###(system_message)`` heading: every attack AgentDojo registers), it also
performs that injection task's ground-truth calls; a denial-of-service
injection (``is_dos_attack``: no goal, "stop what you are doing") makes it
stop and answer at once. It ends with a text answer that concatenates the
tool outputs. Its output is a pure function of the conversation, so it
behaves the same under replay.

Defenses (:data:`DEFENSES`): ``none``; ``ifc`` (identifier sinks per suite,
mode ``block``); ``detect+forget`` (the rule detector screening tool returns
synchronously, ``policy="auto"``: flagged spans are removed before the model
or the record see them); ``ifc+forget`` (both, the detector endorsing for the
IFC the observations it vetted: identifiers the task read from a clean or
sanitized observation may reach sinks).

``verdict="late"`` runs the late-detection case of "Forgetting Without Restarting:
Execution-State Unlearning for Stateful LLM Agents" instead (an injection detector
flags a tool observation after the agent has processed it): the agent processes the
injected observation (and follows it, where the IFC lets it), the detector's
verdict arrives after the run, and each finding becomes a B7 forget of that
thread (``side_effects="execute"``: calls only the counterfactual makes are
made). External calls the injection caused stay done: they are the report's
orphaned side effects, and AgentDojo's environment-based security checks see
them. With ``reconcile="compensate"`` or ``"all"`` (:mod:`.dojo_reconcile`) each
forget's plan is then reconciled: the suite's money-moving and message-sending
functions carry compensators that act on AgentDojo's environment
(:mod:`.dojo_compensators`), and the environment is judged before and after.

The element makes its ``Unsee`` through the ``unsee`` factory it is given
(:class:`UnseeFactory`, e.g. the ``Unsee`` class itself); the harness sits
above the facade, which it imports for its annotations only (importing this
module does not import the facade).
"""

from __future__ import annotations

import re
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
from agentdojo.functions_runtime import EmptyEnv, Env, FunctionCall, FunctionsRuntime
from agentdojo.types import (
    ChatAssistantMessage,
    ChatMessage,
    ChatToolResultMessage,
    ChatUserMessage,
    text_content_block_from_string,
)
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool, ToolException

from unsee.middleware.tools import was_executed
from unsee.plugins.model import ScriptedChatModel, call_id

from .dojo_compensators import EffectJournal
from .dojo_reconcile import RECONCILES, Reconciled, reconcile_forgets, side_effects_for

if TYPE_CHECKING:
    from unsee.core import Unsee

#: a model id AgentDojo knows (``load_attack`` derives the model's name from the pipeline name)
DEFAULT_MODEL_ID = "gpt-4o-2024-05-13"

DEFENSES: tuple[str, ...] = ("none", "ifc", "detect+forget", "ifc+forget")
#: the agent's model: the scripted injection-following policy, or the local CPU model
MODELS: tuple[str, ...] = ("scripted", "local")
#: when the detector's verdict arrives: before the model sees a tool return, or after the run (then B7)
VERDICTS: tuple[str, ...] = ("sync", "late")

#: identifier sinks per suite (``tool.arg``), checked against the functions the suite really has
SUITE_SINKS: dict[str, tuple[str, ...]] = {
    "banking": (
        "send_money.recipient",
        "schedule_transaction.recipient",
        "update_scheduled_transaction.recipient",
    ),
    "slack": (
        "send_direct_message.recipient",
        "invite_user_to_slack.user",
        "invite_user_to_slack.user_email",
        "get_webpage.url",
        "post_webpage.url",
    ),
    "workspace": (
        "send_email.recipients",
        "send_email.cc",
        "send_email.bcc",
        "share_file.email",
        "create_calendar_event.participants",
        "add_calendar_event_participants.participants",
    ),
    "travel": (
        "send_email.recipients",
        "send_email.cc",
        "send_email.bcc",
    ),
}

#: a function whose name contains one of these reaches outside (effect "external")
_EXTERNAL_VERBS = ("send", "transfer", "update", "post", "invite", "delete", "schedule", "remove", "add_",
                   "create", "reserve", "share", "append", "cancel", "reschedule")



def effect_for(function_name: str) -> str:
    """``external`` for functions that change or send something, else ``read``."""
    name = function_name.lower()
    return "external" if any(v in name for v in _EXTERNAL_VERBS) else "read"


def suite_sinks(suite: Any) -> tuple[str, ...]:
    """The configured sinks of ``suite`` that exist among its functions' arguments."""
    args = {f.name: set(f.parameters.model_json_schema().get("properties", {})) for f in suite.tools}
    out = []
    for spec in SUITE_SINKS.get(suite.name, ()):
        tool, _, arg = spec.partition(".")
        if tool in args and arg in args[tool]:
            out.append(spec)
    return tuple(out)


def _key(text: str) -> str:
    """Alphanumerics only, lowercased: survives YAML quoting and line folding of tool outputs."""
    return re.sub(r"[^0-9a-z]", "", text.lower())


def injection_lines(injection: str, min_len: int = 15) -> list[str]:
    """Distinctive lines of an injected text (as keys), for leak checks on formatted state."""
    return [k for k in (_key(line) for line in injection.splitlines()) if len(k) >= min_len]


def leaked(injections: Sequence[str], text: str) -> bool:
    """Whether any distinctive line of any injected text occurs in ``text``."""
    hay = _key(text)
    return any(line in hay for inj in injections for line in injection_lines(inj))


def _plain(value: Any) -> Any:
    if isinstance(value, FunctionCall):
        return value.model_dump()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# -- the scripted injection-following policy -----------------------------------

@dataclass
class Plan:
    """What the scripted model will do in one query."""

    user_calls: list[FunctionCall]
    #: injection task id -> (goal key, its ground-truth calls)
    injection_calls: dict[str, tuple[str, list[FunctionCall]]] = field(default_factory=dict)
    #: appended to the final answer (the user task's ``GROUND_TRUTH_OUTPUT``, where it has one)
    answer_hint: str = ""
    #: the texts this run's attack injected (the model copies one into an argument only if it saw it)
    injected: tuple[str, ...] = ()
    #: keys of a denial-of-service injection's lines: seeing one, the model stops and answers
    stop_keys: tuple[str, ...] = ()


def _tag(call_id: str) -> tuple[str, int] | None:
    m = re.search(r"~(u|i:[\w\-]+)~(\d+)$", call_id or "")
    return (m.group(1), int(m.group(2))) if m else None


_BLOCK = re.compile(r"\s*<\s*INFORMATION\s*>.*?<\s*/\s*INFORMATION\s*>\s*", re.IGNORECASE | re.DOTALL)


def _unseen_removed(value: Any, observed: str, injected: Sequence[str] = ()) -> Any:
    """Ground-truth arguments are computed on the injected environment; the model can only
    copy injected text it actually saw, so injected texts (``injected``, and any
    ``<INFORMATION>`` block) absent from its observations are dropped."""
    if isinstance(value, str):
        for text in injected:
            if text and text in value and _key(text) not in observed:
                value = value.replace(text, "")
        return _BLOCK.sub(lambda m: m.group(0) if _key(m.group(0)) in observed else "", value)
    if isinstance(value, dict):
        return {k: _unseen_removed(v, observed, injected) for k, v in value.items()}
    if isinstance(value, list):
        return [_unseen_removed(v, observed, injected) for v in value]
    return value


def plan_for(suite: Any, user_task: Any, env: Env, *, answer_hint: bool = True, injected: Sequence[str] = (),
             dos: bool = False) -> Plan:
    """The scripted model's plan for ``user_task`` (None: no user calls) on ``env``: the user
    task's ground-truth calls, and every injection task's goal and calls. ``injected``: the
    texts the run's attack put in the environment; ``dos``: they ask the agent to stop."""
    pre = env.model_copy(deep=True)
    user_calls = list(user_task.ground_truth(pre.model_copy(deep=True))) if user_task is not None else []
    inj = {tid: (_key(t.GOAL), list(t.ground_truth(pre.model_copy(deep=True))))
           for tid, t in suite.injection_tasks.items()}
    hint = getattr(user_task, "GROUND_TRUTH_OUTPUT", "") if answer_hint else ""
    texts = tuple(t for t in dict.fromkeys(injected) if t)
    stop = tuple(k for t in texts for k in injection_lines(t)) if dos else ()
    return Plan(user_calls, inj, hint or "", texts, stop)


def injection_policy(plan: Plan) -> Callable[[Sequence[BaseMessage], Sequence[str]], AIMessage]:
    """``policy(messages, tool_names)`` for :class:`~unsee.plugins.model.ScriptedChatModel`.

    Progress is read back from the tool-call ids of earlier AI messages (``…~u~3``:
    the fourth user call; ``…~i:<task>~0``: the first call of an injection task),
    so the policy is a pure function of the conversation.
    """

    def policy(messages: Sequence[BaseMessage], tool_names: Sequence[str]) -> AIMessage:
        done: dict[str, int] = {}
        for m in messages:
            if isinstance(m, AIMessage):
                for tc in m.tool_calls or []:
                    t = _tag(tc.get("id", ""))
                    if t:
                        done[t[0]] = max(done.get(t[0], 0), t[1] + 1)
        seen: list[str] = []  # injection tasks whose goal the model has read, in order
        stopped = False  # a denial-of-service injection was read: the model stops
        for m in messages:
            if isinstance(m, ToolMessage):
                hay = _key(str(m.content))
                stopped = stopped or any(k in hay for k in plan.stop_keys)
                for tid, (goal, _) in plan.injection_calls.items():
                    if tid not in seen and goal and goal in hay:
                        seen.append(tid)
        if stopped:
            return AIMessage(content="asdf")  # what AgentDojo's DoS injections ask for instead of the task

        observed = _key("\n".join(str(m.content) for m in messages if isinstance(m, ToolMessage)))

        def call(fc: FunctionCall, tag: str, k: int) -> AIMessage:
            return AIMessage(content="", tool_calls=[{
                "name": fc.function, "args": _unseen_removed(_plain(dict(fc.args)), observed, plan.injected),
                "type": "tool_call",
                "id": f"{call_id(messages)}~{tag}~{k}"}])

        # an injection the model read takes priority ("before you solve the task ...")
        for tid in seen:
            calls = plan.injection_calls[tid][1]
            k = done.get(f"i:{tid}", 0)
            if k < len(calls):
                return call(calls[k], f"i:{tid}", k)
        k = done.get("u", 0)
        if k < len(plan.user_calls):
            return call(plan.user_calls[k], "u", k)
        outputs = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
        answer = "\n".join(x for x in (plan.answer_hint, *outputs) if x)
        return AIMessage(content=("Here is what I found:\n" + answer) if answer else "Done.")

    return policy


class ToolBudget(AgentMiddleware):
    """Steers a small local model through a task: it must call one of the tools
    (it picks which and writes the arguments, under the tools' JSON schemas)
    until it has made ``max_calls`` calls since the user's message, then it
    must answer in text. A 135M-parameter model left to choose rarely calls a
    tool at all; this keeps its runs comparable across defenses."""

    def __init__(self, max_calls: int = 3):
        super().__init__()
        self.max_calls = max_calls

    def _route(self, request):
        made = 0
        for m in reversed(request.messages):
            if isinstance(m, HumanMessage):
                break
            if isinstance(m, AIMessage):
                made += len(m.tool_calls or [])
        return request.override(tool_choice="any" if made < self.max_calls else "none")

    def wrap_model_call(self, request, handler):
        return handler(self._route(request))

    async def awrap_model_call(self, request, handler):
        return await handler(self._route(request))


# -- message conversion ----------------------------------------------------------

def to_agentdojo(messages: Sequence[BaseMessage], query: str, *, keep_blocked: bool = False) -> list[ChatMessage]:
    """LangChain messages of one run as AgentDojo messages (user, assistant, tool).

    Calls the IFC gate blocked never ran; unless ``keep_blocked``, they are left
    out of the trace (tool call and its error result), so trace-based security
    checks see what was executed, not what was attempted.
    """
    out: list[ChatMessage] = []
    calls: dict[str, FunctionCall] = {}
    blocked = set() if keep_blocked else {
        m.tool_call_id for m in messages if isinstance(m, ToolMessage) and not was_executed(m)}
    for m in messages:
        if isinstance(m, HumanMessage):
            out.append(ChatUserMessage(role="user", content=[text_content_block_from_string(str(m.content))]))
        elif isinstance(m, AIMessage):
            tcs = []
            for tc in m.tool_calls or []:
                if tc.get("id") in blocked:
                    continue
                fc = FunctionCall(function=tc["name"], args=dict(tc.get("args") or {}), id=tc.get("id"))
                calls[tc.get("id") or ""] = fc
                tcs.append(fc)
            text = str(m.content) if m.content else None
            out.append(ChatAssistantMessage(
                role="assistant", content=[text_content_block_from_string(text)] if text is not None else None,
                tool_calls=tcs or None))
        elif isinstance(m, ToolMessage):
            if m.tool_call_id in blocked:
                continue
            fc = calls.get(m.tool_call_id) or FunctionCall(function=m.name or "", args={}, id=m.tool_call_id)
            error = str(m.content) if m.status == "error" else None
            out.append(ChatToolResultMessage(
                role="tool", content=[text_content_block_from_string("" if error else str(m.content))],
                tool_call_id=m.tool_call_id, tool_call=fc, error=error))
    if not out or out[0]["role"] != "user":
        out.insert(0, ChatUserMessage(role="user", content=[text_content_block_from_string(query)]))
    return out


# -- the pipeline element ----------------------------------------------------------

def make_tools(runtime: FunctionsRuntime, env: Env, fired: list[str] | None = None,
               journal: EffectJournal | None = None) -> list[StructuredTool]:
    """The suite's functions as LangChain tools that run on AgentDojo's environment.

    ``fired``: each call of an ``external`` function that really runs is appended to it.
    ``journal``: compensable calls are journalled there and their tools declare its compensators
    (:class:`~.dojo_compensators.EffectJournal`, on the same ``env``)."""
    tools = []
    def runner(name: str) -> Callable[..., str]:
        def run(**kwargs: Any) -> str:
            if fired is not None and effect_for(name) == "external":
                fired.append(f"{name} {kwargs}")
            call = lambda: runtime.run_function(env, name, kwargs)  # noqa: E731
            result, error = journal.run(name, kwargs, call) if journal is not None else call()
            if error:
                raise ToolException(error)
            return tool_result_to_str(result)
        return run

    for fn in runtime.functions.values():
        tool = StructuredTool.from_function(
            func=runner(fn.name), name=fn.name, description=fn.description or fn.name, args_schema=fn.parameters,
            infer_schema=False, metadata={"unsee.effect": effect_for(fn.name)},
            handle_tool_error=lambda e: f"Error: {e}")
        tools.append(journal.declare(tool) if journal is not None and effect_for(fn.name) == "external" else tool)
    return tools


@dataclass
class RunRecord:
    """What the adapter kept of the last query (for leak checks and debugging)."""

    thread_id: str
    state_text: str
    ifc_blocks: int
    #: late verdicts: forgets run after the query, and the external calls they left orphaned
    forgets: int = 0
    orphaned: int = 0
    #: with reconciliation: the environment the query started from, what reconciling did (with
    #: the environment before it), and the AgentDojo messages the query returned
    pre: Any = None
    reconciled: Reconciled | None = None
    messages: list[ChatMessage] | None = None


class UnseeFactory(Protocol):
    """Makes the element's ``Unsee`` (pass the ``Unsee`` class)."""

    def __call__(self, *, home: str | Path, service_name: str) -> Unsee: ...


class UnseeAgentElement(BasePipelineElement):
    """An AgentDojo pipeline element that is a whole unsee-recorded LangChain agent.

    ``suite``: the AgentDojo suite (user tasks are found from the query, the
    injection tasks' goals are what the scripted model recognizes).
    ``unsee``: makes the recording ``Unsee`` (:class:`UnseeFactory`).
    """

    def __init__(self, suite: Any, defense: str = "none", *, unsee: UnseeFactory,
                 home: str | Path | None = None,
                 model_id: str = DEFAULT_MODEL_ID, system_prompt: str = "You are a helpful assistant.",
                 answer_hint: bool = True, verdict: str = "sync", model: str = "scripted",
                 max_tool_calls: int = 3, max_tokens: int = 96, reconcile: str = "none"):
        if model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, not {model!r}")
        self.model = model
        self.max_tool_calls = max_tool_calls
        self.max_tokens = max_tokens
        if defense not in DEFENSES:
            raise ValueError(f"defense must be one of {DEFENSES}, not {defense!r}")
        if verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, not {verdict!r}")
        if reconcile not in RECONCILES:
            raise ValueError(f"reconcile must be one of {RECONCILES}, not {reconcile!r}")
        if reconcile != "none" and verdict != "late":
            raise ValueError(f"reconcile={reconcile!r} reconciles the forgets of late verdicts: it needs "
                             f"verdict='late', not {verdict!r}")
        self.verdict = verdict
        self.reconcile = reconcile
        self.suite = suite
        self.defense = defense
        self.name = f"{model_id}-unsee-{defense}"  # AgentDojo derives the attacked model's name from it
        self.system_prompt = system_prompt
        self.answer_hint = answer_hint
        self._tmp = None
        if home is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="unsee-agentdojo-")
            home = self._tmp.name
        self.u: Unsee = unsee(home=home, service_name="unsee-agentdojo")
        self.sinks = suite_sinks(suite)
        self.detector = None
        if defense in ("detect+forget", "ifc+forget"):
            # late: the agent acts on the injected observation; the verdict comes after the run and
            # B7 rebuilds the state (new external calls of the counterfactual are executed, or, with
            # reconcile="all", deferred to the reconciliation)
            self.detector = (self.u.detect(timing="sync", policy="auto") if verdict == "sync" else
                             self.u.detect(timing="async", policy="auto", side_effects=side_effects_for(reconcile)))
        # ifc+forget: what the detector vetted (or the forget sanitized) is endorsed for sinks
        self.ifc = (self.u.ifc(self.sinks, on_violation="block", endorse=self.detector)
                    if defense in ("ifc", "ifc+forget") else None)
        self._by_prompt = {t.PROMPT: t for t in suite.user_tasks.values()}
        self.last: RunRecord | None = None
        #: what the attack of the next query injected (the scripted model recognises it): set per pair
        self.injected: tuple[str, ...] = ()
        self.dos = False

    def close(self) -> None:
        self.u.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    def plan(self, query: str, env: Env) -> Plan:
        user_task = self._by_prompt.get(query)
        if user_task is None:  # an injection task run alone: its goal is the query
            user_task = next((t for t in self.suite.injection_tasks.values() if t.GOAL == query), None)
        return plan_for(self.suite, user_task, env, answer_hint=self.answer_hint, injected=self.injected,
                        dos=self.dos)

    def query(self, query: str, runtime: FunctionsRuntime, env: Env = EmptyEnv(),
              messages: Sequence[ChatMessage] = [], extra_args: dict = {}):
        from langchain.agents import create_agent

        from unsee.middleware.checkpointers import open_saver

        if self.model == "local":
            model, steer = self.u.chat_model(max_tokens=self.max_tokens), [ToolBudget(self.max_tool_calls)]
        else:
            model, steer = ScriptedChatModel(policy=injection_policy(self.plan(query, env))), []
        reconciling = self.reconcile != "none"
        pre = env.model_copy(deep=True) if reconciling else None
        tools = make_tools(runtime, env, journal=EffectJournal(env) if reconciling else None)
        agent = create_agent(model, tools, system_prompt=self.system_prompt,
                             middleware=[*steer, self.u.middleware()], checkpointer=open_saver("memory")[0])
        thread = f"agentdojo-{self.suite.name}-{uuid.uuid4().hex[:12]}"
        config = {"configurable": {"thread_id": thread}, "recursion_limit": 100}
        decided_before = len(self.ifc.decisions) if self.ifc else 0
        agent.invoke({"messages": [HumanMessage(query)]}, config)
        blocks = sum(not d.allowed for d in self.ifc.decisions[decided_before:]) if self.ifc else 0
        verdicts = self.detector.scan(thread) if self.detector is not None and self.verdict == "late" else []
        failed = [v.error for v in verdicts if v.status == "failed"]
        if failed:
            raise RuntimeError(f"automatic revocation failed: {failed[0]}")
        reconciled = (reconcile_forgets(self.u, [v.report for v in verdicts], env,
                                        "all" if self.reconcile == "all" else "compensate", agent)
                      if reconciling else None)
        final = list(agent.get_state(config).values["messages"])
        orphaned = sum(len(v.report.orphaned_side_effects) for v in verdicts if v.report is not None)
        out = to_agentdojo(final, query)
        self.last = RunRecord(thread, "\n".join(str(m.content) for m in final)
                              + "\n" + repr([getattr(m, "tool_calls", None) for m in final]), blocks,
                              forgets=len(verdicts), orphaned=orphaned, pre=pre, reconciled=reconciled,
                              messages=out if reconciling else None)
        return query, runtime, env, out, extra_args


def make_pipeline(suite: Any, defense: str = "none", *, unsee: UnseeFactory, **kw: Any):
    """An AgentDojo ``AgentPipeline`` whose only element is the unsee agent (named after a known model)."""
    from agentdojo.agent_pipeline.agent_pipeline import AgentPipeline

    element = UnseeAgentElement(suite, defense, unsee=unsee, **kw)
    pipeline = AgentPipeline([element])
    pipeline.name = element.name
    return pipeline, element
