"""Exporting a recorded session: OTLP to a real receiver (oteltap) and Jaeger upload JSON.

A short real session is recorded once per module: ``create_agent`` with a
scripted model, one tool, ``InMemorySaver``, two turns (the first calls the
tool, the second only replies) on one thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import socket
from collections.abc import Sequence

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from oteltap import OtelTapHttpProtobufReceiver, OtelTapHttpProtobufReceiverSettings

from tests.support.cli_helpers import assert_one_line_error, run
from unsee import Unsee
from unsee.middleware import export as export_mod
from unsee.middleware.errors import EndpointUnreachable, ExportError, InvalidArgument, SessionNotFound
from unsee.middleware.records import ArtifactType
from unsee.plugins.model import ScriptedChatModel, call_id

SECRET = "4417-2231"
SYSTEM_PROMPT = "You are the export-test support bot."
TURN1 = "Please look up ticket T1 for me"
TURN2 = "Thanks, goodbye for now"
SESSION = "export-session"


@tool
def lookup(ticket: str) -> str:
    """Look up a ticket."""
    return f"ticket {ticket}: payment card {SECRET}"


def policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(content=f"Found it: {last.content}")
    if "ticket" in str(last.content):
        return AIMessage(content="", tool_calls=[
            {"name": "lookup", "args": {"ticket": "T1"}, "id": call_id(messages), "type": "tool_call"}])
    return AIMessage(content="You are welcome, bye")


PAYLOADS = [SECRET, SYSTEM_PROMPT, TURN1, TURN2, "Found it", "You are welcome, bye", "payment card"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    home = tmp_path_factory.mktemp("export-home")
    u = Unsee(home=home)
    agent = create_agent(
        ScriptedChatModel(policy=policy), [lookup], system_prompt=SYSTEM_PROMPT,
        middleware=[u.middleware()], checkpointer=InMemorySaver(),
    )
    cfg = {"configurable": {"thread_id": SESSION}}
    out1 = agent.invoke({"messages": [HumanMessage(TURN1)]}, cfg)
    agent.invoke({"messages": [HumanMessage(TURN2)]}, cfg)
    tool_call_id = next(m for m in out1["messages"] if isinstance(m, ToolMessage)).tool_call_id
    g = u.graph(SESSION)
    rows = u.store.spans(SESSION)
    yield {"u": u, "graph": g, "rows": rows, "tool_call_id": tool_call_id, "home": home}
    u.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- helpers over opentelemetry proto spans -------------------------------------
def any_value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if kind is None:
        return None
    return getattr(v, kind)


def proto_attrs(kvs) -> dict:
    return {kv.key: any_value(kv.value) for kv in kvs}


def by_artifact(rows, artifact_id):
    return next(r for r in rows if r.attributes.get("unsee.artifact.id") == artifact_id)


def test_recorded_session_shape(recorded):
    """Sanity of the fixture: the spans the export tests rely on were recorded."""
    rows, g = recorded["rows"], recorded["graph"]
    names = [r.name for r in rows]
    assert names.count("invoke_agent") == 2
    assert sum(n.startswith("chat ") for n in names) == 3
    assert names.count("execute_tool lookup") == 1
    assert len({r.trace_id for r in rows}) == 2  # one trace per turn
    assert len(g.of_type(ArtifactType.TOOL_RETURN)) == 1


# -- (a) OTLP to a real receiver ---------------------------------------------------
async def _export_and_collect(u, session, endpoint_for, expected: int, **kw):
    port = free_port()
    got = []

    def collect(span) -> bool:
        got.append(span)
        return len(got) >= expected

    settings = OtelTapHttpProtobufReceiverSettings(http_port=port)
    async with OtelTapHttpProtobufReceiver(settings) as receiver:
        # register the wait BEFORE sending: the receiver does not buffer
        waiter = asyncio.ensure_future(receiver.await_trace(collect, timeout=20))
        await asyncio.sleep(0)
        sent = await asyncio.to_thread(u.export_otlp, session, endpoint_for(port), timeout=10, **kw)
        await waiter
    return sent, got


async def test_otlp_export_reaches_receiver_with_parents_links_and_attributes(recorded):
    u, rows, g = recorded["u"], recorded["rows"], recorded["graph"]
    sent, got = await _export_and_collect(u, SESSION, lambda p: f"http://127.0.0.1:{p}", len(rows))
    assert sent == len(rows)
    assert len(got) == len(rows)

    spans = {s.span_id.hex(): s for s in got}
    assert set(spans) == {r.span_id for r in rows}
    for r in rows:
        s = spans[r.span_id]
        assert s.trace_id.hex() == r.trace_id
        assert s.name == r.name
        assert s.start_time_unix_nano == r.start_ns and s.end_time_unix_nano == r.end_ns
        # parent span ids survive the round trip
        assert (s.parent_span_id.hex() or None) == r.parent_span_id

    # structure: one invoke_agent root per trace, every other span its child
    roots = {s.trace_id.hex(): s for s in got if s.name == "invoke_agent"}
    assert len(roots) == 2
    for s in got:
        if s.name == "invoke_agent":
            assert s.parent_span_id == b""
            assert proto_attrs(s.attributes)["gen_ai.operation.name"] == "invoke_agent"
        else:
            assert s.parent_span_id == roots[s.trace_id.hex()].span_id

    tr = g.of_type(ArtifactType.TOOL_RETURN)[0]
    call = g.get(tr.parents[0])
    assert call.type is ArtifactType.TOOL_CALL
    tool_span = spans[by_artifact(rows, tr.id).span_id]
    tool_attrs = proto_attrs(tool_span.attributes)
    assert tool_attrs["gen_ai.operation.name"] == "execute_tool"
    assert tool_attrs["gen_ai.tool.name"] == "lookup"
    assert tool_attrs["gen_ai.tool.call.id"] == recorded["tool_call_id"]
    assert tool_attrs["unsee.artifact.id"] == tr.id
    assert tool_attrs["unsee.artifact.type"] == "tool_return"
    assert tool_attrs["unsee.artifact.parents"] == [call.id]
    assert tool_attrs["unsee.commits"] == [call.id]

    # the tool span links to the chat span that asked for the call (the tool_call artifact's span)
    asking_chat = spans[call.span_id]
    assert asking_chat.name.startswith("chat ")
    links = {(ln.span_id.hex(), proto_attrs(ln.attributes)["unsee.link.artifact"]) for ln in tool_span.links}
    assert (asking_chat.span_id.hex(), call.id) in links
    # the tool_call artifact travels as an event on the asking chat span
    events = [proto_attrs(e.attributes) for e in asking_chat.events if e.name == "unsee.artifact"]
    assert any(e["unsee.artifact.id"] == call.id and e["unsee.artifact.type"] == "tool_call" for e in events)

    # the chat span that consumed the tool return links to the tool span
    consumer = next(a for a in g.of_type(ArtifactType.MODEL_TURN) if tr.id in g.manifest(a.id))
    manifest = g.manifest(consumer.id)
    chat = spans[by_artifact(rows, consumer.id).span_id]
    chat_attrs = proto_attrs(chat.attributes)
    assert chat_attrs["gen_ai.operation.name"] == "chat"
    assert chat_attrs["unsee.artifact.id"] == consumer.id
    assert chat_attrs["gen_ai.provider.name"] == "scripted"
    # its context manifest: whole, or what it changed in an earlier turn's (its base)
    if consumer.context is None:
        assert chat_attrs["unsee.context.full"] == list(manifest)
    else:
        assert chat_attrs["unsee.context.base"] == consumer.context.base
        assert chat_attrs["unsee.context.added"] == list(consumer.parents)
    assert "unsee.artifact.parents" not in chat_attrs
    chat_links = {proto_attrs(ln.attributes)["unsee.link.artifact"]: ln for ln in chat.links}
    assert chat_links[tr.id].span_id == tool_span.span_id
    assert chat_links[tr.id].trace_id == tool_span.trace_id
    # links cover what is new in the prompt since the previous model call (the previous turn
    # links the rest) and the span of the delta's base
    assert set(chat_links) <= set(manifest) | ({consumer.context.base} if consumer.context else set())
    previous_turn = [p for p in manifest if p.startswith("mt-")]
    assert previous_turn and set(previous_turn) <= set(chat_links)

    # turn 2's chat links back across traces to turn 1's spans
    last_turn = max(g.of_type(ArtifactType.MODEL_TURN), key=lambda a: a.seq)
    last_chat = spans[by_artifact(rows, last_turn.id).span_id]
    assert any(ln.trace_id != last_chat.trace_id for ln in last_chat.links)

    # every artifact of the graph appears on the wire (as a span attribute or an event)
    on_wire = set()
    for s in got:
        a = proto_attrs(s.attributes)
        if "unsee.artifact.id" in a:
            on_wire.add(a["unsee.artifact.id"])
        for e in s.events:
            ea = proto_attrs(e.attributes)
            if "unsee.artifact.id" in ea:
                on_wire.add(ea["unsee.artifact.id"])
    assert on_wire == {a.id for a in g}

    # no payload text anywhere (content lives in the vault, spans carry hashes)
    for s in got:
        blob = s.SerializeToString()
        for text in PAYLOADS:
            assert text.encode() not in blob, (s.name, text)


async def test_otlp_export_endpoint_with_explicit_traces_path(recorded):
    u, rows = recorded["u"], recorded["rows"]
    sent, got = await _export_and_collect(
        u, SESSION, lambda p: f"http://127.0.0.1:{p}/v1/traces", len(rows), protocol="http")
    assert sent == len(got) == len(rows)


def test_readable_spans_round_trip(recorded):
    rows = recorded["rows"]
    spans = export_mod.readable_spans(rows)
    for r, s in zip(rows, spans):
        assert format(s.context.span_id, "016x") == r.span_id
        assert (format(s.parent.span_id, "016x") if s.parent else None) == r.parent_span_id
        assert [format(ln.context.span_id, "016x") for ln in s.links] == [ln["span_id"] for ln in r.links]
        assert s.resource.attributes.get("service.name") == "unsee"


# -- (b) Jaeger upload JSON ----------------------------------------------------------
HEX16 = re.compile(r"^[0-9a-f]{16}$")
HEX32 = re.compile(r"^[0-9a-f]{32}$")


def test_jaeger_json_structure(recorded, tmp_path):
    u, rows, g = recorded["u"], recorded["rows"], recorded["graph"]
    path = tmp_path / "trace.json"
    n = u.export_jaeger_json(SESSION, path)
    assert n == len(rows)
    doc = json.loads(path.read_text())
    assert isinstance(doc["data"], list)
    assert {t["traceID"] for t in doc["data"]} == {r.trace_id for r in rows}
    row_by_id = {r.span_id: r for r in rows}

    all_spans = {}
    for trace in doc["data"]:
        assert HEX32.match(trace["traceID"])
        procs = trace["processes"]
        assert procs and all(p["serviceName"] == "unsee" for p in procs.values())
        for p in procs.values():
            assert isinstance(p["tags"], list)
        ids_in_trace = {s["spanID"] for s in trace["spans"]}
        for s in trace["spans"]:
            all_spans[s["spanID"]] = s
            r = row_by_id[s["spanID"]]
            assert s["traceID"] == trace["traceID"] == r.trace_id
            assert HEX16.match(s["spanID"])
            assert s["operationName"] == r.name
            assert isinstance(s["startTime"], int) and s["startTime"] == r.start_ns // 1000
            assert isinstance(s["duration"], int) and s["duration"] >= 0
            assert s["processID"] in procs
            assert isinstance(s["logs"], list)
            for log in s["logs"]:
                assert isinstance(log["timestamp"], int)
                assert log["fields"][0] == {"key": "event", "type": "string", "value": log["fields"][0]["value"]}
            for tag in s["tags"]:
                assert set(tag) == {"key", "type", "value"}
                assert tag["type"] in {"string", "bool", "int64", "float64"}
            child_of = [ref for ref in s["references"] if ref["refType"] == "CHILD_OF"]
            follows = [ref for ref in s["references"] if ref["refType"] == "FOLLOWS_FROM"]
            assert {ref["refType"] for ref in s["references"]} <= {"CHILD_OF", "FOLLOWS_FROM"}
            if r.parent_span_id:
                assert child_of == [{"refType": "CHILD_OF", "traceID": r.trace_id, "spanID": r.parent_span_id}]
                assert r.parent_span_id in ids_in_trace
            else:
                assert child_of == []
            assert [(ref["traceID"], ref["spanID"]) for ref in follows] == [
                (ln["trace_id"], ln["span_id"]) for ln in r.links]
    assert set(all_spans) == set(row_by_id)

    # the chat span that consumed the tool return FOLLOWS_FROM the tool span
    tr = g.of_type(ArtifactType.TOOL_RETURN)[0]
    consumer = next(a for a in g.of_type(ArtifactType.MODEL_TURN) if tr.id in a.parents)
    chat = all_spans[by_artifact(rows, consumer.id).span_id]
    tool_span_id = by_artifact(rows, tr.id).span_id
    assert any(ref["refType"] == "FOLLOWS_FROM" and ref["spanID"] == tool_span_id for ref in chat["references"])
    tags = {t["key"]: t for t in chat["tags"]}
    assert tags["unsee.artifact.id"]["value"] == consumer.id
    # provenance edges are readable from tags too (Jaeger's graph does not draw links)
    added = "unsee.context.full" if consumer.context is None else "unsee.context.added"
    assert json.loads(tags[added]["value"]) == list(consumer.parents)
    assert tags["gen_ai.operation.name"] == {"key": "gen_ai.operation.name", "type": "string", "value": "chat"}
    assert tags["unsee.turn"]["type"] == "int64"
    assert tags["unsee.artifact.committed"]["type"] == "bool"
    assert tags["span.kind"]["value"] == "internal"

    text = path.read_text()
    for payload in PAYLOADS:
        assert payload not in text


def test_jaeger_json_overwrites_atomically(recorded, tmp_path):
    u = recorded["u"]
    path = tmp_path / "t.json"
    path.write_text("old")
    u.export_jaeger_json(SESSION, path)
    json.loads(path.read_text())
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temp files left behind


def test_jaeger_json_missing_directory_is_invalid_argument(recorded, tmp_path):
    with pytest.raises(InvalidArgument):
        recorded["u"].export_jaeger_json(SESSION, tmp_path / "no" / "such" / "dir" / "t.json")


# -- (c) errors --------------------------------------------------------------------
def test_unreachable_endpoint_is_export_error(recorded):
    port = free_port()  # nothing listens here
    with pytest.raises(ExportError) as ei:
        recorded["u"].export_otlp(SESSION, f"http://127.0.0.1:{port}", timeout=2)
    assert isinstance(ei.value, RuntimeError)
    assert isinstance(ei.value, EndpointUnreachable) and isinstance(ei.value, ConnectionError)


@pytest.mark.skipif(os.environ.get("UNSEE_TEST_STORE") == "postgres",
                    reason="the CLI finds the home by unsee's SQLite files (make test's first pass runs it)")
@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_unreachable_endpoint_fails_fast_in_one_line_from_the_cli(recorded, capsys, scheme):
    """No receiver: the reachability check answers at once (the exporters would retry for
    their whole timeout, printing a warning per retry); one line on stderr, exit 3."""
    endpoint = f"{scheme}://127.0.0.1:{free_port()}"
    code, out, err = run(capsys, "--home", recorded["home"], "export", SESSION, "--otlp-endpoint", endpoint)
    assert_one_line_error(err)
    assert endpoint in err and "unreachable" in err and "opentelemetry" not in err.lower()
    assert EndpointUnreachable.exit_code == 3 == code


@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_a_receiver_that_never_answers_is_export_error_without_sdk_logs(recorded, caplog, scheme):
    """TCP connects (the check passes), the receiver never answers: ExportError after ``timeout``,
    and the exporters' retry warnings are kept from the root logger (they go to DEBUG on ours)."""
    sdk = logging.getLogger(export_mod.SDK_LOGGER)
    with socket.socket() as silent:  # listening, never accepting: the kernel completes the handshake
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        endpoint = f"{scheme}://127.0.0.1:{silent.getsockname()[1]}"
        with caplog.at_level(logging.DEBUG), pytest.raises(ExportError) as ei:
            recorded["u"].export_otlp(SESSION, endpoint, timeout=1)
    assert not isinstance(ei.value, EndpointUnreachable) and endpoint in str(ei.value)
    leaked = [r for r in caplog.records if r.name.startswith("opentelemetry") and r.levelno >= logging.WARNING]
    assert not leaked, [r.getMessage() for r in leaked]
    assert sdk.propagate and not any(isinstance(h, export_mod._Held) for h in sdk.handlers)  # restored


@pytest.mark.parametrize("url", ["not a url", "localhost:4318", "ftp://example.com/x", "http://", ""])
def test_bad_url_is_invalid_argument(recorded, url):
    with pytest.raises(InvalidArgument):
        recorded["u"].export_otlp(SESSION, url, timeout=1)


def test_unknown_protocol_is_invalid_argument(recorded):
    with pytest.raises(InvalidArgument):
        recorded["u"].export_otlp(SESSION, "http://127.0.0.1:4318", protocol="carrier-pigeon", timeout=1)


def test_unknown_session_is_session_not_found(recorded, tmp_path):
    u = recorded["u"]
    with pytest.raises(SessionNotFound):
        u.export_otlp("no-such-session", "http://127.0.0.1:4318", timeout=1)
    with pytest.raises(SessionNotFound):
        u.export_jaeger_json("no-such-session", tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()
    assert issubclass(SessionNotFound, LookupError)


@pytest.mark.parametrize("scheme", ["grpc", "http-on-4317"])
def test_grpc_endpoint_through_facade_sends_over_grpc(recorded, grpc_receiver, scheme):
    """``grpc://`` (and port 4317 with no protocol) goes over gRPC: a gRPC-only receiver gets every span."""
    if scheme == "grpc":
        receiver = grpc_receiver(0)
        endpoint = f"grpc://127.0.0.1:{receiver.port}"
    else:
        try:
            receiver = grpc_receiver(4317)
        except pytest.fail.Exception:
            pytest.skip("port 4317 is taken here")
        endpoint = "http://127.0.0.1:4317"
    sent = recorded["u"].export_otlp(SESSION, endpoint, timeout=10)
    assert sent == len(recorded["rows"]) and receiver.spans == sent
