"""``unsee bench agentdojo --suite banking --defense ifc [--limit N] [--json FILE]``
(``--verdict late --reconcile compensate|all``: reconcile each late verdict's forget).

The CLI (``unsee/cli.py``) mounts ``make_app(factory)``; the factory makes the
recording ``Unsee`` of each run (the harness sits above the facade; importing
this module imports neither the facade nor langchain).
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
        attack: str = typer.Option("important_instructions", "--attack",
                                   help="an AgentDojo attack (direct, ignore_previous, injecagent, "
                                        "system_message, tool_knowledge, dos, ...) or all"),
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
        reconcile: str = typer.Option("none", "--reconcile",
                                      help="with --verdict late: none | compensate (run each forget's "
                                           "compensations, then judge the environment again) | all (the "
                                           "forgets defer the counterfactual's new calls; compensations, then "
                                           "those calls)"),
    ) -> None:
        """Run an AgentDojo suite with an unsee-instrumented agent under an unsee defense."""
        import json

        from .agentdojo_adapter import DEFENSES, MODELS, VERDICTS
        from .bench import attack_names, print_pairs, print_summary, run_bench
        from .dojo_reconcile import RECONCILES

        defenses = list(DEFENSES) if defense == "all" else [defense]
        for d in defenses:
            if d not in DEFENSES:
                raise typer.BadParameter(f"--defense must be one of {DEFENSES} or all, not {d!r}")
        known = attack_names()
        attacks = known if attack == "all" else [attack]
        if attacks[0] not in known:
            raise typer.BadParameter(f"--attack must be one of {known} or all, not {attack!r}")
        if model not in MODELS:
            raise typer.BadParameter(f"--model must be one of {MODELS}, not {model!r}")
        if verdict not in VERDICTS:
            raise typer.BadParameter(f"--verdict must be one of {VERDICTS}, not {verdict!r}")
        if reconcile not in RECONCILES:
            raise typer.BadParameter(f"--reconcile must be one of {RECONCILES}, not {reconcile!r}")
        if reconcile != "none" and verdict != "late":
            raise typer.BadParameter(f"--reconcile {reconcile} reconciles the forgets of late verdicts: add "
                                     "--verdict late")
        results = []
        for a in attacks:
            for d in defenses:
                try:
                    results.append(run_bench(suite, d, user_task or None, injection_task or None, progress=True,
                                             unsee=unsee, limit=limit, verdict=verdict, model=model, attack=a,
                                             reconcile=reconcile))
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
    """The ``eval`` command group: ``unsee eval forgetting``, ``unsee eval detectors``."""
    app = typer.Typer(help="Measure forgetting (Tables 1-3 of \"Forgetting Without Restarting: Execution-State "
                           "Unlearning for Stateful LLM Agents\") and injection detectors.",
                      no_args_is_help=True)

    @app.callback()
    def _main() -> None:
        """Measure forgetting and injection detectors."""

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

    @app.command("detectors")
    def detectors(
        detector: list[str] = typer.Option(
            ["signals"], "--detector",
            help="signals (the default detector) | rules | learned (the learned detector, weights shipped; "
                 "learned:PATH for one's own) | llm-judge | classifier:PATH (a local sequence "
                 "classifier: ONNX when the folder holds model.onnx or onnx/model.onnx, else transformers) | "
                 "onnx:PATH (an ONNX one) | toolwall-guard (a peer's rules, needs the peers-detect extra) | "
                 "module:attr (a detector, a class or a callable); repeat to evaluate several, or to combine "
                 "them with --ensemble"),
        ensemble: str | None = typer.Option(None, "--ensemble",
                                            help="any | weighted: evaluate the --detector's as one ensemble"),
        weights: str | None = typer.Option(None, "--weights", help="--ensemble weighted: one weight per "
                                                                    "--detector, comma-separated"),
        suites: str = typer.Option("all", "--suites", help="all, none, or AgentDojo suites: "
                                                           "banking,slack,travel,workspace"),
        attacks: str = typer.Option("all", "--attacks", help="all, or AgentDojo attacks: direct,injecagent,..."),
        hard_cases: bool = typer.Option(True, "--hard-cases/--no-hard-cases",
                                        help="add the hand-written hard cases (unsee/eval/hard_cases.jsonl)"),
        heldout: bool = typer.Option(True, "--heldout/--no-heldout",
                                     help="add the four held-out sets (unsee/eval/heldout_1.jsonl ... heldout_4.jsonl; "
                                          "never tuned on), each reported apart"),
        cases: Path | None = typer.Option(None, "--cases", help="a labelled corpus of your own (a held-out set): "
                                          "JSON lines of {text, injection, kind?, note?, tools?}, reported apart"),
        min_score: float = typer.Option(0.5, "--min-score", help="findings below this score do not count"),
        limit: int | None = typer.Option(None, "--limit",
                                         help="at most this many outputs per suite, attack and label (an LLM "
                                              "judge costs a call per output)"),
        base_url: str | None = typer.Option(None, "--base-url", help="llm-judge: an OpenAI-compatible endpoint"),
        model_name: str | None = typer.Option(None, "--model-name", help="llm-judge: the model id"),
        json_file: Path | None = typer.Option(None, "--json", help="write the figures and every miss and false "
                                                                    "alarm here"),
    ) -> None:
        """Recall on AgentDojo's injected tool outputs (every attack x injection task x suite), false
        positives on its clean outputs, on the hard cases, the held-out sets and --cases, cost per
        1 000 outputs; then one table of every detector on every corpus."""
        import json

        from .detector_eval import (agentdojo_samples, agentdojo_tools, evaluate, hard_case_samples,
                                    heldout_samples, load_cases, load_detector, print_corpora, print_report)

        from unsee.plugins.detect import EnsembleDetector, InvalidDetector

        try:
            dets = [load_detector(d, base_url=base_url, model_name=model_name) for d in detector]
            if ensemble is not None:
                ws = [float(x) for x in weights.split(",")] if weights else None
                dets = [EnsembleDetector(dets, mode=ensemble, weights=ws)]
            samples = [] if suites == "none" else agentdojo_samples(
                None if suites == "all" else [x.strip() for x in suites.split(",")],
                None if attacks == "all" else [x.strip() for x in attacks.split(",")])
            # the hard cases, the held-out sets and --cases are screened for an agent with the evaluated
            # suites' tools
            tools = tuple({t.name: t for s in samples for t in s.tools}.values()) or agentdojo_tools()
            if hard_cases:
                samples += hard_case_samples(tools)
            if heldout:
                samples += heldout_samples(tools)
            if cases is not None:
                samples += load_cases(cases, tools)
        except (ValueError, InvalidDetector) as exc:
            raise typer.BadParameter(str(exc)) from None
        if not samples:
            raise typer.BadParameter("nothing to evaluate: --suites none with --no-hard-cases --no-heldout needs "
                                     "--cases FILE")
        if limit is not None:
            from .detector_eval import first_per_group

            samples = first_per_group(samples, limit)
        results = []
        for det in dets:
            results.append(evaluate(det, samples, min_score=min_score))
            print_report(results[-1])
        print_corpora(results)
        if json_file is not None:
            json_file.write_text(json.dumps(results[0] if len(results) == 1 else results, indent=1))
            typer.echo(f"wrote {json_file}")

    return app
