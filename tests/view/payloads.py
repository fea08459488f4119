"""Hand-built ``unsee view`` payloads (version 1) for the page tests."""

from __future__ import annotations

from typing import Any

from unsee.plugins.view.layout import layout

HOSTILE_TEXT = "<img src=x onerror=document.title='pwned'>"
HOSTILE_SCRIPT = "</script><script>document.title='pwned'</script>"


def _art(aid: str, kind: str, turn: int, step: int, parents: list[str], **extra: Any) -> dict[str, Any]:
    a = {
        "id": aid, "type": kind, "parents": parents, "source_ids": [], "token_span": [step * 10, step * 10 + 8],
        "turn": turn, "step": step, "committed": True, "content_hash": f"hmac-sha256:{aid}",
        "labels": [], "text": None, "findings": [], "decisions": [],
    }
    a.update(extra)
    return a


def small_artifacts() -> list[dict[str, Any]]:
    """16 artifacts over 3 turns: stacked cells, an unknown type, a missing parent, hostile strings."""
    return [
        _art("ui-1", "user_input", 0, 1, [], text="pay the invoice"),
        _art("pb-1", "prompt_block", 0, 2, ["ui-1"]),
        _art("mt-1", "model_turn", 0, 3, ["pb-1"]),
        _art("pl-1", "plan", 0, 3, ["mt-1"]),
        _art("tc-1", "tool_call", 0, 4, ["mt-1"]),
        _art("tr-1", "tool_return", 1, 5, ["tc-1"], source_ids=["web:evil"], text=HOSTILE_TEXT,
             labels=["untrusted", HOSTILE_SCRIPT + "<!--"],
             attrs={"tool": "fetch", "note": HOSTILE_TEXT},
             findings=[{"detector": "signals", "score": 0.9, "reason": "instruction\u2028in data " + HOSTILE_SCRIPT,
                        "start": 3, "end": 20}]),
        _art("pb-2", "prompt_block", 1, 6, ["pb-1", "tr-1", "pb-1"]),
        _art("mt-2", "model_turn", 1, 7, ["pb-2"]),
        _art("tc-2", "tool_call", 1, 8, ["mt-2"],
             decisions=[{"decision": "block", "mode": "enforce", "tool": "send_money",
                         "sink": "send_money.recipient", "label": "untrusted:web:evil"}]),
        _art("tr-2", "tool_return", 2, 9, ["tc-2"]),
        _art("tr-3", "tool_return", 2, 9, ["tc-2"]),
        _art("mr-1", "memory_read", 2, 9, []),
        _art("pb-3", "prompt_block", 2, 10, ["pb-2", "tr-2", "tr-3", "mr-1"]),
        _art("mt-3", "model_turn", 2, 11, ["pb-3"]),
        _art("rp-1", "reply", 2, 12, ["mt-3"]),
        _art("mw-1", "memory_write", 2, 12, ["mt-3", "gone-1"]),
        _art("x-1", "mystery_type", 2, 13, ["rp-1"]),
    ]


CLOSURE = ["tr-1", "pb-2", "mt-2", "tc-2", "tr-2", "tr-3", "pb-3", "mt-3", "rp-1", "mw-1", "x-1"]
CHECKPOINTS = [
    {"id": "ckpt-0", "kind": "turn", "step": 0, "turn": 0, "token_offset": 0},
    {"id": "ckpt-1", "kind": "turn", "step": 5, "turn": 1, "token_offset": 50},
    {"id": "ckpt-2", "kind": "tool", "step": 9, "turn": 2, "token_offset": 90},
]


def parent_links(artifacts: list[dict[str, Any]]) -> int:
    """Distinct parent links whose parent is in ``artifacts`` (the edges the page draws)."""
    ids = {a["id"] for a in artifacts}
    return sum(len({p for p in a["parents"] if p in ids}) for a in artifacts)


def _graph(artifacts: list[dict[str, Any]], checkpoints: list[dict[str, Any]], collapse: bool = False,
           closure: list[str] | None = None) -> dict[str, Any]:
    return {"artifacts": artifacts, "checkpoints": checkpoints,
            "layout": layout(artifacts, checkpoints, collapse, closure=closure)}


def small_payload() -> dict[str, Any]:
    """A payload with a target, checkpoints, a forget event and texts (content_included)."""
    arts = small_artifacts()
    before = [dict(a, text=None) for a in arts]
    after = [a for a in before if a["id"] not in CLOSURE[:3]]
    after += [_art("pb-2b", "prompt_block", 1, 6, ["pb-1"]), _art("mt-2b", "model_turn", 1, 7, ["pb-2b"])]
    return {
        "version": 1, "session_id": "demo" + HOSTILE_SCRIPT, "generated_at": "2026-12-01T10:00:00Z",
        "content_included": True, "collapse": False,
        "target": {"entry": "tr-1", "tau": 2, "closure": CLOSURE, "source": "web:evil"},
        "graph": _graph(arts, CHECKPOINTS, closure=CLOSURE),
        "forget": {
            "event_id": "fe-1", "strategy": "B7", "committed": True, "tau": 2, "entry": "tr-1",
            "checkpoint": "ckpt-1", "closure": CLOSURE, "reason": "user request " + HOSTILE_SCRIPT,
            "raised_by": "user", "created_at": "2026-12-01T09:59:00Z", "entry_type": "tool_return",
            "checkpoint_kind": "turn", "erased_clean": True, "receipt": {"signature": "ed25519:" + HOSTILE_SCRIPT},
            "counts": {"transitions_replayed": 5, "tokens_reused": 120, "wall_time_s": 1.5},
            "outcome": {"rematerialised": ["pb-2", "mt-2", "pb-3", "mt-3", "rp-1"], "decoded": ["mt-2", "mt-3"],
                        "from_record": ["tr-2"], "executed": ["tc-2"],
                        "deferred": [{"tool": "send_money", "call_id": "call-7"}], "orphaned": []},
            "before": _graph(before, CHECKPOINTS),
            "after": _graph(after, CHECKPOINTS[:2]),
        },
    }


def large_payload(n: int = 10_000, per_turn: int = 10) -> dict[str, Any]:
    """``n`` artifacts, ``per_turn`` per turn, chained within and across turns; starts collapsed."""
    kinds = ("user_input", "prompt_block", "model_turn", "tool_call", "tool_return",
             "prompt_block", "model_turn", "plan", "reply", "memory_write")
    arts = []
    for i in range(n):
        turn, k = divmod(i, per_turn)
        parents = [f"a{i - 1}"] if i else []
        if k == 0 and i >= per_turn:
            parents.append(f"a{i - per_turn - 3}")  # a link from the middle of the previous turn
        arts.append(_art(f"a{i}", kinds[k % len(kinds)], turn, i, parents))
    closure = [f"a{i}" for i in range(n // 2, n // 2 + 250)]
    checkpoints = [{"id": f"ckpt-{t}", "kind": "turn", "step": t * per_turn, "turn": t, "token_offset": t}
                   for t in range(0, n // per_turn, 10)]
    return {
        "version": 1, "session_id": "large", "generated_at": "2026-12-01T10:00:00Z",
        "content_included": False, "collapse": True,
        "target": {"entry": closure[0], "tau": 2, "closure": closure, "source": None},
        "graph": _graph(arts, checkpoints, collapse=True, closure=closure),
        "forget": None,
    }


#: what a reconciliation item's tool was called with: a record never keeps it, the page never shows it
RECONCILED_ARGS = "card 4417-2231 refund 49.90"


def _sketch(aid: str, kind: str, step: int, parents: list[str]) -> dict[str, Any]:
    return {"id": aid, "seq": step, "type": kind, "parents": parents, "source_ids": [], "token_span": [0, 0],
            "turn": step // 3, "step": step, "committed": True}


def reconciled_record() -> Any:
    """A forget record whose plan reconciled the world: the refund its orphaned call ``call-1`` made
    undone by ``reverse_refund`` (done), a deferred ``issue_refund`` run (planned), and ``call-2``
    (``remember``) left to undo by hand; each item's sketch also holds fields a page must drop."""
    from unsee.plugins.view import ForgetRecord

    before = [_sketch("in-1", "user_input", 0, []), _sketch("mt-1", "model_turn", 1, ["in-1"]),
              _sketch("call-1", "tool_call", 2, ["mt-1"]), _sketch("tr-1", "tool_return", 3, ["call-1"]),
              _sketch("mt-2", "model_turn", 4, ["tr-1"]), _sketch("call-2", "tool_call", 5, ["mt-2"]),
              _sketch("rp-1", "reply", 6, ["mt-2"])]
    hidden = {"args": {"to": RECONCILED_ARGS}, "result": RECONCILED_ARGS}
    items = [
        {"id": "rec-comp", "type": "compensation", "parents": ["call-1"], "action": "compensate",
         "tool": "issue_refund", "runs": "reverse_refund", "state": "done", **hidden},
        {"id": "rec-run", "type": "deferred_run", "parents": [], "action": "run", "tool": "issue_refund",
         "runs": "issue_refund", "state": "planned", **hidden},
        {"id": "rec-left", "type": "left", "parents": ["call-2"], "action": "report", "tool": "remember",
         "runs": None, "state": "left", **hidden},
    ]
    return ForgetRecord(event_id="ev-r", session_id="s", strategy="B7", created_at="2026-12-01T00:00:00+00:00",
                        committed=True, tau=1, entry="in-1", closure=["in-1", "mt-1", "call-1", "tr-1", "mt-2"],
                        decoded=["mt-1"], before_artifacts=before, reconciliation=items,
                        deferred=[{"tool": "issue_refund", "status": "deferred"}],
                        orphaned=[{"tool": "issue_refund", "call_artifact_id": "call-1", "status": "orphaned"},
                                  {"tool": "remember", "call_artifact_id": "call-2", "status": "orphaned"}])


class SessionGraph(list):
    """The part of a provenance graph ``build_payload`` reads: artifacts, checkpoints, texts."""

    def __init__(self, artifacts: list[Any], session_id: str = "s", texts: dict[str, str] | None = None):
        super().__init__(artifacts)
        self.session_id, self.checkpoints, self._texts = session_id, [], texts or {}

    def content(self, aid: str) -> str | None:
        return self._texts.get(aid)


def reconciled_payload(content: bool = False) -> dict[str, Any]:
    """The page's data of :func:`reconciled_record`'s forget, built as ``unsee view --event`` builds it."""
    from unsee.middleware.records import Artifact, ArtifactType
    from unsee.plugins.view import build_payload

    after = SessionGraph([Artifact(id="in-1b", session_id="s", type=ArtifactType.USER_INPUT, step=0, seq=0),
                          Artifact(id="mt-1b", session_id="s", type=ArtifactType.MODEL_TURN, step=1, seq=1,
                                   parents=("in-1b",))])
    return build_payload(after, forget=reconciled_record(),
                         contents={"in-1b": "hello", "mt-1b": "a reply"} if content else None)
