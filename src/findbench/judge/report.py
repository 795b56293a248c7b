"""FIND Table A3 for any judge, before vs after fine-tuning: a view of the judge card.

The table is the card's ``true`` and ``other`` rungs (a held-out function's ground-truth
description, a good judge near 1, and another held-out function's, chance 1/3) with a baseline
judge beside the judged one: ``findbench judge-card --rungs true,other --baseline ...``.
:func:`judge_report` keeps ``findbench judge-report`` (deprecated) for one release: it samples
the functions as it did, runs the card and writes :data:`REPORT_FILES`.
"""

from __future__ import annotations

import json
import random
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from findbench.constants import JUDGE_CATEGORIES
from findbench.judge.card_doc import JudgeCard
from findbench.judge.config import JudgeCardConfig, JudgeReportConfig
from findbench.stats import INTERVAL_NOTE, SMALL_N, SMALL_N_LEGEND, format_ci

#: FIND Table A3: unit-test accuracy with ground-truth descriptions.
PAPER_TABLE_A3 = {
    "vicuna-evaluator (fine-tuned)": {"strings": 0.956, "neurons_entities": 0.981, "neurons_relations": 0.998},
    "vicuna-13b (untuned)": {"strings": 0.345, "neurons_entities": 0.390, "neurons_relations": 0.400},
}
REPORT_FILES = ("evaluator_report.csv", "evaluator_report.json", "evaluator_report.png")
#: The card's rungs that make the table, and what FIND calls their descriptions.
A3_RUNGS = {"true": "true", "other": "wrong"}
DEPRECATION = "judge-report is deprecated and will be removed in the next release; it runs " \
              "`findbench judge-card --rungs true,other` (with --baseline) and writes its Table A3 view"
_FIELDS = ("judge", "label", "mode", "category", "descriptions", "n_functions", "unit_test_accuracy",
           "unit_test_accuracy_low", "unit_test_accuracy_high")


def table_a3(card: JudgeCard) -> list[dict[str, Any]]:
    """The card's ``true`` and ``other`` rungs on FIND's unit tests as Table A3 rows: per category,
    judge (baselines first, ``before``; then ``after``, or ``judge`` alone) and description kind,
    ``{judge, label, mode, category, descriptions, n_functions, unit_test_accuracy,
    unit_test_accuracy_ci, per_function, function_ids}``."""
    rows = []
    for cat in card.settings.categories:
        for label, m in card.measurements():
            for rung, kind in A3_RUNGS.items():
                r = next(r for r in m.results if r.category == cat and r.rung == rung and r.test_set == "find")
                rows.append(
                    {
                        "judge": m.judge,
                        "label": label,
                        "mode": m.mode,
                        "category": cat,
                        "descriptions": kind,
                        "n_functions": r.n_functions,
                        "unit_test_accuracy": float(sum(r.per_function) / len(r.per_function)),
                        "unit_test_accuracy_ci": list(m.accuracy[cat][rung].ci),
                        "per_function": r.per_function,
                        "function_ids": r.function_ids,
                    }
                )
    return rows


def _rows(cfg: JudgeReportConfig) -> dict[str, list[dict]]:
    """The held-out functions per category as judge-report sampled them: at most ``limit``, a
    seeded sample in function order."""
    from findbench.judge.data import heldout_rows
    from findbench.judge.scoring import judge_category

    out = {}
    for category in cfg.categories:
        cat = judge_category(category)
        rows = heldout_rows(
            cat,
            source=cfg.source,
            data=cfg.data,
            data_dir=cfg.data_dir,
            function_seed=cfg.function_seed,
            data_seed=cfg.data_seed,
            heldout_fraction=cfg.heldout_fraction,
            evaluator_data=cfg.evaluator_data,
        )
        if cfg.limit is not None and len(rows) > cfg.limit:
            rows = sorted(random.Random(f"{cfg.seed}:{cat}").sample(rows, cfg.limit), key=lambda r: r["function_id"])
        out[cat] = rows
    return out


def judge_report(cfg: JudgeReportConfig, *, progress: bool = True) -> dict[str, Any]:
    """Judge accuracy on held-out functions with true and with wrong descriptions, the baseline
    beside the judge: the judge card's Table A3 view (:func:`table_a3`), written to
    :data:`REPORT_FILES` in ``cfg.out`` (unless None).

    Returns ``{"results": [{judge, label, category, descriptions, n_functions, unit_test_accuracy,
    per_function, function_ids}], "settings", "paper_table_a3", "files"}``.
    """
    from findbench.judge.card import judge_card

    rows = _rows(cfg)
    card = judge_card(
        JudgeCardConfig(
            judge=cfg.judge,
            out=None,
            judge_mode=cfg.mode,
            categories=list(rows),
            functions_per_category=cfg.limit,
            seed=cfg.seed,
            data=cfg.data,
            evaluator_data=cfg.evaluator_data,
            judge_cache=cfg.judge_cache,
            rungs=list(A3_RUNGS),
            baseline=cfg.baseline,
            baseline_mode=cfg.baseline_mode if cfg.baseline is not None else None,
            baseline_cache=cfg.baseline_cache,
            batch_size=cfg.batch_size,
            function_seed=cfg.function_seed,
            data_seed=cfg.data_seed,
            heldout_fraction=cfg.heldout_fraction,
        ),
        rows,
        progress=progress,
    )
    results = table_a3(card)
    report: dict[str, Any] = {
        "results": results,
        "settings": {
            "limit": cfg.limit,
            "source": cfg.source,
            "seed": cfg.seed,
            "modes": {label: m.mode for label, m in card.measurements()},
            "data_seed": cfg.data_seed,
            "function_seed": cfg.function_seed,
            "heldout_fraction": cfg.heldout_fraction,
            "evaluator_data": str(cfg.evaluator_data) if cfg.evaluator_data else None,
        },
        "paper_table_a3": PAPER_TABLE_A3,
        "files": [],
    }
    if cfg.out is not None:
        from findbench._io import atomic_dir, csv_text

        with atomic_dir(cfg.out) as tmp:
            lines = [
                {
                    **r,
                    "unit_test_accuracy_low": r["unit_test_accuracy_ci"][0],
                    "unit_test_accuracy_high": r["unit_test_accuracy_ci"][1],
                }
                for r in results
            ]
            text = csv_text(
                _FIELDS,
                (
                    [round(row[k], 4) if k.startswith("unit_test_accuracy") else row[k] for k in _FIELDS]
                    for row in lines
                ),
            )
            (tmp / REPORT_FILES[0]).write_text(text, encoding="utf-8")
            (tmp / REPORT_FILES[1]).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
            _plot(results, tmp / REPORT_FILES[2])
        report["files"] = [str(Path(cfg.out) / f) for f in REPORT_FILES]
    return report


def evaluator_report(judge: Any, *, progress: bool = True, **settings: Any) -> dict[str, Any]:
    """Deprecated: :func:`judge_report` with ``JudgeReportConfig(judge=judge, **settings)``
    (``out`` None by default: nothing written)."""
    warnings.warn(DEPRECATION, FutureWarning, stacklevel=2)
    return judge_report(JudgeReportConfig(judge=judge, **{"out": None, **settings}), progress=progress)


def _plot(results: list[dict], path: Path) -> None:
    from matplotlib.figure import Figure

    cats = [c for c in JUDGE_CATEGORIES if any(r["category"] == c for r in results)]
    series = list(dict.fromkeys((r["label"], r["descriptions"]) for r in results))
    width = 0.8 / max(len(series), 1)
    fig = Figure(figsize=(2.2 + 2.2 * len(cats), 3.6))
    ax = fig.subplots()
    for s, (label, kind) in enumerate(series):
        picked = [
            next((r for r in results if r["category"] == c and r["label"] == label and r["descriptions"] == kind), None)
            for c in cats
        ]
        vals = [r["unit_test_accuracy"] if r else 0.0 for r in picked]
        cis = [r.get("unit_test_accuracy_ci") if r else None for r in picked]
        yerr = [
            [v - ci[0] if ci else 0.0 for v, ci in zip(vals, cis)],
            [ci[1] - v if ci else 0.0 for v, ci in zip(vals, cis)],
        ]
        xs = [i + (s - (len(series) - 1) / 2) * width for i in range(len(cats))]
        bars = ax.bar(
            xs,
            vals,
            width,
            yerr=yerr,
            capsize=2,
            label=f"{label}, {kind} descriptions",
            hatch="//" if kind == "wrong" else None,
            alpha=0.55 if kind == "wrong" else 0.9,
        )
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


def format_table(report: Mapping[str, Any]) -> str:
    """The report as a Markdown table: a row per category, a column per judge and description kind."""
    results = report["results"]
    cols = list(dict.fromkeys((r["label"], r["descriptions"]) for r in results))
    lines = [
        "| category | n | " + " | ".join(f"{label} ({k})" for label, k in cols) + " |",
        "|---|---|" + "---|" * len(cols),
    ]
    for cat in dict.fromkeys(r["category"] for r in results):
        vals = {(r["label"], r["descriptions"]): r for r in results if r["category"] == cat}
        n = next(iter(vals.values()))["n_functions"]
        lines.append(
            f"| {cat} | {n} | "
            + " | ".join(
                format_ci(vals[c]["unit_test_accuracy"], vals[c].get("unit_test_accuracy_ci"), n, digits=3)
                if c in vals
                else ""
                for c in cols
            )
            + " |"
        )
    lines += ["", INTERVAL_NOTE]
    if any(r["n_functions"] < SMALL_N for r in results):
        lines.append(SMALL_N_LEGEND)
    return "\n".join(lines)
