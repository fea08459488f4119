"""The call ledger on PostgreSQL with real processes: at most once across processes.

Each worker is its own Python process with its own connection pool (a plain psycopg pool,
no ``search_path``: the ledger names ``unsee.calls`` itself) on one fresh database. They
run the same call (same session, tool, arguments and occurrence), whose function appends
a line to a shared file: the line count is the number of real side effects.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest

from unsee.middleware.sqldb import open_pool
from unsee.sandbox import CallInDoubt, LedgerUnavailable
from unsee.sandbox.ledger import Ledger

pytestmark = pytest.mark.postgres

WORKER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from psycopg_pool import ConnectionPool
    from unsee.sandbox.ledger import Ledger

    url, shared, gate, name, hold_s = sys.argv[1:6]
    pool = ConnectionPool(url, min_size=1, max_size=2, kwargs={"autocommit": True}, open=True)
    led = Ledger.on_postgres(pool)
    Path(f"{gate}.{name}.ready").touch()
    while not Path(gate).exists():
        time.sleep(0.002)

    def fire():
        with open(shared, "a") as f:
            f.write(f"{os.getpid()}\\n")
        Path(shared + ".inside").touch()
        time.sleep(float(hold_s))
        return {"pid": os.getpid()}

    t0 = time.monotonic()
    out = led.run("sess", "transfer", {"amount": 100, "to": "ACME"}, fire, effect="external", occurrence=0)
    print(json.dumps({"disposition": out.disposition, "value": out.value, "pid": os.getpid(),
                      "took": time.monotonic() - t0}), flush=True)
    pool.close()
    """
)


class Workers:
    """Worker processes on one database; ``shared`` is the side-effect file."""

    def __init__(self, tmp: Path, url: str):
        self.tmp, self.url = tmp, url
        self.script = tmp / "worker.py"
        self.script.write_text(WORKER)
        self.shared = tmp / "effects.txt"
        self.procs: list[subprocess.Popen] = []

    def start(self, name: str, gate: Path, hold_s: float = 0.5) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, str(self.script), self.url, str(self.shared), str(gate), name,
                              str(hold_s)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    @staticmethod
    def wait_for(path: Path, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while not path.exists():
            assert time.monotonic() < end, f"{path.name} never appeared"
            time.sleep(0.01)

    @staticmethod
    def result(p: subprocess.Popen, timeout: float = 60) -> dict:
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err
        return json.loads(out.strip().splitlines()[-1])

    def effects(self) -> list[str]:
        return self.shared.read_text().splitlines() if self.shared.exists() else []

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.fixture
def workers(tmp_path, pg_url):
    w = Workers(tmp_path, pg_url)
    yield w
    w.close()


@pytest.fixture
def ledger(pg_url):
    pool = open_pool(pg_url)
    led = Ledger.on_postgres(pool)
    yield led
    led.close()
    pool.close()


def test_six_processes_race_one_call_fires_once(workers):
    gate = workers.tmp / "go"
    procs = [workers.start(f"w{i}", gate) for i in range(6)]
    for i in range(6):  # every worker has its pool and ledger open before any runs the call
        workers.wait_for(workers.tmp / f"go.w{i}.ready")
    gate.touch()
    results = [workers.result(p) for p in procs]
    assert len(workers.effects()) == 1  # exactly one real side effect
    dispositions = sorted(r["disposition"] for r in results)
    assert dispositions == ["fired"] + ["replayed"] * 5
    (firer,) = [r for r in results if r["disposition"] == "fired"]
    assert workers.effects() == [str(firer["pid"])]
    assert all(r["value"] == {"pid": firer["pid"]} for r in results)  # the firer's result, replayed
    # the replayed ones waited for the firer (0.5 s in its function), none reported it in doubt
    assert all(r["took"] >= 0.3 for r in results if r["disposition"] == "replayed")


def test_a_live_firer_elsewhere_is_waited_for_not_in_doubt(workers, ledger):
    gate = workers.tmp / "go"
    gate.touch()
    a = workers.start("a", gate, hold_s=2.0)
    workers.wait_for(workers.shared.with_name("effects.txt.inside"))
    (rec,) = ledger.calls()
    assert rec.status == "fired"  # claimed, its function running in process a
    b = workers.start("b", gate)  # sees 'fired': the firer's lock is held, so it waits
    ra, rb = workers.result(a), workers.result(b)
    assert (ra["disposition"], rb["disposition"]) == ("fired", "replayed")
    assert rb["value"] == ra["value"] == {"pid": a.pid}
    assert len(workers.effects()) == 1
    assert ledger.get(rec.call_id).status == "done"


def test_sigkilled_firer_leaves_the_call_in_doubt_never_refired(workers, ledger):
    gate = workers.tmp / "go"
    gate.touch()
    a = workers.start("a", gate, hold_s=120)
    workers.wait_for(workers.shared.with_name("effects.txt.inside"))
    b = workers.start("b", gate)
    workers.wait_for(workers.tmp / "go.b.ready")
    time.sleep(1.0)
    assert b.poll() is None  # waiting for the live firer, not answering "in doubt"
    os.kill(a.pid, signal.SIGKILL)  # its connection closes: the server frees the call's lock
    a.wait()
    rb = workers.result(b)
    assert rb["disposition"] == "in_doubt" and rb["value"] is None
    c = workers.start("c", gate)  # a worker that comes later
    assert workers.result(c)["disposition"] == "in_doubt"
    assert len(workers.effects()) == 1  # never fired again
    (rec,) = ledger.calls()
    assert (rec.status, rec.attempts, rec.result_json) == ("fired", 1, None)
    out = ledger.run("sess", "transfer", {"amount": 100, "to": "ACME"}, lambda: 1 / 0, occurrence=0)
    with pytest.raises(CallInDoubt):
        out.unwrap()
    # an operator settles it: from then on every worker gets the recorded answer
    ledger.resolve(rec.call_id, status="done", result={"pid": a.pid})
    d = workers.start("d", gate)
    rd = workers.result(d)
    assert rd["disposition"] == "replayed" and rd["value"] == {"pid": a.pid}
    assert len(workers.effects()) == 1


def test_table_in_unsee_schema_made_once_and_stamped(pg_url):
    pool = open_pool(pg_url)
    try:
        assert not Ledger.exists_on_postgres(pool)
        a, b = Ledger.on_postgres(pool), Ledger.on_postgres(pool)  # idempotent
        assert Ledger.exists_on_postgres(pool)
        assert a.path is None and a.dialect == "postgresql" and "unsee.calls" in a.where
        with psycopg.connect(pg_url) as conn:
            pk = conn.execute("SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                              "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'unsee.calls'::regclass "
                              "AND i.indisprimary").fetchall()
            stamp = conn.execute("SELECT value FROM unsee.unsee_meta WHERE key='ledger'").fetchone()
        assert pk == [("call_id",)] and stamp == ("1",)
        a.run("s", "pay", {"x": 1}, lambda: "ok")
        assert b.run("s", "pay", {"x": 1}, lambda: "again").disposition == "replayed"
        with psycopg.connect(pg_url, autocommit=True) as conn:  # a stamp from a newer unsee
            conn.execute("UPDATE unsee.unsee_meta SET value='99' WHERE key='ledger'")
        with pytest.raises(Exception, match="newer unsee"):
            Ledger.on_postgres(pool)
    finally:
        pool.close()


def test_server_gone_is_a_typed_error_that_fires_nothing(pg_url):
    pool = open_pool(pg_url, timeout=2)
    led = Ledger.on_postgres(pool)
    fired = []
    pool.close()  # no connection to be had: as a server that went away
    with pytest.raises(LedgerUnavailable) as ei:
        led.run("s", "pay", {"x": 1}, lambda: fired.append(1))
    assert fired == [] and ei.value.exit_code == 3 and "unsee.calls" in str(ei.value)


def test_calls_in_flight_leave_the_store_pool_free(pg_url):
    """Each call in flight holds a connection for its lock, from the ledger's own pool: three
    slow calls at once on a store pool of two still leave the store its connections."""
    import threading

    pool = open_pool(pg_url, max_size=2, timeout=3)
    led = Ledger.on_postgres(pool)
    inside, go = threading.Barrier(4), threading.Event()

    def slow(i):
        inside.wait(10)
        go.wait(10)
        return i

    outs = []
    threads = [threading.Thread(target=lambda i=i: outs.append(led.run("s", "t", {"i": i}, lambda: slow(i))))
               for i in range(3)]
    try:
        for t in threads:
            t.start()
        inside.wait(10)  # all three are inside their functions, holding their locks
        with pool.connection(timeout=1) as conn:  # the store's pool still serves at once
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert len(led.calls(status="fired")) == 3
    finally:
        go.set()
        for t in threads:
            t.join(10)
    assert sorted(o.disposition for o in outs) == ["fired"] * 3
    assert len(led.calls(status="done")) == 3
    led.close()
    pool.close()


def test_firer_connection_lost_mid_call_still_records_the_outcome(ledger, pg_url):
    """The server drops the connection that holds the call's lock while the function runs (a
    restart, a network cut): the firer still knows the outcome and records it on a fresh one."""

    def fire():
        with psycopg.connect(pg_url, autocommit=True) as admin:
            (n,) = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_locks "
                                 "WHERE locktype = 'advisory' AND database = "
                                 "(SELECT oid FROM pg_database WHERE datname = current_database())").fetchone()
        assert n == 1  # the firer's lock connection, and only it
        return "sent"

    out = ledger.run("s", "mail", {"to": "x"}, fire)
    assert out.disposition == "fired" and out.value == "sent"
    assert ledger.get(out.call_id).status == "done"
    assert ledger.run("s", "mail", {"to": "x"}, fire, occurrence=0).disposition == "replayed"
