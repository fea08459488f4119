"""Crypto-shredding of LangGraph checkpoints (plugins/erasure/keys.py) on a real
``create_agent`` agent: no plaintext in the checkpoint files, history works, a
destroyed key makes its thread unreadable (and only it), rotation, and the
key bytes leave keys.sqlite and its -wal/-shm."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import time

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


def test_overhead(tmp_path, store):
    """200 invokes on SqliteSaver with and without encryption (printed with -s)."""
    def run(saver, n=200) -> float:
        agent = _agent(saver)
        _say(agent, "warm", "warm up")
        t = time.perf_counter()
        for i in range(n):
            _say(agent, f"t{i % 10}", f"message {i} {SECRET}")
        return time.perf_counter() - t

    conns, plain, enc = [], [], []
    for rnd in range(2):  # alternate, keep the best of each: the machine's noise is larger than the cost
        conns += [sqlite3.connect(tmp_path / f"enc{rnd}.sqlite", check_same_thread=False),
                  sqlite3.connect(tmp_path / f"plain{rnd}.sqlite", check_same_thread=False)]
        enc.append(run(encrypting(lambda serde: SqliteSaver(conns[-2], serde=serde), store)))
        plain.append(run(SqliteSaver(conns[-1])))
    for c in conns:
        c.close()
    plain, enc = min(plain), min(enc)
    print(f"\n200 invokes: plain {plain:.3f}s, encrypted {enc:.3f}s, ratio {enc / plain:.2f}")
    assert enc / plain < 4
