"""unsee's traces in a real trace UI: Arize Phoenix, read in headless Chromium as a person reads it.

Phoenix runs in its own process and virtualenv (``scripts/phoenix-up.sh``; ``make test`` starts
it, and CI fails without it). What reaches it is what a user sends:

- the demo session, recorded by ``unsee demo --model scripted --no-forget`` and sent by
  ``unsee export demo --otlp-endpoint <Phoenix's gRPC port> --protocol grpc``;
- Dana taking her card number back: ``u.forget`` on the demo's agent, the home's spans sent live
  over OTLP/HTTP (a ``BatchSpanProcessor`` on the home's tracer provider, as docs/jaeger.md shows),
  so the forget's own trace and its replay's agent spans arrive as they are made;
- a detector's late verdict: the injection scenario of the IFC tests (``tests/ifc``: a tool
  returns an injection, the agent follows it), then ``u.detect(timing="async", policy="auto").scan``,
  whose ``run_guardrail unsee.detector`` span and detector-raised forget go to Phoenix live too.

Every span carries ``openinference.project.name`` (``OTEL_RESOURCE_ATTRIBUTES``), so the run gets a
Phoenix project of its own. The test waits until Phoenix's REST API lists every span sent, then
asserts on what the rendered pages show (the DOM after React rendered it): the session found by
its conversation id, the forget's trace tree, a guardrail span's verdict. On a failure the page's
screenshot and DOM are saved next to the test's tmp_path. With ``UNSEE_DOCS_SCREENSHOT=1`` the
forget's trace view is also written to docs/img/phoenix-forget.png (docs/jaeger.md shows it).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.ifc_agents import ATTACKER, say, setup  # the injection scenario of the IFC and detector tests
from unsee.cli import main
from unsee.demo import SECRET, open_demo
from unsee.plugins.erasure import read_receipt
from unsee.plugins.forget import RevocationEvent

from .chromium import DevTools, DevToolsError

pytestmark = [pytest.mark.phoenix, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
DOC_SHOT = ROOT / "docs" / "img" / "phoenix-forget.png"
PHASES = ["locate", "plan", "replay", "commit", "erase", "receipt"]
CONV = "attributes['gen_ai']['conversation']['id']"  # Phoenix's filter nests a dotted key
WAIT = 90  # seconds for any one thing to show on a page (Phoenix's pages query GraphQL as they render)


def _get(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        if e.code == 404:  # the project is made by the first span that names it
            return None
        raise


def phoenix_spans(base: str, project: str) -> list[dict]:
    """Every span Phoenix holds in ``project`` (its REST API, page by page)."""
    out, cursor = [], None
    while True:
        page = _get(f"{base}/v1/projects/{project}/spans?limit=1000" + (f"&cursor={cursor}" if cursor else ""))
        if page is None:
            return out
        out += page["data"]
        if not (cursor := page.get("next_cursor")):
            return out


def wait_for_ingestion(base: str, project: str, sent: set[str], timeout: float = 180) -> list[dict]:
    """Poll until Phoenix lists every span id in ``sent`` (it ingests in the background)."""
    deadline = time.monotonic() + timeout
    while True:
        spans = phoenix_spans(base, project)
        missing = sent - {s["context"]["span_id"] for s in spans}
        if not missing:
            return spans
        if time.monotonic() > deadline:
            raise AssertionError(f"Phoenix holds {len(spans)} spans of {project} after {timeout}s; "
                                 f"{len(missing)} of the {len(sent)} sent are missing")
        time.sleep(1)


def _hex(span) -> str:
    return f"{span.context.span_id:016x}"


def send_live(provider, endpoint: str) -> InMemorySpanExporter:
    """Send a home's spans to ``endpoint`` as they end, as a user does (a ``BatchSpanProcessor`` with
    the OTLP/HTTP exporter); returns a copy of them kept here, to know what was sent."""
    kept = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint)))
    return kept


# -- reading Phoenix's pages -------------------------------------------------------------------
TABLE_ROWS = """(() => {
  const head = [...document.querySelectorAll('thead th')].map(th => th.innerText.trim());
  return [...document.querySelectorAll('tbody tr')].map(tr => {
    const row = {};
    [...tr.children].forEach((td, i) => { if (head[i]) row[head[i]] = td.innerText.trim(); });
    return row;
  });
})()"""
#: the trace tree of a trace's page: (nesting level, span name) per node, top to bottom (a node is a
#: div with the level in its style; the li around a node's children carries its parent's level)
TREE = """[...document.querySelectorAll('div[style*="--trace-tree-nesting-level"]')].map(el => [
  parseInt(el.style.getPropertyValue('--trace-tree-nesting-level')),
  (el.querySelector('span') || el).innerText.trim()])"""
#: the span details' attribute table: key -> value
ATTRIBUTES = """Object.fromEntries([...document.querySelectorAll('tr')]
  .map(tr => [...tr.querySelectorAll('td')].map(td => td.innerText.trim()))
  .filter(cells => cells.length >= 2 && /^[a-z_]+[.]/.test(cells[0])).map(cells => [cells[0], cells[1]]))"""


def collapse(b: DevTools, name: str) -> None:
    """Collapse the trace tree's node ``name`` by its disclosure arrow (shown when the mouse is over it)."""
    node = f"""[...document.querySelectorAll('div[style*="--trace-tree-nesting-level"]')]
      .find(n => (n.querySelector('span') || n).innerText.trim() === {json.dumps(name)})"""
    x, y = b.wait_for(f"(() => {{ const n = {node}; if (!n) return null; n.scrollIntoView({{block: 'nearest'}});"
                      " const r = n.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()",
                      f"the tree node {name}", WAIT)
    b.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
    bx, by = b.wait_for(f"(() => {{ const btn = {node}.querySelector('[data-testid=span-controls] button');"
                        " const r = btn && btn.getBoundingClientRect();"
                        " return r && r.width > 0 ? [r.left + r.width / 2, r.top + r.height / 2] : null; })()",
                        f"the collapse arrow of {name}", WAIT)
    b.click_at(bx, by)
    b.wait_for(f"{node}.querySelector('[data-expanded]').dataset.expanded === 'false'", f"{name} collapsed", WAIT)


def open_project(b: DevTools, base: str, project: str) -> None:
    """From Phoenix's project list, open ``project`` (its card is a link titled with its name)."""
    b.open(f"{base}/projects")
    b.click(f"a[title={json.dumps(project)}]", timeout=WAIT)
    b.wait_for_text("Spans", "Traces", "Sessions", timeout=WAIT)


def filter_spans(b: DevTools, condition: str, rows: int) -> list[dict]:
    """Type ``condition`` into the spans table's filter, press Enter, wait for ``rows`` rows."""
    b.wait_for(f"{TABLE_ROWS}.length > 0 && [...document.querySelectorAll('thead th')]"
               ".some(th => th.innerText.trim() === 'kind')", "the spans table", WAIT)
    b.focus(".cm-content", timeout=WAIT)  # the filter box (a CodeMirror editor)
    b.select_all()
    b.type(condition)
    b.wait_for(f"document.activeElement && document.activeElement.matches('.cm-content') && "
               f"document.activeElement.innerText.trim() === {json.dumps(condition)}",
               f"the filter box to hold {condition!r}", WAIT)
    # Enter runs the query; on a loaded machine the editor can take the key before its text is
    # the filter's, and the table then shows the unfiltered spans: Enter again, a few times
    ready = f"(() => {{ const r = {TABLE_ROWS}; return r.length == {rows} && r.every(x => x.name); }})()"
    for _ in range(3):
        b.press("Enter")
        try:
            b.wait_for(ready, f"{rows} rows for the filter {condition!r}", WAIT / 3)
            return b.evaluate(TABLE_ROWS)
        except DevToolsError:
            pass
    seen = b.evaluate(TABLE_ROWS)
    raise DevToolsError(f"{rows} rows for the filter {condition!r} never showed; the table has "
                        f"{len(seen)}: {[r.get('name') for r in seen][:20]}")


@contextlib.contextmanager
def evidence(b: DevTools, where: Path):
    """On a failure inside, save what the browser shows (PNG and DOM) under ``where``."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            where.mkdir(parents=True, exist_ok=True)
            b.screenshot(where / "phoenix-failure.png")
            (where / "phoenix-failure.html").write_text(b.dom(), encoding="utf-8")
            print(f"Phoenix page at the failure: {where / 'phoenix-failure.png'} and .html")
        raise


def test_phoenix_shows_the_session_its_forget_and_a_guardrail_verdict(phoenix, tmp_path, monkeypatch, capsys):
    run = secrets.token_hex(4)
    # Phoenix keeps one session per session id server-wide (in the project its first span went to):
    # ids of this run only, so a Phoenix that served an earlier run shows this one's sessions too
    project, sid, inbox = f"unsee-{run}", f"demo-{run}", f"inbox-{run}"
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={project}")
    home, otlp_http = tmp_path / "home", f"{phoenix.http}/v1/traces"

    # 1. the demo session, recorded and exported as a user runs it
    assert main(["--home", str(home), "demo", "--model", "scripted", "--no-forget", "--session", sid,
                 "--jaeger-json", str(tmp_path / "demo.json"), "--view-html", str(tmp_path / "demo.html")]) == 0
    assert main(["--home", str(home), "export", sid, "--otlp-endpoint", phoenix.grpc, "--protocol", "grpc"]) == 0
    assert "sent" in capsys.readouterr().out

    # 2. Dana takes her card number back; the home's spans go to Phoenix live (OTLP/HTTP)
    u, agent, _, conn = open_demo(home, "scripted")
    sent = {r.span_id for r in u.store.spans(sid)}  # what `unsee export` sent
    kept = send_live(u.tracer_provider, otlp_http)
    report = u.forget(sid, RevocationEvent(target=SECRET, reason="user revoked", raised_by="user"), agent=agent)
    assert report.committed and report.erased_clean, report
    routes = [r.name for r in read_receipt(report.receipt).routes]
    assert routes
    u.close()  # flushes and shuts down its own provider: every span is sent
    conn.close()

    # 3. a detector's late verdict on an injection, its guardrail span and the forget it raises
    u2, agent2, _, _ = setup(tmp_path / "inbox", mode="audit")
    kept2 = send_live(u2.tracer_provider, otlp_http)
    say(agent2, "check my inbox", thread=inbox)
    verdicts = u2.detect(timing="async", policy="auto").scan(inbox)
    assert [v.status for v in verdicts] == ["applied"], [v.error for v in verdicts]
    u2.close()
    assert u2.tracer_provider.force_flush(30_000)  # (its provider is the scenario's: flushed here)
    u2.tracer_provider.shutdown()

    live = [*kept.get_finished_spans(), *kept2.get_finished_spans()]
    sent |= {_hex(s) for s in live}
    spans = wait_for_ingestion(phoenix.http, project, sent)
    # the traces of the demo conversation: the exported ones and the live ones (forget, replay)
    demo_traces = {s["context"]["trace_id"] for s in spans
                   if s["attributes"].get("gen_ai.conversation.id") == sid and s["context"]["span_id"] in sent}
    demo_roots = Counter(s["name"] for s in spans if s["parent_id"] is None
                         and s["attributes"].get("gen_ai.conversation.id") == sid)
    assert demo_roots["invoke_workflow unsee.forget"] == 1
    assert sum(n for name, n in demo_roots.items() if name.split()[0] == "invoke_agent") >= 6  # the demo's turns

    with DevTools(size=(1280, 800)) as b, evidence(b, tmp_path / "evidence"):
        open_project(b, phoenix.http, project)

        # (a) the session, found by its conversation id: Phoenix's Sessions tab lists it with all its
        # traces (Phoenix takes gen_ai.conversation.id as its session.id) ...
        b.click("[role=tab]", "Sessions")
        b.wait_for(f"{TABLE_ROWS}.some(r => r['session id'] === '{sid}')", f"the session {sid} in Sessions", WAIT)
        sessions = {r["session id"]: r for r in b.evaluate(TABLE_ROWS)}
        assert set(sessions) == {sid, inbox}
        assert sessions[sid]["total traces"] == str(len(demo_traces))
        # ... and the spans table filtered on the conversation id shows each of its traces' root span
        b.click("[role=tab]", "Spans")
        rows = filter_spans(b, f"parent_id is None and {CONV} == '{sid}'", sum(demo_roots.values()))
        assert Counter(r["name"] for r in rows) == demo_roots
        kinds = {r["name"]: r["kind"] for r in rows}
        # Phoenix maps gen_ai.operation.name to a span kind where OpenInference has one
        assert {kind for name, kind in kinds.items() if name.split()[0] == "invoke_agent"} == {"agent"}, kinds
        assert kinds["invoke_workflow unsee.forget"] == "unknown"

        # (b) the forget's own trace: its root span, the phases under it, a span per erasure route
        filter_spans(b, f"{CONV} == '{sid}' and name == 'invoke_workflow unsee.forget'", 1)
        b.click("tbody a", "invoke_workflow unsee.forget")
        b.wait_for_text("unsee.forget.receipt", "unsee.revocation.raised_by", timeout=WAIT)
        # room for the trace tree (drag the drawer's edge, then the tree's): under 300 px wide Phoenix
        # draws the tree flat, with no collapse arrows
        x, y = b.where('[role=separator][aria-label="Resize drawer"]', timeout=WAIT)
        b.drag((x, y), (60, y))
        x, y = b.where('[role=separator][aria-controls="trace-tree"]', timeout=WAIT)
        b.drag((x, y), (x + 160, y))
        b.wait_for("document.getElementById('trace-tree').getBoundingClientRect().width > 320",
                   "a wider trace tree", WAIT)
        tree = b.evaluate(TREE)
        assert tree[0] == [0, "invoke_workflow unsee.forget"], tree
        phases = [f"unsee.forget.{p}" for p in PHASES]  # under the root in this order (others may sit between)
        assert [name for level, name in tree if level == 1 and name in phases] == phases, tree
        erase = tree.index([1, "unsee.forget.erase"])
        under_erase = []
        for level, name in tree[erase + 1:]:
            if level <= 1:
                break
            under_erase.append([level, name])
        assert sorted(under_erase) == sorted([2, f"unsee.erasure {r}"] for r in routes), tree
        attrs = b.evaluate(ATTRIBUTES)  # the root span is selected: its attributes
        assert attrs["gen_ai.workflow.name"] == "unsee.forget" and attrs["unsee.revocation.raised_by"] == "user"
        assert attrs["unsee.forget.committed"] == "true" and attrs["unsee.erasure.clean"] == "true"
        assert attrs["unsee.forget.tau"] == str(report.tau) and attrs["session.id"] == sid
        assert SECRET not in b.dom()  # the target's keyed hash only
        collapse(b, "unsee.forget.replay")  # its restore steps and turns: the picture shows the erasure routes
        b.click('button[aria-label="Hide metrics in trace tree"]', timeout=WAIT)  # one line a span
        b.call("Input.dispatchMouseEvent", type="mouseMoved", x=1279, y=799)  # no hover card in the picture
        time.sleep(0.5)
        b.screenshot(tmp_path / "phoenix-forget.png")
        if os.environ.get("UNSEE_DOCS_SCREENSHOT") == "1":
            b.screenshot(DOC_SHOT)

        # (c) a guardrail span's verdict, found by the verdict
        open_project(b, phoenix.http, project)
        rows = filter_spans(b, "attributes['gen_ai']['guardrail']['verdict']['type'] == 'deny'", 1)
        assert rows[0]["name"] == "run_guardrail unsee.detector" and rows[0]["kind"] == "unknown"
        b.click("tbody a", "run_guardrail unsee.detector")
        b.wait_for_text("gen_ai.guardrail.verdict.type", timeout=WAIT)
        attrs = b.evaluate(ATTRIBUTES)
        assert attrs["gen_ai.guardrail.verdict.type"] == "deny"
        assert attrs["gen_ai.guardrail.action.type"] == "escalate"  # handed to the revocation pipeline
        assert attrs["gen_ai.guardrail.security.risk.category"] == "prompt_injection"
        assert attrs["gen_ai.guardrail.target.type"] == "output" and attrs["gen_ai.conversation.id"] == inbox
        assert attrs["gen_ai.guardrail.security.content.input.hash"].startswith("hmac-sha256:")
        assert ATTACKER not in b.dom()  # the flagged text is a keyed hash, never the text
        # Phoenix drops span links (docs/jaeger.md says so): the forget this verdict raised links its
        # root to this span, and the span's page has no links to show
        tabs = b.evaluate("[...document.querySelectorAll('[role=tab]')].map(t => t.innerText.trim())")
        assert "Attributes" in tabs and not any(t.startswith("Links") for t in tabs), tabs
