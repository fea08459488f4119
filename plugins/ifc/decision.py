"""What the IFC policy decided for one tool call (records only).

:class:`Decision` and :class:`Evidence` are made by
:func:`unsee.plugins.ifc.policy.decide` and carried by
:class:`~unsee.plugins.ifc.errors.PolicyViolation`; they live here so that
both can import them without importing each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ALLOW", "Decision", "Evidence"]

#: the action of a call that carries no policed identifier
ALLOW = "allow"


@dataclass(frozen=True, slots=True)
class Evidence:
    """An artifact that introduced a matched identifier, with its labels."""

    artifact_id: str
    labels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Decision:
    """What the policy decided for one tool call, and why.

    ``args`` are the sink arguments whose values carried a matched identifier
    (all sink arguments checked, when allowed); ``identifier`` is the first
    matched identifier (normalized), ``identifiers`` all of them; ``reason``
    is written for the model (an error tool message) and for people; it never
    repeats the identifier (see ``identifiers``).
    ``endorsements`` are the endorsed observations that vouched for an
    identifier in a sink that untrusted data also carried (why it passed).
    """

    action: str
    tool: str
    args: tuple[str, ...]
    identifier: str | None
    identifiers: tuple[str, ...]
    evidence: tuple[Evidence, ...]
    reason: str
    mode: str = "block"
    endorsements: tuple[Evidence, ...] = ()

    @property
    def allowed(self) -> bool:
        """Whether the real tool may run now (``allow`` and ``audit``)."""
        return self.action in (ALLOW, "audit")

    @property
    def flagged(self) -> bool:
        """Whether a sink carried a policed identifier (every action except ``allow``)."""
        return self.action != ALLOW

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(sorted({lbl for e in self.evidence for lbl in e.labels}))

    @property
    def artifact_ids(self) -> tuple[str, ...]:
        return tuple(e.artifact_id for e in self.evidence)

    def to_event(self, hash_of: Callable[[str], str] | None = None) -> dict[str, Any]:
        """Attributes of the span event recording this decision.

        No payload text: the identifier appears only as ``hash_of(identifier)``
        when a (keyed) hash function is given.
        """
        attrs: dict[str, Any] = {
            "unsee.ifc.action": self.action,
            "unsee.ifc.mode": self.mode,
            "unsee.ifc.tool": self.tool,
            "unsee.ifc.sinks": [f"{self.tool}.{a}" for a in self.args],
            "unsee.ifc.evidence": list(self.artifact_ids),
            "unsee.ifc.labels": list(self.labels),
            "unsee.ifc.identifiers": len(self.identifiers),
        }
        if hash_of is not None and self.identifiers:
            attrs["unsee.ifc.identifier_hashes"] = [hash_of(i) for i in self.identifiers]
        if self.endorsements:
            attrs["unsee.ifc.endorsed"] = [e.artifact_id for e in self.endorsements]
        return attrs
