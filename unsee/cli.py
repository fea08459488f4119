"""The ``unsee`` command line.

The home is ``--home``, else ``$UNSEE_HOME``, else ``./.unsee``. Every error
is one line on stderr and a non-zero exit: 1 for a failed operation, 2 for bad
arguments. No tracebacks.
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from typer._click import exceptions as cx  # typer >= 0.29 bundles its own click
from rich.console import Console
from rich.table import Table

from unsee.core import resolve_home
from unsee.middleware.errors import UnseeError

app = typer.Typer(
    name="unsee",
    help="Make LLM agents forget without restarting: inspect and export recorded sessions.",
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
)
console = Console()
err = Console(stderr=True)


class _State:
    home: Path | None = None


state = _State()


@app.callback()
def _root(
    home: Optional[Path] = typer.Option(None, "--home", help="unsee home (default: $UNSEE_HOME or ./.unsee)"),
) -> None:
    state.home = resolve_home(home)


def _open(must_exist: bool = True):
    from unsee.core import Unsee

    home = state.home or resolve_home()
    if must_exist and not (home / "provenance.sqlite").exists():
        raise UnseeError(f"no unsee home at {home} (set --home or UNSEE_HOME)")
    return Unsee(home=home)


@app.command("sessions")
def sessions_cmd(as_json: bool = typer.Option(False, "--json", help="machine-readable output")) -> None:
    """List recorded sessions."""
    u = _open()
    rows = u.sessions()
    if as_json:
        print(json.dumps([s.model_dump() for s in rows], indent=1))
        return
    t = Table("session", "turns", "artifacts", "checkpoints", "tokenizer", "complete")
    for s in rows:
        t.add_row(s.session_id, str(s.turns), str(s.artifacts), str(s.checkpoints), s.tokenizer or "-",
                  "yes" if not s.incomplete else f"NO ({s.failures} failures)")
    console.print(t)


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

    g = _open().graph(session)
    closure = g.taint(g.locate(target, source)) if target else frozenset()
    sys.stdout.write(FORMATS[fmt.value](g, closure))


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
) -> None:
    """Run the customer-support demo agent, show the provenance of its secret, then forget it."""
    from unsee.demo import run_demo

    if model not in ("local", "scripted"):
        raise cx.BadParameter("--model must be local or scripted")
    home = state.home or resolve_home()
    run_demo(home=home, session=session, jaeger_json=jaeger_json, console=console, model=model,
             forget=not no_forget)


def _load_agent(spec: str):
    """``module:attribute`` -> a compiled agent (or a zero-argument factory of one)."""
    import importlib

    from langgraph.pregel import Pregel

    if ":" not in spec:
        raise cx.BadParameter(f"--agent must be module:attribute, got {spec!r}")
    mod_name, attr = spec.split(":", 1)
    sys.path.insert(0, str(Path.cwd()))
    try:
        obj = getattr(importlib.import_module(mod_name), attr)
    except (ImportError, AttributeError) as e:
        raise UnseeError(f"cannot import --agent {spec}: {e}") from e
    if not isinstance(obj, Pregel) and callable(obj):
        obj = obj()
    if not isinstance(obj, Pregel):
        raise UnseeError(f"--agent {spec} is not a compiled LangGraph agent (got {type(obj).__name__})")
    return obj


def _owner_of(agent):
    """The Unsee instance whose middleware is attached to ``agent``."""
    from unsee.middleware.hooks import UnseeMiddleware

    for spec in (getattr(getattr(agent, "builder", None), "nodes", None) or {}).values():
        fn = getattr(getattr(spec, "runnable", None), "func", None)
        mw = getattr(fn, "__self__", None)
        if isinstance(mw, UnseeMiddleware):
            return mw.recorder.owner
    return None


@app.command("forget")
def forget_cmd(
    session: str = typer.Argument(..., help="session id (the LangGraph thread_id)"),
    target: str = typer.Option(..., "--target", help="the text to forget"),
    source: Optional[str] = typer.Option(None, "--source", help="artifact id or source key it entered through"),
    strategy: str = typer.Option("B7", "--strategy", help="B0 B1 B2 B3 B4 B5 B5' B6 B7 (B8 B9 need IFC)"),
    agent: Optional[str] = typer.Option(None, "--agent", help="module:attribute of the compiled agent or a factory"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the plan, change nothing"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
    reason: str = typer.Option("", "--reason", help="why (kept in the report)"),
) -> None:
    """Forget TARGET in SESSION: rebuild the state as if it had never been seen."""
    from unsee.plugins.replay.events import RevocationEvent
    from unsee.plugins.replay.report import STRATEGIES

    if strategy not in STRATEGIES:
        raise cx.BadParameter(f"unknown strategy {strategy!r}: use one of {' '.join(STRATEGIES)}")
    try:
        event = RevocationEvent(target=target, source=source, reason=reason, raised_by="operator")
    except ValueError as e:
        raise cx.BadParameter(f"--target: {e.errors()[0]['msg'] if hasattr(e, 'errors') else e}") from e
    compiled = _load_agent(agent) if agent else None
    u = (_owner_of(compiled) if compiled is not None else None) or _open()
    result = u.forget(session, event, strategy, agent=compiled, dry_run=dry_run)
    if as_json:
        print(result.model_dump_json(indent=1))
        return
    from unsee.report_view import render_plan, render_report

    console.print(render_plan(result) if dry_run else render_report(result))


@app.command("serve")
def serve_cmd(
    token: Optional[str] = typer.Option(None, "--token", envvar="UNSEE_SERVE_TOKEN",
                                        help="bearer token clients must send (or $UNSEE_SERVE_TOKEN)"),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8765, "--port"),
    agent: Optional[str] = typer.Option(None, "--agent", help="module:attribute of the agent replays run through"),
) -> None:
    """Accept revocation events over HTTP (POST /v1/revocations) and forget them."""
    from unsee.server import make_server

    if not token:
        raise cx.BadParameter("a token is required: --token or UNSEE_SERVE_TOKEN")
    compiled = _load_agent(agent) if agent else None
    u = (_owner_of(compiled) if compiled is not None else None) or _open()
    server = make_server(u, token, host, port, compiled)
    console.print(f"unsee serve: POST http://{host}:{server.server_address[1]}/v1/revocations")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def _mount_optional() -> None:
    """Sub-apps of other packages, mounted when importable."""
    try:
        from unsee.sandbox.cli import app as sandbox_app

        app.add_typer(sandbox_app, name="sandbox")
    except Exception:
        pass
    try:  # needs the eval extra (agentdojo)
        from unsee.plugins.eval.cli import app as bench_app

        app.add_typer(bench_app, name="bench", help="Benchmarks of defenses (AgentDojo).")
    except Exception:
        pass


_mount_optional()


def _error(message: str) -> None:
    """One line on stderr, never wrapped."""
    err.print(f"error: {' '.join(str(message).split())}", markup=False, highlight=False, soft_wrap=True)


def main(argv: list[str] | None = None) -> int:
    try:
        app(args=argv, standalone_mode=False)
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        _error("aborted")
        return 1
    except cx.NoArgsIsHelpError:
        return 2  # the help text was printed
    except cx.UsageError as e:
        _error(e.format_message())
        return 2
    except cx.ClickException as e:
        _error(e.format_message())
        return e.exit_code or 1
    except UnseeError as e:
        _error(str(e))
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # never a traceback at the command line
        _error(f"{type(e).__name__}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
