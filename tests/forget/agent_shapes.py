"""Agent shapes people build today, with a test model that behaves like a hosted chat API.

Each shape is built the way its package documents it, with unsee's recording
middleware on every ``create_agent`` it contains, over a ``World`` (the
records its tools read and a count of the real side effects they fire). The
secret enters through a tool result (``lookup("T1")``).

- ``agent``: ``create_agent`` with read and external tools;
- ``deep``: a ``deepagents.create_deep_agent`` with the same user tools;
- ``supervisor``: ``langgraph_supervisor.create_supervisor([worker_a, worker_b])``;
- ``swarm``: ``langgraph_swarm.create_swarm([alice, bob])`` with handoff tools;
- ``tool_subagent``: a ``create_agent`` whose tool invokes another ``create_agent``
  on the same thread (LangGraph propagates the config into the tool);
- ``graph_node``: a hand-written ``StateGraph`` whose node is a ``create_agent``.

``HostedChatModel`` answers as a function of the messages it is shown (so a
replay produces the counterfactual's replies), rejects a transcript with an
unanswered tool call (as hosted APIs answer 400), and returns a new message
object each time, with an id derived from the transcript.

The reference for a forget is B5 computed independently: ``reference`` runs the
same shape from scratch, on a fresh thread and a fresh world whose records do
not hold the secret, with no unsee replay code involved.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from pydantic import ConfigDict

SECRET = "4417-2231"
SHAPES = ("agent", "deep", "supervisor", "swarm", "tool_subagent", "graph_node")
#: the shapes a forget can replay today; the others must be refused before anything changes
REPLAYABLE = ("agent", "deep")


class World:
    """What the tools read and do: ticket records and the refunds really issued."""

    def __init__(self, secret: str | None = SECRET):
        card = secret or ""
        self.records = {"T1": f"ticket T1: card {card} on file", "T2": "ticket T2: blender broken"}
        self.fired: list[str] = []

    def tools(self) -> list[StructuredTool]:
        def lookup(ticket: str) -> str:
            """Look up a support ticket."""
            return self.records.get(ticket, f"ticket {ticket}: unknown")

        def refund(order: str) -> str:
            """Refund an order (moves money)."""
            self.fired.append(order)
            return f"refund of {order} issued"

        read = StructuredTool.from_function(lookup, metadata={"unsee.effect": "read"})
        money = StructuredTool.from_function(refund, metadata={"unsee.effect": "external"})
        return [read, money]


def _digest(messages: Sequence[BaseMessage]) -> str:
    h = hashlib.sha256()
    for m in messages:
        calls = [(c["name"], c["args"]) for c in getattr(m, "tool_calls", None) or []]
        h.update(json.dumps([type(m).__name__, str(m.content), calls], sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


class TranscriptRejected(ValueError):
    """What a hosted API answers a transcript with an unanswered tool call (HTTP 400)."""


class HostedChatModel(BaseChatModel):
    """``policy(messages, tool_names) -> AIMessage`` (tool calls without ids), answered like a
    hosted chat API would (module docstring)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    policy: Any
    role: str = "m"
    tool_names: tuple[str, ...] = ()

    @property
    def _llm_type(self) -> str:
        return "hosted-like"

    def bind_tools(self, tools, **kwargs) -> "HostedChatModel":
        names = tuple(getattr(t, "name", None) or (t.get("name") if isinstance(t, dict) else str(t)) for t in tools)
        return self.model_copy(update={"tool_names": names})

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        for m in messages:
            for c in getattr(m, "tool_calls", None) or []:
                if c["id"] not in answered:
                    raise TranscriptRejected(f"400: tool call {c['id']} has no tool message")
        out = self.policy(messages, self.tool_names)
        d = _digest(messages)
        calls = [{"name": c["name"], "args": c["args"], "id": f"call_{self.role}_{d}_{i}", "type": "tool_call"}
                 for i, c in enumerate(out.tool_calls or [])]
        msg = AIMessage(content=out.content, tool_calls=calls, id=f"ai_{self.role}_{d}")
        return ChatResult(generations=[ChatGeneration(message=msg)])


def _ask(name: str, args: dict) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "_"}])


def _last_human(messages: Sequence[BaseMessage]) -> str:
    return next((str(m.content) for m in reversed(messages) if isinstance(m, HumanMessage)), "")


def worker_policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    """Looks up the tickets and refunds the orders the last user message names, then answers
    with what the tools returned (so a tool result flows into the reply)."""
    last = messages[-1]
    if isinstance(last, ToolMessage) and last.name in ("lookup", "refund"):
        done = []
        for m in reversed(messages):
            if not isinstance(m, ToolMessage):
                break
            done.append(str(m.content))
        return AIMessage(content="Result: " + "; ".join(reversed(done)))
    text = _last_human(messages)
    calls = [{"name": "lookup", "args": {"ticket": t}, "id": "_"} for t in re.findall(r"\bT\d\b", text)
             if "lookup" in tools]
    if (m := re.search(r"refund (\w+)", text)) and "refund" in tools:
        calls.append({"name": "refund", "args": {"order": m.group(1)}, "id": "_"})
    handed = isinstance(last, ToolMessage) and str(last.name).startswith("transfer_")
    if calls and (handed or not isinstance(last, ToolMessage)):
        return AIMessage(content="", tool_calls=calls)
    if "transfer_back_to_supervisor" in tools or not calls:
        return AIMessage(content=f"Noted: {text[-40:]}")
    return AIMessage(content="Nothing to do.")


def supervisor_policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, HumanMessage):
        text = str(last.content)
        worker = "worker_b" if "refund" in text else "worker_a"
        if re.search(r"\bT\d\b|refund", text) and f"transfer_to_{worker}" in tools:
            return _ask(f"transfer_to_{worker}", {})
        return AIMessage(content=f"Supervisor: {text[-30:]}")
    said = [m for m in messages if isinstance(m, AIMessage) and m.content and not m.tool_calls]
    return AIMessage(content="Done: " + (str(said[-1].content)[:60] if said else "nothing"))


def swarm_policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    """alice looks tickets up and hands refunds to bob; bob refunds and hands the rest back."""
    last = messages[-1]
    text = _last_human(messages)
    if isinstance(last, HumanMessage):
        if "refund" in text and "transfer_to_bob" in tools:
            return _ask("transfer_to_bob", {})
        if re.search(r"\bT\d\b", text) and "transfer_to_alice" in tools:
            return _ask("transfer_to_alice", {})
    return worker_policy(messages, tools)


def outer_policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(content="Outer: " + str(last.content))
    text = str(last.content)
    if re.search(r"\bT\d\b|refund", text):
        return _ask("ask_specialist", {"question": text})
    return AIMessage(content=f"Outer: {text[-30:]}")


def build(shape: str, world: World, *, middleware: Callable[[], list], checkpointer: Any) -> Any:
    """The compiled graph the application invokes for ``shape`` (module docstring)."""
    tools = world.tools()
    if shape == "agent":
        return create_agent(HostedChatModel(policy=worker_policy, role="agent"), tools, middleware=middleware(),
                            checkpointer=checkpointer)
    if shape == "deep":
        from deepagents import create_deep_agent

        return create_deep_agent(model=HostedChatModel(policy=worker_policy, role="deep"), tools=tools,
                                 middleware=middleware(), checkpointer=checkpointer)
    if shape == "supervisor":
        from langgraph_supervisor import create_supervisor

        a = create_agent(HostedChatModel(policy=worker_policy, role="a"), tools[:1], middleware=middleware(),
                         name="worker_a")
        b = create_agent(HostedChatModel(policy=worker_policy, role="b"), tools, middleware=middleware(),
                         name="worker_b")
        return create_supervisor([a, b], model=HostedChatModel(policy=supervisor_policy, role="sup")).compile(
            checkpointer=checkpointer)
    if shape == "swarm":
        from langgraph_swarm import create_handoff_tool, create_swarm

        alice = create_agent(HostedChatModel(policy=swarm_policy, role="alice"),
                             [tools[0], create_handoff_tool(agent_name="bob")], middleware=middleware(), name="alice")
        bob = create_agent(HostedChatModel(policy=swarm_policy, role="bob"),
                           [tools[1], create_handoff_tool(agent_name="alice")], middleware=middleware(), name="bob")
        return create_swarm([alice, bob], default_active_agent="alice").compile(checkpointer=checkpointer)
    if shape == "tool_subagent":
        inner = create_agent(HostedChatModel(policy=worker_policy, role="inner"), tools, middleware=middleware(),
                             name="specialist")

        def ask_specialist(question: str) -> str:
            """Ask the specialist agent."""
            return str(inner.invoke({"messages": [HumanMessage(question)]})["messages"][-1].content)

        return create_agent(HostedChatModel(policy=outer_policy, role="outer"),
                            [StructuredTool.from_function(ask_specialist)], middleware=middleware(),
                            checkpointer=checkpointer)
    if shape == "graph_node":
        from langgraph.graph import START, MessagesState, StateGraph

        inner = create_agent(HostedChatModel(policy=worker_policy, role="node"), tools, middleware=middleware(),
                             name="assistant")
        g = StateGraph(MessagesState)
        g.add_node("assistant", inner)
        g.add_edge(START, "assistant")
        return g.compile(checkpointer=checkpointer)
    raise ValueError(f"unknown shape {shape!r}")


TURNS = ("hello", "look at T1", "look at T2", "refund A7", "thanks, bye")


def run(app: Any, thread: str, turns: Sequence[str]) -> None:
    for text in turns:
        app.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})


def normalized(app: Any, thread: str) -> dict[str, Any]:
    """What a forget is compared on: every state key, messages as (type, content, tool calls)."""
    values = app.get_state({"configurable": {"thread_id": thread}}).values
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key == "messages":
            out[key] = [(type(m).__name__, str(m.content),
                         [(c["name"], json.dumps(c["args"], sort_keys=True)) for c in getattr(m, "tool_calls", None)
                          or []]) for m in value]
        else:
            out[key] = json.dumps(value, sort_keys=True, default=str)
    return out


def reference(shape: str, turns: Sequence[str], checkpointer: Any, *, middleware: Callable[[], list] = list
              ) -> tuple[dict[str, Any], World]:
    """B5, independently: the same shape run from scratch on a fresh thread in a world whose
    records never held the secret (the tool returns the text with it removed)."""
    world = World(secret=None)
    app = build(shape, world, middleware=middleware, checkpointer=checkpointer)
    run(app, "reference", turns)
    return normalized(app, "reference"), world


def file_copies(roots: Sequence[Path], needle: str) -> dict[str, int]:
    """Raw copies of ``needle`` in every file under ``roots`` (bytes, UTF-8), per file."""
    raw = needle.encode()
    out = {}
    for root in roots:
        for p in sorted(Path(root).rglob("*")):
            if p.is_file():
                n = p.read_bytes().count(raw)
                if n:
                    out[str(p)] = n
    return out


def sqlite_saver(path: Path):
    from langgraph.checkpoint.sqlite import SqliteSaver

    return SqliteSaver(sqlite3.connect(str(path), check_same_thread=False))


def home_app(shape: str):
    """A zero-argument factory of ``shape`` on the home the command line names ($UNSEE_HOME), its
    checkpoints in ``lg.sqlite`` there: what ``unsee forget --agent agent_shapes:<name>`` loads."""
    def factory():
        from unsee import Unsee, resolve_home

        u = Unsee(home=resolve_home())
        return build(shape, World(), middleware=lambda: [u.middleware()],
                     checkpointer=sqlite_saver(Path(resolve_home()) / "lg.sqlite"))
    return factory


supervisor_app = home_app("supervisor")
agent_app = home_app("agent")
