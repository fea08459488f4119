"""Layering of ``unsee.sandbox`` (DESIGN §3): its modules import each other without
circles, lazy (in-function) imports and the registry's built-in table included;
it imports nothing else of unsee; and importing it loads neither pytest nor the
docker SDK nor any backend."""

from __future__ import annotations

import ast
import graphlib
import json
import subprocess
import sys
from pathlib import Path

import unsee.sandbox
from unsee.sandbox.registry import BUILTIN_BACKENDS

PKG = "unsee.sandbox"
SRC = Path(unsee.sandbox.__file__).parent
MODULES = {p.stem for p in SRC.glob("*.py")}


def _target(module: str | None, names: list[str]) -> set[str]:
    """In-package modules an import of ``names`` from ``module`` (relative to the package) loads."""
    if module:
        return {module.split(".")[0]}
    return {n if n in MODULES else "__init__" for n in names}


def import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """module -> in-package modules it imports (anywhere in it); module -> other unsee modules."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    foreign: dict[str, set[str]] = {m: set() for m in MODULES}
    for mod in MODULES:
        tree = ast.parse((SRC / f"{mod}.py").read_text(), filename=f"{mod}.py")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = [a.name for a in node.names]
                if node.level == 1:
                    graph[mod] |= _target(node.module, names)
                elif node.level == 0 and node.module and node.module.split(".")[0] == "unsee":
                    if node.module == PKG or node.module.startswith(PKG + "."):
                        graph[mod] |= _target(node.module[len(PKG) + 1:] or None, names)
                    else:
                        foreign[mod].add(node.module)
                elif node.level > 1:
                    foreign[mod].add("." * node.level + (node.module or ""))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(PKG + "."):
                        graph[mod] |= _target(alias.name[len(PKG) + 1:], [])
                    elif alias.name.split(".")[0] == "unsee":
                        foreign[mod].add(alias.name)
    # the registry imports its built-in backends by name, on first use
    for builtin in BUILTIN_BACKENDS.values():
        for ref in filter(None, (builtin.target, builtin.check)):
            graph["registry"].add(ref.partition(":")[0])
    for mod in graph:
        graph[mod].discard(mod)
    return graph, foreign


def test_sandbox_import_graph_is_a_dag():
    graph, _ = import_graph()
    assert set().union(*graph.values()) <= MODULES, "an import names a module that does not exist"
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle in unsee.sandbox: {' -> '.join(exc.args[1])}") from None
    assert set(order) == MODULES


def test_backends_and_helpers_point_one_way():
    graph, _ = import_graph()
    for backend in ("local", "pyobject", "docker_env", "docker_api", "image"):
        assert "registry" not in graph[backend], f"{backend} imports the registry"
    assert "docker_env" not in graph["image"] and "docker_env" not in graph["docker_api"]
    assert {"docker_api", "image"} <= graph["docker_env"] and "docker_api" in graph["image"]
    assert "testing" not in graph["__init__"]


def test_sandbox_stands_alone():
    _, foreign = import_graph()
    assert {m: sorted(f) for m, f in foreign.items() if f} == {}


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
