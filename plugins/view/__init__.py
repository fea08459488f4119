"""View plugin: a self-contained web page of a session (``unsee view``).

The page shows the provenance graph laid out by step, the taint closure of a
target, the checkpoints, the IFC decisions and detector findings on the
artifacts they concern, and a forget event's plan and outcome with the graphs
before and after it. One module a job: ``records`` keeps what a forget leaves
for the page (ids only, beside the receipts), ``payload`` turns a graph and
those records into the page's data (pure), ``layout`` places the nodes (pure),
``page`` renders the HTML with the vendored JavaScript (``assets/``).

The page never carries payload text unless asked (``content=True``), and never
a forgotten target: a forget record holds ids, types and counts only.
"""

from __future__ import annotations

from unsee.plugins import lazy_exports

_EXPORTS = {
    "ForgetRecord": ".records",
    "ForgetRecordKeeper": ".records",
    "forget_record": ".records",
    "save_forget_record": ".records",
    "load_forget_record": ".records",
    "forget_records": ".records",
    "build_payload": ".payload",
    "session_payload": ".session",
    "artifact_sketch": ".payload",
    "detector_findings": ".payload",
    "ifc_decisions": ".payload",
    "page_server": ".serve",
    "render_html": ".page",
    "layout": ".layout",
    "UnknownEvent": ".errors",
    "ViewError": ".errors",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
