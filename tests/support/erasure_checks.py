"""Checks the erasure suites share: what must survive an erasure unchanged (``world``), how
many checkpoints still hold the target (``history_holding``), the state each checkpoint rebuilds
(``states``) and that a delta history came out clean (``check_clean``), and the rows of a
PostgreSQL database holding the target, as PostgreSQL reads them (``sql_copies``)."""

from __future__ import annotations

import json

from tests.support.erasure_agents import SECRET, live, raw_copies
from unsee.plugins.erasure.history import config_of, value_text

CFG = {"configurable": {"thread_id": "t1"}}


def world(home, u, agent, thread="t1"):
    """Everything that must survive erasure unchanged: live state, store items, sandbox files, ledger facts."""
    items = sorted((tuple(i.namespace), i.key, json.dumps(i.value)) for i in agent.store.inner.search((), limit=100))
    env = u.environments.env(thread)
    files = {p: env.read_file(p) for p in ("case/notes.txt",) if _exists(env, p)}
    facts = sorted((c.call_id, c.tool, c.status) for c in u.ledger.calls())
    return live(agent, thread), items, files, facts


def _exists(env, path):
    try:
        env.read_file(path)
        return True
    except Exception:
        return False


def history_holding(agent, thread="t1"):
    snaps = list(agent.get_state_history({"configurable": {"thread_id": thread}}))
    return len(snaps), sum(1 for s in snaps if SECRET in repr(s.values) + repr(s.metadata))


def messages_of(values: dict) -> list[tuple[str, str]]:
    return [(type(m).__name__, str(m.content)) for m in values.get("messages", [])]


def states(agent, thread: str) -> dict[str, list]:
    """checkpoint id -> the messages LangGraph rebuilds there."""
    out = {}
    for snap in agent.get_state_history(config_of(thread)):
        out[snap.config["configurable"]["checkpoint_id"]] = messages_of(snap.values)
    return out


def check_clean(agent, home, expected, thread: str = "t1"):
    """Every checkpoint of ``thread`` rebuilds to the state ``expected`` holds for its id (none
    appeared from nowhere), none holds ``SECRET``, and no file under ``home`` holds a copy."""
    after = states(agent, thread)
    assert after, "the thread has a history"
    for cid, msgs in after.items():
        assert cid in expected, "a checkpoint id appeared from nowhere"
        assert msgs == expected[cid], f"checkpoint {cid} rebuilds to another state"
        assert SECRET not in repr(msgs)
    held = [s for s in agent.get_state_history(config_of(thread)) if SECRET in value_text(s.values)]
    assert held == []
    assert raw_copies(home) == {}


#: (table, column) of every place LangGraph and unsee keep values in PostgreSQL
VALUE_COLUMNS = [("public.checkpoints", "checkpoint::text"), ("public.checkpoints", "metadata::text"),
                 ("public.checkpoint_blobs", "blob"), ("public.checkpoint_writes", "blob"),
                 ("public.store", "value::text"), ("unsee.content", "content"), ("unsee.store_journal", "new_value"),
                 ("unsee.store_journal", "old_value"), ("unsee.spans", "attributes"), ("unsee.commits", "payload")]


def sql_copies(url: str, needle: str = SECRET) -> dict[str, int]:
    """Rows holding the target, per table and column, as PostgreSQL reads them (decompressed)."""
    import psycopg

    out = {}
    with psycopg.connect(url) as conn:
        for table, col in VALUE_COLUMNS:
            expr = f"position(%s::bytea in {col})" if col == "blob" else f"strpos({col}, %s)"
            n = conn.execute(f"SELECT count(*) FROM {table} WHERE {expr} > 0", (needle,)).fetchone()[0]
            if n:
                out[f"{table}.{col}"] = n
    return out
