"""unsee's recording overhead next to the tracing layers users already run.

The same ``langchain.agents.create_agent`` agent (scripted zero-latency model,
one ``@tool``, ``InMemorySaver``, a system prompt) is run under each layer:

- bare: no tracing;
- unsee: ``Unsee(home=tmp)`` and ``middleware=[u.middleware()]`` (defaults);
- hooks, a reference and not a peer: a middleware whose ``before_agent`` and
  ``after_agent`` do nothing. LangChain runs each as a graph node of its own
  (a superstep), so this is what any middleware that takes the run's start
  and end from hooks pays before it records anything (unsee keeps one:
  ``before_agent`` takes the run's lease, root span and turn checkpoint at
  the state the run loaded; the run's end comes from the graph run's
  callback, ``middleware/run_end.py``);
- OpenInference: ``LangChainInstrumentor().instrument(tracer_provider=tp)``,
  an SDK ``TracerProvider`` with a ``BatchSpanProcessor`` to an exporter that
  drops the spans (counting them);
- Traceloop: ``opentelemetry.instrumentation.langchain.LangchainInstrumentor``,
  the same provider set-up;
- LangSmith: LangChain's tracer switched on by ``LANGSMITH_TRACING=true``,
  ``LANGSMITH_ENDPOINT`` = a dummy LangSmith API this bench runs on
  127.0.0.1 (it answers ``/info`` and accepts the batch / multipart POSTs,
  zstd-compressed as a real LangSmith negotiates), and a dummy API key.

A *turn* is one ``agent.invoke``: user message -> model (tool call) -> tool
-> model (reply). A *step* is one of its three agent steps (model call, tool
call, model call), so ms/step = ms/turn / 3, as in
``bench_middleware``.

Measurements, per layer:

(a) fresh threads: ``--fresh`` (200) threads of one turn each (3 steps);
(b) one thread of ``--long`` (50) turns, ms/step over the whole thread;
(c) (a) and (b) with a model that sleeps 50 ms per call (20 threads and a
    20-turn thread), for bare, unsee and hooks (the peers too with ``--slow-peers``),
    reported as unsee's % per step over bare;
(d) one thread of 400 turns for bare and unsee (skipped by ``--quick``):
    ms/turn over the first 20 and the last 20 turns. unsee's *added* ms/turn
    (unsee - bare) over the last 20 against the first 20 says whether
    recording is O(history) per turn.

Every measured block ends with the layer's flush *inside* its timed region
(``u.flush()``: unsee's tracer provider and store writer; ``force_flush()`` of
the peers' ``BatchSpanProcessor``; ``wait_for_all_tracers()`` for LangSmith),
so no layer can leave the block's work in a background queue that outlives the
measurement; the same flush runs untimed before each block. Each block is
timed twice: wall clock (the figures docs/performance.md gives) and the process's CPU time, all
threads together, which charges a layer's background threads to it wherever
they ran and does not count waiting for a core, so it is the steadier figure
on a loaded machine. With the 50 ms model the CPU figure is the added CPU over
bare's wall time: the latency the added work costs if none of it overlaps the
model's wait. A third figure per block is the agent's path: the wall clock
until its last turn returned, the flush left out (what the agent itself waits
for; background work a layer still had to do then is not in it).

"Payload on spans": one more turn whose user message carries a marker; does
any span the layer emits contain it? For unsee: the spans on its tracer
provider, seen through an in-memory exporter added with ``span_processors=``
to a second ``Unsee`` with default settings; for the OpenTelemetry peers: the
spans their ``BatchSpanProcessor`` exported; for LangSmith: the (decompressed)
bodies the dummy endpoint received.

The peers patch LangChain process-wide, so every (layer, round) runs in its own
interpreter (``benchmarks/peers_worker.py``); within a round the layers run one
after another in an order rotated every round, so machine noise (the other
core's load, thermal drift) falls on all of them alike. Figures are medians over
rounds (5 by default); "added" is the median of the per-round differences to
bare of the same round. The 400-turn thread runs bare and unsee in two live
processes in lockstep: the parent hands out the turns one at a time,
alternating which goes first (CPU time is taken over each 20-turn block as one
window, so work done between turns is still charged).

Targets are ratios from this one run, printed for both clocks:

- fresh threads: unsee's added ms/step <= the lightest peer's (the recording
  with its background work and flush: wall and CPU; and the agent's path);
- the long thread and, with ``--slow-peers``, the 50 ms model: the same
  comparison, on the three figures;
- 50 ms model: unsee <= +2 % per step (fresh threads and the long thread);
- 400-turn thread: unsee's added ms/turn, last 20 / first 20 <= 1.5.

A FAIL is a measurement, not an error: the exit status is 0. The default run
takes about 5 minutes on 2 cores, ``--quick`` (3 rounds of 60 fresh threads,
no 400-turn thread) about a minute.

    python -m benchmarks.bench_peers [--rounds N] [--quick] [--layers bare,unsee,...]
    python -m benchmarks benchmarks.bench_peers

The peers come with ``pip install -e '.[peers]'``; layers whose package is
missing are skipped (and said so), bare vs unsee is still measured.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["bare", "unsee", "hooks", "openinference", "traceloop", "langsmith"]
#: measured beside bare and unsee with the slow model too (no tracing: a reference, not a peer)
REFERENCE = "hooks"
#: layer -> (module that must be importable, distribution for the version, label)
PEERS = {
    "openinference": ("openinference.instrumentation.langchain", "openinference-instrumentation-langchain",
                      "OpenInference"),
    "traceloop": ("opentelemetry.instrumentation.langchain", "opentelemetry-instrumentation-langchain",
                  "Traceloop"),
    "langsmith": ("langsmith", "langsmith", "LangSmith"),
}
SLOW_TARGET = 0.02
HISTORY_TARGET = 1.5
MARKER_RE = re.compile(rb"UNSEE-BENCH-MARKER-[0-9a-f]{8}")


# -- the dummy LangSmith endpoint -----------------------------------------------------
class DummyLangSmith:
    """A tiny LangSmith API on 127.0.0.1: ``GET /info``, POST/PATCH of runs (batch and
    multipart, zstd or not) answered 200/202; counts what arrived and which markers were in it."""

    INFO = {"version": "0.0.0-bench",
            "instance_flags": {"zstd_compression_enabled": True},
            "batch_ingest_config": {"use_multipart_endpoint": True, "scale_up_qsize_trigger": 1000,
                                    "scale_up_nthreads_limit": 16, "scale_down_nempty_trigger": 4,
                                    "size_limit": 100, "size_limit_bytes": 20_971_520}}

    def __init__(self) -> None:
        self.posts = 0
        self.bytes = 0
        self.markers: set[str] = set()
        self.errors = 0
        self._lock = threading.Lock()
        bench = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _reply(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    parts = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            break
                        parts.append(self.rfile.read(size))
                        self.rfile.readline()
                    return b"".join(parts)
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def do_GET(self) -> None:
                if self.path.startswith("/info"):
                    self._reply(200, bench.INFO)
                elif self.path.startswith("/_bench/stats"):
                    with bench._lock:
                        self._reply(200, {"posts": bench.posts, "bytes": bench.bytes,
                                          "markers": sorted(bench.markers), "errors": bench.errors})
                else:
                    self._reply(200, {})

            def _ingest(self) -> None:
                body = self._body()
                if self.headers.get("Content-Encoding", "").lower() == "zstd":
                    try:
                        import zstandard

                        body = zstandard.ZstdDecompressor().stream_reader(
                            io.BytesIO(body), read_across_frames=True).read()
                    except Exception:
                        with bench._lock:
                            bench.errors += 1
                found = {m.decode() for m in MARKER_RE.findall(body)}
                with bench._lock:
                    bench.posts += 1
                    bench.bytes += len(body)
                    bench.markers |= found
                self._reply(202 if "multipart" in self.path else 200, {})

            do_POST = do_PATCH = do_PUT = _ingest

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="dummy-langsmith", daemon=True)

    def __enter__(self) -> DummyLangSmith:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


# -- running the workers ----------------------------------------------------------------
_TRACING_ENV = re.compile(r"^(LANGSMITH_|LANGCHAIN_(TRACING|API_KEY|ENDPOINT|PROJECT|CALLBACKS)|TRACELOOP_|"
                          r"OPENINFERENCE_|OTEL_)")


def _env(layer: str, langsmith_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not _TRACING_ENV.match(k)}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["LANGSMITH_TRACING"] = "false"
    if layer == "langsmith":
        env.update(LANGSMITH_TRACING="true", LANGSMITH_ENDPOINT=langsmith_url or "",
                   LANGSMITH_API_KEY="lsv2_pt_00000000000000000000000000000000_0000000000",
                   LANGSMITH_PROJECT="unsee-bench-peers")
    return env


def _worker(spec: dict, langsmith_url: str | None, timeout: float = 900) -> dict:
    spec = {**spec, "langsmith_url": langsmith_url}
    with tempfile.TemporaryDirectory(prefix="unsee-bench-peers-") as tmp:
        out = Path(tmp) / "out.json"
        p = subprocess.run([sys.executable, "-m", "benchmarks.peers_worker", json.dumps(spec), str(out)],
                           cwd=ROOT, env=_env(spec["layer"], langsmith_url), capture_output=True, text=True,
                           timeout=timeout)
        if p.returncode != 0 or not out.exists():
            tail = "\n".join((p.stderr or p.stdout).strip().splitlines()[-12:])
            raise RuntimeError(f"worker {spec['layer']} exited {p.returncode}:\n{tail}")
        return json.loads(out.read_text())


def available_layers(wanted: list[str]) -> tuple[list[str], list[str]]:
    have, skipped = [], []
    for layer in wanted:
        mod = PEERS.get(layer, (None,))[0]
        if mod is not None and importlib.util.find_spec(mod.split(".")[0]) is not None:
            try:
                ok = importlib.util.find_spec(mod) is not None
            except ModuleNotFoundError:
                ok = False
        else:
            ok = mod is None
        (have if ok else skipped).append(layer)
    return have, skipped


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _label(layer: str) -> str:
    if layer == "bare":
        return "bare agent"
    if layer == "unsee":
        return f"unsee {_version('unsee')}"
    if layer == REFERENCE:
        return "no-op before/after_agent middleware (reference)"
    _, dist, name = PEERS[layer]
    if layer == "langsmith":
        return f"LangSmith {_version(dist)} (dummy endpoint on 127.0.0.1)"
    return f"{name} ({dist} {_version(dist)})"


# -- the 400-turn thread, bare and unsee in lockstep ---------------------------------------------
def lockstep_history(layers: list[str], turns: int, block: int, langsmith_url: str | None) -> dict[str, dict]:
    """One worker per layer, alive together; the parent hands out the turns one at a time,
    alternating which layer goes first, so load on the machine falls on both alike."""
    procs: dict[str, subprocess.Popen] = {}
    with tempfile.TemporaryDirectory(prefix="unsee-bench-peers-") as tmp:
        outs = {layer: Path(tmp) / f"{layer}.json" for layer in layers}
        errs = {layer: open(Path(tmp) / f"{layer}.err", "w+") for layer in layers}
        try:
            for layer in layers:
                spec = {"layer": layer, "history": turns, "block": block, "warmup": 5, "lockstep": True,
                        "langsmith_url": langsmith_url}
                procs[layer] = subprocess.Popen(
                    [sys.executable, "-m", "benchmarks.peers_worker", json.dumps(spec), str(outs[layer])],
                    cwd=ROOT, env=_env(layer, langsmith_url), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=errs[layer], text=True, bufsize=1)

            def wait(layer: str, want: str) -> None:
                while True:
                    line = procs[layer].stdout.readline()
                    if not line:
                        errs[layer].seek(0)
                        tail = "\n".join(errs[layer].read().strip().splitlines()[-12:])
                        raise RuntimeError(f"{layer} worker stopped:\n{tail}")
                    if line.strip() == want:
                        return

            for layer in layers:
                wait(layer, "ready")
            for i in range(turns):
                for layer in (layers if i % 2 == 0 else layers[::-1]):
                    procs[layer].stdin.write("go\n")
                    procs[layer].stdin.flush()
                    wait(layer, "ok")
            res = {}
            for layer in layers:
                procs[layer].stdin.close()
                if procs[layer].wait(timeout=300) != 0 or not outs[layer].exists():
                    errs[layer].seek(0)
                    raise RuntimeError(f"{layer} worker exited {procs[layer].returncode}:\n"
                                       + "\n".join(errs[layer].read().strip().splitlines()[-12:]))
                res[layer] = json.loads(outs[layer].read_text())["history"]
            return res
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()
            for f in errs.values():
                f.close()


# -- summarising --------------------------------------------------------------------------
KINDS = ("fresh", "long", "slow_fresh", "slow_long")


#: wall: the block and its flush; cpu: the process's CPU over the same; path: the agent's path, the
#: wall clock until the block's last turn returned (the flush, and background work still due, left out)
CLOCKS = ("wall", "cpu", "path")


def _key(kind: str, clock: str) -> str:
    return {"wall": f"{kind}_s_step", "cpu": f"{kind}_cpu_s_step", "path": f"{kind}_path_s_step"}[clock]


def _med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _rounds(res: dict, layer: str, key: str) -> list[tuple[float, float, dict]]:
    """Per round: (the layer's value, bare's value, bare's row) where both were measured."""
    return [(rows[layer][key], rows["bare"][key], rows["bare"]) for rows in res.values()
            if layer in rows and "bare" in rows and key in rows[layer] and key in rows["bare"]]


def _f(x: float | None, fmt: str = "{:.2f}", none: str = "n/a") -> str:
    return none if x is None else fmt.format(x)


def summarise(res: dict[int, dict[str, dict]], layers: list[str], hist: dict[str, dict]) -> dict:
    """Medians over rounds; "added" = median of the per-round differences to bare; the 50 ms
    model's % per step: wall, the per-round ratio to bare; CPU, the per-round added CPU over
    bare's wall time (the latency the added work costs if it is on the critical path)."""
    s: dict = {}
    for clock in CLOCKS:
        c: dict = {}
        for layer in layers:
            row: dict = {}
            for kind in KINDS:
                k = _key(kind, clock)
                row[kind] = _med([rows[layer][k] * 1e3 for rows in res.values() if layer in rows and k in rows[layer]])
                pairs = _rounds(res, layer, k)
                row[kind + "_added"] = _med([(a - b) * 1e3 for a, b, _ in pairs])
                row[kind + "_added_rounds"] = [(a - b) * 1e3 for a, b, _ in pairs]
                if kind.startswith("slow"):
                    wall_k = _key(kind, "wall")
                    row[kind + "_pct"] = _med([(a - b) / bare[wall_k] * 100 for a, b, bare in pairs])
            c[layer] = row
        s[clock] = c
    if "bare" in hist and "unsee" in hist:
        b, u = hist["bare"], hist["unsee"]
        h: dict = {}
        for clock, pre in (("wall", ""), ("cpu", "cpu_")):
            first = (u[f"first_{pre}s_turn"] - b[f"first_{pre}s_turn"]) * 1e3
            last = (u[f"last_{pre}s_turn"] - b[f"last_{pre}s_turn"]) * 1e3
            h[clock] = {"bare": (b[f"first_{pre}s_turn"] * 1e3, b[f"last_{pre}s_turn"] * 1e3),
                        "unsee": (u[f"first_{pre}s_turn"] * 1e3, u[f"last_{pre}s_turn"] * 1e3),
                        "added": (first, last), "ratio": last / first if first > 0 else None,
                        "bare_curve": [x * 1e3 for x in b[f"curve_{pre}s_turn"]],
                        "unsee_curve": [x * 1e3 for x in u[f"curve_{pre}s_turn"]]}
        s["history"] = h
    return s


def _table(c: dict, layers: list[str], payload: dict, args, cpu: bool) -> None:
    unit = "CPU ms/step" if cpu else "ms/step"
    print(f"| layer | {unit} (fresh) | added | {args.long}-turn thread {unit} | "
          f"{args.slow_ms:.0f} ms model: % per step (fresh / {args.slow_long}-turn) | payload on spans |")
    print("|---|---|---|---|---|---|")
    for layer in layers:
        r = c[layer]
        if layer == "bare":
            added, long_, slow, pay = "–", _f(r["long"]), "–", "–"
        else:
            added = _f(r["fresh_added"], "{:+.2f}")
            long_ = f"{_f(r['long'])} ({_f(r['long_added'], '{:+.1f}')})"
            slow = (f"{_f(r['slow_fresh_pct'], '{:+.1f} %')} / {_f(r['slow_long_pct'], '{:+.1f} %')}"
                    if r["slow_fresh_pct"] is not None else "–")
            p = payload.get(layer)
            pay = {True: "yes", False: "no", None: "n/a"}[p[0]] if p else "n/a"
        print(f"| {_label(layer)} | {_f(r['fresh'])} | {added} | {long_} | {slow} | {pay} |")


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _lightest(s: dict, peers: list[str], kind: str, clocks: tuple[str, ...]) -> str:
    """unsee's added ms/step against the lightest peer's, per clock, with the verdict."""
    parts = []
    for clock in clocks:
        c = s[clock]
        have = [p for p in peers if c[p][kind + "_added"] is not None]
        ua = c["unsee"][kind + "_added"]
        if ua is None or not have:
            parts.append(f"{clock}: n/a")
            continue
        light = min(have, key=lambda p: c[p][kind + "_added"])
        la = c[light][kind + "_added"]
        ratio = f"{ua / la:.2f}x" if la > 0 else "n/a (the peer added nothing measurable)"
        parts.append(f"{clock}: unsee {ua:+.2f} vs {light} {la:+.2f} ms/step = {ratio} {_verdict(ua <= la)}")
    return "  |  ".join(parts)


def print_report(s: dict, layers: list[str], skipped: list[str], payload: dict, notes: list[str], args,
                 hist_turns: int) -> None:
    print(f"\nA turn = one agent.invoke (user -> model: tool call -> tool -> model: reply) = 3 steps; "
          f"ms/step = ms/turn / 3. Medians over {args.rounds} interleaved round(s); 'added' = median of the "
          f"per-round differences to bare. Each block ends with the layer's flush inside its time.")
    print("\nwall clock:\n")
    _table(s["wall"], layers, payload, args, cpu=False)
    print("\nprocess CPU time (all threads of the agent's process; steadier when the machine is loaded; "
          "50 ms model column: added CPU over bare's wall time):\n")
    _table(s["cpu"], layers, payload, args, cpu=True)
    if skipped:
        print(f"\nskipped (not installed; pip install -e '.[peers]'): {', '.join(skipped)}")
    w = s["wall"]
    print(f"\n{args.slow_ms:.0f} ms model, wall ms/step (fresh / long): " + ";  ".join(
        f"{layer} {_f(w[layer]['slow_fresh'])} / {_f(w[layer]['slow_long'])}" for layer in layers
        if w[layer]["slow_fresh"] is not None) + ("" if args.slow_peers else "  (peers: --slow-peers)"))
    pth = s["path"]
    print("the agent's path (the turns until the last returned; the layer's flush left out), ms/step fresh / "
          f"{args.long}-turn (added): " + ";  ".join(
              f"{layer} {_f(pth[layer]['fresh'])} / {_f(pth[layer]['long'])}"
              + ("" if layer == "bare" else f" ({_f(pth[layer]['fresh_added'], '{:+.2f}')} / "
                                            f"{_f(pth[layer]['long_added'], '{:+.2f}')})")
              for layer in layers if pth[layer]["fresh"] is not None))
    if "unsee" in w:
        for clock in ("wall", "cpu"):
            rr = s[clock]["unsee"]["fresh_added_rounds"]
            if rr:
                print(f"unsee added {clock} ms/step (fresh) per round: " + ", ".join(f"{x:+.2f}" for x in rr))
    how = [f"{layer}: {p[1]}" for layer, p in payload.items() if p and p[1]]
    if how:
        print("payload check on: " + "; ".join(how))
    h = s.get("history")
    if h:
        print(f"\n{hist_turns}-turn thread (user -> tool call -> return -> reply, InMemorySaver; bare and unsee "
              f"in lockstep), ms/turn, first 20 -> last 20 turns:")
        for clock in ("wall", "cpu"):
            x = h[clock]
            print(f"  {clock:4s} bare {x['bare'][0]:6.1f} -> {x['bare'][1]:6.1f}   unsee {x['unsee'][0]:6.1f} -> "
                  f"{x['unsee'][1]:6.1f}   unsee added {x['added'][0]:+6.1f} -> {x['added'][1]:+6.1f}")
        for clock in ("wall", "cpu"):
            print(f"  {clock:4s} every 20 turns, bare : " + " ".join(f"{v:.0f}" for v in h[clock]["bare_curve"]))
            print(f"  {clock:4s} every 20 turns, unsee: " + " ".join(f"{v:.0f}" for v in h[clock]["unsee_curve"]))
    for n in notes:
        print(f"note: {n}")

    print("\ntargets (ratios within this run; wall clock | process CPU | path: the agent's path):")
    u = {clock: s[clock].get("unsee") for clock in ("wall", "cpu")}
    peers = [p for p in layers if p in PEERS and s["wall"][p]["fresh_added"] is not None]
    if u["wall"] and u["wall"]["fresh_added"] is not None and peers:
        parts = []
        for clock in ("wall", "cpu"):
            c = s[clock]
            light = min(peers, key=lambda p: c[p]["fresh_added"])
            la, ua = c[light]["fresh_added"], c["unsee"]["fresh_added"]
            ratio = f"{ua / la:.2f}x" if la > 0 else "n/a (the peer added nothing measurable)"
            parts.append(f"{clock}: unsee {ua:+.2f} vs {light} {la:+.2f} ms/step = {ratio} {_verdict(ua <= la)}")
        print("  fresh threads, unsee added <= lightest peer's:  " + "  |  ".join(parts))
    else:
        print("  fresh threads, unsee added <= lightest peer's:  n/a (no peer measured)")
    if u["wall"]:
        for kind, what in (("slow_fresh", "fresh threads"), ("slow_long", f"{args.slow_long}-turn thread")):
            parts = []
            for clock in ("wall", "cpu"):
                v = u[clock][kind + "_pct"]
                parts.append(f"{clock}: n/a" if v is None else
                             f"{clock}: {v:+.2f} % {_verdict(v <= SLOW_TARGET * 100)}")
            print(f"  {args.slow_ms:.0f} ms model, {what}, unsee <= +{SLOW_TARGET * 100:.0f} % per step:  "
                  + "  |  ".join(parts))
    if u["wall"] and peers:
        print("  fresh threads, the agent's path (the turns until the last returned; flush left out), unsee added "
              "<= lightest peer's:  " + _lightest(s, peers, "fresh", ("path",)))
        print(f"  {args.long}-turn thread, unsee added <= lightest peer's:  " + _lightest(s, peers, "long", CLOCKS))
        for kind, what in (("slow_fresh", "fresh threads"), ("slow_long", f"{args.slow_long}-turn thread")):
            print(f"  {args.slow_ms:.0f} ms model, {what}, unsee added <= lightest peer's:  "
                  + (_lightest(s, peers, kind, CLOCKS) if args.slow_peers else
                     "n/a (the peers ran without the slow model: --slow-peers)"))
    ref = {clock: s[clock].get(REFERENCE) for clock in ("wall", "cpu")}
    if ref["wall"] and ref["wall"]["fresh_added"] is not None:
        print("  reference, what a middleware with before_agent/after_agent hooks pays before recording "
              "anything:  " + "  |  ".join(
                  f"{clock}: {ref[clock]['fresh_added']:+.2f} ms/step, "
                  f"{_f(ref[clock]['slow_fresh_pct'], '{:+.2f} %')} per step with the {args.slow_ms:.0f} ms model"
                  for clock in ("wall", "cpu")))
    if h:
        parts = []
        for clock in ("wall", "cpu"):
            r = h[clock]["ratio"]
            parts.append(f"{clock}: n/a (nothing added over the first 20)" if r is None else
                         f"{clock}: {r:.2f} {_verdict(r <= HISTORY_TARGET)}")
        print(f"  {hist_turns}-turn thread, unsee added ms/turn last 20 / first 20 <= {HISTORY_TARGET}:  "
              + "  |  ".join(parts))
    else:
        print("  400-turn thread: skipped")


def _load() -> str:
    try:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"
    except OSError:
        return "load average n/a"


# -- main ---------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> None:
    if argv is None:  # under ``python -m benchmarks`` sys.argv holds the runner's arguments, not ours
        argv = sys.argv[1:] if Path(sys.argv[0]).stem == "bench_peers" else []
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_peers", description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5; --quick: 3)")
    ap.add_argument("--quick", action="store_true", help="3 rounds of fewer threads, no 400-turn thread")
    ap.add_argument("--layers", default=",".join(LAYERS), help="comma-separated subset of " + ",".join(LAYERS))
    ap.add_argument("--fresh", type=int, default=None, help="fresh threads per round (default 200; --quick 60)")
    ap.add_argument("--long", type=int, default=50, help="turns of the long thread (default 50)")
    ap.add_argument("--slow-fresh", type=int, default=None, help="fresh threads, 50 ms model (20; --quick 8)")
    ap.add_argument("--slow-long", type=int, default=None, help="turns of the 50 ms model's thread (20; --quick 8)")
    ap.add_argument("--slow-ms", type=float, default=50.0, help="the slow model's sleep per call (default 50)")
    ap.add_argument("--slow-peers", action="store_true", help="run the slow model under the peers too")
    ap.add_argument("--history", type=int, default=None,
                    help="turns of the bare/unsee history thread, a multiple of 20 (400; 0 or --quick: skip)")
    args = ap.parse_args(argv)
    q = args.quick
    args.rounds = args.rounds or (3 if q else 5)
    args.fresh = args.fresh or (60 if q else 200)
    args.slow_fresh = args.slow_fresh or (8 if q else 20)
    args.slow_long = args.slow_long or (8 if q else 20)
    block = 20
    hist_turns = args.history if args.history is not None else (0 if q else 400)
    if hist_turns:
        hist_turns = max(2 * block, -(-hist_turns // block) * block)
    wanted = [x.strip() for x in args.layers.split(",") if x.strip()]
    bad = [x for x in wanted if x not in LAYERS]
    if bad:
        ap.error(f"unknown layer(s) {bad}; known: {LAYERS}")
    if "bare" not in wanted:
        wanted.insert(0, "bare")  # everything is relative to bare
    layers, skipped = available_layers(wanted)

    t_all = time.perf_counter()
    print(f"layers: {', '.join(layers)}" + (f"  (skipped, not installed: {', '.join(skipped)})" if skipped else ""))
    print(f"rounds {args.rounds}; per round and layer: {args.fresh} fresh threads x 1 turn, one {args.long}-turn "
          f"thread; with a {args.slow_ms:.0f} ms model ({'all layers' if args.slow_peers else 'bare, unsee and the reference'}) "
          f"{args.slow_fresh} fresh threads and a {args.slow_long}-turn thread"
          + (f"; then a {hist_turns}-turn thread, bare and unsee in lockstep" if hist_turns else ""))
    print(f"start: {_load()}", flush=True)
    spec = {"fresh": args.fresh, "long": args.long, "slow_fresh": args.slow_fresh, "slow_long": args.slow_long,
            "slow_ms": args.slow_ms, "warmup": 10}
    res: dict[int, dict[str, dict]] = {}
    payload: dict[str, tuple] = {}
    hist: dict[str, dict] = {}
    notes: list[str] = []
    with DummyLangSmith() as ls:
        for r in range(args.rounds):
            k = r % len(layers)
            order = layers[k:] + layers[:k]
            res[r] = {}
            for layer in order:
                t0 = time.perf_counter()
                try:
                    slow = layer in ("bare", "unsee", REFERENCE) or args.slow_peers
                    out = _worker({**spec, "layer": layer, "payload": r == 0,
                                   **({} if slow else {"slow_fresh": 0, "slow_long": 0})}, ls.url)
                except Exception as exc:  # one broken layer must not stop the others
                    print(f"  round {r + 1} {layer}: FAILED: {exc}", flush=True)
                    notes.append(f"{layer} failed in round {r + 1}")
                    continue
                res[r][layer] = out
                if "payload" in out:
                    payload[layer] = (out["payload"], out.get("payload_how", ""))
                info = ", ".join(f"{k2} {v}" for k2, v in out.get("info", {}).items())
                print(f"  round {r + 1}/{args.rounds} {layer:13s} ms/step wall (cpu): "
                      f"fresh {out['fresh_s_step'] * 1e3:5.2f} ({out['fresh_cpu_s_step'] * 1e3:5.2f})  "
                      f"long {out['long_s_step'] * 1e3:5.2f} ({out['long_cpu_s_step'] * 1e3:5.2f})  "
                      + (f"{args.slow_ms:.0f}ms-model {out['slow_fresh_s_step'] * 1e3:5.2f}/"
                         f"{out['slow_long_s_step'] * 1e3:5.2f}  " if "slow_fresh_s_step" in out else "")
                      + f"[{time.perf_counter() - t0:.1f} s{'; ' + info if info else ''}]", flush=True)
                if layer == "langsmith" and not out.get("info", {}).get("posts"):
                    notes.append("the LangSmith layer posted nothing to the dummy endpoint: its tracing was off")
                if layer == "unsee" and out.get("info", {}).get("failures"):
                    notes.append(f"unsee reported {out['info']['failures']} recording failures")
        if ls.errors:
            notes.append(f"the dummy LangSmith endpoint could not decode {ls.errors} request(s)")
        if hist_turns and {"bare", "unsee"} <= set(layers):
            t0 = time.perf_counter()
            try:
                hist = lockstep_history(["bare", "unsee"], hist_turns, block, ls.url)
                print(f"  {hist_turns}-turn thread, bare and unsee in lockstep "
                      f"[{time.perf_counter() - t0:.1f} s]", flush=True)
            except Exception as exc:
                print(f"  {hist_turns}-turn thread: FAILED: {exc}", flush=True)
                notes.append(f"the {hist_turns}-turn thread failed")
    print(f"end: {_load()}")
    s = summarise(res, layers, hist)
    print_report(s, layers, skipped, payload, notes, args, hist_turns)
    print(f"\nwall time {time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    main()
