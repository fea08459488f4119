"""Tools that change the agent's state, answered by a forget's replay as they were in the run.

- a tool a middleware adds (``TodoListMiddleware``'s ``write_todos``) or a harness adds
  (deepagents' ``write_file`` / ``read_file``), or one that returns a ``Command``, is a
  state effect: the replay runs it again, so its update reaches the counterfactual state
  exactly as B5's run made it;
- a call unsee never saw run (a structured-output call, a call a limit middleware
  blocked) is never reported as a fired side effect;
- an undeclared tool is assumed external: the report names it, and a call answered from
  the record gets the original message back (content blocks, artifact, status);
- an observation of the clean prefix (before the target's entry) is reused verbatim, a
  failure included, never merged with a later identical success.

Every forget is compared with B5 computed independently (the same agent run from scratch on a
fresh thread, in a world whose records never held the secret), in every state key; side effects
are counted in the test's own world.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain.agents.middleware import TodoListMiddleware, ToolCallLimitMiddleware, ToolRetryMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from tests.support.agent_shapes import SECRET, HostedChatModel, World
from unsee import RevocationEvent, Unsee
from unsee.middleware.messages import tool_message_of
from unsee.middleware.tools import effect_basis


def _since_human(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for m in reversed(messages):
        if isinstance(m, HumanMessage):
            break
        out.append(m)
    return out[::-1]


def _last_human(messages: Sequence[BaseMessage]) -> str:
    return next((str(m.content) for m in reversed(messages) if isinstance(m, HumanMessage)), "")


def _last_lookup(messages: Sequence[BaseMessage]) -> str:
    return next((str(m.content) for m in reversed(messages) if isinstance(m, ToolMessage) and m.name == "lookup"),
                "nothing looked up")


def _ask(*calls: tuple[str, dict]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": "_"} for n, a in calls])


def staged_policy(write: Callable[[list[BaseMessage], str], tuple[str, dict] | None]) -> Callable:
    """A model that works through the last user message in stages, one tool call a step: first
    ``write(messages, text)`` (a state tool, when it asks for one), then a lookup per ticket the
    message names, then a refund, then a reply quoting what the tools returned this turn."""
    def policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
        text = _last_human(messages)
        turn = _since_human(messages)
        done = [(m.name, str(m.content)) for m in turn if isinstance(m, ToolMessage)]
        names = [n for n, _ in done]
        if turn and isinstance(turn[-1], ToolMessage) and turn[-1].status == "error":  # ask again, once
            failed = next(c for m in turn for c in getattr(m, "tool_calls", None) or []
                          if c["id"] == turn[-1].tool_call_id)
            return _ask((failed["name"], failed["args"]))
        wanted = write(list(messages), text)
        if wanted is not None and wanted[0] not in names and wanted[0] in tools:
            return _ask(wanted)
        for t in re.findall(r"\bT\d\b", text):
            if ("lookup", {"ticket": t}) not in [(c["name"], c["args"]) for m in turn
                                                 for c in getattr(m, "tool_calls", None) or []]:
                return _ask(("lookup", {"ticket": t}))
        if (m := re.search(r"refund (\w+)", text)) and "refund" not in names:
            return _ask(("refund", {"order": m.group(1)}))
        return AIMessage(content="Result: " + "; ".join(c for _, c in done) if done else f"Noted: {text}")
    return policy


def todo_write(messages: list[BaseMessage], text: str) -> tuple[str, dict] | None:
    """``plan X``: write the todo list, noting what was last looked up (the secret, once seen)."""
    if (m := re.search(r"plan (\w+)", text)) is None:
        return None
    return "write_todos", {"todos": [{"content": f"handle {m.group(1)} (last seen: {_last_lookup(messages)})",
                                      "status": "in_progress"}]}


def file_write(messages: list[BaseMessage], text: str) -> tuple[str, dict] | None:
    """``save``: once this turn's lookups are done, write what was last looked up to /notes.md
    (overwriting it: edit_file); ``read notes``: read it back."""
    if "save" in text and isinstance(messages[-1], ToolMessage) and messages[-1].name == "lookup":
        written = any(isinstance(m, ToolMessage) and m.name == "write_file" for m in messages)
        if written:
            old = next(c["args"].get("content") or c["args"].get("new_string") for m in reversed(messages)
                       for c in getattr(m, "tool_calls", None) or [] if c["name"] in ("write_file", "edit_file"))
            return "edit_file", {"file_path": "/notes.md", "old_string": old, "new_string": _last_lookup(messages)}
        return "write_file", {"file_path": "/notes.md", "content": _last_lookup(messages)}
    if "read notes" in text:
        return "read_file", {"file_path": "/notes.md"}
    return None


def run(app: Any, thread: str, turns: Sequence[str]) -> None:
    for text in turns:
        app.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})


def _value(key: str, value: Any) -> Any:
    if key == "files":  # deepagents stamps each file with the wall clock: compare the rest
        return {p: {k: v for k, v in f.items() if k not in ("created_at", "modified_at")} for p, f in value.items()}
    return value


def normalized(app: Any, thread: str) -> dict[str, Any]:
    """Every state key; messages as (type, content, status, tool calls)."""
    values = app.get_state({"configurable": {"thread_id": thread}}).values
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key == "messages":
            out[key] = [(type(m).__name__, json.dumps(m.content, sort_keys=True, default=str),
                         getattr(m, "status", None),
                         [(c["name"], json.dumps(c["args"], sort_keys=True)) for c in getattr(m, "tool_calls", None)
                          or []]) for m in value]
        else:
            out[key] = json.dumps(_value(key, value), sort_keys=True, default=str)
    return out


class Scenario:
    """One recorded session (thread "s") of ``build(world, middleware)`` and its independent B5."""

    def __init__(self, tmp, build: Callable[[World, list], Any], turns: Sequence[str],
                 world: Callable[..., World] = World):
        self.u = Unsee(home=tmp / "home")
        self.world = world()
        self.app = build(self.world, [self.u.middleware()])
        run(self.app, "s", turns)
        self.before = normalized(self.app, "s")
        self.fired = list(self.world.fired)
        self.ref_world = world(secret=None)
        ref = build(self.ref_world, [])
        run(ref, "reference", turns)
        self.ref = normalized(ref, "reference")

    def forget(self, strategy: str = "B7", source: str | None = None, **kw):
        return self.u.forget("s", RevocationEvent(target=SECRET, event_id=f"ev-{strategy}", source=source),
                             strategy=strategy, **kw)

    def check(self, report) -> None:
        assert report.committed
        now = normalized(self.app, "s")
        assert now == self.ref
        assert SECRET not in json.dumps(now)
        assert self.world.fired == self.fired  # (every real side effect fired once, in the run)


def todo_agent(world: World, middleware: list) -> Any:
    return create_agent(HostedChatModel(policy=staged_policy(todo_write), role="todo"), world.tools(),
                        middleware=[*middleware, TodoListMiddleware()], checkpointer=InMemorySaver())


# -- a tool a middleware adds: a state effect ----------------------------------------------------
def test_write_todos_is_a_state_effect_and_replays_for_real(tmp_path):
    agent = todo_agent(World(), [])
    tool = next(t for t in agent.builder.nodes["tools"].runnable.tools_by_name.values() if t.name == "write_todos")
    assert effect_basis(tool) == ("state", "command")  # (it returns a Command)


@pytest.mark.parametrize("strategy", ["B7", "B5'", "B5"])
def test_a_forget_with_a_todo_list_reaches_b5(tmp_path, strategy):
    # turn 3 plans (write_todos, before the target enters) then looks T1 up (the entry); turn 4
    # plans again with the secret in view: both todo lists must be the counterfactual's
    turns = ("hello", "look at T2", "plan A7 then look at T1", "plan B8", "refund A7", "bye")
    sc = Scenario(tmp_path, todo_agent, turns)
    assert SECRET in sc.before["todos"]
    report = sc.forget(strategy)
    sc.check(report)
    assert "write_todos" not in report.assumed_external
    assert not report.orphaned_side_effects


def test_a_tool_returning_a_command_is_recorded_as_one(tmp_path):
    sc = Scenario(tmp_path, todo_agent, ("plan A7",))
    g = sc.u.graph("s")
    ret = next(a for a in g if a.type.value == "tool_return" and a.attrs.get("tool") == "write_todos")
    assert ret.attrs["command"] is True and ret.attrs["update_keys"] == ["todos", "messages"]
    assert ret.attrs["effect"] == "state"


# -- a harness's tools (deepagents' virtual file system) ------------------------------------------
def deep_agent(world: World, middleware: list) -> Any:
    from deepagents import create_deep_agent

    return create_deep_agent(model=HostedChatModel(policy=staged_policy(file_write), role="deep"),
                             tools=world.tools(), middleware=middleware, checkpointer=InMemorySaver())


def test_deepagents_file_tools_are_state_effects(tmp_path):
    agent = deep_agent(World(), [Unsee(home=tmp_path / "h").middleware()])
    from unsee.middleware.harness import register_graph

    register_graph(agent)
    tools = agent.builder.nodes["tools"].runnable.tools_by_name
    assert {n: effect_basis(tools[n])[0] for n in ("ls", "read_file", "write_file", "edit_file", "glob", "grep",
                                                    "task")} == dict.fromkeys(
        ("ls", "read_file", "write_file", "edit_file", "glob", "grep", "task"), "state")
    assert effect_basis(tools["lookup"]) == ("read", "declared")


@pytest.mark.parametrize("strategy", ["B7", "B5"])
def test_a_forget_with_deepagents_files_reaches_b5(tmp_path, strategy):
    turns = ("hello", "look at T2 and save", "look at T1 and save", "read notes", "refund A7", "bye")
    sc = Scenario(tmp_path, deep_agent, turns)
    assert SECRET in sc.before["files"]
    report = sc.forget(strategy, source="tool:lookup")  # (read_file gives it back from the state too)
    sc.check(report)
    assert not {"write_file", "read_file"} & set(report.assumed_external)


# -- handoffs: the tool message answering this call ---------------------------------------------
def test_the_answer_of_a_command_is_the_one_for_this_call():
    history = [HumanMessage("hi", id="h"), AIMessage("", id="a", tool_calls=[
        {"name": "transfer_to_bob", "args": {}, "id": "c2", "type": "tool_call"}]),
        ToolMessage("earlier answer", tool_call_id="c1", name="lookup"),
        ToolMessage("Successfully transferred to bob", tool_call_id="c2", name="transfer_to_bob")]
    cmd = Command(graph=Command.PARENT, goto="bob", update={"messages": history, "active_agent": "bob"})
    assert tool_message_of(cmd, "c2").content == "Successfully transferred to bob"
    assert tool_message_of(cmd, "c9") is None
    assert tool_message_of(Command(update=[("messages", history[2:3])]), "c1").content == "earlier answer"


# -- calls unsee never saw run are not fired ----------------------------------------------------
@pytest.mark.parametrize("first", ["look at T1", "look at T2"])
@pytest.mark.parametrize("strategy", ["B7", "B5"])
def test_structured_output_and_blocked_calls_are_not_orphaned(tmp_path, strategy, first):
    from pydantic import BaseModel

    from langchain.agents.structured_output import ToolStrategy

    class Answer(BaseModel):
        """The final answer."""
        text: str

    def policy(messages, tools):
        text = _last_human(messages)
        turn = _since_human(messages)
        if not any(isinstance(m, ToolMessage) for m in turn) and (calls := _asked(text, "refund")):
            return _ask(*calls)
        if "Answer" in tools:
            return _ask(("Answer", {"text": "done: " + "; ".join(str(m.content) for m in turn
                                                                   if isinstance(m, ToolMessage))[:80]}))
        return AIMessage(content="ok")

    def build(world, middleware):
        return create_agent(HostedChatModel(policy=policy, role="so"), world.tools(),
                            middleware=[*middleware, ToolCallLimitMiddleware(tool_name="refund", run_limit=1)],
                            response_format=ToolStrategy(Answer), checkpointer=InMemorySaver())

    # (the target enters in the first turn, or in the second: B7 forks after a structured answer)
    turns = (first, "look at T2" if first == "look at T1" else "look at T1", "refund A7 and refund B8", "thanks")
    sc = Scenario(tmp_path, build, turns)
    assert sc.world.fired == ["A7"]  # (B8 was blocked by the limit)
    report = sc.forget(strategy)
    sc.check(report)
    assert [o.tool for o in report.orphaned_side_effects] == []
    assert "Answer" not in report.assumed_external


# -- undeclared tools: assumed external, answered with the original message ------------------------
class BlockWorld(World):
    """A world with an undeclared tool that answers with content blocks and an artifact."""

    def tools(self) -> list[StructuredTool]:
        def status(order: str) -> tuple[list[dict], dict]:
            """Order status (a remote service: undeclared)."""
            self.fired.append(f"status:{order}")
            return [{"type": "text", "text": f"order {order}: "}, {"type": "text", "text": "shipped"}], {"raw": order}

        return [*super().tools(), StructuredTool.from_function(status, response_format="content_and_artifact")]


def _asked(text: str, order_tool: str) -> list[tuple[str, dict]]:
    """The calls a user's text asks for: ``lookup`` of each ticket named (``T1``), and
    ``order_tool`` of each order after its name (``refund A7``, ``status A7``)."""
    return ([("lookup", {"ticket": t}) for t in re.findall(r"\bT\d\b", text)]
            + [(order_tool, {"order": o}) for o in re.findall(rf"{order_tool} (\w+)", text)])


def status_policy(messages, tools):
    text = _last_human(messages)
    turn = _since_human(messages)
    if not any(isinstance(m, ToolMessage) for m in turn) and (calls := _asked(text, "status")):
        return _ask(*calls)
    return AIMessage(content=f"{len(turn)} steps")  # (the reply does not quote the secret)


def status_agent(world, middleware):
    return create_agent(HostedChatModel(policy=status_policy, role="blocks"), world.tools(), middleware=middleware,
                        checkpointer=InMemorySaver())


def test_an_undeclared_tool_is_assumed_external_and_answered_with_its_original_message(tmp_path):
    sc = Scenario(tmp_path, status_agent, ("look at T1", "status A7", "bye"), world=BlockWorld)
    report = sc.forget("B7")
    sc.check(report)
    assert report.assumed_external == ["status"]
    msgs = sc.app.get_state({"configurable": {"thread_id": "s"}}).values["messages"]
    answer = next(m for m in msgs if isinstance(m, ToolMessage) and m.name == "status")
    assert answer.content == [{"type": "text", "text": "order A7: "}, {"type": "text", "text": "shipped"}]
    assert answer.artifact == {"raw": "A7"}
    assert sc.world.fired.count("status:A7") == 1


# -- the clean prefix is reused verbatim, failures included --------------------------------------
class FlakyWorld(World):
    """``lookup`` of T9 fails the first time it is asked (a service hiccup)."""

    def __init__(self, secret: str | None = SECRET):
        super().__init__(secret)
        self.asked: list[str] = []

    def tools(self) -> list[StructuredTool]:
        read, money = super().tools()
        inner = read.func

        def lookup(ticket: str) -> str:
            """Look up a support ticket."""
            self.asked.append(ticket)
            if ticket == "T9" and self.asked.count("T9") == 1:
                raise ConnectionError("ticket service unavailable")
            return inner(ticket)

        return [StructuredTool.from_function(lookup, metadata=dict(read.metadata)), money]


def retry_policy(messages, tools):
    """Looks up what the message names; after a failed lookup, asks again (once)."""
    text = _last_human(messages)
    turn = _since_human(messages)
    asked = [c["args"]["ticket"] for m in turn for c in getattr(m, "tool_calls", None) or []]
    last = turn[-1] if turn else None
    if isinstance(last, ToolMessage) and last.status == "error":
        return _ask(("lookup", {"ticket": asked[-1]}))
    for t in re.findall(r"\bT\d\b", text):
        if t not in asked:
            return _ask(("lookup", {"ticket": t}))
    done = [str(m.content) for m in turn if isinstance(m, ToolMessage)]
    return AIMessage(content="Result: " + "; ".join(done) if done else "Noted.")


def flaky_todo_agent(world: World, middleware: list) -> Any:
    return create_agent(HostedChatModel(policy=staged_policy(todo_write), role="flakytodo"), world.tools(),
                        middleware=[*middleware, TodoListMiddleware(),
                                    ToolRetryMiddleware(max_retries=0, on_failure="return_message")],
                        checkpointer=InMemorySaver())


BEFORE = st.sampled_from(["hello", "look at T2", "look at T9", "plan A7", "plan B8 then look at T9",
                          "refund A7", "look at T9 and T2"])
#: (after the entry, T9's failure is left out: a run that diverged from the record asks the live
#: world again, and a failure that happened once does not happen again there)
AFTER = st.sampled_from(["hello", "look at T2", "plan A7", "refund A7", "plan B8 then look at T2", "bye"])


@st.composite
def sessions(draw):
    entry = draw(st.sampled_from(["look at T1", "look at T9 then T1", "plan C9 then look at T1"]))
    turns = [*draw(st.lists(BEFORE, max_size=3)), entry, *draw(st.lists(AFTER, min_size=1, max_size=3))]
    return turns, draw(st.sampled_from(["B7", "B5'"]))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=sessions())
def test_property_state_tools_and_failures_reach_b5(tmp_path_factory, case):
    """Random sessions of an agent with a todo list and a flaky lookup (T9 fails the first time):
    the forget equals B5 computed independently, and nothing is fired or asked again."""
    turns, strategy = case
    sc = Scenario(tmp_path_factory.mktemp("s"), flaky_todo_agent, turns, world=FlakyWorld)
    sc.check(sc.forget(strategy))


@pytest.mark.parametrize("strategy", ["B7", "B5'"])
def test_a_prefix_failure_is_reused_verbatim(tmp_path, strategy):
    """T9 fails, is asked again and answers, then T1 brings the secret: in the replay the first
    T9 call (before the entry, same turn as the fork) is answered with its recorded failure,
    never run again (it would now succeed) nor merged with the later success."""
    def build(world, middleware):
        return create_agent(HostedChatModel(policy=retry_policy, role="flaky"), world.tools(),
                            middleware=[*middleware, ToolRetryMiddleware(max_retries=0, on_failure="return_message")],
                            checkpointer=InMemorySaver())

    sc = Scenario(tmp_path, build, ("hello", "look at T9 then T1", "bye"), world=FlakyWorld)
    assert sc.world.asked == ["T9", "T9", "T1"]
    report = sc.forget(strategy)
    sc.check(report)
    assert sc.world.asked == ["T9", "T9", "T1"]  # (nothing asked again: the prefix is the record's)


def test_a_swarm_handoff_is_recorded_as_a_state_effect_with_its_own_answer(tmp_path):
    """A swarm handoff returns a Command whose update carries the whole history: the return
    recorded for the call is the handoff's own tool message, and a forget runs it again."""
    from tests.support.agent_shapes import TURNS, build as build_shape, normalized as shape_state, reference, run as run_shape

    u = Unsee(home=tmp_path / "home")
    world = World()
    app = build_shape("swarm", world, middleware=lambda: [u.middleware()], checkpointer=InMemorySaver())
    run_shape(app, "s", TURNS)
    g = u.graph("s")
    ret = next(a for a in g if a.type.value == "tool_return" and a.attrs.get("tool") == "transfer_to_bob")
    assert (ret.attrs["effect"], ret.attrs["command"], ret.attrs["update_keys"]) == (
        "state", True, ["messages", "active_agent"])
    assert "transferred to bob" in g.content(ret.id).lower()
    report = u.forget("s", RevocationEvent(target=SECRET, event_id="ev-1"))
    assert report.committed and not report.orphaned_side_effects and report.assumed_external == []
    assert any(e.startswith("transfer_to_bob:") for e in report.outcome.executed)
    assert shape_state(app, "s") == reference("swarm", TURNS, InMemorySaver())[0]
    assert world.fired == ["A7"]


def test_a_custom_middleware_tool_is_a_state_effect_unless_it_declares_one(tmp_path):
    from langchain.agents.middleware import AgentMiddleware

    from unsee.middleware.harness import middleware_of, register_graph

    def note(text: str) -> str:
        """Take a note."""
        return "noted"

    def peek(text: str) -> str:
        """Peek."""
        return "peeked"

    class Notes(AgentMiddleware):
        tools = [StructuredTool.from_function(note),
                 StructuredTool.from_function(peek, metadata={"unsee.effect": "read"})]

        def before_model(self, state, runtime):  # (a hook: the graph holds the middleware through it)
            return None

    class Silent(AgentMiddleware):  # (adds a tool and hooks nothing: the graph does not hold it)
        tools = [StructuredTool.from_function(note, name="silent_note")]

    notes, silent = Notes(), Silent()
    app = create_agent(HostedChatModel(policy=staged_policy(todo_write)), World().tools(),
                       middleware=[Unsee(home=tmp_path / "h").middleware(), notes, silent])
    assert notes in middleware_of(app) and silent not in middleware_of(app)
    register_graph(app)
    tools = app.builder.nodes["tools"].runnable.tools_by_name
    assert effect_basis(tools["note"]) == ("state", "harness")
    assert effect_basis(tools["peek"]) == ("read", "declared")
    assert effect_basis(tools["silent_note"]) == (None, "assumed")
    assert effect_basis(tools["lookup"]) == ("read", "declared")


def test_the_cli_report_names_the_tools_assumed_external():
    import io

    from rich.console import Console

    from unsee.plugins.forget import ForgetReport
    from unsee.report_view import render_report

    report = ForgetReport(session_id="s", strategy="B7", event_id="e", target_hash="h", tau=3, closure_size=4,
                          checkpoint_id=None, checkpoint_kind=None, committed=True,
                          assumed_external=["order_status", "send_fax"])
    buf = io.StringIO()
    Console(file=buf, width=100, color_system=None).print(render_report(report))
    out = buf.getvalue()
    assert "assumed external" in out and "order_status, send_fax" in out
    assert all(len(line) <= 100 for line in out.splitlines())
    assert "assumed_external" in report.model_dump_json()


@pytest.mark.parametrize("strategy", ["B7", "B5"])
def test_a_structured_answer_answered_from_the_record_gets_its_tool_message(tmp_path, strategy):
    """With a window that hides the target from later turns, B7 answers their model calls from
    the record; a recorded structured-output call then goes through the agent's own output
    handling (its tool message and ``structured_response``), as in the run."""
    from pydantic import BaseModel

    from langchain.agents.structured_output import ToolStrategy
    from unsee.eval.window import RecentTurns

    class Answer(BaseModel):
        """The final answer."""
        text: str

    def policy(messages, tools):
        turn = _since_human(messages)
        text = _last_human(messages)
        if (t := re.findall(r"\bT\d\b", text)) and not any(isinstance(m, ToolMessage) for m in turn):
            return _ask(*[("lookup", {"ticket": x}) for x in t])
        return _ask(("Answer", {"text": f"{text}: " + "; ".join(str(m.content) for m in turn
                                                                if isinstance(m, ToolMessage))}))

    def build(world, middleware):
        return create_agent(HostedChatModel(policy=policy, role="window"), world.tools(),
                            middleware=[RecentTurns(1), *middleware], response_format=ToolStrategy(Answer),
                            checkpointer=InMemorySaver())

    sc = Scenario(tmp_path, build, ("look at T1", "thanks", "look at T2"))
    report = sc.forget(strategy)
    sc.check(report)
    if strategy == "B7":
        assert report.model_turns_rematerialised >= 1


def test_the_dry_run_plan_names_the_tools_assumed_external(tmp_path):
    plan = Scenario(tmp_path, status_agent, ("look at T1", "status A7"), world=BlockWorld).forget(dry_run=True)
    assert plan.assumed_external == ["status"]
    plan = Scenario(tmp_path / "todo", todo_agent, ("look at T1", "plan A7")).forget(dry_run=True)
    assert plan.assumed_external == []  # (write_todos is a state effect, lookup declares read)
