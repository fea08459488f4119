"""The page's data: a session graph, a target's closure, findings, decisions, a forget (pure).

:func:`build_payload` takes what the facade read (a provenance graph, its
contents only when the user asked for them, IFC decisions from the recorded
spans, detector findings, a forget record) and returns the JSON the page
renders. It reads nothing itself; tests call it with hand-built graphs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from .layout import layout, reconciliation_layout
from .records import ForgetRecord, checkpoint_sketch

#: a session larger than this starts collapsed by turn
COLLAPSE_AT = 1500
#: the span event an IFC decision is recorded as (plugins/ifc/adapter.py)
IFC_EVENT = "unsee.ifc.decision"
#: observations a detector screens (user inputs are the user's own words)
SCREENED = ("tool_return", "memory_read")


def artifact_sketch(a: Any, *, text: str | None = None, findings: Iterable[dict] = (),
                    decisions: Iterable[dict] = ()) -> dict[str, Any]:
    """One artifact as the page shows it: its record fields, and its text only when given."""
    d = a.model_dump(mode="json", exclude={"session_id", "trace_id", "span_id", "seq"})
    d["token_span"] = list(d["token_span"])
    d["text"] = text
    d["findings"] = list(findings)
    d["decisions"] = list(decisions)
    return d


def ifc_decisions(spans: Iterable[Any]) -> dict[str, list[dict[str, Any]]]:
    """IFC decisions recorded on ``spans``, by the artifact ids they name as evidence."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for span in spans:
        for ev in getattr(span, "events", None) or ():
            if ev.get("name") != IFC_EVENT:
                continue
            at = ev.get("attributes") or {}
            decision = {"decision": at.get("unsee.ifc.action"), "mode": at.get("unsee.ifc.mode"),
                        "tool": at.get("unsee.ifc.tool"), "sink": ", ".join(at.get("unsee.ifc.sinks") or ()),
                        "label": ", ".join(at.get("unsee.ifc.labels") or ())}
            for aid in at.get("unsee.ifc.evidence") or ():
                out[aid].append(decision)
    return dict(out)


def detector_findings(graph: Any, detect: Callable[[str, str], Iterable[Any]]) -> dict[str, list[dict[str, Any]]]:
    """``detect(text, artifact_id)`` over the graph's observations of the world; findings by
    artifact id (detector, score, reason and offsets: never the flagged text)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for a in graph:
        if a.type.value not in SCREENED:
            continue
        text = graph.content(a.id)
        if not text:
            continue
        found = [{"detector": f.detector, "score": round(float(f.score), 3), "reason": f.reason,
                  "start": f.start, "end": f.end} for f in detect(text, a.id)]
        if found:
            out[a.id] = found
    return out


def _graph_part(artifacts: list[dict[str, Any]], checkpoints: list[dict[str, Any]], collapse: bool,
                closure: Iterable[str]) -> dict[str, Any]:
    return {"artifacts": artifacts, "checkpoints": checkpoints,
            "layout": layout(artifacts, checkpoints, collapse, closure=closure)}


def _checkpoints(graph: Any) -> list[dict[str, Any]]:
    return [checkpoint_sketch(c) for c in graph.checkpoints]


#: recorded observations a replay feeds again verbatim (the entry is fed without the target)
_REFED = ("user_input", "memory_read", "prompt_block")


def before_outcomes(record: ForgetRecord) -> dict[str, list[str]]:
    """Every artifact of the graph before a forget, by what the forget did with it: ``prefix``
    (before tau: reused as is), ``sanitized`` (the entry, fed again without the target), the
    replay's own lists (``rematerialised``, ``decoded``, ``from_record``, a recorded call's
    return going with it), ``refed`` (recorded inputs fed again) and ``replaced`` (the rest of
    the suffix: the counterfactual made new artifacts in their place)."""
    arts = record.before_artifacts
    from_record = set(record.from_record)
    from_record |= {a["id"] for a in arts if a["type"] == "tool_return" and from_record & set(a["parents"])}
    listed = set(record.decoded) | set(record.rematerialised) | from_record
    out: dict[str, list[str]] = {k: [] for k in ("prefix", "sanitized", "refed", "replaced")}
    for a in arts:
        if a["id"] == record.entry:
            out["sanitized"].append(a["id"])
        elif a["step"] < record.tau:
            out["prefix"].append(a["id"])
        elif a["id"] in listed:
            continue
        elif a["type"] in _REFED:
            out["refed"].append(a["id"])
        else:
            out["replaced"].append(a["id"])
    return {**out, "rematerialised": list(record.rematerialised), "decoded": list(record.decoded),
            "from_record": sorted(from_record)}


#: what the page shows of a reconciliation item (``ForgetRecord.reconciliation``): ids, names, states
_ITEM_FIELDS = ("id", "type", "action", "tool", "runs", "state")


def reconciliation_items(record: ForgetRecord) -> list[dict[str, Any]]:
    """The forget's reconciliation of the world as the page shows it, one sketch per item: its key
    (``id``), ``type`` (``compensation``, ``deferred_run``, ``left``), ``parents`` (the orphaned
    call of the graph before the forget it undoes or leaves), ``action``, ``tool``, ``runs`` and
    ``state``; nothing else a record might hold (never arguments or results). A record written
    before reconciliation existed has none."""
    out = []
    for d in record.reconciliation:
        if not isinstance(d, Mapping) or d.get("id") is None:
            continue
        item = {k: (None if d.get(k) is None else str(d.get(k))) for k in _ITEM_FIELDS}
        item["parents"] = [str(p) for p in d.get("parents") or () if p is not None]
        out.append(item)
    return out


def forget_part(record: ForgetRecord, after: Any, collapse: bool) -> dict[str, Any]:
    """A forget's plan, outcome and graphs: ``before`` from its record, ``after`` the session now."""
    before = [{**a, "text": None, "findings": [], "decisions": []} for a in record.before_artifacts]
    after_arts = [artifact_sketch(a) for a in after]
    items = reconciliation_items(record)
    before_part = _graph_part(before, list(record.before_checkpoints), collapse, record.closure)
    before_part["layout"]["reconciliation"] = reconciliation_layout(items, before_part["layout"])
    return {
        "event_id": record.event_id, "strategy": record.strategy, "committed": record.committed,
        "raised_by": record.raised_by, "created_at": record.created_at, "tau": record.tau,
        "entry": record.entry, "entry_type": record.entry_type, "checkpoint": record.checkpoint,
        "checkpoint_kind": record.checkpoint_kind, "closure": list(record.closure),
        "erased_clean": record.erased_clean, "receipt": record.receipt, "counts": dict(record.counts),
        "outcome": {**before_outcomes(record), "executed": list(record.executed),
                    "deferred": [{"tool": e.tool, "call_id": e.call_artifact_id, "status": e.status}
                                 for e in record.deferred],
                    "orphaned": [{"tool": e.tool, "call_id": e.call_artifact_id, "status": e.status}
                                 for e in record.orphaned],
                    "reconciliation": items},
        "before": before_part,
        "after": _graph_part(after_arts, _checkpoints(after), collapse, ()),
    }


def build_payload(graph: Any, *, closure: Iterable[str] = (), entry: Any = None, source: str | None = None,
                  contents: Mapping[str, str] | None = None, findings: Mapping[str, list] | None = None,
                  decisions: Mapping[str, list] | None = None, forget: ForgetRecord | None = None,
                  collapse: bool | None = None, now: datetime | None = None,
                  orphaned: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The page's data for ``graph`` (see ``page.render_html``).

    ``closure``/``entry`` (an artifact): a target's I(z) and where it entered; ``contents``:
    artifact texts, only when the user asked for them (else no text is carried); ``findings``
    and ``decisions`` by artifact id; ``forget``: a forget record, shown with the graph before
    it and this graph after it; ``collapse``: start collapsed by turn (default: above
    ``COLLAPSE_AT`` artifacts); ``orphaned``: the session's orphaned memory after a fork
    (``OrphanedMemory`` records as JSON: ids, namespace, key, action; no value)."""
    closure = frozenset(closure)
    findings, decisions = findings or {}, decisions or {}
    arts = [artifact_sketch(a, text=(contents or {}).get(a.id) if contents is not None else None,
                            findings=findings.get(a.id, ()), decisions=decisions.get(a.id, ()))
            for a in graph]
    collapse = len(arts) > COLLAPSE_AT if collapse is None else bool(collapse)
    target = None
    if entry is not None:
        target = {"entry": entry.id, "tau": entry.step, "closure": sorted(closure), "source": source}
    return {
        "version": 1,
        "session_id": graph.session_id,
        "generated_at": (now or datetime.now(timezone.utc)).isoformat(timespec="seconds"),
        "content_included": contents is not None,
        "collapse": collapse,
        "target": target,
        "graph": _graph_part(arts, _checkpoints(graph), collapse, closure),
        "forget": forget_part(forget, graph, collapse) if forget is not None else None,
        "orphaned_memory": [orphan_sketch(o) for o in orphaned],
    }


#: what the page shows of an orphaned store item (never its value)
_ORPHAN_FIELDS = ("write_id", "key", "action", "policy", "restored", "abandoned_turn", "detected_turn",
                  "branch_checkpoint", "writer")


def orphan_sketch(o: Mapping[str, Any]) -> dict[str, Any]:
    """One orphaned store item as the page shows it: its write, namespace, key and fate."""
    d = {k: o.get(k) for k in _ORPHAN_FIELDS}
    d["namespace"] = "/".join(o.get("namespace") or ())
    d["read_by"] = list(o.get("read_by") or ())
    return d
