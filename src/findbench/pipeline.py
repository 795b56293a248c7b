"""``findbench main``: the whole job on embedded defaults, on a fresh machine.

1. build the FIND dataset folder (procedural, every config);
2. score the ground-truth code with the code metrics (``find_nmse``, ``find_exact_match``):
   a check that the served functions, their code and the sandbox agree;
3. score ground-truth descriptions with the ``find_unit_test`` judge on a sample of
   functions per category: the untuned embedded judge and, once trained, the
   ``embedded-evaluator`` judge (trained here if missing, unless ``skip_train``);
4. write ``summary.json`` and ``summary.md`` in the output folder.

Every stage is resumable: a finished stage's result is kept in ``<out>/stages/`` and reused.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from findbench._io import atomic_write_json, atomic_write_text
from findbench.constants import JUDGE_CATEGORIES
from findbench.judge.data import split_functions

__all__ = ["run_main", "load_metric"]

logger = logging.getLogger(__name__)



def load_metric(name: str):
    """``evaluate.load`` of a findbench metric module shipped in the package
    (:func:`findbench.metric_path`), so the main job runs from a wheel as from a checkout."""
    import evaluate

    from findbench.resources import metric_path

    return evaluate.load(metric_path(name))


def _stage(out: Path, name: str, fn: Callable[[], Any]) -> Any:
    path = out / "stages" / f"{name}.json"
    if path.is_file():
        logger.info("stage %s: reusing %s", name, path)
        return json.loads(path.read_text())
    logger.info("stage %s: running", name)
    result = fn()
    atomic_write_json(path, result)
    return result


def _ensure_embedded_evaluator() -> str:
    """The trained embedded judge's folder, training it with the default recipe if missing."""
    from findbench.judge.train import TrainArgs, embedded_evaluator_dir, train_evaluator

    try:
        return embedded_evaluator_dir()
    except FileNotFoundError:
        logger.info("training the embedded evaluator judge (default recipe; resumable)")
        return str(train_evaluator(TrainArgs()))


def _sample(rows: list[dict], k: int, seed: int) -> list[dict]:
    if k >= len(rows):
        return rows
    idx = sorted(random.Random(seed).sample(range(len(rows)), k))
    return [rows[i] for i in idx]


def run_main(
    *,
    data: str | Path = "find",
    out: str | Path = "outputs/main",
    seed: int = 0,
    judge_functions: int = 30,
    judges: tuple[str, ...] = ("embedded", "embedded-evaluator"),
    skip_train: bool = False,
) -> dict:
    """Run the main job; returns (and writes) the summary."""
    import datasets

    from findbench.builders.find import build

    if judge_functions < 1:
        raise ValueError(f"judge_functions must be at least 1, got {judge_functions}")
    data, out = Path(data), Path(out)
    out.mkdir(parents=True, exist_ok=True)

    def _build():
        build(str(data), seed=seed)
        return {"data": str(data), "seed": seed}

    _stage(out, "build", _build)
    rows = {c: datasets.load_dataset(str(data), c, split="test").to_list() for c in
            ("numeric", "strings", "neurons_entities", "neurons_relations")}
    summary: dict[str, Any] = {"data": str(data), "seed": seed, "rows": {c: len(r) for c, r in rows.items()}}

    def _code():
        codes = [r["code"] for r in rows["numeric"]]
        nmse = load_metric("find_nmse").compute(predictions=codes, references=codes)
        strings = [r["code"] for r in rows["strings"]]
        em = load_metric("find_exact_match").compute(
            predictions=strings, references=strings, test_inputs=[r["test_inputs"] for r in rows["strings"]]
        )
        return {
            "numeric_ground_truth": {"success_rate": nmse["success_rate"], "mean_nmse": nmse["mean_nmse"]},
            "strings_ground_truth": {"exact_match": em["exact_match"]},
        }

    summary["code_metrics"] = _stage(out, "code_metrics", _code)

    if "embedded-evaluator" in judges and not skip_train:
        summary["evaluator"] = _stage(out, "train_evaluator", lambda: {"path": _ensure_embedded_evaluator()})

    judge_results: dict[str, dict] = {}
    for judge in judges:
        if judge == "embedded-evaluator" and skip_train:
            continue

        def _judge(judge=judge):
            metric = load_metric("find_unit_test")
            res = {}
            for category in JUDGE_CATEGORIES:
                # held-out functions of the judge data's split: never seen in judge training
                splits = split_functions(rows[category], seed=0)
                held = [r for r in rows[category] if splits[r["function_id"]] == "heldout"]
                sample = _sample(held, judge_functions, seed)
                r = metric.compute(
                    predictions=[s["description"] for s in sample],
                    references=[s["unit_tests"] for s in sample],
                    category=category,
                    judge=judge,
                )
                res[category] = r["unit_test_accuracy"]
            return res

        judge_results[judge] = _stage(out, f"judge_{judge}_heldout", _judge)
    summary["unit_test_accuracy"] = judge_results
    atomic_write_json(out / "summary.json", summary)
    atomic_write_text(out / "summary.md", _markdown(summary, judge_functions))
    return summary


def _markdown(summary: dict, judge_functions: int) -> str:
    lines = ["# findbench main job", "", f"Dataset: `{summary['data']}` (seed {summary['seed']}): "
             + ", ".join(f"{c} {n}" for c, n in summary["rows"].items()), ""]
    cm = summary["code_metrics"]
    lines += ["## Ground-truth code through the code metrics", "",
              f"- numeric: success rate {cm['numeric_ground_truth']['success_rate']:.3f}, mean NMSE {cm['numeric_ground_truth']['mean_nmse']:.3g}",
              f"- strings: exact match {cm['strings_ground_truth']['exact_match']:.3f}", ""]
    if summary["unit_test_accuracy"]:
        lines += [f"## Unit-test accuracy with ground-truth descriptions ({judge_functions} held-out functions per category)", "",
                  "Functions held out of judge training (`findbench evaluator-data` split, seed 0); each judge is "
                  "scored in its own mode (`embedded`: FIND's `logprob`; `embedded-evaluator`: `pmi`).", "",
                  "| judge | " + " | ".join(JUDGE_CATEGORIES) + " |", "|---|" + "---|" * len(JUDGE_CATEGORIES)]
        for judge, res in summary["unit_test_accuracy"].items():
            lines.append(f"| {judge} | " + " | ".join(f"{res[c]:.3f}" for c in JUDGE_CATEGORIES) + " |")
    return "\n".join(lines) + "\n"
