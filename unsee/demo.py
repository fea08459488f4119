"""``unsee demo``: a customer-support agent, recorded, then made to forget.

Tools look up a ticket (read, in the sandbox), check entitlement (read),
issue a refund (external: through the call ledger), save a case note (write,
in the sandbox) and remember a preference (write, to the memory store).
Memories are injected into the prompt; summarization compacts the
conversation. One tool return carries a secret (a card number). The demo
prints where the secret entered and what depends on it, writes the Jaeger
JSON, revokes the secret (B7), prints the report, lets the agent go on
from the counterfactual state, and reconciles the world with it: the refund
paid to the revoked card is reversed (its compensator) and paid again by
the original payment method (the call the counterfactual wants).

``agent_factory`` is importable for ``unsee forget --agent unsee.demo:agent_factory``:
it builds the agent with the model the demo last ran with in that home
(recorded in ``HOME/demo.json``), or the one ``$UNSEE_DEMO_MODEL`` names.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.store.memory import InMemoryStore
from rich.console import Console
from rich.table import Table

from unsee.core import DEFAULT_HOME, Unsee, resolve_home
from unsee.middleware.checkpointers import open_saver
from unsee.middleware.context import logical_session
from unsee.middleware.errors import InvalidArgument
from unsee.plugins.model import ScriptedChatModel, ToolRouter, call_id
from unsee.progress import StepProgress

logger = logging.getLogger("unsee.demo")

SECRET = "4417-2231"
#: the demo's models: ``scripted`` (a deterministic stand-in) and ``local`` (the CPU model)
MODELS = ("scripted", "local")
#: the file in the home where ``run_demo`` records the model it ran with (for ``agent_factory``)
DEMO_RECORD = "demo.json"
#: names a model for ``agent_factory`` over the recorded one
MODEL_ENV = "UNSEE_DEMO_MODEL"
USER = "dana"
SYSTEM_PROMPT = (
    "You are a customer-support agent. Use the tools: lookup_ticket to read a ticket, "
    "check_entitlement before refunds, issue_refund to pay back, save_case_note to write notes, "
    "remember to store customer preferences. Answer briefly."
)
TICKETS = {
    "T-1001": f"Ticket T-1001: order 5521, blender arrived broken. Payment card on file {SECRET}.",
}
TURNS = [
    "Hi, I'm Dana. Please look up ticket T-1001: my blender arrived broken.",
    "Is order 5521 entitled to a refund?",
    "Yes please, issue the refund for order 5521.",
    "Please save a case note with what you found in the ticket.",
    "Please remember that I prefer updates by email.",
    "Thanks. What is the status of my case?",
]
AFTER = "Which payment card do you have on file for me?"


def sandbox_setup(session: str, env: Any) -> None:
    """Every demo session's sandbox starts with the ticket files."""
    for tid, text in TICKETS.items():
        env.write_file(f"tickets/{tid}.txt", text.encode())


def build_tools(u: Unsee) -> list:
    payments = u.home / "payments.log"  # stands for the payment provider: the real world

    @u.tool(effect="read", sandboxed=True)
    def lookup_ticket(ticket_id: str, env) -> str:
        """Look up a support ticket by id (e.g. T-1001)."""
        res = env.exec(["cat", f"tickets/{ticket_id}.txt"])
        return res.stdout.decode() if res.exit_code == 0 else f"Ticket {ticket_id}: not found."

    @u.tool(effect="read")
    def check_entitlement(order_id: str) -> str:
        """Check whether an order is entitled to a refund."""
        return f"Order {order_id}: within the 30-day warranty, a full refund of 49.90 EUR is allowed."

    def reverse_refund(args: dict, result: str) -> str:
        """The payment provider's reversal of one refund (by the refund id its result named)."""
        found = re.search(r"\bR-\d{4}\b", result or "")
        if found is None:
            raise ValueError("the refund's result names no refund id to reverse")
        with open(payments, "a") as f:
            f.write(f"reversal {found.group(0)}\n")
        return f"Refund {found.group(0)} reversed."

    @u.tool(effect="external", compensate=reverse_refund)
    def issue_refund(order_id: str, amount: float, to: str = "original payment method") -> str:
        """Issue a refund for an order (moves money) to a card or account, by default the original
        payment method."""
        lines = payments.read_text().splitlines() if payments.exists() else []
        refund_id = f"R-{1 + sum(line.startswith('refund ') for line in lines):04d}"  # the provider's id
        # the provider's log: one line per payment, tagged with the session it was paid for (a card
        # shows as its last four digits, as on a statement)
        dest = f"card-{to[-4:]}" if re.search(r"\d{4}-\d{4}", to) else "-".join(str(to).split()) or "-"
        with open(payments, "a") as f:
            f.write(f"refund {logical_session()} {'-'.join(str(order_id).split()) or '-'} {amount:.2f} {refund_id} "
                    f"{dest}\n")
        return f"Refund {refund_id} of {amount:.2f} EUR issued for order {order_id} to {to}."

    @u.tool(effect="write", sandboxed=True)
    def save_case_note(note: str, env) -> str:
        """Save a note to the customer's case file."""
        env.write_file("case/notes.txt", note.encode())
        return "Case note saved."

    @tool
    def remember(fact: str, runtime: ToolRuntime) -> str:
        """Store a durable preference of the customer in memory."""
        runtime.store.put(("memories", USER), "preference", {"text": fact})
        return "Saved to memory."

    remember.metadata = {"unsee.effect": "write"}
    return [lookup_ticket, check_entitlement, issue_refund, save_case_note, remember]


def support_policy(messages: Sequence[BaseMessage], tool_names: Sequence[str]) -> AIMessage:
    """The scripted stand-in for a model: one tool per request, then a reply from the tool's words."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(content=f"Done. {last.content}")
    text = str(last.content)
    name = intended_tool(text)
    order = re.search(r"\d{4}", text)
    args = None
    if name == "lookup_ticket":
        args = {"ticket_id": re.search(r"T-\d+", text).group(0)}
    elif name == "check_entitlement" and order:
        args = {"order_id": order.group(0)}
    elif name == "issue_refund" and order:
        # back to the card the ticket names, when one was seen; else the original payment method
        cards = re.findall(r"\d{4}-\d{4}", " ".join(str(m.content) for m in messages if isinstance(m, ToolMessage)))
        args = {"order_id": order.group(0), "amount": 49.90, **({"to": cards[-1]} if cards else {})}
    elif name == "save_case_note":
        found = [str(m.content) for m in messages if isinstance(m, ToolMessage) and "Ticket" in str(m.content)]
        args = {"note": found[-1] if found else "no ticket found"}
    elif name == "remember":
        args = {"fact": text.split("remember that", 1)[-1].strip(" .")}
    calls = [{"name": name, "args": args}] if args is not None else []
    if calls:
        return AIMessage(content="", tool_calls=[
            {**c, "id": call_id(messages, i), "type": "tool_call"} for i, c in enumerate(calls)])
    if "card" in text:
        seen = " ".join(str(m.content) for m in messages)
        cards = re.findall(r"\d{4}-\d{4}", seen)
        return AIMessage(content=f"The card on file is {cards[-1]}." if cards else "I have no card on file for you.")
    history = [str(m.content) for m in messages if isinstance(m, (ToolMessage, AIMessage)) and m.content]
    return AIMessage(content="Summary of your case: " + (" ".join(history[-2:]) or "nothing yet."))


def intended_tool(text: str) -> str | None:
    """Which tool a support request calls for (keyword routing, as a help desk's triage would)."""
    lowered = text.lower()
    if re.search(r"T-\d+", text):
        return "lookup_ticket"
    if "entitled" in lowered:
        return "check_entitlement"
    if "refund" in lowered:
        return "issue_refund"
    if "case note" in lowered:
        return "save_case_note"
    if "remember" in lowered:
        return "remember"
    return None


class ToolRouting(ToolRouter):
    """Steers a small local model: after a user request that calls for a tool,
    the model must call that tool (it still writes the arguments, under the
    tool's JSON schema); after a tool result, it must answer in text."""

    def __init__(self):
        super().__init__(intended_tool)


def extractive_summary(messages: Sequence[BaseMessage]) -> str:
    """The summarizer: keeps the gist of every message (so taint flows into the summary)."""
    return " | ".join(str(m.content)[:160] for m in messages if m.content)


def make_model(u: Unsee, which: str, progress: Callable[[str], None] | None = None):
    if which == "scripted":
        return ScriptedChatModel(policy=support_policy), "scripted policy (deterministic stand-in, not a neural model)"
    if progress is not None:
        # no figure: a load took 3-8 s on a quiet machine, 11.7-13.8 s on a busy one (docs/model.md)
        progress("loading the local model (a one-time conversion on first use; seconds on later runs)")
    model = u.chat_model(max_tokens=64, progress=progress)
    return model, (f"local model {model.model_name} ({model._llm_type}, KV cache per session; the demo's "
                   "router picks which tool a request calls, the model writes the arguments)")


def build_agent(u: Unsee, checkpointer, store, model, progress: Console | None = None):
    routing = [] if isinstance(model, ScriptedChatModel) else [ToolRouting()]
    shown = [StepProgress(progress)] if progress is not None else []
    return create_agent(
        model,
        build_tools(u),
        system_prompt=SYSTEM_PROMPT,
        middleware=[
            *shown,
            *routing,
            u.middleware(),
            u.memory_middleware(store, ("memories", USER)),
            SummarizationMiddleware(model, trigger=("messages", 14), keep=("messages", 6),
                                    summarizer=extractive_summary),
        ],
        checkpointer=checkpointer,
        store=store,
    )


def open_demo(home: Path, which: str = "scripted", progress: Console | None = None):
    """(u, agent, model description, sqlite connection) for a demo home.

    ``progress``: a console that gets one line per model/tool step (and a
    spinner on a terminal): the local model takes seconds per step.
    """
    u = Unsee(home=home, sandbox="auto", sandbox_setup=sandbox_setup)
    store = u.recorded_store(InMemoryStore())
    conn = sqlite3.connect(Path(home) / "langgraph.sqlite", check_same_thread=False)
    say = (lambda line: progress.print(f"  [dim]{line}[/]", highlight=False)) if progress is not None else None
    model, label = make_model(u, which, say)
    return u, build_agent(u, open_saver("sqlite", conn)[0], store, model, progress), label, conn


def record_model(home: Path, session: str, model: str) -> None:
    """Record in the home which model the demo ran ``session`` with (``agent_factory`` reads it)."""
    path = Path(home) / DEMO_RECORD
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"model": model, "session": session}) + "\n", encoding="utf-8")
    tmp.replace(path)  # atomic: a reader sees the old record or the new one


def recorded_model(home: Path) -> str | None:
    """The model the demo last ran with in ``home``; None when no (readable) record is there."""
    try:
        model = json.loads((Path(home) / DEMO_RECORD).read_text(encoding="utf-8")).get("model")
    except (OSError, ValueError, AttributeError):
        return None
    return model if model in MODELS else None


def choose_model(recorded: str | None, override: str | None) -> tuple[str, str]:
    """(model, why) for ``agent_factory``: ``override`` ($UNSEE_DEMO_MODEL) wins, then the
    recorded model, then ``scripted``. Raises ``InvalidArgument`` for an unknown override."""
    if override:
        if override not in MODELS:
            raise InvalidArgument(f"{MODEL_ENV} must be one of {', '.join(MODELS)}, not {override!r}")
        ran = f"the demo ran with {recorded}" if recorded else "no demo recorded in this home"
        return override, f"{MODEL_ENV}={override} ({ran})"
    if recorded:
        return recorded, "the model the demo ran with in this home"
    return "scripted", f"no demo recorded in this home; {MODEL_ENV}=local for the local model"


def agent_factory():
    """For ``unsee forget --agent unsee.demo:agent_factory`` (home from $UNSEE_HOME or ./.unsee).

    Builds the agent with the model the demo last ran with in that home, so a
    replay decodes with the model that recorded the session; ``$UNSEE_DEMO_MODEL``
    (``scripted`` | ``local``) overrides it; with neither, the scripted one.
    Says which on the ``unsee.demo`` logger, one line: INFO when it is the
    recorded model, WARNING (on stderr by default) when it is not.
    """
    home = resolve_home()
    recorded = recorded_model(home)
    model, why = choose_model(recorded, os.environ.get(MODEL_ENV))
    logger.log(logging.INFO if model == recorded else logging.WARNING,
            "unsee.demo:agent_factory uses the %s model: %s", model, why)
    _, agent, _, _ = open_demo(home, model)
    return agent


def refunds_paid(home: Path, session: str) -> int:
    """Refunds the (stand-in) payment provider paid for ``session`` and did not reverse."""
    log = Path(home) / "payments.log"
    if not log.exists():
        return 0
    lines = [line.split() for line in log.read_text().splitlines()]
    reversed_ids = {w[1] for w in lines if w[:1] == ["reversal"] and len(w) > 1}
    return sum(1 for w in lines if w[:2] == ["refund", session] and (len(w) < 5 or w[4] not in reversed_ids))


def reconcile_world(u: Unsee, report: Any, console: Console) -> dict:
    """The demo's last step: the world after the forget, the reconciliation plan, and the plan run
    (the refund paid to the revoked card reversed, the one the counterfactual wants paid)."""
    from unsee.report_view import reconciliation_table

    session = report.session_id
    console.print(f"refunds paid for {session} before reconciling: {refunds_paid(u.home, session)} (the replay "
                  "never fires a side effect twice)")
    plan = report.reconciliation
    if plan is None or not plan.items:
        console.print("nothing to reconcile: the counterfactual made the same side effects")
        return {"payments": refunds_paid(u.home, session), "reconciled": []}
    console.print()
    console.print("[bold]Reconciling the world with the counterfactual[/] (the plan above; Python: "
                  f"u.reconcile(event_id, run=\"all\"), CLI: unsee reconcile {plan.event_id}): each item runs "
                  "once, whoever runs it, wherever")
    out = u.reconcile(plan.event_id, "all")
    console.print(reconciliation_table(out.plan))
    payments = refunds_paid(u.home, session)
    log = (u.home / "payments.log").read_text().splitlines() if (u.home / "payments.log").exists() else []
    console.print("the payment provider's log: " + "; ".join(log), highlight=False, soft_wrap=True)
    console.print(f"refunds actually paid for {session}: {payments} (reconciled: the world now matches the "
                  "counterfactual; a second reconcile runs nothing)")
    return {"payments": payments, "reconciled": out.ran}


def next_steps(home: Path, session: str, forgot: bool) -> list[str]:
    """Commands to run after the demo, exactly as they work from the current directory (the
    forget's ``agent_factory`` replays with the demo's model: ``run_demo`` records it in the home)."""
    default = Path(os.environ.get("UNSEE_HOME") or DEFAULT_HOME)
    opt = "" if Path(home).resolve() == default.resolve() else f"--home {shlex.quote(str(home))} "
    # After the forget the card number is gone; the preference is still there to revoke.
    target = "updates by email" if forgot else SECRET
    audit = [f"unsee {opt}audit {session} --target {SECRET}"] if forgot else []  # 0 copies: exit 0
    return [
        f"unsee {opt}sessions",
        *audit,
        f"unsee {opt}graph {session} --target {shlex.quote(target)}",
        f"unsee {opt}export {session} --jaeger-json demo.json",
        f"unsee {opt}forget {session} --target {shlex.quote(target)} --agent unsee.demo:agent_factory --dry-run",
    ]


def run_demo(home: Path, session: str, jaeger_json: Path, console: Console | None = None,
             model: str = "scripted", forget: bool = True, view_html: Path | None = None) -> dict:
    from unsee.plugins.forget import RevocationEvent
    from unsee.report_view import render_report

    console = console or Console()
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    console.print("[bold]unsee demo[/] - a customer-support agent is recorded, then made to forget a card number")
    if model == "local":
        console.print("[dim]The local model runs on the CPU: a few seconds per step; each step is shown.[/]")
    u, agent, label, conn = open_demo(home, model, console if model == "local" else None)
    console.print(f"model: {label}")
    if u.store.has_session(session):  # a rerun on the same home starts a fresh thread
        session = f"{session}-{len(u.sessions()) + 1}"
    record_model(home, session, model)  # before the run: a factory that replays it needs this model
    cfg = {"configurable": {"thread_id": session}}
    for text in TURNS:
        console.print(f"[cyan]user>[/] {text}")
        out = agent.invoke({"messages": [HumanMessage(text)]}, cfg)
        console.print(f"[green]agent>[/] {out['messages'][-1].content}")
    console.print(f"sandbox: {u.environments.backend} backend (tools ran there; Docker when a daemon is reachable)")
    g = u.graph(session)
    hit = g.locate(SECRET)
    closure = g.taint(hit)
    console.print()
    console.print(f"[bold]Provenance of the secret[/] (session {session}, {len(g)} artifacts, "
                  f"{len(g.checkpoints)} checkpoints)")
    console.print(f"  entered at step tau={hit.step} (the first step whose input held it) through "
                  f"{hit.artifact_type.value} {hit.artifact_id} from {', '.join(hit.source_ids)}")
    console.print(f"  taint closure |I(z)| = {len(closure)} (artifacts that hold it or were computed from it)")
    cp = g.fork_checkpoint(hit.step)  # the checkpoint a forget forks at
    if cp is not None:
        console.print(f"  latest turn-boundary checkpoint at or before tau: {cp.id} ({cp.kind.value}, token "
                      f"offset {cp.token_offset}): everything before it is reused as is")
    t = Table("seq", "step", "type", "artifact", "holds the secret")
    for a in g:
        if a.id in closure:
            t.add_row(str(a.seq), str(a.step), a.type.value, a.id,
                      "verbatim" if SECRET in (g.content(a.id) or "") else "derived")
    console.print(t)
    n = u.export_jaeger_json(session, jaeger_json)
    console.print(f"wrote {n} spans to {jaeger_json} (Jaeger UI: Search > Upload; spans carry no payload text)")
    result = {"session": session, "tau": hit.step, "closure": len(closure), "artifacts": len(g), "spans": n}
    if forget:
        console.print()
        console.print("[bold]Dana takes her card number back:[/] revoking it with strategy B7 (unsee's own: "
                      "restore the checkpoint before tau, replay only the steps after it, decode again only "
                      "the model turns that saw the secret, never fire a side effect twice)")
        report = u.forget(session, RevocationEvent(target=SECRET, reason="user revoked", raised_by="user"))
        console.print(render_report(report))
        console.print(f"[cyan]user>[/] {AFTER}")
        out = agent.invoke({"messages": [HumanMessage(AFTER)]}, cfg)
        answer = str(out["messages"][-1].content)
        console.print(f"[green]agent>[/] {answer}")
        leaked = SECRET in answer or any(SECRET in str(m.content) for m in out["messages"])
        console.print(f"secret in the live state after forgetting: {'YES' if leaked else 'no'}")
        result.update(report=report.model_dump(mode="json"), leaked=leaked, **reconcile_world(u, report, console))
    # the page of the session: the forget's before/after, or the secret's closure without one
    from unsee.plugins.view import render_html

    view_html = Path(view_html or Path(jaeger_json).with_name("unsee-demo-view.html"))
    page = (u.view(session, event=result["report"]["event_id"]) if forget else u.view(session, target=SECRET))
    view_html.write_text(render_html(page), encoding="utf-8")
    result["view"] = str(view_html)
    console.print(f"wrote the page of {session} to {view_html} (open it in a browser: the graph, the "
                  f"{'forget before and after' if forget else 'secret and its closure'}; no payload text)",
                  soft_wrap=True)
    conn.close()
    u.close()
    console.print()
    console.print(f"[bold]The recording is in {home}[/] (provenance.sqlite, vault.sqlite, langgraph.sqlite, "
                  "sandboxes/). Next, try:")
    result["next"] = next_steps(home, session, forget)
    for cmd in result["next"]:
        console.print(f"  {cmd}", highlight=False, markup=False, soft_wrap=True)
    return result
