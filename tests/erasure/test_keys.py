"""Crypto-shredding of LangGraph checkpoints (plugins/erasure/keys.py) on a real
``create_agent`` agent: no plaintext in the checkpoint files, history works, a
destroyed key makes its thread unreadable (and only it), rotation, and the
key bytes leave keys.sqlite and its -wal/-shm."""

from __future__ import annotations

import asyncio
import re
import sqlite3

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from unsee.plugins.erasure.keys import (EncryptingSaver, KeyDestroyed, KeyStore, ThreadCipher,
                                        current_thread, encrypted_serde, encrypting)
from unsee.plugins.model import ScriptedChatModel

SECRET = "4417-2231"
TEXT_A = f"my card number is {SECRET}, keep it safe"
TEXT_B = "bob asks about the weather in Lisbon"
A, B = "thread-a", "thread-b"


def _agent(checkpointer):
    model = ScriptedChatModel(policy=lambda msgs, tools: AIMessage(content="echo: " + str(msgs[-1].content)))
    return create_agent(model, tools=[], checkpointer=checkpointer)


def _cfg(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


def _say(agent, thread: str, text: str):
    return agent.invoke({"messages": [("user", text)]}, _cfg(thread))


def _raw(path) -> bytes:
    return b"".join(p.read_bytes() for p in (path, path.with_name(path.name + "-wal"),
                                            path.with_name(path.name + "-shm")) if p.exists())


def _kids_used(db, thread: str) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        types = [r[0] for r in conn.execute("SELECT type FROM checkpoints WHERE thread_id=? UNION ALL "
                                            "SELECT type FROM writes WHERE thread_id=?", (thread, thread))]
    finally:
        conn.close()
    assert types and all("+aesgcm:" in t for t in types), types
    return {t.split("+aesgcm:", 1)[1] for t in types}


@pytest.fixture
def store(tmp_path):
    s = KeyStore(tmp_path / "keys.sqlite")
    yield s
    s.close()


@pytest.fixture
def sqlite_setup(tmp_path, store):
    conn = sqlite3.connect(tmp_path / "lg.sqlite", check_same_thread=False)
    saver = EncryptingSaver(SqliteSaver(conn, serde=encrypted_serde(store)), store)
    yield _agent(saver), saver, tmp_path / "lg.sqlite"
    conn.close()


def test_no_plaintext_and_history_works(sqlite_setup, store):
    agent, saver, db = sqlite_setup
    _say(agent, A, TEXT_A)
    _say(agent, B, TEXT_B)
    _say(agent, A, "second turn")
    raw = _raw(db)
    for needle in (SECRET, TEXT_A, "my card number", TEXT_B, "second turn", "echo: "):
        assert raw.count(needle.encode()) == 0, needle
    state = agent.get_state(_cfg(A))
    assert [m.content for m in state.values["messages"]] == [TEXT_A, "echo: " + TEXT_A, "second turn",
                                                             "echo: second turn"]
    history = list(agent.get_state_history(_cfg(A)))
    assert len(history) >= 6 and any(SECRET in str(h.values.get("messages")) for h in history)
    # opaque kids: random hex, one per thread, never derived from the thread id
    kids_a, kids_b = _kids_used(db, A), _kids_used(db, B)
    assert kids_a == set(store.kids_of(A)) and kids_b == set(store.kids_of(B)) and not kids_a & kids_b
    assert all(re.fullmatch(r"[0-9a-f]{16}", k) and "thread" not in k for k in kids_a | kids_b)
    assert set(store.threads()) == {A, B}


def test_shred_makes_only_that_thread_unreadable(sqlite_setup, store):
    agent, saver, db = sqlite_setup
    _say(agent, A, TEXT_A)
    _say(agent, B, TEXT_B)
    keys = [store.key(k) for k in store.kids_of(A)]
    assert store.destroy(store.kids_of(A)) is True
    with pytest.raises(KeyDestroyed) as info:
        agent.get_state(_cfg(A))
    assert info.value.kid in _kids_used(db, A) and "destroyed" in str(info.value)
    with pytest.raises(KeyDestroyed):
        list(agent.get_state_history(_cfg(A)))
    assert isinstance(info.value, LookupError)
    assert agent.get_state(_cfg(B)).values["messages"][0].content == TEXT_B
    with pytest.raises(KeyDestroyed):  # a listing across all threads meets the shredded one
        list(saver.list(None))
    raw_keys = _raw(store.path)
    assert all(raw_keys.count(k) == 0 for k in keys)
    assert store.kids_of(A) == [] and store.threads() == [B]
    saver.delete_thread(A)  # works without the key
    assert agent.get_state(_cfg(A)).values == {}
    _say(agent, A, "fresh start")  # a new key for the thread
    assert agent.get_state(_cfg(A)).values["messages"][-1].content == "echo: fresh start"


def test_rotate_new_writes_use_new_key_old_still_decrypt(sqlite_setup, store):
    agent, saver, db = sqlite_setup
    _say(agent, A, TEXT_A)
    (old,) = store.kids_of(A)
    assert _kids_used(db, A) == {old}
    prev, new = store.rotate(A)
    assert prev == old and new != old and store.key_for(A)[0] == new and store.kids_of(A) == [old, new]
    _say(agent, A, "after rotation")
    assert _kids_used(db, A) == {old, new}
    newest = saver.get_tuple(_cfg(A))
    conn = sqlite3.connect(db)
    (typ,) = conn.execute("SELECT type FROM checkpoints WHERE thread_id=? AND checkpoint_id=?",
                          (A, newest.config["configurable"]["checkpoint_id"])).fetchone()
    conn.close()
    assert typ.endswith("aesgcm:" + new)
    assert len([m for h in agent.get_state_history(_cfg(A)) for m in h.values.get("messages", [])]) > 0
    old_key = store.key(old)
    assert store.destroy([old]) is True and _raw(store.path).count(old_key) == 0
    # the newest checkpoint (and its writes) are under the new key; older ones are shredded
    assert agent.get_state(_cfg(A)).values["messages"][-1].content == "echo: after rotation"
    with pytest.raises(KeyDestroyed):
        list(agent.get_state_history(_cfg(A)))


def test_in_memory_saver(store):
    saver = encrypting(InMemorySaver, store)
    agent = _agent(saver)
    _say(agent, A, TEXT_A)
    _say(agent, B, TEXT_B)
    blobs = repr(saver.inner.storage) + repr(saver.inner.writes) + repr(getattr(saver.inner, "blobs", ""))
    assert SECRET not in blobs and "my card" not in blobs
    assert agent.get_state(_cfg(A)).values["messages"][0].content == TEXT_A
    store.shred(A)
    with pytest.raises(KeyDestroyed):
        agent.get_state(_cfg(A))
    assert agent.get_state(_cfg(B)).values["messages"][1].content == "echo: " + TEXT_B


def test_async_sqlite_saver(tmp_path, store):
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async def main():
        async with aiosqlite.connect(tmp_path / "lg.sqlite") as conn:
            agent = _agent(encrypting(lambda serde: AsyncSqliteSaver(conn, serde=serde), store))
            for thread, text in ((A, TEXT_A), (B, TEXT_B)):
                await agent.ainvoke({"messages": [("user", text)]}, _cfg(thread))
            assert _raw(tmp_path / "lg.sqlite").count(SECRET.encode()) == 0
            assert set(store.threads()) == {A, B}  # every write had its thread (no shared key used)
            store.shred(A)
            with pytest.raises(KeyDestroyed):
                await agent.aget_state(_cfg(A))
            assert (await agent.aget_state(_cfg(B))).values["messages"][0].content == TEXT_B

    asyncio.run(main())


def test_cipher_contract(store):
    cipher = ThreadCipher(store)
    name, ct = cipher.encrypt(b"outside any thread")  # the shared key of thread ""
    assert name == "aesgcm:" + store.kids_of("")[0] and cipher.decrypt(name, ct) == b"outside any thread"
    token = current_thread.set(A)
    try:
        name_a, ct_a = cipher.encrypt(b"x")
    finally:
        current_thread.reset(token)
    assert name_a == "aesgcm:" + store.kids_of(A)[0] != name
    with pytest.raises(Exception):  # GCM tag: the kid is bound as associated data
        cipher.decrypt(name, ct_a)
    with pytest.raises(ValueError):
        cipher.decrypt("aes", ct)
    with pytest.raises(KeyDestroyed):
        cipher.decrypt("aesgcm:0000000000000000", ct)
    with pytest.raises(ValueError):
        EncryptingSaver(InMemorySaver(), store)
    plain = InMemorySaver()
    assert encrypting(plain, store).inner is plain and plain.serde.cipher.store is store


# --- key bookkeeping of EncryptingSaver's optional methods (issue 29) -------------------------

import copy  # noqa: E402

from tests.support.full_saver import FullInMemorySaver  # noqa: E402  (InMemorySaver + copy/prune/delete_for_runs)

from unsee.plugins.erasure.keys import OPTIONAL_METHODS, RekeyUnsupported, implemented  # noqa: E402


def _values(saver, thread: str) -> list[tuple[str, bytes]]:
    """Every stored (type, ciphertext) of ``thread`` in an InMemorySaver."""
    s = saver.inner
    out = [v for cps in (s.storage.get(thread) or {}).values() for c, m, _ in cps.values() for v in (c, m)]
    out += [w[2] for k, ws in s.writes.items() if k[0] == thread for w in ws.values()]
    return out + [b for k, b in s.blobs.items() if k[0] == thread and b[0] != "empty"]


def _kids(values) -> set[str]:
    return {t.split("+aesgcm:", 1)[1] for t, _ in values}


def _messages(agent, thread: str) -> list[str]:
    return [m.content for m in agent.get_state(_cfg(thread)).values.get("messages", [])]


def test_wrapper_mirrors_the_inner_savers_methods(tmp_path, store):
    conn = sqlite3.connect(tmp_path / "lg.sqlite", check_same_thread=False)
    for inner in (InMemorySaver(), FullInMemorySaver(), SqliteSaver(conn)):
        saver = encrypting(inner, store)
        assert isinstance(saver, EncryptingSaver) and saver.inner is inner
        assert {m for m in OPTIONAL_METHODS if implemented(type(saver), m)} == \
            {m for m in OPTIONAL_METHODS if implemented(type(inner), m)}
    conn.close()
    assert not implemented(type(encrypting(InMemorySaver(), store)), "copy_thread")
    assert implemented(type(encrypting(FullInMemorySaver(), store)), "acopy_thread")
    assert type(encrypting(InMemorySaver(), store)) is type(encrypting(InMemorySaver(), store))  # cached
    full = encrypting(FullInMemorySaver(), store)
    assert type(copy.copy(full)) is type(full) and copy.copy(full).inner is full.inner
    assert not implemented(type(encrypting(SqliteSaver(sqlite3.connect(":memory:")), store)), "aput_writes")


def test_delete_thread_destroys_its_keys(sqlite_setup, store):
    agent, saver, db = sqlite_setup
    _say(agent, A, TEXT_A)
    _say(agent, B, TEXT_B)
    kids_b = store.kids_of(B)
    key_a = store.key(store.kids_of(A)[0])
    saver.delete_thread(A)
    assert store.kids_of(A) == [] and _raw(store.path).count(key_a) == 0
    assert store.kids_of(B) == kids_b and _messages(agent, B)[0] == TEXT_B
    saver.delete_thread(A)  # again (e.g. after a crash between the row delete and the key destroy)
    _say(agent, A, "fresh start")
    assert _messages(agent, A)[-1] == "echo: fresh start" and len(store.kids_of(A)) == 1


def test_prune_keep_latest_keeps_latest_readable_and_shreds_the_rest(store):
    saver = encrypting(FullInMemorySaver, store)
    agent = _agent(saver)
    for text in (TEXT_A, "second turn", "third turn"):
        _say(agent, A, text)
    _say(agent, B, TEXT_B)
    before, latest = _values(saver, A), _messages(agent, A)
    (old,), kids_b = store.kids_of(A), store.kids_of(B)
    saver.prune([A], strategy="keep_latest")
    assert _messages(agent, A) == latest and len(list(agent.get_state_history(_cfg(A)))) == 1
    (new,) = store.kids_of(A)
    assert new != old and _kids(_values(saver, A)) == {new}  # the kept checkpoint: re-encrypted
    for value in before:  # every old ciphertext (wherever a copy of it survives) is unreadable
        with pytest.raises(KeyDestroyed):
            saver.serde.loads_typed(value)
    assert store.kids_of(B) == kids_b and _messages(agent, B)[1] == "echo: " + TEXT_B
    _say(agent, A, "after prune")
    assert _messages(agent, A)[-1] == "echo: after prune"


def test_prune_finishes_after_a_crash_and_delete_shreds(store):
    saver = encrypting(FullInMemorySaver, store)
    agent = _agent(saver)
    for text in (TEXT_A, "second turn"):
        _say(agent, A, text)
    latest = _messages(agent, A)
    old = store.kids_of(A)
    saver.inner.prune([A], strategy="keep_latest")  # = a crash right after the inner saver pruned
    assert _messages(agent, A) == latest and store.kids_of(A) == old  # still readable
    saver.prune([A])  # the rerun finishes the shred
    assert _messages(agent, A) == latest and not set(old) & set(store.kids_of(A))
    saver.prune([A, B], strategy="delete")
    assert store.kids_of(A) == [] and _messages(agent, A) == []
    with pytest.raises(TypeError):
        saver.prune(A)  # a str is not a list of threads
    with pytest.raises(ValueError):
        saver.prune([B], strategy="everything")


def test_copy_thread_gives_the_copy_its_own_key(store):
    saver = encrypting(FullInMemorySaver, store)
    agent = _agent(saver)
    _say(agent, A, TEXT_A)
    _say(agent, A, "second turn")
    saver.copy_thread(A, "copy-1")
    saver.copy_thread(A, "copy-2")
    assert _messages(agent, "copy-1") == _messages(agent, A)
    assert _kids(_values(saver, "copy-1")) == set(store.kids_of("copy-1"))
    assert not set(store.kids_of("copy-1")) & set(store.kids_of(A))
    assert saver.rekey_thread("copy-1") == 0  # idempotent: nothing left under another thread's key
    expected = _messages(agent, A)
    store.shred(A)  # destroying the source's keys leaves the copy readable ...
    assert _messages(agent, "copy-1") == expected
    with pytest.raises(KeyDestroyed):
        agent.get_state(_cfg(A))
    store.shred("copy-1")  # ... and the other way round
    assert _messages(agent, "copy-2") == expected
    with pytest.raises(KeyDestroyed):
        agent.get_state(_cfg("copy-1"))


def test_delete_for_runs_keeps_the_rest_readable(store):
    saver = encrypting(FullInMemorySaver, store)
    agent = _agent(saver)
    # (LangGraph's server records a run's id in its checkpoints' metadata: here config metadata does)
    agent.invoke({"messages": [("user", TEXT_A)]}, {**_cfg(A), "metadata": {"run_id": "run-1"}})
    kept = _messages(agent, A)
    agent.invoke({"messages": [("user", "second turn")]}, {**_cfg(A), "metadata": {"run_id": "run-2"}})
    assert {t.metadata["run_id"] for t in saver.list(_cfg(A))} == {"run-1", "run-2"}
    kids = store.kids_of(A)
    saver.delete_for_runs(["run-2"])
    assert _messages(agent, A) == kept and store.kids_of(A) == kids
    assert {t.metadata["run_id"] for t in saver.list(_cfg(A))} == {"run-1"}


def test_rekey_refused_over_an_unknown_storage(tmp_path, store):
    class SqliteWithCopy(SqliteSaver):
        def copy_thread(self, source_thread_id, target_thread_id):
            raise AssertionError("not reached: refused before anything is copied")

    conn = sqlite3.connect(tmp_path / "lg.sqlite", check_same_thread=False)
    saver = encrypting(lambda serde: SqliteWithCopy(conn, serde=serde), store)
    agent = _agent(saver)
    _say(agent, A, TEXT_A)
    with pytest.raises(RekeyUnsupported) as info:
        saver.copy_thread(A, "copy")
    assert isinstance(info.value, NotImplementedError) and "nothing was changed" in str(info.value)
    assert store.threads() == [A] and _messages(agent, A)[0] == TEXT_A
    conn.close()


@pytest.mark.postgres
def test_postgres_prune_keep_latest_shreds_older_ciphertext(pg_url, store):
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    with psycopg.connect(pg_url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        saver = encrypting(lambda serde: PostgresSaver(conn, serde=serde), store)
        saver.inner.setup()
        agent = _agent(saver)
        for text in (TEXT_A, "second turn", "third turn"):
            _say(agent, A, text)
        _say(agent, B, TEXT_B)
        rows = conn.execute("SELECT type, blob FROM checkpoint_blobs WHERE thread_id=%s AND blob IS NOT NULL "
                            "UNION ALL SELECT type, blob FROM checkpoint_writes WHERE thread_id=%s", (A, A)).fetchall()
        latest, kids_b = _messages(agent, A), store.kids_of(B)
        saver.prune([A])
        assert _messages(agent, A) == latest and len(list(agent.get_state_history(_cfg(A)))) == 1
        (new,) = store.kids_of(A)
        left = conn.execute("SELECT type FROM checkpoint_blobs WHERE thread_id=%s AND blob IS NOT NULL UNION ALL "
                            "SELECT type FROM checkpoint_writes WHERE thread_id=%s", (A, A)).fetchall()
        assert left and {r["type"].split("+aesgcm:", 1)[1] for r in left} == {new}
        for r in rows:
            with pytest.raises(KeyDestroyed):
                saver.serde.loads_typed((r["type"], bytes(r["blob"])))
        assert store.kids_of(B) == kids_b and _messages(agent, B)[0] == TEXT_B
        saver.prune([A], strategy="delete")
        assert store.kids_of(A) == [] and _messages(agent, A) == []


@pytest.mark.postgres
async def test_async_postgres_aprune_and_sync_prune_from_another_thread(pg_url, store):
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    async with await AsyncConnection.connect(pg_url, autocommit=True, prepare_threshold=0,
                                             row_factory=dict_row) as conn:
        saver = encrypting(lambda serde: AsyncPostgresSaver(conn, serde=serde), store)
        await saver.inner.setup()
        agent = _agent(saver)
        for thread in (A, B):
            for text in (TEXT_A, "second turn"):
                await agent.ainvoke({"messages": [("user", text)]}, _cfg(thread))
        old_a, old_b = store.kids_of(A), store.kids_of(B)
        await saver.aprune([A])
        await asyncio.to_thread(saver.prune, [B])  # the sync method runs on the saver's loop
        for thread, old in ((A, old_a), (B, old_b)):
            state = await agent.aget_state(_cfg(thread))
            assert state.values["messages"][-1].content == "echo: second turn"
            assert not set(old) & set(store.kids_of(thread)) and len(store.kids_of(thread)) == 1
        with pytest.raises(asyncio.InvalidStateError):
            saver.prune([A])  # from the loop's own thread: refused, as LangGraph's async savers do
