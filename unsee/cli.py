"""The ``unsee`` command line.

The home is ``--home``, else ``$UNSEE_HOME``, else ``./.unsee``; the store is
``--store`` (a ``postgresql://`` URL), else ``$UNSEE_STORE``, else SQLite in
the home; the OCI registry of sandbox snapshots is ``--registry`` (``host:port``),
else ``$UNSEE_REGISTRY``, else none. Every error is one line on stderr in unsee's words (a JSON object
with ``--json``; the traceback too with ``--debug``), and every command exits
by one scheme (``unsee/exit_codes.py``, docs/cli.md "Exit codes"): 0 done;
1 done, the answer is "no" (a copy remains, a signature is invalid, the target
is nowhere); 2 bad usage or input; 3 an environment problem (store, daemon,
endpoint, model unavailable; the session busy); 4 failed, nothing changed (the
user's code raised during a replay; an internal error); 130 interrupted.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from typer._click import exceptions as cx  # typer >= 0.29 bundles its own click
from rich.console import Console
from rich.table import Table

from unsee.config import resolve_home, resolve_registry, resolve_store
from unsee.config import version as unsee_version
from unsee.exit_codes import INTERRUPTED, NO, OK, USAGE, code_for, message_for, one_line, usage_message
from unsee.middleware.errors import AmbiguousTarget, InvalidArgument, UnseeError

app = typer.Typer(
    name="unsee",
    help="Make LLM agents forget without restarting: inspect and export recorded sessions.",
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
)
err = Console(stderr=True)

#: ``forget``/``demo``: the forget committed, but its record is not erased clean (a copy remains in
#: its scope, or the erasure could not finish): the answer is "no", as for audit and erase
EXIT_NOT_ERASED = NO

#: the width of output that is not a terminal: never truncated or wrapped, so ids stay copyable
PIPE_WIDTH = 100_000


def _console() -> Console:
    """A console on stdout: the terminal's width, or (piped, redirected) no width limit."""
    c = Console()
    if not c.is_terminal:
        c.width = PIPE_WIDTH
    return c


def _print_version(value: bool) -> None:
    if value:
        print(f"unsee {unsee_version()}")
        raise typer.Exit()


class _State:
    home: Path | None = None
    store: str | None = None
    registry: str | None = None
    json: bool = False  # (--json anywhere on the line: errors are JSON too)
    debug: bool = False


state = _State()


@app.callback()
def _root(
    home: Optional[Path] = typer.Option(None, "--home", help="unsee home (default: $UNSEE_HOME or ./.unsee)"),
    store: Optional[str] = typer.Option(None, "--store", help="records in PostgreSQL: a postgresql:// URL "
                                        "(default: $UNSEE_STORE, else SQLite in the home)"),
    registry: Optional[str] = typer.Option(None, "--registry", help="sandbox snapshots in an OCI registry: "
                                           "host:port (default: $UNSEE_REGISTRY, else none)"),
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="print the version and exit"),
    debug: bool = typer.Option(False, "--debug", help="log unsee's debug messages and print an error's "
                                                      "traceback (stderr)"),
) -> None:
    state.home = resolve_home(home)
    state.store = resolve_store(store)
    state.registry = resolve_registry(registry)  # InvalidArgument (exit 2) for anything but host[:port]
    if debug:
        import logging

        state.debug = True
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        logging.getLogger("unsee").setLevel(logging.DEBUG)


def _home() -> Path:
    """The home; one that exists and is not a directory is an error naming it."""
    from unsee.middleware.store_files import check_home

    return check_home(state.home or resolve_home())


def _open(must_exist: bool = True):
    from unsee.core import Unsee

    home = _require_home() if must_exist else _home()
    return Unsee(home=home, store=state.store, registry=state.registry)


def _has_records(home: Path) -> bool:
    return state.store is not None or (home / "provenance.sqlite").exists()


def _require_home() -> Path:
    """The home, which must hold unsee's records (a typed error naming it, exit 2)."""
    from unsee.middleware.errors import NoUnseeHome

    home = _home()
    if not _has_records(home):
        raise NoUnseeHome(home)
    return home


def _bad_value(option: str, e: Exception) -> UnseeError:
    """A value a record refused (pydantic's ``ValidationError``) as unsee's one-line usage error."""
    from unsee.exit_codes import is_validation_error, validation_message
    from unsee.middleware.errors import InvalidArgument

    text = validation_message(e) if is_validation_error(e) else str(e)
    return InvalidArgument(f"{option}: {text.split(': ', 1)[1] if ': ' in text else text}")


def _completeness(s) -> str:
    if s.incomplete:
        return f"NO ({s.failures} failures)"
    return "run died: checked at the next forget" if s.run_died else "yes"


@app.command("sessions")
def sessions_cmd(as_json: bool = typer.Option(False, "--json", help="machine-readable output")) -> None:
    """List recorded sessions (none in a home that holds no records yet: an empty list, exit 0)."""
    if not _has_records(_home()):  # (nothing recorded yet; nothing is made)
        rows, orphaned, origins = [], {}, {}
    else:
        u = _open()
        rows = u.sessions()
        orphaned = u.recorder.forks.counts()  # flagged store items after a fork (docs/provenance.md)
        origins = u.recorder.forks.journal.origins()
    if as_json:
        print(json.dumps([{**s.model_dump(), "orphaned_memory": orphaned.get(s.session_id, 0),
                           "forked_from": origins.get(s.session_id)} for s in rows], indent=1))
        return
    t = Table()
    # ids are never cut with an ellipsis: folded on a narrow terminal, whole when piped
    t.add_column("session", overflow="fold")
    for name in ("turns", "artifacts", "checkpoints", "tokenizer", "complete", "orphaned memory"):
        t.add_column(name)
    for s in rows:
        t.add_row(s.session_id, str(s.turns), str(s.artifacts), str(s.checkpoints), s.tokenizer or "-",
                  _completeness(s), str(orphaned.get(s.session_id, 0)))
    _console().print(t)


class GraphFormat(str, Enum):
    mermaid = "mermaid"
    dot = "dot"
    json = "json"


@app.command("graph")
def graph_cmd(
    session: str = typer.Argument(..., help="session id (the LangGraph thread_id)"),
    fmt: GraphFormat = typer.Option(GraphFormat.mermaid, "--format", "-f", help="mermaid | dot | json"),
    target: Optional[str] = typer.Option(None, "--target", help="highlight the taint closure of this text"),
    source: Optional[str] = typer.Option(None, "--source", help="restrict --target to one source"),
) -> None:
    """Print the provenance graph of a session."""
    from unsee.middleware.render import FORMATS

    if target is not None and not target.strip():
        raise cx.BadParameter("--target must be a non-empty text (the text whose taint closure to highlight)")
    if source is not None and not source.strip():
        raise cx.BadParameter("--source must be a non-empty artifact id or source key")
    if source is not None and target is None:
        raise cx.BadParameter("--source restricts --target: give --target TEXT too")
    g = _open().graph(session)
    closure = g.taint(g.locate(target, source)) if target else frozenset()
    sys.stdout.write(FORMATS[fmt.value](g, closure))


@app.command("view")
def view_cmd(
    session: str = typer.Argument(..., help="session id (the LangGraph thread_id)"),
    target: Optional[str] = typer.Option(None, "--target", help="highlight where this text entered and its "
                                                                 "taint closure I(z)"),
    source: Optional[str] = typer.Option(None, "--source", help="restrict --target to one source"),
    event: Optional[str] = typer.Option(None, "--event", help="show this forget (its event id): plan, outcome, "
                                                               "the graph before and after"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="the HTML file (default "
                                                                        "unsee-view-SESSION.html)"),
    content: bool = typer.Option(False, "--content", help="carry the artifacts' texts in the page (off, like "
                                                          "spans: the page then holds no payload text)"),
    detect: bool = typer.Option(True, "--detect/--no-detect", help="show the default detector's findings"),
    serve: bool = typer.Option(False, "--serve", help="also serve the page on 127.0.0.1 until Ctrl-C"),
    port: int = typer.Option(0, "--port", help="--serve: the port (0: a free one)"),
) -> None:
    """Write a self-contained web page of a session: its provenance graph, a target's closure,
    checkpoints, IFC decisions, detector findings and a forget's before/after."""
    from unsee.plugins.view import render_html

    if target is not None and not target.strip():
        raise cx.BadParameter("--target must be a non-empty text")
    if source is not None and target is None:
        raise cx.BadParameter("--source restricts --target: give --target TEXT too")
    payload = _open().view(session, target=target, source=source, event=event, content=content, detect=detect)
    path = output or Path(f"unsee-view-{''.join(c if c.isalnum() or c in '-_.' else '_' for c in session)}.html")
    path.write_text(render_html(payload), encoding="utf-8")
    console = _console()
    console.print(f"wrote {path} ({len(payload['graph']['artifacts'])} artifacts"
                  f"{', texts included' if content else ', no payload text'})", soft_wrap=True)
    if serve:
        from unsee.plugins.view import page_server

        server = page_server(path, "127.0.0.1", port)
        console.print(f"serving http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)", soft_wrap=True)
        _serve_until_interrupted(server)


def _serve_until_interrupted(server) -> None:
    """Serve until Ctrl-C, then close the socket (``unsee serve``, ``unsee view --serve``)."""
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@app.command("export")
def export_cmd(
    session: str = typer.Argument(..., help="session id"),
    otlp_endpoint: Optional[str] = typer.Option(None, "--otlp-endpoint", help="OTLP receiver, e.g. http://localhost:4318"),
    protocol: Optional[str] = typer.Option(None, "--protocol", help="http or grpc (default: grpc for :4317, else http)"),
    jaeger_json: Optional[Path] = typer.Option(None, "--jaeger-json", help="write Jaeger UI upload JSON here"),
) -> None:
    """Send a recorded session to an OTLP receiver or write Jaeger JSON."""
    if not otlp_endpoint and not jaeger_json:
        raise cx.UsageError("give --otlp-endpoint URL and/or --jaeger-json FILE")
    u = _open()
    u.store.require(session)
    console = _console()
    if otlp_endpoint:
        n = u.export_otlp(session, otlp_endpoint, protocol=protocol)
        console.print(f"sent {n} spans of {session} to {otlp_endpoint}")
    if jaeger_json:
        n = u.export_jaeger_json(session, jaeger_json)
        console.print(f"wrote {n} spans of {session} to {jaeger_json}")


@app.command("demo")
def demo_cmd(
    jaeger_json: Path = typer.Option(Path("unsee-demo-trace.json"), "--jaeger-json", help="where to write the trace"),
    session: str = typer.Option("demo", "--session", help="thread id of the demo session"),
    model: str = typer.Option("local", "--model",
                              help="local (the CPU model, the default) or scripted (a fast deterministic stand-in)"),
    no_forget: bool = typer.Option(False, "--no-forget", help="stop after showing the provenance"),
    view_html: Path = typer.Option(Path("unsee-demo-view.html"), "--view-html",
                                   help="where to write the page of the session (unsee view)"),
) -> None:
    """Run the customer-support demo agent, show the provenance of its secret, then forget it.

    Exit 1 if the forget committed but its record is not erased clean."""
    from unsee.demo import run_demo

    if model not in ("local", "scripted"):
        raise cx.BadParameter("--model must be local or scripted")
    result = run_demo(home=_home(), session=session, jaeger_json=jaeger_json, console=_console(), model=model,
                      forget=not no_forget, view_html=view_html)
    if (result.get("report") or {}).get("erased_clean") is False:
        _error("the forget is committed, but its record is not erased clean (copies remain in its scope: "
               "see the receipt)")
        raise typer.Exit(EXIT_NOT_ERASED)


_AGENT_WANTED = "must name a compiled agent or a zero-argument factory returning one"


def _short(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _load_agent(spec: str):
    """``module:attribute`` -> a compiled agent (or a zero-argument factory of one).

    A spec that names nothing, or something that is neither, is a usage error
    (exit 2); a module or factory that fails while running is a failed operation.
    """
    mod_name, _, attr = spec.partition(":")
    if not mod_name.strip() or not attr.strip():
        raise cx.BadParameter(f"--agent must be module:attribute, got {spec!r}")
    sys.path.insert(0, str(Path.cwd()))
    with _home_env():
        return _agent_from(spec, mod_name, attr)


@contextlib.contextmanager
def _home_env():
    """While an --agent module loads: $UNSEE_HOME (and $UNSEE_STORE, $UNSEE_REGISTRY) are this command's, so a
    factory that opens ``Unsee(home=resolve_home())`` (as unsee.demo:agent_factory does)
    follows --home, --store and --registry."""
    wanted = {"UNSEE_HOME": str(_home()), "UNSEE_STORE": state.store, "UNSEE_REGISTRY": state.registry}
    old = {k: os.environ.get(k) for k in wanted}
    for k, v in wanted.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _agent_from(spec: str, mod_name: str, attr: str):
    import importlib
    import inspect

    from langgraph.pregel import Pregel

    try:
        module = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        if e.name and (mod_name == e.name or mod_name.startswith(e.name + ".")):
            raise cx.BadParameter(f"--agent {spec}: no module named {e.name!r}") from e
        raise UnseeError(f"--agent {spec}: importing {mod_name} failed: {e}") from e
    except Exception as e:
        raise UnseeError(f"--agent {spec}: importing {mod_name} failed: {type(e).__name__}: {e}") from e
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise cx.BadParameter(f"--agent {spec}: {mod_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if isinstance(obj, Pregel):
        return obj
    if not callable(obj):
        raise cx.BadParameter(f"--agent {spec} {_AGENT_WANTED}; got {type(obj).__name__} "
                              f"{_short(repr(obj))}")
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        sig = None  # builtins without a signature: try the call
    if sig is not None:
        try:
            sig.bind()
        except TypeError:
            raise cx.BadParameter(f"--agent {spec} {_AGENT_WANTED}; got {type(obj).__name__} "
                                  f"{_short(attr + str(sig))}, which takes arguments") from None
    try:
        made = obj()
    except UnseeError:
        raise
    except Exception as e:
        raise UnseeError(f"--agent {spec}: the factory failed: {type(e).__name__}: {e}") from e
    if not isinstance(made, Pregel):
        raise cx.BadParameter(f"--agent {spec} {_AGENT_WANTED}; {attr}() returned {type(made).__name__} "
                              f"{_short(repr(made))}")
    return made


def _owner_of(agent):
    """The live Unsee whose recording middleware is attached to ``agent`` (else None)."""
    from unsee.core import Unsee
    from unsee.middleware.hooks import UnseeMiddleware

    for spec in (getattr(getattr(agent, "builder", None), "nodes", None) or {}).values():
        fn = getattr(getattr(spec, "runnable", None), "func", None)
        mw = getattr(fn, "__self__", None)
        if isinstance(mw, UnseeMiddleware):
            return Unsee.owning(mw.recorder)
    return None


def _strategy_help() -> str:
    """The strategies, code and descriptive name, from the table (``plugins/forget/strategy.py``;
    langchain-free), e.g. "B0|nothing ... B7|unsee ... (B8|ifc-only B9|ifc-replay need IFC)"."""
    from unsee.plugins.forget import Strategy

    def both(s: Strategy) -> str:
        return f"{s.code}|{s.alias}"

    plain = [both(s) for s in Strategy if not s.spec.needs_ifc]
    ifc = [both(s) for s in Strategy if s.spec.needs_ifc]
    return ("code or name: " + " ".join(plain)
            + (f" ({' '.join(ifc)} need{'s' if len(ifc) == 1 else ''} IFC)" if ifc else ""))


@app.command("forget")
def forget_cmd(
    session: str = typer.Argument(..., help="session id (the LangGraph thread_id)"),
    target: str = typer.Option(..., "--target", help="the text to forget"),
    source: Optional[str] = typer.Option(None, "--source", help="artifact id or source key it entered through"),
    strategy: str = typer.Option("B7", "--strategy", help=_strategy_help()),
    agent: Optional[str] = typer.Option(
        None, "--agent",
        help="module:attribute of the compiled agent, or of a zero-argument factory returning it; "
             "B7 (replay) needs it here, e.g. --agent unsee.demo:agent_factory"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the plan, change nothing"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
    reason: str = typer.Option("", "--reason", help="why (kept in the report)"),
    scope: Optional[str] = typer.Option(None, "--scope",
                              help="session (the default: this session; the others it reached are listed) or "
                                   "all (also forget it in every session it reached through shared memory), as "
                                   "scope= in Python"),
    all_sessions: bool = typer.Option(False, "--all-sessions", help="the same as --scope all"),
    erase: bool = typer.Option(True, "--erase/--no-erase",
                               help="after a committed replay, erase the target from every stored record and "
                                    "sign a receipt (default); --no-erase keeps the old record"),
    ifc: Optional[list[str]] = typer.Option(None, "--ifc", help="enable IFC first with this identifier sink, "
                                                                "tool.argument (repeatable): B8 and B9 need it"),
) -> None:
    """Forget TARGET in SESSION: rebuild the state as if it had never been seen.

    B7 (the default) and the other replaying strategies re-run the session
    through its agent. The agent lives in the process that ran the session,
    never in this one: name it with --agent module:attribute (a compiled agent,
    or a zero-argument factory that builds it on the same home), e.g.

    unsee forget demo --target 4417-2231 --agent unsee.demo:agent_factory

    --dry-run only plans and needs no agent. B8 and B9 label I(z) revoked for
    information-flow control: enable it with --ifc SINK (e.g. --ifc
    send_email.to), as u.ifc(sinks=[...]) does in Python.

    Exit 1 if the forget committed but its record is not erased clean (a copy
    remains in this forget's scope, or the erasure could not finish; the
    report says which), or if TARGET occurs in no recorded artifact. Other sessions' copies of the same text are listed
    ("also held by"), never counted.
    """
    from unsee.plugins.forget import RevocationEvent, Strategy, UnknownStrategy

    try:
        Strategy.parse(strategy)
    except UnknownStrategy as e:
        raise cx.BadParameter(str(e)) from e
    try:
        event = RevocationEvent(target=target, source=source, reason=reason, raised_by="operator")
    except ValueError as e:
        raise _bad_value("--target", e) from e
    if not session.strip():
        raise cx.BadParameter("SESSION must be a non-empty session id")
    if scope is not None and scope not in ("session", "all"):
        raise cx.BadParameter(f"--scope must be session or all, got {scope!r}")
    if all_sessions and scope == "session":
        raise cx.BadParameter("--all-sessions is --scope all: give one of them")
    scope = "all" if all_sessions else scope or "session"
    if ifc is not None and not all(isinstance(x, str) and x.strip() for x in ifc):
        raise cx.BadParameter("--ifc must name a sink, tool.argument (e.g. send_email.to)")
    compiled, u = _agent_and_unsee(agent)
    if ifc:
        u.ifc(list(ifc))  # (InvalidSinkSpec, exit 2, before anything is changed)
    result = u.forget(session, event, strategy, agent=compiled, dry_run=dry_run, erase=erase, scope=scope)
    if as_json:
        print(result.model_dump_json(indent=1))
    else:
        from unsee.report_view import render_plan, render_report

        _console().print(render_plan(result) if dry_run else render_report(result))
    if not dry_run and _not_erased(result):
        if not as_json:
            _error("the forget is committed, but its record is not erased clean (see the report's notes)")
        raise typer.Exit(EXIT_NOT_ERASED)


@app.command("reconcile")
def reconcile_cmd(
    event_id: str = typer.Argument(..., help="the forget's event id (its report's event_id)"),
    run: str = typer.Option("all", "--run", help="what to run: all (compensations and the calls the counterfactual "
                                                 "wants, the default) or compensate (compensations only)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the plan and each item's state, change nothing"),
    yes: bool = typer.Option(False, "--yes", "-y", help="approve every item (without it each item is asked)"),
    retry: bool = typer.Option(False, "--retry", help="run items that failed again"),
    agent: Optional[str] = typer.Option(
        None, "--agent", help="module:attribute of the agent whose tools declare the compensators (or a factory "
                              "returning it), e.g. --agent unsee.demo:agent_factory"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """Reconcile the world with the counterfactual of the forget EVENT_ID.

    Compensates the side effects only the forgotten world made (each
    orphaned call whose tool declares a compensator), runs the calls only
    the counterfactual wants (deferred), and lists what a human must undo
    (no compensator). Every item runs at most once, whoever reconciles, in
    any process on this store; a second run changes nothing. Each item is
    asked (y/n) unless --yes; --dry-run only prints the plan.

    unsee reconcile 3f2a... --agent unsee.demo:agent_factory --yes

    Exit 1 when an item is left in doubt (a reconcile died while it ran:
    settle it by hand), 4 when a compensator or tool raised (its item stays
    failed: --retry once fixed), 2 when there is nothing left to run.
    """
    from unsee.report_view import reconciliation_table

    if run not in ("all", "compensate"):
        raise cx.BadParameter(f"--run must be all or compensate, got {run!r}")
    if not event_id.strip():
        raise cx.BadParameter("EVENT_ID must be a non-empty event id")
    compiled, u = _agent_and_unsee(agent)
    c = _console()
    if dry_run:
        out = u.reconcile(event_id, "plan", agent=compiled)
        if as_json:
            print(out.model_dump_json(indent=1))
        else:
            c.print(reconciliation_table(out.plan) if out.plan.items else f"nothing to reconcile for {event_id}")
        return
    if not yes and not sys.stdin.isatty():
        raise cx.BadParameter("--yes is needed when the input is not a terminal (each item is asked otherwise)")

    def ask(request: dict) -> list[bool]:
        answers = []
        for action in request["action_requests"]:
            c.print(f"[bold]{action['description']}[/]", highlight=False)
            c.print(f"  {action['name']}({', '.join(f'{k}={v!r}' for k, v in sorted(action['args'].items()))})",
                    highlight=False, markup=False)
            answers.append(typer.confirm("  approve?", default=False))
        return answers

    out = u.reconcile(event_id, run, approve=None if yes else ask, retry=retry, agent=compiled)
    if as_json:
        print(out.model_dump_json(indent=1))
    else:
        c.print(reconciliation_table(out.plan))
        for what, keys in (("ran", out.ran), ("already done elsewhere", out.already), ("declined", out.declined),
                           ("IN DOUBT (settle it by hand)", out.in_doubt)):
            if keys:
                c.print(f"{what}: {', '.join(k.removeprefix('rec-')[:8] for k in keys)}")
        if out.receipt:
            c.print(f"receipt signed again with the reconciliation: {out.receipt}", soft_wrap=True)
    if out.in_doubt:
        raise typer.Exit(NO)


def _not_erased(report) -> bool:
    """Whether a forget (or one of its scope='all' forgets) erased its record unclean."""
    return report.erased_clean is False or any(_not_erased(r) for r in report.also_forgotten)


def _agent_and_unsee(agent: Optional[str]):
    """(the compiled agent or None, the Unsee to act through) for commands taking --agent.

    One home per operation: the factory runs with $UNSEE_HOME set to this command's home;
    an agent that records into another home is refused (it would act on a store the user
    did not name)."""
    home = _require_home()  # before an --agent factory opens (and so makes) a home
    compiled = _load_agent(agent) if agent else None
    owner = _owner_of(compiled) if compiled is not None else None
    if owner is not None and Path(owner.home).resolve() != home.resolve():
        raise InvalidArgument(f"--agent {agent} records into the unsee home {owner.home}, but this command's home is "
                         f"{home}: name the same home for both (--home or UNSEE_HOME; a factory that opens "
                         "Unsee(home=resolve_home()) follows it)")
    if owner is not None and owner.store.url != state.store:
        from unsee.middleware.sqldb import redact_url

        def name(url):
            return redact_url(url) if url else "SQLite in the home"
        raise InvalidArgument(f"--agent {agent} records into the store {name(owner.store.url)}, but this command's "
                         f"store is {name(state.store)}: name the same store for both (--store or UNSEE_STORE)")
    return compiled, owner or _open()


def _audit_table(report) -> Table:
    t = Table("route", "copies", "value copies", "source (kept)", "other sessions'", "where / notes")
    for r in report.routes:
        where = [f"{_short(k, 70)}: {v}" for k, v in r.byte_copies.items() if v] + r.notes
        theirs = r.other_copies
        t.add_row(r.route, str(r.copies), str(r.value_copies), str(r.source_copies) if r.source_copies else "-",
                  ", ".join(f"{s}: {n}" for s, n in theirs.items()) or "-", "\n".join(where) or "-")
    return t


def _print_others(c: Console, others: dict[str, int], what: str) -> None:
    """One line per other session holding copies (listed, never counted in this scope)."""
    for s, n in others.items():
        c.print(f"also held by session {s}, not in this {what}'s scope: {n} {'copy' if n == 1 else 'copies'}",
                soft_wrap=True, highlight=False, markup=False)


def _print_incomplete(c: Console, incomplete: list[str], what: str) -> None:
    """What an audit could not read (``AuditReport.incomplete``): its count is not the whole
    count, so the answer is "no" (exit 1) whatever it counted; each line says how to supply it."""
    if not incomplete:
        return
    c.print(f"INCOMPLETE: this {what} could not read everything it should, so its count is not the whole "
            f"count and it is not clean ({len(incomplete)} {'gap' if len(incomplete) == 1 else 'gaps'}):",
            soft_wrap=True, highlight=False, markup=False)
    for line in incomplete:
        c.print(f"  - {line}", soft_wrap=True, highlight=False, markup=False)


@app.command("erase")
def erase_cmd(
    session: Optional[str] = typer.Argument(None, help="session id (the LangGraph thread_id) of a forgotten session "
                                                       "(not with --subject)"),
    targets: Optional[list[str]] = typer.Option(None, "--target", help="the forgotten text (with --subject: a text "
                                                                       "to audit for, repeatable)"),
    subject: Optional[str] = typer.Option(None, "--subject", help="erase a data subject: its --thread and "
                                                                  "--namespace options, whole (docs/erasure.md)"),
    threads: Optional[list[str]] = typer.Option(None, "--thread", help="with --subject: a thread of the subject, "
                                                                       "deleted whole (repeatable)"),
    namespaces: Optional[list[str]] = typer.Option(None, "--namespace", help="with --subject: a memory-store "
                                                                             "namespace path, users/dana (repeatable)"),
    agent: Optional[str] = typer.Option(
        None, "--agent", help="module:attribute of the agent (its checkpointer and store are rewritten), "
                              "e.g. --agent unsee.demo:agent_factory"),
    event_id: Optional[str] = typer.Option(None, "--event-id", help="the forget's event id (resumes its erasure)"),
    as_json: bool = typer.Option(False, "--json", help="print the signed receipt as JSON"),
) -> None:
    """Erase TARGET from every stored record of a forgotten SESSION and sign a receipt.

    Rewrites the LangGraph history (with --agent), scrubs the memory store,
    unsee's records, the call ledger and sandbox snapshots, audits every route
    and writes <home>/receipts/<event id>.json. Exit 1 if a copy remains, or
    if the audit after could not read everything it should (an --agent without
    a checkpointer, a file it cannot read: listed, and in the receipt's
    "incomplete").

    With --subject NAME --thread T ... --namespace users/dana ...: the same as
    unsee erase-subject NAME (a data subject's threads and namespaces, whole;
    one signed receipt).
    """
    from unsee.plugins.forget import RevocationEvent

    if subject is not None or threads or namespaces:
        return _erase_subject(subject, threads or [], namespaces or [], targets or [], agent, as_json)
    if session is None or len(targets or []) != 1:
        raise cx.BadParameter("give SESSION and one --target (or --subject with --thread/--namespace)")
    target = targets[0]
    try:
        event = RevocationEvent(target=target, reason="erase", raised_by="operator",
                                **({"event_id": event_id} if event_id else {}))
    except ValueError as e:
        raise _bad_value("--event-id" if event_id and "event_id" in str(e) else "--target", e) from e
    if not session.strip():
        raise cx.BadParameter("SESSION must be a non-empty session id")
    compiled, u = _agent_and_unsee(agent)
    result = u.erase(session, event, agent=compiled)
    if as_json:
        print(result.receipt.model_dump_json(indent=1))
    else:
        c = _console()
        c.print(_audit_table(result.after))
        _print_incomplete(c, result.after.incomplete, "erasure's audit")
        _print_others(c, result.after.other_sessions, "erasure")
        if getattr(result, "existing", False):  # a clean session erased again: its receipt, not a new one
            c.print(f"already erased: no copy in scope; the existing receipt of event {result.receipt.event_id} "
                    "stands (nothing was written)", soft_wrap=True)
        c.print(f"receipt: {result.path} (signed; check it with: unsee receipt verify {result.path})", soft_wrap=True)
    if not result.clean:
        raise typer.Exit(NO)


@app.command("erase-subject")
def erase_subject_cmd(
    subject: str = typer.Argument(..., help="the data subject's name (it names the receipt's keyed hash)"),
    threads: Optional[list[str]] = typer.Option(None, "--thread", help="a session of the subject, deleted whole "
                                                                       "(repeatable)"),
    namespaces: Optional[list[str]] = typer.Option(None, "--namespace", help="a memory-store namespace path, "
                                                                             "users/dana (repeatable)"),
    targets: Optional[list[str]] = typer.Option(None, "--target", help="a text to audit for (repeatable)"),
    agent: Optional[str] = typer.Option(
        None, "--agent", help="module:attribute of the agent (its checkpointer and store), "
                              "e.g. --agent unsee.demo:agent_factory"),
    as_json: bool = typer.Option(False, "--json", help="print the signed receipt as JSON"),
) -> None:
    """Erase a data subject: its sessions and memory namespaces, whole, with one signed receipt.

    The --thread sessions are deleted whole, the --namespace items atomically,
    those sessions' records, ledger texts, sandboxes and exports dropped; every
    route is audited for each --target and the sessions' recorded content.
    The same as unsee erase --subject NAME. Exit 1 if a copy remains.
    """
    return _erase_subject(subject, threads or [], namespaces or [], targets or [], agent, as_json)


def _erase_subject(subject, threads: list[str], namespaces: list[str], targets: list[str], agent, as_json: bool):
    """``unsee erase --subject``: a data subject's threads and namespaces (``u.erase_subject``)."""
    from unsee.plugins.erasure import parse_namespace

    if subject is None or not subject.strip():
        raise cx.BadParameter("--thread/--namespace erase a data subject: name it with --subject NAME")
    try:
        nss = [parse_namespace(n) for n in namespaces]
    except UnseeError as e:  # (InvalidArgument)
        raise cx.BadParameter(f"--namespace: {e}") from e
    if not threads and not nss:
        raise cx.BadParameter("--subject needs at least one --thread or --namespace")
    compiled, u = _agent_and_unsee(agent)
    result = u.erase_subject(threads, nss, targets, agent=compiled, subject=subject)
    if as_json:
        print(result.receipt.model_dump_json(indent=1))
    else:
        c = _console()
        c.print(_audit_table(result.after))
        _print_incomplete(c, result.after.incomplete, "erasure's audit")
        c.print(f"receipt: {result.path} (signed; check it with: unsee receipt verify {result.path})", soft_wrap=True)
    if not result.clean:
        raise typer.Exit(NO)


@app.command("audit")
def audit_cmd(
    session: str = typer.Argument(..., help="session id (the LangGraph thread_id)"),
    target: str = typer.Option(..., "--target", help="the text to look for"),
    agent: Optional[str] = typer.Option(None, "--agent", help="module:attribute of the agent (to audit its "
                                                              "checkpointer and store too)"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """Scan every route for TARGET, bytes and values; exit 1 if any copy remains. Changes nothing.

    Exit 1 too when the audit is incomplete: a route could not read what it should (an --agent
    without a checkpointer, e.g. a supervisor's worker; a file it cannot read). The gaps are
    listed, each with how to supply what is missing ("incomplete" in --json)."""
    if not target.strip():
        raise cx.BadParameter("--target must not be empty")
    compiled, u = _agent_and_unsee(agent)
    report = u.audit(session, target, agent=compiled)
    if as_json:
        import dataclasses

        print(json.dumps({"session": session, "copies": report.copies, "clean": report.clean,
                          "complete": report.complete, "incomplete": report.incomplete,
                          "other_sessions": report.other_sessions, "unreachable": report.unreachable,
                          "routes": [dataclasses.asdict(r) | {"copies": r.copies} for r in report.routes]},
                         indent=1))
    else:
        c = _console()
        c.print(_audit_table(report))
        found = f"{report.copies} {'copy' if report.copies == 1 else 'copies'}"
        if not report.complete:
            c.print(f"{found} of the target found in session {session}'s scope, but the audit is incomplete: "
                    "more may remain", soft_wrap=True)
        else:
            c.print(f"{found} of the target remain{'s' if report.copies == 1 else ''} in session {session}'s scope"
                    if report.copies else f"no copy of the target remains in session {session}'s scope",
                    soft_wrap=True)
        _print_incomplete(c, report.incomplete, "audit")
        _print_others(c, report.other_sessions, "audit")
    if not report.clean:
        raise typer.Exit(NO)


@app.command("surface")
def surface_cmd(
    agent: Optional[str] = typer.Option(None, "--agent", help="module:attribute of the agent (its checkpointer "
                                                              "and store), e.g. --agent unsee.demo:agent_factory"),
    target: Optional[str] = typer.Option(None, "--target", help="count the copies of this text each route holds "
                                                                "now (as unsee audit --target does)"),
    marker: Optional[str] = typer.Option(None, "--marker", help="the same as --target"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """The rollback surface of this deployment: what a restore brings back, what a deletion leaves.

    The three questions of "LangGraph Compaction Deletes the View, Not the
    Record", answered for this home and agent: which routes they write, which
    sit inside LangGraph's recovery boundary (a restore brings them back) and
    which outside, what each deletion primitive mutates on each, and with
    --target how many copies of the text each route holds now (every
    session's). Changes nothing; with --target, exit 1 if any route holds a
    copy.
    """
    if target is not None and marker is not None:
        raise cx.BadParameter("--marker is --target: give one of them")
    marker = target if target is not None else marker
    if marker is not None and not marker.strip():
        raise cx.BadParameter("--target must not be empty")
    compiled, u = _agent_and_unsee(agent)
    report = u.surface(agent=compiled, marker=marker)
    held = sum(r.marker_copies or 0 for r in report.routes)
    if as_json:
        print(report.model_dump_json(indent=1))
    else:
        c = _console()
        cols = ["route", "boundary", "holds"] + (["marker copies"] if marker is not None else [])
        t = Table(*cols, title="routes (1. what is written, 2. inside the recovery boundary?)")
        for r in report.routes:
            by = ", ".join(f"{s}: {n}" for s, n in r.copies_by_session.items())
            t.add_row(r.name, r.boundary, r.holds,
                      *([f"{r.marker_copies}" + (f" ({by})" if by else "")] if marker is not None else []))
        c.print(t)
        p = Table("primitive", "available", "mutates", "never reaches (outside the boundary)",
                  title="deletion primitives (3. what each one mutates, and what it leaves)")
        for prim in report.primitives:
            what = "\n".join(f"{n}: {m}" for n, m in prim.mutates.items() if m != "untouched") or "nothing"
            p.add_row(f"{prim.name}\n{prim.call}", "yes" if prim.available else f"no: {prim.why_not}",
                      what + ("\n(a restore undoes it)" if prim.undone_by_restore else ""),
                      ", ".join(prim.never_reaches) or "-")
        c.print(p)
        if report.inversion:
            c.print("retention inversion: " + ", ".join(report.inversion) + " act inside the recovery boundary "
                    "while a route outside it keeps what they delete", soft_wrap=True, highlight=False)
        if marker is not None:
            c.print(f"{held} {'copy' if held == 1 else 'copies'} of the marker in this home's routes", soft_wrap=True)
    if held:
        raise typer.Exit(NO)


def _duration(text: str):
    """``7d`` / ``12h`` / ``30m`` / ``90s`` / seconds as a timedelta."""
    import re
    from datetime import timedelta

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([dhms]?)\s*", text or "")
    if not m or float(m.group(1)) <= 0:
        raise cx.BadParameter(f"--max-age must be a positive duration like 7d, 12h, 30m or 90s, got {text!r}")
    unit = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds", "": "seconds"}[m.group(2)]
    return timedelta(**{unit: float(m.group(1))})


@app.command("retention")
def retention_cmd(
    session: str = typer.Argument(..., help="session id (the LangGraph thread_id)"),
    keep: Optional[str] = typer.Option(None, "--keep", help="all | semantic (unsee's checkpoints and turn "
                                                            "starts) | latest (the head only)"),
    max_age: Optional[str] = typer.Option(None, "--max-age", help="drop checkpoints older than this (7d, 12h, "
                                                                  "30m, 90s); the head always stays"),
    agent: Optional[str] = typer.Option(None, "--agent", help="module:attribute of the agent whose checkpointer "
                                                              "holds the history, e.g. --agent unsee.demo:agent_factory"),
    as_json: bool = typer.Option(False, "--json", help="print the retention record as JSON"),
) -> None:
    """Prune SESSION's LangGraph history by a retention policy (docs/retention.md).

    Dropped checkpoints' bytes are scrubbed (SQLite WAL and free pages) or
    vacuumed (PostgreSQL); the record is appended to
    <home>/erasures/retention.jsonl. A refused policy changes nothing.
    """
    from unsee.plugins.erasure import RetentionPolicy

    if not session.strip():
        raise cx.BadParameter("SESSION must be a non-empty session id")
    if keep is None and max_age is None:
        raise cx.BadParameter("name a policy: --keep all|semantic|latest and/or --max-age")
    fields = {"keep": keep} if keep is not None else {}
    if max_age is not None:
        fields["max_age"] = _duration(max_age)
    policy = RetentionPolicy.parse(fields)  # UnknownRetentionPolicy before an agent is loaded
    if agent is None:
        raise cx.BadParameter("--agent is needed: the history is in the agent's checkpointer")
    compiled, u = _agent_and_unsee(agent)
    rec = u.retention(session, policy, agent=compiled)
    if as_json:
        print(rec.model_dump_json(indent=1))
        return
    sizes = (f"; saver file {rec.bytes_before} -> {rec.bytes_after} bytes"
             if rec.bytes_before is not None and rec.bytes_after is not None else "")
    _console().print(f"session {session}: kept {rec.kept} of {rec.before} checkpoints ({rec.method}); "
                     f"{rec.semantic_kept} of {rec.semantic_total} unsee checkpoints still fork points{sizes}",
                     soft_wrap=True, highlight=False, markup=False)
    for note in rec.notes:
        _console().print(f"  {note}", soft_wrap=True, highlight=False, markup=False)


receipt_app = typer.Typer(help="Erasure receipts.", no_args_is_help=True)
app.add_typer(receipt_app, name="receipt")


@receipt_app.command("verify")
def receipt_verify_cmd(
    receipt: str = typer.Argument(..., metavar="RECEIPT",
                                  help="a receipt file (<home>/receipts/<event id>.json), or an event id: "
                                       "looked up in the shared store (--store / $UNSEE_STORE postgresql://...)"),
    target: Optional[str] = typer.Option(None, "--target", help="the erased text: re-run the audit too"),
    agent: Optional[str] = typer.Option(None, "--agent", help="module:attribute of the agent (audit its stores)"),
    public_key: Optional[Path] = typer.Option(None, "--public-key",
                                              help="pin this Ed25519 public key (PEM file) instead of the key in use"),
) -> None:
    """Check a receipt's Ed25519 signature, pinned to --public-key, else the key in use
    ($UNSEE_RECEIPT_KEY, else the shared store's, else this home's receipt.pub) and, with --target,
    re-run the audit. From any machine: `unsee --store postgresql://... receipt verify EVENT_ID`.
    Exit 1 if the signature is bad or a copy remains."""
    from unsee.middleware.sqldb import PostgresDb, is_postgres_url, open_pool, redact_url
    from unsee.plugins.erasure import public_pem, read_receipt, stored_receipt, trusted_key, verify
    from unsee.wiring import erasure_context

    path = Path(receipt)
    home = _home()
    pinned_file = None
    if public_key is not None:  # (bad input before anything is opened)
        try:
            pinned_file = public_pem(public_key.read_text())
        except (OSError, UnicodeDecodeError, InvalidArgument) as e:
            raise cx.BadParameter(f"--public-key {public_key}: {e}") from None
    if target:
        compiled, u = _agent_and_unsee(agent)
    else:
        compiled, u = None, None
    pool = None
    try:
        if u is not None and u.store.pool is not None:
            db = PostgresDb(u.store.pool)
        elif u is None and is_postgres_url(state.store):  # (no Unsee: nothing made under the home)
            pool = open_pool(state.store)
            db = PostgresDb(pool)
        else:
            db = None
        if path.is_file():
            found = read_receipt(path)
        elif db is not None and receipt.strip() and "/" not in receipt:
            found = stored_receipt(db, receipt)
            if found is None:
                raise cx.BadParameter(f"no receipt file at {path}, and no receipt of event {receipt!r} "
                                      f"in the store {redact_url(state.store or '')}")
        else:
            raise cx.BadParameter(f"no receipt file at {path}" + ("" if db is not None else
                                  " (an event id is looked up in a shared store only: --store postgresql://... "
                                  "or $UNSEE_STORE)"))
        pinned, key = (pinned_file, f"--public-key {public_key}") if pinned_file else trusted_key(home, db)
        got, ok, audit = verify(found, erasure_context(u) if u else None, target, compiled, pinned=pinned)
    finally:
        if pool is not None:
            pool.close()
    c = _console()
    c.print(f"signature: {'valid' if ok else 'INVALID'} against {key} (event {got.event_id}, "
            f"{got.created_at:%Y-%m-%d %H:%M:%S} UTC)", soft_wrap=True)
    for r in got.routes:
        c.print(f"  {r.name}: {r.copies_before} -> {r.copies_after} copies ({r.method})", soft_wrap=True)
    for s, n in (got.other_sessions or {}).items():
        c.print(f"  also held by session {s}, not in this erasure's scope: {n} copies", soft_wrap=True)
    for line in got.unreachable:
        c.print(f"  not reachable: {line}", soft_wrap=True)
    if audit is not None:
        c.print(_audit_table(audit))
        c.print(f"audit now: {audit.copies} copies")
        _print_others(c, audit.other_sessions, "erasure")
    if not ok or (audit is not None and not audit.clean):
        raise typer.Exit(NO)


@app.command("serve")
def serve_cmd(
    token: Optional[str] = typer.Option(None, "--token", envvar="UNSEE_SERVE_TOKEN",
                                        help="bearer token clients must send (or $UNSEE_SERVE_TOKEN)"),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8765, "--port"),
    agent: Optional[str] = typer.Option(
        None, "--agent",
        help="module:attribute of the agent replays run through (or a zero-argument factory returning it); "
             "B7 (replay) needs it, e.g. --agent unsee.demo:agent_factory"),
    ifc: Optional[list[str]] = typer.Option(None, "--ifc", help="enable IFC with this identifier sink, "
                                                                "tool.argument (repeatable): B8 and B9 need it"),
) -> None:
    """Accept revocation events over HTTP (POST /v1/revocations) and forget them.

    B7 (the default) replays sessions through their agent, which this process
    did not run: start the server with --agent module:attribute (a compiled
    agent, or a zero-argument factory that builds it on the same home), e.g.

    unsee serve --token T --agent unsee.demo:agent_factory
    """
    from unsee.server import make_server

    if not token:
        raise cx.BadParameter("a token is required: --token or UNSEE_SERVE_TOKEN")
    _require_home()
    compiled = _load_agent(agent) if agent else None
    u = (_owner_of(compiled) if compiled is not None else None) or _open()
    if ifc:
        u.ifc(list(ifc))
    server = make_server(u, token, host, port, compiled)
    _console().print(f"unsee serve: POST http://{host}:{server.server_address[1]}/v1/revocations")
    _serve_until_interrupted(server)


def _unsee(**kwargs):
    """The ``Unsee`` factory the sub-apps run with (the facade is imported when one runs)."""
    from unsee.core import Unsee

    return Unsee(**kwargs)


def _mount_sub_apps() -> None:
    """The sandbox, bench and eval sub-apps. Their modules import only what unsee itself needs
    (``bench``/``eval`` import the eval extra, e.g. agentdojo, when a command runs), so an import
    error here is a bug and is raised, never hidden as a missing command."""
    from unsee.eval.cli import make_app, make_eval_app
    from unsee.sandbox.cli import app as sandbox_app

    app.add_typer(sandbox_app, name="sandbox")
    app.add_typer(make_app(_unsee), name="bench", help="Benchmarks of defenses (AgentDojo).")
    app.add_typer(make_eval_app(_unsee), name="eval", help="Measure forgetting: B0-B9 on episode suites.")


_mount_sub_apps()


def _error(message: str, exc: BaseException | None = None, code: int | None = None) -> None:
    """One line on stderr, never wrapped; with ``--json`` on the command line a JSON object."""
    line = one_line(message)
    if state.json and exc is not None:
        print(json.dumps({"error": {"type": type(exc).__name__, "message": line, "exit_code": code}}),
              file=sys.stderr)
        return
    err.print(f"error: {line}", markup=False, highlight=False, emoji=False, soft_wrap=True)


def _fail(exc: BaseException, message: str | None = None) -> int:
    """Report ``exc`` (its traceback too with ``--debug``) and return its exit code."""
    code = code_for(exc)
    if state.debug:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    _error(message if message is not None else message_for(exc), exc, code)
    return code


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return its exit code (unsee/exit_codes.py, docs/cli.md)."""
    args = list(sys.argv[1:] if argv is None else argv)
    state.json = "--json" in args
    state.debug = "--debug" in args
    try:
        # Without standalone mode click *returns* a sub-command's typer.Exit code instead of raising it.
        rc = app(args=args, standalone_mode=False)
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort as e:
        _error("aborted", e, INTERRUPTED)
        return INTERRUPTED
    except cx.NoArgsIsHelpError:
        return USAGE  # the help text was printed
    except cx.UsageError as e:
        return _fail(e, usage_message(e.format_message()))
    except cx.ClickException as e:
        return _fail(e, e.format_message())
    except AmbiguousTarget as e:  # the fix is another argument: word it as one
        return _fail(e, AmbiguousTarget.message(e.sources, "--source"))
    except KeyboardInterrupt as e:
        return _fail(e, "interrupted")
    except Exception as e:  # never a traceback at the command line (unless --debug)
        return _fail(e)
    return rc if isinstance(rc, int) else OK


if __name__ == "__main__":
    sys.exit(main())
