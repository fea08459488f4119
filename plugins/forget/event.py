"""The revocation event: the only input of a forget.

Other systems (detectors, platforms, ``unsee serve``) send it as JSON; its
schema is published in docs/revocation-event.schema.json.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator



class RevocationEvent(BaseModel):
    """Forget ``target`` (as it entered through ``source``, if given)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: str = Field(description="The text to forget, verbatim as it was observed.")
    source: str | None = Field(
        default=None,
        description="An artifact id or source key (e.g. 'tool:lookup_ticket', 'memory:users/42/pref', 'user') "
        "naming where the target entered; required when it entered through several sources.",
    )
    reason: str = Field(default="", description="Why, for the report and the audit trail.")
    raised_by: Literal["user", "platform", "detector", "operator"] = Field(
        default="user", description="Who asked."
    )
    event_id: str = Field(default_factory=lambda: uuid.uuid4().hex, description="Idempotency key.")
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))

    @field_validator("target")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        if not v or not v.strip():
            raise ValueError("target must be a non-empty string")
        return v
