"""Pure tests of the ``unsee view`` page: ``layout`` and ``render_html`` (no browser)."""

from __future__ import annotations

import copy
import json
import re

import pytest

from unsee.plugins.view.layout import CHECKPOINT_ROW, DX, DY, LANES, layout
from unsee.plugins.view.page import embed_json, read_asset, render_html

from .payloads import CHECKPOINTS, CLOSURE, HOSTILE_SCRIPT, HOSTILE_TEXT, small_artifacts, small_payload

DATA_RE = re.compile(r'<script type="application/json" id="unsee-data">(.*?)</script>', re.S)


def _lane(result: dict, kind: str) -> float:
    return next(lane["y"] for lane in result["lanes"] if lane["type"] == kind)


def test_layout_by_step_and_lane():
    arts = small_artifacts()
    out = layout(arts, CHECKPOINTS, False)
    assert [lane["type"] for lane in out["lanes"]] == [t for t in LANES if t not in ("summary", "state_write")] + [
        "mystery_type"]
    assert [lane["y"] for lane in out["lanes"]] == [i * DY for i in range(len(out["lanes"]))]
    pos = out["nodes"]
    assert set(pos) == {a["id"] for a in arts}
    for a in arts:
        if a["id"] not in ("tr-3",):
            assert pos[a["id"]] == {"x": a["step"] * DX, "y": _lane(out, a["type"])}, a["id"]
    # tr-2 and tr-3 share (step 9, tool_return): stacked by a small offset inside the lane
    assert pos["tr-3"] != pos["tr-2"]
    assert 0 < pos["tr-3"]["y"] - pos["tr-2"]["y"] < DY / 2
    # an unknown type gets a lane after the known ones
    assert pos["x-1"]["y"] > max(p["y"] for k, p in pos.items() if k != "x-1")
    assert out["checkpoints"] == {c["id"]: {"x": c["step"] * DX, "y": CHECKPOINT_ROW} for c in CHECKPOINTS}
    assert CHECKPOINT_ROW < 0 and out["collapsed"] is False


def test_layout_stacks_many_inside_the_lane():
    arts = [{"id": f"p{i}", "type": "prompt_block", "parents": [], "turn": 0, "step": 4} for i in range(50)]
    arts.append({"id": "m", "type": "model_turn", "parents": [], "turn": 0, "step": 4})
    out = layout(arts, [], False)
    ys = [out["nodes"][f"p{i}"]["y"] for i in range(50)]
    assert len(set(ys)) == 50 and max(ys) < out["nodes"]["m"]["y"]


def test_layout_collapsed_by_turn():
    arts = small_artifacts()
    before = copy.deepcopy(arts)
    out = layout(arts, CHECKPOINTS, True, closure=CLOSURE)
    assert arts == before  # pure: the input is not touched
    assert out["collapsed"] is True
    turns = {t["id"]: t for t in out["turns"]}
    assert list(turns) == ["turn-0", "turn-1", "turn-2"]
    assert [turns[k]["count"] for k in turns] == [5, 4, 8]
    assert turns["turn-0"]["types"] == ["user_input", "prompt_block", "model_turn", "plan", "tool_call"]
    assert [turns[k]["tainted"] for k in turns] == [False, True, True]
    assert [(turns[k]["x"], turns[k]["first_step"]) for k in turns] == [(DX, 1), (5 * DX, 5), (9 * DX, 9)]
    edges = {(e["source"], e["target"]): e["count"] for e in out["turn_edges"]}
    # turn 0 -> 1: tc-1 -> tr-1, pb-1 -> pb-2 (listed twice, counted once); 1 -> 2: tc-2 -> tr-2, tr-3, pb-2 -> pb-3
    assert edges == {("turn-0", "turn-1"): 2, ("turn-1", "turn-2"): 3}
    # inside turns: turn 0 has pb-1, mt-1, pl-1, tc-1 links; the absent parent gone-1 is ignored
    assert [turns[k]["internal_edges"] for k in turns] == [4, 3, 7]
    assert json.loads(json.dumps(out)) == out  # plain data
    assert not layout(arts, CHECKPOINTS, True)["turns"][1]["tainted"]  # no closure given


def test_layout_odd_input():
    out = layout([{"id": "a", "type": None, "parents": ["a", "zz"]}, {"id": "b", "type": "reply", "step": "x"}], [], True)
    assert out["nodes"]["a"]["x"] == 0 and out["nodes"]["b"]["x"] == 0
    assert [t["id"] for t in out["turns"]] == ["turn-none"]


def test_embed_json_round_trips_and_cannot_break_out():
    tricky = {"a": HOSTILE_SCRIPT, "b": "<!-- x --> <\\/script> &amp; \u2028\u2029", "c": [HOSTILE_TEXT]}
    text = embed_json(tricky)
    assert json.loads(text) == tricky
    for bad in ("<", ">", "&", "\u2028", "\u2029"):
        assert bad not in text


def test_render_html_escapes_hostile_strings():
    payload = small_payload()
    out = render_html(payload)
    data = DATA_RE.findall(out)
    assert len(data) == 1 and json.loads(data[0]) == payload
    # the only closing script tags are the page's own three; no comment opener anywhere
    assert out.lower().count("</script") == 3
    assert "<!--" not in out and "\u2028" not in out and "\u2029" not in out
    assert HOSTILE_SCRIPT not in out and HOSTILE_TEXT not in out
    title = re.search(r"<title>(.*?)</title>", out).group(1)
    assert "<" not in title and "unsee view: demo&lt;/script&gt;" in title


def test_render_html_references_no_external_url():
    out = render_html(small_payload())
    assert not re.search(r"""\b(?:src|href|action|poster|srcset)\s*=\s*["']?\s*(?:https?:)?//""", out, re.I)
    assert not re.search(r"""url\(\s*["']?\s*(?:https?:)?//""", out, re.I)
    assert "@import" not in out and "<link" not in out.lower() and "<iframe" not in out.lower()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', out).group(1)
    assert "default-src 'none'" in csp and "http" not in csp


def test_assets_are_inlined():
    out = render_html(small_payload())
    cyto = read_asset("cytoscape.min.js")
    assert cyto in out and read_asset("view.js") in out and read_asset("view.css") in out
    version = re.search(r'\.version="(\d+\.\d+\.\d+)"', cyto).group(1)
    assert read_asset("README.md").splitlines()[0].startswith(f"cytoscape {version} ")
    licence = read_asset("cytoscape.LICENSE")
    assert "The Cytoscape Consortium" in licence and "Permission is hereby granted, free of charge" in licence
    assert 'id="unsee-stats"' in out and 'id="unsee-data"' in out


@pytest.mark.parametrize("collapse", [False, True])
def test_render_html_without_target_or_forget(collapse):
    arts = small_artifacts()
    payload = {"version": 1, "session_id": "s", "generated_at": "", "content_included": False, "collapse": collapse,
               "target": None, "forget": None,
               "graph": {"artifacts": arts, "checkpoints": [], "layout": layout(arts, [], collapse)}}
    assert json.loads(DATA_RE.findall(render_html(payload))[0]) == payload
