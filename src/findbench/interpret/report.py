"""An HTML report with figures for a scored run (``findbench report``, ``findbench evaluate --report``).

:func:`write_report` writes ``report.html`` (Table 2, the process summary, the figures and each
episode's transcript; the template ``templates/find_report.html.j2`` in the one page shell,
run text escaped by Jinja2's autoescape), ``scores-<category>.png`` (the run beside
FIND's Table 2) and ``numeric-<method>-fNNNNN.png`` per numeric episode (FIND Figure 3 style:
ground truth, the interpretation's code, the agent's calls, the corrupted interval; both
programs run again in :mod:`findbench.sandbox`)."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from findbench._io import atomic_write_text, read_csv_rows, read_json_object
from findbench.find.export import format_pair_list
from findbench.interpret.config import ReportConfig
from findbench.interpret.process import PROCESS_HEADERS, PROCESS_NOTES, process_rows
from findbench.interpret.runs import read_scored_run
from findbench.interpret.scoreboard import (
    PAPER_SOURCE,
    PAPER_TABLE2,
    TABLE2_CAPTION,
    TABLE2_COLUMNS,
    TABLE2_HEADERS,
    table2_notes,
    table2_rows,
    table2_summaries,
    variant_rows,
)
from findbench.interpret.scores import SCORES_FILE, Scores
from findbench.resources import render_page
from findbench.schema import CONFIGS
from findbench.stats import INTERVAL_NOTE, SMALL_N_LEGEND, SMALL_N_MARK, is_small

logger = logging.getLogger(__name__)

REPORT_FILE = "report.html"
#: Points of the grid each numeric figure is drawn on (spread evenly over the row's domain).
NUMERIC_POINTS = 401
#: The domain a numeric row without usable ``domain_low`` / ``domain_high`` is drawn on (FIND's).
DEFAULT_DOMAIN = (-128.0, 128.0)
_SCORE_COLUMNS = (
    "nmse",
    "exact_match",
    "unit_test_accuracy",
    "domain_iou",
    "calls",
    "distinct_inputs",
    "probed_corruption",
)


@dataclass
class NumericCurve:
    """A numeric function and its interpretation on a grid: ``truth`` and ``interpretation`` are
    NaN where a program gave no finite number; ``interpretation`` is None when there is nothing to
    draw, and ``note`` says why it is missing or partial."""

    x: list[float]
    truth: list[float]
    interpretation: list[float] | None
    note: str | None = None


def _as_float(value: Any) -> float:
    """A finite float, or NaN for anything else (None, text, a list, inf)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else math.nan


def _short(text: str, limit: int = 90) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _row_domain(row: Mapping[str, Any]) -> tuple[float, float]:
    lo, hi = _as_float(row.get("domain_low")), _as_float(row.get("domain_high"))
    return (lo, hi) if lo < hi else DEFAULT_DOMAIN


def numeric_curves(
    rows: Sequence[Mapping[str, Any]], codes: Sequence[str | None], *, points: int = NUMERIC_POINTS, seed: int = 0
) -> list[NumericCurve]:
    """Sample each numeric row's ground truth and ``codes[i]`` (its last top-level ``def``; None or
    blank: no code) on the row's domain, in one sandbox batch seeded by ``seed``."""
    from findbench.sandbox import run_functions

    grids = [np.linspace(*_row_domain(row), points).tolist() for row in rows]
    coded = [i for i, code in enumerate(codes) if code is not None and str(code).strip()]
    programs = [str(row.get("code") or "") for row in rows] + [str(codes[i]) for i in coded]
    results = run_functions(programs, grids + [grids[i] for i in coded],
                            entry=["function"] * len(rows) + ["last_def"] * len(coded), seed=seed)
    slot = {i: len(rows) + k for k, i in enumerate(coded)}

    curves = []
    for i, grid in enumerate(grids):
        truth = [_as_float(v) for v in results[i].values] if results[i].status == "ok" else [math.nan] * len(grid)
        res = results[slot[i]] if i in slot else None
        values, note = None, "no code given"
        if res is not None and res.status != "ok":
            note = _short(f"code failed ({res.status}): {res.message or res.status}")
        elif res is not None:
            values = [math.nan if err is not None else _as_float(v) for v, err in zip(res.values, res.errors)]
            bad = sum(math.isnan(v) for v in values)
            note = f"no finite value on {bad} of {len(values)} points" if bad else None
            if bad == len(values):
                first = next((e for e in res.errors if e), None)
                values, note = None, _short("code gave no value" + (f": {first}" if first else " (no finite number)"))
        curves.append(NumericCurve(grid, truth, values, note))
    return curves


def _call_triples(call: Mapping[str, Any]) -> list[tuple[Any, Any, Any]]:
    """``(input, output, error)`` of each value of one record of an episode's ``calls``."""
    inputs = call.get("inputs") or []
    return list(zip(inputs, call.get("outputs") or [], call.get("errors") or [None] * len(inputs)))


def _pairs(call: Mapping[str, Any]) -> str:
    """One record of ``calls`` as its reply showed the pairs (:func:`~findbench.find.export.format_pair_list`)."""
    triples = _call_triples(call)
    return format_pair_list([x for x, _, _ in triples], [f"error: {e}" if e else y for _, y, e in triples])


def call_points(calls: Sequence[Mapping[str, Any]] | None) -> list[tuple[float, float]]:
    """The ``(input, output)`` pairs of an episode's ``calls`` that are both finite numbers
    (inputs parsed from the text the agent wrote)."""
    pairs = []
    for x, y, err in (t for call in calls or [] for t in _call_triples(call)):
        try:
            xv = float(x)
        except (TypeError, ValueError):
            continue
        if err is None and math.isfinite(xv) and not math.isnan(_as_float(y)):
            pairs.append((xv, _as_float(y)))
    return pairs


def _y_limits(curve: NumericCurve, points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Limits that keep the ground truth and the calls in view; an interpretation far outside
    them runs off the plot rather than flattening the ground truth."""
    if not (base := [v for v in curve.truth if not math.isnan(v)] + [y for _, y in points]):
        return None
    lo, hi = min(base), max(base)
    span = hi - lo if hi > lo else max(abs(hi), 1.0)
    interp = [v for v in curve.interpretation or [] if not math.isnan(v)]
    if interp and min(interp) >= lo - 2 * span and max(interp) <= hi + 2 * span:
        lo, hi = min(lo, min(interp)), max(hi, max(interp))
        span = hi - lo if hi > lo else span
    return lo - 0.08 * span, hi + 0.08 * span


def _save(fig, path: str | os.PathLike) -> Path:
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path


def plot_numeric(
    row: Mapping[str, Any],
    curve: NumericCurve,
    calls: Sequence[Mapping[str, Any]] | None,
    path: str | os.PathLike,
    *,
    title: str | None = None,
) -> Path:
    """Draw one numeric episode into the PNG ``path``: the ground truth solid, the interpretation
    dashed (or a legend entry saying why there is none), the agent's calls as dots and the row's
    corrupted interval shaded."""
    from findbench.find.domain import corrupted_interval

    points = call_points(calls)
    lo, hi = _row_domain(row)
    shown = [(x, y) for x, y in points if lo <= x <= hi]  # calls outside the domain are only counted
    ax = (fig := Figure(figsize=(6.4, 4.0))).subplots()
    if (interval := corrupted_interval(row)) is not None:
        a, b = interval
        label = "corrupted interval (ground truth)"
        if b > a:
            ax.axvspan(a, b, color="#d62728", alpha=0.15, linewidth=0, label=label)
        else:
            ax.axvline(a, color="#d62728", alpha=0.5, label=label)
    ax.plot(curve.x, curve.truth, color="black", linewidth=1.6, label="ground truth")
    label = ("interpretation (code)" + (f": {curve.note}" if curve.note else "") if curve.interpretation is not None
             else f"interpretation not drawn: {curve.note or 'no code'}; ground truth only")
    ax.plot(
        curve.x if curve.interpretation is not None else [],
        curve.interpretation or [],
        color="#1f77b4",
        linewidth=1.4,
        linestyle="--",
        label=label,
    )
    outside = len(points) - len(shown)
    label = (f"agent's calls ({len(shown)})" + (f", {outside} outside the domain not shown" if outside else "")
             if points else "agent's calls: none")
    ax.scatter(
        [x for x, _ in shown],
        [y for _, y in shown],
        s=20,
        color="#ff7f0e",
        edgecolors="black",
        linewidths=0.4,
        zorder=3,
        label=label,
    )
    ax.set(xlim=(lo, hi), xlabel="x", ylabel="f(x)")
    if (limits := _y_limits(curve, shown)) is not None:
        ax.set_ylim(*limits)
    ax.set_title(title or str(row.get("function_id", "")), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best", framealpha=0.85)
    return _save(fig, path)


#: Bar colours: the paper's interpreters in blues and greys, the run in orange.
_PAPER_COLORS = ("#08519c", "#6baed6", "#9e9e9e")
_RUN_COLOR = "#ff7f0e"


def plot_category(category: str, scores: Scores, path: str | os.PathLike, *, interpreter: str = "this run") -> Path:
    """Bars of one category's Table-2 columns into the PNG ``path``: the FIND paper's rows beside the
    run's values ("n/a" where none), with its bootstrap intervals and n (marked when n < 10)."""
    index = [i for i, col in enumerate(TABLE2_COLUMNS) if col.category == category]
    cells = [table2_summaries(scores)[i] for i in index]
    series = [
        *((name, [values[i] for i in index], color)
          for (name, values), color in zip(PAPER_TABLE2.items(), _PAPER_COLORS)),
        (f"{interpreter} (this run)", [None if c is None else c.mean for c in cells], _RUN_COLOR),
    ]
    # matplotlib yerr of the run's bars ([below, above] per bar, 0 for one without an interval); None without any
    spans = [None if c is None or c.ci is None else (c.mean - c.ci[0], c.ci[1] - c.mean) for c in cells]
    run_yerr = (None if all(s is None for s in spans)
                else [[max(0.0, s[k]) if s is not None else 0.0 for s in spans] for k in (0, 1)])
    width = 0.8 / len(series)
    ax = (fig := Figure(figsize=(2.8 + 1.9 * len(index), 3.6))).subplots()
    for s, (name, values, color) in enumerate(series):
        is_run = s == len(series) - 1
        yerr = run_yerr if is_run else None
        bars = ax.bar(
            [g + (s - (len(series) - 1) / 2) * width for g in range(len(index))],
            [v or 0.0 for v in values],
            width,
            color=color,
            label=name,
            edgecolor="black" if is_run else None,
            linewidth=0.8 if is_run else 0,
            yerr=yerr,
            capsize=3 if yerr is not None else 0,
            error_kw={"elinewidth": 0.9, "ecolor": "black"},
        )
        for k, (bar, value) in enumerate(zip(bars, values)):
            text, top = ("n/a" if value is None else f"{value:.2f}"), value or 0.0
            n = cells[k].n if is_run and cells[k] is not None else None
            if n is not None:
                text += f"\nn={n}{SMALL_N_MARK if is_small(n) else ''}"
                top += yerr[1][k] if yerr is not None else 0.0
            ax.text(
                bar.get_x() + bar.get_width() / 2,
                top + 0.01,
                text,
                ha="center",
                va="bottom",
                fontsize=7,
                rotation=90 if value is None else 0,
            )
    ax.set(xticks=range(len(index)), ylim=(0, 1.22), ylabel="success rate")
    ax.set_xticklabels([TABLE2_COLUMNS[i].header for i in index], fontsize=8)
    ax.set_title(f"{category}: this run beside FIND Table 2", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _save(fig, path)


def _score_line(scored: Mapping[str, str] | None) -> str:
    parts = []
    for metric in _SCORE_COLUMNS:
        value = ((scored or {}).get(metric) or "").strip()
        if value:
            with contextlib.suppress(ValueError):  # text stays as it is
                value = "inf" if math.isinf(float(value)) else f"{float(value):.3g}"
            parts.append(f"{metric} {value}")
    return ", ".join(parts)


#: The headings of the unit-test sets of ``unit_tests.csv`` (its ``tests`` column), in the report's order.
_TEST_SETS = {"find": "FIND's unit tests", "near": "Near-miss unit tests"}


def _judged(row: Mapping[str, Any], record: Mapping[str, Any], tests: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    """The ground-truth description beside the interpreter's, then per test set (FIND's, the near
    misses) the judge's decision on each unit test: the options (✓ the correct one, ▶ the pick; a wrong
    pick highlighted) and the margin."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for t in tests:
        correct, chosen = t["correct"], t["chosen"]
        options = [
            (
                ("✓ " if k == correct else "") + ("▶ " if k == chosen else ""),
                ("pick-wrong" if chosen != correct else "pick-right") if k == chosen else "",
                t[f"option_{k}"],
            )
            for k in ("1", "2", "3")
        ]
        note = ("empty description: not judged" if t["empty"] == "1"
                else "no answer: " + _short(t["answer"], 80) if not chosen
                else f"margin {float(t['margin']):+.3g}" if t["margin"] else "")
        rows.setdefault(t.get("tests") or "find", []).append(
            {
                "n": int(t["test"]) + 1,
                "right": t["right"] == "1",
                "cls": "ut-right" if t["right"] == "1" else "ut-wrong",
                "options": options,
                "note": note,
            }
        )
    return {
        "truth": str(row.get("description") or ""),
        "description": record["description"],
        "test_sets": [
            {"heading": heading, "tests": rows[name], "right": sum(r["right"] for r in rows[name])}
            for name, heading in _TEST_SETS.items()
            if name in rows
        ],
        "mode": tests[0]["mode"] if tests else "",
    }


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text)


def _anchor(record: Mapping[str, Any]) -> str:
    return f"t-{_slug(record['function_id'])}-{_slug(record['method'])}"


def _transcript(
    record: Mapping[str, Any], scored: Mapping[str, str] | None, tests: Sequence[Mapping[str, str]]
) -> dict[str, Any]:
    """One episode's ``<details>``: its summary line, the judged descriptions, the messages (or, without
    a log record, why not and the answer's parts) and the calls."""
    episode = record["episode"]
    bits = [f"{record['function_id']} ({record['method']})"]
    messages, calls, tool_calls, why = [], [], [], None
    if episode is None:
        why = record["damage"] or "FIND's layout: the answer's parts only (no transcript recorded)"
        messages = [("msg", part, record[part]) for part in ("description", "domain", "code") if record.get(part)]
    else:
        bits += [f"{episode['rounds']} round(s)"] if episode.get("rounds") is not None else []
        bits += [str(episode["stop_reason"])] if "stop_reason" in episode else []
        messages = [
            (
                f"msg role-{_slug(m['role'])}",
                m["role"],
                m["content"]
                if isinstance(m["content"], str)
                else json.dumps(m["content"], ensure_ascii=False, indent=1),
            )
            for m in episode.get("messages") or []
        ]
        calls = [
            (
                "",
                [
                    str(c.get("round", "")),
                    str(c.get("command", "")),
                    _short(_pairs(c) or str(c.get("error") or ""), 400),
                ],
            )
            for c in episode.get("calls") or []
        ]
        tool_calls = [
            ("", [str(c.get("round", "")), str(c.get("tool", "")), _short(str(c.get("arguments") or ""), 400),
                  str(c["error"]) if c.get("error") else f"{c.get('reply_chars', 0)} characters"])
            for c in episode.get("tool_calls") or [] if isinstance(c, dict)
        ]
        if tool_calls:
            counts = Counter(row[1] for _, row in tool_calls)
            bits.append(f"{len(tool_calls)} tool call(s): " + ", ".join(f"{t} {n}" for t, n in counts.most_common()))
    return {
        "anchor": _anchor(record),
        "summary": " · ".join(bits),
        "score": _score_line(scored),
        "why": why,
        "messages": messages,
        "calls": calls,
        "tool_calls": tool_calls,
        **_judged(record["row"], record, tests),
    }


def _read_csv(path: Path) -> dict[tuple[str, str], list[dict[str, str]]]:
    """A file of ``findbench evaluate``'s, its rows per ``(function_id, method)`` (``{}`` without it)."""
    out: dict[tuple[str, str], list[dict[str, str]]] = {}
    if path.is_file():
        for r in read_csv_rows(path):
            out.setdefault((r["function_id"], r["method"]), []).append(r)
    return out


def write_report(cfg: ReportConfig) -> Path:
    """Write ``report.html`` and its PNG figures for a scored run; returns the HTML's path.

    ``cfg``: the settings (``findbench report``'s arguments and flags for a scored run). ``scores``:
    the folder ``findbench evaluate`` wrote (default ``<run_dir>/scores``); ``data`` as
    :func:`findbench.interpret.runs.read_scored_run`; ``out``: default the scores folder.
    FileNotFoundError when the scores folder has no ``scores.json``."""
    run_path = Path(cfg.run_dir)
    scores_path = Path(cfg.scores) if cfg.scores is not None else run_path / "scores"
    out_path = Path(cfg.out) if cfg.out is not None else scores_path
    if not (scores_path / SCORES_FILE).is_file():
        raise FileNotFoundError(
            f"--scores: no scores.json in {scores_path} (score the run with `findbench evaluate` first)"
        )
    scores = Scores.read(scores_path / SCORES_FILE)
    per_function = {key: found[0] for key, found in _read_csv(scores_path / "per_function.csv").items()}
    unit_tests = _read_csv(scores_path / "unit_tests.csv")
    process_file = scores_path / "process.json"
    process = read_json_object(process_file, "scores_dir:") if process_file.is_file() else {}
    run = read_scored_run(run_path, data=cfg.data)
    interpreter, seed, records = run["interpreter"], run["seed"], run["records"]
    source, verified = f"truth: {run['truth']}", run["verified"]

    def key(rec: Mapping[str, Any]) -> tuple[str, str]:
        return rec["function_id"], rec["method"]

    out_path.mkdir(parents=True, exist_ok=True)
    bars = [
        {
            "src": plot_category(c, scores, out_path / f"scores-{c}.png", interpreter=interpreter).name,
            "alt": f"{c} success rates",
            "category": c,
        }
        for c in CONFIGS
        if c in scores.cells
    ]

    numeric = [rec for rec in records if rec["category"] == "numeric"]
    figures = []
    if numeric:
        logger.info("report: sampling %d numeric function(s) and their interpretations in the sandbox", len(numeric))
        curves = numeric_curves([rec["row"] for rec in numeric], [rec["code"] for rec in numeric], seed=seed)
        for rec, curve in zip(numeric, curves):
            row, score = rec["row"], _score_line(per_function.get(key(rec)))
            title = f"{rec['function_id']} ({rec['method']})" + (f"\n{score}" if score else "")
            name = f"numeric-{_slug(rec['method'])}-{rec['function_id'].split('/', 1)[1]}.png"
            plot_numeric(row, curve, (rec["episode"] or {}).get("calls"), out_path / name, title=title)
            figures.append(
                {
                    "src": name,
                    "alt": f"{rec['function_id']} ({rec['method']})",
                    "function_id": rec["function_id"],
                    "method": rec["method"],
                    "truth": _short(str(row.get("description") or ""), 300),
                    "description": _short(rec["description"], 300),
                    "anchor": _anchor(rec),
                }
            )

    transcripts: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        transcripts.setdefault(f"{rec['category']} / {rec['method']}", []).append(
            _transcript(rec, per_function.get(key(rec)), unit_tests.get(key(rec), [])))

    counts: dict[str, Counter] = {}
    for r in per_function.values():
        counts.setdefault(r["category"], Counter())[r["method"]] += 1
    modes = sorted({t["mode"] for tests in unit_tests.values() for t in tests})
    # scores written before they named their judge: its mode
    notes = ([f"Judge: {scores.judge.describe()}."] if scores.judge is not None
             else [f"Judge mode: {', '.join(modes)} (the judge is named in table.md)."] if modes else [])
    *paper, run = table2_rows(interpreter, scores)
    rows = ([("", r) for r in paper] + [("this-run", [f"{run[0]} (this run)", *run[1:]])]
            + [("variant", r) for r in variant_rows(interpreter, scores)])
    process_table = process_rows(process)
    page = render_page(
        "find_report.html.j2",
        title=f"FIND report: {interpreter}",
        interpreter=interpreter,
        caption=TABLE2_CAPTION,
        table2={"head": TABLE2_HEADERS, "rows": rows, "notes": table2_notes(scores, counts or None, notes)},
        process={
            "head": PROCESS_HEADERS,
            "rows": [("", r) for r in process_table],
            "notes": [n.replace("`", "") for n in PROCESS_NOTES],
        }
        if process_table
        else None,
        run_path=str(run_path),
        scores_path=str(scores_path),
        source=source,
        verified=verified,
        n_episodes=len(records),
        table_md=os.path.relpath(scores_path / "table.md", out_path),
        bars=bars,
        numeric=figures,
        bars_intro=f"The run beside the rows of {PAPER_SOURCE}. Error bars on the run's bars: {INTERVAL_NOTE} "
        f"{SMALL_N_LEGEND}",
        transcripts=list(transcripts.items()),
    )
    atomic_write_text(out_path / REPORT_FILE, page)
    return out_path / REPORT_FILE
