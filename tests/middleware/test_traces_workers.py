"""Traces from many workers (issue 33, part 4): two worker processes on one PostgreSQL store run
turns of the SAME session one after the other (LangGraph's PostgresSaver on the same database),
each exporting live over OTLP/HTTP (``OTLPSpanExporter()`` configured by
``OTEL_EXPORTER_OTLP_ENDPOINT``, as docs/jaeger.md shows) to a real OTLP receiver in this
process (``oteltap``, the Collector's place), which forwards every request, resource included,
to a second OTLP/HTTP endpoint (the backend's place: Jaeger in a deployment).

Every span each worker ended arrives, both workers' spans carry the session as
``gen_ai.conversation.id``, the two come from two processes (distinct ``service.instance.id``
and ``process.pid`` resource attributes), and the second worker's span links (data-flow
parents) point at span ids the first worker exported."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.postgres

SESSION = "shared-s1"

WORKER = textwrap.dedent('''
    import json, os, re, sys
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph.checkpoint.postgres import PostgresSaver
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool
    from unsee import Unsee
    from unsee.plugins.model import ScriptedChatModel, call_id

    class Ended(SpanProcessor):  # what this worker ended (and so must have exported)
        def __init__(self):
            self.spans = []
        def on_end(self, span):
            self.spans.append({"span_id": format(span.context.span_id, "016x"), "name": span.name,
                               "conversation": (span.attributes or {}).get("gen_ai.conversation.id")})

    def policy(messages, tools):
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content=f"Done: {last.content}")
        if m := re.search(r"look up (\\w+)", str(last.content)):
            return AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"who": m.group(1)},
                             "id": call_id(messages), "type": "tool_call"}])
        return AIMessage(content="ok: " + " | ".join(str(x.content) for x in messages[-3:]))

    url, session, text = sys.argv[1], sys.argv[2], sys.argv[3]
    ended = Ended()
    # OTLPSpanExporter() reads OTEL_EXPORTER_OTLP_ENDPOINT (+ /v1/traces); the resource gets
    # OTEL_RESOURCE_ATTRIBUTES (service.instance.id) and, with OTEL_EXPERIMENTAL_RESOURCE_DETECTORS
    # =otel,process, process.pid
    u = Unsee(store=url, span_processors=[BatchSpanProcessor(OTLPSpanExporter()), ended])

    @u.tool(effect="read")
    def lookup(who: str) -> str:
        """Look up an account."""
        return f"account of {who}: plan gold"

    pool = ConnectionPool(url, kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
                          min_size=1, max_size=2)
    saver = PostgresSaver(pool)
    saver.setup()
    agent = create_agent(ScriptedChatModel(policy=policy), [lookup], system_prompt="support",
                         middleware=[u.middleware()], checkpointer=saver)
    agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": session}})
    u.close()  # shuts our TracerProvider down: the batch is exported before this returns
    pool.close()
    print("ENDED" + json.dumps({"pid": os.getpid(), "spans": ended.spans}), flush=True)
''')


class _Backend(http.server.ThreadingHTTPServer):
    """An OTLP/HTTP endpoint keeping every ExportTraceServiceRequest it gets (resources included)."""

    def __init__(self):
        self.requests: list = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                             ExportTraceServiceResponse)

        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.lock:
            self.server.requests.append(ExportTraceServiceRequest.FromString(body))
        out = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _value(v):
    return getattr(v, v.WhichOneof("value")) if v.WhichOneof("value") else None


def _attrs(kvs) -> dict:
    return {kv.key: _value(kv.value) for kv in kvs}


def test_two_workers_of_one_session_export_to_one_receiver(tmp_path, pg_url):
    from oteltap import OtelTapHttpProtobufReceiver, OtelTapHttpProtobufReceiverSettings

    (tmp_path / "tworker.py").write_text(WORKER)
    backend = _Backend()
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    port = _free_port()

    def worker(name: str, text: str) -> dict:
        home = tmp_path / name
        env = {**os.environ, "UNSEE_HOME": str(home), "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
               "OTEL_RESOURCE_ATTRIBUTES": f"service.instance.id={name}",
               "OTEL_EXPERIMENTAL_RESOURCE_DETECTORS": "otel,process"}
        env.pop("UNSEE_STORE", None)
        res = subprocess.run([sys.executable, str(tmp_path / "tworker.py"), pg_url, SESSION, text], env=env,
                             cwd=tmp_path, capture_output=True, text=True, timeout=300)
        line = next((ln for ln in res.stdout.splitlines() if ln.startswith("ENDED")), None)
        assert res.returncode == 0 and line, res.stdout + res.stderr
        return json.loads(line[5:])

    async def scenario():
        settings = OtelTapHttpProtobufReceiverSettings(
            http_port=port, reemit_traces_to_url=f"http://127.0.0.1:{backend.server_port}/v1/traces")
        async with OtelTapHttpProtobufReceiver(settings) as tap:
            received: dict[str, object] = {}
            stream = tap.stream_traces()
            first = asyncio.ensure_future(stream.__anext__())  # subscribed before anything is sent
            await asyncio.sleep(0.2)  # (oteltap does not buffer: the subscription must exist first)

            async def collect():
                span = await first
                received[span.span_id.hex()] = span
                async for span in stream:
                    received[span.span_id.hex()] = span

            collector = asyncio.ensure_future(collect())
            try:
                a = await asyncio.to_thread(worker, "worker-a", "look up dana")
                b = await asyncio.to_thread(worker, "worker-b", "thanks, what plan was that?")
                wanted = {s["span_id"] for s in a["spans"] + b["spans"]}
                for _ in range(200):  # every span each worker ended reaches the receiver
                    if wanted <= set(received):
                        break
                    await asyncio.sleep(0.05)
                if collector.done():  # (it stops only on an error: say which)
                    collector.result()
            finally:
                collector.cancel()
                first.cancel()
            return a, b, dict(received)

    try:
        a, b, received = asyncio.run(scenario())
    finally:
        backend.shutdown()

    ids_a = {s["span_id"] for s in a["spans"]}
    ids_b = {s["span_id"] for s in b["spans"]}
    assert ids_a and ids_b and not ids_a & ids_b
    assert ids_a | ids_b <= set(received), f"missing: {sorted((ids_a | ids_b) - set(received))}"

    # the session's spans of both workers carry the session id
    def conversation(span_id):
        return _attrs(received[span_id].attributes).get("gen_ai.conversation.id")

    for ids in (ids_a, ids_b):
        convs = {conversation(i) for i in ids}
        assert convs == {SESSION}, convs
    assert any(received[i].name.startswith("execute_tool") for i in ids_a)

    # two processes: the resource of every forwarded request says which worker sent it
    origin: dict[str, dict] = {}
    for req in backend.requests:
        for rs in req.resource_spans:
            resource = _attrs(rs.resource.attributes)
            for ss in rs.scope_spans:
                for span in ss.spans:
                    origin[span.span_id.hex()] = resource
    assert ids_a | ids_b <= set(origin), "the receiver forwarded fewer spans than it got"
    assert {origin[i]["service.instance.id"] for i in ids_a} == {"worker-a"}
    assert {origin[i]["service.instance.id"] for i in ids_b} == {"worker-b"}
    assert {origin[i]["process.pid"] for i in ids_a} == {a["pid"]}
    assert {origin[i]["process.pid"] for i in ids_b} == {b["pid"]} != {a["pid"]}
    assert {origin[i]["service.name"] for i in ids_a | ids_b} == {"unsee"}

    # links intact across workers: B's spans link (data-flow parents) to spans A exported
    cross = [(i, link.span_id.hex(), _attrs(link.attributes).get("unsee.link.artifact"))
             for i in ids_b for link in received[i].links if link.span_id.hex() in ids_a]
    assert cross, [(received[i].name, [ln.span_id.hex() for ln in received[i].links]) for i in ids_b]
    # B's model call read A's tool result: its span links to the tool span A exported
    assert any(received[s].name.startswith("execute_tool") for _, s, _ in cross), cross
    assert all(artifact for _, _, artifact in cross)  # each link names the artifact it stands for
    # a linked span's trace is A's: the link carries A's trace id, not B's
    trace_a = {received[i].trace_id for i in ids_a}
    assert all(link.trace_id in trace_a for i in ids_b for link in received[i].links
               if link.span_id.hex() in ids_a)
