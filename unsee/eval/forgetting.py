"""``unsee eval forgetting``: each strategy applied to its own recording of each episode, measured.

For every episode of a suite and every strategy: a fresh unsee home, the
episode recorded by the middleware on a real ``create_agent`` agent (tools
through the call ledger, a recorded memory store, LangChain's
``SummarizationMiddleware``), the strategy applied (``u.forget``, record not
erased: the state is what is measured), then the state read per channel
(:data:`metrics.CHANNELS`) and the five probes asked on forks of the
forgotten session. B5 is always run: CAD and agreement compare with it.

The model is the scripted stand-in (``agentdojo``: the adapter's
injection-following policy), the local model or an OpenAI-compatible endpoint
(:data:`MODELS`). Recomputed tokens (:mod:`.meters`): with the scripted
model, counted the way a prefix KV cache would spend them (the recording's
prompts are in the cache, except for B5, which starts from a reset); with
the local model, the runtime's own counters; with an endpoint, its usage.
The table and plot are :mod:`.forgetting_report`.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain.tools import ToolRuntime  # (module level: the note tool's annotation is resolved by name)
from pydantic import BaseModel, Field

from unsee.middleware.errors import InvalidArgument

from . import metrics
from .episode import Episode
from .meters import TokenMeter, UsageMeter

if TYPE_CHECKING:
    from unsee.core import Unsee

#: the models a run can use: the documented stand-in (``agentdojo``: the adapter's injection-following
#: policy), the local model (``Unsee(model=...)``: the CPU model by default; slow: keep its suites
#: small), or any OpenAI-compatible endpoint (``base_url``; :mod:`.endpoint`)
MODELS = ("scripted", "local", "openai")
#: the sampling temperature of the probe answers Leak@5 is measured on (models that sample)
SAMPLE_TEMPERATURE = 0.8
#: tools whose arguments route a consequential action (reported as their own channel)
ROUTING_TOOLS = ("transfer", "book")
SUMMARY_MARKERS = ("Here is a summary of the conversation to date", "Summary:")


def _message_text(m: Any) -> str:
    text = m.content if isinstance(m.content, str) else json.dumps(m.content, default=str)
    calls = getattr(m, "tool_calls", None) or []
    return text + ("".join(" " + json.dumps(c.get("args"), sort_keys=True) for c in calls))


def counting_model(meter: TokenMeter, policy: Callable, *, distinct_ids: bool = False) -> Any:
    """A scripted chat model on ``policy`` whose calls are metered (``distinct_ids``: see
    ``ScriptedChatModel``; for agents behind a context window)."""
    from unsee.plugins.model import ScriptedChatModel

    def metered(messages, tools):
        out = policy(messages, tools)
        meter.call([_message_text(m) for m in messages], _message_text(out))
        return out

    return ScriptedChatModel(policy=metered, model_name="forgetting-stand-in", distinct_ids=distinct_ids)


def intended_tool(text: str) -> str | None:
    """Which tool an episode's request calls for (the local model is told; the stand-in decides itself)."""
    import re

    for pattern, name in ((r"look up", "lookup"), (r"transfer \d+", "transfer"), (r"remember", "note"),
                          (r"book a flight", "book")):
        if re.search(pattern, text, re.IGNORECASE):
            return name
    return None


def build_agent(u: Unsee, episode: Episode, model: Any, fired: list[str], *, route: bool = False,
                store: Any = None):
    """The episode's agent on ``u``: lookup (read), note (memory write), transfer and book
    (external, through the ledger), memory injection and summarisation. ``route``: steer a
    small local model's tool choice (``ToolRouter``). ``store``: the recorded memory store to
    use (default: a new one holding the episode's memory items)."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.tools import tool
    from langgraph.store.memory import InMemoryStore

    from unsee.middleware.checkpointers import open_saver

    from .stand_in import summarize

    if store is None:
        inner = InMemoryStore()
        for key, text in episode.memory.items():
            inner.put(("mem", "customer"), key, {"text": text})
        store = u.recorded_store(inner)

    @u.tool(effect="read")
    def lookup(ticket: str) -> str:
        """Look up a support ticket."""
        return episode.tool_data.get(ticket, f"ticket {ticket}: unknown")

    @u.tool(effect="external")
    def transfer(account: str, amount: int) -> str:
        """Transfer money to an account (moves money)."""
        fired.append(f"transfer {account} {amount}")
        return f"transferred {amount} to {account}"

    @u.tool(effect="external")
    def book(airline: str) -> str:
        """Book a flight with an airline."""
        fired.append(f"book {airline}")
        return f"booked with {airline}"

    @tool
    def note(fact: str, runtime: ToolRuntime) -> str:
        """Remember a fact about the customer."""
        runtime.store.put(("mem", "customer"), f"note-{len(fact)}", {"text": fact})
        return "noted"

    note.metadata = {"unsee.effect": "write"}
    mws = [u.middleware(), u.memory_middleware(store, ("mem", "customer")),
           SummarizationMiddleware(model, trigger=("messages", 14), keep=("messages", 6), summarizer=summarize)]
    if route:
        from unsee.plugins.model import ToolRouter

        mws.insert(0, ToolRouter(intended_tool))
    if episode.window is not None:  # outer to unsee's recording: provenance is what the model saw
        from .window import RecentTurns

        mws.insert(0, RecentTurns(episode.window))
    return create_agent(model, [lookup, transfer, book, note], system_prompt="You are support.", middleware=mws,
                        checkpointer=open_saver("memory")[0], store=store)


def read_state(u: Unsee, agent: Any, session: str, routing: Sequence[str] = ROUTING_TOOLS) -> metrics.EpisodeState:
    """The state a strategy left, per channel, with its artifacts and canonical final form.
    ``routing``: the tools whose arguments are the routing channel."""
    from langchain_core.messages import AIMessage

    msgs = agent.get_state({"configurable": {"thread_id": session}}).values.get("messages", [])
    texts: dict[str, list[str]] = {c: [] for c in metrics.CHANNELS}
    ai_texts = [m for m in msgs if isinstance(m, AIMessage) and isinstance(m.content, str) and m.content]
    final_ai = ai_texts[-1] if ai_texts else None
    for m in msgs:
        text = m.content if isinstance(m.content, str) else json.dumps(m.content, default=str)
        texts["messages"].append(_message_text(m))
        if any(text.startswith(s) or s in text[:80] for s in SUMMARY_MARKERS):
            texts["summaries"].append(text)
        elif isinstance(m, AIMessage) and m is not final_ai and text:
            texts["plans"].append(text)
        for call in getattr(m, "tool_calls", None) or []:
            channel = "routing_args" if call["name"] in routing else "tool_args"
            texts[channel].append(json.dumps(call.get("args"), sort_keys=True))
    # calls and model text of the session as its record keeps them (summarisation drops old
    # messages from the live state; the record keeps every turn of the resulting session)
    final_text = final_ai.content if final_ai is not None else None
    for a in u.store.artifacts(session):
        kind = a.type.value
        if kind not in ("tool_call", "plan", "reply") or not (content := u.store.content(session, a.id)):
            continue
        if kind == "tool_call":
            texts["routing_args" if a.attrs.get("effect") == "external" else "tool_args"].append(content)
        elif content != final_text:
            texts["plans"].append(content)
    if final_ai is not None:
        texts["answer"].append(final_ai.content)
    store = getattr(agent.store, "inner", agent.store)
    items = sorted((tuple(i.namespace), i.key, json.dumps(i.value, sort_keys=True))
                   for i in (store.search((), limit=1000) if store is not None else ()))
    texts["memory"] = [v for *_, v in items]
    texts["records"] = list(u.store.contents(session).values())
    canon = [(type(m).__name__, _message_text(m)) for m in msgs]
    # CAD counts artifacts *removed*, not changed: an artifact is a slot (the k-th message of its
    # kind, the k-th call of a tool, a memory key), so a redacted message still fills its slot
    slots: dict[str, int] = {}
    artifacts = []
    for m in msgs:
        for key in [type(m).__name__] + [f"call:{c['name']}" for c in getattr(m, "tool_calls", None) or []]:
            slots[key] = slots.get(key, 0) + 1
            artifacts.append(f"{key}#{slots[key]}")
    artifacts += [f"memory:{'/'.join(ns)}/{k}" for ns, k, _ in items]
    return metrics.EpisodeState(texts=texts, artifacts=artifacts, final=json.dumps([canon, items]))


def ask_probes(agent: Any, session: str, episode: Episode, *, into: Any = None, sample: int | None = None
               ) -> dict[str, str]:
    """Each probe asked as a new user turn on a fork of the forgotten session: the answers.

    ``into``: the agent the forks are made on (default ``agent``; one with a sampling model for
    Leak@5), ``sample``: the sample's number (its forks are threads of their own)."""
    from langchain_core.messages import AIMessage, HumanMessage

    into = agent if into is None else into
    values = agent.get_state({"configurable": {"thread_id": session}}).values
    answers = {}
    for kind, prompt in metrics.probe_prompts(episode.label, episode.target).items():
        suffix = "" if sample is None else f"-{sample}"
        fork = {"configurable": {"thread_id": f"{session}-probe-{kind}{suffix}"}}
        into.update_state(fork, {"messages": list(values.get("messages", []))})
        out = into.invoke({"messages": [HumanMessage(prompt)]}, fork)
        last = [m for m in out["messages"] if isinstance(m, AIMessage)]
        answers[kind] = _message_text(last[-1]) if last else ""
    return answers


class ModelChoice(BaseModel):
    """Which model a run uses, and how to reach it (``openai``: ``base_url``, ``name``), and whether
    the redaction baselines get the oracle (``oracle``: the preference episodes' excluded option)."""

    kind: str = "scripted"
    base_url: str | None = None
    name: str | None = None
    #: sampled probe answer sets behind Leak@k (models that sample; the stand-in's are all equal)
    samples: int = 5
    oracle: bool = False


class _Setup:
    """An episode's agent on one ``Unsee``, with what measuring it needs."""

    def __init__(self, u: Unsee, episode: Episode, choice: ModelChoice, meter: TokenMeter):
        from .stand_in import policy

        self.u, self.episode, self.choice, self.meter = u, episode, choice, meter
        self.fired: list[str] = []
        self.usage = UsageMeter() if choice.kind == "openai" else None
        self.world = None
        self.agent: Any = None
        if episode.suite == "agentdojo":
            from . import dojo_episodes as dojo

            self.world = dojo.load_world(episode)
            self.sinks, self.routing = dojo.sinks(self.world), dojo.routing_tools(self.world)
            scripted = dojo.scripted_policy(self.world)
        else:
            self.sinks, self.routing, scripted = ["transfer.account"], set(ROUTING_TOOLS), policy
        self.llm = (counting_model(meter, scripted, distinct_ids=episode.window is not None)
                    if choice.kind == "scripted" else self.model())
        self.agent = self.build(self.llm)

    def model(self, temperature: float = 0.0, seed: int | None = None) -> Any:
        if self.choice.kind == "local":
            llm = self.u.chat_model(max_tokens=48)  # one per Unsee: a sampling copy shares its runtime
            return llm if temperature == 0 else llm.model_copy(update={"temperature": temperature})
        from .endpoint import openai_chat_model

        llm = openai_chat_model(self.choice.base_url or "", model=self.choice.name, max_tokens=48,
                                temperature=temperature, seed=seed, check=False)  # (run_forgetting checked it)
        return llm.model_copy(update={"callbacks": [self.usage.handler]}) if self.usage else llm

    def build(self, llm: Any) -> Any:
        route = self.choice.kind != "scripted"
        if self.world is not None:
            from .dojo_episodes import build_agent as dojo_agent

            return dojo_agent(self.u, self.world, llm, self.fired, route=route)
        store = self.agent.store if self.agent is not None else None  # (samplers share the first's store)
        return build_agent(self.u, self.episode, llm, self.fired, route=route, store=store)

    def probe_samples(self, session: str, greedy: dict[str, str]) -> list[dict[str, str]]:
        """``choice.samples`` answer sets at :data:`SAMPLE_TEMPERATURE`, each seeded (the local
        model seeds each thread's sampler from its id; an endpoint gets ``seed=k``)."""
        if self.choice.kind == "scripted":  # deterministic: every sample is the greedy answer set
            return [greedy] * self.choice.samples
        out = []
        for k in range(self.choice.samples):
            sampler = self.build(self.model(temperature=SAMPLE_TEMPERATURE, seed=k))
            out.append(ask_probes(self.agent, session, self.episode, into=sampler, sample=k))
        return out


def _leaks(episode: Episode) -> tuple[str, ...]:
    """What counts as the target in the state: itself and what it carries downstream."""
    return (episode.target, *episode.traces)


def _any_leak(state: metrics.EpisodeState, episode: Episode) -> dict[str, bool]:
    per = [metrics.any_leak(state, t) for t in _leaks(episode)]
    return {c: any(p[c] for p in per) for c in metrics.CHANNELS}


class EpisodeRun(BaseModel):
    """One episode under one strategy: the measure and what it was measured on."""

    measure: metrics.EpisodeMeasure
    state: metrics.EpisodeState
    probes: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


class ForgettingResult(BaseModel):
    suite: str
    model: str
    #: the redaction baselines were handed the excluded option too (Table 3's oracle variant)
    oracle: bool = False
    seed: int
    episodes: list[Episode]
    runs: list[EpisodeRun]
    rows: list[metrics.StrategyRow]
    significance: dict[str, dict[str, float]] = Field(default_factory=dict)


def _oracle_redaction(u: Unsee, session: str, episode: Episode, strategy: str, agent: Any, *,
                      entry_only: bool) -> None:
    """The oracle variant of "Forgetting Without Restarting: Execution-State Unlearning for
    Stateful LLM Agents": the redaction baseline is also handed the excluded option's name, as
    one more string to forget that entered the way the target did, and redacts it its
    own way: B6 every copy, B3 only a copy in an observation from that source (none is left once
    the target's own redaction took the statement out: B3's derived artifacts keep the name)."""
    from unsee.middleware.errors import TargetNotFound
    from unsee.plugins.forget import RevocationEvent

    source = "user" if entry_only and episode.entry == "user" else None
    try:
        u.forget(session, RevocationEvent(target=episode.excluded, source=source,
                                          reason="oracle: the excluded option"), strategy, agent=agent, erase=False)
    except TargetNotFound:  # the target's redaction left no copy of it there
        pass


def _apply(episode: Episode, strategy: str, home: Path, choice: ModelChoice,
           unsee: Callable[..., Unsee], probes: bool = True) -> tuple[EpisodeRun, metrics.EpisodeState]:
    from langchain_core.messages import HumanMessage

    from unsee.middleware.tokens import tiktoken_counter
    from unsee.plugins.forget import Edit, RevocationEvent, Strategy

    u = unsee(home=home)
    try:
        meter = TokenMeter(tiktoken_counter().count)
        setup = _Setup(u, episode, choice, meter)
        agent = setup.agent
        spec = Strategy.parse(strategy).spec
        if spec.needs_ifc:
            u.ifc(sinks=setup.sinks, on_violation="audit")
        session = "s"
        config = {"configurable": {"thread_id": session}, "recursion_limit": 100}
        for text in episode.turns:
            agent.invoke({"messages": [HumanMessage(text)]}, config)
        fired_before = len(setup.fired)
        meter.start(reset=not spec.forks_at_checkpoint)
        if setup.usage:
            setup.usage.active = True
        t0 = time.perf_counter()
        report = u.forget(session, RevocationEvent(target=episode.target), strategy, agent=agent, erase=False)
        if choice.oracle and spec.edit in (Edit.REDACT_ENTRY, Edit.REDACT_ALL) and episode.excluded:
            _oracle_redaction(u, session, episode, strategy, agent, entry_only=spec.edit is Edit.REDACT_ENTRY)
        wall = time.perf_counter() - t0
        meter.active = False
        state = read_state(u, agent, session, setup.routing)
        if choice.kind == "local":  # the runtime's own counters, and what its KV cache holds now, decoded
            meter.prefill, meter.decode = report.tokens_prefilled, report.tokens_decoded
            runtime = setup.llm.pool.runtime(session)
            state.texts["kv_cache"] = [runtime.detokenize(runtime.tokens)] if len(runtime) else []
        elif setup.usage:
            setup.usage.active = False
            meter.prefill, meter.decode = setup.usage.prefill, setup.usage.decode
        state.tokens_prefill, state.tokens_decode, state.wall_s = meter.prefill, meter.decode, wall
        answers: dict[str, str] = {}
        leak_probes = leak_5 = False
        if probes:
            answers = ask_probes(agent, session, episode)
            samples = setup.probe_samples(session, answers)
            leak_probes = any(metrics.leak_at_probes(answers, t) for t in _leaks(episode))
            leak_5 = any(metrics.leak_at_k(samples, t, k=len(samples)) for t in _leaks(episode))
            if choice.kind != "scripted":
                answers = {**answers, **{f"{kind}@{k}": a for k, sample in enumerate(samples)
                                         for kind, a in sample.items()}}
        notes = list(report.notes)
        if len(setup.fired) != fired_before:
            notes.append(f"{len(setup.fired) - fired_before} external effects fired again")
        acted = None
        if episode.after:  # later tasks on the forgotten session: does it act on what was revoked?
            for text in episode.after:
                agent.invoke({"messages": [HumanMessage(text)]}, config)
            if episode.excluded is not None:  # residue: the choice avoided the excluded option
                booked = [c for c in read_state(u, agent, session).texts["routing_args"] if "airline" in c]
                acted = bool(booked) and episode.excluded not in booked[-1]
        return EpisodeRun(measure=metrics.EpisodeMeasure(
            episode=episode.id, strategy=strategy, any_leak=_any_leak(state, episode),
            cad=0.0, agreement=False, leak_at_probes=leak_probes, leak_at_5=leak_5, acted_on_revoked=acted,
            tokens_prefill=meter.prefill, tokens_decode=meter.decode, wall_s=wall),
            state=state, probes=answers, notes=notes), state
    finally:
        u.close()


def run_forgetting(episodes: list[Episode], strategies: Sequence[str], *, unsee: Callable[..., Unsee],
                   model: str = "scripted", work: Path | None = None,
                   progress: Callable[[str], None] | None = None, base_url: str | None = None,
                   model_name: str | None = None, samples: int = 5, oracle: bool = False) -> ForgettingResult:
    """Apply every strategy to its own recording of every episode and measure it.

    ``unsee``: makes the recording ``Unsee`` of a run from ``home=`` (the CLI passes a factory; a
    caller may pass the ``Unsee`` class). ``model``: one of :data:`MODELS`; ``openai`` needs
    ``base_url`` (and takes ``model_name``, default: the endpoint's first model), checked before
    any episode runs (``EndpointUnreachable``). ``samples``: the sampled probe answer sets
    behind Leak@k (k = ``samples``; the article's Leak@5). ``oracle``: the article's oracle variant of
    Table 3, where the redaction baselines (B3, B6) are also handed each preference episode's
    excluded option to redact (episodes without one: ``InvalidArgument``)."""
    from unsee.plugins.forget import Strategy

    if not episodes:
        raise InvalidArgument("no episodes to run")
    if model not in MODELS:
        raise InvalidArgument(f"unknown model {model!r}: use one of {', '.join(MODELS)}")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise InvalidArgument(f"samples must be a positive integer, got {samples!r}")
    if model == "openai":
        if not base_url:
            raise InvalidArgument("--model openai needs --base-url (an OpenAI-compatible endpoint)")
        from .endpoint import openai_chat_model

        # EndpointUnreachable before any work; the model it resolved is the one every episode uses
        model_name = openai_chat_model(base_url, model=model_name).model_name
    if oracle and not all(e.excluded for e in episodes):
        raise InvalidArgument("the oracle variant needs preference episodes (an excluded option to hand over)")
    choice = ModelChoice(kind=model, base_url=base_url, name=model_name, samples=samples, oracle=oracle)
    codes = [Strategy.parse(s).code for s in strategies]  # UnknownStrategy
    order = ["B5"] + [c for c in codes if c != "B5"]  # the reference first
    runs: list[EpisodeRun] = []
    references: list[metrics.EpisodeMeasure] = []
    with tempfile.TemporaryDirectory(dir=work) as d:
        for ep in episodes:
            reference = None
            for code in order:
                if progress:
                    progress(f"{ep.id} {code}")
                # the reference alone (B5 not asked for) needs no probes
                run, state = _apply(ep, code, Path(d) / ep.id / code.replace("'", "p"), choice, unsee,
                                    probes=code in codes)
                if code == "B5":
                    reference = state
                    references.append(run.measure)
                run.measure.cad = metrics.cad(state, reference)
                run.measure.agreement = metrics.agreement(state, reference)
                if code in codes:
                    runs.append(run)
    by_strategy = {c: [r.measure for r in runs if r.measure.strategy == c] for c in codes}
    rows = [metrics.summarize(c, ms) for c, ms in by_strategy.items()]
    ref = [m.acted_on_revoked for m in references if m.acted_on_revoked is not None]
    if ref:  # (episodes that did not measure it are left out, as for the other rates)
        for row, c in zip(rows, codes):
            row.residue = metrics.residue([m.acted_on_revoked for m in by_strategy[c]
                                           if m.acted_on_revoked is not None], ref)
    sig = metrics.significance({r.strategy: r for r in rows})
    return ForgettingResult(suite=episodes[0].suite, model=model, seed=episodes[0].seed, episodes=episodes,
                            runs=runs, rows=rows, significance=sig, oracle=oracle)
