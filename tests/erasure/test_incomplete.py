"""An audit that cannot read what it should says so (``AuditReport.incomplete``) and is never
clean: an agent without a checkpointer (a supervisor's worker, ``checkpointer=None``, the
``True``/``False`` subgraph markers), an agent without the store the session used, a file a
route cannot read. The erasure's result and receipt carry it; ``unsee audit`` / ``unsee erase``
print it and exit 1 (docs/erasure.md "Complete audits")."""

import json
import os
import sqlite3
import sys
import types

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver

from tests.support.cli_helpers import run as cli
from tests.support.erasure_agents import SECRET, policy
from unsee import RevocationEvent, Unsee
from unsee.plugins.erasure import AuditReport, RouteAudit, read_receipt, verify_signature
from unsee.plugins.erasure import routes as routes_mod
from unsee.plugins.erasure.receipt import Receipt, canonical_bytes
from unsee.plugins.model import ScriptedChatModel, call_id

MODULE = "unsee_test_incomplete_agents"


def _counts(report: AuditReport) -> dict[str, int]:
    return {r.route: r.copies for r in report.routes}


def _bare(u, agent=None, *, checkpointer=None, store=None, name=None):
    """The agent's model compiled with the given checkpointer and store (none by default), with
    unsee's middleware (so the CLI finds its home through it)."""
    return create_agent(ScriptedChatModel(policy=policy), [], middleware=[u.middleware()],
                        checkpointer=checkpointer, store=store, name=name)


@pytest.fixture
def agents_module(monkeypatch):
    """A module the CLI's --agent imports (``unsee_test_incomplete_agents:<name>``)."""
    mod = types.ModuleType(MODULE)
    monkeypatch.setitem(sys.modules, MODULE, mod)
    return mod


# -- the Python API -----------------------------------------------------------------------------------
def test_an_agent_without_checkpointer_makes_the_audit_incomplete(recorded):
    home, u, agent, _ = recorded
    good = u.audit("t1", SECRET, agent=agent)
    assert good.complete and good.incomplete == [] and not good.clean
    assert _counts(good)["langgraph.checkpoints"] > 0
    for marker in (None, True, False):  # no checkpointer, and LangGraph's subgraph markers
        bare = _bare(u, checkpointer=marker, store=agent.store, name="worker_a")
        assert bare.checkpointer is marker
        got = u.audit("t1", SECRET, agent=bare)
        assert not got.complete and not got.clean
        (gap,) = got.incomplete
        assert gap.startswith("langgraph.checkpoints: ") and "no checkpointer" in gap and "'worker_a'" in gap
        assert "'t1'" in gap and "agent=" in gap  # what is missing, and how to supply it
        assert got.not_read == [gap]
        assert "langgraph.checkpoints" not in _counts(got)
        # every other route counts as before (the saver's file, here under the home, is then
        # scanned byte by byte as no route's: home.other-files; its values are not read)
        mine, theirs = _counts(got), _counts(good)
        assert {k: v for k, v in mine.items() if k != "home.other-files"} == {
            k: v for k, v in theirs.items() if k not in ("langgraph.checkpoints", "home.other-files")}
        assert mine["home.other-files"] >= theirs["home.other-files"]


def test_an_agent_without_the_store_the_session_used(recorded):
    home, u, agent, _ = recorded  # (the session read and wrote a recorded memory store)
    got = u.audit("t1", SECRET, agent=_bare(u, checkpointer=agent.checkpointer))
    (gap,) = got.incomplete
    assert gap.startswith("langgraph.store: ") and "store=" in gap and not got.clean
    assert "langgraph.checkpoints" in _counts(got)  # (its checkpointer was read)


def test_incomplete_is_never_clean_and_the_receipt_says_so(recorded):
    home, u, agent, _ = recorded
    ev = RevocationEvent(target=SECRET)
    report = u.forget("t1", ev)
    assert report.erased_clean
    assert u.audit("t1", SECRET, agent=agent).clean
    bare = _bare(u, store=agent.store)
    got = u.audit("t1", SECRET, agent=bare)
    assert got.copies == 0 and not got.complete and not got.clean  # nothing counted, yet not clean
    result = u.erase("t1", RevocationEvent(target=SECRET), agent=bare)
    assert not result.existing and not result.clean and result.after.incomplete == got.incomplete
    receipt = read_receipt(result.path)
    assert receipt.incomplete == got.incomplete
    assert all(r.copies_after == 0 for r in receipt.routes)
    assert verify_signature(receipt, trusted_public_pem=(home / "receipt.pub").read_text())
    tampered = receipt.model_copy(update={"incomplete": None})
    assert not verify_signature(tampered)  # the incompleteness is signed
    # an erasure with the right agent does not stand on the incomplete receipt: the forget's stands
    again = u.erase("t1", RevocationEvent(target=SECRET), agent=agent)
    assert again.clean and again.existing and again.receipt.event_id == ev.event_id
    assert again.receipt.incomplete is None


def test_a_receipt_without_incompleteness_signs_as_before():
    base = dict(unsee_version="0", event_id="e", target_hash="h", sessions=["s"], routes=[], unreachable=[],
                public_key="k")
    assert "incomplete" not in json.loads(canonical_bytes(Receipt(**base)))
    assert json.loads(canonical_bytes(Receipt(**base, incomplete=["r: x"])))["incomplete"] == ["r: x"]


def test_a_file_the_audit_cannot_read_makes_it_incomplete(recorded, monkeypatch):
    home, u, agent, _ = recorded
    locked = home / "notes.txt"  # a file under the home no route claims: home.other-files reads it
    locked.write_text("nothing here")
    real = routes_mod.scan_file

    def scan(path, forms, **kw):
        if str(path) == str(locked):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, forms, **kw)

    monkeypatch.setattr(routes_mod, "scan_file", scan)
    got = u.audit("t1", SECRET, agent=agent)
    (gap,) = got.incomplete
    assert gap.startswith("home.other-files: could not read ") and str(locked) in gap
    assert "Permission denied" in gap and not got.clean
    row = {r.route: r for r in got.routes}["home.other-files"]
    assert row.incomplete and any("unreadable" in n for n in row.notes)
    monkeypatch.setattr(routes_mod, "scan_file", real)
    assert u.audit("t1", SECRET, agent=agent).complete


def test_an_unreadable_sqlite_file_makes_the_route_incomplete(tmp_path):
    from unsee.plugins.erasure import Scope, target_forms

    db = tmp_path / "x.sqlite"
    db.write_bytes(b"")
    scope = Scope("s", SECRET, target_forms(SECRET))
    scope.byte_scans[str(db)] = {"copies": 0, "forms": {}, "sha256": None, "error": "Permission denied"}
    out = RouteAudit("r")
    out.add_files([db], scope)
    assert out.incomplete and "Permission denied" in out.incomplete[0] and out.copies == 0
    report = AuditReport("s", [out])
    assert report.incomplete == [f"r: {out.incomplete[0]}"] and not report.complete and not report.clean
    assert AuditReport("s", [RouteAudit("r")]).clean


# -- the command line ---------------------------------------------------------------------------------
@pytest.mark.skipif(os.environ.get("UNSEE_TEST_STORE") == "postgres",
                    reason="the command line finds the home by its SQLite records (the second pass keeps them on "
                           "PostgreSQL)")
def test_cli_audit_and_erase_exit_1_when_incomplete(recorded, agents_module, capsys):
    home, u, agent, _ = recorded
    agents_module.agent = agent
    agents_module.bare = _bare(u, store=agent.store, name="worker_a")
    bare = ["--agent", f"{MODULE}:bare"]
    code, out, err = cli(capsys, "--home", home, "audit", "t1", "--target", SECRET, *bare)
    assert code == 1 and "Traceback" not in err
    assert "INCOMPLETE" in out and "no checkpointer" in out and "more may remain" in out
    code, out, _ = cli(capsys, "--home", home, "audit", "t1", "--target", SECRET, *bare, "--json")
    doc = json.loads(out)
    assert code == 1 and doc["complete"] is False and doc["clean"] is False
    assert doc["incomplete"] and doc["incomplete"][0].startswith("langgraph.checkpoints: ")
    code, out, _ = cli(capsys, "--home", home, "audit", "t1", "--target", SECRET, "--agent", f"{MODULE}:agent",
                       "--json")
    doc = json.loads(out)
    assert code == 1 and doc["complete"] is True and doc["incomplete"] == [] and doc["copies"] > 0
    assert u.forget("t1", RevocationEvent(target=SECRET)).erased_clean
    code, out, _ = cli(capsys, "--home", home, "audit", "t1", "--target", SECRET, "--agent", f"{MODULE}:agent")
    assert code == 0 and "no copy of the target remains" in out and "INCOMPLETE" not in out
    code, out, _ = cli(capsys, "--home", home, "audit", "t1", "--target", SECRET, *bare)
    assert code == 1 and "INCOMPLETE" in out and "no copy of the target remains" not in out
    code, out, _ = cli(capsys, "--home", home, "erase", "t1", "--target", SECRET, *bare, "--json")
    receipt = json.loads(out)
    assert code == 1 and receipt["incomplete"] and "no checkpointer" in receipt["incomplete"][0]
    code, out, _ = cli(capsys, "--home", home, "erase", "t1", "--target", SECRET, *bare)
    assert code == 1 and "INCOMPLETE" in out
    code, out, _ = cli(capsys, "--home", home, "erase", "t1", "--target", SECRET, "--agent", f"{MODULE}:agent")
    assert code == 0 and "INCOMPLETE" not in out


# -- a supervisor: a worker has no checkpointer; the graph that owns the thread does ---------------------
@tool
def lookup(ticket: str) -> str:
    """Look up a ticket."""
    return f"ticket {ticket}: card {SECRET} on file"


lookup.metadata = {"unsee.effect": "read"}


def _worker(messages, tools):
    last = messages[-1]
    if isinstance(last, ToolMessage) and last.name == "lookup":
        return AIMessage(content=f"Result: {last.content}")
    if "lookup" in tools:
        return AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"ticket": "T1"},
                                                  "id": call_id(messages), "type": "tool_call"}])
    return AIMessage(content="nothing to look up")


def _supervisor(messages, tools):
    if isinstance(messages[-1], HumanMessage):
        return AIMessage(content="", tool_calls=[{"name": "transfer_to_worker_a", "args": {},
                                                  "id": call_id(messages), "type": "tool_call"}])
    return AIMessage(content="All done.")


def test_supervisor_session_is_incomplete_through_a_worker(tmp_path):
    from langgraph_supervisor import create_supervisor

    u = Unsee(home=tmp_path / "home")
    conn = sqlite3.connect(tmp_path / "lg.sqlite", check_same_thread=False)  # (outside the home)
    try:
        wa = create_agent(ScriptedChatModel(policy=_worker), [lookup], middleware=[u.middleware()], name="worker_a")
        wb = create_agent(ScriptedChatModel(policy=_worker), [], middleware=[u.middleware()], name="worker_b")
        app = create_supervisor([wa, wb], model=ScriptedChatModel(policy=_supervisor)).compile(
            checkpointer=SqliteSaver(conn))
        for text in ("look up T1", "and again"):
            app.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "s"}})
        # unsee remembers the graph that owns the thread (the supervisor), not the worker that recorded
        assert u.recorder.agents["s"] is app
        worker = u.audit("s", SECRET, agent=wa)
        assert not worker.complete and not worker.clean
        (gap,) = worker.incomplete
        assert "langgraph.checkpoints" in gap and "'worker_a'" in gap and "supervisor" in gap
        whole = u.audit("s", SECRET, agent=app)
        assert whole.complete and not whole.clean
        assert _counts(whole)["langgraph.checkpoints"] > 0  # the checkpoint route is read
        assert worker.copies < whole.copies  # the smaller count is never reported as complete
        remembered = u.audit("s", SECRET)
        assert remembered.complete and remembered.copies == whole.copies
        assert sum(p.read_bytes().count(SECRET.encode()) for p in tmp_path.glob("lg.sqlite*")) > 0
    finally:
        u.close()
        conn.close()


def test_swarm_session_is_incomplete_through_a_swarm_agent(tmp_path):
    from langgraph_swarm import create_handoff_tool, create_swarm

    u = Unsee(home=tmp_path / "home")
    conn = sqlite3.connect(tmp_path / "lg.sqlite", check_same_thread=False)

    def alice(messages, tools):
        if isinstance(messages[-1], HumanMessage):
            return AIMessage(content="", tool_calls=[{"name": "transfer_to_bob", "args": {},
                                                      "id": call_id(messages), "type": "tool_call"}])
        return AIMessage(content="back to you")

    try:
        a = create_agent(ScriptedChatModel(policy=alice), [create_handoff_tool(agent_name="bob")],
                         middleware=[u.middleware()], name="alice")
        b = create_agent(ScriptedChatModel(policy=_worker), [lookup], middleware=[u.middleware()], name="bob")
        app = create_swarm([a, b], default_active_agent="alice").compile(checkpointer=SqliteSaver(conn))
        app.invoke({"messages": [HumanMessage("look up T1")]}, {"configurable": {"thread_id": "w"}})
        agent = u.audit("w", SECRET, agent=b)
        assert not agent.complete and not agent.clean
        whole = u.audit("w", SECRET, agent=app)
        assert whole.complete and _counts(whole)["langgraph.checkpoints"] > 0
        assert agent.copies < whole.copies
        assert u.audit("w", SECRET).complete  # (unsee remembers the swarm: it owns the thread)
    finally:
        u.close()
        conn.close()
