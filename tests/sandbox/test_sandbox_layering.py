"""Layering of ``unsee.sandbox`` (DESIGN §3): its modules import each other without
circles, lazy (in-function) imports and the registry's built-in table included;
it imports nothing else of unsee; and importing it loads neither pytest nor the
docker SDK nor any backend."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.import_graph import GRAPH, cycles

PKG = "unsee.sandbox"
SANDBOX = {m: {t for t in ts if t != m} for m, ts in GRAPH.items() if m == PKG or m.startswith(PKG + ".")}


def _in(mod: str) -> set[str]:
    """The sandbox modules ``mod`` imports, by short name (``__init__`` for the package)."""
    return {t[len(PKG) + 1:] or "__init__" for t in SANDBOX[f"{PKG}.{mod}" if mod != "__init__" else PKG]
            if t.startswith(PKG)}


def test_sandbox_import_graph_is_a_dag():
    assert not [c for c in cycles() if any(m.startswith(PKG) for m in c)]


def test_backends_and_helpers_point_one_way():
    for backend in ("local", "pyobject", "docker_env", "docker_api", "image"):
        assert "registry" not in _in(backend), f"{backend} imports the registry"
    assert "docker_env" not in _in("image") and "docker_env" not in _in("docker_api")
    assert {"docker_api", "image"} <= _in("docker_env") and "docker_api" in _in("image")
    assert "testing" not in _in("__init__")
    assert {"local", "pyobject", "docker_env"} <= _in("registry")  # the built-in table, by name


def test_sandbox_stands_alone():
    assert {m: sorted(t for t in ts if not t.startswith(PKG)) for m, ts in SANDBOX.items()
            if any(not t.startswith(PKG) for t in ts)} == {}


def test_importing_the_package_loads_no_backend_nor_test_tooling():
    code = (
        "import json, sys\n"
        "import unsee.sandbox\n"
        "from unsee.sandbox import registry\n"
        "print(json.dumps({'modules': sorted(m for m in ('pytest', 'docker', 'unsee.sandbox.testing')"
        " if m in sys.modules), 'loaded_builtins': sorted(set(registry._backends)"
        " & set(registry.BUILTIN_BACKENDS))}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"modules": [], "loaded_builtins": []}
