"""The forget plugin works through its ports (``ForgetContext``), never the facade; the facade
keeps the registry that finds the Unsee owning an agent's recorder."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.forget_agents import SECRET, build, say, state_of
from unsee import RevocationEvent, Unsee
from unsee.cli import _owner_of
from unsee.plugins.forget import ForgetContext, Forgetter, SessionView

ROOT = Path(__file__).resolve().parents[2]


def _attribute_uses_of(name: str, path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path.name}:{n.lineno} {name}.{n.attr}" for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == name]


def test_no_facade_access_in_the_forget_plugin_or_the_revocation_service():
    files = [*sorted((ROOT / "plugins" / "forget").glob("*.py")), ROOT / "plugins" / "detect" / "revocation.py"]
    found = [hit for p in files for hit in _attribute_uses_of("u", p)]
    found += [f"{p.name}: self.u" for p in files if "self.u." in p.read_text() or "self.u =" in p.read_text()]
    assert not found, found


def test_forgetter_runs_on_a_context_built_from_parts(tmp_path):
    u = Unsee(home=tmp_path / "h")
    agent, store = build(u)
    for text in ["hello", "look at T1", "bye"]:
        say(agent, "s", text)
    ctx = ForgetContext(records=u.store, runs=u.recorder, hasher=u.hasher,
                        sessions=SessionView(session=u.session, graph=u.graph, sessions=u.sessions))
    report = Forgetter(ctx).forget("s", RevocationEvent(target=SECRET))
    assert report.committed and report.strategy == "B7"
    assert SECRET not in str(state_of(agent, store, "s"))


def test_the_owner_of_an_agent_is_found_through_the_registry(tmp_path):
    u = Unsee(home=tmp_path / "o")
    other = Unsee(home=tmp_path / "p")
    agent, _ = build(u)
    assert not hasattr(u.recorder, "owner")
    assert Unsee.owning(u.recorder) is u and Unsee.owning(other.recorder) is other
    assert _owner_of(agent) is u
    assert _owner_of(object()) is None
    assert Unsee.owning(object()) is None  # type: ignore[arg-type]
