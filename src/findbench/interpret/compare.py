"""Whether two scored runs differ, per column of Table 2 (``findbench compare RUN_A RUN_B``).

For every ``(category, method, metric)`` both ``findbench evaluate`` folders scored, the functions
scored in both are paired by ``function_id`` (so compare runs on the same dataset) and resampled
together (:func:`findbench.stats.paired_bootstrap`): each run's mean, the difference ``A - B``
with its interval, a two-sided p-value and a verdict. A column with fewer than
:data:`~findbench.stats.SMALL_N` shared functions gets no verdict (``n too small``): a percentile
bootstrap on so few units is too narrow to call a difference. Units as
:func:`findbench.interpret.evaluate.unit_values`; ``mean_nmse`` is not compared (an unbounded mean)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Literal

from pydantic import Field

from findbench._io import atomic_write_json, read_csv_rows
from findbench._typed import JsonDoc, document
from findbench.interpret.config import CompareConfig
from findbench.interpret.evaluate import CATEGORY_METRICS, FLOORED_SCORES, METHODS, unit_values
from findbench.interpret.scoreboard import TABLE2_COLUMNS
from findbench.schema import CONFIGS
from findbench.stats import (
    DEFAULT_CONFIDENCE,
    SMALL_N,
    SMALL_N_LEGEND,
    is_small,
    paired_bootstrap,
)

#: The metrics of ``scores.json`` compared (per category: those of ``CATEGORY_METRICS``), each followed
#: by its margins over the run's own observations and over the observed plan where it has them (:data:`MARGINS`).
COMPARED_METRICS = ("nmse_success", "exact_match", "unit_test_accuracy", "domain_iou", "unit_test_accuracy_near",
                    "position_accuracy")
MARGINS = tuple(f"{m}_margin" for m in FLOORED_SCORES)
#: Each margin column after its metric's, and what its header says.
_MARGIN_HEADERS = (("_margin", "margin over own observations"), ("_margin_plan", "margin over the observed plan"))
_PER_FUNCTION = "per_function.csv"
#: A column's ``verdict``: the interval excludes 0, it does not, or too few shared functions to say.
DIFFERS, NO_DIFFERENCE, N_TOO_SMALL = "differs", "no difference", "n too small"
N_TOO_SMALL_NOTE = (f"{N_TOO_SMALL}: fewer than {SMALL_N} functions scored by both runs; no verdict and no p-value "
                    "are given (A − B and its interval are shown for reference only).")


def _per_function_path(folder: Path, name: str) -> Path:
    for candidate in (folder / _PER_FUNCTION, folder / "scores" / _PER_FUNCTION):
        if candidate.is_file():
            return candidate
    if not folder.is_dir():
        raise FileNotFoundError(f"{name}: {folder} is not a folder")
    raise FileNotFoundError(
        f"{name}: no {_PER_FUNCTION} in {folder} (nor in {folder / 'scores'}); give a folder written "
        "by `findbench evaluate`"
    )


def read_per_function(
    scores_dir: str | os.PathLike, *, name: str = "scores_dir"
) -> dict[tuple[str, str], dict[str, dict[str, str]]]:
    """``per_function.csv`` of a ``findbench evaluate`` folder (or of ``<run>/scores``) as
    ``{(category, method): {function_id: row}}``; ValueError naming ``name`` for a file lacking an
    id column (``function_id``, ``category``, ``method``) or scoring a function twice. Metric columns
    a file lacks (written by an older findbench) leave those columns unscored."""
    path = _per_function_path(Path(scores_dir), name)
    rows = read_csv_rows(path)
    if missing := [c for c in ("function_id", "category", "method") if rows and c not in rows[0]]:
        raise ValueError(
            f"{name}: {path} lacks the column(s) {', '.join(missing)} (not written by `findbench evaluate`)"
        )
    out: dict[tuple[str, str], dict[str, dict[str, str]]] = {}
    for line, row in enumerate(rows, start=2):
        group = out.setdefault((row["category"], row["method"]), {})
        if row["function_id"] in group:
            raise ValueError(f"{name}: {path} line {line} scores {row['function_id']} ({row['method']}) a second time")
        group[row["function_id"]] = row
    return out


def _columns() -> list[tuple[str, str, str, str]]:
    """``(category, method, metric, header)``: Table 2's columns first, then every other."""
    cols = [(c.category, c.method, c.metric, c.header) for c in TABLE2_COLUMNS]
    seen = {c[:3] for c in cols}
    cols += [(c, m, metric, f"{c} {m} {metric}") for c in CONFIGS for m in METHODS for metric in CATEGORY_METRICS[c]
             if metric in COMPARED_METRICS and (c, m, metric) not in seen]
    out = []
    for c, m, metric, header in cols:
        out.append((c, m, metric, header))
        if f"{metric}_margin" in MARGINS:
            out += [(c, m, f"{metric}{suffix}", f"{header}: {what}") for suffix, what in _MARGIN_HEADERS]
    return out


@document(frozen=True, kw_only=True)
class ComparedColumn(JsonDoc):
    """One column both runs scored, over the functions they share."""

    category: str
    method: str
    metric: str
    header: str
    n: int = Field(description="functions scored by both runs")
    mean_a: float
    mean_b: float
    diff: float = Field(description="mean_a - mean_b")
    diff_ci: list[float | None] = Field(description="its percentile interval (null where not finite)")
    p_value: float = Field(description="two-sided paired-bootstrap p-value")
    differs: bool | None = Field(description="whether the interval excludes 0; null where n is too small")
    verdict: Literal["differs", "no difference", "n too small"]
    n_too_small: bool
    only_a: int = Field(description="functions scored by run A alone, left out")
    only_b: int = Field(description="functions scored by run B alone, left out")


@document(frozen=True)
class Comparison(JsonDoc):
    """What ``findbench compare`` found: the runs, the bootstrap's settings, the columns both runs scored and
    the headers of those only one run scored (written by ``--out`` as JSON)."""

    run_a: str
    run_b: str
    seed: int
    n_resamples: int
    confidence: float
    columns: list[ComparedColumn]
    only_one_run: list[str]


def compare_runs(cfg: CompareConfig) -> Comparison:
    """Paired bootstrap of ``cfg.run_a`` against ``cfg.run_b`` per column (see the module docstring).

    ``cfg``: the settings (``findbench compare``'s arguments and flags; ``out``: also write the
    result there as JSON). The intervals are at :data:`~findbench.stats.DEFAULT_CONFIDENCE`.

    Returns a :class:`Comparison` (``--out``: its :meth:`~findbench._typed.JsonDoc.to_json`):
    ``columns`` holds a :class:`ComparedColumn` for every column both runs scored with a shared
    function (``only_a`` / ``only_b``: functions scored by one run alone, left out); ``only_one_run``
    the headers of columns scored by one run only. ``verdict`` is ``"differs"`` or ``"no difference"``
    (whether the interval excludes 0; ``differs`` the same as a bool), or ``"n too small"`` with
    ``n_too_small`` true and ``differs`` None where ``n`` < :data:`~findbench.stats.SMALL_N`."""
    run_a, run_b, seed, n_resamples, confidence = cfg.run_a, cfg.run_b, cfg.seed, cfg.n_resamples, DEFAULT_CONFIDENCE
    a = read_per_function(run_a, name="run_a")
    b = read_per_function(run_b, name="run_b")
    columns: list[ComparedColumn] = []
    single: list[str] = []
    for category, method, metric, header in _columns():
        group_a, group_b = a.get((category, method), {}), b.get((category, method), {})
        scored_a, scored_b = ({f for f, row in group.items() if unit_values(metric, [row])}
                              for group in (group_a, group_b))
        if not scored_a and not scored_b:
            continue
        if not (shared := sorted(scored_a & scored_b)):
            single.append(header)
            continue
        values_a, values_b = ([unit_values(metric, [group[f]])[0] for f in shared] for group in (group_a, group_b))
        result = paired_bootstrap(values_a, values_b, seed=seed, n_resamples=n_resamples, confidence=confidence)
        too_small = is_small(result.n)
        columns.append(ComparedColumn(
            category=category, method=method, metric=metric, header=header, n=result.n, mean_a=result.mean_a,
            mean_b=result.mean_b, diff=result.diff,
            diff_ci=[float(x) if math.isfinite(x) else None for x in result.diff_ci],
            p_value=result.p_value, differs=None if too_small else result.differs,
            verdict=N_TOO_SMALL if too_small else DIFFERS if result.differs else NO_DIFFERENCE,
            n_too_small=too_small, only_a=len(scored_a - scored_b), only_b=len(scored_b - scored_a)))
    comparison = Comparison(str(run_a), str(run_b), seed, n_resamples, confidence, columns, single)
    if cfg.out is not None:
        atomic_write_json(cfg.out, comparison.to_json())
    return comparison


def render_comparison_table(result: Comparison) -> str:
    """Markdown of :func:`compare_runs`'s result: one row per column; where n < 10 the n is marked and
    the p and differs cells say ``n too small`` instead of a verdict."""
    conf = f"{result.confidence:.0%}"
    lines = [
        "# Paired comparison",
        "",
        f"A: `{result.run_a}`; B: `{result.run_b}`. Paired bootstrap over the functions both runs scored "
        f"({result.n_resamples:,} resamples, seed {result.seed}): A − B with its {conf} percentile interval, a "
        "two-sided bootstrap p-value, and whether the interval excludes 0.",
        "",
        "| column | n | A | B | A − B | p | differs |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for col in result.columns:
        low, high = col.diff_ci
        interval = f" [{low:+.2f}, {high:+.2f}]" if low is not None and high is not None else ""
        left = f" (+{col.only_a} A only)" if col.only_a else ""
        right = f" (+{col.only_b} B only)" if col.only_b else ""
        p = "<0.001" if col.p_value < 0.001 else f"{col.p_value:.3f}"
        p, verdict = ("–", N_TOO_SMALL) if col.n_too_small else (p, "**yes**" if col.differs else "no")
        lines.append(
            f"| {col.header} | {col.n}{'†' if col.n_too_small else ''}{left}{right} | {col.mean_a:.2f} | "
            f"{col.mean_b:.2f} | {col.diff:+.2f}{interval} | {p} | {verdict} |"
        )
    if not result.columns:
        lines.append("| (no column scored by both runs) | | | | | | |")
    notes = []
    if result.only_one_run:
        notes.append("Scored by one run only (not compared): " + ", ".join(result.only_one_run) + ".")
    if any(col.n_too_small for col in result.columns):
        notes += [SMALL_N_LEGEND, N_TOO_SMALL_NOTE]
    if notes:
        lines += [""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"
