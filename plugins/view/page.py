"""The self-contained HTML page of ``unsee view``.

The page shows one session's provenance graph: artifacts as nodes laid out by
step (one lane per artifact type), parent links as arrows, checkpoints as
markers on the time axis, the taint closure of a target (``target``) in red,
artifacts with detector findings or IFC decisions flagged, and, when the
payload has a forget event, its plan/outcome summary with the before and
after graphs side by side, and its reconciliation of the world (one row per
item; compensations drawn on the before graph, from the calls they undo). Large sessions can be collapsed to one node per
turn. Clicking a node shows its metadata in a side panel.

Everything (Cytoscape.js, the page's own JS and CSS, the data) is inlined;
the page loads nothing from the network, and its Content-Security-Policy
forbids it to. The page carries no payload text unless the payload has it
(artifact ``text`` is only shown when it is non-null, i.e. when the user
asked for texts with ``--content``); what it always carries is the metadata
of the payload: ids, types, keyed hashes, labels, findings and decisions.
"""

from __future__ import annotations

import html
import json
import re
from importlib.resources import files
from typing import Any

_ASSETS = ("cytoscape.min.js", "view.js", "view.css", "page.html")
_MARKER = re.compile(r"<!--UNSEE:([A-Z_]+)-->")
_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_JSON_UNSAFE = re.compile("[<>&\u2028\u2029]")


def read_asset(name: str) -> str:
    """The text of one file of ``unsee.plugins.view/assets`` (package data)."""
    return (files("unsee.plugins.view") / "assets" / name).read_text(encoding="utf-8")


def embed_json(payload: Any) -> str:
    """``payload`` as JSON that is safe inside ``<script type="application/json">``.

    ``<``, ``>``, ``&``, U+2028 and U+2029 are written as ``\\uXXXX`` escapes
    (inside JSON strings only: JSON has them nowhere else), so no string can
    close the script element or open a comment. ``JSON.parse`` reads it back
    unchanged.
    """
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _JSON_UNSAFE.sub(lambda m: _JSON_ESCAPES[m.group(0)], text)


def _inline(name: str, closing: str) -> str:
    text = read_asset(name)
    if closing in text.lower() or "<!--" in text:
        raise ValueError(f"asset {name} contains {closing!r} or '<!--': it cannot be inlined")
    return text


def render_html(payload: dict[str, Any]) -> str:
    """The complete HTML page for ``payload`` (the ``unsee view`` data, version 1).

    The template ``assets/page.html`` gets Cytoscape, ``view.js`` and
    ``view.css`` inlined and the payload embedded as JSON in
    ``<script type="application/json" id="unsee-data">`` (see
    :func:`embed_json`). The result references no external URL.
    """
    title = f"unsee view: {payload.get('session_id', '')}"
    parts = {
        "TITLE": html.escape(title, quote=True),
        "STYLE": _inline("view.css", "</style"),
        "CYTOSCAPE": _inline("cytoscape.min.js", "</script"),
        "SCRIPT": _inline("view.js", "</script"),
        "DATA": embed_json(payload),
    }
    # one pass: text put in by a substitution is never searched for markers
    return _MARKER.sub(lambda m: parts[m.group(1)], read_asset("page.html"))
