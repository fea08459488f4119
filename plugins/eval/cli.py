"""``unsee bench agentdojo --suite banking --defense ifc [--limit N] [--json FILE]``.

The facade's CLI mounts ``make_app(Unsee)``: this plugin does not import the
facade; the factory makes the recording ``Unsee`` of each run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from .agentdojo_adapter import UnseeFactory


def make_app(unsee: UnseeFactory) -> typer.Typer:
    """The ``bench`` command group; ``unsee`` makes the ``Unsee`` of each run (the ``Unsee`` class)."""
    app = typer.Typer(help="Evaluations of unsee defenses.", no_args_is_help=True)

    @app.callback()
    def _main() -> None:
        """Evaluations of unsee defenses (keeps `agentdojo` a subcommand)."""

    @app.command("agentdojo")
    def agentdojo(
        suite: str = typer.Option("banking", "--suite", help="banking | slack | workspace | travel"),
        defense: str = typer.Option("none", "--defense", help="none | ifc | detect+forget | ifc+forget | all"),
        limit: int | None = typer.Option(None, "--limit", help="at most this many user tasks"),
        user_task: list[str] | None = typer.Option(None, "--user-task", help="user task id (repeatable)"),
        injection_task: list[str] | None = typer.Option(None, "--injection-task",
                                                           help="injection task id (repeatable)"),
        json_file: Path | None = typer.Option(None, "--json", help="write the results as JSON here"),
        model: str = typer.Option("scripted", "--model",
                                  help="scripted: the injection-following policy; local: the local CPU model"),
        pairs: bool = typer.Option(True, "--pairs/--no-pairs",
                                   help="print utility and attack success per (user task, injection task) pair"),
        verdict: str = typer.Option("sync", "--verdict",
                                    help="sync: the detector screens each tool return before the model sees it; "
                                         "late: verdicts arrive after the run and B7 forgets"),
    ) -> None:
        """Run an AgentDojo suite with an unsee-instrumented agent under an unsee defense."""
        import json

        from .agentdojo_adapter import DEFENSES, MODELS, VERDICTS
        from .bench import print_pairs, print_summary, run_bench

        defenses = list(DEFENSES) if defense == "all" else [defense]
        for d in defenses:
            if d not in DEFENSES:
                raise typer.BadParameter(f"--defense must be one of {DEFENSES} or all, not {d!r}")
        if model not in MODELS:
            raise typer.BadParameter(f"--model must be one of {MODELS}, not {model!r}")
        if verdict not in VERDICTS:
            raise typer.BadParameter(f"--verdict must be one of {VERDICTS}, not {verdict!r}")
        results = []
        for d in defenses:
            try:
                results.append(run_bench(suite, d, user_task or None, injection_task or None, progress=True,
                                         unsee=unsee, limit=limit, verdict=verdict, model=model))
            except ValueError as exc:  # unknown suite or task id
                raise typer.BadParameter(str(exc)) from None
            if pairs:
                print_pairs(results[-1])
        if len(results) > 1:
            print_summary(results)
        if json_file is not None:
            json_file.write_text(json.dumps(results[0] if len(results) == 1 else results, indent=2))
            typer.echo(f"wrote {json_file}")

    return app


def make_eval_app(unsee: UnseeFactory) -> typer.Typer:
    """The ``eval`` command group: ``unsee eval forgetting``."""
    app = typer.Typer(help="Measure forgetting (the paper's Tables 1-3).", no_args_is_help=True)

    @app.callback()
    def _main() -> None:
        """Measure forgetting (keeps `forgetting` a subcommand)."""

    @app.command("forgetting")
    def forgetting(
        suite: str = typer.Option("support", "--suite", help="support | windowed | preference | agentdojo"),
        strategies: str = typer.Option("all", "--strategies", help="all, or codes: B0,B2,B7,..."),
        model: str = typer.Option("scripted", "--model",
                                  help="scripted: the documented stand-in; local: the local CPU model (slow); "
                                       "openai: an OpenAI-compatible endpoint (--base-url)"),
        base_url: str | None = typer.Option(None, "--base-url",
                                            help="--model openai: the endpoint, e.g. http://127.0.0.1:8000/v1 "
                                                 "(key: $UNSEE_OPENAI_API_KEY or $OPENAI_API_KEY)"),
        model_name: str | None = typer.Option(None, "--model-name",
                                              help="--model openai: the model id (default: the endpoint's first)"),
        episodes: int = typer.Option(4, "--episodes", help="episodes generated from the seed"),
        seed: int = typer.Option(0, "--seed"),
        samples: int = typer.Option(5, "--samples", help="sampled probe answer sets behind Leak@k"),
        oracle: bool = typer.Option(False, "--oracle",
                                    help="preference: hand the redaction baselines the excluded option too"),
        json_file: Path | None = typer.Option(None, "--json", help="write every episode and measurement here"),
        plot_file: Path | None = typer.Option(None, "--plot", help="write a PNG: leaks and tokens per strategy"),
    ) -> None:
        """Apply each strategy to its own recording of each episode; print any-leak per channel,
        CAD, agreement with B5, Leak@probes, Leak@5, residue and recomputed tokens."""
        from unsee.middleware.errors import InvalidArgument
        from unsee.plugins.forget import STRATEGIES, UnknownStrategy

        from .forgetting import run_forgetting
        from .forgetting_report import plot, print_table
        from .suites import generate

        codes = list(STRATEGIES) if strategies == "all" else [c.strip() for c in strategies.split(",") if c.strip()]
        try:
            eps = generate(suite, episodes, seed)
            result = run_forgetting(eps, codes, unsee=unsee, model=model, base_url=base_url, model_name=model_name,
                                    samples=samples, oracle=oracle, progress=lambda s: typer.echo(f"  {s}", err=True))
        except (InvalidArgument, UnknownStrategy) as exc:
            raise typer.BadParameter(str(exc)) from None
        print_table(result)
        if json_file is not None:
            json_file.write_text(result.model_dump_json(indent=1))
            typer.echo(f"wrote {json_file}")
        if plot_file is not None:
            plot(result, plot_file)
            typer.echo(f"wrote {plot_file}")

    return app
