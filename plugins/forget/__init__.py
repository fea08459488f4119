"""Forget plugin: the revocation event, its pipeline, and the forget of a session (B0–B9).

The path of a revocation event, one module a job, ordered by ``pipeline``
(``RevocationPipeline``, what every entry point calls, a list of steps):
event (``event``) -> request, every argument checked once (``request``) ->
the session's forget (``forgetter``, its own list of steps: locate tau and I(z)
(``locate``) -> plan (``plan``) -> check (``preflight``) -> fork and restore,
sanitized replay (``replay``, deciding call by call in ``decide`` through the
``interceptor``) -> atomic commit (``commit``) -> report (``report``, its words
in ``notes``)) -> spread to other sessions (``spread``) -> erasure through the
erasure plugin's face (``erase``) -> the view's record (a port). The
strategies B0–B9 are one table (``strategy``); the editing baselines live in
``baselines``, the one way to remove a target in ``sanitize``, a session whose
records stop short of its state in ``unrecorded``, the LangGraph thread
helpers in ``thread``, and what the pipeline needs from its surroundings
(never the facade itself) in ``ports``: small protocols bundled in a
``ForgetContext`` and a ``RevocationContext``. Crash injection (``crash_at``)
is the middleware's (``unsee.middleware.faults``).

Public names are imported lazily, so ``import unsee.plugins.forget`` stays
cheap (no LangChain import until a name is used). Other plugins use only
these names, never the modules.
"""

from __future__ import annotations

from unsee.plugins import lazy_exports

_EXPORTS = {
    "RevocationEvent": ".event",
    "sanitize_value": ".sanitize",
    "sanitize_message": ".sanitize",
    "ForgetReport": ".report",
    "ForgetPlan": ".report",
    "SideEffect": ".report",
    "TransitionOutcome": ".report",
    "STRATEGIES": ".strategy",
    "Strategy": ".strategy",
    "StrategySpec": ".strategy",
    "Edit": ".strategy",
    "Forgetter": ".forgetter",
    "SessionForget": ".forgetter",
    "ForgetRequest": ".request",
    "RevocationPipeline": ".pipeline",
    "raised_from": ".trace",
    "erasure_spans": ".trace",
    "emit": ".trace",
    "RevocationContext": ".ports",
    "ForgetRecords": ".ports",
    "Located": ".locate",
    "locate": ".locate",
    "ReplayCounts": ".report",
    "ForgetContext": ".ports",
    "SessionView": ".ports",
    "RecordStore": ".ports",
    "SessionReader": ".ports",
    "Runs": ".ports",
    "CroppableCache": ".ports",
    "SnapshotEnvironments": ".ports",
    "Revoker": ".ports",
    "Hasher": ".ports",
    "is_scratch_thread": ".replay",
    "scratch_thread": ".replay",
    "replay_loop": ".replay",
    "AgentUnknown": ".errors",
    "UnknownStrategy": ".errors",
    "InjectedCrash": ".errors",
    "CommitInterrupted": ".errors",
    "ReplayIncomplete": ".errors",
    "ReplayFailed": ".errors",
    "IfcNotEnabled": ".errors",
    "ForgetRefused": ".errors",
    "AgentCannotReplay": ".errors",
    "UnsupportedSession": ".errors",
    "NotDerived": ".errors",
    "NeedsAsync": ".errors",
    "TargetRemains": ".errors",
    "StepError": ".report",
    "crash_at": "unsee.middleware.faults",
    "fail_at": "unsee.middleware.faults",
    "InjectedFailure": "unsee.middleware.faults",
    "Spread": ".spread",
    "find_spread": ".spread",
    "fault_point": "unsee.middleware.faults",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
