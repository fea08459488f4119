"""The rollback surface (issue 30, part 4): the seed's three questions, answered by
``u.surface`` / ``unsee surface`` for a real agent and home, and by the pure
``surface.build_report`` for tables of routes and primitives."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from unsee import RevocationEvent
from unsee.middleware.errors import InvalidArgument
from unsee.plugins.erasure.surface import UNTOUCHED, build_report

from tests.support.erasure_agents import SECRET, build, run

ROUTES = [("langgraph.checkpoints", "history", "rewritten", ["lg.sqlite"]),
          ("langgraph.store", "memories", "scrubbed", []),
          ("custom.crm", "the CRM's copy", "deleted by its route", [])]


@pytest.mark.parametrize("available,inverted", [
    ({"delete_thread": None, "RemoveMessage": None}, ["delete_thread", "RemoveMessage"]),
    ({"delete_thread": "no checkpointer"}, []),  # an unavailable primitive inverts nothing
    ({"u.erase": None, "store.delete": None}, []),  # they act outside the boundary too / only
])
def test_build_report_answers_the_three_questions(available, inverted):
    r = build_report(home="/h", agent="CompiledStateGraph", routes=ROUTES, available=available)
    by = {x.name: x for x in r.routes}
    assert by["langgraph.checkpoints"].boundary == "inside" and by["langgraph.store"].boundary == "outside"
    assert by["custom.crm"].boundary == "unknown" and by["custom.crm"].marker_copies is None
    prims = {p.name: p for p in r.primitives}
    # 1. what each one mutates; 2. a restore undoes RemoveMessage; 3. what outside it never reaches
    assert prims["RemoveMessage"].undone_by_restore and not prims["delete_thread"].undone_by_restore
    assert prims["delete_thread"].mutates["langgraph.store"] == UNTOUCHED
    assert prims["delete_thread"].never_reaches == ["langgraph.store", "custom.crm"]
    assert prims["u.erase"].mutates["custom.crm"] == "deleted by its route"  # every route says its own method
    assert prims["u.erase"].never_reaches == []
    assert prims["store.delete"].never_reaches == ["custom.crm"]
    assert prims["u.forget"].why_not == (None if "u.forget" in available else "not offered")
    assert r.inversion == inverted and json.loads(r.model_dump_json())["inversion"] == inverted


def test_marker_copies_per_route_and_session_before_and_after_a_forget(tmp_path):
    u, agent, close = build(tmp_path)
    try:
        run(agent, "t1")
        before = u.surface(agent=agent, marker=SECRET)
        by_target = u.surface(agent=agent, target=SECRET)  # the word audit uses: the same counts
        assert [(r.name, r.marker_copies) for r in by_target.routes] == [(r.name, r.marker_copies)
                                                                         for r in before.routes]
        with pytest.raises(InvalidArgument):
            u.surface(agent=agent, marker=SECRET, target=SECRET)
        by = {r.name: r for r in before.routes}
        assert before.marker and by["langgraph.checkpoints"].boundary == "inside"
        # (copies in free pages or the WAL belong to no row: "(no session)")
        assert "t1" in by["langgraph.checkpoints"].copies_by_session
        assert by["unsee.records"].marker_copies > 0 and by["langgraph.store"].boundary == "outside"
        assert {"delete_thread", "RemoveMessage"} <= set(before.inversion)
        u.forget("t1", RevocationEvent(target=SECRET), agent=agent)
        after = u.surface(agent=agent, marker=SECRET)
        assert {r.name: r.marker_copies for r in after.routes if r.marker_copies} == {}
        plain = u.surface(agent=agent)  # no marker: no audit, no counts
        assert not plain.marker and all(r.marker_copies is None for r in plain.routes)
        with pytest.raises(InvalidArgument):
            u.surface(agent=agent, marker="  ")
    finally:
        close()


@pytest.mark.skipif(os.environ.get("UNSEE_TEST_STORE") == "postgres",
                    reason="the CLI finds a home by its SQLite files; make test's second pass moves unsee's records "
                           "to PostgreSQL without a --store the CLI could name (the first pass runs this)")
def test_cli_surface(tmp_path):
    from unsee.cli import app

    u, agent, close = build(tmp_path)
    try:
        run(agent, "t1")
        u.flush()
    finally:
        close()
    runner = CliRunner()
    home = ["--home", str(tmp_path)]
    got = runner.invoke(app, [*home, "surface", "--json"])
    assert got.exit_code == 0, got.output
    names = [r["name"] for r in json.loads(got.stdout)["routes"]]
    assert "unsee.records" in names and "langgraph.checkpoints" not in names  # (no --agent: not its history)
    held = runner.invoke(app, [*home, "surface", "--marker", SECRET])
    assert held.exit_code == 1 and "copies of the marker" in held.stdout
    bad = runner.invoke(app, [*home, "surface", "--marker", " "])
    assert bad.exit_code == 2
