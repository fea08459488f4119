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

import json
import re
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool

from tests.support.transcript import last_human, trailing_results
from unsee.testing import ScriptedChatModel, TranscriptRejected  # noqa: F401

SECRET = "4417-2231"
SHAPES = ("agent", "deep", "supervisor", "swarm", "tool_subagent", "graph_node")
#: the shapes a forget can replay today; the others must be refused before anything changes (a
#: langgraph-supervisor supervisor takes no middleware: its own turns are not recorded)
REPLAYABLE = ("agent", "deep", "swarm", "tool_subagent", "graph_node")


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


# The test model is the one unsee ships for checking agents (``unsee.testing``): a reply is a
# function of the transcript, an unanswered tool call is rejected, every reply a new message.
HostedChatModel = ScriptedChatModel


def _ask(name: str, args: dict) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "_"}])


def worker_policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    """Looks up the tickets and refunds the orders the last user message names, then answers
    with what the tools returned (so a tool result flows into the reply)."""
    last = messages[-1]
    if isinstance(last, ToolMessage) and last.name in ("lookup", "refund"):
        return AIMessage(content="Result: " + "; ".join(trailing_results(messages)))
    text = last_human(messages)
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
    text = last_human(messages)
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


#: the connections ``sqlite_saver`` opened that ``close_savers`` has not closed yet
_OPEN_SAVERS: list[sqlite3.Connection] = []


def sqlite_saver(path: Path):
    """A ``SqliteSaver`` on ``path``; its connection is closed by ``close_savers`` (the forget
    suite's conftest calls it after each test)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(str(path), check_same_thread=False)
    _OPEN_SAVERS.append(conn)
    return SqliteSaver(conn)


def close_savers() -> None:
    """Close every connection ``sqlite_saver`` opened since the last call."""
    while _OPEN_SAVERS:
        _OPEN_SAVERS.pop().close()


def home_app(shape: str):
    """A zero-argument factory of ``shape`` on the home the command line names ($UNSEE_HOME), its
    checkpoints in ``lg.sqlite`` there: what ``unsee forget --agent tests.support.agent_shapes:<name>`` loads."""
    def factory():
        from unsee import Unsee, resolve_home

        u = Unsee(home=resolve_home())
        return build(shape, World(), middleware=lambda: [u.middleware()],
                     checkpointer=sqlite_saver(Path(resolve_home()) / "lg.sqlite"))
    return factory


supervisor_app = home_app("supervisor")
agent_app = home_app("agent")


# -- graphs without create_agent: a hand-written StateGraph, create_react_agent -----------------
import operator  # noqa: E402  (the state schema below is evaluated from this module's globals)
from typing import Annotated  # noqa: E402

from langgraph.graph import MessagesState  # noqa: E402

SUPPORT_PROMPT = "You are a support agent."


class TicketState(MessagesState):
    """A ``MessagesState`` with keys of the graph's own: how many model calls it made, and the
    notes its model node keeps (each final reply: a tool result flows into them)."""

    model_calls: Annotated[int, operator.add]
    notes: Annotated[list[str], operator.add]


def build_state_graph(world: World, *, u: Any = None, checkpointer: Any, role: str = "graph") -> Any:
    """A hand-written ``StateGraph``: a model node calling ``model.bind_tools(tools)``, a
    ``ToolNode``, ``tools_condition``, state keys of its own. With ``u`` its model is
    ``u.recorded_model(...)`` and its tool node ``u.tool_node(...)``; without, the same graph
    plain (what B5 runs)."""
    from langchain_core.messages import SystemMessage

    tools = world.tools()
    model = HostedChatModel(policy=worker_policy, role=role)
    llm = (u.recorded_model(model) if u is not None else model).bind_tools(tools)

    def call_model(state: dict) -> dict:
        reply = llm.invoke([SystemMessage(SUPPORT_PROMPT), *state["messages"]])
        out: dict[str, Any] = {"messages": [reply], "model_calls": 1}
        if not reply.tool_calls:
            out["notes"] = [str(reply.content)]
        return out

    return model_and_tools_graph(TicketState, call_model, tools, u=u, checkpointer=checkpointer)


def model_and_tools_graph(state: type, call_model: Any, tools: list, *, u: Any, checkpointer: Any) -> Any:
    """START -> ``call_model`` -> ``tools_condition`` -> a ``ToolNode`` (``u.tool_node`` with
    ``u``) -> back to the model: the hand-written loop LangGraph's docs build."""
    from langgraph.graph import START, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    g = StateGraph(state)
    g.add_node("model", call_model)
    g.add_node("tools", u.tool_node(tools) if u is not None else ToolNode(tools))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition)
    g.add_edge("tools", "model")
    return g.compile(checkpointer=checkpointer)


def build_react_agent(world: World, *, u: Any = None, checkpointer: Any, role: str = "react") -> Any:
    """``langgraph.prebuilt.create_react_agent`` over the same tools, with a prompt; recorded with
    ``u`` (``u.recorded_model``, ``u.tool_node``), plain without."""
    import warnings

    from langgraph.prebuilt import ToolNode

    tools = world.tools()
    model = HostedChatModel(policy=worker_policy, role=role)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (moved to langchain.agents, still what many graphs use)
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(u.recorded_model(model) if u is not None else model,
                                  u.tool_node(tools) if u is not None else ToolNode(tools),
                                  prompt=SUPPORT_PROMPT, checkpointer=checkpointer)


# -- data flow through state keys besides messages (tests/forget/test_state_flow.py) -------------
#: the secret goes from a tool result into state (a file, a todo) in turn 2 and comes back from
#: there in turn 4, whose model sees only its own turn (a one-turn window)
STATE_TURNS = ("hello", "look at T1 and save it", "look at T2", "what did I save?", "thanks, bye")


def _tool_text(messages: Sequence[BaseMessage], name: str) -> str:
    return next((str(m.content) for m in reversed(messages) if isinstance(m, ToolMessage) and m.name == name), "")


def notes_policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    """Looks tickets up; "save" writes what the lookup returned to /notes.txt (``write_file``);
    "what did I save?" reads the file back (``read_file``) and answers with it."""
    last, text = messages[-1], last_human(messages)
    if isinstance(last, ToolMessage):
        if last.name == "lookup" and "save" in text:
            return _ask("write_file", {"file_path": "/notes.txt", "content": str(last.content)})
        if last.name == "write_file":
            return AIMessage(content="Saved to /notes.txt.")
        if last.name == "read_file":
            return AIMessage(content="Your notes: " + str(last.content))
        return AIMessage(content="Result: " + str(last.content))
    if "what did I save" in text:
        return _ask("read_file", {"file_path": "/notes.txt"})
    if tickets := re.findall(r"\bT\d\b", text):
        return _ask("lookup", {"ticket": tickets[0]})
    return AIMessage(content=f"Noted: {text[-40:]}")


def todo_policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    """Looks tickets up; "save" puts a todo holding what the lookup returned on the list
    (``write_todos``); "what did I save?" answers from the todo list its system prompt shows."""
    last, text = messages[-1], last_human(messages)
    if isinstance(last, ToolMessage):
        if last.name == "lookup" and "save" in text:
            return _ask("write_todos", {"todos": [{"content": f"call back: {last.content}", "status": "pending"}]})
        if last.name == "write_todos":
            return AIMessage(content="On the list.")
        return AIMessage(content="Result: " + str(last.content))
    if "what did I save" in text:
        system = next((str(m.content) for m in messages if type(m).__name__ == "SystemMessage"), "")
        listed = system.split("Current todos:", 1)[1].strip() if "Current todos:" in system else "nothing"
        return AIMessage(content="Saved: " + listed)
    if tickets := re.findall(r"\bT\d\b", text):
        return _ask("lookup", {"ticket": tickets[0]})
    return AIMessage(content=f"Noted: {text[-40:]}")


def todos_in_prompt():
    """A middleware that shows the agent's todo list in its system prompt (what planning
    harnesses do), as an application writes one."""
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import SystemMessage

    class TodosInPrompt(AgentMiddleware):
        def wrap_model_call(self, request, handler):
            todos = (request.state or {}).get("todos") or []
            if not todos:
                return handler(request)
            listed = "\n".join(f"- {t['content']} ({t['status']})" for t in todos)
            base = request.system_message.text if request.system_message is not None else ""
            return handler(request.override(system_message=SystemMessage(f"{base}\n\nCurrent todos:\n{listed}")))

    return TodosInPrompt()


def build_state_flow(kind: str, world: World, *, middleware: Callable[[], list], checkpointer: Any) -> Any:
    """``files``: a deepagents agent whose model saves a tool result in a file and reads it back;
    ``todos``: a ``create_agent`` with ``TodoListMiddleware`` whose todo list, shown in the system
    prompt, holds it. Both see a one-turn window (``RecentTurns(1)``, outer to ``middleware``)."""
    from unsee.eval.window import RecentTurns

    if kind == "files":
        from deepagents import create_deep_agent

        return create_deep_agent(model=HostedChatModel(policy=notes_policy, role="notes"), tools=world.tools(),
                                 middleware=[RecentTurns(1), *middleware()], checkpointer=checkpointer)
    if kind == "todos":
        from langchain.agents.middleware import TodoListMiddleware

        return create_agent(HostedChatModel(policy=todo_policy, role="todo"), world.tools(),
                            middleware=[TodoListMiddleware(), todos_in_prompt(), RecentTurns(1), *middleware()],
                            checkpointer=checkpointer)
    if kind == "channel":
        return create_agent(HostedChatModel(policy=channel_policy, role="channel"),
                            [*world.tools(), *channel_tools(world)], state_schema=NotesState,
                            middleware=[RecentTurns(1), *middleware()], checkpointer=checkpointer)
    raise ValueError(f"unknown state-flow agent {kind!r}")


def channel_policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    """"save" has ``save_ticket`` copy a ticket's record into the ``notes`` channel itself (the
    model never sees it); "what did I save?" reads it back (``read_saved``) and answers with it."""
    last, text = messages[-1], last_human(messages)
    if isinstance(last, ToolMessage):
        if last.name == "read_saved":
            return AIMessage(content="Saved: " + str(last.content))
        return AIMessage(content="Done: " + str(last.content))
    if "what did I save" in text:
        return _ask("read_saved", {})
    if tickets := re.findall(r"\bT\d\b", text):
        return _ask("save_ticket" if "save" in text else "lookup", {"ticket": tickets[0]})
    return AIMessage(content=f"Noted: {text[-40:]}")


from typing import NotRequired  # noqa: E402

from langchain.agents import AgentState  # noqa: E402


class NotesState(AgentState):
    """An agent's state with a custom channel a tool writes."""

    notes: NotRequired[str]


from typing import Annotated  # noqa: E402  (the tools' annotations are resolved in this module)

from langchain_core.tools import InjectedToolCallId, tool  # noqa: E402
from langgraph.prebuilt import InjectedState  # noqa: E402
from langgraph.types import Command  # noqa: E402


def channel_tools(world: World) -> list[StructuredTool]:
    """A tool that writes a record into the custom ``notes`` channel (``Command(update=...)``) and
    one that reads the channel (``InjectedState``)."""

    @tool
    def save_ticket(ticket: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Save a support ticket's record in the notes."""
        return Command(update={"notes": world.records.get(ticket, ""),
                               "messages": [ToolMessage("Saved.", tool_call_id=tool_call_id)]})

    @tool
    def read_saved(state: Annotated[dict, InjectedState]) -> str:
        """Read the saved notes."""
        return state.get("notes") or "nothing saved"

    return [save_ticket, read_saved]


def state_values(app: Any, thread: str) -> dict[str, Any]:
    """``normalized``, with each file of ``files`` as its text only (its timestamps are the time
    it was written, which no replay reproduces)."""
    out = normalized(app, thread)
    files = app.get_state({"configurable": {"thread_id": thread}}).values.get("files")
    if files is not None:
        out["files"] = {path: (data or {}).get("content") for path, data in files.items()}
    return out


def state_flow_reference(kind: str, turns: Sequence[str], checkpointer: Any) -> tuple[dict[str, Any], World]:
    """B5 for ``build_state_flow``, independently: run from scratch in a world whose records never
    held the secret, with no unsee middleware at all."""
    world = World(secret=None)
    app = build_state_flow(kind, world, middleware=list, checkpointer=checkpointer)
    run(app, "reference", turns)
    return state_values(app, "reference"), world


# -- human approvals and run inputs as LangGraph got them (tests/forget/test_run_inputs.py) -------
def card_policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    """"refund the card on T1": looks the ticket up, then refunds the card found there
    (``card-<number>``, ``card-none`` without one), so the action a human approves depends on a
    tool result; anything else as ``worker_policy``."""
    last = messages[-1]
    if isinstance(last, ToolMessage) and last.name == "lookup" and "card on" in last_human(messages):
        m = re.search(r"card (\d[\d-]*)", str(last.content))
        return AIMessage(content="", tool_calls=[{"name": "refund", "args": {"order": f"card-{m.group(1) if m else 'none'}"},
                                                  "id": "_"}])
    if isinstance(last, HumanMessage) and "card on" in str(last.content):
        return _ask("lookup", {"ticket": re.search(r"\bT\d\b", str(last.content)).group(0)})
    return worker_policy(messages, tools)


def hitl_agent(world: World, *, middleware: Sequence[Any] = (), checkpointer: Any, policy: Any = worker_policy,
               tools: Sequence[Any] | None = None, state_schema: Any = None, role: str = "hitl") -> Any:
    """``create_agent`` whose ``refund`` waits for a human's approval
    (``HumanInTheLoopMiddleware(interrupt_on={"refund": True})``), after ``middleware``."""
    from langchain.agents.middleware import HumanInTheLoopMiddleware

    kw = {"state_schema": state_schema} if state_schema is not None else {}
    return create_agent(HostedChatModel(policy=policy, role=role), list(tools) if tools is not None else world.tools(),
                        middleware=[*middleware, HumanInTheLoopMiddleware(interrupt_on={"refund": True})],
                        checkpointer=checkpointer, **kw)


def give(app: Any, thread: str, steps: Sequence[Any]) -> None:
    """Run ``steps`` on ``thread``: a string is a user turn, a dict with ``type`` a human's decision
    at the pending approval (``Command(resume={"decisions": [...]})``), anything else the input
    as it is (a state update with keys of its own, a ``Command``)."""
    from langgraph.types import Command

    cfg = {"configurable": {"thread_id": thread}}
    for step in steps:
        if isinstance(step, str):
            app.invoke({"messages": [HumanMessage(step)]}, cfg)
        elif isinstance(step, dict) and "type" in step:
            app.invoke(Command(resume={"decisions": [step]}), cfg)
        else:
            app.invoke(step, cfg)


def pending_questions(app: Any, thread: str) -> list[Any]:
    """The values of the interrupts ``thread`` waits at (what a human is asked), JSON-normalised."""
    snap = app.get_state({"configurable": {"thread_id": thread}})
    return json.loads(json.dumps([i.value for i in snap.interrupts], sort_keys=True, default=str))
