"""``Unsee(store="postgresql://...")``: bad URLs and unreachable servers are typed errors that
change nothing; the tables live in their own schema beside LangGraph's; several processes
opening one store at once all get it; records read back as on SQLite."""

import subprocess
import sys
from urllib.parse import urlsplit

import psycopg
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from tests.support.recording_agents import SECRET, make_agent
from unsee import Unsee
from unsee.middleware.errors import InvalidStoreUrl, StoreDamaged, StoreUnavailable

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("url", ["mysql://h/db", "postgresql://h/db?bogus=1", "postgresql://[::1/x"])
def test_bad_urls(tmp_path, url):
    with pytest.raises(InvalidStoreUrl):
        Unsee(home=tmp_path / "h", store=url)
    if not url.startswith("postgresql"):  # refused before anything is made
        assert not (tmp_path / "h").exists()


def test_an_unreachable_server_is_a_typed_error_fast(tmp_path):
    with pytest.raises(StoreUnavailable) as e:
        Unsee(home=tmp_path / "h", store=f"postgresql://nobody:secret@/db?host={tmp_path}/no-such-socket")
    assert "secret" not in str(e.value)  # the password never reaches a message


def _unsee_tables(url):
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema='unsee'")}


def test_records_roundtrip_beside_langgraph_tables(tmp_path, pg_url):
    from langgraph.checkpoint.postgres import PostgresSaver

    with psycopg.connect(pg_url, autocommit=True) as conn:
        PostgresSaver(conn).setup()  # LangGraph's own `checkpoints` table, in `public`
    u = Unsee(home=tmp_path / "h", store=pg_url)
    agent = make_agent(u, InMemorySaver())
    cfg = {"configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [{"role": "user", "content": "check T1"}]}, cfg)
    assert [s.session_id for s in u.sessions()] == ["t1"]
    assert any(SECRET in text for text in u.store.contents("t1").values())
    assert not (tmp_path / "h" / "provenance.sqlite").exists()  # nothing of the store in the home
    u.close()
    assert {"sessions", "artifacts", "checkpoints", "spans", "commits", "content", "store_journal",
            "leases", "forgets", "unsee_meta"} <= _unsee_tables(pg_url)
    # a second process (here: a second Unsee on another home) sees the same records and hash key
    v = Unsee(home=tmp_path / "other", store=pg_url)
    assert [s.session_id for s in v.sessions()] == ["t1"]
    assert v.hasher.hash("x") == u.hasher.hash("x")
    v.close()


def test_a_store_of_a_newer_unsee_is_refused(tmp_path, pg_url):
    Unsee(home=tmp_path / "h", store=pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE unsee.unsee_meta SET value='99' WHERE key='provenance'")
    with pytest.raises(StoreDamaged):
        Unsee(home=tmp_path / "h", store=pg_url)


def test_processes_opening_one_new_store_at_once(tmp_path, pg_url):
    code = ("import sys; from unsee import Unsee; u = Unsee(home=sys.argv[1], store=sys.argv[2]); "
            "print(len(u.sessions())); u.close()")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / f"h{i}"), pg_url],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert [o.strip() for o, _ in outs] == ["0"] * 4


def test_cli_store_option(tmp_path, pg_url):
    from typer.testing import CliRunner

    from unsee.cli import app

    u = Unsee(home=tmp_path / "h", store=pg_url)
    agent = make_agent(u, InMemorySaver())
    agent.invoke({"messages": [{"role": "user", "content": "hello"}]}, {"configurable": {"thread_id": "t9"}})
    u.close()
    res = CliRunner().invoke(app, ["--home", str(tmp_path / "empty"), "--store", pg_url, "sessions", "--json"])
    assert res.exit_code == 0 and '"t9"' in res.output, res.output
    res = CliRunner().invoke(app, ["--home", str(tmp_path / "empty"), "--store", "mysql://x/y", "sessions"])
    assert res.exit_code != 0
    assert urlsplit(pg_url).path  # (the database is the fixture's)
