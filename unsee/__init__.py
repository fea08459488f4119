"""unsee: make LLM agents forget without restarting.

>>> from unsee import Unsee
>>> u = Unsee(home=".unsee")
>>> agent = create_agent(model, tools, middleware=[u.middleware()], checkpointer=saver)
>>> g = u.graph(thread_id); hit = g.locate("4417-2231"); closure = g.taint(hit)
"""

from unsee.core import Unsee, resolve_home
from unsee.middleware.errors import (
    AmbiguousTarget,
    IncompleteSession,
    InvalidArgument,
    SessionNotFound,
    TargetNotFound,
    UnseeError,
)
from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import Artifact, ArtifactType, Checkpoint, CheckpointKind, Hit
from unsee.plugins.forget import ForgetPlan, ForgetReport, RevocationEvent

__all__ = [
    "Unsee", "resolve_home", "ProvenanceGraph", "Artifact", "ArtifactType", "Checkpoint",
    "CheckpointKind", "Hit", "UnseeError", "TargetNotFound", "SessionNotFound", "AmbiguousTarget",
    "IncompleteSession", "InvalidArgument", "RevocationEvent", "ForgetReport", "ForgetPlan",
]
__version__ = "0.1.0"
