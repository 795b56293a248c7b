"""The ``findbench`` command line: :data:`COMMANDS`, one ``(name, config, function)`` per subcommand
in workflow order.

A command's config dataclass lives beside the library function that takes it
(``interpret/config.py``, ``builders/config.py``, ``pipeline.MainConfig``, …): one field per flag,
its default, help and check (``__post_init__``) written once; :mod:`findbench._config` makes the
flags. The function here calls the library with the config and prints what it returns; parsing
imports no model library, and every flag is checked (building the config) before any work.

Flag names keep one meaning across subcommands: ``--data`` is a dataset folder written by
``findbench build`` that the command reads; ``--data-dir`` the folder of an original release
(FIND's ``src/find-dataset``, or Huang et al.'s folder holding ``eval_data.tar.gz``); ``--out``
what the command writes; ``--judge`` the unit-test judge.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from findbench._config import HelpFormatter, add_arguments, from_namespace
from findbench._version import __version__
from findbench.autointerp.commands import (
    LATENTS_EXCLUSIVE,
    AutoInterpCommand,
    AutoInterpMergeCommand,
    AutoInterpValidateCommand,
    TrainSAECommand,
    check_encoder,
    format_score,
)
from findbench.builders.config import BuildConfig, BuildNeuronTestsConfig, CallConfig
from findbench.constants import EMBEDDED_JUDGE_NAME, Interrupted, UsageError, resumable
from findbench.find.config import BackboneReportConfig, ExportFunctionsConfig
from findbench.interpret.config import CompareConfig, EvaluateConfig, InterpretConfig, ReportConfig
from findbench.judge.config import JudgeCardConfig, JudgeDataConfig, TrainArgs
from findbench.lm.base import INTERRUPT
from findbench.neuron_explanations.config import IIAConfig
from findbench.pipeline import MainConfig


# -- the commands' functions: the library call and what it prints -------------------------------
def _build(cfg: BuildConfig) -> None:
    from findbench.builders.find import build

    print(f"wrote {build(cfg)}")


def _call(cfg: CallConfig) -> None:
    from findbench.find import load_function
    from findbench.find.export import format_pairs

    fn = load_function(cfg.function_id, seed=cfg.seed, data=cfg.folder(), backend=cfg.backend, lm=cfg.model)
    if cfg.category == "numeric":
        xs = [float(x) for x in cfg.inputs]
        ys = [float(fn(x)) for x in xs]
    elif cfg.category == "rasp":  # one token sequence in, one output per token out
        from findbench.find.rasp.rows import show

        tokens = fn.check(cfg.inputs)
        print(f"Function input - output pairs: ({show(tokens)}, {show(fn(tokens))})")
        return
    else:
        xs = cfg.inputs
        ys = list(fn(xs)) if cfg.category.startswith("neurons") else [fn(x) for x in xs]
    print(format_pairs(xs, ys))


def _export_functions(cfg: ExportFunctionsConfig) -> None:
    from findbench.find.export import export_functions

    print(f"wrote {export_functions(cfg)} function scripts under {cfg.out}")


def _interpret(cfg: InterpretConfig) -> None:
    from findbench.interpret.run import run_interpretations, summarize_run

    out = run_interpretations(cfg)
    print(f"wrote {out}")
    for s in summarize_run(out):
        print(f"{s['category']}/{s['method']}: {s['episodes']} episodes, {s['answered']} answered, "
              f"{s['mean_rounds']:.1f} rounds on average, {s['calls']} function calls, {s['malformed_commands']} "
              "malformed commands"
              + (f", {s['dropped_commands']} commands dropped and {s['truncated_messages']} messages cut by the "
                 "per-turn caps" if s["dropped_commands"] or s["truncated_messages"] else ""))


def _evaluate(cfg: EvaluateConfig) -> None:
    from findbench.interpret.evaluate import evaluate_run

    print(evaluate_run(cfg)["table"], end="")
    if cfg.report:
        from findbench.interpret.report import write_report

        print(f"wrote {write_report(ReportConfig(run_dir=cfg.run_dir, scores=cfg.out, data=cfg.data))}")


def _report(cfg: ReportConfig) -> None:
    from findbench.autointerp.report import autointerp_results, write_report

    # an AutoInterp output folder: a dashboard per results file (one per --run-id)
    found = autointerp_results(cfg.run_dir)
    for results in found:
        print(f"wrote {write_report(results, out=cfg.out)}")
    if not found:
        from findbench.interpret.report import write_report as write_run_report

        print(f"wrote {write_run_report(cfg)}")


def _compare(cfg: CompareConfig) -> None:
    from findbench.interpret.compare import compare_runs, render_comparison_table

    print(render_comparison_table(compare_runs(cfg)), end="")
    if cfg.out is not None:
        print(f"wrote {Path(cfg.out)}")


def _backbone_report(cfg: BackboneReportConfig) -> None:
    from findbench.find.synthetic_neurons import backbone_report

    print(json.dumps(backbone_report(cfg), indent=2, sort_keys=True))


def _build_neuron_tests(cfg: BuildNeuronTestsConfig) -> None:
    from findbench.builders.neuron_test_sets import build

    print(f"wrote {build(cfg)}")


def _iia(cfg: IIAConfig) -> None:
    from findbench.neuron_explanations.interventions import run_iia

    for res in run_iia(cfg):
        for name, curve in res["curves"].items():
            print(f"{res['task']} layer {res['layer']} ({res['position']}, {res['n_pairs']} pairs) {name}: "
                  + " ".join(f"K={k:g}%:{v:.3f}" for k, v in zip(res["ks"], curve)))
    if cfg.out:
        print(f"wrote {cfg.out}/iia.json and {cfg.out}/iia.png")


def _judge_data(cfg: JudgeDataConfig) -> None:
    from findbench.judge.data import build_judge_data

    print(build_judge_data(cfg))


def _train_judge(args: TrainArgs) -> None:
    args.validate()  # before findbench.judge.train imports torch
    from findbench.judge.train import train_judge

    print(f"wrote {train_judge(args)}")
    if args.install_as_default:
        from findbench.models import embedded_judge_dir

        print(f"installed it as the default judge {EMBEDDED_JUDGE_NAME}: {embedded_judge_dir()}")


def _judge_card(cfg: JudgeCardConfig) -> None:
    from findbench.judge.card import judge_card
    from findbench.judge.card_doc import format_comparison, format_table

    card = judge_card(cfg)
    for tests in card.test_sets:  # a card judged without the probe rungs has no probes table
        tables = [format_table(card, what=w, tests=tests) for w in ("accuracy", "probes") if card.table(w, tests)]
        print(*tables, *([format_comparison(card, tests=tests)] if card.baseline else []), sep="\n\n", end="\n\n")
    print(f"wrote {cfg.out}")


def _train_sae(command: TrainSAECommand) -> None:
    from findbench.autointerp.train_sae import train_sae

    check_encoder(command.config.model, "model")
    out = train_sae(command)
    m = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    print(f"explained variance {m['explained_variance']:.4f}, L0 {m['l0']:.2f}, "
          f"dead latents {m['dead_latents']} ({m['dead_fraction']:.2%}) on {m['n_tokens']} held-out tokens")
    print(f"wrote {out}")


def _autointerp(command: AutoInterpCommand) -> None:
    from findbench.autointerp.run import run_autointerp

    cfg = command.config
    n = len(cfg.override_latents) if cfg.override_latents is not None else cfg.n_latents
    left = (f"the activations of token shard {command.token_shard} left" if command.token_shard is not None
            else f"{n} latents left: their evidence, explanations and scores")
    with resumable(lambda: left):  # the model's part (the LM stages say how far they got)
        run = run_autointerp(command)
    if command.token_shard is not None:
        print(f"token shard {command.token_shard}: rows {run.rows[0]}..{run.rows[1] - 1} "
              f"{'already saved in' if run.resumed['activations'] else 'saved to'} {run.files['activations']}; "
              "then run with --activations and every shard's --out")
        return
    resumed, cache = run.resumed, run.resumed["lm_cache"]
    if resumed["evidence"] or resumed["firing_counts"] or cache["hits"]:
        done = [f"evidence {resumed['evidence']}" if resumed["evidence"] else None,
                f"firing counts {resumed['firing_counts']}" if resumed["firing_counts"] else None,
                f"{cache['hits']} of {cache['hits'] + cache['misses']} LM answers from {cache['path']}"
                if cache["hits"] else None]
        print(f"resumed from {command.out}: " + "; ".join(d for d in done if d))
    print(f"structured outputs {cfg.structured_outputs}: explainer {'on' if run.applied['explainer'] else 'off'}, "
          f"scorer {'on' if run.applied['scorer'] else 'off'}")
    if run.results.shard:
        print(f"shard {command.shard}: the scores of this shard's latents only (`findbench autointerp merge` joins "
              "the shards)")
    for key, values in run.results.eval_result_metrics.to_json().items():
        print(format_score(key, values))
    print("\n".join(f"wrote {run.files[k]}" for k in ("results", "summary", "report") if k in run.files))


def _autointerp_merge(cfg: AutoInterpMergeCommand) -> None:
    from findbench.autointerp.run import merge_shards

    result = merge_shards(cfg)
    for key, values in result["eval_result_metrics"].items():
        print(format_score(key, values))
    print("\n".join(f"wrote {path}" for path in result["files"].values()))


def _autointerp_validate(cfg: AutoInterpValidateCommand) -> None:
    from findbench.autointerp.validation import planted_validation, validation_tables

    result = planted_validation(cfg)
    print(validation_tables(result))
    print(f"{result['seconds']['total']:.0f} s; wrote {cfg.out}")


def _main(cfg: MainConfig) -> None:
    from findbench.pipeline import run_main  # looked up when run (tests replace it)

    summary = run_main(cfg)
    print((Path(cfg.out) / "summary.md").read_text())
    for interpreter, path in summary.get("reports", {}).items():
        print(f"report ({interpreter}): {path}")


#: The subcommands in workflow order: (name, config, function taking it).
COMMANDS: tuple[tuple[str, type, Callable[..., None]], ...] = (
    ("build", BuildConfig, _build), ("call", CallConfig, _call),
    ("export-functions", ExportFunctionsConfig, _export_functions), ("interpret", InterpretConfig, _interpret),
    ("evaluate", EvaluateConfig, _evaluate), ("report", ReportConfig, _report), ("compare", CompareConfig, _compare),
    ("backbone-report", BackboneReportConfig, _backbone_report),
    ("build-neuron-tests", BuildNeuronTestsConfig, _build_neuron_tests), ("iia", IIAConfig, _iia),
    ("judge-data", JudgeDataConfig, _judge_data), ("train-judge", TrainArgs, _train_judge),
    ("judge-card", JudgeCardConfig, _judge_card),
    ("train-sae", TrainSAECommand, _train_sae),
    ("autointerp", AutoInterpCommand, _autointerp),
    ("autointerp-merge", AutoInterpMergeCommand, _autointerp_merge),
    ("autointerp-validate", AutoInterpValidateCommand, _autointerp_validate), ("main", MainConfig, _main),
)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="findbench",
        description="Build the FIND benchmark and neuron-explanation test sets, call functions, score interpretations.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging; errors show their traceback")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, config, function in COMMANDS:
        # No abbreviated flags: with them `main --data` would silently mean `--dataset-out`.
        p = sub.add_parser(name, help=config.__doc__, description=config.__doc__,
                           allow_abbrev=False, formatter_class=HelpFormatter)
        add_arguments(p, config)
        p.set_defaults(_command=(config, function))
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The parsed command line."""
    return make_parser().parse_args(argv)


def _on_sigint(signum: int, frame: Any) -> None:
    """Ctrl-C: in-process generation stops at its next token (worker threads too), then
    KeyboardInterrupt: from the event loop itself where one runs (Inspect's tasks are cancelled
    and write their logs; none of them sees the interrupt as its own error), else where the
    program is. A second Ctrl-C interrupts whatever cleanup is left."""
    INTERRUPT.set()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise KeyboardInterrupt from None
    loop.call_soon_threadsafe(signal.default_int_handler, signum, None)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    at = next((i for i, a in enumerate(argv) if not a.startswith("-")), len(argv))
    if argv[at : at + 2] == ["autointerp", "merge"]:  # `findbench autointerp merge ...` is autointerp-merge
        argv = [*argv[:at], "autointerp-merge", *argv[at + 2 :]]
    args = parse_args(argv)
    import logging

    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    config, function = args._command
    # Ctrl-C handled here (not where the shell starts a background job with SIGINT ignored)
    handled = threading.current_thread() is threading.main_thread() and \
        signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if handled:
        INTERRUPT.clear()
        signal.signal(signal.SIGINT, _on_sigint)
    try:
        if config is AutoInterpCommand and args.override_latents is not None \
                and "--n-latents" in (a.split("=")[0] for a in argv):
            raise UsageError(LATENTS_EXCLUSIVE)
        # every flag is checked here, building the configs, before the function touches any data or model
        function(from_namespace(config, args))
    except (ValueError, FileNotFoundError) as exc:  # the user's input refused; a TypeError is a bug
        if args.verbose:
            raise
        print(f"findbench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        if args.verbose:
            raise
        left = f" ({exc.left})" if isinstance(exc, Interrupted) else ""
        print(f"interrupted: rerun the same command to resume{left}", file=sys.stderr)
        return 130
    finally:
        if handled:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            INTERRUPT.clear()  # an in-process caller's next run generates again
    return 0


if __name__ == "__main__":
    sys.exit(main())
