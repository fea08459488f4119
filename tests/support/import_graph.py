"""The import graph of the unsee package, read with ``ast`` from the files (nothing is
imported, so modules that need optional extras count too). Imports inside functions
count, and so do the sandbox registry's built-in backends (imported by name on first use).
Used by tests/test_layering.py and tests/sandbox/test_sandbox_layering.py."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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


@functools.cache
def tree_of(name: str) -> ast.Module:
    """The parsed source of one of our modules."""
    path = MODULES[name]
    return ast.parse(path.read_text(), str(path))


def imports_of(name: str) -> set[str]:
    return imports_in(name, tree_of(name), package=_is_package(name))


def imports_in(name: str, tree: ast.AST, *, package: bool = False) -> set[str]:
    """The modules of ours that ``tree`` (the source of module ``name``; ``package``: its
    ``__init__``) imports, anywhere in it. ``from a.b import c`` counts as ``a.b.c`` when that is a
    module of ours, else as ``a.b`` (or the nearest module above it)."""
    package = name if package else name.rpartition(".")[0]
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


def _registry_table() -> set[str]:
    """The modules the sandbox registry's ``BUILTIN_BACKENDS`` table names ("module:attr" strings)."""
    from unsee.sandbox.registry import BUILTIN_BACKENDS

    refs = {r.partition(":")[0] for b in BUILTIN_BACKENDS.values() for r in (b.target, b.check) if r}
    return {m for m in (_resolve(f"unsee.sandbox.{r}") for r in refs) if m}


GRAPH = {m: imports_of(m) for m in MODULES}
GRAPH["unsee.sandbox.registry"] |= _registry_table()


def cycles() -> list[list[str]]:
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


