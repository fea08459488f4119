"""The compatibility suite (``unsee.testing.check_agent``) over the agents people already have.

Each case is recorded, located, forgotten, compared with the counterfactual computed from
scratch without the secret (every state key), continued one turn, erased (no file holds a
byte of the secret) and checked for side effects fired once in total; on an InMemory and a
SQLite checkpointer, the multi-agent cases on PostgreSQL too. docs/compatibility.md publishes
this matrix.
"""

from __future__ import annotations

import inspect
import time

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from tests.support.compat_cases import (MULTI_AGENT, NOT_OFFLINE, case, ecosystem_cases, middleware_cases, recorded_supervisor,
                          unrecorded_supervisor)
from unsee.testing import CompatFailure, check_agent

SAVERS = ("memory", "sqlite")
MIDDLEWARE = middleware_cases()
ECOSYSTEM = ecosystem_cases()


def test_every_builtin_middleware_has_a_case():
    """A middleware class LangChain adds fails here until the suite has a case for it (or says
    why it cannot run offline)."""
    import langchain.agents.middleware as lc
    from langchain.agents.middleware import AgentMiddleware

    classes = {n for n in lc.__all__ if inspect.isclass(getattr(lc, n)) and issubclass(getattr(lc, n), AgentMiddleware)
               and getattr(lc, n) is not AgentMiddleware}
    assert classes - set(MIDDLEWARE) - set(NOT_OFFLINE) == set()
    assert set(MIDDLEWARE) | set(NOT_OFFLINE) <= classes | set(NOT_OFFLINE)


@pytest.mark.parametrize("saver", SAVERS)
@pytest.mark.parametrize("name", sorted(MIDDLEWARE))
def test_builtin_middleware(tmp_path, name, saver):
    check_agent(MIDDLEWARE[name], tmp_path, saver=saver)


@pytest.mark.parametrize("saver", SAVERS)
@pytest.mark.parametrize("name", sorted(ECOSYSTEM))
def test_agent_shape(tmp_path, name, saver):
    check_agent(ECOSYSTEM[name], tmp_path, saver=saver)


@pytest.mark.postgres
@pytest.mark.parametrize("name", MULTI_AGENT)
def test_multi_agent_on_postgres(tmp_path, name, pg_url):
    check_agent(ECOSYSTEM[name], tmp_path, saver=pg_url)


@pytest.mark.parametrize("saver", SAVERS)
def test_a_supervisor_whose_model_is_not_recorded_is_refused_before_anything_changes(tmp_path, saver):
    """A ``langgraph-supervisor`` supervisor without ``u.recorded_model`` on its own model: its own
    turns are not recorded, and a forget refuses it before anything changes."""
    from unsee.plugins.forget import UnsupportedSession

    with pytest.raises(CompatFailure) as got:
        check_agent(unrecorded_supervisor(), tmp_path, saver=saver)
    assert got.value.step in ("locate", "forget") and isinstance(got.value.__cause__, UnsupportedSession)


class LateSaver(InMemorySaver):
    """An ``InMemorySaver`` that takes its time to write a checkpoint (as a busy database does);
    LangGraph writes checkpoints in the background while the next step runs."""

    def put(self, config, checkpoint, metadata, new_versions):
        time.sleep(0.05)
        return super().put(config, checkpoint, metadata, new_versions)


def test_a_supervisor_on_a_checkpointer_that_writes_late(tmp_path):
    """A worker's run that starts before the supervisor graph's checkpoint is written is a part of
    the same run of the graph: one turn, as the counterfactual has it."""
    sup = ECOSYSTEM["supervisor"]
    late = case("supervisor-late-saver", lambda world: recorded_supervisor(world, checkpointer=LateSaver()),
                turns=sup.turns, follow_up=sup.follow_up, secret=sup.secret)
    check_agent(late, tmp_path, saver="memory")
