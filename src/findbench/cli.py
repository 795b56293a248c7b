"""The ``findbench`` command line. Each subcommand is a ``_add_<name>`` parser builder plus a
``_run_<name>`` function that calls the library; no algorithm lives here."""

from __future__ import annotations

import argparse
import logging
import sys


def _add_backbone_report(sub) -> None:
    p = sub.add_parser("backbone-report", help="FIND appendix G for a synthetic-neuron backbone: entity selectivity/AUC (+ heatmap), relation accuracy")
    p.add_argument("--out", required=True, help="report folder (summary.json, CSVs, entity_selectivity.png)")
    p.add_argument("--backend", default=None, choices=["embedding", "table", "lm"], help="default: embedding (entities) + table (relations)")
    p.add_argument("--model", default=None, help="LM spec for --backend lm (default: embedded), or sentence encoder for --backend embedding")
    p.add_argument("--categories", default="entities,relations", help="comma-separated: entities, relations")
    p.add_argument("--limit", type=int, default=None, help="concepts / relation functions to evaluate (default: all)")
    p.add_argument("--words-per-concept", type=int, default=None, help="held-out words per entity concept (default: all)")
    p.add_argument("--entries-per-relation", type=int, default=None, help="held-out entries per relation function (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_run_backbone_report)


def _run_backbone_report(args) -> int:
    import json

    from findbench.find.synthetic_neurons import backbone_report

    categories = [c.strip() for c in args.categories.split(",") if c.strip()]
    summary = backbone_report(args.out, backend=args.backend, model=args.model, categories=categories, limit=args.limit,
                              words_per_concept=args.words_per_concept, entries_per_relation=args.entries_per_relation,
                              seed=args.seed)
    print(json.dumps(summary, indent=2, sort_keys=True))
    return 0


def _add_build(sub) -> None:
    p = sub.add_parser("build", help="write the FIND dataset folder (parquet per config + README card)")
    p.add_argument("--out", default="find", help="dataset folder (default ./find)")
    p.add_argument("--seed", type=int, default=0, help="procedural generator seed (default 0)")
    p.add_argument("--configs", default=None, help="comma-separated configs (default: all of numeric,strings,neurons_entities,neurons_relations)")
    p.add_argument("--source", default="procedural", choices=["procedural", "find-v1"], help="our generator or an import of the original release")
    p.add_argument("--data-dir", default=None, help="find-v1: folder of the original release (src/find-dataset layout)")
    p.set_defaults(func=_run_build)


def _run_build(args) -> int:
    from findbench.builders.find import build

    configs = [c.strip() for c in args.configs.split(",") if c.strip()] if args.configs else None
    out = build(args.out, seed=args.seed, configs=configs, source=args.source, data_dir=args.data_dir)
    print(f"wrote {out}")
    return 0


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


def _add_call(sub) -> None:
    p = sub.add_parser("call", help="call a FIND function: prints 'Function input - output pairs: (x, y) ...'")
    p.add_argument("function_id", help='e.g. "numeric/f00042"')
    p.add_argument("inputs", nargs="+", help="inputs (numbers for numeric functions)")
    p.add_argument("--data", default=None, help="dataset folder written by `findbench build` (default: regenerate from --seed)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default=None, help="neurons: embedding / table / lm (default: the row's backbone)")
    p.add_argument("--model", default=None, help="neurons with --backend lm: LM spec (default: embedded)")
    p.set_defaults(func=_run_call)


def _run_call(args) -> int:
    from findbench.find import load_function
    from findbench.schema import parse_function_id

    category, _ = parse_function_id(args.function_id)
    fn = load_function(args.function_id, seed=args.seed, data=args.data, backend=args.backend, lm=args.model)
    xs = _parse_call_inputs(category, args.inputs)
    from findbench.find.export import format_pairs

    if category == "numeric":
        ys = [float(fn(x)) for x in xs]
    else:
        ys = list(fn(xs)) if category.startswith("neurons") else [fn(x) for x in xs]
    print(format_pairs(xs, ys))
    return 0


def _add_export_functions(sub) -> None:
    p = sub.add_parser("export-functions", help="write <category>/fNNNNN/function.py per function for external interpreter harnesses")
    p.add_argument("--out", required=True, help="destination folder")
    p.add_argument("--configs", default="numeric,strings", help="comma-separated configs (default numeric,strings)")
    p.add_argument("--data", default=None, help="dataset folder (default: regenerate from --seed)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_run_export_functions)


def _run_export_functions(args) -> int:
    from findbench.find.export import export_functions

    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    n = export_functions(args.out, configs=configs, data=args.data, seed=args.seed)
    print(f"wrote {n} function scripts under {args.out}")
    return 0


def _add_main(sub) -> None:
    p = sub.add_parser("main", help="the whole job on embedded defaults: build FIND, score ground truth with every metric")
    p.add_argument("--data", default="find", help="dataset folder to build (default ./find)")
    p.add_argument("--out", default="outputs/main", help="results folder (default outputs/main)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--judge-functions", type=int, default=30, help="functions per category scored by each judge")
    p.add_argument("--skip-train", action="store_true", help="do not train the embedded evaluator judge")
    p.set_defaults(func=_run_main)


def _run_main(args) -> int:
    from pathlib import Path

    from findbench.pipeline import run_main

    run_main(data=args.data, out=args.out, seed=args.seed, judge_functions=args.judge_functions, skip_train=args.skip_train)
    print((Path(args.out) / "summary.md").read_text())
    return 0


def _add_build_neuron_tests(sub) -> None:
    p = sub.add_parser("build-neuron-tests", help="write the neuron test sets (huang2023, observational, intervention_tasks)")
    p.add_argument("--out", default="neuron_test_sets", help="dataset folder (default ./neuron_test_sets)")
    p.add_argument("--configs", default=None, help="comma-separated configs (default: huang2023,intervention_tasks, + observational with --layer/--neuron/--explanation)")
    p.add_argument("--data-dir", default=None, help="huang2023: folder with eval_data.tar.gz (default: download the release)")
    p.add_argument("--model", default="embedded", help="model under study (observational, intervention_tasks)")
    p.add_argument("--generator", default=None, help="observational: LM spec writing strings and judging (default: --model)")
    p.add_argument("--layer", type=int, default=None)
    p.add_argument("--neuron", type=int, default=None)
    p.add_argument("--explanation", default=None)
    p.add_argument("--judge", default="lm", help="observational: 'lm' or 'regex:<pattern>'")
    p.add_argument("--corpus", default=None, help="observational: text file, one sentence per line (default: shipped corpus)")
    p.add_argument("--tasks", default=None, help="intervention_tasks: comma-separated task names (default: all)")
    p.set_defaults(func=_run_build_neuron_tests)


def _run_build_neuron_tests(args) -> int:
    from findbench.builders.neuron_test_sets import build

    def split(text):
        return [c.strip() for c in text.split(",") if c.strip()] if text else None

    out = build(
        args.out, configs=split(args.configs), data_dir=args.data_dir, model=args.model, generator=args.generator,
        layer=args.layer, neuron=args.neuron, explanation=args.explanation, judge=args.judge, corpus=args.corpus,
        tasks=split(args.tasks),
    )
    print(f"wrote {out}")
    return 0


def _add_iia(sub) -> None:
    p = sub.add_parser("iia", help="IIA@K sweep of interchange interventions on MLP neurons (JSON + PNG)")
    p.add_argument("--model", default="embedded")
    p.add_argument("--task", required=True, help="comma-separated task names, e.g. numbers/unit_conversion")
    p.add_argument("--layer", required=True, help="comma-separated layers")
    p.add_argument("--out", default=None, help="folder for iia.json and iia.png")
    p.add_argument("--n-pairs", type=int, default=256)
    p.add_argument("--ks", default="1,6,12,25,50,75,100", help="percentages of the layer's neurons")
    p.add_argument("--rankings", default="random,correlation", help="built-in rankings (random, correlation)")
    p.add_argument("--ranking-file", default=None, help="JSON {name: [neuron indices, best first]} of extra rankings")
    p.add_argument("--position", default="auto", choices=["auto", "concept", "last"])
    p.add_argument("--site", default="mlp_activation", choices=["mlp_activation", "block_output"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=64)
    p.set_defaults(func=_run_iia)


def _run_iia(args) -> int:
    import json

    from findbench.neuron_explanations.interventions import run_iia

    def split(text):
        return [c.strip() for c in text.split(",") if c.strip()]

    try:
        layers = [int(x) for x in split(args.layer)]
        ks = [float(x) for x in split(args.ks)]
    except ValueError:
        raise ValueError("--layer and --ks take comma-separated numbers") from None
    rankings = {name: None for name in split(args.rankings)}
    if args.ranking_file:
        with open(args.ranking_file, encoding="utf-8") as fh:
            extra = json.load(fh)
        if not isinstance(extra, dict):
            raise ValueError("--ranking-file must hold a JSON object {name: [neuron indices]}")
        rankings.update(extra)
    results = run_iia(
        args.model, split(args.task), layers, out=args.out, site=args.site, n_pairs=args.n_pairs, ks=ks,
        rankings=rankings, position=args.position, seed=args.seed, batch_size=args.batch_size,
    )
    for res in results:
        for name, curve in res["curves"].items():
            print(f"{res['task']} layer {res['layer']} ({res['position']}, {res['n_pairs']} pairs) {name}: "
                  + " ".join(f"K={k:g}%:{v:.3f}" for k, v in zip(res["ks"], curve)))
    if args.out:
        print(f"wrote {args.out}/iia.json and {args.out}/iia.png")
    return 0


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="findbench",
        description="Build the FIND benchmark and neuron-explanation test sets, call functions, score interpretations.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, obj in sorted(globals().items()):
        if name.startswith("_add_") and callable(obj):
            obj(sub)
    return parser


def _add_evaluator_data(sub) -> None:
    p = sub.add_parser("evaluator-data", help="judge training data: simulated unit tests with ground-truth descriptions (FIND app. F1)")
    p.add_argument("--out", default="evaluator-data", help="dataset folder (default ./evaluator-data)")
    p.add_argument("--n", type=int, default=30000, help="training rows, uniform over strings/entities/relations (default 30000)")
    p.add_argument("--n-heldout", type=int, default=None, help="validation rows from held-out functions (default n/10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the function split and the draws (default 0)")
    p.add_argument("--heldout-fraction", type=float, default=0.2, help="fraction of function groups held out (default 0.2)")
    p.add_argument("--data", default=None, help="take function rows from a `findbench build` folder (default: procedural, seed 0)")
    p.set_defaults(func=_run_evaluator_data)


def _run_evaluator_data(args) -> int:
    from findbench.judge.data import build_evaluator_data

    out = build_evaluator_data(args.out, n=args.n, n_heldout=args.n_heldout, seed=args.seed,
                               heldout_fraction=args.heldout_fraction, data=args.data)
    print(out)
    return 0


def _add_train_evaluator(sub) -> None:
    from findbench.judge.train import add_train_arguments

    p = sub.add_parser("train-evaluator", help="fine-tune the judge with accelerate + peft (defaults: the embedded-evaluator recipe)")
    p.add_argument("--config", default=None, help="YAML file of TrainArgs fields (options given here win)")
    add_train_arguments(p)
    p.set_defaults(func=_run_train_evaluator)


def _run_train_evaluator(args) -> int:
    from findbench.judge.train import train_args_from_namespace, train_evaluator

    print(train_evaluator(train_args_from_namespace(args, args.config)))
    return 0


def _add_evaluator_report(sub) -> None:
    p = sub.add_parser("evaluator-report", help="judge accuracy on held-out functions, true vs wrong descriptions, before vs after (FIND Table A3)")
    p.add_argument("--judge", required=True, help="judge folder, 'embedded-evaluator', a Hub id or server URL")
    p.add_argument("--baseline", default=None, help="second judge reported as 'before' (e.g. embedded)")
    p.add_argument("--out", default="evaluator-report", help="report folder: CSV, JSON, PNG (default ./evaluator-report)")
    p.add_argument("--limit", type=int, default=15, help="held-out functions per category (default 15)")
    p.add_argument("--categories", default="strings,neurons_entities,neurons_relations", help="comma-separated categories")
    p.add_argument("--source", default="procedural", choices=["procedural", "find-v1"], help="functions to judge")
    p.add_argument("--data-dir", default=None, help="dataset folder (find-v1: the release folder)")
    p.add_argument("--evaluator-data", default=None, help="judge data folder whose recorded function split to use")
    p.add_argument("--judge-cache", default=None, help="sqlite file caching the judge's answers (fixed models only)")
    p.add_argument("--baseline-cache", default=None, help="sqlite file caching the baseline's answers (reruns score only --judge)")
    p.add_argument("--mode", default=None, choices=["logprob", "generate", "pmi"],
                   help="the judge's scoring mode (default: the mode a trained judge folder records, else logprob)")
    p.add_argument("--baseline-mode", default=None,
                   help="the baseline's mode(s), comma-separated, e.g. logprob,pmi (default: as for --mode)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_run_evaluator_report)


def _run_evaluator_report(args) -> int:
    from findbench.judge.report import evaluator_report, format_table

    categories = [c.strip() for c in args.categories.split(",") if c.strip()]
    report = evaluator_report(args.judge, baseline=args.baseline, out=args.out, limit=args.limit, categories=categories,
                              source=args.source, data_dir=args.data_dir, evaluator_data=args.evaluator_data,
                              mode=args.mode, seed=args.seed,
                              baseline_mode=[m.strip() for m in args.baseline_mode.split(",") if m.strip()] if args.baseline_mode else None,
                              judge_cache=args.judge_cache, baseline_cache=args.baseline_cache)
    print(format_table(report))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        rc = args.func(args)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"findbench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
