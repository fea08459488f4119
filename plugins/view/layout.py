"""Node positions for ``unsee view``: the session graph laid out by step.

The browser draws with Cytoscape's ``preset`` layout, so every position is
computed here, once, in O(artifacts + parent links): the page does no O(n^2)
work even at tens of thousands of artifacts.

* x = ``step * DX``; y = one horizontal lane per artifact type, in
  :data:`LANES` order (unknown types get extra lanes after these, by name).
  Several artifacts at the same (step, lane) are stacked by a small offset.
* checkpoints are markers on the time axis: a row above the lanes, x = step.
* turns: one node per turn (``turn-<n>``) at the turn's first step, with the
  parent links between turns aggregated (with counts). They are always
  returned so the page can toggle; ``collapse`` only says how it starts.

The function is pure: it reads nothing but its arguments and returns plain
dicts/lists, ready for ``json.dumps``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

LANES: tuple[str, ...] = (
    "user_input",
    "memory_read",
    "tool_return",
    "prompt_block",
    "model_turn",
    "reply",
    "plan",
    "tool_call",
    "summary",
    "memory_write",
    "state_write",
)
DX = 100  # px between consecutive steps
DY = 90  # px between lanes
STACK = 14  # px between artifacts sharing a (step, lane) cell
CHECKPOINT_ROW = -DY  # y of the checkpoint markers (above lane 0)
TURN_ROW = 0  # y of the turn nodes when collapsed


def _num(value: Any, default: float = 0) -> float:
    """A finite number from ``value`` (ints stay ints), else ``default``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    if value != value or value in (float("inf"), float("-inf")):
        return default
    return value


def _turn_key(artifact: dict[str, Any]) -> str:
    turn = artifact.get("turn")
    return f"turn-{turn}" if isinstance(turn, int) and not isinstance(turn, bool) else "turn-none"


def _lane_order(artifacts: list[dict[str, Any]]) -> list[str]:
    present = {str(a.get("type") or "unknown") for a in artifacts}
    known = [t for t in LANES if t in present]
    return known + sorted(present.difference(LANES))


def _stack_offset(count: int) -> float:
    """The offset between stacked artifacts so that a cell stays inside its lane."""
    if count <= 1:
        return 0
    return min(STACK, (DY - 30) / (count - 1))


def _positions(artifacts: list[dict[str, Any]], lane_y: dict[str, float]) -> dict[str, dict[str, float]]:
    cells: dict[tuple[float, str], list[str]] = {}
    for a in artifacts:
        cells.setdefault((_num(a.get("step")), str(a.get("type") or "unknown")), []).append(str(a["id"]))
    out: dict[str, dict[str, float]] = {}
    for (step, lane), ids in cells.items():
        off = _stack_offset(len(ids))
        for k, node_id in enumerate(ids):
            # stacked cells fan out a little to the right as well, so each stays clickable
            out[node_id] = {"x": step * DX + k * off / 3, "y": lane_y[lane] + k * off}
    return out


def _checkpoints(checkpoints: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    seen: dict[float, int] = {}
    out: dict[str, dict[str, float]] = {}
    for c in checkpoints:
        step = _num(c.get("step"))
        k = seen[step] = seen.get(step, -1) + 1  # several at one step sit side by side
        out[str(c["id"])] = {"x": step * DX + k * STACK, "y": CHECKPOINT_ROW}
    return out


def _turns(
    artifacts: list[dict[str, Any]], closure: set[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    turns: dict[str, dict[str, Any]] = {}
    turn_of: dict[str, str] = {}
    for a in artifacts:
        key = _turn_key(a)
        turn_of[str(a["id"])] = key
        t = turns.get(key)
        step = _num(a.get("step"))
        if t is None:
            turn = a.get("turn") if key != "turn-none" else None
            t = turns[key] = {"id": key, "turn": turn, "count": 0, "types": [], "tainted": False,
                              "first_step": step, "internal_edges": 0}
        t["count"] += 1
        t["first_step"] = min(t["first_step"], step)
        kind = str(a.get("type") or "unknown")
        if kind not in t["types"]:
            t["types"].append(kind)
        if str(a["id"]) in closure:
            t["tainted"] = True
    pairs: dict[tuple[str, str], int] = {}
    for a in artifacts:
        child = turn_of[str(a["id"])]
        for parent in dict.fromkeys(str(p) for p in a.get("parents") or ()):
            src = turn_of.get(parent)
            if src is None:
                continue
            if src == child:
                turns[child]["internal_edges"] += 1
            else:
                pairs[(src, child)] = pairs.get((src, child), 0) + 1
    nodes = sorted(turns.values(), key=lambda t: (t["turn"] is None, t["turn"] or 0))
    for t in nodes:
        t["x"], t["y"] = t["first_step"] * DX, TURN_ROW
    first = {t["id"]: t["first_step"] for t in nodes}
    edges = [
        {"id": f"te:{src}>{dst}", "source": src, "target": dst, "count": n,
         "span": abs(first[dst] - first[src])}
        for (src, dst), n in pairs.items()
    ]
    return nodes, edges


def layout(
    artifacts: list[dict[str, Any]],
    checkpoints: list[dict[str, Any]],
    collapse: bool,
    *,
    closure: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Positions of a session graph, laid out by step (see the module docstring).

    ``artifacts`` and ``checkpoints`` have the payload's shape (``id``, ``type``,
    ``parents``, ``turn``, ``step``; checkpoints ``id`` and ``step``).
    ``collapse`` is the mode the page starts in. ``closure`` (optional) marks
    the turns holding a tainted artifact (``turns[i]["tainted"]``).

    Returns ``{"dx", "dy", "collapsed", "lanes": [{"type", "y"}],
    "nodes": {id: {"x", "y"}}, "checkpoints": {id: {"x", "y"}},
    "turns": [{"id": "turn-<n>", "turn", "count", "types", "tainted",
    "first_step", "internal_edges", "x", "y"}],
    "turn_edges": [{"id", "source", "target", "count", "span"}]}``.
    """
    lanes = _lane_order(artifacts)
    lane_y = {t: i * DY for i, t in enumerate(lanes)}
    turns, turn_edges = _turns(artifacts, set(closure or ()))
    return {
        "dx": DX,
        "dy": DY,
        "collapsed": bool(collapse),
        "lanes": [{"type": t, "y": lane_y[t]} for t in lanes],
        "nodes": _positions(artifacts, lane_y),
        "checkpoints": _checkpoints(checkpoints),
        "turns": turns,
        "turn_edges": turn_edges,
    }


#: the items of a forget's reconciliation drawn as nodes of the graph before it (the others are rows)
DRAWN_ITEMS = ("compensation",)


def reconciliation_layout(items: list[dict[str, Any]], graph_layout: dict[str, Any]) -> dict[str, Any]:
    """Positions of a forget's compensations in the graph before it (``graph_layout``: that graph's
    :func:`layout`): a lane of their own below the others, each at the step of the orphaned call
    it undoes (its parent; one whose call is not in the graph sits after the last step), several
    at one step stacked. Returns ``{"y": the lane's y, "nodes": {item id: {"x", "y"}}}``."""
    nodes = graph_layout.get("nodes") or {}
    lanes = graph_layout.get("lanes") or []
    y = max((_num(lane.get("y")) for lane in lanes), default=-DY) + DY
    end = max((_num(p.get("x")) for p in nodes.values()), default=-DX) + DX
    cells: dict[float, list[str]] = {}
    for item in items:
        if item.get("type") not in DRAWN_ITEMS:
            continue
        parent = next((nodes[str(p)] for p in item.get("parents") or () if str(p) in nodes), None)
        cells.setdefault(_num(parent.get("x")) if parent else end, []).append(str(item["id"]))
    out: dict[str, dict[str, float]] = {}
    for x, ids in cells.items():
        off = _stack_offset(len(ids))
        for k, node_id in enumerate(ids):
            out[node_id] = {"x": x + k * off / 3, "y": y + k * off}
    return {"y": y, "nodes": out}
