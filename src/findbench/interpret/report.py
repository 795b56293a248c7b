"""An HTML report with figures for a scored run (``findbench report``, ``findbench evaluate --report``).

:func:`write_report` reads a run folder (``findbench interpret`` or FIND's results layout) and
the folder ``findbench evaluate`` wrote for it (``scores.json``, ``per_function.csv``,
``table.md``), and writes into one self-contained folder (images by relative path):

* ``report.html``: Table 2 (``table.md`` as an HTML table), the figures, and each episode's
  transcript as a collapsible ``<details>`` block (role-labelled messages, the function
  calls, the answer's parts), opened by the ground-truth description beside the
  interpreter's and, where the judge scored it, each unit test as the judge decided it (from
  ``unit_tests.csv``: the options, the correct one, the pick, the margin; wrong picks
  highlighted). Every piece of run text is HTML-escaped.
* ``scores-<category>.png`` per category of ``scores.json``: the run's success rate in each
  Table-2 column of the category, beside the rows the FIND paper reports
  (:data:`findbench.interpret.scoreboard.PAPER_TABLE2`).
* ``numeric-<method>-fNNNNN.png`` per numeric episode, in the manner of FIND's Figure 3: the
  ground-truth function and the interpretation's code over the row's domain, the inputs the
  agent called (from ``episode.json``), and the corrupted interval of the ground truth shaded.

The interpretation's code was written by a model, so it runs only in
:mod:`findbench.sandbox` (:func:`numeric_curves` evaluates both the reference and the
interpretation there, in one batch); nothing of it executes in this process. Code that is
missing or fails leaves the ground truth alone in the figure, with the reason in its legend.
"""

from __future__ import annotations

import csv
import html
import json
import logging
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from findbench._io import atomic_write_text, read_json_object
from findbench.interpret.episode import read_episode_file
from findbench.interpret.evaluate import check_rows_known, load_interpretations, read_run_info
from findbench.interpret.scoreboard import PAPER_SOURCE, PAPER_TABLE2, TABLE2_COLUMNS, render_table, table2_summaries
from findbench.schema import CATEGORIES
from findbench.stats import INTERVAL_NOTE, SMALL_N_LEGEND, SMALL_N_MARK, is_small

__all__ = [
    "REPORT_FILE",
    "NUMERIC_POINTS",
    "NumericCurve",
    "numeric_curves",
    "call_points",
    "plot_numeric",
    "plot_category",
    "markdown_to_html",
    "write_report",
]

logger = logging.getLogger(__name__)

REPORT_FILE = "report.html"
#: Points of the grid each numeric figure is drawn on (spread evenly over the row's domain).
NUMERIC_POINTS = 401
#: The domain a numeric row without usable ``domain_low`` / ``domain_high`` is drawn on (FIND's).
DEFAULT_DOMAIN = (-128.0, 128.0)
_REFERENCE_ENTRY = "function"
_NOTE_CHARS = 90


# ------------------------------------------------------------------------------ numeric curves


@dataclass
class NumericCurve:
    """A numeric function and its interpretation sampled on a grid.

    Attributes:
        x: the grid.
        truth: ground-truth values (NaN where the reference gave no finite number).
        interpretation: the interpretation's values (NaN where it failed on a point), or None
            when there is nothing to draw (no code, or code that did not load or run).
        note: why the interpretation is missing or partial; None when it ran on every point.
    """

    x: list[float]
    truth: list[float]
    interpretation: list[float] | None
    note: str | None = None


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _as_float(value: Any) -> float:
    """A finite float, or NaN for anything else (None, text, a list, inf)."""
    if _is_real(value) and math.isfinite(value):
        return float(value)
    return math.nan


def _short(text: str, limit: int = _NOTE_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _row_domain(row: Mapping[str, Any]) -> tuple[float, float]:
    lo, hi = row.get("domain_low"), row.get("domain_high")
    if _is_real(lo) and _is_real(hi) and math.isfinite(lo) and math.isfinite(hi) and lo < hi:
        return float(lo), float(hi)
    return DEFAULT_DOMAIN


def _grid(row: Mapping[str, Any], points: int) -> list[float]:
    lo, hi = _row_domain(row)
    step = (hi - lo) / (points - 1)
    return [lo + i * step for i in range(points - 1)] + [hi]


def numeric_curves(
    rows: Sequence[Mapping[str, Any]],
    codes: Sequence[str | None],
    *,
    points: int = NUMERIC_POINTS,
    seed: int = 0,
) -> list[NumericCurve]:
    """Sample each numeric row's ground truth and ``codes[i]`` on the row's domain.

    Both programs of every pair run in the sandbox, in one
    :func:`findbench.sandbox.run_functions` call: the reference through its ``function`` entry,
    the interpretation through its last top-level ``def``. ``codes[i]`` None or blank means the
    interpreter gave no code. ``seed`` seeds ``random`` / ``numpy.random`` in each program.
    """
    from findbench.sandbox import run_functions

    if len(rows) != len(codes):
        raise ValueError(f"rows and codes must have the same length ({len(rows)} != {len(codes)})")
    if isinstance(points, bool) or not isinstance(points, int) or points < 2:
        raise ValueError(f"points must be an int >= 2, got {points!r}")
    grids = [_grid(row, points) for row in rows]
    programs: list[str] = []
    inputs: list[list[float]] = []
    entries: list[str] = []
    for row, grid in zip(rows, grids):
        programs.append(str(row.get("code") or ""))
        inputs.append(grid)
        entries.append(_REFERENCE_ENTRY)
    slot: list[int | None] = []
    for code, grid in zip(codes, grids):
        if code is None or not str(code).strip():
            slot.append(None)
            continue
        slot.append(len(programs))
        programs.append(str(code))
        inputs.append(grid)
        entries.append("last_def")
    results = run_functions(programs, inputs, entry=entries, seed=seed) if programs else []

    curves = []
    for i, grid in enumerate(grids):
        ref = results[i]
        truth = [_as_float(v) for v in ref.values] if ref.status == "ok" else [math.nan] * len(grid)
        k = slot[i]
        if k is None:
            curves.append(NumericCurve(grid, truth, None, "no code given"))
            continue
        res = results[k]
        if res.status != "ok":
            why = res.message or res.status
            curves.append(NumericCurve(grid, truth, None, _short(f"code failed ({res.status}): {why}")))
            continue
        values = [math.nan if err is not None else _as_float(v) for v, err in zip(res.values, res.errors)]
        bad = sum(math.isnan(v) for v in values)
        note = None
        if bad == len(values):
            first = next((e for e in res.errors if e), None)
            why = f": {first}" if first else " (no finite number)"
            curves.append(NumericCurve(grid, truth, None, _short(f"code gave no value{why}")))
            continue
        if bad:
            note = f"no finite value on {bad} of {len(values)} points"
        curves.append(NumericCurve(grid, truth, values, note))
    return curves


def call_points(calls: Sequence[Mapping[str, Any]] | None) -> list[tuple[float, float]]:
    """The ``(input, output)`` pairs of an episode's calls (``episode.json``'s ``calls``) that
    are both finite numbers; inputs are parsed from the text the agent wrote."""
    pairs: list[tuple[float, float]] = []
    for call in calls or []:
        if not isinstance(call, Mapping):
            continue
        inputs, outputs = call.get("inputs") or [], call.get("outputs") or []
        errors = call.get("errors") or [None] * len(inputs)
        for x, y, err in zip(inputs, outputs, errors):
            if err is not None:
                continue
            try:
                xv = float(x)
            except (TypeError, ValueError):
                continue
            yv = _as_float(y)
            if math.isfinite(xv) and not math.isnan(yv):
                pairs.append((xv, yv))
    return pairs


# ------------------------------------------------------------------------------------ figures


def _corrupted(row: Mapping[str, Any]) -> tuple[float, float] | None:
    from findbench.find.domain import corrupted_interval

    try:
        return corrupted_interval(row)
    except (TypeError, ValueError) as exc:
        logger.warning("%s: no corrupted interval drawn (%s)", row.get("function_id"), exc)
        return None


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if not math.isnan(v)]


def _y_limits(curve: NumericCurve, points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Limits that keep the ground truth and the calls in view; an interpretation far outside
    them runs off the plot rather than flattening the ground truth."""
    base = _finite(curve.truth) + [y for _, y in points]
    if not base:
        return None
    lo, hi = min(base), max(base)
    span = hi - lo if hi > lo else max(abs(hi), 1.0)
    if curve.interpretation is not None:
        interp = _finite(curve.interpretation)
        if interp and min(interp) >= lo - 2 * span and max(interp) <= hi + 2 * span:
            lo, hi = min(lo, min(interp)), max(hi, max(interp))
            span = hi - lo if hi > lo else span
    pad = 0.08 * span
    return lo - pad, hi + pad


def plot_numeric(
    row: Mapping[str, Any],
    curve: NumericCurve,
    calls: Sequence[Mapping[str, Any]] | None,
    path: str | os.PathLike,
    *,
    title: str | None = None,
) -> Path:
    """Draw one numeric episode (FIND Figure 3 style) into the PNG ``path``.

    The ground truth is a solid line, the interpretation a dashed one (or, when
    ``curve.interpretation`` is None, only a legend entry saying why there is none), the
    agent's calls are dots and the row's corrupted interval is shaded.
    """
    from matplotlib.figure import Figure

    path = Path(path)
    points = call_points(calls)
    lo, hi = _row_domain(row)
    shown = [(x, y) for x, y in points if lo <= x <= hi]  # calls outside the domain are only counted
    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.subplots()
    interval = _corrupted(row)
    if interval is not None:
        a, b = interval
        if b > a:
            ax.axvspan(a, b, color="#d62728", alpha=0.15, linewidth=0, label="corrupted interval (ground truth)")
        else:
            ax.axvline(a, color="#d62728", alpha=0.5, label="corrupted interval (ground truth)")
    ax.plot(curve.x, curve.truth, color="black", linewidth=1.6, label="ground truth")
    if curve.interpretation is not None:
        label = "interpretation (code)" + (f": {curve.note}" if curve.note else "")
        ax.plot(curve.x, curve.interpretation, color="#1f77b4", linewidth=1.4, linestyle="--", label=label)
    else:
        ax.plot([], [], color="#1f77b4", linewidth=1.4, linestyle="--",
                label=f"interpretation not drawn: {curve.note or 'no code'}; ground truth only")
    if points:
        outside = len(points) - len(shown)
        label = f"agent's calls ({len(shown)})" + (f", {outside} outside the domain not shown" if outside else "")
        ax.scatter([x for x, _ in shown], [y for _, y in shown], s=20, color="#ff7f0e", edgecolors="black",
                   linewidths=0.4, zorder=3, label=label)
    else:
        ax.scatter([], [], s=20, color="#ff7f0e", edgecolors="black", linewidths=0.4, label="agent's calls: none")
    ax.set_xlim(lo, hi)
    limits = _y_limits(curve, shown)
    if limits is not None:
        ax.set_ylim(*limits)
    ax.set_xlabel("x")
    ax.set_ylabel("f(x)")
    ax.set_title(title or str(row.get("function_id", "")), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best", framealpha=0.85)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path


#: Bar colours: the paper's interpreters in blues and greys, the run in orange.
_PAPER_COLORS = ("#08519c", "#6baed6", "#9e9e9e")
_RUN_COLOR = "#ff7f0e"


def plot_category(
    category: str,
    scores: Mapping[str, Any],
    path: str | os.PathLike,
    *,
    interpreter: str = "this run",
) -> Path:
    """Bars of one category's Table-2 columns into the PNG ``path``: the FIND paper's rows
    (GPT-4, GPT-3.5, Llama-2-70b-chat) beside the run's value (from the ``scores.json``
    mapping ``scores``); a column the run has no value for is marked "n/a". The run's bars
    carry error bars from their bootstrap interval (``<metric>_ci``) and say their n, marked
    when n < 10 (:data:`findbench.stats.SMALL_N_MARK`)."""
    from matplotlib.figure import Figure

    if category not in CATEGORIES:
        raise ValueError(f"category must be one of {CATEGORIES}, got {category!r}")
    index = [i for i, col in enumerate(TABLE2_COLUMNS) if col.category == category]
    summaries = table2_summaries(scores)
    run_cells = [None if cell is None else cell["mean"] for cell in summaries]
    headers = [TABLE2_COLUMNS[i].header for i in index]
    series: list[tuple[str, list[float | None], str]] = [
        (name, [values[i] for i in index], color) for (name, values), color in zip(PAPER_TABLE2.items(), _PAPER_COLORS)
    ]
    series.append((f"{interpreter} (this run)", [run_cells[i] for i in index], _RUN_COLOR))
    width = 0.8 / len(series)
    fig = Figure(figsize=(2.8 + 1.9 * len(index), 3.6))
    ax = fig.subplots()
    for s, (name, values, color) in enumerate(series):
        xs = [g + (s - (len(series) - 1) / 2) * width for g in range(len(index))]
        heights = [v if v is not None else 0.0 for v in values]
        is_run = s == len(series) - 1
        cells = [summaries[i] for i in index] if is_run else [None] * len(index)
        yerr = _error_bars(cells) if is_run else None
        bars = ax.bar(xs, heights, width, color=color, label=name, edgecolor="black" if is_run else None,
                      linewidth=0.8 if is_run else 0, yerr=yerr, capsize=3 if yerr is not None else 0,
                      error_kw={"elinewidth": 0.9, "ecolor": "black"})
        for k, (bar, value) in enumerate(zip(bars, values)):
            text = "n/a" if value is None else f"{value:.2f}"
            top = value or 0.0
            cell = cells[k]
            if cell is not None and cell.get("n") is not None:
                text += f"\nn={cell['n']}{SMALL_N_MARK if is_small(cell['n']) else ''}"
                if yerr is not None:
                    top += yerr[1][k]
            ax.text(bar.get_x() + bar.get_width() / 2, top + 0.01, text, ha="center", va="bottom", fontsize=7,
                    rotation=90 if value is None else 0)
    ax.set_xticks(range(len(index)))
    ax.set_xticklabels(headers, fontsize=8)
    ax.set_ylim(0, 1.22)
    ax.set_ylabel("success rate")
    ax.set_title(f"{category}: this run beside FIND Table 2", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path


def _error_bars(cells: Sequence[Mapping[str, Any] | None]) -> list[list[float]] | None:
    """matplotlib ``yerr`` (``[below, above]`` per bar) from the cells' intervals; None when no
    cell has one. A bar without an interval gets no error bar."""
    if not any(cell is not None and cell.get("ci") is not None for cell in cells):
        return None
    below, above = [], []
    for cell in cells:
        ci = None if cell is None else cell.get("ci")
        if ci is None:
            below.append(0.0)
            above.append(0.0)
            continue
        below.append(max(0.0, cell["mean"] - ci[0]))
        above.append(max(0.0, ci[1] - cell["mean"]))
    return [below, above]


# ---------------------------------------------------------------------------------- markdown

_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_BOLD = re.compile(r"\*\*(.+?)\*\*")


def _inline(text: str) -> str:
    """Escaped HTML of one line of the scoreboard's markdown: ``**bold**`` and `` `code` ``."""
    parts = text.split("`")
    out = []
    for k, part in enumerate(parts):
        if k % 2 and k < len(parts) - 1:
            out.append(f"<code>{html.escape(part)}</code>")
        else:
            chunk = part if k % 2 == 0 else "`" + part
            out.append(_BOLD.sub(r"<strong>\1</strong>", html.escape(chunk)))
    return "".join(out)


def _cells(line: str) -> list[str]:
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip().replace("\\|", "|") for c in _CELL_SPLIT.split(body)]


def _table_html(lines: list[str]) -> str:
    header, rule, *body = lines
    aligns = ["right" if c.endswith(":") else "left" for c in _cells(rule)]

    def cell(tag: str, text: str, k: int) -> str:
        align = aligns[k] if k < len(aligns) else "left"
        return f'<{tag} class="{align}">{_inline(text)}</{tag}>'

    out = ['<table class="table2">', "<thead><tr>" + "".join(cell("th", c, k) for k, c in enumerate(_cells(header))) + "</tr></thead>",
           "<tbody>"]
    for line in body:
        cells = _cells(line)
        css = ' class="this-run"' if "(this run)" in line else ""
        out.append(f"<tr{css}>" + "".join(cell("td", c, k) for k, c in enumerate(cells)) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def markdown_to_html(text: str) -> str:
    """HTML of the markdown the scoreboard writes (``table.md``): ``#`` headings, paragraphs,
    ``- `` lists, one pipe table; everything escaped, only ``**bold**`` and `` `code` `` kept."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
        elif stripped.startswith("#"):
            level = min(len(stripped) - len(stripped.lstrip("#")) + 1, 6)
            out.append(f"<h{level}>{_inline(stripped.lstrip('#').strip())}</h{level}>")
            i += 1
        elif stripped.startswith("|"):
            block = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                block.append(lines[i])
                i += 1
            out.append(_table_html(block) if len(block) >= 2 else f"<p>{_inline(block[0])}</p>")
        elif stripped.startswith("- "):
            items = []
            while i < len(lines) and lines[i].strip().startswith("- "):
                items.append(f"<li>{_inline(lines[i].strip()[2:])}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
        else:
            para = []
            while i < len(lines) and lines[i].strip() and not lines[i].strip().startswith(("#", "|", "- ")):
                para.append(lines[i].strip())
                i += 1
            out.append(f"<p>{_inline(' '.join(para))}</p>")
    return "\n".join(out)


# ------------------------------------------------------------------------------------ the run


def _read_scores(scores_dir: Path) -> dict[str, Any]:
    path = scores_dir / "scores.json"
    if not path.is_file():
        raise FileNotFoundError(f"scores_dir: no scores.json in {scores_dir} (score the run with `findbench evaluate` first)")
    return read_json_object(path, "scores_dir:")


def _read_per_function(scores_dir: Path) -> dict[tuple[str, str], dict[str, str]]:
    path = scores_dir / "per_function.csv"
    if not path.is_file():
        return {}
    with open(path, newline="", encoding="utf-8") as fh:
        return {(r.get("function_id", ""), r.get("method", "")): r for r in csv.DictReader(fh)}


def _read_unit_tests(scores_dir: Path) -> dict[tuple[str, str], list[dict[str, str]]]:
    """The rows of ``unit_tests.csv`` per ``(function_id, method)`` (``{}`` without the file)."""
    path = scores_dir / "unit_tests.csv"
    out: dict[tuple[str, str], list[dict[str, str]]] = {}
    if not path.is_file():
        return out
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            out.setdefault((r.get("function_id", ""), r.get("method", "")), []).append(r)
    return out


def _judged_html(row: Mapping[str, Any] | None, record: Mapping[str, Any], tests: Sequence[Mapping[str, str]]) -> str:
    """The ground-truth description beside the interpreter's, then the judge's decision on each
    unit test (the options; the correct one marked, the pick marked, wrong picks highlighted)."""
    esc = html.escape
    truth = str((row or {}).get("description") or "")
    answer = str(record.get("description") or "")
    parts = ['<table class="judged"><thead><tr><th>ground-truth description</th><th>interpreter\'s description</th></tr></thead>'
             f"<tbody><tr><td>{esc(truth)}</td><td>{esc(answer) or '<em>none</em>'}</td></tr></tbody></table>"]
    if not tests:
        return parts[0]
    n_right = sum(t.get("right") == "1" for t in tests)
    mode = tests[0].get("mode") or ""
    parts.append(f"<h4>Unit tests: {n_right}/{len(tests)} right (judge in {esc(mode)} mode; ✓ correct option, "
                 "▶ the judge's pick; margin: correct option's score minus the best wrong one's)</h4>")
    head = "".join(f"<th>option {k}</th>" for k in (1, 2, 3))
    rows = []
    for t in tests:
        correct, chosen = t.get("correct", ""), t.get("chosen", "")
        cells = []
        for k in ("1", "2", "3"):
            mark = ("✓ " if k == correct else "") + ("▶ " if k == chosen else "")
            cls = ' class="pick-wrong"' if k == chosen and chosen != correct else (' class="pick-right"' if k == chosen else "")
            cells.append(f"<td{cls}>{esc(mark)}<code>{esc(t.get(f'option_{k}', ''))}</code></td>")
        if t.get("empty") == "1":
            note = "empty description: not judged"
        elif not chosen:
            note = "no answer: " + _short(t.get("answer") or "", 80)
        else:
            margin = t.get("margin") or ""
            try:
                note = f"margin {float(margin):+.3g}" if margin else ""
            except ValueError:
                note = margin
        row_cls = "ut-right" if t.get("right") == "1" else "ut-wrong"
        rows.append(f'<tr class="{row_cls}"><td>{esc(str(int(t.get("test") or 0) + 1))}</td>{"".join(cells)}'
                    f"<td>{esc(note)}</td></tr>")
    parts.append(f'<table class="judged"><thead><tr><th>#</th>{head}<th>judge</th></tr></thead><tbody>'
                 + "".join(rows) + "</tbody></table>")
    return "\n".join(parts)


def _episode_folder(run_dir: Path, record: Mapping[str, Any]) -> Path:
    category, local = record["function_id"].split("/", 1)
    nested = run_dir / category / record["method"] / local
    return nested if nested.is_dir() else run_dir / category / local


def _read_episode(folder: Path) -> tuple[dict[str, Any] | None, str | None]:
    """``episode.json`` as a dict, or None and why not (naming a damaged file)."""
    path = folder / "episode.json"
    if not path.is_file():
        return None, "no episode.json in this folder (no transcript recorded)"
    try:
        return read_episode_file(path), None
    except ValueError as exc:
        return None, str(exc)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text)


def _score_line(scored: Mapping[str, str] | None) -> str:
    if not scored:
        return ""
    parts = []
    for metric in ("nmse", "exact_match", "unit_test_accuracy", "domain_iou", "calls", "distinct_inputs", "probed_corruption"):
        value = (scored.get(metric) or "").strip()
        if not value:
            continue
        try:
            number = float(value)
            text = "inf" if math.isinf(number) else f"{number:.3g}"
        except ValueError:
            text = value
        parts.append(f"{metric} {text}")
    return ", ".join(parts)


_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px; color: #222; max-width: 1400px; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: 4px; margin-top: 1.6em; }
.meta { color: #555; font-size: 0.9em; }
table.table2 { border-collapse: collapse; font-size: 0.85em; margin: 8px 0; }
table.table2 th, table.table2 td { border: 1px solid #bbb; padding: 4px 8px; }
table.table2 th { background: #f0f0f0; } .right { text-align: right; } .left { text-align: left; }
tr.this-run { background: #fff3e0; }
.figures { display: flex; flex-wrap: wrap; gap: 16px; }
figure { margin: 0; border: 1px solid #ddd; padding: 8px; background: #fff; flex: 0 1 580px; }
figure img { max-width: 100%; height: auto; display: block; }
figcaption { font-size: 0.8em; color: #444; margin-top: 4px; }
details { border: 1px solid #ddd; border-radius: 4px; margin: 6px 0; padding: 4px 8px; }
summary { cursor: pointer; font-weight: 600; } summary .scores { font-weight: normal; color: #555; }
.msg { margin: 6px 0; border-left: 4px solid #ccc; padding: 2px 8px; }
.msg .role { font-size: 0.75em; font-weight: 700; text-transform: uppercase; color: #555; }
.msg pre, .answer pre { white-space: pre-wrap; word-break: break-word; margin: 2px 0; font-size: 0.82em; }
.role-system { border-color: #9e9e9e; } .role-user { border-color: #1f77b4; } .role-assistant { border-color: #ff7f0e; }
.note { color: #8a4b00; font-size: 0.85em; }
table.calls { border-collapse: collapse; font-size: 0.8em; } table.calls td, table.calls th { border: 1px solid #ddd; padding: 2px 6px; }
table.judged { border-collapse: collapse; font-size: 0.8em; margin: 6px 0; } table.judged td, table.judged th { border: 1px solid #ddd; padding: 2px 6px; vertical-align: top; }
tr.ut-wrong { background: #fdecea; } td.pick-wrong { background: #f8b4ae; font-weight: 600; } td.pick-right { background: #d4edda; }
"""


def _message_html(message: Any) -> str:
    if not isinstance(message, Mapping):
        return f'<div class="msg"><div class="role">?</div><pre>{html.escape(str(message))}</pre></div>'
    role = str(message.get("role") or "?")
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, indent=1)
    return (f'<div class="msg role-{html.escape(_slug(role))}"><div class="role">{html.escape(role)}</div>'
            f"<pre>{html.escape(text)}</pre></div>")


def _calls_html(calls: Sequence[Any]) -> str:
    rows = []
    for call in calls:
        if not isinstance(call, Mapping):
            continue
        ins, outs = call.get("inputs") or [], call.get("outputs") or []
        errs = call.get("errors") or [None] * len(ins)
        pairs = ", ".join(f"({x}, {e if e else y})" for x, y, e in zip(ins, outs, errs)) or str(call.get("error") or "")
        rows.append(f"<tr><td>{html.escape(str(call.get('round', '')))}</td><td>{html.escape(str(call.get('command', '')))}</td>"
                    f"<td>{html.escape(_short(pairs, 400))}</td></tr>")
    if not rows:
        return ""
    return ('<table class="calls"><thead><tr><th>round</th><th>command</th><th>input - output pairs</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>")


def _transcript_html(record: Mapping[str, Any], episode: dict[str, Any] | None, why: str | None, scored: Mapping[str, str] | None,
                     judged: str = "") -> str:
    fid, method = record["function_id"], record["method"]
    anchor = f"t-{_slug(fid)}-{_slug(method)}"
    bits = [f"{html.escape(fid)} ({html.escape(method)})"]
    if episode is not None:
        rounds = episode.get("rounds")
        if rounds is not None:
            bits.append(f"{html.escape(str(rounds))} round(s)")
        if "stop_reason" in episode:
            bits.append(html.escape(str(episode.get("stop_reason"))))
    score = _score_line(scored)
    summary = " · ".join(bits) + (f' <span class="scores">{html.escape(score)}</span>' if score else "")
    body: list[str] = [judged] if judged else []
    if episode is None:
        body.append(f'<p class="note">{html.escape(why or "")}</p>')
        for part in ("description", "domain", "code"):
            if record.get(part):
                body.append(f'<div class="answer"><strong>{part}</strong><pre>{html.escape(record[part])}</pre></div>')
    else:
        messages = episode.get("messages") or []
        if not messages:
            body.append('<p class="note">episode.json holds no messages</p>')
        body += [_message_html(m) for m in messages]
        calls = _calls_html(episode.get("calls") or [])
        if calls:
            body.append("<h4>Function calls</h4>" + calls)
    return f'<details id="{anchor}" class="transcript"><summary>{summary}</summary>\n' + "\n".join(body) + "\n</details>"


def write_report(
    run_dir: str | os.PathLike,
    scores_dir: str | os.PathLike | None = None,
    *,
    data: str | os.PathLike | None = None,
    out: str | os.PathLike | None = None,
) -> Path:
    """Write ``report.html`` and its PNG figures for a scored run; returns the HTML's path.

    Args:
        run_dir: the run folder (``findbench interpret`` or FIND's results layout).
        scores_dir: the folder ``findbench evaluate`` wrote (default ``<run_dir>/scores``).
        data: the dataset folder holding the run's functions; default ``data`` in
            ``run.json``, else procedural rows with ``run.json``'s ``seed``.
        out: the report folder (default ``scores_dir``); figures and the HTML go side by side.

    Raises FileNotFoundError when ``scores_dir`` has no ``scores.json`` and the errors of
    :func:`findbench.interpret.evaluate.load_interpretations` for a run folder it cannot read;
    ValueError naming ``function_id`` for an episode whose function is not in the data.
    """
    from findbench.find import load_rows

    run_path = Path(run_dir)
    scores_path = Path(scores_dir) if scores_dir is not None else run_path / "scores"
    out_path = Path(out) if out is not None else scores_path
    scores = _read_scores(scores_path)
    per_function = _read_per_function(scores_path)
    unit_tests = _read_unit_tests(scores_path)
    info = read_run_info(run_path)
    interpreter = info.get("interpreter") or run_path.resolve().name
    seed = info.get("seed") or 0
    if data is None and info.get("data"):
        data = info["data"]
    check_rows_known(info, data, run_path)
    records = load_interpretations(run_path)
    table_md = scores_path / "table.md"
    table = table_md.read_text(encoding="utf-8") if table_md.is_file() else render_table(interpreter, scores)

    rows: dict[str, dict[str, dict]] = {}
    for category in CATEGORIES:
        if any(r["category"] == category for r in records):
            rows[category] = {row["function_id"]: row for row in load_rows(category, seed=seed, data=data)}
    for rec in records:
        if rec["function_id"] not in rows[rec["category"]]:
            source = f"data folder {data}" if data is not None else f"procedural data (seed {seed})"
            raise ValueError(f"function_id: {rec['function_id']} ({rec['method']}) is not in the {rec['category']} {source}")

    out_path.mkdir(parents=True, exist_ok=True)
    episodes = {}
    for rec in records:
        episodes[(rec["function_id"], rec["method"])] = _read_episode(_episode_folder(run_path, rec))

    # category bars
    bar_figures = []
    for category in (c for c in CATEGORIES if c in scores):
        name = f"scores-{category}.png"
        plot_category(category, scores, out_path / name, interpreter=interpreter)
        bar_figures.append((category, name))

    # numeric figures, every curve from one sandbox batch
    numeric = [r for r in records if r["category"] == "numeric"]
    numeric_figures = []
    if numeric:
        num_rows = [rows["numeric"][r["function_id"]] for r in numeric]
        logger.info("report: sampling %d numeric function(s) and their interpretations in the sandbox", len(numeric))
        curves = numeric_curves(num_rows, [r["code"] for r in numeric], seed=seed)
        for rec, row, curve in zip(numeric, num_rows, curves):
            episode, _ = episodes[(rec["function_id"], rec["method"])]
            calls = (episode or {}).get("calls") or []
            local = rec["function_id"].split("/", 1)[1]
            name = f"numeric-{_slug(rec['method'])}-{local}.png"
            score = _score_line(per_function.get((rec["function_id"], rec["method"])))
            title = f"{rec['function_id']} ({rec['method']})" + (f"\n{score}" if score else "")
            plot_numeric(row, curve, calls, out_path / name, title=title)
            numeric_figures.append((rec, row, name))

    judged = {(r["function_id"], r["method"]): _judged_html(rows[r["category"]].get(r["function_id"]), r,
                                                           unit_tests.get((r["function_id"], r["method"]), []))
              for r in records}
    atomic_write_text(out_path / REPORT_FILE, _page(run_path, scores_path, data, seed, interpreter, table, bar_figures,
                                                    numeric_figures, records, episodes, per_function, judged=judged))
    return out_path / REPORT_FILE


def _page(run_path, scores_path, data, seed, interpreter, table, bar_figures, numeric_figures, records, episodes, per_function,
          judged=None) -> str:
    esc = html.escape
    data_text = f"data folder {data}" if data is not None else f"procedural data (seed {seed})"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>FIND report: {esc(interpreter)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>FIND report: {esc(interpreter)}</h1>",
        f'<p class="meta">Run <code>{esc(str(run_path))}</code>, scores <code>{esc(str(scores_path))}</code>, '
        f"{esc(data_text)}; {len(records)} episode(s).</p>",
        '<section id="table2">',
        markdown_to_html(table),
        "</section>",
    ]
    if bar_figures:
        parts += ['<section id="success-rates"><h2>Success rates by category</h2>',
                  f'<p class="meta">The run beside the rows of {esc(PAPER_SOURCE)}. Error bars on the run\'s bars: '
                  f"{esc(INTERVAL_NOTE)} {esc(SMALL_N_LEGEND)}</p>", '<div class="figures">']
        for category, name in bar_figures:
            parts.append(f'<figure><img src="{esc(name)}" alt="{esc(category)} success rates">'
                         f"<figcaption>{esc(category)}</figcaption></figure>")
        parts.append("</div></section>")
    if numeric_figures:
        parts += ['<section id="numeric"><h2>Numeric functions</h2>',
                  '<p class="meta">Ground truth (solid), the interpretation\'s code (dashed), the inputs the agent called (dots) '
                  "and the ground truth's corrupted interval (shaded).</p>", '<div class="figures">']
        for rec, row, name in numeric_figures:
            anchor = f"t-{_slug(rec['function_id'])}-{_slug(rec['method'])}"
            caption = (f"<strong>{esc(rec['function_id'])}</strong> ({esc(rec['method'])}) — "
                       f"ground truth: {esc(_short(str(row.get('description') or ''), 300))}<br>"
                       f"interpretation: {esc(_short(rec['description'], 300)) or '<em>none</em>'} "
                       f'<a href="#{anchor}">transcript</a>')
            parts.append(f'<figure><img src="{esc(name)}" alt="{esc(rec["function_id"])} ({esc(rec["method"])})" loading="lazy">'
                         f"<figcaption>{caption}</figcaption></figure>")
        parts.append("</div></section>")
    parts.append('<section id="transcripts"><h2>Transcripts</h2>')
    group = None
    for rec in records:
        if (rec["category"], rec["method"]) != group:
            group = (rec["category"], rec["method"])
            parts.append(f"<h3>{esc(rec['category'])} / {esc(rec['method'])}</h3>")
        episode, why = episodes[(rec["function_id"], rec["method"])]
        key = (rec["function_id"], rec["method"])
        parts.append(_transcript_html(rec, episode, why, per_function.get(key), (judged or {}).get(key, "")))
    parts += ["</section>", "</body></html>", ""]
    return "\n".join(parts)
