"""Exporting a recorded session: OTLP to any receiver, or Jaeger's upload JSON.

Stored span rows are turned back into SDK ``ReadableSpan`` objects and handed
to the standard OTLP exporters, so what a receiver gets is what was recorded
(ids, parents, links, attributes, events). ``jaeger_json`` writes the format
Jaeger UI's "upload trace" accepts: links become FOLLOWS_FROM references.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from .errors import EndpointUnreachable, ExportError, InvalidArgument
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


#: seconds the reachability check waits for a TCP connection to the receiver before exporting:
#: the OTLP exporters retry an unreachable receiver with backoff for their whole ``timeout``
CONNECT_TIMEOUT = 1.5
#: the parent logger of the OTLP exporters (their retry warnings and final error)
SDK_LOGGER = "opentelemetry.exporter.otlp"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OtlpTarget:
    """Where an OTLP export goes, parsed from its URL (pure: no I/O)."""

    endpoint: str
    protocol: str  # "grpc" or "http"
    host: str
    port: int
    url: str  # what the exporter is given: host:port for gRPC, the /v1/traces URL for HTTP
    secure: bool

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def otlp_target(endpoint: str, protocol: str | None = None) -> OtlpTarget:
    """Parse an OTLP endpoint URL; ``InvalidArgument`` for one that is not (or a bad protocol).

    No protocol: gRPC for ``grpc://`` or port 4317, else HTTP. A URL without a port gets the
    OTLP default of its protocol (gRPC 4317; HTTP 80, HTTPS 443)."""
    parsed = urlparse(endpoint)
    try:
        port = parsed.port
    except ValueError:  # a port that is not a number, or out of range
        port = -1
    if parsed.scheme not in ("http", "https", "grpc") or not parsed.hostname or port == -1:
        raise InvalidArgument(f"not an OTLP endpoint URL: {endpoint!r} (e.g. http://localhost:4318)")
    if protocol is None:
        protocol = "grpc" if parsed.scheme == "grpc" or port == 4317 else "http"
    secure = parsed.scheme == "https"
    host = parsed.hostname
    if protocol == "grpc":
        port = port or 4317
        bracketed = f"[{host}]" if ":" in host else host
        return OtlpTarget(endpoint, "grpc", host, port, f"{bracketed}:{port}", secure)
    if protocol == "http":
        port = port or (443 if secure else 80)
        url = endpoint if parsed.path.rstrip("/").endswith("/v1/traces") else endpoint.rstrip("/") + "/v1/traces"
        return OtlpTarget(endpoint, "http", host, port, url, secure)
    raise InvalidArgument(f"unknown OTLP protocol {protocol!r}: use http or grpc")


def _proxy_for(target: OtlpTarget) -> tuple[str, int] | None:
    """The environment proxy the exporter would connect through instead (host, port), or None.

    requests (HTTP) reads ``http(s)_proxy``; gRPC reads ``grpc_proxy``, then ``https_proxy``/``http_proxy``;
    both honour ``no_proxy``."""
    proxies = urllib.request.getproxies_environment()
    if not proxies or urllib.request.proxy_bypass_environment(target.host, proxies):
        return None
    if target.protocol == "grpc":
        proxy = proxies.get("grpc") or proxies.get("https") or proxies.get("http")
    else:
        proxy = proxies.get("https" if target.secure else "http")
    if not proxy:
        return None
    parsed = urlparse(proxy if "://" in proxy else f"http://{proxy}")
    try:
        return (parsed.hostname, parsed.port or 80) if parsed.hostname else None
    except ValueError:
        return None  # a garbled proxy setting: the exporter's own error will say so


def check_reachable(target: OtlpTarget, timeout: float = CONNECT_TIMEOUT) -> None:
    """Open (and close) one TCP connection to the receiver (or to the proxy the exporter would
    use); ``EndpointUnreachable`` naming the endpoint if none is made within ``timeout`` seconds.

    Only reachability: a receiver that accepts the connection and then refuses the spans is the
    export's own failure (``ExportError``)."""
    proxy = _proxy_for(target)
    host, port = proxy or (target.host, target.port)
    address = f"{host}:{port}" + (", the proxy from the environment," if proxy else "")
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except socket.gaierror as exc:
        raise EndpointUnreachable(target.endpoint, address, f"unknown host ({exc.strerror or exc})") from exc
    except (socket.timeout, TimeoutError) as exc:
        raise EndpointUnreachable(target.endpoint, address, f"no answer within {timeout:g} s") from exc
    except ConnectionRefusedError as exc:
        raise EndpointUnreachable(target.endpoint, address, "connection refused") from exc
    except OSError as exc:
        raise EndpointUnreachable(target.endpoint, address, exc.strerror or str(exc) or type(exc).__name__) from exc


class _Held(logging.Handler):
    """Keeps the records the OTLP exporters log during an export (replayed at DEBUG on failure)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


_quiet_lock = threading.Lock()
_quiet_depth = 0
_saved_propagate = True


@contextmanager
def quiet_sdk_logs() -> Iterator[_Held]:
    """Keep the OTLP exporters' log records (a warning per retry, then an error) out of the
    user's terminal for the duration only: they go to a handler of ours instead of propagating
    to the root logger (or to logging's last-resort stderr handler); the logger's setting is
    restored after. Concurrent exports share one diversion (the last one out restores it)."""
    global _quiet_depth, _saved_propagate
    sdk = logging.getLogger(SDK_LOGGER)
    held = _Held()
    with _quiet_lock:
        if _quiet_depth == 0:
            _saved_propagate, sdk.propagate = sdk.propagate, False
        _quiet_depth += 1
        sdk.addHandler(held)
    try:
        yield held
    finally:
        with _quiet_lock:
            sdk.removeHandler(held)
            _quiet_depth -= 1
            if _quiet_depth == 0:
                sdk.propagate = _saved_propagate


def _exporter(target: OtlpTarget, timeout: float):
    if target.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=target.url, insecure=not target.secure, timeout=timeout)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=target.url, timeout=timeout)


def export_otlp(rows: list[SpanRow], endpoint: str, *, protocol: str | None = None, timeout: float = 10.0,
                connect_timeout: float = CONNECT_TIMEOUT) -> int:
    """Send the spans to an OTLP receiver; returns how many were sent.

    ``InvalidArgument`` for a bad URL or protocol; ``EndpointUnreachable`` (an ``ExportError``)
    when no TCP connection to the receiver is made within ``connect_timeout`` seconds (checked
    first: nothing is sent); ``ExportError`` when the receiver does not take the spans within
    ``timeout``. The exporter's own retry logging never reaches the terminal (it is logged at
    DEBUG on ``unsee.middleware.export`` when the export fails)."""
    target = otlp_target(endpoint, protocol)
    check_reachable(target, min(connect_timeout, timeout))
    with quiet_sdk_logs() as held:
        exporter = _exporter(target, timeout)
        try:
            result = exporter.export(readable_spans(rows))
        except Exception as exc:
            result = exc
        finally:
            exporter.shutdown()
    if result is SpanExportResult.SUCCESS:
        return len(rows)
    for record in held.records:
        log.debug("OTLP exporter (%s): %s", record.name, record.getMessage())
    if isinstance(result, Exception):
        raise ExportError(f"OTLP export to {endpoint} failed: {result}") from result
    raise ExportError(f"OTLP export to {endpoint} failed: the receiver at {target.address} did not take "
                      f"the spans (it refused them, or gave no answer within {timeout:g} s)")


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
