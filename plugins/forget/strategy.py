"""The strategies a forget can apply (the baselines B0–B9 of "Forgetting Without Restarting:
Execution-State Unlearning for Stateful LLM Agents"), as one table.

``Strategy`` is an enum whose values are the article's codes ("B0" … "B9",
"B5'"); each member also has a descriptive alias (``Strategy.UNSEE is
Strategy.B7``). ``spec(strategy)`` gives its ``StrategySpec``: what the
forgetter, the planner and the baselines do with it. Nothing else compares
strategy names: reports and plans carry the code string.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from .errors import UnknownStrategy


class Edit(enum.Enum):
    """How a strategy that does not replay changes the session."""

    NOTHING = "nothing"            # B0
    DELETE_RECORD = "delete_record"  # B1: the vault record of o_tau
    INSTRUCT = "instruct"          # B2: an instruction to forget, appended
    REDACT_ENTRY = "redact_entry"  # B3: o_tau only (message, vault, store item)
    AMPUTATE = "amputate"          # B4: every live message and store write of I(z)
    REDACT_ALL = "redact_all"      # B6: every live message, store item and record
    IFC_LABEL = "ifc_label"        # B8: I(z) labelled revoked; nothing else changes


class Strategy(enum.Enum):
    """A forget strategy; the value is the article's code."""

    B0 = "B0"
    B1 = "B1"
    B2 = "B2"
    B3 = "B3"
    B4 = "B4"
    B5 = "B5"
    B5P = "B5'"
    B6 = "B6"
    B7 = "B7"
    B8 = "B8"
    B9 = "B9"
    # descriptive aliases (same members)
    NOTHING = "B0"
    DELETE_RECORD = "B1"
    INSTRUCT = "B2"
    REDACT_ENTRY = "B3"
    AMPUTATE = "B4"
    RESET_REPLAY = "B5"
    PREFIX_REPLAY = "B5'"
    REDACT_ALL = "B6"
    UNSEE = "B7"
    IFC_ONLY = "B8"
    IFC_REPLAY = "B9"

    @property
    def code(self) -> str:
        """The article's code, as reports and plans carry it ("B5'")."""
        return self.value

    @property
    def slug(self) -> str:
        """The code usable in identifiers (thread ids): "B5'" -> "B5p"."""
        return self.value.replace("'", "p")

    @property
    def spec(self) -> StrategySpec:
        return SPECS[self]

    @classmethod
    def parse(cls, value: Any) -> Strategy:
        """A member from itself, its code ("B7", "B5'") or its descriptive name as :attr:`alias`
        spells it ("unsee", "prefix-replay"); anything else (another case, spaces, "B5P") raises
        ``UnknownStrategy``."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                return cls(value)
            except ValueError:
                if (member := _BY_ALIAS.get(value)) is not None:
                    return member
        raise UnknownStrategy(value, STRATEGIES, tuple(_BY_ALIAS))

    @property
    def alias(self) -> str:
        """The descriptive name, as a command line spells it: ``Strategy.B5P.alias == "prefix-replay"``."""
        return _ALIASES[self]


@dataclass(frozen=True)
class StrategySpec:
    strategy: Strategy
    #: re-runs the agent on a scratch thread (and commits the counterfactual)
    replays: bool
    #: the plan starts at the latest turn-boundary checkpoint at or before tau; False: at an
    #: empty state (B5). For a strategy that does not replay, the checkpoint is only reported.
    forks_at_checkpoint: bool
    #: model turns outside I(z) are re-materialised from the record instead of decoded
    rematerialises: bool
    #: how a strategy that does not replay changes the session (None for replaying ones)
    edit: Edit | None
    #: its result counts as committed (False only for B0, which changes nothing)
    commits: bool
    #: labels I(z) revoked in the IFC plugin (which must be enabled first)
    needs_ifc: bool
    #: reads or writes the agent's live state (so it needs the agent)
    needs_agent: bool
    description: str

    @property
    def code(self) -> str:
        return self.strategy.value


def _spec(s: Strategy, description: str, *, replays: bool = False, fork: bool = True, remat: bool = False,
          edit: Edit | None = None, commits: bool = True, ifc: bool = False, agent: bool = True) -> StrategySpec:
    return StrategySpec(s, replays, fork, remat, edit, commits, ifc, agent, description)


S = Strategy
SPECS: dict[Strategy, StrategySpec] = {
    S.B0: _spec(S.B0, "nothing", edit=Edit.NOTHING, commits=False, agent=False),
    S.B1: _spec(S.B1, "delete the persistent record of o_tau; live state unchanged", edit=Edit.DELETE_RECORD,
                agent=False),
    S.B2: _spec(S.B2, "instruct the model to forget (the instruction names the target)", edit=Edit.INSTRUCT),
    S.B3: _spec(S.B3, "redact the target in o_tau only; derived artifacts keep it", edit=Edit.REDACT_ENTRY),
    S.B4: _spec(S.B4, "amputate every tainted artifact (over-deletion)", edit=Edit.AMPUTATE),
    S.B5: _spec(S.B5, "full reset and replay from an empty state, decoding every turn", replays=True,
                fork=False),
    S.B5P: _spec(S.B5P, "prefix-cached replay from the checkpoint, decoding the whole suffix", replays=True),
    S.B6: _spec(S.B6, "redact every artifact, model-authored summaries included", edit=Edit.REDACT_ALL),
    S.B7: _spec(S.B7, "unsee: provenance replay from the checkpoint, re-materialising independent turns",
                replays=True, remat=True),
    S.B8: _spec(S.B8, "IFC only: I(z) labelled revoked; live state unchanged", edit=Edit.IFC_LABEL, ifc=True,
                agent=False),
    S.B9: _spec(S.B9, "IFC + provenance replay", replays=True, remat=True, ifc=True),
}
del S

#: member -> its descriptive name (the enum's alias, lower case, "-" for "_": Strategy.B7 -> "unsee")
_ALIASES: dict[Strategy, str] = {m: n.lower().replace("_", "-") for n, m in Strategy.__members__.items()
                                 if n != m.name}
#: descriptive name -> member ("unsee" -> Strategy.B7)
_BY_ALIAS: dict[str, Strategy] = {a: s for s, a in _ALIASES.items()}
#: every code, in the article's order
STRATEGIES: tuple[str, ...] = tuple(s.value for s in Strategy)
#: the codes of the strategies that replay
REPLAYING: tuple[str, ...] = tuple(s.value for s in Strategy if SPECS[s].replays)


def spec(strategy: Strategy | str) -> StrategySpec:
    """The spec of a strategy given as a member or a code (``UnknownStrategy`` otherwise)."""
    return SPECS[Strategy.parse(strategy)]
