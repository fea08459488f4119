"""The call ledger: ids, the outbox, crash safety, concurrency.

The engine-agnostic cases run on both engines (``ledger`` / ``open_ledger``: a SQLite
file, and the ``unsee.calls`` table of a fresh PostgreSQL database, marked ``postgres``);
the crash cases here are SQLite's, PostgreSQL's with real processes are in test_ledger_pg.py."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unsee.sandbox import CallFailed, CallInDoubt, LedgerError
from unsee.sandbox.ledger import Ledger, canonical_json, make_call_id


ENGINES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=ENGINES)
def open_ledger(request, tmp_path):
    """Opens a new Ledger object on one storage each call (as a new process would)."""
    made, pool = [], None
    if request.param == "postgres":
        from unsee.middleware.sqldb import open_pool

        pool = open_pool(request.getfixturevalue("pg_url"))

    def open_() -> Ledger:
        led = Ledger.on_postgres(pool) if pool is not None else Ledger(tmp_path / "ledger.sqlite")
        made.append(led)
        return led

    yield open_
    for led in made:
        led.close()
    if pool is not None:
        pool.close()


@pytest.fixture
def ledger(open_ledger):
    return open_ledger()


class Counter:
    def __init__(self):
        self.n = 0
        self.lock = threading.Lock()

    def __call__(self, value="ok"):
        def fire():
            with self.lock:
                self.n += 1
            return {"value": value, "n": self.n}

        return fire


# -- ids -----------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3),
    max_leaves=10,
)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(max_size=6), json_values, max_size=5))
def test_call_id_ignores_key_order(args):
    reordered = dict(reversed(list(args.items())))
    assert canonical_json(args) == canonical_json(reordered)
    assert make_call_id("s", "t", args, 0) == make_call_id("s", "t", reordered, 0)
    assert make_call_id("s", "t", args, 0) != make_call_id("s", "t", args, 1)
    assert json.loads(canonical_json(args)) == args


def test_call_id_separates_session_tool_args():
    ids = {make_call_id(s, t, a, 0) for s in ("a", "b") for t in ("x", "y") for a in ({"k": 1}, {"k": 2})}
    assert len(ids) == 8


def test_occurrence_counts_identical_calls(ledger):
    c = Counter()
    a = ledger.run("s", "send", {"to": "x"}, c(), effect="external")
    b = ledger.run("s", "send", {"to": "x"}, c(), effect="external")
    assert a.call_id != b.call_id and c.n == 2
    assert [r.occurrence for r in ledger.calls(session="s")] == [0, 1]


# -- effects ---------------------------------------------------------------------------


def test_external_fires_once_per_call_key(ledger):
    c = Counter()
    first = ledger.run("s", "pay", {"amount": 5}, c("paid"), effect="external")
    assert first.disposition == "fired" and c.n == 1
    again = ledger.run("s", "pay", {"amount": 5}, c("paid"), effect="external", occurrence=0)
    assert again.disposition == "replayed"
    assert again.call_id == first.call_id
    assert again.value == first.value
    assert c.n == 1


def test_read_and_write_effects_always_execute(ledger):
    c = Counter()
    ledger.run("s", "ls", {}, c(), effect="read")
    out = ledger.run("s", "ls", {}, c(), effect="read", occurrence=0)  # same call key: executed again
    ledger.run("s", "touch", {"p": "a"}, c(), effect="write")
    assert out.disposition == "executed" and c.n == 3
    recs = ledger.calls(session="s")
    assert [(r.tool, r.status, r.attempts) for r in recs] == [("ls", "done", 2), ("touch", "done", 1)]


def test_failed_call_is_recorded_and_not_refired(ledger):
    calls = []

    def boom():
        calls.append(1)
        raise ValueError("smtp said no")

    with pytest.raises(ValueError):
        ledger.run("s", "mail", {"to": "x"}, boom, effect="external")
    out = ledger.run("s", "mail", {"to": "x"}, boom, effect="external", occurrence=0)
    assert out.disposition == "failed" and len(calls) == 1
    with pytest.raises(CallFailed) as ei:
        out.unwrap()
    assert "smtp said no" in str(ei.value)
    ledger.resolve(out.call_id, status="released")
    with pytest.raises(ValueError):
        ledger.run("s", "mail", {"to": "x"}, boom, effect="external", occurrence=0)
    assert len(calls) == 2
    assert ledger.get(out.call_id).attempts == 2


def test_persistent_across_instances(open_ledger):
    c = Counter()
    with open_ledger() as a:
        a.run("s", "pay", {"x": 1}, c(), effect="external")
    with open_ledger() as b:  # a new process would start a new pass too
        out = b.run("s", "pay", {"x": 1}, c(), effect="external")
        assert out.disposition == "replayed" and c.n == 1
        if b.dialect == "sqlite":
            assert b._conn().execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert b.integrity_ok()
    with pytest.raises(LedgerError, match="closed"):
        b.get(out.call_id)


def test_explicit_occurrence_names_the_nth_identical_call(ledger):
    c = Counter()
    ledger.run("s", "ping", {}, c(), effect="external")
    ledger.run("s", "ping", {}, c(), effect="external")
    out = ledger.run("s", "ping", {}, c(), effect="external", occurrence=1)  # the second ping
    assert out.disposition == "replayed" and out.value["n"] == 2 and c.n == 2


# -- crash safety ----------------------------------------------------------------------

CRASH_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from unsee.sandbox.ledger import Ledger
    path, counter, where = sys.argv[1:4]
    led = Ledger(path)
    def fire():
        with open(counter, "a") as f:
            f.write("fired\\n")
        if where == "after-fire":
            os._exit(9)          # crash after the side effect, before 'done'
        return "ok"
    if where == "before-fire":
        orig = Ledger._claim
        def crash_claim(self, cid, *rest, **kw):
            os._exit(9)          # crash after 'pending' is committed, before the claim
        Ledger._claim = crash_claim
    led.run("sess", "transfer", {"amount": 100}, fire, effect="external")
    """
)


def _crash(tmp_path: Path, where: str) -> tuple[Path, Path]:
    db, counter = tmp_path / "ledger.sqlite", tmp_path / "fired.txt"
    script = tmp_path / "crash.py"
    script.write_text(CRASH_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(db), str(counter), where], capture_output=True)
    assert proc.returncode == 9, proc.stderr.decode()
    return db, counter


def _fired(counter: Path) -> int:
    return counter.read_text().count("fired") if counter.exists() else 0


def test_crash_after_fire_is_in_doubt_never_refired(tmp_path):
    db, counter = _crash(tmp_path, "after-fire")
    assert _fired(counter) == 1

    def fire():
        counter.open("a").write("fired\n")
        return "ok"

    with Ledger(db) as led:
        assert led.integrity_ok()
        for _ in range(2):
            out = led.run("sess", "transfer", {"amount": 100}, fire, effect="external", occurrence=0)
            assert out.disposition == "in_doubt"
            with pytest.raises(CallInDoubt):
                out.unwrap()
        assert _fired(counter) == 1
        # an operator confirms it happened: from now on it is answered from the ledger
        led.resolve(out.call_id, status="done", result="ok")
        again = led.run("sess", "transfer", {"amount": 100}, fire, effect="external", occurrence=0)
        assert again.disposition == "replayed" and again.value == "ok"
    assert _fired(counter) == 1


def test_crash_before_fire_fires_exactly_once_on_retry(tmp_path):
    db, counter = _crash(tmp_path, "before-fire")
    assert _fired(counter) == 0
    with Ledger(db) as led:
        (rec,) = led.calls()
        assert rec.status == "pending"  # intent was durable before the crash

        def fire():
            counter.open("a").write("fired\n")
            return "ok"

        assert led.run("sess", "transfer", {"amount": 100}, fire, effect="external").disposition == "fired"
        assert led.run("sess", "transfer", {"amount": 100}, fire, effect="external", occurrence=0).disposition == "replayed"
    assert _fired(counter) == 1


# -- concurrency ----------------------------------------------------------------------------


def test_threads_identical_call_fires_once(ledger):
    c = Counter()
    gate = threading.Event()

    def slow():
        gate.wait(5)
        return c()()

    results = []

    def worker():
        results.append(ledger.run("s", "pay", {"a": 1}, slow, effect="external", occurrence=0))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert c.n == 1
    assert sorted(r.disposition for r in results) == ["fired"] + ["replayed"] * 7
    assert len({json.dumps(r.value, sort_keys=True) for r in results}) == 1


def test_threads_many_distinct_calls(ledger):
    c = Counter()

    def worker(i):
        for j in range(20):
            ledger.run(f"s{i % 2}", "note", {"i": i, "j": j}, c(), effect="external")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert c.n == 120
    assert len(ledger.calls(status="done")) == 120
    assert ledger.integrity_ok()


def test_delete_and_vacuum(ledger):
    c = Counter()
    ledger.run("gone", "pay", {"secret": "z"}, c(), effect="external")
    ledger.run("kept", "pay", {"x": 1}, c(), effect="external")
    assert ledger.delete(session="gone") == 1
    ledger.vacuum()
    assert [r.session for r in ledger.calls()] == ["kept"]
    if ledger.path is not None:
        assert b'"secret"' not in Path(ledger.path).read_bytes()


def test_redact_keeps_the_fact_and_the_dedup(ledger):
    c = Counter()
    first = ledger.run("s", "pay", {"card": "4417"}, c("paid 4417"), effect="external")
    ledger.run("other", "pay", {"card": "1"}, c(), effect="external")
    ids = ledger.redact(lambda rec: "4417" in rec.args_json, lambda t: "h" + str(len(t)))
    assert ids == [first.call_id]
    assert ledger.redact(lambda rec: True, lambda t: "x", session="s") == []  # already redacted
    rec = ledger.get(first.call_id)
    assert (rec.status, rec.tool, rec.session, json.loads(rec.args_json)) == ("done", "pay", "s", {"erased": "h15"})
    assert "4417" not in (rec.result_json or "")
    assert ledger.vacuum() is True
    again = ledger.run("s", "pay", {"card": "4417"}, c(), effect="external", occurrence=0)
    assert again.disposition == "replayed" and c.n == 2  # the id still recognises the call


def test_resolve_unknown_call_and_bad_status(ledger):
    with pytest.raises(LedgerError, match="no such call"):
        ledger.resolve("call-nope", status="done")
    with pytest.raises(ValueError):
        ledger.resolve("call-nope", status="fired")
    with pytest.raises(ValueError):
        ledger.run("s", "t", {}, lambda: 1, effect="teleport")
    assert ledger.calls() == []
