"""A forget request: every argument of a revocation, checked once and parsed.

``ForgetRequest.of`` is the one place a forget's arguments are validated: the
strategy parsed into its ``Strategy`` member, the scope and the side-effect
policy checked against their words, every flag a bool. The steps after it
(``forgetter``, ``pipeline``) take the frozen request and never check or parse
an argument again. Nothing is read or written before it returns.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from unsee.middleware.errors import InvalidArgument

from .decide import SIDE_EFFECT_POLICIES, SideEffectPolicy
from .event import RevocationEvent
from .replay import is_scratch_thread
from .strategy import Strategy, StrategySpec

Scope = Literal["session", "all"]
#: ``session``: forget in the named session only (the report names the sessions the target
#: spread to); ``all``: also in every session it spread to through shared memory
SCOPES: tuple[str, ...] = ("session", "all")


def _got(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


@dataclass(frozen=True)
class ForgetRequest:
    """One revocation as the forget runs it: what to forget, where, and how."""

    session: str
    event: RevocationEvent
    strategy: Strategy = Strategy.B7
    #: the compiled LangGraph agent a replay runs through (None: the one that ran the session here)
    agent: Any = None
    dry_run: bool = False
    #: False: replay but do not commit (the session keeps its state; the report says what would change)
    commit: bool = True
    #: False: ``SessionBusy`` at once when a run holds the session, instead of waiting for it
    wait: bool = True
    side_effects: SideEffectPolicy = "defer"
    #: erase the record after a committed replay (a signed receipt)
    erase: bool = True
    scope: Scope = "session"

    @property
    def spec(self) -> StrategySpec:
        return self.strategy.spec

    @classmethod
    def of(cls, session: Any, event: Any, strategy: Any = "B7", *, agent: Any = None, dry_run: Any = False,
           commit: Any = True, wait: Any = True, side_effects: Any = "defer", erase: Any = True,
           scope: Any = "session") -> ForgetRequest:
        """The request, every argument checked (``InvalidArgument``, a ``ValueError``, or
        ``UnknownStrategy``, naming the argument, what it must be and what it got)."""
        if not isinstance(erase, bool):
            raise InvalidArgument(f"erase must be True or False, got {type(erase).__name__} {erase!r}")
        if scope not in SCOPES:
            raise InvalidArgument(f"scope must be 'session' or 'all', got {type(scope).__name__} {scope!r}")
        parsed = validate_forget_args(session, event, strategy, agent=agent, side_effects=side_effects,
                                      dry_run=dry_run, commit=commit, wait=wait)
        return cls(session, event, parsed, agent, dry_run, commit, wait, side_effects, erase, scope)

    def spread_to(self, session: str, event: RevocationEvent) -> ForgetRequest:
        """The same forget of another session the target spread to (``scope="all"``): its own
        event (the read it entered through as the source); its erasure is the pipeline's."""
        return replace(self, session=session, event=event, erase=False, scope="session")


def validate_forget_args(session: Any, event: Any, strategy: Any, *, agent: Any = None,
                         side_effects: Any = "defer", **flags: Any) -> Strategy:
    """Check the arguments a forget of one session takes; the strategy parsed
    (``ForgetRequest.of`` checks the pipeline's too)."""
    if not isinstance(session, str) or not session.strip():
        raise InvalidArgument(f"thread_id must be a non-empty string (the session's LangGraph thread_id), "
                              f"got {_got(session)}")
    if is_scratch_thread(session):
        raise InvalidArgument(f"thread_id {session!r} is the scratch thread of a replay, not a session: "
                              "forget in the session it was made for")
    if not isinstance(event, RevocationEvent):
        raise InvalidArgument(f"event must be a RevocationEvent, e.g. RevocationEvent(target=...), got {_got(event)}")
    parsed = Strategy.parse(strategy)  # UnknownStrategy
    if agent is not None:
        from langgraph.pregel import Pregel

        if not isinstance(agent, Pregel):
            hint = (": import it and pass the object (only the command line's --agent takes module:attribute)"
                    if isinstance(agent, str) else "")
            raise InvalidArgument("agent must be a compiled LangGraph agent (create_agent(...) or "
                                  f"StateGraph(...).compile()) or None, got {_got(agent)}{hint}")
    if side_effects not in SIDE_EFFECT_POLICIES:
        raise InvalidArgument(f"side_effects must be one of {', '.join(SIDE_EFFECT_POLICIES)}, "
                              f"got {_got(side_effects)}")
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise InvalidArgument(f"{name} must be True or False, got {_got(value)}")
    return parsed
