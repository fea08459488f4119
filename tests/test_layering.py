"""The layering of docs/architecture.md, checked on the source.

Imports point down only: facade (``unsee/``) -> plugins -> middleware;
``sandbox`` stands alone. A plugin uses another plugin only through its
package face (``unsee.plugins.<name>``, its ``__init__``), never its internal
modules. And there is no import circle between modules, counting imports
inside functions too (a lazy import hides a circle from Python, not from a
reader).

The graph is read with ``ast`` from the files (nothing is imported), so the
test also covers modules that need optional extras.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: top-level folder -> the package it installs as (pyproject's package-dir)
FOLDERS = {"unsee": "unsee", "middleware": "unsee.middleware", "plugins": "unsee.plugins",
           "sandbox": "unsee.sandbox"}


def _modules() -> dict[str, Path]:
    mods = {}
    for folder, pkg in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            mods[".".join([pkg, *parts])] = path
    return mods


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _resolve(name: str) -> str | None:
    """The module of ours an import names (``a.b.c`` may be a name inside ``a.b``)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(name: str) -> set[str]:
    path = MODULES[name]
    tree = ast.parse(path.read_text(), str(path))
    package = name if _is_package(name) else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" for a in node.names] + [mod]
        for t in targets:
            r = _resolve(t)
            if r is not None and r != name:
                found.add(r)
    return found


GRAPH = {m: imports_of(m) for m in MODULES}


def _layer(name: str) -> str:
    parts = name.split(".")
    if parts[1:2] == ["plugins"]:
        return "plugins"
    if parts[1:2] in (["middleware"], ["sandbox"]):
        return parts[1]
    return "facade"


def _plugin(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if parts[1:2] == ["plugins"] and len(parts) > 2 else None


ALLOWED = {
    "sandbox": {"sandbox"},
    "middleware": {"middleware"},
    "plugins": {"plugins", "middleware", "sandbox"},
    "facade": {"facade", "plugins", "middleware", "sandbox"},
}


def test_imports_point_down():
    bad = sorted(f"{m} -> {t}" for m, ts in GRAPH.items() for t in ts if _layer(t) not in ALLOWED[_layer(m)])
    assert not bad, "imports from a lower layer to a higher one:\n" + "\n".join(bad)


def test_plugins_use_each_other_only_through_their_package_face():
    bad = []
    for m, ts in GRAPH.items():
        mine = _plugin(m)
        for t in ts:
            other = _plugin(t)
            if mine and other and other != mine and t != f"unsee.plugins.{other}":
                bad.append(f"{m} -> {t}")
    assert not bad, "a plugin reaching into another plugin's internals:\n" + "\n".join(sorted(bad))


def _cycles() -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            # a package's __init__ re-exporting its modules is its face, not a circle
            if _is_package(w) and v.startswith(w + "."):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    cycles = _cycles()
    assert not cycles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_checker_sees_a_circle_and_an_upward_import():
    """The checks above would fail on a circle / an upward import (they are not vacuous)."""
    assert "unsee.middleware.records" in GRAPH["unsee.middleware.graph"]
    assert _layer("unsee.plugins.ifc.policy") == "plugins" and _plugin("unsee.plugins.ifc.policy") == "ifc"
    assert "middleware" not in ALLOWED["sandbox"] and "plugins" not in ALLOWED["middleware"]
