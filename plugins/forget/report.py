"""The forget report (pydantic, JSON) and the plan a dry run prints.

Both carry the strategy as its code string ("B7"); ``strategy.Strategy`` has the table.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .strategy import STRATEGIES

__all__ = ["STRATEGIES", "ForgetPlan", "ForgetReport", "ReplayCounts", "SideEffect", "StepError", "TransitionOutcome"]


class SideEffect(BaseModel):
    """A consequential tool call, as fired (orphaned) or as wanted (deferred)."""

    model_config = ConfigDict(frozen=True)

    tool: str
    args: dict[str, Any]
    effect: str | None
    call_artifact_id: str | None = None
    result: str | None = None
    status: Literal["orphaned", "deferred", "deduplicated", "executed", "awaiting_approval"]


class StepError(BaseModel):
    """A step that failed after the commit: the forget is committed and reports it here instead
    of raising (``step``: "commit" for the commit's own bookkeeping, which rolls forward at the
    next forget of the session, "erase", "view record", "trace"; ``error``: the exception's type)."""

    model_config = ConfigDict(frozen=True)

    step: str
    error: str
    message: str

    @classmethod
    def of(cls, step: str, exc: BaseException) -> "StepError":
        return cls(step=step, error=type(exc).__name__, message=" ".join(str(exc).split()) or type(exc).__name__)


class ForgetPlan(BaseModel):
    """What a forget will do (``--dry-run`` prints this and changes nothing)."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    strategy: str
    target_hash: str
    tau: int
    entry_artifact: str
    entry_type: str
    entry_sources: list[str]
    closure: list[str]
    checkpoint_id: str | None
    checkpoint_kind: str | None
    checkpoint_turn: int
    turns_to_replay: list[int]
    transitions_to_replay: int
    model_turns_to_decode: list[str]
    model_turns_to_rematerialise: list[str]
    side_effects_at_risk: list[SideEffect]
    #: the undeclared tools the suffix's record holds (``ForgetReport.assumed_external``)
    assumed_external: list[str] = Field(default_factory=list)


class TransitionOutcome(BaseModel):
    """What a replay did with each recorded transition, by artifact id of the old world (ids
    only: no text, no arguments). A model turn is ``rematerialised`` (its recorded output
    reused by prefill) or ``decoded`` again; a tool call's return is served ``from_record``;
    ``executed`` names the tools that ran again (``tool:call_id``). Deferred and orphaned side
    effects are the report's own lists."""

    model_config = ConfigDict(frozen=True)

    decoded: list[str] = Field(default_factory=list)
    rematerialised: list[str] = Field(default_factory=list)
    from_record: list[str] = Field(default_factory=list)
    executed: list[str] = Field(default_factory=list)

    def superseded(self) -> list[str]:
        """The recorded transitions the replay superseded (decoded again, re-materialised, or
        served from the record): the old world's artifact ids the forget's trace links to."""
        return [*self.decoded, *self.rematerialised, *self.from_record]


class ReplayCounts(BaseModel):
    """What a replay did, counted: declared once, counted by the replay interceptor
    (``interceptor.ReplayStats.counts``) and carried as they are by the report."""

    model_turns_decoded: int = 0
    model_turns_rematerialised: int = 0
    tool_calls_from_record: int = 0
    tool_calls_executed: int = 0


class ForgetReport(ReplayCounts):
    """A forget's outcome (JSON). The replay counters are ``ReplayCounts``'s fields."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    strategy: str
    event_id: str
    target_hash: str
    tau: int
    closure_size: int
    checkpoint_id: str | None
    checkpoint_kind: str | None
    transitions_replayed: int = 0
    tokens_prefilled: int = 0
    tokens_decoded: int = 0
    tokens_reused: int = 0
    wall_time_s: float = 0.0
    orphaned_side_effects: list[SideEffect] = Field(default_factory=list)
    deferred_side_effects: list[SideEffect] = Field(default_factory=list)
    #: the tools the replay met (or the record holds) that declare no effect and have none to
    #: infer (no MCP annotations, no ``Command``, not added by a middleware): *assumed* external,
    #: so never fired twice; declare an effect to have them replayed (docs/forget.md)
    assumed_external: list[str] = Field(default_factory=list)
    #: what the session now waits for a human to answer (its pending interrupts' values, e.g. a
    #: human-in-the-loop approval's action requests), None when it waits for nothing: the
    #: session's own pause replayed, or a question of the counterfactual's own where a recorded
    #: decision answered another one (the replay stopped there: ``notes`` say which inputs it
    #: did not give)
    awaiting_human: list[Any] | None = None
    committed: bool = False
    scratch_thread: str | None = None
    notes: list[str] = Field(default_factory=list)
    #: other sessions the target reached through shared memory and this forget left as they are
    #: (``scope="all"`` forgets it there too): "session (via key)"
    other_sessions: list[str] = Field(default_factory=list)
    #: with ``scope="all"``: the forgets of the other sessions, in dependency order
    also_forgotten: list["ForgetReport"] = Field(default_factory=list)
    #: the signed erasure receipt (``u.forget(..., erase=True)``, the default, after a committed replay)
    receipt: str | None = None
    #: the reconciliation of the world this forget needs (``unsee.plugins.reconcile``'s
    #: ``ReconcilePlan``: what to compensate, run or undo by hand, each item's state), kept for
    #: ``u.reconcile(event_id)``; None when none was planned (``Unsee(reconcile="never")``, a
    #: forget that did not commit)
    reconciliation: Any = None
    #: whether the audit after erasure found no copy in this forget's scope (its session's
    #: records, files and rows, and any copy no session owns); False: the CLI exits 3
    erased_clean: bool | None = None
    #: copies of the target other sessions still hold after the erasure (session -> copies):
    #: theirs, not in this forget's scope, never counted in ``erased_clean``
    also_held_by: dict[str, int] = Field(default_factory=dict)
    #: a replay's transitions by outcome (None for strategies that do not replay)
    outcome: TransitionOutcome | None = None
    #: what failed after the commit (a committed forget never raises: it says so here, and
    #: ``erased_clean`` is False when the record could not be erased)
    errors: list[StepError] = Field(default_factory=list)
    #: seconds each phase of the forget took (``locate``, ``plan``, ``check``, ``replay``,
    #: ``commit``, ``erase``), as its trace shows them
    timings: dict[str, float] = Field(default_factory=dict)
