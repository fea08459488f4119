"""`unsee view` on a real session: the demo agent's, before and after its forget, in Chromium.

The page is rendered for the recorded demo session and checked in headless
Chromium (Debian's ``chromium``; ``.ci/run`` installs it): node and edge counts
equal the provenance graph's, I(z) is highlighted, and after the forget no
copy of the target is in the page, even with ``--content``. Bad input is a
one-line error, exit 2, and writes nothing.
"""

from __future__ import annotations

import io
import json
import logging
import re
from pathlib import Path

import pytest
from rich.console import Console

from tests.support.cli_helpers import assert_one_line_error, run
from unsee.core import Unsee
from unsee.demo import SECRET, run_demo
from unsee.plugins.view import forget_records, load_forget_record, render_html

from .chromium import dump_dom, screenshot


def stats(dom: str) -> dict[str, str]:
    m = re.search(r'<div id="unsee-stats"([^>]*)>', dom)
    assert m, dom[:2000]
    return dict(re.findall(r'data-([a-z-]+)="([^"]*)"', m.group(1)))


def edges_of(g) -> int:
    ids = {a.id for a in g}
    return sum(1 for a in g for p in a.parents if p in ids)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo session recorded (no forget yet) and, in a second home, recorded and forgotten."""
    base = tmp_path_factory.mktemp("view")
    quiet = Console(file=io.StringIO())
    kept = run_demo(home=base / "kept", session="demo", jaeger_json=base / "k.json", console=quiet, forget=False)
    gone = run_demo(home=base / "gone", session="demo", jaeger_json=base / "g.json", console=quiet, forget=True)
    return {"base": base, "kept": kept, "gone": gone}


def test_the_page_of_a_session_shows_its_graph_and_the_targets_closure(demo, capsys):
    home, out = demo["base"] / "kept", demo["base"] / "kept.html"
    code, stdout, err = run(capsys, "--home", home, "view", "demo", "--target", SECRET, "-o", out)
    assert code == 0, err
    assert str(out) in stdout and "no payload text" in stdout
    u = Unsee(home=home)
    g = u.graph("demo")
    closure = g.taint(g.locate(SECRET))
    u.close()
    html = out.read_text()
    assert SECRET not in html  # no payload text by default, though the session still holds it
    s = stats(dump_dom(out))
    assert "error" not in s and s["ready"] == "1"
    assert int(s["nodes"]) == len(g) and int(s["edges"]) == edges_of(g)
    assert int(s["highlighted"]) == len(closure) > 1
    assert int(s["checkpoints"]) == len(g.checkpoints)
    png = screenshot(out, demo["base"] / "kept.png")
    assert png.stat().st_size > 10_000


def test_content_is_carried_only_when_asked(demo, capsys):
    home, out = demo["base"] / "kept", demo["base"] / "content.html"
    assert run(capsys, "--home", home, "view", "demo", "--content", "-o", out)[0] == 0
    assert SECRET in out.read_text()  # asked for, and the session has not forgotten it


def test_the_demo_writes_the_page_of_its_forget(demo):
    page = Path(demo["gone"]["view"])
    assert page.is_file() and page.name == "unsee-demo-view.html"
    event = demo["gone"]["report"]["event_id"]
    s = stats(dump_dom(page))
    assert "error" not in s
    rec = load_forget_record(demo["base"] / "gone", event)
    assert int(s["before-nodes"]) == len(rec.before_artifacts) and int(s["before-closure"]) == len(rec.closure)
    u = Unsee(home=demo["base"] / "gone")
    g = u.graph("demo")
    u.close()
    assert int(s["after-nodes"]) == int(s["nodes"]) == len(g)
    assert SECRET not in page.read_text()


def test_after_a_forget_the_page_never_carries_the_target(demo, capsys):
    home, out = demo["base"] / "gone", demo["base"] / "gone.html"
    event = demo["gone"]["report"]["event_id"]
    code, _, err = run(capsys, "--home", home, "view", "demo", "--event", event, "--content", "-o", out)
    assert code == 0, err
    html = out.read_text()
    # (the card's first group alone, as a formatter might split it; not inside the page's random hex ids)
    assert SECRET not in html and not re.search(r"(?<![0-9a-f])4417(?![0-9a-f])", html)
    assert json.loads((home / "forgets" / f"{event}.json").read_text())["closure"]
    # the record keeps ids only: no text, no keyed hash, no tool arguments
    raw = (home / "forgets" / f"{event}.json").read_text()
    assert SECRET not in raw and "hmac-sha256" not in raw and "content_hash" not in raw
    s = stats(dump_dom(out))
    assert "error" not in s and int(s["before-closure"]) == len(load_forget_record(home, event).closure)


def test_a_forget_keeps_one_record_per_event_with_its_outcome(demo):
    recs = forget_records(demo["base"] / "gone", "demo")
    assert [r.event_id for r in recs] == [demo["gone"]["report"]["event_id"]]
    r = recs[0]
    assert r.committed and r.strategy == "B7" and r.entry in r.closure and r.entry_type == "tool_return"
    assert r.rematerialised or r.decoded
    assert {a["id"] for a in r.before_artifacts} >= set(r.closure)
    assert r.counts["transitions_replayed"] > 0
    # the records are files of the home: the byte-level audit reads them too, and finds no copy
    u = Unsee(home=demo["base"] / "gone")
    try:
        report = u.audit("demo", SECRET)
    finally:
        u.close()
    from unsee.plugins.erasure.eraser import HomeRoute

    assert any(p.parent.name == "forgets" for p in HomeRoute(demo["base"] / "gone", []).files())
    assert report.clean


def test_a_record_that_cannot_be_written_never_fails_the_forget(tmp_path, caplog):
    from unsee.demo import open_demo
    from unsee.plugins.forget import RevocationEvent

    home = tmp_path / "h"
    run_demo(home=home, session="demo", jaeger_json=tmp_path / "t.json", console=Console(file=io.StringIO()),
             forget=False)
    (home / "forgets").write_text("a file where the folder goes")
    u, agent, _, conn = open_demo(home)
    try:
        with caplog.at_level(logging.WARNING, logger="unsee"):
            report = u.forget("demo", RevocationEvent(target=SECRET), agent=agent)
    finally:
        conn.close()
        u.close()
    assert report.committed and report.erased_clean
    assert "could not keep the record" in caplog.text


@pytest.mark.parametrize("args", [["view", "no-such-session"], ["view", "demo", "--target", "  "],
                                  ["view", "demo", "--target", "never said"], ["view", "demo", "--event", "nope"],
                                  ["view", "demo", "--event", "../../etc/passwd"],
                                  ["view", "demo", "--source", "user"]])
def test_bad_input_is_a_one_line_error_and_writes_nothing(demo, capsys, tmp_path, args):
    out = tmp_path / "x.html"
    code, _, err = run(capsys, "--home", demo["base"] / "kept", *args, "-o", out)
    assert code == (1 if "never said" in args else 2), err  # (a target nowhere: the answer is "no")
    assert_one_line_error(err)
    assert not out.exists()


def test_render_html_of_the_payload_is_the_page_the_command_writes(demo):
    u = Unsee(home=demo["base"] / "kept")
    payload = u.view("demo", target=SECRET)
    u.close()
    assert payload["target"]["entry"] in payload["target"]["closure"]
    assert payload["content_included"] is False and all(a["text"] is None for a in payload["graph"]["artifacts"])
    assert "<html" in render_html(payload).lower()
