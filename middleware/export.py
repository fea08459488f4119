"""Exporting a recorded session: OTLP to any receiver, or Jaeger's upload JSON.

Stored span rows are turned back into SDK ``ReadableSpan`` objects and handed
to the standard OTLP exporters, so what a receiver gets is what was recorded
(ids, parents, links, attributes, events). ``jaeger_json`` writes the format
Jaeger UI's "upload trace" accepts: links become FOLLOWS_FROM references.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from .errors import ExportError, InvalidArgument
from .store import SpanRow


def _ctx(trace_id: str, span_id: str) -> SpanContext:
    return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=False,
                       trace_flags=TraceFlags(TraceFlags.SAMPLED))


def _attrs(d: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}


def readable_spans(rows: list[SpanRow]) -> list[ReadableSpan]:
    out = []
    for r in rows:
        parent = _ctx(r.trace_id, r.parent_span_id) if r.parent_span_id else None
        out.append(
            ReadableSpan(
                name=r.name,
                context=_ctx(r.trace_id, r.span_id),
                parent=parent,
                resource=Resource(_attrs(r.resource)),
                attributes=_attrs(r.attributes),
                events=[Event(e["name"], _attrs(e["attributes"]), e["timestamp"]) for e in r.events],
                links=[Link(_ctx(l["trace_id"], l["span_id"]), _attrs(l["attributes"])) for l in r.links],
                kind=SpanKind[r.kind],
                status=Status(StatusCode[r.status_code], r.status_description),
                start_time=r.start_ns,
                end_time=r.end_ns,
                instrumentation_scope=InstrumentationScope(r.scope or "unsee"),
            )
        )
    return out


def _exporter(endpoint: str, protocol: str | None, timeout: float):
    parsed = urlparse(endpoint)
    if parsed.scheme not in ("http", "https", "grpc") or not parsed.netloc:
        raise InvalidArgument(f"not an OTLP endpoint URL: {endpoint!r} (e.g. http://localhost:4318)")
    if protocol is None:
        protocol = "grpc" if parsed.scheme == "grpc" or parsed.port == 4317 else "http"
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        target = parsed.netloc
        return OTLPSpanExporter(endpoint=target, insecure=parsed.scheme != "https", timeout=timeout)
    if protocol == "http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        url = endpoint if parsed.path.rstrip("/").endswith("/v1/traces") else endpoint.rstrip("/") + "/v1/traces"
        return OTLPSpanExporter(endpoint=url, timeout=timeout)
    raise InvalidArgument(f"unknown OTLP protocol {protocol!r}: use http or grpc")


def export_otlp(rows: list[SpanRow], endpoint: str, *, protocol: str | None = None, timeout: float = 10.0) -> int:
    """Send the spans to an OTLP receiver; returns how many were sent."""
    exporter = _exporter(endpoint, protocol, timeout)
    try:
        result = exporter.export(readable_spans(rows))
    except Exception as exc:
        raise ExportError(f"OTLP export to {endpoint} failed: {exc}") from exc
    finally:
        exporter.shutdown()
    if result is not SpanExportResult.SUCCESS:
        raise ExportError(f"OTLP export to {endpoint} failed (receiver unreachable or refused)")
    return len(rows)


def _tag(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "type": "bool", "value": value}
    if isinstance(value, int):
        return {"key": key, "type": "int64", "value": value}
    if isinstance(value, float):
        return {"key": key, "type": "float64", "value": value}
    if isinstance(value, (list, tuple)):
        return {"key": key, "type": "string", "value": json.dumps(list(value))}
    return {"key": key, "type": "string", "value": str(value)}


def jaeger_json(rows: list[SpanRow]) -> dict[str, Any]:
    """Jaeger's query-API JSON (``{"data": [trace, ...]}``), one trace per trace id."""
    traces: dict[str, dict[str, Any]] = {}
    processes: dict[str, dict[str, str]] = {}
    for r in rows:
        service = str(r.resource.get("service.name", "unsee"))
        proc_key = json.dumps(r.resource, sort_keys=True)
        t = traces.setdefault(r.trace_id, {"traceID": r.trace_id, "spans": [], "processes": {}, "warnings": None})
        pid = processes.setdefault(r.trace_id, {}).get(proc_key)
        if pid is None:
            pid = f"p{len(processes[r.trace_id]) + 1}"
            processes[r.trace_id][proc_key] = pid
            t["processes"][pid] = {
                "serviceName": service,
                "tags": [_tag(k, v) for k, v in r.resource.items() if k != "service.name"],
            }
        refs = []
        if r.parent_span_id:
            refs.append({"refType": "CHILD_OF", "traceID": r.trace_id, "spanID": r.parent_span_id})
        for link in r.links:
            refs.append({"refType": "FOLLOWS_FROM", "traceID": link["trace_id"], "spanID": link["span_id"]})
        tags = [_tag(k, v) for k, v in r.attributes.items()]
        tags.append(_tag("span.kind", r.kind.lower()))
        tags.append(_tag("otel.status_code", r.status_code))
        if r.status_code == "ERROR":
            tags.append(_tag("error", True))
        t["spans"].append({
            "traceID": r.trace_id,
            "spanID": r.span_id,
            "operationName": r.name,
            "references": refs,
            "startTime": r.start_ns // 1000,
            "duration": max(0, (r.end_ns - r.start_ns) // 1000),
            "tags": tags,
            "logs": [
                {"timestamp": e["timestamp"] // 1000,
                 "fields": [_tag("event", e["name"])] + [_tag(k, v) for k, v in e["attributes"].items()]}
                for e in r.events
            ],
            "processID": pid,
            "warnings": None,
            "flags": 1,
        })
    return {"data": list(traces.values()), "total": 0, "limit": 0, "offset": 0, "errors": None}


def write_jaeger_json(rows: list[SpanRow], path: Path) -> int:
    """Write Jaeger upload JSON atomically; returns the number of spans written."""
    data = jaeger_json(rows)
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InvalidArgument(f"directory does not exist: {parent}")
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=".unsee-jaeger-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(rows)
