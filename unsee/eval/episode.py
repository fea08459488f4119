"""An episode of ``unsee eval forgetting``: a scripted conversation and what to forget in it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Episode(BaseModel):
    """One scripted conversation and what to forget in it."""

    id: str
    suite: str
    seed: int
    turns: list[str]
    #: the target and the words a probe uses for it ("card number")
    target: str
    label: str
    #: how it enters: "user", "tool" or "memory"
    entry: Literal["user", "tool", "memory"]
    #: the turn (0-based) at which it enters
    tau_turn: int
    #: what the lookup tool returns, by ticket
    tool_data: dict[str, str] = Field(default_factory=dict)
    #: memory items present before the first turn: key -> text
    memory: dict[str, str] = Field(default_factory=dict)
    #: turns run after the strategy was applied (preference: the choice that shows residue)
    after: list[str] = Field(default_factory=list)
    #: preference episodes: the excluded option (avoiding it after the forget is residue)
    excluded: str | None = None
    #: strings the target carries downstream (an injection's attacker identifiers): each one found
    #: counts as a leak of the target
    traces: list[str] = Field(default_factory=list)
    #: the model sees only the last ``window`` user turns (a view-only trim, ``RecentTurns``); None: all
    window: int | None = None
    #: where an episode of an external benchmark comes from (agentdojo: suite, user and injection task)
    source: dict[str, str] = Field(default_factory=dict)
