"""The layering of docs/architecture.md, checked on the source.

Imports point down only: harness (``unsee.eval``) -> facade (``unsee/``) ->
plugins -> middleware; ``sandbox`` stands alone; only the CLI (which mounts
``unsee eval``) imports the harness from below it. A plugin uses another plugin
only through its package face (``unsee.plugins.<name>``, its ``__init__``),
never its internal modules, and so do the facade and the harness. No plugin,
middleware or sandbox function takes the facade (a parameter annotated
``Unsee`` or ``*UnseeLike``, or named ``u``), nor defines a protocol standing
in for it (``*UnseeLike``): what a plugin needs is a small protocol of its own.
Every plugin face follows one convention: a lazy ``_EXPORTS`` table
(``unsee.plugins.lazy_exports``). And there is no import circle between
modules, counting imports inside functions too (a lazy import hides a circle
from Python, not from a reader). The product's text (code, examples,
benchmarks, README.md, docs/) points at nothing a clone lacks: no private
notes or source files, no issue numbers, and an article cited by its title.

The graph and the trees are read with ``ast`` from the files (nothing is
imported), so the test also covers modules that need optional extras. Each
check is a small pure function of (module name, tree or imports); the
``test_the_checker_*`` tests feed them synthetic sources so they are not vacuous.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

from tests.support.import_graph import GRAPH, MODULES, cycles, imports_in, tree_of


def _layer(name: str) -> str:
    parts = name.split(".")
    if parts[1:2] == ["plugins"]:
        return "plugins"
    if parts[1:2] in (["middleware"], ["sandbox"]):
        return parts[1]
    if parts[1:2] == ["eval"]:
        return "harness"
    return "facade"


def _plugin(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if parts[1:2] == ["plugins"] and len(parts) > 2 else None


ALLOWED = {
    "sandbox": {"sandbox"},
    "middleware": {"middleware"},
    "plugins": {"plugins", "middleware", "sandbox"},
    "facade": {"facade", "plugins", "middleware", "sandbox"},
    "harness": {"harness", "facade", "plugins", "middleware", "sandbox"},
}
#: the modules below the harness that may import it: the CLI mounts ``unsee eval`` / ``unsee bench``
HARNESS_USERS = frozenset({"unsee.cli"})


def _source(text: str) -> ast.Module:
    return ast.parse(textwrap.dedent(text))


# -- imports point down -------------------------------------------------------------------------


def upward_imports(name: str, targets: set[str]) -> list[str]:
    """``name -> target`` for each import of ``name`` that points to a layer above it."""
    return sorted(f"{name} -> {t}" for t in targets
                  if _layer(t) not in ALLOWED[_layer(name)]
                  and not (_layer(t) == "harness" and name in HARNESS_USERS))


def test_imports_point_down():
    bad = [b for m, ts in GRAPH.items() for b in upward_imports(m, {t for t in ts if _layer(t) != "harness"})]
    assert not bad, "imports from a lower layer to a higher one:\n" + "\n".join(sorted(bad))


def test_the_harness_is_imported_only_by_itself_and_the_cli():
    bad = [b for m, ts in GRAPH.items() for b in upward_imports(m, {t for t in ts if _layer(t) == "harness"})]
    assert not bad, "imports of the evaluation harness (unsee.eval) from below it:\n" + "\n".join(sorted(bad))


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


# -- the facade and the harness use the plugins through their faces ----------------------------


def submodule_imports(name: str, targets: set[str]) -> list[str]:
    """For a module of the facade or the harness: its imports of a plugin's internal module
    (``unsee.plugins.<name>.<module>``) instead of the plugin's face (``unsee.plugins.<name>``)."""
    if _layer(name) not in ("facade", "harness"):
        return []
    return sorted(f"{name} -> {t}" for t in targets if t.startswith("unsee.plugins.") and t.count(".") > 2)


def test_the_facade_and_the_harness_use_plugins_only_through_their_faces():
    bad = [b for m, ts in GRAPH.items() for b in submodule_imports(m, ts)]
    assert not bad, ("a facade or harness module importing a plugin's internal module (import the name "
                     "from the face, unsee.plugins.<name>; add it to the face's _EXPORTS if missing):\n"
                     + "\n".join(sorted(bad)))


# -- no plugin takes the facade ---------------------------------------------------------------

BELOW_THE_FACADE = ("plugins", "middleware", "sandbox")


def _is_facade_name(name: str) -> bool:
    """The facade class (exactly ``Unsee``: not ``UnseeMiddleware``, ``UnseeError``) or a stand-in
    for it (``...UnseeLike``)."""
    return name == "Unsee" or name.endswith("UnseeLike")


def _names_facade(annotation: ast.AST | None) -> bool:
    """Whether an annotation mentions the facade: ``Unsee``, ``"Unsee"``, ``core.Unsee``,
    ``Unsee | None``, ``Optional["UnseeLike"]``, ..."""
    for node in ast.walk(annotation) if annotation is not None else ():
        if isinstance(node, ast.Name) and _is_facade_name(node.id):
            return True
        if isinstance(node, ast.Attribute) and _is_facade_name(node.attr):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                if _names_facade(ast.parse(node.value.strip(), mode="eval")):
                    return True
            except SyntaxError:
                if any(_is_facade_name(w) for w in re.findall(r"\w+", node.value)):
                    return True
    return False


def facade_parameters(name: str, tree: ast.AST) -> list[str]:
    """For a module of plugins/, middleware/ or sandbox/: each function parameter that takes the
    facade (annotated ``Unsee`` / ``*UnseeLike``, or named ``u`` whatever its annotation) and each
    class standing in for it (named ``*UnseeLike``)."""
    if _layer(name) not in BELOW_THE_FACADE:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name.endswith("UnseeLike"):
            found.append((node.lineno, f"{name}:{node.lineno} class {node.name} (a stand-in for the facade)"))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, a.vararg, *a.kwonlyargs, a.kwarg]:
                if arg is None:
                    continue
                if arg.arg == "u":
                    found.append((arg.lineno, f"{name}:{arg.lineno} {node.name}(u) (a parameter named u)"))
                elif _names_facade(arg.annotation):
                    found.append((arg.lineno, f"{name}:{arg.lineno} {node.name}({arg.arg}: "
                                              f"{ast.unparse(arg.annotation)})"))
    return [text for _, text in sorted(found)]


def test_no_plugin_takes_the_facade():
    bad = [b for m in sorted(MODULES) for b in facade_parameters(m, tree_of(m))]
    assert not bad, ("the facade (or a stand-in for it) taken below the facade; state what is needed as a "
                     "small Protocol next to the plugin (see plugins/forget/ports.py):\n" + "\n".join(bad))


# -- one convention for every plugin face -----------------------------------------------------

#: the one face convention (plugins/erasure/__init__.py): docstring, ``from __future__``, the
#: ``lazy_exports`` import, ``_EXPORTS = {name: module}``, ``__all__ = sorted(_EXPORTS)``,
#: ``__getattr__ = lazy_exports(__name__, _EXPORTS)`` and possibly an ``if TYPE_CHECKING:`` block
FACE_STATEMENTS = {
    "__future__": "from __future__ import annotations",
    "lazy_exports": "from unsee.plugins import lazy_exports",
    "TYPE_CHECKING": "from typing import TYPE_CHECKING",
    "_EXPORTS": "_EXPORTS = {name: module}",
    "__all__": "__all__ = sorted(_EXPORTS)",
    "__getattr__": "__getattr__ = lazy_exports(__name__, _EXPORTS)",
}
_FACE_FORMS = {ast.dump(ast.parse(src).body[0]): key for key, src in FACE_STATEMENTS.items() if key != "_EXPORTS"}


def _plugin_faces() -> list[str]:
    return sorted(m for m in MODULES if m.count(".") == 2 and _plugin(m) and MODULES[m].name == "__init__.py")


def _exports_table(stmt: ast.stmt) -> dict[str, str] | None:
    """The table of ``_EXPORTS = {"Name": ".module", ...}`` (str keys and values only), else None."""
    if isinstance(stmt, ast.Assign) and [ast.unparse(t) for t in stmt.targets] == ["_EXPORTS"]:
        value = stmt.value
    elif isinstance(stmt, ast.AnnAssign) and ast.unparse(stmt.target) == "_EXPORTS" and stmt.value is not None:
        value = stmt.value
    else:
        return None
    if not isinstance(value, ast.Dict) or not all(
            isinstance(x, ast.Constant) and isinstance(x.value, str) for x in [*value.keys, *value.values]):
        return None  # a ``**spread`` has a None key; a computed table cannot be read here
    return {k.value: v.value for k, v in zip(value.keys, value.values)}


def face_problems(name: str, tree: ast.Module) -> list[str]:
    """What in plugin face ``name`` departs from the one convention (``FACE_STATEMENTS``)."""
    body, problems, seen = list(tree.body), [], []
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    else:
        problems.append(f"{name}: no docstring")
    for stmt in body:
        key = _FACE_FORMS.get(ast.dump(stmt))
        if key is None and _exports_table(stmt) is not None:
            key = "_EXPORTS"
        if key is None and isinstance(stmt, ast.If) and ast.unparse(stmt.test) == "TYPE_CHECKING" \
                and not stmt.orelse and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in stmt.body):
            key = "if TYPE_CHECKING"
        if key is None:
            problems.append(f"{name}:{stmt.lineno} not part of a lazy face: {ast.unparse(stmt).splitlines()[0][:100]}")
        else:
            seen.append(key)
    for key in ("lazy_exports", "_EXPORTS", "__all__", "__getattr__"):
        if seen.count(key) != 1:
            problems.append(f"{name}: needs exactly one {FACE_STATEMENTS[key]!r} (found {seen.count(key)})")
    return problems


def _binds(tree: ast.Module, attr: str) -> bool:
    """Whether a module binds ``attr`` at its top level (def, class, assignment, import; also inside
    a top-level ``if``/``try``), or lists it in a lazy ``_EXPORTS`` table of its own."""
    stack = list(tree.body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name == attr:
            return True
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name.partition(".")[0]) == attr for a in stmt.names):
            return True
        targets = (stmt.targets if isinstance(stmt, ast.Assign)
                   else [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else [])
        if any(isinstance(n, ast.Name) and n.id == attr for t in targets for n in ast.walk(t)):
            return True
        if (table := _exports_table(stmt)) is not None and attr in table:
            return True
        if isinstance(stmt, (ast.If, ast.Try)):
            stack += [*stmt.body, *stmt.orelse, *getattr(stmt, "finalbody", []),
                      *(s for h in getattr(stmt, "handlers", []) for s in h.body)]
    return False


def export_problems(name: str, tree: ast.Module) -> list[str]:
    """Each ``_EXPORTS`` entry of face ``name`` whose module is not one of ours or does not bind the name."""
    problems = []
    for stmt in tree.body:
        for attr, module in (_exports_table(stmt) or {}).items():
            target = f"{name}{module}" if module.startswith(".") and not module.startswith("..") else module
            if target not in MODULES:
                problems.append(f"{name}: _EXPORTS[{attr!r}] = {module!r}: no module {target}")
            elif not _binds(tree_of(target), attr):
                problems.append(f"{name}: _EXPORTS[{attr!r}] = {module!r}: {target} has no {attr}")
    return problems


def test_every_plugin_face_is_a_lazy_exports_table():
    faces = _plugin_faces()
    assert {"unsee.plugins.detect", "unsee.plugins.erasure", "unsee.plugins.ifc"} <= set(faces)
    bad = [b for m in faces for b in face_problems(m, tree_of(m)) + export_problems(m, tree_of(m))]
    assert not bad, ("a plugin face departing from the one convention (plugins/erasure/__init__.py: "
                     "_EXPORTS + lazy_exports):\n" + "\n".join(bad))


def _tables() -> dict[str, dict[str, str]]:
    """Every lazy face's table: the plugin faces and the package's own (``unsee``)."""
    return {f: t for f in [*_plugin_faces(), "unsee"] for stmt in tree_of(f).body
            if (t := _exports_table(stmt)) is not None}


def missing_face_names(name: str, tree: ast.AST, tables: dict[str, dict[str, str]], *,
                       package: bool = False) -> list[str]:
    """Each ``from <lazy face> import N`` in ``tree`` (module or file ``name``) where N is neither in
    the face's table nor one of its modules: the import fails when it runs (a lazy face has no other
    names), which an import inside a function only shows on that path."""
    problems = []
    base = name.split(".") if package else name.split(".")[:-1]
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        module = node.module or ""
        if node.level:
            module = ".".join(base[: len(base) - node.level + 1] + ([module] if module else []))
        for alias in node.names if module in tables else ():
            if alias.name != "*" and alias.name not in tables[module] and f"{module}.{alias.name}" not in MODULES:
                problems.append(f"{name}:{node.lineno} from {module} import {alias.name}: not in its _EXPORTS")
    return problems


def test_names_imported_from_a_lazy_face_are_in_its_table():
    from tests.support.import_graph import ROOT

    tables, bad = _tables(), []
    for m in sorted(MODULES):
        bad += missing_face_names(m, tree_of(m), tables, package=MODULES[m].name == "__init__.py")
    for folder in ("tests", "examples", "benchmarks", "scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            bad += missing_face_names(str(path.relative_to(ROOT)), ast.parse(path.read_text(), str(path)), tables)
    assert not bad, "names a lazy face does not export (add them to its _EXPORTS):\n" + "\n".join(bad)


def test_a_face_export_spelled_like_one_of_its_modules_stays_the_export():
    """``unsee.plugins.ifc.extract`` is the function: importing the module ``.extract`` (which binds
    ``package.extract`` to the module) must not hide it, whichever is imported first."""
    import subprocess
    import sys

    clashes = sorted((face, attr) for face in _plugin_faces() for stmt in tree_of(face).body
                     for attr in (_exports_table(stmt) or {}) if f"{face}.{attr}" in MODULES)
    assert ("unsee.plugins.ifc", "extract") in clashes
    code = ("import importlib, sys, types\n"
            f"for face, attr in {clashes!r}:\n"
            "    importlib.import_module(f'{face}.{attr}')\n"
            "    got = getattr(importlib.import_module(face), attr)\n"
            "    exec(f'from {face} import {attr} as again')\n"
            "    if isinstance(got, types.ModuleType) or isinstance(again, types.ModuleType):\n"
            "        print(f'{face}.{attr} is the module, not the export')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "", out


# -- the new checkers are not vacuous -----------------------------------------------------------


def test_the_checker_sees_an_import_of_the_harness_from_below_it():
    assert _layer("unsee.eval") == _layer("unsee.eval.forgetting") == "harness" and _layer("unsee.cli") == "facade"
    assert upward_imports("unsee.core", {"unsee.eval.bench"}) == ["unsee.core -> unsee.eval.bench"]
    assert upward_imports("unsee.plugins.forget.forgetter", {"unsee.eval"}) == [
        "unsee.plugins.forget.forgetter -> unsee.eval"]
    assert upward_imports("unsee.middleware.hooks", {"unsee.eval.metrics"}) != []
    assert upward_imports("unsee.cli", {"unsee.eval.cli", "unsee.eval"}) == []  # the CLI mounts the harness
    assert upward_imports("unsee.eval.forgetting", {"unsee.core", "unsee.plugins.forget", "unsee.eval.metrics",
                                                    "unsee.middleware.graph", "unsee.sandbox"}) == []


def test_the_checker_sees_a_facade_import_of_a_plugin_module():
    demo = _source("""
        from unsee.plugins.model import LocalChatModel          # the face: fine
        from unsee.plugins.model.routing import ToolRouter      # a module of the plugin
        import unsee.plugins.ifc.policy as policy               # a module of the plugin

        def run():
            from unsee.plugins.forget.event import RevocationEvent   # inside a function: counts too
            from unsee.plugins.detect import signals                 # a module, named from the face
    """)
    found = imports_in("unsee.demo", demo)
    assert "unsee.plugins.model" in found
    assert submodule_imports("unsee.demo", found) == [
        "unsee.demo -> unsee.plugins.detect.signals", "unsee.demo -> unsee.plugins.forget.event",
        "unsee.demo -> unsee.plugins.ifc.policy", "unsee.demo -> unsee.plugins.model.routing"]
    assert submodule_imports("unsee.eval.bench", {"unsee.plugins.forget.strategy"}) != []  # the harness too
    face_only = imports_in("unsee.report_view", _source("from unsee.plugins.forget import ForgetReport, Strategy"))
    assert face_only == {"unsee.plugins.forget"} and submodule_imports("unsee.report_view", face_only) == []
    # a plugin's own modules are the business of the plugin-to-plugin check
    assert submodule_imports("unsee.plugins.forget.forgetter", {"unsee.plugins.forget.plan"}) == []


def test_the_checker_sees_a_plugin_taking_the_facade():
    src = _source("""
        from typing import Any, Optional, Protocol

        class UnseeLike(Protocol):                        # a stand-in for the facade
            def forget(self, session: str) -> Any: ...

        class EvalUnseeLike(Protocol): ...                # one too

        def build(u: Any, world: object) -> None: ...    # the facade by its usual name

        def run(x: "Unsee") -> None: ...

        async def serve(x: Optional["unsee.core.Unsee"], *, y: core.Unsee | None = None) -> None: ...

        class Thing:
            def __init__(self, owner: UnseeLike, *rest: int, **kw: Any): ...

        def fine(mw: UnseeMiddleware, err: "UnseeError", ctx: "ForgetContext", unsee: str, uu: int) -> None: ...

        class UnseeMiddleware: ...                         # not the facade
    """)
    found = facade_parameters("unsee.plugins.forget.forgetter", src)
    text = "\n".join(found)
    for expected in ("class UnseeLike", "class EvalUnseeLike", "build(u)", "run(x: 'Unsee')",
                     "serve(x: Optional['unsee.core.Unsee'])", "serve(y: core.Unsee | None)",
                     "__init__(owner: UnseeLike)"):
        assert expected in text, (expected, text)
    assert len(found) == 7, text
    assert "fine" not in text and "UnseeMiddleware" not in text and "UnseeError" not in text
    assert facade_parameters("unsee.middleware.hooks", src) and facade_parameters("unsee.sandbox.local", src)
    assert facade_parameters("unsee.core", src) == [] and facade_parameters("unsee.eval.forgetting", src) == []


def test_the_checker_sees_a_face_departing_from_the_convention():
    lazy = _source('''
        """A plugin."""

        from __future__ import annotations

        from typing import TYPE_CHECKING

        from unsee.plugins import lazy_exports

        if TYPE_CHECKING:
            from .base import Detector

        _EXPORTS = {
            "Detector": ".base",
            "EFFECT_KEY": "unsee.middleware.tools",
        }

        __all__ = sorted(_EXPORTS)

        __getattr__ = lazy_exports(__name__, _EXPORTS)
    ''')
    assert face_problems("unsee.plugins.detect", lazy) == []
    assert export_problems("unsee.plugins.detect", lazy) == []
    eager = _source('''
        """A plugin."""

        from __future__ import annotations

        from .base import Detector

        __all__ = ["Detector"]
    ''')
    problems = "\n".join(face_problems("unsee.plugins.detect", eager))
    assert "from .base import Detector" in problems and "__all__ = ['Detector']" in problems
    assert "needs exactly one 'from unsee.plugins import lazy_exports'" in problems
    computed = _source('''
        """A plugin."""
        from unsee.plugins import lazy_exports
        _EXPORTS = dict.fromkeys(("Policy", "call_id"), "unsee.plugins.model")
        __all__ = sorted(_EXPORTS)
        __getattr__ = lazy_exports(__name__, {**_EXPORTS, "x": ".y"})
        X = 1
    ''')
    problems = "\n".join(face_problems("unsee.plugins.eval", computed))
    assert "dict.fromkeys" in problems and "{**_EXPORTS" in problems and "X = 1" in problems
    wrong = _source('_EXPORTS = {"Detector": ".base", "Nothing": ".base", "Gone": ".no_such_module"}')
    assert export_problems("unsee.plugins.detect", wrong) == [
        "unsee.plugins.detect: _EXPORTS['Nothing'] = '.base': unsee.plugins.detect.base has no Nothing",
        "unsee.plugins.detect: _EXPORTS['Gone'] = '.no_such_module': no module unsee.plugins.detect.no_such_module"]
    tables = {"unsee.plugins.detect": {"Detector": ".base"}}
    uses = _source("""
        from unsee.plugins.detect import Detector, base     # in the table; a module of the face
        def later():
            from unsee.plugins.detect import DetectionService   # not in the table: fails when it runs
        from unsee.plugins.ifc import Anything              # not a lazy face here: not this check's
    """)
    assert missing_face_names("unsee.wiring", uses, tables) == [
        "unsee.wiring:4 from unsee.plugins.detect import DetectionService: not in its _EXPORTS"]
    relative = _source("from . import Nothing, Detector")
    assert missing_face_names("unsee.plugins.detect", relative, tables, package=True) == [
        "unsee.plugins.detect:1 from unsee.plugins.detect import Nothing: not in its _EXPORTS"]


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


# -- product text names no private source -------------------------------------------------------

#: the articles the product cites, by title (a file that says "the paper" names one of them)
ARTICLES = ("Forgetting Without Restarting: Execution-State Unlearning for Stateful LLM Agents",
            "LangGraph Compaction Deletes the View, Not the Record")
#: what points a reader at material a clone of the repository does not have
PRIVATE = {
    "a path outside the repository": re.compile(r"\.\./shared"),
    "a source file": re.compile(r"seeds/|retention-inversion\.txt|forgetting-without-restarting\.txt"),
    "private notes": re.compile(r"NOTES\.md"),
    "the seed (name the article)": re.compile(r"\bseed['’]s\b", re.I),
    "an issue number": re.compile(r"\bissues?\s+#?\d+", re.I),
}
_THE_PAPER = re.compile(r"\bthe paper\b", re.I)
#: a title across line breaks, comment markers or joined string literals
_TITLES = [re.compile(r"\W+".join(map(re.escape, re.findall(r"[\w-]+", t))), re.I) for t in ARTICLES]


def private_references(path: str, text: str) -> list[str]:
    """``path:line: what (the text)`` for each line of ``text`` that points at private material;
    "the paper" counts unless the file names one of :data:`ARTICLES`."""
    rules = dict(PRIVATE)
    if not any(t.search(text) for t in _TITLES):
        rules["the paper, untitled"] = _THE_PAPER
    return [f"{path}:{n}: {what} ({m.group(0)!r})" for n, line in enumerate(text.splitlines(), 1)
            for what, rx in rules.items() if (m := rx.search(line))]


def _product_text() -> list[Path]:
    """The files a user reads: the code (docstrings, comments, help strings), the examples, the
    benchmarks, README.md and docs/*.md."""
    from tests.support.import_graph import ROOT

    files = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    for folder in ("unsee", "middleware", "plugins", "sandbox", "examples", "benchmarks"):
        files += (ROOT / folder).rglob("*.py")
    return sorted(p for p in files if not any(part in (".venv", "build") or part.endswith(".egg-info")
                                              for part in p.relative_to(ROOT).parts))


def test_product_text_names_no_private_sources():
    from tests.support.import_graph import ROOT

    files = _product_text()
    assert len(files) > 100 and ROOT / "README.md" in files and ROOT / "docs" / "erasure.md" in files
    bad = [b for p in files for b in private_references(str(p.relative_to(ROOT)), p.read_text())]
    assert not bad, ("product text pointing at material a clone does not have (say it in the text's own "
                     "words; cite an article by its title):\n" + "\n".join(bad))


def test_the_checker_sees_private_references():
    text = textwrap.dedent("""\
        all (../shared/NOTES.md).
        the seed's three questions; the Seed's case
        as measured for issue 12 (since issue #29)
        the paper's Tables 1-3
        a --seed K, the replay's seed checkpoint, issue_refund, the issue's target
    """)
    assert private_references("x.py", text) == [
        "x.py:1: a path outside the repository ('../shared')", "x.py:1: private notes ('NOTES.md')",
        "x.py:2: the seed (name the article) (\"seed's\")", "x.py:3: an issue number ('issue 12')",
        "x.py:4: the paper, untitled ('the paper')"]
    titled = text + '(Tables 1-3 of "Forgetting Without\n    Restarting: Execution-State Unlearning for Stateful LLM Agents")'
    assert [b for b in private_references("x.py", titled) if "paper" in b] == []
    assert private_references("x.md", "see `../shared/seeds/retention-inversion.txt`") == [
        "x.md:1: a path outside the repository ('../shared')", "x.md:1: a source file ('seeds/')"]


# -- the facade keeps its type at the ports --------------------------------------------------------
def facade_typed_as_any(path: str, tree: ast.AST) -> list[str]:
    """``path:line`` where the facade's type is lost: ``Unsee = Any``, or a parameter ``u`` (the
    facade, by this code's convention) annotated ``Any``."""

    def is_any(node: ast.AST | None) -> bool:
        return (isinstance(node, ast.Name) and node.id == "Any") or (
            isinstance(node, ast.Constant) and node.value == "Any")

    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and is_any(node.value) and any(
                isinstance(t, ast.Name) and t.id == "Unsee" for t in node.targets):
            bad.append(f"{path}:{node.lineno}: Unsee = Any")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
                if a.arg == "u" and is_any(a.annotation):
                    bad.append(f"{path}:{a.lineno}: {node.name}(u: Any)")
    return bad


def test_the_facade_is_never_typed_any():
    bad = [b for name, path in sorted(MODULES.items()) for b in facade_typed_as_any(name, tree_of(name))]
    assert not bad, "the facade's type lost at a port (import it under TYPE_CHECKING):\n" + "\n".join(bad)


def test_the_checker_sees_the_facade_typed_any():
    tree = ast.parse("Unsee = Any\ndef f(u: Any, v: Any): ...\ndef g(u: 'Unsee'): ...\n")
    assert facade_typed_as_any("m", tree) == ["m:1: Unsee = Any", "m:2: f(u: Any)"]


# -- saver classes are named only by the checkpointer drivers ---------------------------------------
#: LangGraph's saver classes (``MemorySaver`` is ``InMemorySaver``'s old name)
SAVER_CLASS = re.compile(r"^(InMemory|Memory|Sqlite|AsyncSqlite|Postgres|AsyncPostgres|ShallowPostgres"
                         r"|AsyncShallowPostgres)Saver$")
#: the one package that may name them: one driver a saver (docs/architecture.md, "Checkpointer drivers")
DRIVERS = "unsee.middleware.checkpointers"


def saver_class_uses(name: str, tree: ast.AST) -> list[str]:
    """``name:line: Class`` for each saver class named in code outside the drivers: imported,
    tested (``isinstance``, ``type(x) is``), called or annotated. Prose (docstrings, comments,
    messages) may name them."""
    if name == DRIVERS or name.startswith(DRIVERS + "."):
        return []
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.alias):
            found = node.name.rpartition(".")[2]
        elif isinstance(node, ast.Name):
            found = node.id
        elif isinstance(node, ast.Attribute):
            found = node.attr
        else:
            continue
        if SAVER_CLASS.match(found):
            bad.append(f"{name}:{getattr(node, 'lineno', '?')}: {found}")
    return sorted(set(bad), key=lambda b: (int(b.split(":")[1]) if b.split(":")[1].isdigit() else 0, b))


def test_saver_classes_are_named_only_by_the_checkpointer_drivers():
    bad = [b for name in sorted(MODULES) for b in saver_class_uses(name, tree_of(name))]
    assert not bad, ("a saver class named outside unsee.middleware.checkpointers (ask its driver: driver_for, "
                     "driver_or_generic, open_saver):\n" + "\n".join(bad))


def test_the_checker_sees_a_saver_class_named_in_code():
    tree = _source('''
        """A SqliteSaver in prose is fine."""
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.checkpoint.memory import InMemorySaver as Mem
        import langgraph.checkpoint.postgres as pg

        def f(saver):
            # an InMemorySaver comment is fine
            if isinstance(saver, SqliteSaver):
                return 1
            if type(saver) is pg.PostgresSaver:
                return 2
            raise ValueError("not a plain PostgresSaver")
        ''')
    assert saver_class_uses("unsee.plugins.x.y", tree) == [
        "unsee.plugins.x.y:3: SqliteSaver", "unsee.plugins.x.y:4: InMemorySaver",
        "unsee.plugins.x.y:9: SqliteSaver", "unsee.plugins.x.y:11: PostgresSaver"]
    assert saver_class_uses(DRIVERS + ".sqlite", tree) == []
    assert saver_class_uses(DRIVERS, tree) == []
    assert saver_class_uses("unsee.middleware.checkpointersx", tree) != []
