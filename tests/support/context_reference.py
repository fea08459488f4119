"""The closure a provenance graph had before context manifests were stored as deltas.

Every model turn's parents made whole again (``ProvenanceGraph.manifest``) and the graph
walked edge by edge, as it was when every record held its whole manifest: the reference
the delta record's taint must equal, exactly. ``tests/conftest.py`` checks every taint the
suite computes against it; ``tests/middleware/test_context_delta.py`` checks generated
sessions.
"""

from __future__ import annotations

from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import ArtifactType


def whole_graph(g: ProvenanceGraph) -> ProvenanceGraph:
    """``g`` with every manifest stored whole (model turns' and checkpoints')."""
    arts = [a if a.context is None or a.type is not ArtifactType.MODEL_TURN
            else a.model_copy(update={"parents": g.manifest(a.id), "context": None}) for a in g]
    cps = [c if c.context is None else c.model_copy(update={"prompt_manifest": g.checkpoint_manifest(c),
                                                             "context": None}) for c in g.checkpoints]
    return ProvenanceGraph(arts, cps, content_of=g.content, session_id=g.session_id)
