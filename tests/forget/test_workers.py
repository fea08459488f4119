"""Four worker processes run agents on sessions of their own against one store (a SQLite home,
or PostgreSQL) while forgets arrive through ``unsee serve`` (another process): every session's
records are complete, no artifact lands in another session, every forgotten target is gone,
and no external side effect fires twice."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

WORKERS, SESSIONS = 4, 3

WORKER = textwrap.dedent('''
    import os, re, sqlite3, sys, time
    from pathlib import Path
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    from unsee import Unsee
    from unsee.core import resolve_home
    from unsee.middleware.errors import SessionChanged
    from unsee.plugins.model import ScriptedChatModel, call_id

    def secret(session):  # one target per session
        w, s = re.match(r"w(\\d+)-s(\\d+)", session).groups()
        return f"4417-22{w}{s}"

    def policy(messages, tools):
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content=f"Done: {last.content}")
        text = str(last.content)
        if m := re.search(r"look up (w\\d+-s\\d+)", text):
            return AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"session": m.group(1)},
                             "id": call_id(messages), "type": "tool_call"}])
        if m := re.search(r"notify (w\\d+-s\\d+)", text):
            return AIMessage(content="", tool_calls=[{"name": "notify", "args": {"session": m.group(1)},
                             "id": call_id(messages), "type": "tool_call"}])
        return AIMessage(content="ok: " + " | ".join(str(x.content) for x in messages[-3:]))

    def saver(home):
        url = os.environ.get("UNSEE_STORE")
        if url:
            from langgraph.checkpoint.postgres import PostgresSaver
            from psycopg.rows import dict_row
            from psycopg_pool import ConnectionPool
            pool = ConnectionPool(url, kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
                                  max_size=4)
            s = PostgresSaver(pool)
            s.setup()
            return s
        return SqliteSaver(sqlite3.connect(Path(home) / "lg.sqlite", check_same_thread=False, timeout=60))

    def factory():
        home = resolve_home()
        u = Unsee(home=home)

        @u.tool(effect="read")
        def lookup(session: str) -> str:
            """Look up the account of a session."""
            return f"account of {session}: card {secret(session)} on file"

        @u.tool(effect="external")
        def notify(session: str) -> str:
            """Send the customer a message (a real, external effect)."""
            with open(Path(home) / "fired.log", "a") as f:
                f.write(session + "\\n")
            return f"message sent for {session}"

        return create_agent(ScriptedChatModel(policy=policy), [lookup, notify], system_prompt="support",
                            middleware=[u.middleware()], checkpointer=saver(home))

    def turn(agent, session, text):
        for _ in range(20):  # a run whose loaded state a forget replaced is told so: run it again
            try:
                agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": session}})
                return
            except SessionChanged:
                time.sleep(0.1)
        raise RuntimeError("state kept changing")

    if __name__ == "__main__":
        wid = sys.argv[1]
        agent = factory()
        for s in range(int(sys.argv[2])):
            session = f"w{wid}-s{s}"
            turn(agent, session, f"{session}: look up {session}")
            print("SECRET-SEEN", session, flush=True)  # the test posts its revocation now
            turn(agent, session, f"{session}: notify {session}")
            turn(agent, session, f"{session}: thanks")
        print("WORKER-DONE", flush=True)
''')


def _post(port: int, token: str, session: str, target: str) -> dict:
    body = json.dumps({"session_id": session, "event": {"target": target}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/revocations", data=body, method="POST",
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as res:
            return {"status": res.status, **json.loads(res.read())}
    except urllib.error.HTTPError as e:
        return {"status": e.code, **json.loads(e.read() or b"{}")}


@pytest.mark.parametrize("engine", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_four_workers_and_forgets_through_serve(tmp_path, engine, request):
    (tmp_path / "xworkers.py").write_text(WORKER)
    home = tmp_path / "home"
    env = {**os.environ, "UNSEE_HOME": str(home),
           "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("UNSEE_STORE", None)
    if engine == "postgres":
        env["UNSEE_STORE"] = request.getfixturevalue("pg_url")
    home.mkdir()
    if engine == "sqlite":  # serve wants an existing home
        subprocess.run([sys.executable, "-c", "from unsee import Unsee; Unsee().close()"], env=env, check=True)
    token = "t0ken"
    serve = subprocess.Popen([sys.executable, "-m", "unsee", "serve", "--token", token, "--port", "0",
                              "--agent", "xworkers:factory"], env=env, cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    workers = []
    try:
        line = serve.stdout.readline()
        port = int(re.search(r":(\d+)/v1/revocations", line).group(1)) if "/v1/revocations" in line else None
        assert port, line + serve.stderr.read() if serve.poll() is not None else line
        workers = [subprocess.Popen([sys.executable, str(tmp_path / "xworkers.py"), str(w), str(SESSIONS)],
                                    env=env, cwd=tmp_path, stdout=subprocess.PIPE, text=True,
                                    stderr=open(tmp_path / f"worker-{w}.err", "w"))
                   for w in range(WORKERS)]
        answers = {}
        # forget the first session of each worker as soon as the secret is in it; the worker goes on
        # with that session (its next turns wait for the forget's lease, or run again on the new state)
        seen = {w: [] for w in range(WORKERS)}
        for w, p in enumerate(workers):
            while not any(ln.startswith(f"SECRET-SEEN w{w}-s0") for ln in seen[w]):
                line = p.stdout.readline()
                assert line, "".join(seen[w]) + (tmp_path / f"worker-{w}.err").read_text()
                seen[w].append(line)
            session = f"w{w}-s0"
            answers[session] = _post(port, token, session, f"4417-22{w}0")
        for w, p in enumerate(workers):
            out = "".join(seen[w]) + p.stdout.read()  # (the stdout buffer may hold lines already)
            p.wait(timeout=600)
            assert "WORKER-DONE" in out and p.returncode == 0, out + (tmp_path / f"worker-{w}.err").read_text()
    finally:
        for p in workers:
            p.kill()
        serve.terminate()
        serve.wait(timeout=30)
    for session, answer in answers.items():
        assert answer["status"] == 200 and answer["committed"], (session, answer)
    _check_world(tmp_path, home, env)


def _check_world(tmp_path: Path, home: Path, env: dict) -> None:
    code = textwrap.dedent('''
        import json, sys
        from langchain_core.messages import HumanMessage
        import xworkers
        from unsee.core import Unsee
        from unsee.plugins.forget import is_scratch_thread
        from unsee.core import resolve_home
        agent = xworkers.factory()
        u = Unsee(home=resolve_home())
        out = {"sessions": {}, "live": {}, "audit": {}, "contents": {}}
        for s in u.sessions():
            if is_scratch_thread(s.session_id):
                out["sessions"][s.session_id] = "scratch"
                continue
            out["sessions"][s.session_id] = [s.incomplete, s.turns]
            out["contents"][s.session_id] = list(u.store.contents(s.session_id).values())
            state = agent.get_state({"configurable": {"thread_id": s.session_id}})
            out["live"][s.session_id] = repr(state.values.get("messages"))
        for w in range(int(sys.argv[1])):
            out["audit"][f"w{w}-s0"] = u.audit(f"w{w}-s0", f"4417-22{w}0", agent=agent).clean
        print("WORLD" + json.dumps(out))
    ''')
    res = subprocess.run([sys.executable, "-c", code, str(WORKERS)], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("WORLD")), None)
    assert line, res.stdout + res.stderr
    world = json.loads(line[5:])
    expected = {f"w{w}-s{s}" for w in range(WORKERS) for s in range(SESSIONS)}
    assert set(world["sessions"]) == expected  # no scratch session left behind
    for session in expected:
        assert world["sessions"][session] == [False, 3], session  # complete: three turns, no failure
        others = expected - {session}
        for text in world["contents"][session]:  # no artifact of another session in this one
            assert not any(o in text for o in others), (session, text)
        w, s = session[1], session[4]
        forgotten = s == "0"
        assert (f"4417-22{w}{s}" in world["live"][session]) is not forgotten, session
    assert all(world["audit"].values()), world["audit"]
    fired = (home / "fired.log").read_text().split()
    assert sorted(fired) == sorted(expected)  # each session's notify fired exactly once
