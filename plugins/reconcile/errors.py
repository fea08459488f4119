"""Errors of a reconciliation (one-line messages; the CLI's exit codes follow the base classes:
a ``LookupError``/``ValueError`` is bad input (2), a ``RuntimeError`` a failure (4))."""

from __future__ import annotations

from typing import Any

from unsee.middleware.errors import UnseeError


class ReconcileError(UnseeError):
    """A reconciliation that cannot be done as asked."""


class UnknownReconciliation(ReconcileError, LookupError):
    """No reconciliation plan for that event id: no forget of it committed here, it left nothing
    to reconcile (no orphaned or deferred side effect), or the home keeps none
    (``Unsee(reconcile="never")``)."""

    def __init__(self, event_id: str):
        self.event_id = event_id
        super().__init__(f"no reconciliation plan for event {event_id!r}: no committed forget of that event left "
                         "anything to reconcile in this home's call ledger")


class PlanAlreadyRun(ReconcileError, ValueError):
    """Everything the plan can run has run (or, without ``retry=True``, failed): nothing was done."""

    def __init__(self, event_id: str, failed: int = 0):
        self.event_id, self.failed = event_id, failed
        more = (f"; {failed} failed: run it again with retry=True (--retry) once the cause is fixed"
                if failed else "")
        super().__init__(f"the reconciliation of event {event_id!r} has already run{more}")


class CompensatorUnavailable(ReconcileError, LookupError):
    """An item's compensator (or deferred tool) is not known in this process: give the agent
    that declares it (``agent=``, ``--agent module:attribute``). Nothing was run."""

    def __init__(self, event_id: str, names: list[str]):
        self.event_id, self.names = event_id, names
        super().__init__(f"the reconciliation of event {event_id!r} needs {', '.join(sorted(names))}, which no tool "
                         "known to this process declares: pass the agent that has them (agent=, --agent "
                         "module:attribute)")


class NeedsAsync(ReconcileError, TypeError):
    """A compensator or tool the plan runs can only be awaited (an MCP tool, ``async def``): use
    ``await u.areconcile(...)``. Nothing was run."""

    def __init__(self, names: list[str]):
        self.names = names
        super().__init__(f"{', '.join(sorted(names))} can only be awaited: reconcile with `await u.areconcile(...)`")


class CompensationFailed(ReconcileError, RuntimeError):
    """A compensator (or a deferred tool) raised: its item is recorded ``failed`` (visible in the
    plan, retried only with ``retry=True``), the others ran. ``outcome`` is the reconcile's
    result; ``failed``: the keys of the items that failed."""

    exit_code = 4

    def __init__(self, event_id: str, failed: list[str], outcome: Any):
        self.event_id, self.failed, self.outcome = event_id, failed, outcome
        super().__init__(f"the reconciliation of event {event_id!r}: {len(failed)} item(s) failed "
                         f"({', '.join(failed)}); they stay failed in the plan and run again only with retry=True")


class InvalidDecision(ReconcileError, ValueError):
    """An approval answered something that is not a decision for the items it was asked about."""
