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

from import_graph import GRAPH, cycles

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


def test_no_import_circles():
    found = cycles()
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_checker_sees_a_circle_and_an_upward_import():
    """The checks above would fail on a circle / an upward import (they are not vacuous)."""
    assert "unsee.middleware.records" in GRAPH["unsee.middleware.graph"]
    assert _layer("unsee.plugins.ifc.policy") == "plugins" and _plugin("unsee.plugins.ifc.policy") == "ifc"
    assert "middleware" not in ALLOWED["sandbox"] and "plugins" not in ALLOWED["middleware"]


def test_the_cli_and_the_facade_start_without_langchain():
    """``unsee --help``, ``sessions`` and ``graph`` need no agent framework: importing the CLI, the
    facade and opening a home must not import langchain or langgraph (their import is most of a
    second; benchmarks/bench_cli.py times the commands)."""
    import subprocess
    import sys

    code = ("import sys, tempfile, unsee.cli, unsee.core; unsee.core.Unsee(home=tempfile.mkdtemp()).close(); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'langchain', 'langchain_core', 'langgraph'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
