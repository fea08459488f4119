"""What README.md and docs/*.md claim about the code, checked (test_docs_commands.py runs
their command lines; this file checks their sentences).

- Every "raises `X`" / "raise `X`" names an exception class that exists in unsee (or a
  builtin one) and that the package source raises or constructs somewhere (grep-based).
- Every "exit N" / "exits N" / "exit code N" uses a code of the table under "## Exit codes"
  in docs/cli.md; a backticked unsee error class right before it ("`ExportError`; exit 3")
  has that exit code (``unsee.exit_codes.code_for``).
- A registry of specific claims (a figure, a default, a name) with a cheap check each: the
  phrase must still be in its page (else the registry entry is stale), and the check holds.

Source is read as text (no import of the plugins): the whole file runs in well under 2 s.
"""

from __future__ import annotations

import builtins
import importlib
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: the source folders and the package each is installed as (pyproject's package-dir)
PACKAGES = {"unsee": "unsee", "middleware": "unsee.middleware", "plugins": "unsee.plugins", "sandbox": "unsee.sandbox"}

RAISE_CLAIM = re.compile(r"\brais(?:e|es|ed|ing)\s+(?:an?\s+|the\s+)?`([A-Za-z_][\w.]*)(?:\([^`]*\))?`")
EXIT_PHRASE = re.compile(r"\bexit(?:s|ed)?(?:\s+code)?\s+`?(\d+)`?")
CLASS_EXIT = re.compile(r"`([A-Z]\w+)`[^`\n]{0,12}?\bexit(?:s)?(?:\s+code)?\s+(\d+)")
CLASS_DEF = re.compile(r"^class\s+(\w+)\s*(?:\(([^)]*)\))?\s*:", re.M)


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


@cache
def _sources() -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8") for d in PACKAGES for p in sorted((ROOT / d).rglob("*.py"))
            if "__pycache__" not in p.parts}


@cache
def _classes() -> dict[str, tuple[tuple[str, ...], Path]]:
    """Class name -> (base names, defining file), over the package source."""
    out: dict[str, tuple[tuple[str, ...], Path]] = {}
    for path, text in _sources().items():
        for m in CLASS_DEF.finditer(text):
            bases = tuple(b.strip().split(".")[-1] for b in (m.group(2) or "").split(",") if b.strip())
            out.setdefault(m.group(1), (bases, path))
    return out


def _is_exception(name: str, seen: frozenset = frozenset()) -> bool:
    builtin = getattr(builtins, name, None)
    if isinstance(builtin, type) and issubclass(builtin, BaseException):
        return True
    if name in seen or name not in _classes():
        return False
    return any(_is_exception(b, seen | {name}) for b in _classes()[name][0])


@cache
def _raised_or_called() -> frozenset[str]:
    """Every name after ``raise`` or before ``(`` in the package source, class lines aside
    (one pass over the source, not one per claim)."""
    names: set[str] = set()
    for text in _sources().values():
        body = CLASS_DEF.sub("", text)
        names.update(re.findall(r"\braise\s+(?:[\w.]+\.)?(\w+)", body))
        names.update(re.findall(r"\b(\w+)\(", body))
    return frozenset(names)


def _is_raised(name: str) -> bool:
    """``raise Name`` or ``Name(`` somewhere in the package source but its own class line."""
    return name in _raised_or_called()


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [PACKAGES[rel.parts[0]], *rel.parts[1:]]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _claims(pattern: re.Pattern) -> list[tuple[Path, int, re.Match]]:
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        out += [(doc, _line(text, m.start()), m) for m in pattern.finditer(text)]
    return out


def _where(doc: Path, line: int) -> str:
    return f"{doc.relative_to(ROOT)}:{line}"


def test_every_raises_claim_names_a_class_the_code_raises():
    claims = _claims(RAISE_CLAIM)
    found, wrong = [], []
    for doc, line, m in claims:
        name = m.group(1)
        if "." in name and not name.startswith("unsee."):
            continue  # another library's exception (e.g. requests.exceptions.ConnectionError): not ours to check
        short = name.rsplit(".", 1)[-1]
        found.append(f"{_where(doc, line)} {short}")
        if not _is_exception(short):
            wrong.append(f"{_where(doc, line)}: `{name}` is no exception class in unsee")
        elif not _is_raised(short):
            wrong.append(f"{_where(doc, line)}: `{name}` is never raised or constructed in the package source")
    assert found, "no 'raises `X`' claim found: the pattern is broken"
    assert not wrong, "\n".join(wrong) + "\n\nclaims checked:\n" + "\n".join(found)


@cache
def _exit_table() -> dict[int, str] | None:
    """docs/cli.md's "## Exit codes" table (code -> meaning); None while the page has none."""
    page = ROOT / "docs" / "cli.md"
    if not page.exists():
        return None
    section = re.search(r"^## Exit codes\s*$(.*?)(?=^## |\Z)", page.read_text(encoding="utf-8"), re.M | re.S)
    if section is None:
        return None
    rows = re.findall(r"^\|\s*`?(\d+)`?\s*\|\s*(.+?)\s*\|\s*$", section.group(1), re.M)
    return {int(code): meaning for code, meaning in rows} or None


def test_every_exit_code_in_the_docs_is_in_the_table():
    table = _exit_table()
    assert table, "docs/cli.md has no '## Exit codes' table (| code | meaning |): the claims it guards are unchecked"
    claims = _claims(EXIT_PHRASE)
    wrong = [f"{_where(doc, line)}: {m.group(0)!r}" for doc, line, m in claims if int(m.group(1)) not in table]
    assert claims, "no 'exit N' phrase found: the pattern is broken"
    assert not wrong, f"exit codes not in docs/cli.md's table {sorted(table)}:\n" + "\n".join(wrong)


def test_an_error_class_named_with_an_exit_code_has_that_code():
    import unsee.exit_codes as exit_codes
    checked, wrong = [], []
    for doc, line, m in _claims(CLASS_EXIT):
        name, code = m.group(1), int(m.group(2))
        if name not in _classes() or not _is_exception(name):
            continue  # a builtin the sentence wraps (`RuntimeError`; exit code 4 on the command line)
        cls = getattr(importlib.import_module(_module(_classes()[name][1])), name)
        actual = exit_codes.code_for(cls.__new__(cls))  # (the code is the class's: no message needed)
        checked.append(f"{_where(doc, line)} {name}: exit {code}")
        if actual != code:
            wrong.append(f"{_where(doc, line)}: {m.group(0)!r}, but code_for({name}) is {actual}")
    assert checked, "no '`Error`, exit N' phrase found: the pattern is broken"
    assert not wrong, "\n".join(wrong) + "\n\nclaims checked:\n" + "\n".join(checked)


def _constant(path: str, name: str):
    """A module-level constant, read from the source (importing unsee.demo loads LangChain: seconds)."""
    import ast

    for node in ast.parse((ROOT / path).read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path} defines no constant {name}")


def _code(module: str, name: str) -> int:
    from unsee.exit_codes import code_for

    cls = getattr(importlib.import_module(module), name)
    return code_for(cls.__new__(cls))


def _default(func: Callable, param: str):
    import inspect

    default = inspect.signature(func).parameters[param].default
    return getattr(default, "default", default)  # (a typer Option's own default)


#: (page, phrase as it reads there, whitespace aside; a check that the code agrees)
CLAIMS: list[tuple[str, str, Callable[[], bool]]] = [
    ("README.md", "The home is `--home`, else `$UNSEE_HOME`, else `./.unsee`",
     lambda: _constant("unsee/config.py", "DEFAULT_HOME") == ".unsee"),
    ("README.md", "(`unsee demo` records it in `HOME/demo.json`",
     lambda: _constant("unsee/demo.py", "DEMO_RECORD") == "demo.json"),
    ("README.md", "`UNSEE_DEMO_MODEL=scripted|local` overrides it",
     lambda: _constant("unsee/demo.py", "MODEL_ENV") == "UNSEE_DEMO_MODEL"
     and set(_constant("unsee/demo.py", "MODELS")) == {"scripted", "local"}),
    ("README.md", "unsee demo [--model local|scripted] # the customer-support demo (local CPU model by default)",
     lambda: _default(importlib.import_module("unsee.cli").demo_cmd, "model") == "local"),
    ("README.md", "unsee audit SESSION --target TEXT # byte-level audit of every route; exit 1 if a copy remains",
     lambda: importlib.import_module("unsee.exit_codes").NO == 1),
    ("docs/view.md", "An unknown session, an unknown event (or one of another session), an empty or absent "
                     "`--target`, `--source` without `--target`: one line on stderr, exit 2",
     lambda: _code("unsee.middleware.errors", "SessionNotFound") == 2),
    ("docs/jaeger.md", "a TCP connection check (1.5 s at most;",
     lambda: _constant("middleware/export.py", "CONNECT_TIMEOUT") == 1.5),
    ("docs/jaeger.md", "they carry the session's id as `gen_ai.conversation.id` and the replay's scratch thread "
                       "(`<thread id>~cf-<event>-B7`) in `unsee.replay.thread`",
     lambda: _constant("middleware/semconv.py", "RECORDED_IN") == "unsee.replay.thread"),
]


def _normal(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("page,phrase,check", CLAIMS, ids=[f"{p}:{s[:40]}" for p, s, _ in CLAIMS])
def test_registered_claim(page, phrase, check):
    text = _normal((ROOT / page).read_text(encoding="utf-8"))
    assert _normal(phrase) in text, f"{page} no longer says {phrase!r}: update the registry (CLAIMS) with the page"
    assert check(), f"{page} says {phrase!r}, and the code disagrees"
