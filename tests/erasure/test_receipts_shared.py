"""Erasure journals, receipts and the signing key outlive the machine (issue 33, part 3).

On a PostgreSQL store the journals and receipts are rows of unsee's schema and the signing key
is the store's (or ``$UNSEE_RECEIPT_KEY``'s): an erasure done at home A is verified from a third
process that has only the store URL after A's home is gone; an erasure interrupted at A is
found and finished at B; two homes given one ``$UNSEE_RECEIPT_KEY`` sign with one key; a bad key
file is a typed error that changes nothing. SQLite homes keep their files
(tests/erasure/test_receipt.py, test_erasure.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from tests.support.erasure_agents import SECRET, build, live, run
from tests.support.erasure_checks import history_holding
from unsee import RevocationEvent, Unsee
from unsee.middleware.errors import InjectedCrash
from unsee.middleware.faults import crash_at
from unsee.middleware.store import ProvenanceStore
from unsee.plugins.erasure import read_receipt, verify_signature
from unsee.plugins.erasure.errors import ReceiptKeyInvalid
from unsee.plugins.erasure.journal import Journal
from unsee.plugins.erasure.receipt import KEY_ENV, SigningKey, stored_receipt, trusted_key
from unsee.plugins.erasure.shared import shared_db
from unsee.plugins.model import ScriptedChatModel

postgres = pytest.mark.postgres


def _pem_file(path: Path) -> Path:
    path.write_bytes(Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return path


def _rows(url: str, sql: str, args=()) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql, args).fetchall()


def _verify_cli(tmp_path: Path, url: str, what: str, *options: str) -> subprocess.CompletedProcess:
    """``unsee receipt verify WHAT`` in a new process with a fresh home and only the store URL."""
    third = {**os.environ, "UNSEE_HOME": str(tmp_path / "auditor"), "UNSEE_STORE": url}
    third.pop(KEY_ENV, None)
    return subprocess.run([sys.executable, "-m", "unsee", "receipt", "verify", what, *options], env=third,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)


@postgres
def test_a_receipt_written_at_a_verifies_from_a_third_process_after_a_is_gone(tmp_path, pg_url, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    home_a = tmp_path / "a"
    home_a.mkdir()
    u, agent, close = build(home_a, pg_url=pg_url)
    try:
        run(agent, "t1")
        report = u.forget("t1", RevocationEvent(target=SECRET))
        assert report.committed and report.erased_clean
        event = report.event_id
        # the file on the machine that erased, the row in the store: the same signed receipt
        local = read_receipt(home_a / "receipts" / f"{event}.json")
        assert stored_receipt(shared_db(u.store), event) == local
        (sessions,) = _rows(pg_url, "SELECT sessions FROM unsee.erasure_receipts WHERE event_id=%s", (event,))[0]
        assert json.loads(sessions) == ["t1"]
        # signed with the store's key (no receipt.key file at A); receipt.pub is its public key
        assert not (home_a / "receipt.key").exists()
        store_pem = _rows(pg_url, "SELECT value FROM unsee.unsee_meta WHERE key='receipt_key'")[0][0]
        assert (home_a / "receipt.pub").read_text() == local.public_key == \
            SigningKey.from_store(shared_db(u.store)).public_pem()
        assert "PRIVATE KEY" in store_pem
        # journals are rows, not files of A
        assert _rows(pg_url, "SELECT count(*) FROM unsee.erasure_journals WHERE name=%s", (event,))[0][0] == 1
        assert not (home_a / "erasures").exists()
    finally:
        close()
    shutil.rmtree(home_a)  # machine A is gone

    res = _verify_cli(tmp_path, pg_url, event)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "signature: valid against the shared store's key" in res.stdout
    assert f"event {event}" in res.stdout and "langgraph.checkpoints" in res.stdout
    assert not (tmp_path / "auditor").exists()  # verifying made no home
    # an auditor pinning the public key it was given
    (tmp_path / "given.pub").write_text(local.public_key)
    (tmp_path / "other.pub").write_text(SigningKey(Ed25519PrivateKey.generate()).public_pem())
    res = _verify_cli(tmp_path, pg_url, event, "--public-key", str(tmp_path / "given.pub"))
    assert res.returncode == 0 and "valid against --public-key" in res.stdout, res.stdout + res.stderr
    res = _verify_cli(tmp_path, pg_url, event, "--public-key", str(tmp_path / "other.pub"))
    assert res.returncode == 1 and "signature: INVALID" in res.stdout, res.stdout + res.stderr
    res = _verify_cli(tmp_path, pg_url, event, "--public-key", str(tmp_path / "auditor.txt"))
    assert res.returncode == 2 and "--public-key" in res.stderr, res.stderr

    # a receipt changed in the store no longer verifies; one re-signed by another key neither
    # (the store's key is pinned); an unknown event id is bad input
    row = json.loads(_rows(pg_url, "SELECT receipt FROM unsee.erasure_receipts WHERE event_id=%s", (event,))[0][0])
    row["routes"][0]["copies_after"] = 0 if row["routes"][0]["copies_after"] else 7
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE unsee.erasure_receipts SET receipt=%s WHERE event_id=%s", (json.dumps(row), event))
    res = _verify_cli(tmp_path, pg_url, event)
    assert res.returncode == 1 and "signature: INVALID" in res.stdout, res.stdout + res.stderr
    other = SigningKey(Ed25519PrivateKey.generate())
    from unsee.plugins.erasure.receipt import Receipt, sign_receipt

    forged = sign_receipt(Receipt.model_validate({**row, "public_key": other.public_pem(), "signature": None}), other)
    assert verify_signature(forged)  # valid under its own embedded key
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE unsee.erasure_receipts SET receipt=%s WHERE event_id=%s",
                     (forged.model_dump_json(), event))
    res = _verify_cli(tmp_path, pg_url, event)
    assert res.returncode == 1 and "signature: INVALID" in res.stdout
    res = _verify_cli(tmp_path, pg_url, "no-such-event")
    assert res.returncode == 2 and "no receipt of event 'no-such-event'" in res.stderr, res.stderr


@postgres
def test_a_forget_erasure_interrupted_at_a_is_finished_at_b(tmp_path, pg_url, monkeypatch):
    """A crashes inside the erasure that follows its forget (after the history is rewritten);
    A's home is deleted; B (another home, same store and PostgresSaver) erases the same event."""
    monkeypatch.delenv(KEY_ENV, raising=False)
    home_a, home_b = tmp_path / "a", tmp_path / "b"
    home_a.mkdir()
    home_b.mkdir()
    u, agent, close = build(home_a, pg_url=pg_url)
    event = RevocationEvent(target=SECRET)
    try:
        run(agent, "t1")
        with crash_at("erase:unsee.records"), pytest.raises(InjectedCrash):
            u.forget("t1", event)
    finally:
        close()
    shutil.rmtree(home_a)
    u, agent, close = build(home_b, pg_url=pg_url)
    try:
        result = u.erase("t1", event)
        assert result.clean, [(r.route, r.copies, r.notes) for r in result.after.routes if r.copies]
        assert result.receipt.event_id == event.event_id and not result.existing
        assert history_holding(agent)[1] == 0
        pinned = trusted_key(home_b, shared_db(u.store))[0]
        assert verify_signature(read_receipt(result.path), trusted_public_pem=pinned)
        assert stored_receipt(shared_db(u.store), event.event_id) == result.receipt
        journal = json.loads(_rows(pg_url, "SELECT value FROM unsee.erasure_journals WHERE name=%s",
                                   (event.event_id,))[0][0])
        assert journal["state"] == "done"
        # erased again at B with a new event id: the clean session stands on the store's receipt
        again = u.erase("t1", RevocationEvent(target=SECRET))
        assert again.existing and again.receipt == result.receipt
    finally:
        close()


@postgres
def test_a_subject_erasure_journaled_at_a_is_finished_at_b(tmp_path, pg_url, monkeypatch):
    """A crashes after deleting the subject's threads and records; only the journal in the store
    still names them: B finds it (else the threads are unknown there) and finishes the erasure,
    its receipt reporting A's first audit."""
    from tests.support.subject_agents import CARDS, NS, build as build_subjects, run_all

    monkeypatch.delenv(KEY_ENV, raising=False)
    home_a, home_b = tmp_path / "a", tmp_path / "b"
    args = (["a1", "a2"], [NS["a"]], [CARDS["a"]])
    u, agent, store, close = build_subjects(home_a, pg_url)
    try:
        run_all(agent)
        with crash_at("erase:subject:unsee.ledger"), pytest.raises(InjectedCrash):
            u.erase_subject(*args, agent=agent)
        assert not u.store.has_session("a1") and not u.store.has_session("a2")
    finally:
        close()
    (name, value), = _rows(pg_url, "SELECT name, value FROM unsee.erasure_journals WHERE name NOT LIKE 'history-%%'")
    journal = json.loads(value)
    assert journal["state"] == "planned" and journal["done"] == ["langgraph.checkpoints", "langgraph.store",
                                                                  "unsee.records"]
    assert CARDS["a"] not in value
    assert not (home_a / "erasures").exists()
    shutil.rmtree(home_a)

    u, agent, store, close = build_subjects(home_b, pg_url)
    try:
        result = u.erase_subject(*args, agent=agent)
        assert result.clean, [(r.route, {k: v for k, v in r.byte_copies.items() if v}, r.value_copies, r.notes)
                              for r in result.after.routes if r.copies]
        assert result.receipt.event_id == name
        before = {r.name: r.copies_before for r in result.receipt.routes}
        assert before["langgraph.checkpoints"] == journal["before"]["langgraph.checkpoints"] > 0  # A's audit
        assert json.loads(_rows(pg_url, "SELECT value FROM unsee.erasure_journals WHERE name=%s",
                                (name,))[0][0])["state"] == "done"
        assert stored_receipt(shared_db(u.store), name) == read_receipt(result.path)
    finally:
        close()


@postgres
def test_a_retention_rewrite_interrupted_at_a_is_finished_at_b(tmp_path, pg_url):
    """A crashes inside the swap of a retention rewrite (the thread may be partial); B, with
    only the store's journal row, finishes the swap from the staged copy."""
    home_a, home_b = tmp_path / "a", tmp_path / "b"
    home_a.mkdir()
    home_b.mkdir()
    u, agent, close = build(home_a, pg_url=pg_url)
    try:
        run(agent, "t1")
        before = live(agent)
        with crash_at("retention:swapping"), pytest.raises(InjectedCrash):
            u.retention("t1", "semantic")
    finally:
        close()
    (value,), = _rows(pg_url, "SELECT value FROM unsee.erasure_journals WHERE name LIKE 'retention-%%'")
    assert json.loads(value)["state"] == "swapping"
    shutil.rmtree(home_a)
    u, agent, close = build(home_b, pg_url=pg_url)
    try:
        rec = u.retention("t1", "semantic", agent=agent)  # (B never ran the session)
        assert rec.method == "rewrite" and rec.dropped > 0 and "finished a swap interrupted earlier" in rec.notes
        assert live(agent) == before
        (value,), = _rows(pg_url, "SELECT value FROM unsee.erasure_journals WHERE name LIKE 'retention-%%'")
        assert json.loads(value)["state"] is None
    finally:
        close()


@postgres
def test_journal_rows_are_shared_and_files_stay_on_sqlite(tmp_path, pg_url):
    a, b = ProvenanceStore(tmp_path / "a", pg_url), ProvenanceStore(tmp_path / "b", pg_url)
    try:
        j = Journal.open(tmp_path / "a" / "erasures", "ev-1", "s1", a)
        assert j.shared and not j.pending and j.get("session") == "s1"
        j.set(step="one")
        seen = Journal.open(tmp_path / "b" / "erasures", "ev-1", "s1", b)
        assert seen.get("step") == "one" and seen.pending
        seen.set(state="done")
        assert not Journal.open(tmp_path / "a" / "erasures", "ev-1", "s1", a).pending
        assert not (tmp_path / "a" / "erasures").exists() and not (tmp_path / "b" / "erasures").exists()
    finally:
        a.close()
        b.close()
    sqlite = ProvenanceStore(tmp_path / "c")
    try:
        f = Journal.open(tmp_path / "c" / "erasures", "ev-1", "s1", sqlite)
        f.set(step="one")
        assert not f.shared
        assert (tmp_path / "c" / "erasures" / "ev-1.json").read_text() == '{"session": "s1", "step": "one"}'
    finally:
        sqlite.close()


@postgres
def test_the_store_key_is_made_once_for_every_worker(tmp_path, pg_url, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    stores = [ProvenanceStore(tmp_path / f"h{i}", pg_url) for i in range(4)]
    keys, barrier = [], threading.Barrier(len(stores))
    try:
        assert trusted_key(tmp_path / "h0", shared_db(stores[0]))[0] is None  # a reader makes none

        def resolve(i):
            barrier.wait()
            keys.append(SigningKey.resolve(tmp_path / f"h{i}", shared_db(stores[i])).public_pem())

        threads = [threading.Thread(target=resolve, args=(i,)) for i in range(len(stores))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(keys) == 4 and len(set(keys)) == 1
        assert all((tmp_path / f"h{i}" / "receipt.pub").read_text() == keys[0] for i in range(4))
        assert all(not (tmp_path / f"h{i}" / "receipt.key").exists() for i in range(4))
        assert trusted_key(tmp_path / "elsewhere", shared_db(stores[0])) == (keys[0], "the shared store's key")
        # $UNSEE_RECEIPT_KEY comes first, on a shared store too
        env_key = _pem_file(tmp_path / "deploy.pem")
        monkeypatch.setenv(KEY_ENV, str(env_key))
        chosen = SigningKey.resolve(tmp_path / "h0", shared_db(stores[0]))
        assert chosen.public_pem() != keys[0] and chosen.where.startswith(f"${KEY_ENV}")
        assert (tmp_path / "h0" / "receipt.pub").read_text() == chosen.public_pem()
        # a key garbled in the store: typed, naming where it is
        monkeypatch.delenv(KEY_ENV)
        with psycopg.connect(pg_url) as conn:
            conn.execute("UPDATE unsee.unsee_meta SET value='garbled' WHERE key='receipt_key'")
        with pytest.raises(ReceiptKeyInvalid, match="receipt_key"):
            SigningKey.resolve(tmp_path / "h1", shared_db(stores[1]))
    finally:
        for s in stores:
            s.close()


def _forgotten_session(home: Path, secret: str = SECRET):
    """(u, the agent): a session on a SQLite home whose target is forgotten, not erased yet."""
    u = Unsee(home=home)
    agent = create_agent(ScriptedChatModel(policy=lambda messages, tools: AIMessage(content="noted")), [],
                         checkpointer=InMemorySaver(), middleware=[u.middleware()])
    agent.invoke({"messages": [HumanMessage(f"my card is {secret}")]}, {"configurable": {"thread_id": "t1"}})
    assert u.forget("t1", RevocationEvent(target=secret), erase=False).committed
    return u, agent


def test_one_receipt_key_file_for_two_homes(tmp_path, monkeypatch):
    key = _pem_file(tmp_path / "deploy.pem")
    monkeypatch.setenv(KEY_ENV, str(key))
    pubs = []
    for name in ("a", "b"):
        home = tmp_path / name
        u, agent = _forgotten_session(home)
        try:
            result = u.erase("t1", RevocationEvent(target=SECRET), agent=agent)
            assert result.clean
            pubs.append(result.receipt.public_key)
            assert (home / "receipt.pub").read_text() == result.receipt.public_key
            assert not (home / "receipt.key").exists()  # the deployment's key, not one per home
        finally:
            u.close()
    expected = serialization.load_pem_private_key(key.read_bytes(), None).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    assert pubs == [expected, expected]


@pytest.mark.parametrize("bad", ["missing", "garbled", "rsa"])
def test_a_bad_receipt_key_file_is_typed_and_changes_nothing(tmp_path, monkeypatch, bad):
    path = tmp_path / "deploy.pem"
    if bad == "garbled":
        path.write_text("not a key")
    elif bad == "rsa":
        path.write_bytes(rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    home = tmp_path / "home"
    u, agent = _forgotten_session(home)
    try:
        history = list(agent.checkpointer.list({"configurable": {"thread_id": "t1"}}))
        monkeypatch.setenv(KEY_ENV, str(path))
        with pytest.raises(ReceiptKeyInvalid) as info:
            u.erase("t1", RevocationEvent(target=SECRET), agent=agent)
        assert str(path) in str(info.value) and KEY_ENV in str(info.value)
        assert not (home / "receipts").exists() and not (home / "erasures").exists()
        assert not (home / "receipt.pub").exists() and not (home / "receipt.key").exists()
        assert list(agent.checkpointer.list({"configurable": {"thread_id": "t1"}})) == history  # nothing erased
        assert SECRET in repr([c.checkpoint for c in history])
        # verifying pins the key in use: a bad key file is the same typed error there
        monkeypatch.delenv(KEY_ENV)
        done = u.erase("t1", RevocationEvent(target=SECRET), agent=agent)
        assert done.clean
        env = {**os.environ, KEY_ENV: str(path), "UNSEE_HOME": str(home)}
        env.pop("UNSEE_STORE", None)
        res = subprocess.run([sys.executable, "-m", "unsee", "receipt", "verify", str(done.path)], env=env,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode not in (0, 1) and str(path) in res.stderr and "Traceback" not in res.stderr, res
    finally:
        u.close()
