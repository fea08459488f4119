"""Browser tests of the ``unsee view`` page: headless Chromium runs the page.

Never skipped: without Chromium they fail with the harness's error naming the
Debian package ``chromium``. The page reports what Cytoscape holds in the
``data-*`` attributes of ``#unsee-stats``; the URL hash drives the start mode
(``mode=``), a turn expansion (``turn=``) and the side panel (``node=``).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest

from unsee.plugins.view.page import render_html

from .chromium import DevTools, dump_dom, file_url, screenshot
from .payloads import (CLOSURE, HOSTILE_TEXT, RECONCILED_ARGS, large_payload, parent_links, reconciled_payload,
                       small_payload)


class _Page(HTMLParser):
    """Collects the stats attributes, the <title>, every tag name and the side panel's text."""

    def __init__(self) -> None:
        super().__init__()
        self.stats: dict[str, str | None] = {}
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.title = ""
        self.panel = ""
        self._where: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if a.get("id") == "unsee-stats":
            self.stats = a
        if tag in ("title", "aside"):
            self._where.append(tag)

    def handle_endtag(self, tag):
        if self._where and self._where[-1] == tag:
            self._where.pop()

    def handle_data(self, data):
        if "title" in self._where:
            self.title += data
        if "aside" in self._where:
            self.panel += data


def _open(tmp_path: Path, payload: dict, name: str, fragment: str = "", budget_ms: int = 5000) -> _Page:
    html_path = tmp_path / f"{name}.html"
    html_path.write_text(render_html(payload), encoding="utf-8")
    page = _Page()
    page.feed(dump_dom(html_path, budget_ms=budget_ms, fragment=fragment))
    assert page.stats, "no #unsee-stats in the DOM dump"
    assert page.stats.get("data-error") is None, page.stats["data-error"]
    assert page.stats.get("data-ready") == "1", "view.js did not finish"
    return page


def _int(page: _Page, key: str) -> int:
    return int(page.stats[f"data-{key}"])


def test_small_session_expanded(tmp_path):
    payload = small_payload()
    arts = payload["graph"]["artifacts"]
    page = _open(tmp_path, payload, "small", fragment="node=" + quote("tr-1"))
    assert _int(page, "nodes") == len(arts)
    assert _int(page, "edges") == parent_links(arts)
    assert _int(page, "highlighted") == len(CLOSURE)
    assert _int(page, "checkpoints") == len(payload["graph"]["checkpoints"])
    assert _int(page, "collapsed") == 0
    f = payload["forget"]
    assert _int(page, "before-nodes") == len(f["before"]["artifacts"])
    assert _int(page, "before-edges") == parent_links(f["before"]["artifacts"])
    assert _int(page, "before-closure") == len(CLOSURE)
    assert _int(page, "after-nodes") == len(f["after"]["artifacts"])
    assert _int(page, "after-edges") == parent_links(f["after"]["artifacts"])
    # a forget without a reconciliation (a record written before it existed): nothing drawn, no rows
    assert "reconciliation" not in f["outcome"]
    assert (_int(page, "compensations"), _int(page, "left"), _int(page, "reconciliation-rows")) == (0, 0, 0)
    # the hostile text is shown as text in the panel, never parsed as markup
    assert page.stats["data-selected"] == "tr-1"
    assert HOSTILE_TEXT in page.panel and "web:evil" in page.panel and "[3, 20)" in page.panel
    assert '"tool":"fetch"' in page.panel  # attrs, as JSON text
    assert not [t for t, _ in page.tags if t in ("img", "iframe", "object", "embed")]
    assert sum(1 for t, _ in page.tags if t == "script") == 3
    assert page.title == "unsee view: " + payload["session_id"]  # literally, not 'pwned'


def test_text_absent_without_content(tmp_path):
    payload = small_payload()
    payload["content_included"] = False
    for a in payload["graph"]["artifacts"]:
        a["text"] = None
    # an orphaned store item after a fork (issue 30): drawn on its write, listed above the graph
    payload["orphaned_memory"] = [{"write_id": "ui-1", "namespace": "customers/<b>dana</b>", "key": "profile",
                                   "action": "flagged", "abandoned_turn": 1, "detected_turn": 2, "writer": None,
                                   "read_by": ["t2"], "restored": None}]
    page = _open(tmp_path, payload, "notext", fragment="node=ui-1")
    assert "payload text not included (use --content)" in page.panel
    assert _int(page, "orphaned") == 1 and "flagged: customers/<b>dana</b>/profile" in page.panel
    assert "pay the invoice" not in page.panel


def test_a_forgets_reconciliation_is_drawn_on_its_before_graph_and_listed(tmp_path):
    """A compensation is a node linked from the orphaned call it undoes, a call nobody can undo is
    marked, each item is a row of the summary; the page shows names and states, never what the
    calls were made with."""
    payload = reconciled_payload(content=True)
    hostile = payload["forget"]["outcome"]["reconciliation"][0]
    hostile["runs"] = "reverse_refund" + HOSTILE_TEXT  # a name is text on the page, never markup
    page = _open(tmp_path, payload, "reconciled")
    assert _int(page, "compensations") == 1 and _int(page, "compensation-edges") == 1
    assert _int(page, "left") == 1 and _int(page, "reconciliation-rows") == 3
    assert _int(page, "before-nodes") == 7  # the compensation is no artifact of the graph before
    html_path = tmp_path / "reconciled.html"
    dom = dump_dom(html_path)
    rows = re.findall(r'<li class="reconciliation-row">(.*?)</li>', dom)
    assert rows == ["compensate · issue_refund → reverse_refund&lt;img src=x onerror=document.title='pwned'&gt;"
                    " · done · call call-1",
                    "run · issue_refund → issue_refund · planned",
                    "report · remember → nobody (undo it by hand) · left · call call-2"]
    assert "reconciliation of the world" in dom and page.title != "pwned"
    assert not [t for t, _ in page.tags if t in ("img", "iframe", "object", "embed")]
    assert RECONCILED_ARGS not in html_path.read_text() and RECONCILED_ARGS not in dom
    # a click on the compensation shows its item: what it runs, its state, the call it undoes
    with DevTools() as b:
        b.open(file_url(html_path))
        b.wait_for("!!document.getElementById('unsee-stats') && "
                   "document.getElementById('unsee-stats').getAttribute('data-ready') === '1'", "the page")
        x, y = b.evaluate("""(function () {
            var box = document.getElementById('cy-before'), cy = box._cyreg.cy;
            box.scrollIntoView({block: 'center'});
            var p = cy.getElementById('rec\u241frec-comp').renderedPosition(), r = box.getBoundingClientRect();
            return [r.left + p.x, r.top + p.y]; })()""")
        b.click_at(x, y)
        panel = b.wait_for("(document.getElementById('panel').textContent.indexOf('rec-comp') >= 0) && "
                           "document.getElementById('panel').textContent", "the item in the panel")
    assert "compensation rec-comp" in panel and "reverse_refund" in panel and "call-1" in panel
    assert "done" in panel and RECONCILED_ARGS not in panel


def test_small_session_collapsed(tmp_path):
    payload = small_payload()
    payload["collapse"] = True
    page = _open(tmp_path, payload, "small-collapsed")
    turns = payload["graph"]["layout"]["turns"]
    assert _int(page, "collapsed") == 1
    assert _int(page, "nodes") == len(turns) == 3
    assert _int(page, "edges") == len(payload["graph"]["layout"]["turn_edges"]) == 2
    assert _int(page, "highlighted") == 2  # turns 1 and 2 hold the closure
    # a turn expands on demand (the same code path as a click on the turn node)
    page = _open(tmp_path, payload, "small-turn", fragment="turn=turn-1")
    assert _int(page, "collapsed") == 0 and _int(page, "nodes") == len(payload["graph"]["artifacts"])
    assert "Turn 1" in page.panel


def test_small_session_screenshot(tmp_path):
    html_path = tmp_path / "shot.html"
    html_path.write_text(render_html(small_payload()), encoding="utf-8")
    png = screenshot(html_path, tmp_path / "shot.png", size=(1400, 900))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """The 10 000-artifact payload (built once for the module)."""
    return large_payload(10_000), tmp_path_factory.mktemp("big")


def test_10k_artifacts_collapsed(big):
    payload, tmp_path = big
    arts = payload["graph"]["artifacts"]
    page = _open(tmp_path, payload, "big", budget_ms=15000)
    turns = {a["turn"] for a in arts}
    assert _int(page, "collapsed") == 1 and _int(page, "nodes") == len(turns) == 1000
    assert _int(page, "edges") == len(payload["graph"]["layout"]["turn_edges"])
    closure_turns = {a["turn"] for a in arts if a["id"] in set(payload["target"]["closure"])}
    assert _int(page, "highlighted") == len(closure_turns)
    png = screenshot(tmp_path / "big.html", tmp_path / "big.png")
    assert png.stat().st_size > 10_000


def test_10k_artifacts_expanded(big):
    payload, tmp_path = big
    arts = payload["graph"]["artifacts"]
    page = _open(tmp_path, payload, "big-expanded", fragment="mode=expanded", budget_ms=15000)
    assert _int(page, "collapsed") == 0
    assert _int(page, "nodes") == len(arts)
    assert _int(page, "edges") == parent_links(arts)
    assert _int(page, "highlighted") == len(payload["target"]["closure"])


def test_stats_report_errors(tmp_path):
    """A payload the page cannot draw is reported in data-error, not silently shown empty."""
    html_path = tmp_path / "broken.html"
    html_path.write_text(render_html({"version": 1, "graph": {"artifacts": [{"id": "a", "parents": 7}]}}),
                         encoding="utf-8")
    page = _Page()
    page.feed(dump_dom(html_path))
    assert page.stats.get("data-ready") == "1"
    assert re.search(r"\S", page.stats.get("data-error") or "")
