"""Agent shapes the compatibility suite runs (``unsee.testing.check_agent``): one support desk,
built every way people build agents today.

Every case has the same world: ``lookup`` (read) returns a ticket whose text holds the secret,
``refund`` (external) moves money (counted by ``world.fire``). The model is a
``ScriptedChatModel`` (a function of the transcript, answered like a hosted API): it looks up the
tickets a user message names, refunds the orders it names, and answers with what the tools
returned, so the secret flows from a tool result into a reply and on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool

from tests.support.transcript import last_human, trailing_results
from unsee.testing import AgentCase, AgentWorld, ScriptedChatModel

TURNS = ("hello", "look at T1", "refund A7", "look at T2")


def support_tools(world: AgentWorld) -> list:
    def lookup(ticket: str) -> str:
        """Look up a support ticket."""
        if ticket == "T1":
            return f"ticket T1: card {world.secret} on file"
        return f"ticket {ticket}: blender broken"

    def refund(order: str) -> str:
        """Refund an order (moves money)."""
        world.fire("refund", order)
        return f"refund of {order} issued"

    return [StructuredTool.from_function(lookup, metadata={"unsee.effect": "read"}),
            StructuredTool.from_function(refund, metadata={"unsee.effect": "external"})]


def support_policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    """Look up the tickets and refund the orders the last user message names (in parallel), then
    answer with what the tools returned."""
    if isinstance(messages[-1], ToolMessage):
        return AIMessage(content="Result: " + "; ".join(trailing_results(messages)))
    text = last_human(messages)
    calls = [{"name": "lookup", "args": {"ticket": t}, "id": "_"} for t in re.findall(r"\bT\d\b", text)
             if "lookup" in tools]
    if (m := re.search(r"refund (\w+)", text)) and "refund" in tools:
        calls.append({"name": "refund", "args": {"order": m.group(1)}, "id": "_"})
    if calls:
        return AIMessage(content="", tool_calls=calls)
    return AIMessage(content=f"Noted: {text[-40:]}")


def model(role: str = "agent", policy=support_policy) -> ScriptedChatModel:
    return ScriptedChatModel(policy=policy, role=role)


def agent_with(*middleware_factories, role: str = "agent", **create_kw):
    """A case factory: the support desk as ``create_agent`` with ``middleware`` (each built per
    world: a middleware instance holds per-agent state)."""
    def build(world: AgentWorld):
        mw = [f() for f in middleware_factories]
        return create_agent(model(role), support_tools(world), middleware=[*world.middleware(), *mw],
                            checkpointer=world.checkpointer, **create_kw)
    return build


def case(name: str, build, turns=TURNS, **kw) -> AgentCase:
    return AgentCase(name, build, tuple(turns), **kw)


# -- LangChain's built-in middleware, one case each ---------------------------------------------
from langchain_core.decisions import BaseDecisionModel, ChoiceAnswer, ClassifierResponse, NoulAnswer  # noqa: E402
from langchain_core.language_models.chat_models import BaseChatModel  # noqa: E402
from langchain_core.outputs import ChatResult  # noqa: E402
from langgraph.types import Command  # noqa: E402


class ScriptedDecisionModel(BaseDecisionModel):
    """A decision model that answers from the question and the state it is shown only: a call to
    ``refund`` is risky (0.9), anything else is not (0.1); a choice takes its first label."""

    model: str = "scripted-decisions"

    @property
    def _provider(self) -> str:
        return "scripted"

    def _classify(self, state, questions) -> ClassifierResponse:
        answers = {}
        for qid, q in questions.items():
            if q.type == "noul":
                answers[qid] = NoulAnswer(type="noul", noul=0.9 if "refund" in str(state) else 0.1)
            elif q.type == "choice":
                first = next(iter(q.criteria))
                answers[qid] = ChoiceAnswer(type="choice", choice=first, probabilities={first: 1.0}, confidence=1.0)
        return ClassifierResponse(model=self.model, answers=answers)


class DownChatModel(BaseChatModel):
    """A provider that is down: every call fails (what ModelFallbackMiddleware falls back from)."""

    @property
    def _llm_type(self) -> str:
        return "down"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        raise ConnectionError("503: provider unavailable")


def summary_policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    """A summarizer: the summary repeats what the conversation's tool results said."""
    text = str(messages[-1].content)
    facts = re.findall(r"ticket T\d:[^\n;\]]*", text)
    return AIMessage(content="Summary: " + ("; ".join(dict.fromkeys(facts)) or "small talk"))


def selector_policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    """Selects every support tool (answered as a call of the structured-output schema's tool)."""
    return AIMessage(content="", tool_calls=[{"name": tools[0], "args": {"tools": ["lookup", "refund"]}, "id": "_"}])


def todo_policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    """Plans with write_todos after a lookup (the plan copies the tool's result), then answers."""
    last = messages[-1]
    if isinstance(last, ToolMessage) and last.name == "lookup" and "write_todos" in tools:
        return AIMessage(content="", tool_calls=[{"name": "write_todos", "id": "_", "args": {"todos": [
            {"content": "follow up: " + str(last.content), "status": "in_progress"}]}}])
    if isinstance(last, ToolMessage) and last.name == "write_todos":
        return AIMessage(content="Planned.")
    return support_policy(messages, tools)


def failing_once_tools(world: AgentWorld) -> list:
    """The support tools, with ``lookup`` failing at its first call of each world."""
    tools = support_tools(world)
    inner = tools[0].func
    calls = {"n": 0}

    def lookup(ticket: str) -> str:
        """Look up a support ticket."""
        calls["n"] += 1
        if calls["n"] == 1:
            raise TimeoutError("ticket service timed out")
        return inner(ticket)

    return [StructuredTool.from_function(lookup, metadata={"unsee.effect": "read"}), tools[1]]


def _mw(name: str, **kw):
    import langchain.agents.middleware as m

    return lambda: getattr(m, name)(**kw)


def _summarization():
    from langchain.agents.middleware import SummarizationMiddleware

    return SummarizationMiddleware(model=model("sum", summary_policy), trigger=("messages", 6),
                                   keep=("messages", 2))


def _context_editing():
    from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware

    return ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=60, keep=1)])


def _fallback():
    from langchain.agents.middleware import ModelFallbackMiddleware

    return ModelFallbackMiddleware(model("fallback"))


def _tool_error():
    from langchain.agents.middleware import ToolErrorMiddleware

    return ToolErrorMiddleware(on_error=lambda exc, request: f"{type(exc).__name__}: try again")


def _file_search():
    import tempfile
    from pathlib import Path

    from langchain.agents.middleware import FilesystemFileSearchMiddleware

    root = Path(tempfile.mkdtemp(prefix="unsee-compat-files-"))
    (root / "notes.txt").write_text("blender warranty: 2 years\n")
    return FilesystemFileSearchMiddleware(root_path=str(root), use_ripgrep=False)


def middleware_cases() -> dict[str, AgentCase]:
    """One case per middleware class of ``langchain.agents.middleware`` that runs offline,
    keyed by the class's name (``test_every_builtin_middleware_has_a_case`` holds that)."""
    hitl_turns = ("look at T1", "refund A7", Command(resume={"decisions": [{"type": "approve"}]}), "look at T2")
    return {
        "SummarizationMiddleware": case("summarization", agent_with(_summarization),
                                        turns=("hello", "look at T1", "look at T2", "refund A7", "how are you")),
        "PIIMiddleware": case("pii", agent_with(_mw("PIIMiddleware", pii_type="email", strategy="redact")),
                              turns=("I am ann@example.com", "look at T1", "refund A7")),
        "ModelCallLimitMiddleware": case("model-call-limit", agent_with(_mw("ModelCallLimitMiddleware",
                                                                               run_limit=3))),
        "ToolCallLimitMiddleware": case("tool-call-limit", agent_with(_mw("ToolCallLimitMiddleware",
                                                                             tool_name="lookup", run_limit=1)),
                                        turns=("look at T1 and T2", "refund A7")),
        "ModelRetryMiddleware": case("model-retry", agent_with(_mw("ModelRetryMiddleware", max_retries=1,
                                                                   initial_delay=0, jitter=False))),
        "ToolRetryMiddleware": case("tool-retry", lambda w: create_agent(
            model(), failing_once_tools(w), middleware=[*w.middleware(), _mw(
                "ToolRetryMiddleware", max_retries=1, initial_delay=0, jitter=False)()],
            checkpointer=w.checkpointer)),
        "ModelFallbackMiddleware": case("model-fallback", lambda w: create_agent(
            DownChatModel(), support_tools(w), middleware=[*w.middleware(), _fallback()],
            checkpointer=w.checkpointer)),
        "ModelRefusalMiddleware": case("model-refusal", agent_with(_mw("ModelRefusalMiddleware"))),
        "ContextEditingMiddleware": case("context-editing", agent_with(_context_editing)),
        "LLMToolSelectorMiddleware": case("tool-selector", agent_with(lambda: _mw(
            "LLMToolSelectorMiddleware", model=model("selector", selector_policy), max_tools=2)())),
        "TodoListMiddleware": case("todo-list", lambda w: create_agent(
            model("todo", todo_policy), support_tools(w), middleware=[*w.middleware(), _mw("TodoListMiddleware")()],
            checkpointer=w.checkpointer)),
        "HumanInTheLoopMiddleware": case("human-approval", agent_with(_mw(
            "HumanInTheLoopMiddleware", interrupt_on={"refund": True})), turns=hitl_turns),
        "ToolErrorMiddleware": case("tool-error", lambda w: create_agent(
            model(), failing_once_tools(w), middleware=[*w.middleware(), _tool_error()],
            checkpointer=w.checkpointer), turns=("look at T2", "look at T1", "refund A7")),
        "LLMToolEmulator": case("tool-emulator", agent_with(lambda: _mw(
            "LLMToolEmulator", tools=["refund"], model=model("emulator", lambda m, t: AIMessage(
                content="emulated refund")))())),
        "AutoModeMiddleware": case("auto-mode", agent_with(lambda: _mw(
            "AutoModeMiddleware", tools=["refund"], classifier=ScriptedDecisionModel())())),
        "ModelRouterMiddleware": case("model-router", lambda w: create_agent(
            model(), support_tools(w), middleware=[*w.middleware(), _router()], checkpointer=w.checkpointer)),
        "FilesystemFileSearchMiddleware": case("file-search", agent_with(_file_search)),
    }


def _router():
    from langchain.agents.middleware import ModelChoice, ModelRouterMiddleware

    return ModelRouterMiddleware(choices={"fast": ModelChoice(model=model("fast"), criteria="simple tasks"),
                                          "deep": ModelChoice(model=model("deep"), criteria="hard tasks")},
                                 instructions="Pick the cheapest model that can do it.",
                                 classifier=ScriptedDecisionModel())


#: classes of ``langchain.agents.middleware`` the suite cannot run offline, and why
NOT_OFFLINE = {
    "ProviderToolSearchMiddleware": "defers tools to a provider's server-side tool search (Anthropic, OpenAI "
                                    "only); without such a provider every call raises",
    "ShellToolMiddleware": "runs a persistent shell on the host: its effects are outside any world a test "
                           "can rebuild from scratch (covered by unsee's sandbox tools instead)",
}


# -- the ecosystem: packages people build agents with ---------------------------------------------
class _FireLog(list):
    """A ``World.fired`` list that also tells the suite's world (``AgentWorld.fire``)."""

    def __init__(self, world: AgentWorld):
        super().__init__()
        self.world = world

    def append(self, order) -> None:
        super().append(order)
        self.world.fire("refund", order)


def shape_world(world: AgentWorld):
    """The ``agent_shapes.World`` of the suite's world (its secret, its side effects told)."""
    from tests.support import agent_shapes
    w = agent_shapes.World(secret=world.secret or None)
    w.fired = _FireLog(world)
    return w


def shape(name: str):
    """A case factory for an agent shape of ``agent_shapes`` (deepagents, swarm, a subagent
    inside a tool, a graph node; a hand-written ``StateGraph``, ``create_react_agent``), in the
    suite's world."""
    from tests.support import agent_shapes
    def build(world: AgentWorld):
        if name == "state_graph":
            return agent_shapes.build_state_graph(shape_world(world), u=world.unsee, checkpointer=world.checkpointer)
        if name == "react_agent":
            return agent_shapes.build_react_agent(shape_world(world), u=world.unsee, checkpointer=world.checkpointer)
        if name == "supervisor":
            return recorded_supervisor(world)
        return agent_shapes.build(name, shape_world(world), middleware=world.middleware,
                                  checkpointer=world.checkpointer)
    return build


def recorded_supervisor(world: AgentWorld, checkpointer: Any = None):
    """``langgraph_supervisor.create_supervisor`` with unsee's middleware on the workers and the
    supervisor's own model recorded (``u.recorded_model``: the supervisor takes no middleware);
    ``checkpointer``: another than the world's."""
    from tests.support import agent_shapes
    from langgraph_supervisor import create_supervisor

    tools = shape_world(world).tools()
    a = create_agent(agent_shapes.HostedChatModel(policy=agent_shapes.worker_policy, role="a"), tools[:1],
                     middleware=world.middleware(), name="worker_a")
    b = create_agent(agent_shapes.HostedChatModel(policy=agent_shapes.worker_policy, role="b"), tools,
                     middleware=world.middleware(), name="worker_b")
    boss = world.recorded_model(agent_shapes.HostedChatModel(policy=agent_shapes.supervisor_policy, role="sup"))
    return create_supervisor([a, b], model=boss).compile(checkpointer=checkpointer or world.checkpointer)


def shape_case(name: str, build=None, **kw) -> AgentCase:
    """A case on ``agent_shapes``' turns and secret; ``build``: the agent (None: ``shape(name)``)."""
    from tests.support import agent_shapes
    kw.setdefault("turns", agent_shapes.TURNS[:-1])
    kw.setdefault("follow_up", agent_shapes.TURNS[-1])
    kw.setdefault("secret", agent_shapes.SECRET)
    return case(f"shape-{name}", build or shape(name), **kw)


def answer_policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    """The support desk, answering through the structured-output tool (``ToolStrategy``)."""
    out = support_policy(messages, [t for t in tools if t in ("lookup", "refund")])
    if out.tool_calls or "Answer" not in tools:
        return out
    return AIMessage(content="", tool_calls=[{"name": "Answer", "args": {"text": str(out.content)}, "id": "_"}])


def structured(world: AgentWorld):
    from langchain.agents.structured_output import ToolStrategy
    from pydantic import BaseModel

    class Answer(BaseModel):
        """The answer to the user."""

        text: str

    return create_agent(model("structured", answer_policy), support_tools(world), middleware=world.middleware(),
                        checkpointer=world.checkpointer, response_format=ToolStrategy(Answer))


def async_tools(world: AgentWorld) -> list:
    """The support tools as ``async def`` tools only (no synchronous form, like MCP tools)."""
    sync = support_tools(world)

    async def lookup(ticket: str) -> str:
        """Look up a support ticket."""
        return sync[0].func(ticket)

    async def refund(order: str) -> str:
        """Refund an order (moves money)."""
        return sync[1].func(order)

    return [StructuredTool.from_function(coroutine=lookup, metadata={"unsee.effect": "read"}),
            StructuredTool.from_function(coroutine=refund, metadata={"unsee.effect": "external"})]


def ecosystem_cases() -> dict[str, AgentCase]:
    """Agent shapes beyond one middleware: how agents are run and built (module docstring)."""
    hitl = agent_with(_mw("HumanInTheLoopMiddleware", interrupt_on={"refund": True}))
    approve = Command(resume={"decisions": [{"type": "approve"}]})
    edit = Command(resume={"decisions": [{"type": "edit", "edited_action": {"name": "refund",
                                                                             "args": {"order": "A8"}}}]})
    reject = Command(resume={"decisions": [{"type": "reject", "message": "not this one"}]})
    return {
        "bare": case("bare", agent_with()),
        "parallel-calls": case("parallel-calls", agent_with(), turns=("look at T1 and T2 and refund A7", "hello")),
        "stream-updates": case("stream-updates", agent_with(), run="stream", stream_mode="updates"),
        "stream-messages": case("stream-messages", agent_with(), run="stream", stream_mode="messages"),
        "ainvoke": case("ainvoke", agent_with(), run="ainvoke"),
        "astream": case("astream", agent_with(), run="astream", stream_mode=["updates", "messages"]),
        "async-only-tools": case("async-only-tools", lambda w: create_agent(
            model(), async_tools(w), middleware=w.middleware(), checkpointer=w.checkpointer), run="ainvoke"),
        "structured-output": case("structured-output", structured),
        "command-input": case("command-input", agent_with(), turns=(
            "hello", Command(update={"messages": [HumanMessage("look at T1")]}, goto="model"), "refund A7")),
        "hitl-approve": case("hitl-approve", hitl, turns=("look at T1", "refund A7", approve, "look at T2")),
        "hitl-edit": case("hitl-edit", hitl, turns=("look at T1", "refund A7", edit, "look at T2")),
        "hitl-reject": case("hitl-reject", hitl, turns=("look at T1", "refund A7", reject, "look at T2")),
        "tool-subagent": shape_case("tool_subagent"),
        "graph-node": shape_case("graph_node"),
        "deepagents": shape_case("deep"),
        "supervisor": shape_case("supervisor"),
        "swarm": shape_case("swarm"),
        "state-graph": shape_case("state_graph"),
        "react-agent": shape_case("react_agent"),
        **{name: make() for name, make in ECOSYSTEM_EXTRA.items()},
    }


#: the cases that build multi-agent graphs (run on PostgreSQL too)
MULTI_AGENT = ("supervisor", "swarm", "deepagents", "tool-subagent")


def unrecorded_supervisor() -> AgentCase:
    """A ``langgraph-supervisor`` supervisor whose own model is not recorded (only its workers run
    unsee's middleware): its own turns are never recorded, so a forget refuses it."""
    from tests.support import agent_shapes
    def build(world: AgentWorld):
        return agent_shapes.build("supervisor", shape_world(world), middleware=world.middleware,
                                  checkpointer=world.checkpointer)
    return shape_case("supervisor-unrecorded", build)


def deep_policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    """A deepagents harness at work: saves what a lookup found to its virtual filesystem, reads
    its notes back, delegates to a ``task`` subagent, refunds (the support desk otherwise)."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        if last.name == "lookup" and "write_file" in tools:
            ticket = re.search(r"ticket (T\d)", str(last.content))
            return AIMessage(content="", tool_calls=[{"name": "write_file", "id": "_", "args": {
                "file_path": f"/notes/{ticket.group(1) if ticket else 'x'}.md", "content": str(last.content)}}])
        if last.name == "write_file":
            return AIMessage(content="Saved to my notes.")
        if last.name == "read_file":
            return AIMessage(content="My notes say: " + str(last.content)[-80:])
        if last.name == "task":
            return AIMessage(content="The specialist says: " + str(last.content)[-80:])
        return support_policy(messages, tools)
    text = last_human(messages)
    if text.startswith("read notes") and "read_file" in tools:
        return AIMessage(content="", tool_calls=[{"name": "read_file", "id": "_",
                                                  "args": {"file_path": "/notes/T1.md"}}])
    if (m := re.match(r"delegate (T\d)", text)) and "task" in tools:
        return AIMessage(content="", tool_calls=[{"name": "task", "id": "_", "args": {
            "description": f"look at {m.group(1)}", "subagent_type": "general-purpose"}}])
    return support_policy(messages, tools)


def deep_harness(world: AgentWorld):
    from deepagents import create_deep_agent

    return create_deep_agent(model=model("deep", deep_policy), tools=support_tools(world),
                             middleware=world.middleware(), checkpointer=world.checkpointer)


ECOSYSTEM_EXTRA = {
    "deepagents-harness": lambda: case("deepagents-harness", deep_harness,
                                       turns=("look at T1", "read notes", "delegate T2", "refund A7"),
                                       follow_up="read notes"),
}


def json_policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    """The support desk answering in JSON (a provider's native structured output)."""
    import json

    out = support_policy(messages, tools)
    return out if out.tool_calls else AIMessage(content=json.dumps({"text": str(out.content)}))


def provider_structured(world: AgentWorld):
    from langchain.agents.structured_output import ProviderStrategy
    from pydantic import BaseModel

    class Answer(BaseModel):
        """The answer to the user."""

        text: str

    return create_agent(model("provider", json_policy), support_tools(world), middleware=world.middleware(),
                        checkpointer=world.checkpointer, response_format=ProviderStrategy(Answer))


ECOSYSTEM_EXTRA["structured-output-provider"] = lambda: case("structured-output-provider", provider_structured)


# -- MCP tools: a real stdio server (tests/support/mcp_server.py), reached with langchain-mcp-adapters
def mcp_policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    """The ticket desk over MCP: reads tickets (a read tool), closes them (destructive), asks for
    their status (unannotated, two content blocks)."""
    from tests.support import mcp_desk

    return mcp_desk.policy(messages, tools)


def mcp_agent(world: AgentWorld):
    """``create_agent`` over the MCP server's tools, their effects from the server's annotations.
    Each call opens its own stdio session (a server process), so the tools work on any loop."""
    import sys

    from langchain_mcp_adapters.client import MultiServerMCPClient

    from tests.support import mcp_desk

    effects = world.folder / "mcp-effects.log"
    client = MultiServerMCPClient({"tickets": {
        "command": sys.executable, "args": [str(mcp_desk.SERVER)], "transport": "stdio",
        "env": {"MCP_EFFECTS": str(effects), "MCP_SECRET": world.secret}}})
    import asyncio

    tools = asyncio.run(client.get_tools())
    world.count_from(lambda: [(line.split(":")[0], tuple(line.split(":")[1:]))
                              for line in mcp_desk.fired(effects)])
    return create_agent(model("mcp", mcp_policy), tools, middleware=world.middleware(),
                        checkpointer=world.checkpointer)


ECOSYSTEM_EXTRA["mcp-tools"] = lambda: case("mcp-tools", mcp_agent, run="ainvoke",
                                            turns=("look at T1", "close T2", "status T2", "look at T3"),
                                            follow_up="close T3")
