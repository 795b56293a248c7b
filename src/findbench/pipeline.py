"""``findbench main``: evaluate interpretability methods on FIND, on embedded defaults.

1. build the FIND dataset folder (``rasp`` too, where its compiled weights are at hand: seed 0's
ship); 2. run the ground-truth code through ``find_nmse`` and ``find_exact_match`` (served
functions, code and sandbox agree; rasp: a sample's reference code against the compiled models);
3. interpret a sample of functions per config (rasp: of its ``test`` split) with ``oracle`` (the
upper bound), ``random``, ``constant``, ``empty``, ``observed`` (the floors) and the embedded LM
(SmolLM2-135M; AIA, and MILAN / AIA+MILAN on neurons) on the first ``lm_functions``;
4. rasp again under each white-box access (``white``, ``rotated``, ``localized``) with every interpreter
and the ``attribution`` baseline (which reads weights, so never runs ``black``); 5. score every run with
``findbench evaluate`` (``embedded-evaluator`` when trained here, else the embedded judge in ``pmi`` mode);
6. write ``summary.json`` and ``summary.md`` (Table 2 with the paper's rows, intervals, n, and the margin
over ``constant``; the rasp table per access condition, ``rasp_access``).

Functions come from the judge data's held-out split (seed 0). Every stage is resumable: results
are kept in ``<out>/stages/<name>.json`` with their key, runs skip finished episodes, scores are
recomputed only when the interpretations or the judge change."""

from __future__ import annotations

import json
import logging
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from findbench import _checks
from findbench._config import Csv, arg, flag
from findbench._io import atomic_write_json, atomic_write_text, fingerprint, read_json_object
from findbench.constants import JUDGE_CATEGORIES, TRAINED_MARKER, UsageError
from findbench.interpret.config import EvaluateConfig, InterpretConfig, ReportConfig, inspect_provider
from findbench.interpret.protocol import ACCESS
from findbench.interpret.references import REFERENCE_INTERPRETERS
from findbench.interpret.runs import load_interpretations
from findbench.judge.config import JudgeDataConfig
from findbench.judge.data import split_functions
from findbench.judge.scoring import JUDGE_MODES
from findbench.models import check_spec, embedded_judge_dir
from findbench.resources import metric_path
from findbench.schema import CATEGORIES, CONFIGS, RASP

logger = logging.getLogger(__name__)

#: Interpreters the main job runs: the references (the ``oracle`` ceiling, the ``random``,
#: ``constant`` and ``empty`` floors; no LM) and the embedded LM.
DEFAULT_INTERPRETERS = ("oracle", "random", "constant", "empty", "observed", "embedded")
#: Layout of the scores a ``scores_<name>`` stage keeps; scores of another layout are recomputed
#: (2: each metric with ``<metric>_ci`` and ``<metric>_n``; 3: floors, margins, near-miss tests, n_degenerate;
#: 4: the judge that scored them; 5: floors from the recorded inputs, ``<metric>_margin_plan``; 6: rasp cells).
_SCORES_FORMAT = 6
_NEURONS = ("neurons_entities", "neurons_relations")
#: Reference interpreters that read the model's weights: main runs them on rasp under white-box access only, and
#: adds them there whatever ``--interpreters`` says (the circuit-discovery baseline of the rasp table).
_WHITE_BOX_ONLY = ("attribution",)
#: rasp functions whose reference code the code-metrics stage runs against their compiled models (all
#: were validated on their whole domain when compiled; this checks the served models and the sandbox).
_RASP_CHECKED = 24


def load_metric(name: str):
    """``evaluate.load`` of a findbench metric module shipped in the package
    (:func:`findbench.metric_path`), so the main job runs from a wheel as from a checkout."""
    import evaluate

    return evaluate.load(metric_path(name))


#: Layout of a ``<out>/stages/<name>.json`` file; files of another layout (or of the older
#: key-less layout, which held the bare result) are recomputed.
_STAGE_FORMAT = 2


def _stage(out: Path, name: str, key: dict[str, Any], fn: Callable[[], Any], *, force: bool = False) -> Any:
    """``fn()``, or the result saved in ``<out>/stages/<name>.json`` under the same ``key`` (rerun on a
    different key, an unreadable file or ``force``)."""
    path = out / "stages" / f"{name}.json"
    # compare keys as they read back from JSON (tuples become lists, ints stay ints)
    key = json.loads(json.dumps(key, sort_keys=True, default=str))
    if path.is_file() and not force:
        try:
            saved = read_json_object(path, f"stage {name}")
        except ValueError:
            saved = {}
        if saved.get("format") == _STAGE_FORMAT and saved.get("key") == key and "result" in saved:
            logger.info("stage %s: reusing %s", name, path)
            return saved["result"]
        logger.info("stage %s: %s holds a result for other arguments (%s, now %s); rerunning", name, path,
                    saved.get("key"), key)
    else:
        logger.info("stage %s: running", name)
    result = fn()
    atomic_write_json(path, {"stage": name, "format": _STAGE_FORMAT, "key": key, "result": result})
    return result


def _sample_functions(rows: dict[str, list[dict]], k: int, seed: int) -> dict[str, list[str]]:
    """``k`` function ids per category, from the judge data's held-out split where there is one."""
    out = {}
    for category, category_rows in rows.items():
        pool = category_rows
        if category in JUDGE_CATEGORIES:
            splits = split_functions(category_rows, seed=0, heldout_fraction=JudgeDataConfig.heldout_fraction)
            pool = [r for r in category_rows if splits[r["function_id"]] == "heldout"]
        elif category == RASP:  # tracr's own programs are public: split dev, never in a headline score
            pool = [r for r in category_rows if r.get("split") == "test"]
        if k < len(pool):
            pool = [pool[i] for i in sorted(random.Random(f"{seed}:{category}").sample(range(len(pool)), k))]
        out[category] = [r["function_id"] for r in pool]
    return out


@dataclass
class MainConfig:
    """the whole job on embedded defaults: build FIND, run the oracle, random, constant, empty, observed and
    embedded interpreters on a sample of every category, score them (FIND Table 2)"""

    dataset_out: str = arg("find", "dataset folder this job builds")
    out: str = arg("outputs/main", "results folder: summary.json, summary.md, stages/, runs/, scores/")
    seed: int = arg(0, "seed of the dataset, the samples and the interpreters")
    interpreters: Csv = arg(
        ",".join(DEFAULT_INTERPRETERS),
        "comma-separated: references (oracle, random, constant, empty, observed) and/or LM specs",
    )
    functions_per_category: int = arg(3, "functions sampled per category")
    lm_functions: int = arg(1, "of those, how many each LM interpreter interprets per category and method")
    rounds: int = arg(3, "an LM interpreter's rounds per episode (FIND: 20)")
    max_tokens: int = arg(128, "an LM interpreter's tokens per turn")
    judge: str | None = arg(
        None, "unit-test judge (default: the trained embedded-evaluator when present, else embedded in pmi mode)"
    )
    judge_mode: str | None = arg(
        None,
        "the judge's scoring mode (default: the mode a trained judge folder records, else logprob)",
        choices=JUDGE_MODES,
    )
    max_connections: int = arg(2, "LM episodes in flight")

    def __post_init__(self) -> None:
        for name in ("functions_per_category", "lm_functions", "rounds", "max_tokens", "max_connections"):
            _checks.positive_int(flag(name), getattr(self, name))
        _checks.integer("--seed", self.seed)
        self.interpreters = _checks.str_list("--interpreters", self.interpreters)
        if not self.interpreters:
            raise UsageError("--interpreters: give at least one name or LM spec")
        for spec in self.interpreters:
            check_spec(spec, flag="--interpreters", names=REFERENCE_INTERPRETERS, providers=inspect_provider)
        if self.judge is not None:
            check_spec(self.judge, flag="--judge")
        if self.judge_mode is not None:
            _checks.one_of("--judge-mode", self.judge_mode, JUDGE_MODES)


def _judge_key(cfg: MainConfig) -> dict[str, Any]:
    """The judge and mode the scores use, and what identifies that judge: the given one, else the trained
    ``embedded-evaluator`` when present, else the untuned embedded model in ``pmi`` mode (never training one
    here). An ``embedded-evaluator`` is also identified by its folder and training record (rewritten by every
    training run), so scores of a retrained judge are not reused; that key's name stays "evaluator", so stages
    cached before the rename are reused."""
    key: dict[str, Any] = {"judge": cfg.judge, "judge_mode": cfg.judge_mode}
    if cfg.judge not in (None, "embedded-evaluator"):
        return key
    try:
        path = embedded_judge_dir()  # trained here, else shipped
    except FileNotFoundError:
        if cfg.judge is None:
            logger.warning(
                "no embedded-evaluator judge on this machine (neither trained here nor shipped with the package); "
                "scoring descriptions with the untuned embedded judge in pmi mode"
            )
            return {"judge": "embedded", "judge_mode": cfg.judge_mode or "pmi"}
        path = embedded_judge_dir(must_exist=False)
    marker = Path(path) / TRAINED_MARKER
    record = fingerprint(marker.read_text(encoding="utf-8")) if marker.is_file() else None
    return key | {"judge": "embedded-evaluator", "evaluator": {"path": path, "trained": record}}


def _ground_truth_code(rows: dict[str, list[dict]], seed: int) -> dict[str, Any]:
    """The ground-truth code through the code metrics (served functions, code and sandbox agree):
    every numeric and string function, and a sample of rasp's against their compiled models."""
    codes = [r["code"] for r in rows["numeric"]]
    nmse = load_metric("find_nmse").compute(predictions=codes, references=codes)
    strings = [r["code"] for r in rows["strings"]]
    em = load_metric("find_exact_match").compute(
        predictions=strings, references=strings, test_inputs=[r["test_inputs"] for r in rows["strings"]]
    )
    out = {
        "numeric_ground_truth": {"success_rate": nmse["success_rate"], "mean_nmse": nmse["mean_nmse"]},
        "strings_ground_truth": {"exact_match": em["exact_match"]},
        "isolation": nmse["isolation"],
    }
    if RASP in rows:  # the reference code against the compiled models, on held-out inputs (a sample)
        ids = _sample_functions({RASP: rows[RASP]}, _RASP_CHECKED, seed)[RASP]
        refs = [r["code"] for r in rows[RASP] if r["function_id"] in ids]
        rasp = load_metric("find_exact_match").compute(predictions=refs, references=refs, function_ids=ids)
        out["rasp_ground_truth"] = {k: rasp[k] for k in ("exact_match", "position_accuracy", "n")}
    return out


def run_main(cfg: MainConfig) -> dict:
    """Run the main job (settings: :class:`MainConfig`, ``findbench main``'s flags); returns (and
    writes) the summary.

    ``out``: ``summary.{json,md}``, ``stages/``, ``runs/<interpreter>/``, ``scores/<interpreter>/`` (rasp under
    white-box access: ``runs/<interpreter>-<access>/``, ``scores/<interpreter>-<access>/``);
    ``functions_per_category`` are sampled per category for the reference interpreters, of which each
    LM interpreter interprets the first ``lm_functions`` (per category and method) with ``rounds`` /
    ``max_tokens`` per episode (FIND used 20 rounds)."""
    import datasets

    from findbench.builders.config import BuildConfig
    from findbench.builders.find import build
    from findbench.find.rows import generator_fingerprint
    from findbench.interpret.evaluate import evaluate_run
    from findbench.interpret.report import write_report
    from findbench.interpret.run import run_interpretations

    data, out = Path(cfg.dataset_out), Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    source = "procedural"
    # keyed by absolute path and generator: a changed findbench or another folder rebuilds it
    data_key = {"data": str(data.resolve()), "source": source, "seed": cfg.seed, "generator": generator_fingerprint()}

    def _build():
        build(BuildConfig(out=str(data), seed=cfg.seed, source=source))
        return {"data": str(data), "seed": cfg.seed, "source": source}

    # a deleted dataset folder is rebuilt even when the stage file says it was built
    _stage(out, "build", data_key, _build, force=not data.is_dir())
    # rasp where the build wrote it (seed 0's compiled weights ship; another seed's need tracr)
    configs = [c for c in CONFIGS if c in CATEGORIES or (data / c).is_dir()]
    rows = {c: datasets.load_dataset(str(data), c, split="test").to_list() for c in configs}
    summary: dict[str, Any] = {"data": str(data), "seed": cfg.seed, "rows": {c: len(r) for c, r in rows.items()}}

    # the code metrics depend only on the ground-truth code and test inputs they are given (and rasp's weights)
    inputs = {"numeric": [r["code"] for r in rows["numeric"]],
              "strings": [[r["code"], r["test_inputs"]] for r in rows["strings"]],
              RASP: [[r["function_id"], r["code"], r["weights_sha256"]] for r in rows.get(RASP, [])]}
    code_key = {**data_key, "metrics": ["find_nmse", "find_exact_match"], "inputs": fingerprint(inputs)}
    summary["code_metrics"] = _stage(out, "code_metrics", code_key, lambda: _ground_truth_code(rows, cfg.seed))

    sample = _sample_functions(rows, cfg.functions_per_category, cfg.seed)
    judge_key = _judge_key(cfg)
    summary.update(
        judge=judge_key["judge"],
        judge_mode=judge_key["judge_mode"],
        sample={c: len(ids) for c, ids in sample.items()},
        lm_budget={"functions": cfg.lm_functions, "rounds": cfg.rounds, "max_tokens": cfg.max_tokens},
    )

    reports: dict[str, str] = {}

    def _interpret_and_score(interpreter: str, access: str) -> dict:
        """Run ``interpreter`` under ``access`` (black: every config; else rasp alone) and score it."""
        name = _run_name(interpreter) + ("" if access == "black" else f"-{access}")
        run_dir, scores_dir = out / "runs" / name, out / "scores" / name
        lm = interpreter not in REFERENCE_INTERPRETERS
        chosen = configs if access == "black" else [RASP]
        ids = {c: (v[:cfg.lm_functions] if lm else v) for c, v in sample.items()}
        common = dict(data=str(data), interpreter=interpreter, out=str(run_dir), seed=cfg.seed, rounds=cfg.rounds,
                      max_connections=cfg.max_connections, max_tokens=cfg.max_tokens if lm else None, access=access)
        logger.info("interpreting with %s (%s access)", interpreter, access)
        run_interpretations(
            InterpretConfig(method=["aia"], configs=list(chosen), functions=[f for c in chosen for f in ids[c]],
                            **common)
        )
        if access == "black":
            run_interpretations(InterpretConfig(method=["milan", "aia+milan"], configs=list(_NEURONS),
                                                functions=[f for c in _NEURONS for f in ids[c]], **common))
        key = {**judge_key, **data_key, "run": fingerprint(load_interpretations(run_dir)),
               "scores_format": _SCORES_FORMAT}

        def _score():
            # the judge's answers are cached per judge (a retrained judge gets a new file)
            res = evaluate_run(EvaluateConfig(
                run_dir=str(run_dir),
                data=str(data),
                judge=judge_key["judge"],
                judge_mode=judge_key["judge_mode"],
                out=str(scores_dir),
                judge_cache=str(out / f"judge-cache-{fingerprint(judge_key)}.sqlite"),
            ), progress=False)
            return {"scores": res["scores"], "counts": res["counts"]}

        result = _stage(out, f"scores_{name}", key, _score)
        # the page a person reads: Table 2 with figures and every transcript beside its scores
        reports[interpreter if access == "black" else name] = str(
            write_report(ReportConfig(run_dir=str(run_dir), scores=str(scores_dir), data=str(data))))
        return result

    results = {i: _interpret_and_score(i, "black") for i in cfg.interpreters if i not in _WHITE_BOX_ONLY}
    if RASP in configs:  # rasp again under each white-box access, with the attribution baseline
        summary["rasp_access"] = {
            "black": {i: r["scores"].get(RASP, {}).get("aia", {}) for i, r in results.items()},
            **{access: {i: _interpret_and_score(i, access)["scores"].get(RASP, {}).get("aia", {})
                        for i in dict.fromkeys([*cfg.interpreters, *_WHITE_BOX_ONLY])}
               for access in ACCESS[1:]},
        }
    elif set(cfg.interpreters) <= set(_WHITE_BOX_ONLY):
        logger.warning("%s run on rasp alone, which %s does not hold: nothing to interpret", cfg.interpreters, data)
    summary.update(results=results, reports=reports)
    atomic_write_json(out / "summary.json", summary)
    atomic_write_text(out / "summary.md", _markdown(summary))
    return summary


def _run_name(interpreter: str) -> str:
    """A folder name for an interpreter spec (a path or URL becomes its last part)."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", interpreter.rstrip("/").split("/")[-1] or "lm")


def _markdown(summary: dict) -> str:
    from findbench.interpret.scoreboard import render_comparison, render_rasp_access
    from findbench.interpret.scores import Scores

    cm, budget = summary["code_metrics"], summary["lm_budget"]
    sizes = ", ".join(f"{c} {n}" for c, n in summary["sample"].items())
    runs = {name: Scores.from_json(res["scores"], f"scores of {name}") for name, res in summary["results"].items()}
    judges = "; ".join(sorted({run.judge.describe() for run in runs.values() if run.judge is not None}))
    mode = summary.get("judge_mode")
    lines = [
        "# findbench main job",
        "",
        f"Dataset: `{summary['data']}` (seed {summary['seed']}): "
        + ", ".join(f"{c} {n}" for c, n in summary["rows"].items()),
        "",
        "## Ground-truth code through the code metrics",
        "",
        f"- numeric: success rate {cm['numeric_ground_truth']['success_rate']:.3f}, "
        f"mean NMSE {cm['numeric_ground_truth']['mean_nmse']:.3g}",
        f"- strings: exact match {cm['strings_ground_truth']['exact_match']:.3f}",
        *(
            [f"- rasp: reference code against the compiled models, exact match {rasp['exact_match']:.3f}, "
             f"position accuracy {rasp['position_accuracy']:.3f} (n={rasp['n']})"]
            if (rasp := cm.get("rasp_ground_truth")) else []
        ),
        f"- sandbox: {cm.get('isolation', '')}",
        "",
        "## Interpreters on FIND",
        "",
        f"Functions per category (held out of judge training): {sizes}; LM interpreters take the first "
        f"{budget['functions']} of each, {budget['rounds']} rounds of at most {budget['max_tokens']} tokens. "
        "Judge: "
        + (judges or f"`{summary['judge']}`" + (f" ({mode} mode)" if mode else ""))
        + ".",
        "",
        render_comparison(runs).strip() if runs else "No interpreter ran on every config.",
    ]
    if "rasp_access" in summary:
        access_runs = {
            access: {name: Scores.from_json({RASP: {"aia": cell}}, f"rasp scores of {name} ({access})")
                     for name, cell in cells.items()}
            for access, cells in summary["rasp_access"].items()
        }
        lines += [
            "",
            "## rasp: access conditions",
            "",
            f"The rasp sample ({summary['sample'].get(RASP, 0)} functions; LM interpreters the first "
            f"{budget['functions']}) under each access condition: `black` (calls only), `white` (tools over the "
            "compiled weights), `rotated` (the same function, basis scrambled), `localized` (white plus the "
            "components that matter); role F1 and node AUROC score the answer's component map.",
            "",
            render_rasp_access(access_runs).strip(),
        ]
    return "\n".join(lines) + "\n"
