"""unsee: make LLM agents forget without restarting.

>>> from unsee import Unsee
>>> u = Unsee(home=".unsee")
>>> agent = create_agent(model, tools, middleware=[u.middleware()], checkpointer=saver)
>>> g = u.graph(thread_id); hit = g.locate("4417-2231"); closure = g.taint(hit)

Names are imported on first use, so importing a light part of the package
(e.g. the erasure scanner's child process) does not load LangChain.
"""

from __future__ import annotations

from unsee.plugins import lazy_exports

_EXPORTS = {
    "Unsee": "unsee.core",
    "resolve_home": "unsee.core",
    "ProvenanceGraph": "unsee.middleware.graph",
    "Artifact": "unsee.middleware.records",
    "ArtifactType": "unsee.middleware.records",
    "Checkpoint": "unsee.middleware.records",
    "CheckpointKind": "unsee.middleware.records",
    "Hit": "unsee.middleware.records",
    "UnseeError": "unsee.middleware.errors",
    "TargetNotFound": "unsee.middleware.errors",
    "SessionNotFound": "unsee.middleware.errors",
    "AmbiguousTarget": "unsee.middleware.errors",
    "IncompleteSession": "unsee.middleware.errors",
    "RecordsBehind": "unsee.middleware.errors",
    "InvalidArgument": "unsee.middleware.errors",
    "RevocationEvent": "unsee.plugins.forget",
    "ForgetReport": "unsee.plugins.forget",
    "ForgetPlan": "unsee.plugins.forget",
    "ReplayFailed": "unsee.plugins.forget",
    "ForgetRefused": "unsee.plugins.forget",
    "AgentCannotReplay": "unsee.plugins.forget",
    "UnsupportedSession": "unsee.plugins.forget",
    "NotDerived": "unsee.plugins.forget",
    "TargetRemains": "unsee.plugins.forget",
    "IfcNotEnabled": "unsee.plugins.forget",
    "NoUnseeHome": "unsee.middleware.errors",
    "OrphanedMemory": "unsee.middleware.fork_memory",
}

__all__ = sorted(_EXPORTS)
__version__ = "0.1.0"

__getattr__ = lazy_exports(__name__, _EXPORTS)
