"""How good is a judge? FIND Table A3 for any judge, before vs after fine-tuning.

The judge scores held-out functions' unit tests with their **ground-truth** descriptions (a
good judge is near 1) and with **wrong** ones, another held-out function's (chance, 1/3).
Written to :data:`REPORT_FILES`.
"""

from __future__ import annotations

import json
import logging
import os
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from findbench._checks import integer, one_of, str_list
from findbench.constants import JUDGE_CATEGORIES
from findbench.stats import INTERVAL_NOTE, SMALL_N, SMALL_N_LEGEND, bootstrap_ci, format_ci

log = logging.getLogger(__name__)

#: FIND Table A3: unit-test accuracy with ground-truth descriptions.
PAPER_TABLE_A3 = {
    "vicuna-evaluator (fine-tuned)": {"strings": 0.956, "neurons_entities": 0.981, "neurons_relations": 0.998},
    "vicuna-13b (untuned)": {"strings": 0.345, "neurons_entities": 0.390, "neurons_relations": 0.400},
}
REPORT_FILES = ("evaluator_report.csv", "evaluator_report.json", "evaluator_report.png")
_FIELDS = ("judge", "label", "mode", "category", "descriptions", "n_functions", "unit_test_accuracy",
           "unit_test_accuracy_low", "unit_test_accuracy_high")


def wrong_descriptions(descriptions: Sequence[str], *, seed: int = 0) -> list[str]:
    """Each description replaced by another of the list (a seeded derangement never keeping its own text)."""
    if isinstance(descriptions, str) or not isinstance(descriptions, Sequence):
        raise TypeError(f"descriptions must be a list of strings, got {type(descriptions).__name__}")
    n = len(descriptions)
    if n < 2 or len(set(descriptions)) < 2:
        raise ValueError("descriptions: need at least two distinct descriptions to swap")
    rng = random.Random(seed)
    for _ in range(1000):
        perm = list(range(n))
        rng.shuffle(perm)
        if all(descriptions[perm[i]] != descriptions[i] for i in range(n)):
            return [descriptions[j] for j in perm]
    # many repeated texts: the next distinct description in a rotation
    out = []
    for i, d in enumerate(descriptions):
        j = next(k for k in range(1, n + 1) if descriptions[(i + k) % n] != d)
        out.append(descriptions[(i + j) % n])
    return out


def _plot(results: list[dict], path: Path) -> None:
    from matplotlib.figure import Figure

    cats = [c for c in JUDGE_CATEGORIES if any(r["category"] == c for r in results)]
    series = list(dict.fromkeys((r["label"], r["descriptions"]) for r in results))
    width = 0.8 / max(len(series), 1)
    fig = Figure(figsize=(2.2 + 2.2 * len(cats), 3.6))
    ax = fig.subplots()
    for s, (label, kind) in enumerate(series):
        picked = [next((r for r in results if r["category"] == c and r["label"] == label and r["descriptions"] == kind), None)
                  for c in cats]
        vals = [r["unit_test_accuracy"] if r else 0.0 for r in picked]
        cis = [r.get("unit_test_accuracy_ci") if r else None for r in picked]
        yerr = [[v - ci[0] if ci else 0.0 for v, ci in zip(vals, cis)], [ci[1] - v if ci else 0.0 for v, ci in zip(vals, cis)]]
        xs = [i + (s - (len(series) - 1) / 2) * width for i in range(len(cats))]
        bars = ax.bar(xs, vals, width, yerr=yerr, capsize=2, label=f"{label}, {kind} descriptions",
                      hatch="//" if kind == "wrong" else None, alpha=0.55 if kind == "wrong" else 0.9)
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, v + 0.01, f"{v:.2f}", ha="center", va="bottom", fontsize=7)
    ax.axhline(1 / 3, color="grey", linestyle=":", linewidth=1, label="chance (1/3)")
    ax.set_xticks(range(len(cats)))
    ax.set_xticklabels([c.replace("neurons_", "") for c in cats])
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("unit-test accuracy")
    ax.set_title("Judge accuracy on held-out functions (95 % bootstrap intervals)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def evaluator_report(judge: Any, *, baseline: Any = None, out: str | os.PathLike | None = None, limit: int | None = 15,
                     categories: Sequence[str] = JUDGE_CATEGORIES, source: str = "procedural", data: str | os.PathLike | None = None,
                     data_dir: str | os.PathLike | None = None, evaluator_data: str | os.PathLike | None = None, function_seed: int = 0,
                     data_seed: int = 0, heldout_fraction: float = 0.2, seed: int = 0, mode: str | None = None,
                     baseline_mode: str | Sequence[str] | None = None, batch_size: int = 8,
                     judge_cache: str | os.PathLike | None = None, baseline_cache: str | os.PathLike | None = None,
                     progress: bool = True) -> dict[str, Any]:
    """Judge accuracy on held-out functions with true and with wrong descriptions.

    Args:
        baseline: a second judge (e.g. the untuned ``"embedded"``) reported beside ``judge``.
        out: folder for the CSV / JSON / PNG (replaced atomically); None: nothing written.
        limit: at most this many held-out functions per category (seeded sample); None: all.
        source: ``procedural`` (held out by the judge-data split; functions from the ``findbench
            build`` folder ``data``, else ``function_seed``) or ``find-v1`` (the release in ``data_dir``).
        evaluator_data: a judge data folder whose recorded split to use; default: the split
            recomputed from ``data_seed`` / ``heldout_fraction``.
        mode: default: the mode a trained judge folder records.
        baseline_mode: the baseline's mode, or several (labelled ``before (logprob)``, ...).
        judge_cache / baseline_cache: sqlite files caching each judge's answers, keyed by name
            (for fixed models, not for a judge folder retrained under the same name).

    Returns ``{"results": [{judge, label, category, descriptions, n_functions, unit_test_accuracy,
    per_function, function_ids}], "settings", "paper_table_a3", "files"}``.
    """
    from findbench.judge.data import heldout_rows
    from findbench.judge.scoring import JUDGE_MODES, judge_category, judge_mode_of, judge_unit_tests, load_judge

    one_of("source", source, ("procedural", "find-v1"))
    integer("limit", limit, 2, optional=True)  # wrong descriptions need two functions
    categories = str_list("categories", categories)
    if source == "procedural" and data_dir is not None:
        raise ValueError("data_dir names a find-v1 release folder; with source='procedural' give the built folder as data")
    if source == "find-v1" and data is not None:
        raise ValueError("data names a `findbench build` folder; with source='find-v1' give the release folder as data_dir")

    judge_modes = [mode if mode is not None else judge_mode_of(judge)]
    if baseline is None:
        base_modes: list[str] = []
    elif baseline_mode is None:
        base_modes = [judge_mode_of(baseline)]
    else:
        base_modes = [baseline_mode] if isinstance(baseline_mode, str) else list(baseline_mode)
        if not base_modes:
            raise ValueError("baseline_mode must name at least one mode")
    for m in judge_modes + base_modes:
        one_of("mode", m, JUDGE_MODES)
    judges = [("before", baseline, base_modes), ("after", judge, judge_modes)] if baseline is not None else [("judge", judge, judge_modes)]
    loaded = []
    for label, spec, modes in judges:
        lm = load_judge(spec, cache=baseline_cache if label == "before" else judge_cache, batch_size=batch_size)
        for m in modes:
            loaded.append((f"{label} ({m})" if len(modes) > 1 else label, lm, m))

    results: list[dict] = []
    for category in categories:
        cat = judge_category(category)
        rows = heldout_rows(cat, source=source, data=data, data_dir=data_dir, function_seed=function_seed, data_seed=data_seed,
                            heldout_fraction=heldout_fraction, evaluator_data=evaluator_data)
        if limit is not None and len(rows) > limit:
            rows = sorted(random.Random(f"{seed}:{cat}").sample(rows, limit), key=lambda r: r["function_id"])
        true_desc = [r["description"] for r in rows]
        kinds = {"true": true_desc, "wrong": wrong_descriptions(true_desc, seed=seed)}
        unit_tests = [r["unit_tests"] for r in rows]
        for label, lm, m in loaded:
            for kind, descs in kinds.items():
                log.info("%s judge %s (%s): %s, %s descriptions, %d functions", label, lm.name, m, cat, kind, len(rows))
                res = judge_unit_tests(lm, descs, unit_tests, cat, mode=m, progress=progress)
                results.append({
                    "judge": lm.name, "label": label, "mode": m, "category": cat, "descriptions": kind,
                    "n_functions": len(rows), "unit_test_accuracy": res["unit_test_accuracy"],
                    "unit_test_accuracy_ci": list(bootstrap_ci(res["per_function"])),
                    "per_function": res["per_function"], "function_ids": [r["function_id"] for r in rows],
                })
    report: dict[str, Any] = {
        "results": results,
        "settings": {"limit": limit, "source": source, "seed": seed, "modes": {label: m for label, _, m in loaded}, "data_seed": data_seed,
                     "function_seed": function_seed, "heldout_fraction": heldout_fraction,
                     "evaluator_data": str(evaluator_data) if evaluator_data else None},
        "paper_table_a3": PAPER_TABLE_A3,
        "files": [],
    }
    if out is not None:
        from findbench._io import atomic_dir, csv_text

        with atomic_dir(out) as tmp:
            rows = [{**r, "unit_test_accuracy_low": r["unit_test_accuracy_ci"][0],
                     "unit_test_accuracy_high": r["unit_test_accuracy_ci"][1]} for r in results]
            text = csv_text(_FIELDS, ([round(row[k], 4) if k.startswith("unit_test_accuracy") else row[k] for k in _FIELDS]
                                      for row in rows))
            (tmp / REPORT_FILES[0]).write_text(text, encoding="utf-8")
            (tmp / REPORT_FILES[1]).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
            _plot(results, tmp / REPORT_FILES[2])
        report["files"] = [str(Path(out) / f) for f in REPORT_FILES]
    return report


def format_table(report: Mapping[str, Any]) -> str:
    """The report as a Markdown table: a row per category, a column per judge and description kind."""
    results = report["results"]
    cols = list(dict.fromkeys((r["label"], r["descriptions"]) for r in results))
    lines = ["| category | n | " + " | ".join(f"{label} ({k})" for label, k in cols) + " |", "|---|---|" + "---|" * len(cols)]
    for cat in dict.fromkeys(r["category"] for r in results):
        vals = {(r["label"], r["descriptions"]): r for r in results if r["category"] == cat}
        n = next(iter(vals.values()))["n_functions"]
        lines.append(f"| {cat} | {n} | " + " | ".join(
            format_ci(vals[c]["unit_test_accuracy"], vals[c].get("unit_test_accuracy_ci"), n, digits=3) if c in vals else ""
            for c in cols) + " |")
    lines += ["", INTERVAL_NOTE]
    if any(r["n_functions"] < SMALL_N for r in results):
        lines.append(SMALL_N_LEGEND)
    return "\n".join(lines)

