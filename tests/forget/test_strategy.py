"""The strategy table: every code, its aliases, its spec; unknown strategies refused."""

from __future__ import annotations

import pytest

from unsee.plugins.forget import STRATEGIES, Strategy, StrategySpec, UnknownStrategy
from unsee.plugins.forget.report import STRATEGIES as REPORT_STRATEGIES
from unsee.plugins.forget.strategy import REPLAYING, SPECS, Edit, spec

CODES = ("B0", "B1", "B2", "B3", "B4", "B5", "B5'", "B6", "B7", "B8", "B9")


def test_codes_in_the_papers_order():
    assert STRATEGIES == CODES == REPORT_STRATEGIES
    assert [s.code for s in Strategy] == list(CODES)  # aliases are not extra members
    assert set(SPECS) == set(Strategy)


@pytest.mark.parametrize("code", CODES)
def test_every_code_parses_to_its_member(code):
    s = Strategy.parse(code)
    assert s is Strategy(code) and s.code == code == s.value
    assert Strategy.parse(s) is s
    assert isinstance(spec(code), StrategySpec) and spec(code) is s.spec and spec(s).code == code
    assert "'" not in s.slug and s.slug.startswith(code[:2])


@pytest.mark.parametrize("alias, code", [
    ("NOTHING", "B0"), ("DELETE_RECORD", "B1"), ("INSTRUCT", "B2"), ("REDACT_ENTRY", "B3"), ("AMPUTATE", "B4"),
    ("RESET_REPLAY", "B5"), ("PREFIX_REPLAY", "B5'"), ("REDACT_ALL", "B6"), ("UNSEE", "B7"), ("IFC_ONLY", "B8"),
    ("IFC_REPLAY", "B9"), ("B5P", "B5'"),
])
def test_aliases_are_the_same_members(alias, code):
    assert Strategy[alias] is Strategy(code)


@pytest.mark.parametrize("name,code", [
    ("nothing", "B0"), ("delete-record", "B1"), ("instruct", "B2"), ("redact-entry", "B3"), ("amputate", "B4"),
    ("reset-replay", "B5"), ("prefix-replay", "B5'"), ("redact-all", "B6"), ("unsee", "B7"), ("ifc-only", "B8"),
    ("ifc-replay", "B9"),
])
def test_a_descriptive_name_is_its_strategy(name, code):
    assert Strategy.parse(name) is Strategy(code) and Strategy(code).alias == name
    assert spec(name).code == code


@pytest.mark.parametrize("bad", ["B42", "b7", "B5p", "B5P", "UNSEE", "Unsee", "prefix_replay", "", " B7", None, 7,
                                 ["B7"]])
def test_unknown_strategy(bad):
    with pytest.raises(UnknownStrategy) as e:
        Strategy.parse(bad)
    assert isinstance(e.value, ValueError) and "B0 B1 B2" in str(e.value)
    with pytest.raises(UnknownStrategy):
        spec(bad)


def test_the_table():
    rows = {s.code: (p.replays, p.forks_at_checkpoint, p.rematerialises, p.edit, p.commits, p.needs_ifc, p.needs_agent)
            for s, p in SPECS.items()}
    assert rows == {
        "B0": (False, True, False, Edit.NOTHING, False, False, False),
        "B1": (False, True, False, Edit.DELETE_RECORD, True, False, False),
        "B2": (False, True, False, Edit.INSTRUCT, True, False, True),
        "B3": (False, True, False, Edit.REDACT_ENTRY, True, False, True),
        "B4": (False, True, False, Edit.AMPUTATE, True, False, True),
        "B5": (True, False, False, None, True, False, True),
        "B5'": (True, True, False, None, True, False, True),
        "B6": (False, True, False, Edit.REDACT_ALL, True, False, True),
        "B7": (True, True, True, None, True, False, True),
        "B8": (False, True, False, Edit.IFC_LABEL, True, True, False),
        "B9": (True, True, True, None, True, True, True),
    }
    assert REPLAYING == ("B5", "B5'", "B7", "B9")
    assert all(p.description and p.strategy is s for s, p in SPECS.items())
    # every strategy that does not replay has exactly one edit, and the replaying ones none
    assert all((p.edit is None) == p.replays for p in SPECS.values())


def test_spec_is_frozen():
    with pytest.raises(AttributeError):
        Strategy.B7.spec.replays = False  # type: ignore[misc]
