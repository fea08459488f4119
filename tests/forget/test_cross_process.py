"""A forget and a run on the same session, in two real processes, never interleave.

Process A runs the agent (a slow tool, or a run started while a forget replays);
process B runs ``unsee forget ... --agent``. Whatever the order, the committed
state never holds the target afterwards, and A's run never writes it back.
Each test runs on the embedded default (SQLite files in the home, SqliteSaver)
and on PostgreSQL (unsee's store and leases, LangGraph's PostgresSaver).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

SECRET = "4417-2231"

AGENT = textwrap.dedent('''
    import os, re, sqlite3, time
    from pathlib import Path
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    from unsee import Unsee
    from unsee.core import resolve_home
    from unsee.plugins.model import ScriptedChatModel, call_id

    SECRET = "4417-2231"

    def policy(messages, tools):
        if os.environ.get("SLOW_MODEL"):
            time.sleep(0.4)  # a slow model: the forget's replay takes seconds
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content=f"Result: {last.content}")
        m = re.search(r"(look up|slow) (T\\d)", str(last.content))
        if m:
            return AIMessage(content="", tool_calls=[{"name": "slow" if m.group(1) == "slow" else "lookup",
                             "args": {"ticket": m.group(2)}, "id": call_id(messages), "type": "tool_call"}])
        return AIMessage(content="ok: " + " | ".join(str(x.content) for x in messages[-3:]))

    def factory():
        home = resolve_home()
        u = Unsee(home=home)

        @u.tool(effect="read")
        def lookup(ticket: str) -> str:
            """Look up a ticket."""
            return f"ticket {ticket}: card {SECRET} on file" if ticket == "T1" else f"ticket {ticket}: fine"

        @u.tool(effect="read")
        def slow(ticket: str) -> str:
            """Look up a ticket, slowly."""
            time.sleep(float(os.environ.get("SLOW_TOOL", "0")))
            return f"ticket {ticket}: fine"

        return create_agent(ScriptedChatModel(policy=policy), [lookup, slow], system_prompt="support",
                            middleware=[u.middleware()], checkpointer=saver(home))

    def saver(home):
        url = os.environ.get("UNSEE_STORE")
        if url:  # PostgreSQL: LangGraph's checkpoints in the same database as unsee's records
            import psycopg
            from psycopg.rows import dict_row
            from langgraph.checkpoint.postgres import PostgresSaver
            s = PostgresSaver(psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row))
            s.setup()
            return s
        return SqliteSaver(sqlite3.connect(Path(home) / "lg.sqlite", check_same_thread=False))

    def say(text):
        agent = factory()
        try:
            agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "t1"}})
            print("RUN-OK", flush=True)
        except Exception as exc:
            print("RUN-FAILED", type(exc).__name__, exc, flush=True)

    if __name__ == "__main__":
        import sys
        say(sys.argv[1])
''')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def world(tmp_path, request):
    (tmp_path / "xagent.py").write_text(AGENT)
    home = tmp_path / "home"
    env = {**os.environ, "UNSEE_HOME": str(home), "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("UNSEE_STORE", None)
    if request.param == "postgres":
        env["UNSEE_STORE"] = request.getfixturevalue("pg_url")
    for text in ("hello", "look up T1", "thanks"):
        res = subprocess.run([sys.executable, str(tmp_path / "xagent.py"), text], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
        assert "RUN-OK" in res.stdout, res.stdout + res.stderr
    return tmp_path, home, env


def _state(home: Path, env: dict) -> str:
    """The live LangGraph state of t1, read straight from the checkpointer's database."""
    import sqlite3

    url = env.get("UNSEE_STORE")
    if url:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            snap = PostgresSaver(conn).get_tuple({"configurable": {"thread_id": "t1"}})
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver

        with contextlib.closing(sqlite3.connect(home / "lg.sqlite")) as conn:  # (sqlite3's own `with` only commits)
            snap = SqliteSaver(conn).get_tuple({"configurable": {"thread_id": "t1"}})
    return repr(snap.checkpoint["channel_values"].get("messages"))


def _wait_for_lease(home: Path, env: dict, kind: str, timeout: float = 60.0) -> None:
    """Until some process holds a ``kind`` lease on t1 (read straight from the lease table)."""
    import sqlite3

    sql = "SELECT 1 FROM leases WHERE session_id='t1' AND kind=? AND holds>0 AND expires_ns>?"
    url = env.get("UNSEE_STORE")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        args = (kind, time.time_ns())
        if url:
            import psycopg

            with psycopg.connect(url) as conn:
                if conn.execute(sql.replace("?", "%s").replace("leases", "unsee.leases"), args).fetchone():
                    return
        else:
            try:
                with contextlib.closing(sqlite3.connect(home / "leases.sqlite", timeout=5)) as conn:
                    if conn.execute(sql, args).fetchone():
                        return
            except sqlite3.OperationalError:
                pass
        time.sleep(0.05)
    raise AssertionError(f"no {kind} lease on t1 within {timeout} s")


def _forget(tmp_path, env, extra_env=None, args=()):
    return subprocess.Popen([sys.executable, "-m", "unsee", "forget", "t1", "--target", SECRET,
                             "--agent", "xagent:factory", *args], env={**env, **(extra_env or {})}, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_forget_waits_for_a_run_in_another_process(world):
    tmp_path, home, env = world
    run = subprocess.Popen([sys.executable, str(tmp_path / "xagent.py"), "slow T2"], cwd=tmp_path,
                           env={**env, "SLOW_TOOL": "6"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_lease(home, env, "run")  # A is in its run (a 6 s tool call), holding the session's run lease
    forget = _forget(tmp_path, env)
    out_run, err_run = run.communicate(timeout=120)
    out, err = forget.communicate(timeout=300)
    assert "RUN-OK" in out_run, out_run + err_run
    assert forget.returncode == 0 and "committed" in out, out + err
    state = _state(home, env)
    assert SECRET not in state and "slow T2" in state  # A's turn is kept, and the target is gone


def test_a_run_started_during_a_forget_never_writes_the_target_back(world):
    tmp_path, home, env = world
    forget = _forget(tmp_path, env, {"SLOW_MODEL": "1"})
    _wait_for_lease(home, env, "forget")  # B has the session (its replay decodes slowly)
    # A's run would end long after B's commit (a 6 s tool call): without leases it writes the
    # pre-forget state, target included, back over the committed one
    run = subprocess.run([sys.executable, str(tmp_path / "xagent.py"), "slow T2"], cwd=tmp_path,
                         env={**env, "SLOW_TOOL": "6"}, capture_output=True, text=True, timeout=300)
    out, err = forget.communicate(timeout=300)
    assert forget.returncode == 0, out + err
    # A either waited and ran on the rebuilt state, or was told its state changed: never the target back
    assert "RUN-OK" in run.stdout or "SessionChanged" in run.stdout, run.stdout + run.stderr
    assert SECRET not in _state(home, env)


def test_a_killed_run_lease_expires(world):
    """A worker killed with SIGKILL mid-run stops renewing its lease: a later forget goes on.
    Its run's records may stop short of the agent's state (killed before they were written):
    then B7 refuses and names B5, which goes on (test_run_died.py has that case for certain)."""
    import signal

    tmp_path, home, env = world
    env = {**env, "UNSEE_LEASE_TTL": "2"}
    run = subprocess.Popen([sys.executable, str(tmp_path / "xagent.py"), "slow T2"], cwd=tmp_path,
                           env={**env, "SLOW_TOOL": "60"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_lease(home, env, "run")
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=30)
    forget = _forget(tmp_path, env)
    out, err = forget.communicate(timeout=300)
    if forget.returncode == 4 and "stop short of the agent's state" in err and "--strategy B5" in err:
        forget = _forget(tmp_path, env, args=["--strategy", "B5"])
        out, err = forget.communicate(timeout=300)
    assert forget.returncode == 0 and "committed" in out, out + err
    assert SECRET not in _state(home, env)
