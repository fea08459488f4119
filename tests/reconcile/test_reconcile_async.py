"""Reconciling from an event loop: ``async def`` tools and ``async def`` compensators, a session
run with ``ainvoke``, forgotten with ``await u.aforget(...)`` and reconciled with ``await
u.areconcile(...)``; the sync ``u.reconcile`` cannot await them and runs nothing."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from tests.support.reconcile_worlds import (
    TARGET, arun_agent, build_agent, effects, event, forgotten, net, run_agent, target_copies, unsee_tools,
)
from unsee import Unsee
from unsee.plugins.reconcile import NeedsAsync, PlanAlreadyRun
from unsee.plugins.tools import compensator_of


async def aforgotten(u, spec):
    tools = unsee_tools(u, spec, aio=True)
    assert all(t.func is None and t.coroutine is not None for t in tools)  # async only
    agent = build_agent(tools, u)
    await arun_agent(agent)
    rep = await u.aforget("t1", event())
    assert rep.committed
    return agent, rep


async def test_async_tools_and_compensators_reconcile_on_the_loop(tmp_path, world, reference):
    u = Unsee(tmp_path / "home")
    _, rep = await aforgotten(u, world.spec)
    before = world.state()
    assert effects(before) == Counter({"pay": 1, "email": 1}) and TARGET in before["inbox"]
    assert [(i.action, i.runs, i.state) for i in rep.reconciliation.items] == [
        ("compensate", "undo_transfer", "planned"), ("compensate", "recall_email", "planned"),
        ("run", "send_money", "planned"), ("run", "send_email", "planned")]

    # the sync reconcile cannot await them: a typed error, and nothing ran
    for run in ("compensate", "all"):
        with pytest.raises(NeedsAsync) as e:
            u.reconcile(rep.event_id, run)
        assert "undo_transfer" in str(e.value) and "areconcile" in str(e.value)
    assert world.state() == before
    assert {i.state for i in u.reconcile(rep.event_id, "plan").plan.items} == {"planned"}

    out = await u.areconcile(rep.event_id, "all")
    assert [i.state for i in out.plan.items] == ["done"] * 4 and len(out.ran) == 4
    assert net(world.state()) == await asyncio.to_thread(reference, world.kind, aio=True)
    assert effects(world.state()) == Counter({"pay": 2, "email": 2, "reverse": 1, "recall": 1})
    with pytest.raises(PlanAlreadyRun):
        await u.areconcile(rep.event_id, "all")
    assert effects(world.state()) == Counter({"pay": 2, "email": 2, "reverse": 1, "recall": 1})
    assert target_copies(u.home) == {}


async def test_compensate_by_default_runs_async_compensators_with_aforget(tmp_path, service, reference):
    u = Unsee(tmp_path / "home", reconcile="compensate")
    _, rep = await aforgotten(u, service.spec)
    assert [i.state for i in rep.reconciliation.items] == ["done", "done", "planned", "planned"]
    assert effects(service.state()) == Counter({"pay": 1, "email": 1, "reverse": 1, "recall": 1})
    assert rep.errors == [] and not [n for n in rep.notes if "reconcile" in n]
    out = await u.areconcile(rep.event_id, "all")
    assert len(out.ran) == 2
    assert net(service.state()) == await asyncio.to_thread(reference, "http", aio=True)


async def test_sync_compensators_reconcile_from_a_loop_too(tmp_path, service, reference):
    """``areconcile`` runs a plain function compensator in a worker thread."""
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, service.spec)
    out = await u.areconcile(rep.event_id, "all")
    assert len(out.ran) == 4 and net(service.state()) == reference("http")


async def test_sync_tools_with_async_compensators(tmp_path, service, reference):
    """Sync tools (a sync forget) whose compensators can only be awaited: ``compensate`` by default
    cannot run them at a sync forget (a note, nothing run), nor can ``u.reconcile``; ``await
    u.areconcile`` does."""
    u = Unsee(tmp_path / "home", reconcile="compensate")
    tools = unsee_tools(u, service.spec, aio_compensators=True)
    assert tools[1].func is not None and compensator_of(tools[1]).is_async_only
    agent = build_agent(tools, u)
    await asyncio.to_thread(run_agent, agent)
    rep = await asyncio.to_thread(u.forget, "t1", event())
    assert rep.committed and [i.state for i in rep.reconciliation.items] == ["planned"] * 4
    assert [n for n in rep.notes if "did not run" in n and "areconcile" in n]
    assert effects(service.state()) == Counter({"pay": 1, "email": 1})
    with pytest.raises(NeedsAsync) as e:
        await asyncio.to_thread(u.reconcile, rep.event_id, "all")
    assert sorted(e.value.names) == ["recall_email", "undo_transfer"]
    assert effects(service.state()) == Counter({"pay": 1, "email": 1})
    out = await u.areconcile(rep.event_id, "all")
    assert len(out.ran) == 4
    assert net(service.state()) == await asyncio.to_thread(reference, "http")
