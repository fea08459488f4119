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
) -> None:
    """Run the customer-support demo agent and show the provenance of its secret."""
    from unsee.demo import run_demo

    home = state.home or resolve_home()
    run_demo(home=home, session=session, jaeger_json=jaeger_json, console=console)


def _mount_optional() -> None:
    """Sub-apps of other packages, mounted when importable."""
    try:
        from unsee.sandbox.cli import app as sandbox_app
    except Exception:
        return
    app.add_typer(sandbox_app, name="sandbox")


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
