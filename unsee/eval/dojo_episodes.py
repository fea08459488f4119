"""The ``agentdojo`` suite of ``unsee eval forgetting``: an injection a detector flags late.

Each episode is one (user task, injection task) pair of one of AgentDojo's four
suites (banking, slack, travel, workspace, in turn), attacked with AgentDojo's
``important_instructions`` attack. The agent runs the user task on the
injected environment and reads the injection in a tool return at tau; the
revocation target is the injected block *as the tool returned it* (what a
detector flags: :func:`observed_block` finds it by running the user task's
ground-truth calls). Its ``traces`` are the attacker identifiers of the
injection's goal (an IBAN, an e-mail, a URL) absent from the clean
environment and the user's prompt: where the injection steered a call, they
are what it left in the routing arguments, so any of them counts as a leak.

Only pairs where the user task reads an injected field and does not carry the
attacker identifier itself are drawn. :func:`load_world` rebuilds the
injected environment of an episode (each strategy gets its own copy), and
:func:`build_agent` the recorded agent on it: the suite's functions as tools
(effects from :func:`~.agentdojo_adapter.effect_for`), unsee's middleware, and
for a small model :class:`~.agentdojo_adapter.ToolBudget`. The scripted model
is the adapter's injection-following policy (:func:`scripted_policy`).

Needs the ``eval`` extra (``agentdojo``).
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from .agentdojo_adapter import (DEFAULT_MODEL_ID, ToolBudget, effect_for, injection_policy, make_tools, plan_for,
                                suite_sinks)
from .bench import attacker_identifiers, user_supplies_attacker_identifier
from .episode import Episode

if TYPE_CHECKING:
    from unsee.core import Unsee

SUITES = ("banking", "slack", "travel", "workspace")
BENCHMARK_VERSION = "v1.2.2"
ATTACK = "important_instructions"
_BLOCK = re.compile(r"<\s*INFORMATION\s*>.*?<\s*/\s*INFORMATION\s*>", re.IGNORECASE | re.DOTALL)


@functools.lru_cache(maxsize=1)
def _suites() -> dict[str, Any]:
    from agentdojo.task_suite.load_suites import get_suites

    return get_suites(BENCHMARK_VERSION)


@functools.lru_cache(maxsize=None)
def _attack(name: str) -> Any:
    from agentdojo.attacks.attack_registry import load_attack

    # the attack only reads the attacked model's name from the pipeline
    return load_attack(ATTACK, _suites()[name], SimpleNamespace(name=DEFAULT_MODEL_ID))


@dataclass
class World:
    """An episode's AgentDojo objects: its suite, tasks and injected environment (a fresh copy)."""

    suite: Any
    user_task: Any
    injection_task: Any
    env: Any


def load_world(episode: Episode) -> World:
    return _world(episode.source)


def _world(src: dict[str, str]) -> World:
    suite = _suites()[src["suite"]]
    ut, it = suite.user_tasks[src["user_task"]], suite.injection_tasks[src["injection_task"]]
    env = suite.load_and_inject_default_environment(_attack(src["suite"]).attack(ut, it))
    return World(suite, ut, it, env)


def observed_block(world: World) -> str | None:
    """The injected block as the first tool return that carries one shows it (the user task's
    ground-truth calls, run on a copy of the environment), or None."""
    from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
    from agentdojo.functions_runtime import FunctionsRuntime

    env = world.env.model_copy(deep=True)
    runtime = FunctionsRuntime(world.suite.tools)
    for fc in world.user_task.ground_truth(env.model_copy(deep=True)):
        result, _ = runtime.run_function(env, fc.function, dict(fc.args))
        if m := _BLOCK.search(tool_result_to_str(result)):
            return m.group(0)
    return None


@functools.lru_cache(maxsize=None)
def _clean_dump(name: str) -> str:
    """The suite's environment without injections, as lowercase JSON (traces must not be in it)."""
    return _suites()[name].load_and_inject_default_environment({}).model_dump_json().lower()


def _episode(i: int, rng: random.Random, seed: int) -> Episode:
    name = SUITES[i % len(SUITES)]
    suite = _suites()[name]
    users, injections = sorted(suite.user_tasks), sorted(suite.injection_tasks)
    for _ in range(200):  # draw until the user task reads the injection (nearly every draw does)
        ut, it = rng.choice(users), rng.choice(injections)
        src = {"suite": name, "user_task": ut, "injection_task": it, "attack": ATTACK}
        world = _world(src)
        if user_supplies_attacker_identifier(world.user_task, world.injection_task):
            continue
        block = observed_block(world)
        if block is None:
            continue
        return Episode(id=f"agentdojo-{seed}-{i}", suite="agentdojo", seed=seed, turns=[world.user_task.PROMPT],
                       target=block, label="instructions", entry="tool", tau_turn=0, source=src,
                       traces=[x for x in attacker_identifiers(world.injection_task.GOAL)
                               if x not in _clean_dump(name)])
    raise RuntimeError(f"no (user task, injection task) pair of {name} reads an injection")  # pragma: no cover


def generate(episodes: int, seed: int) -> list[Episode]:
    rng = random.Random(f"agentdojo:{seed}")
    return [_episode(i, rng, seed) for i in range(episodes)]


def scripted_policy(world: World) -> Any:
    """The adapter's injection-following policy for this episode (a ``ScriptedChatModel`` policy)."""
    return injection_policy(plan_for(world.suite, world.user_task, world.env))


def sinks(world: World) -> list[str]:
    """The suite's identifier sinks (``tool.arg``) for B8/B9's IFC."""
    return list(suite_sinks(world.suite))


def routing_tools(world: World) -> set[str]:
    """The suite's functions that reach outside (their arguments are the routing channel)."""
    return {f.name for f in world.suite.tools if effect_for(f.name) == "external"}


def build_agent(u: Unsee, world: World, model: Any, fired: list[str], *, route: bool = False) -> Any:
    """The episode's recorded agent on ``world.env``. ``route``: steer a small model's tool
    use (``ToolBudget``)."""
    from agentdojo.functions_runtime import FunctionsRuntime
    from langchain.agents import create_agent

    from unsee.middleware.checkpointers import open_saver

    tools = make_tools(FunctionsRuntime(world.suite.tools), world.env, fired)
    mws = ([ToolBudget(3)] if route else []) + [u.middleware()]
    return create_agent(model, tools, system_prompt="You are a helpful assistant.", middleware=mws,
                        checkpointer=open_saver("memory")[0])
