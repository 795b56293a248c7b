"""``findbench main``: the whole job on embedded defaults, on a fresh machine.

1. build the FIND dataset folder (procedural, every config);
2. score the ground-truth code with the code metrics (``find_nmse``, ``find_exact_match``):
   a check that the served functions, their code and the sandbox agree;
3. score ground-truth descriptions with the ``find_unit_test`` judge on a sample of
   functions per category: the untuned embedded judge and, once trained, the
   ``embedded-evaluator`` judge (trained here if missing, unless ``skip_train``);
4. write ``summary.json`` and ``summary.md`` in the output folder.

Every stage is resumable: a finished stage's result is kept in ``<out>/stages/<name>.json``
together with the arguments it was computed from (its key), and reused only while that key is
unchanged; a run with other arguments (seed, data folder, number of judged functions, a
retrained judge, ...) recomputes the stage and replaces the stale file.
"""

from __future__ import annotations

import hashlib
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


#: Layout of a ``<out>/stages/<name>.json`` file; files of another layout (or of the older
#: key-less layout, which held the bare result) are recomputed.
_STAGE_FORMAT = 2


def _fingerprint(obj: Any) -> str:
    """A short content hash of JSON-able data (rows, descriptions, unit tests)."""
    blob = json.dumps(obj, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def _stage(out: Path, name: str, key: dict[str, Any], fn: Callable[[], Any], *, force: bool = False) -> Any:
    """``fn()``, or the result saved by an earlier run with the same ``key``.

    The file ``<out>/stages/<name>.json`` holds ``{"stage", "format", "key", "result"}``. When
    the saved key differs from ``key`` (or the file is unreadable, of an older layout, or
    ``force`` is set) the stage runs again and the file is replaced in one rename.
    """
    path = out / "stages" / f"{name}.json"
    # compare keys as they read back from JSON (tuples become lists, ints stay ints)
    key = json.loads(json.dumps(key, sort_keys=True, default=str))
    if path.is_file() and not force:
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            saved = None
        if isinstance(saved, dict) and saved.get("format") == _STAGE_FORMAT and saved.get("key") == key and "result" in saved:
            logger.info("stage %s: reusing %s", name, path)
            return saved["result"]
        old = saved.get("key") if isinstance(saved, dict) else None
        logger.info("stage %s: %s holds a result for other arguments (%s, now %s); rerunning", name, path, old, key)
    else:
        logger.info("stage %s: running", name)
    result = fn()
    atomic_write_json(path, {"stage": name, "format": _STAGE_FORMAT, "key": key, "result": result})
    return result


def _evaluator_key(path: str) -> dict[str, Any]:
    """What identifies a trained judge folder: its path and its training record (rewritten by
    every training run), so scores of a retrained judge are not reused."""
    from findbench.constants import TRAINED_MARKER

    marker = Path(path) / TRAINED_MARKER
    record = marker.read_text(encoding="utf-8") if marker.is_file() else None
    return {"path": str(path), "trained": _fingerprint(record) if record is not None else None}


def _ensure_embedded_evaluator() -> str:
    """The trained embedded judge's folder, training it with the default recipe if missing."""
    from findbench.judge.train import TrainArgs, embedded_evaluator_dir, train_evaluator

    try:
        return embedded_evaluator_dir()
    except FileNotFoundError:
        logger.info("training the embedded evaluator judge (default recipe; resumable)")
        return str(train_evaluator(TrainArgs()))


def _evaluator_ready() -> bool:
    from findbench.models import embedded_evaluator_dir

    try:
        embedded_evaluator_dir()
    except FileNotFoundError:
        return False
    return True


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
    source = "procedural"
    # the dataset folder by absolute path: the same relative name run from another folder is
    # another dataset
    data_key = {"data": str(data.resolve()), "source": source, "seed": seed}

    def _build():
        build(str(data), seed=seed, source=source)
        return {"data": str(data), "seed": seed, "source": source}

    # a deleted dataset folder is rebuilt even when the stage file says it was built
    _stage(out, "build", data_key, _build, force=not data.is_dir())
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

    # the code metrics depend only on the ground-truth code and test inputs they are given
    code_key = {
        **data_key,
        "metrics": ["find_nmse", "find_exact_match"],
        "inputs": _fingerprint({
            "numeric": [r["code"] for r in rows["numeric"]],
            "strings": [[r["code"], r["test_inputs"]] for r in rows["strings"]],
        }),
    }
    summary["code_metrics"] = _stage(out, "code_metrics", code_key, _code)

    if "embedded-evaluator" in judges and not skip_train:
        from findbench.constants import EMBEDDED_EVALUATOR_VERSION

        summary["evaluator"] = _stage(
            out, "train_evaluator", {"judge": "embedded-evaluator", "version": EMBEDDED_EVALUATOR_VERSION},
            lambda: {"path": _ensure_embedded_evaluator()},
            # a judge folder removed since the stage ran is trained again
            force=not _evaluator_ready(),
        )

    active = [j for j in judges if not (j == "embedded-evaluator" and skip_train)]
    samples: dict[str, list[dict]] = {}
    if active:
        for category in JUDGE_CATEGORIES:
            # held-out functions of the judge data's split (seed 0): never seen in judge training
            splits = split_functions(rows[category], seed=0)
            held = [r for r in rows[category] if splits[r["function_id"]] == "heldout"]
            samples[category] = _sample(held, judge_functions, seed)
        summary["judge_functions"] = judge_functions
        summary["judged_functions"] = {c: len(s) for c, s in samples.items()}
    sample_key = {
        **data_key,
        "judge_functions": judge_functions,
        "split_seed": 0,
        "sample": _fingerprint({
            c: [[s["function_id"], s["description"], s["unit_tests"]] for s in sample] for c, sample in samples.items()
        }),
    }

    judge_results: dict[str, dict] = {}
    for judge in active:

        def _judge(judge=judge):
            metric = load_metric("find_unit_test")
            res = {}
            for category, sample in samples.items():
                r = metric.compute(
                    predictions=[s["description"] for s in sample],
                    references=[s["unit_tests"] for s in sample],
                    category=category,
                    judge=judge,
                )
                res[category] = r["unit_test_accuracy"]
            return res

        key = {"judge": judge, **sample_key}
        if judge == "embedded-evaluator":
            from findbench.models import embedded_evaluator_dir

            key["evaluator"] = _evaluator_key(embedded_evaluator_dir(must_exist=False))
        judge_results[judge] = _stage(out, f"judge_{judge}_heldout", key, _judge)
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
        # the number actually judged: fewer than asked when a category holds out fewer functions
        judged = summary.get("judged_functions") or {}
        sizes = sorted(set(judged.values()))
        if sizes == [judge_functions] or not judged:
            per = f"{judge_functions} held-out functions per category"
        else:
            per = (f"up to {judge_functions} held-out functions per category: "
                   + ", ".join(f"{c} {n}" for c, n in judged.items()))
        lines += [f"## Unit-test accuracy with ground-truth descriptions ({per})", "",
                  "Functions held out of judge training (`findbench evaluator-data` split, seed 0); each judge is "
                  "scored in its own mode (`embedded`: FIND's `logprob`; `embedded-evaluator`: `pmi`).", "",
                  "| judge | " + " | ".join(JUDGE_CATEGORIES) + " |", "|---|" + "---|" * len(JUDGE_CATEGORIES)]
        for judge, res in summary["unit_test_accuracy"].items():
            lines.append(f"| {judge} | " + " | ".join(f"{res[c]:.3f}" for c in JUDGE_CATEGORIES) + " |")
    return "\n".join(lines) + "\n"
