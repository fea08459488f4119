"""Render a provenance graph as Mermaid, Graphviz dot or JSON (ids only, no content)."""

from __future__ import annotations

import json
from typing import Any

from .graph import ProvenanceGraph

_SHAPES = {
    "user_input": ("([", "])"), "memory_read": ("[(", ")]"), "tool_return": ("[/", "/]"),
    "prompt_block": ("[", "]"), "model_turn": ("{{", "}}"), "summary": ("[[", "]]"),
    "state_write": ("[\\", "\\]"),
}


def to_json(g: ProvenanceGraph, highlight: frozenset[str] = frozenset()) -> dict[str, Any]:
    return {
        "session_id": g.session_id,
        "artifacts": [
            {**a.model_dump(mode="json", exclude={"session_id"}), "tainted": a.id in highlight} for a in g
        ],
        "checkpoints": [c.model_dump(mode="json", exclude={"session_id"}) for c in g.checkpoints],
    }


def to_mermaid(g: ProvenanceGraph, highlight: frozenset[str] = frozenset()) -> str:
    lines = ["flowchart TD"]
    ids = {a.id: f"n{i}" for i, a in enumerate(g)}
    for a in g:
        left, right = _SHAPES.get(a.type.value, ("[", "]"))
        lines.append(f'  {ids[a.id]}{left}"{a.type.value}<br/>{a.id}<br/>step {a.step}"{right}')
    for a in g:
        for p in g.inputs(a.id):
            if p in ids:
                lines.append(f"  {ids[p]} --> {ids[a.id]}")
    if highlight:
        lines.append("  classDef tainted fill:#f88,stroke:#a00")
        marked = ",".join(ids[x] for x in ids if x in highlight)
        if marked:
            lines.append(f"  class {marked} tainted")
    return "\n".join(lines) + "\n"


def to_dot(g: ProvenanceGraph, highlight: frozenset[str] = frozenset()) -> str:
    lines = [f'digraph "{g.session_id}" {{', "  rankdir=TB;", "  node [shape=box, fontsize=10];"]
    for a in g:
        style = ', style=filled, fillcolor="#ff8888"' if a.id in highlight else ""
        lines.append(f'  "{a.id}" [label="{a.type.value}\\n{a.id}\\nstep {a.step}"{style}];')
    for a in g:
        for p in g.inputs(a.id):
            if p in g:
                lines.append(f'  "{p}" -> "{a.id}";')
    lines.append("}")
    return "\n".join(lines) + "\n"


FORMATS = {"mermaid": to_mermaid, "dot": to_dot, "json": lambda g, h=frozenset(): json.dumps(to_json(g, h), indent=1) + "\n"}
