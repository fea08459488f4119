"""Subprocess side of ``benchmarks/bench_peers.py``: one tracing layer, one round.

    python -m benchmarks.peers_worker '<spec json>' <out.json>

The tracing layers patch LangChain process-wide (OpenInference and Traceloop
wrap the callback manager, LangSmith is switched on by environment variables),
so each (layer, round) runs in a fresh interpreter. The spec says which layer
and which measurements; the results go to ``out.json`` as JSON (seconds per
step / per turn, wall clock, process CPU time and the agent's path: the wall
clock until the block's last turn returned, its flush left out; the parent
turns them into ms). For the 400-turn thread the parent keeps two of these
alive and hands out the turns one at a time over stdin/stdout ("ready"/"ok"
lines, "go" back).

Every measured block ends with the layer's own flush *inside* the timed
region: ``u.flush()`` for unsee (tracer provider + store writer), the
``BatchSpanProcessor``'s ``force_flush()`` for OpenInference and Traceloop,
``wait_for_all_tracers()`` for LangSmith. No layer can leave work from a
block in a background queue that outlives its measurement. Before each block
the same flush runs untimed, so a block does not pay for the one before it.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from typing import Any

STEPS_PER_TURN = 3  # model call (tool call) -> tool -> model call (reply)
MARKER_PREFIX = "UNSEE-BENCH-MARKER-"
SYSTEM_PROMPT = "You are a support agent. Look the ticket up, then answer in one short sentence."


# -- the agent ----------------------------------------------------------------------
def _tool():
    from langchain_core.tools import tool

    @tool
    def lookup_ticket(ticket_id: str) -> str:
        """Look up a support ticket by id."""
        return f"Ticket {ticket_id}: parcel delayed at the depot, new delivery date tomorrow."

    return lookup_ticket


def _model(sleep_s: float = 0.0):
    """Scripted model: a tool call for a user message, a reply after the tool's return."""
    from langchain_core.messages import AIMessage, BaseMessage

    from unsee.plugins.model import ScriptedChatModel

    from benchmarks.bench_forget import lookup_policy

    def policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
        if sleep_s:
            time.sleep(sleep_s)
        return lookup_policy(messages, tools)

    return ScriptedChatModel(policy=policy)


def _agent(middleware: list, sleep_s: float = 0.0):
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    return create_agent(_model(sleep_s), [_tool()], system_prompt=SYSTEM_PROMPT,
                        middleware=list(middleware), checkpointer=InMemorySaver())


def _say(agent, thread: str, text: str) -> None:
    from langchain_core.messages import HumanMessage

    out = agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})
    if not str(out["messages"][-1].content).startswith("Noted:"):  # the turn ran as scripted
        raise RuntimeError(f"unexpected reply: {out['messages'][-1]!r}")


# -- the layers ---------------------------------------------------------------------
class _Sink:
    """A span exporter that drops spans (counting them), or keeps them for the payload check."""

    def __init__(self) -> None:
        self.exported = 0
        self.keep = False
        self.kept: list = []

    def export(self, spans):
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.exported += len(spans)
        if self.keep:
            self.kept.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _span_text(spans) -> str:
    return "\n".join(repr(dict(s.attributes or {})) + repr([dict(e.attributes or {}) for e in s.events])
                     + s.name for s in spans)


class Layer:
    name = "bare"

    def middleware(self) -> list:
        return []

    def flush(self) -> None:
        pass

    def payload(self) -> tuple[bool | None, str]:
        """(does the layer's telemetry carry the message text?, how it was checked)."""
        return None, ""

    def info(self) -> dict:
        return {}

    def close(self) -> None:
        pass


class RunHooksLayer(Layer):
    """Reference, not a peer: a middleware whose ``before_agent`` / ``after_agent`` do nothing.
    LangChain runs each as a graph node (a superstep of its own), which is what any middleware
    that needs the run's start and end pays before it records anything."""

    name = "hooks"

    def middleware(self) -> list:
        from langchain.agents.middleware import AgentMiddleware

        class RunHooks(AgentMiddleware):
            def before_agent(self, state, runtime):
                return None

            def after_agent(self, state, runtime):
                return None

        return [RunHooks()]


class UnseeLayer(Layer):
    name = "unsee"

    def __init__(self) -> None:
        from unsee import Unsee

        self._tmp = tempfile.TemporaryDirectory(prefix="unsee-bench-peers-")
        self.u = Unsee(home=self._tmp.name)  # the one-line use of the README: defaults

    def middleware(self) -> list:
        return [self.u.middleware()]

    def flush(self) -> None:
        self.u.flush()  # tracer provider, then the store writer's queue

    def payload(self):
        # Spans as they leave unsee (what an OTLP exporter added with span_processors= would send),
        # from a second Unsee with default settings plus an in-memory exporter.
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from unsee import Unsee

        exporter = InMemorySpanExporter()
        with tempfile.TemporaryDirectory(prefix="unsee-bench-peers-payload-") as home:
            u = Unsee(home=home, span_processors=[SimpleSpanProcessor(exporter)])
            try:
                marker = MARKER_PREFIX + uuid.uuid4().hex[:8]
                _say(_agent([u.middleware()]), "payload", f"{marker} please look up ticket {marker}")
                u.flush()
                spans = exporter.get_finished_spans()
            finally:
                u.close()
        return (marker in _span_text(spans)) if spans else None, f"{len(spans)} spans"

    def info(self) -> dict:
        return {"failures": int(getattr(self.u.recorder, "failures", 0)) + int(getattr(self.u.store, "failures", 0))}

    def close(self) -> None:
        self.u.close()
        self._tmp.cleanup()


class _OtelPeer(Layer):
    """An OpenTelemetry LangChain instrumentor on an SDK TracerProvider with a BatchSpanProcessor."""

    def __init__(self) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.sink = _Sink()
        self.tp = TracerProvider(resource=Resource.create({"service.name": "bench-agent"}))
        self.tp.add_span_processor(BatchSpanProcessor(self.sink))
        self.instrumentor = self._instrumentor()
        self.instrumentor.instrument(tracer_provider=self.tp)

    def _instrumentor(self):
        raise NotImplementedError

    def flush(self) -> None:
        self.tp.force_flush()

    def payload(self):
        self.flush()
        self.sink.keep, self.sink.kept = True, []
        marker = MARKER_PREFIX + uuid.uuid4().hex[:8]
        _say(_agent([]), "payload", f"{marker} please look up ticket {marker}")
        self.flush()
        spans, self.sink.keep = self.sink.kept, False
        return (marker in _span_text(spans)) if spans else None, f"{len(spans)} spans"

    def info(self) -> dict:
        return {"spans_exported": self.sink.exported}

    def close(self) -> None:
        self.tp.shutdown()


class OpenInferenceLayer(_OtelPeer):
    name = "openinference"

    def _instrumentor(self):
        from openinference.instrumentation.langchain import LangChainInstrumentor

        return LangChainInstrumentor()


class TraceloopLayer(_OtelPeer):
    name = "traceloop"

    def _instrumentor(self):
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        return LangchainInstrumentor()


class LangSmithLayer(Layer):
    """LangChain's LangSmith tracer, switched on by the environment the parent set
    (LANGSMITH_TRACING=true, LANGSMITH_ENDPOINT=the bench's dummy server)."""

    name = "langsmith"

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        if os.environ.get("LANGSMITH_TRACING") != "true" or not os.environ.get("LANGSMITH_ENDPOINT"):
            raise RuntimeError("the langsmith layer needs LANGSMITH_TRACING/LANGSMITH_ENDPOINT from the parent")

    def flush(self) -> None:
        from langchain_core.tracers.langchain import wait_for_all_tracers

        wait_for_all_tracers()

    def _stats(self) -> dict:
        with urllib.request.urlopen(self.url + "/_bench/stats", timeout=10) as r:
            return json.loads(r.read())

    def payload(self):
        self.flush()
        marker = MARKER_PREFIX + uuid.uuid4().hex[:8]
        _say(_agent([]), "payload", f"{marker} please look up ticket {marker}")
        self.flush()
        st = self._stats()
        return marker in st["markers"], f"{st['posts']} POSTs received"

    def info(self) -> dict:
        st = self._stats()
        return {"posts": st["posts"], "bytes": st["bytes"]}


def make_layer(name: str, spec: dict) -> Layer:
    if name == "bare":
        return Layer()
    if name == "unsee":
        return UnseeLayer()
    if name == "hooks":
        return RunHooksLayer()
    if name == "openinference":
        return OpenInferenceLayer()
    if name == "traceloop":
        return TraceloopLayer()
    if name == "langsmith":
        return LangSmithLayer(spec["langsmith_url"])
    raise ValueError(f"unknown layer {name!r}")


# -- the measurements ---------------------------------------------------------------
def _block(layer: Layer, n: int, say: Callable[[int], None]) -> tuple[float, float, float]:
    """(wall seconds, process CPU seconds) for n turns plus the layer's flush (inside the timed region),
    and the agent's path: wall seconds until the last turn returned (the flush, and whatever the
    layer's background threads still had to do then, left out).

    Process CPU time counts every thread of the process: a layer's background writer or
    exporter thread is charged to it wherever it ran, and time spent waiting for a core
    (other load on the machine) is not."""
    layer.flush()  # untimed: start from an empty queue
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(n):
        say(i)
    path = time.perf_counter() - t0
    layer.flush()
    return time.perf_counter() - t0, time.process_time() - c0, path


def fresh_threads(layer: Layer, agent, n: int, tag: str) -> tuple[float, float, float]:
    """n fresh threads, one turn each: (wall, CPU, the agent's path) seconds per step."""
    w, c, p = _block(layer, n, lambda i: _say(agent, f"{tag}-{i}", f"please look up ticket T-{i}"))
    return w / (n * STEPS_PER_TURN), c / (n * STEPS_PER_TURN), p / (n * STEPS_PER_TURN)


def one_thread(layer: Layer, agent, n: int, tag: str) -> tuple[float, float, float]:
    """One thread of n turns: (wall, CPU, the agent's path) seconds per step."""
    w, c, p = _block(layer, n, lambda i: _say(agent, tag, f"please look up ticket T-{i}"))
    return w / (n * STEPS_PER_TURN), c / (n * STEPS_PER_TURN), p / (n * STEPS_PER_TURN)


def history(layer: Layer, agent, turns: int, block: int, go: Callable[[], None] = lambda: None) -> dict:
    """One thread of ``turns`` turns, ms per turn over every ``block`` turns; the first and the
    last block end with the layer's flush inside their time (the last one starts after an untimed
    flush). ``go()`` is called before each turn: the parent runs two of these in lockstep.

    Wall time is the sum of the turns (and those flushes); CPU time is the process's over each
    block as one window, waits between turns included, so background work a layer does while
    the other process has its turn is still charged to it."""
    wall: list[float] = []
    cpu: list[float] = []
    layer.flush()
    gc.collect()
    c_block = time.process_time()
    for i in range(turns):
        if i == turns - block:
            layer.flush()  # untimed: the last block starts with an empty queue
            c_block = time.process_time()
        go()
        t0 = time.perf_counter()
        _say(agent, "history", f"please look up ticket T-{i}")
        if i == block - 1 or i == turns - 1:
            layer.flush()
        wall.append(time.perf_counter() - t0)
        if (i + 1) % block == 0 or i == turns - 1:
            c = time.process_time()
            n = (i % block) + 1
            cpu.extend([(c - c_block) / n] * n)  # the block's CPU, spread evenly over its turns
            c_block = c

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs)

    return {"first_s_turn": mean(wall[:block]), "last_s_turn": mean(wall[-block:]),
            "first_cpu_s_turn": mean(cpu[:block]), "last_cpu_s_turn": mean(cpu[-block:]),
            "curve_s_turn": [mean(wall[j:j + block]) for j in range(0, turns, block)],
            "curve_cpu_s_turn": [mean(cpu[j:j + block]) for j in range(0, turns, block)]}


def _lockstep() -> Callable[[], None]:
    """Wait for the parent's go (a line on stdin) after telling it we are done ("ok" on stdout)."""
    first = [True]

    def go() -> None:
        print("ready" if first[0] else "ok", flush=True)
        first[0] = False
        if not sys.stdin.readline():
            raise SystemExit("parent went away")

    return go


def run(spec: dict) -> dict:
    name = spec["layer"]
    t_start = time.perf_counter()
    layer = make_layer(name, spec)
    mw = layer.middleware()
    out: dict[str, Any] = {"layer": name}
    try:
        if spec.get("history"):
            agent = _agent(mw)
            for i in range(spec.get("warmup", 5)):  # warm on other threads of the same agent
                _say(agent, f"warm-{i}", f"please look up ticket W-{i}")
            go = _lockstep() if spec.get("lockstep") else (lambda: None)
            out["history"] = history(layer, agent, spec["history"], spec["block"], go)
            if spec.get("lockstep"):
                print("ok", flush=True)
        else:
            warm = _agent(mw)
            for i in range(spec.get("warmup", 10)):
                _say(warm, f"warm-{i}", f"please look up ticket W-{i}")
            layer.flush()
            out["fresh_s_step"], out["fresh_cpu_s_step"], out["fresh_path_s_step"] = fresh_threads(
                layer, _agent(mw), spec["fresh"], "fresh")
            out["long_s_step"], out["long_cpu_s_step"], out["long_path_s_step"] = one_thread(
                layer, _agent(mw), spec["long"], "long")
            if spec.get("slow_fresh"):
                slow_s = spec["slow_ms"] / 1e3
                warm = _agent(mw, slow_s)
                for i in range(2):
                    _say(warm, f"slow-warm-{i}", f"please look up ticket W-{i}")
                out["slow_fresh_s_step"], out["slow_fresh_cpu_s_step"], out["slow_fresh_path_s_step"] = fresh_threads(
                    layer, _agent(mw, slow_s), spec["slow_fresh"], "slow")
                out["slow_long_s_step"], out["slow_long_cpu_s_step"], out["slow_long_path_s_step"] = one_thread(
                    layer, _agent(mw, slow_s), spec["slow_long"], "slow-long")
        out["info"] = layer.info()
        if spec.get("payload"):
            out["payload"], out["payload_how"] = layer.payload()
    finally:
        layer.close()
    out["wall_s"] = time.perf_counter() - t_start
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    spec, path = json.loads(argv[0]), argv[1]
    res = run(spec)
    with open(path, "w") as f:
        json.dump(res, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
