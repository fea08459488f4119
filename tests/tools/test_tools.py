"""Effect declarations and ledger routing for LangChain tools."""

from __future__ import annotations

import asyncio
from typing import TypedDict

import pytest
from langchain_core.tools import BaseTool, tool

from unsee.plugins.tools import (
    EFFECT_KEY,
    current_session_id,
    declare_effect,
    effect_of,
    sandbox_command_tool,
    unsee_tool,
)
from unsee.sandbox import CallInDoubt, Ledger, open_environment
from unsee.sandbox.ledger import make_call_id


@pytest.fixture
def ledger(tmp_path):
    led = Ledger(tmp_path / "ledger.sqlite")
    yield led
    led.close()


@pytest.fixture
def local_env(tmp_path):
    env = open_environment("local", root=tmp_path / "ws", keep=False)
    yield env
    env.close()


def test_decorator_declares_effect_and_schema():
    @unsee_tool(effect="read")
    def lookup(city: str, days: int = 1) -> str:
        """Look up the weather."""
        return f"{city}:{days}"

    assert isinstance(lookup, BaseTool)
    assert lookup.name == "lookup" and lookup.description == "Look up the weather."
    assert lookup.metadata[EFFECT_KEY] == "read"
    assert effect_of(lookup) == "read"
    assert set(lookup.args) == {"city", "days"}
    assert lookup.invoke({"city": "Oslo"}) == "Oslo:1"


def test_effect_of_undeclared_and_invalid():
    @tool
    def plain(x: str) -> str:
        """Echo."""
        return x

    assert effect_of(plain) is None
    assert effect_of(object()) is None
    with pytest.raises(ValueError):
        unsee_tool(lambda: None, effect="delete")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        declare_effect(plain, "sideways")  # type: ignore[arg-type]


def test_declare_effect_on_existing_tool(ledger):
    fired = []

    @tool
    def transfer(to: str, amount: int) -> str:
        """Send money."""
        fired.append((to, amount))
        return "ok"

    same = declare_effect(transfer, "external")
    assert same is transfer and effect_of(transfer) == "external"

    routed = declare_effect(transfer, "external", ledger=ledger, session="s")
    assert routed is not transfer and effect_of(routed) == "external"
    assert routed.name == "transfer" and set(routed.args) == {"to", "amount"}
    assert routed.invoke({"to": "bob", "amount": 5}) == "ok"
    with Ledger(ledger.path) as retry:  # the same call again from a new process
        again = declare_effect(transfer, "external", ledger=retry, session="s")
        assert again.invoke({"to": "bob", "amount": 5}) == "ok"
    assert fired == [("bob", 5)]


def test_external_tool_never_fires_twice(ledger):
    sent = []

    def send(to: str, body: str) -> str:
        """Send an e-mail."""
        sent.append(to)
        return f"sent to {to}"

    send_email = unsee_tool(send, effect="external", ledger=ledger, session="s1")
    assert send_email.invoke({"to": "a@x", "body": "hi"}) == "sent to a@x"
    for _ in range(2):  # retries from new processes: answered from the ledger
        with Ledger(ledger.path) as retry:
            again = unsee_tool(send, effect="external", ledger=retry, session="s1")
            assert again.invoke({"to": "a@x", "body": "hi"}) == "sent to a@x"
    assert send_email.invoke({"to": "b@x", "body": "hi"}) == "sent to b@x"
    assert sent == ["a@x", "b@x"]


def test_in_doubt_call_fails_closed(ledger):
    @unsee_tool(effect="external", ledger=ledger, session="s")
    def charge(card: str) -> str:
        """Charge a card."""
        return "charged"

    cid = make_call_id("s", "charge", {"card": "4242"}, 0)
    ledger._conn().execute(  # what a crash after firing leaves behind
        "INSERT INTO calls VALUES (?, 's', 'charge', '{\"card\":\"4242\"}', 0, 'external', 'fired',"
        " NULL, NULL, 'live', 1, 0, 0)", (cid,))
    with pytest.raises(CallInDoubt):
        charge.invoke({"card": "4242"})


def test_session_comes_from_langgraph_thread_id(ledger):
    from langgraph.graph import END, START, StateGraph

    @unsee_tool(effect="external", ledger=ledger)
    def ping(host: str) -> str:
        """Ping."""
        return "pong " + current_session_id()

    class S(TypedDict):
        out: str

    def node(state: S) -> S:
        return {"out": ping.invoke({"host": "h"})}

    g = StateGraph(S)
    g.add_node("n", node)
    g.add_edge(START, "n")
    g.add_edge("n", END)
    app = g.compile()
    res = app.invoke({"out": ""}, config={"configurable": {"thread_id": "thread-42"}})
    assert res["out"] == "pong thread-42"
    assert [r.session for r in ledger.calls()] == ["thread-42"]
    assert current_session_id() == "default"  # outside a graph
    ping.invoke({"host": "h2"})
    assert ledger.calls(tool="ping")[-1].session == "default"


def test_env_injection(local_env):
    @unsee_tool(effect="write", env=local_env)
    def save(path: str, text: str, env) -> str:
        """Save a file in the sandbox."""
        env.write_file(path, text)
        return "saved"

    assert set(save.args) == {"path", "text"}  # env is hidden from the model
    assert save.invoke({"path": "a.txt", "text": "hello"}) == "saved"
    assert local_env.read_file("a.txt") == b"hello"

    with pytest.raises(TypeError):
        unsee_tool(lambda env: None, effect="read")


def test_env_factory_points_tools_at_a_shadow(local_env):
    target = {"env": local_env}
    cat = sandbox_command_tool("cat", "Print a file", "cat {path}", lambda: target["env"], effect="read")
    local_env.write_file("f.txt", "real")
    with local_env.shadow() as sh:
        sh.write_file("f.txt", "shadow")
        target["env"] = sh
        assert cat.invoke({"path": "f.txt"}) == "shadow"
    target["env"] = local_env
    assert cat.invoke({"path": "f.txt"}) == "real"


def test_sandbox_command_tool_quotes_arguments(local_env, ledger):
    local_env.write_file("notes.txt", "alpha\nbeta\n")
    grep = sandbox_command_tool("grep", "Search files", "grep -n {pattern} {path}", local_env,
                                effect="read", ledger=ledger, session="s")
    assert effect_of(grep) == "read"
    assert grep.metadata["unsee.command_template"] == "grep -n {pattern} {path}"
    assert set(grep.args) == {"pattern", "path"}
    assert grep.invoke({"pattern": "beta", "path": "notes.txt"}) == "2:beta\n"
    out = grep.invoke({"pattern": "x; touch pwned", "path": "notes.txt"})
    assert out.endswith("[exit 1]")
    with pytest.raises(FileNotFoundError):
        local_env.read_file("pwned")
    assert [r.tool for r in ledger.calls()] == ["grep", "grep"]
    with pytest.raises(ValueError):
        sandbox_command_tool("bad", "d", "echo {0}", local_env)


def test_async_tool(ledger):
    hits = []

    async def send(msg: str) -> str:
        """Post a message."""
        await asyncio.sleep(0)
        hits.append(msg)
        return "posted"

    post = unsee_tool(send, effect="external", ledger=ledger, session="s")

    async def go():
        assert await post.ainvoke({"msg": "hi"}) == "posted"
        with Ledger(ledger.path) as retry:  # the same call again from a new process
            again = unsee_tool(send, effect="external", ledger=retry, session="s")
            assert await again.ainvoke({"msg": "hi"}) == "posted"

    asyncio.run(go())
    assert hits == ["hi"]
