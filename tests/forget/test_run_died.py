"""A process killed between a run's end and the run's records being written (crash consistency).

A run returns before its records are written (the store's writer follows within
milliseconds) and its run lease is given back only once they are. Here the writer of
process A is held so that the third run's records can never be written, and A is killed
with SIGKILL right after that run returns. The next process to open the home finds the lease
A left, marks the session ``run_died``; the forget compares the records with the agent's
LangGraph state: B7 refuses with ``RecordsBehind`` (naming B5) and changes nothing, and B5
replays every input, the unrecorded one taken from the state. SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import json, os, re, signal, sqlite3, sys, time
    from pathlib import Path
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    from unsee import RecordsBehind, RevocationEvent, Unsee
    from unsee.plugins.model import ScriptedChatModel, call_id

    SECRET = "4417-2231"
    CFG = {"configurable": {"thread_id": "t1"}}

    def policy(messages, tools):
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content=f"Result: {last.content}")
        if "look up T1" in str(last.content):
            return AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"ticket": "T1"},
                                                      "id": call_id(messages), "type": "tool_call"}])
        return AIMessage(content="ok: " + str(last.content))

    def saver(home):
        url = os.environ.get("UNSEE_STORE")
        if url:
            import psycopg
            from psycopg.rows import dict_row
            from langgraph.checkpoint.postgres import PostgresSaver
            s = PostgresSaver(psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row))
            s.setup()
            return s
        return SqliteSaver(sqlite3.connect(Path(home) / "lg.sqlite", check_same_thread=False))

    def build(home):
        u = Unsee(home=home)

        @u.tool(effect="read")
        def lookup(ticket: str) -> str:
            """Look up a ticket."""
            return f"ticket {ticket}: card {SECRET} on file"

        return u, create_agent(ScriptedChatModel(policy=policy), [lookup], system_prompt="support",
                               middleware=[u.middleware()], checkpointer=saver(home))

    def say(agent, text):
        agent.invoke({"messages": [HumanMessage(text)]}, CFG)

    def messages(agent):
        return repr(agent.get_state(CFG).values["messages"])

    home = os.environ["UNSEE_HOME"]
    if sys.argv[1] == "run":
        u, agent = build(home)
        say(agent, "look up T1")
        say(agent, "thanks")
        u.flush()
        u.store._write = lambda batches: time.sleep(3600)  # the writer never writes again
        say(agent, "third question")  # returns: its records are still queued
        print("RAN", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    else:
        u, agent = build(home)
        out = {"run_died": [s.run_died for s in u.sessions() if s.session_id == "t1"]}
        before = messages(agent)
        try:
            u.forget("t1", RevocationEvent(target=SECRET), "B7", agent=agent)
            out["b7"] = "committed"
        except RecordsBehind as exc:
            out["b7"] = str(exc)
        out["unchanged"] = messages(agent) == before
        report = u.forget("t1", RevocationEvent(target=SECRET), "B5", agent=agent)
        after = messages(agent)
        out.update(b5=report.committed, secret_gone=SECRET not in after, third_kept="third question" in after,
                   run_died_after=[s.run_died for s in u.sessions() if s.session_id == "t1"])
        print(json.dumps(out), flush=True)
''')


@pytest.mark.parametrize("engine", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_run_killed_before_its_records_are_written(tmp_path, engine, request):
    (tmp_path / "xdie.py").write_text(SCRIPT)
    env = {**os.environ, "UNSEE_HOME": str(tmp_path / "home")}
    env.pop("UNSEE_STORE", None)
    if engine == "postgres":
        env["UNSEE_STORE"] = request.getfixturevalue("pg_url")
    run = subprocess.run([sys.executable, str(tmp_path / "xdie.py"), "run"], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=180)
    assert "RAN" in run.stdout and run.returncode == -9, run.stdout + run.stderr
    check = subprocess.run([sys.executable, str(tmp_path / "xdie.py"), "check"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr
    out = json.loads(check.stdout.strip().splitlines()[-1])
    assert out["run_died"] == [True]
    assert "records stop short of the agent's state" in out["b7"] and "B5" in out["b7"], out
    assert out["unchanged"]
    assert out["b5"] and out["secret_gone"] and out["third_kept"], out
    assert out["run_died_after"] == [False]
