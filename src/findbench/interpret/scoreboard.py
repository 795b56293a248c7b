"""FIND's Table 2: a run's scores beside the interpreters the paper reported.

A cell with an interval prints as ``0.83 [0.62, 0.97] (n=6)†`` (:func:`findbench.stats.format_ci`;
† marks n < 10); :func:`table2_rows` and :func:`table2_notes` feed ``table.md`` and ``report.html``."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from findbench.find.rasp.circuit import NODE_ROLE_METRICS as CIRCUIT_METRICS
from findbench.interpret.floors import DESCRIPTION_SUBSETS
from findbench.interpret.scores import Estimate, Scores
from findbench.stats import INTERVAL_NOTE, SMALL_N_LEGEND, format_ci, is_small


class Column(NamedTuple):
    """One column of Table 2: its cell of :class:`~findbench.interpret.scores.Scores`, the aggregate it reads and
    its header."""

    category: str
    method: str
    metric: str
    header: str


#: Table 2's columns, left to right. FIND scores code (numeric, strings) for AIA interpreters
#: only; descriptions of neurons are scored for each of the three interpreter kinds.
TABLE2_COLUMNS: tuple[Column, ...] = (
    Column("numeric", "aia", "nmse_success", "numeric code (NMSE<0.1)"),
    Column("strings", "aia", "exact_match", "strings code (exact match)"),
    Column("strings", "aia", "unit_test_accuracy", "strings unit test"),
    *(Column(f"neurons_{kind}", method, "unit_test_accuracy", f"{kind} {method.upper()}")
      for kind in ("entities", "relations") for method in ("aia", "milan", "aia+milan")),
    Column("rasp", "aia", "exact_match", "rasp code (exact match)"),
    Column("rasp", "aia", "position_accuracy", "rasp code (positions)"),
    Column("rasp", "aia", "unit_test_accuracy", "rasp unit test"),
)
TABLE2_HEADERS = ("interpreter", *(c.header for c in TABLE2_COLUMNS))

PAPER_SOURCE = "FIND (Schwettmann et al., NeurIPS 2023), Table 2"

#: Success rates the FIND paper reports per interpreter LM, in :data:`TABLE2_COLUMNS` order.
#: Source: Schwettmann et al., "FIND: A Function Description Benchmark for Evaluating
#: Interpretability Methods", NeurIPS 2023 Datasets and Benchmarks, Table 2.
#: The ``rasp`` columns are findbench's own (white box): the paper has no value there (None).
PAPER_TABLE2: dict[str, tuple[float | None, ...]] = {
    "GPT-4": (0.33, 0.23, 0.82, 0.56, 0.89, 0.89, 0.78, 0.74, 0.92, None, None, None),
    "GPT-3.5": (0.12, 0.13, 0.66, 0.39, 0.81, 0.88, 0.37, 0.64, 0.68, None, None, None),
    "Llama-2-70b-chat": (0.01, 0.01, 0.33, 0.34, 0.61, 0.62, 0.47, 0.44, 0.46, None, None, None),
}
TABLE2_CAPTION = (
    f"Success rates: numeric code NMSE < 0.1, string code exact match, unit-test accuracy of descriptions. "
    f"{', '.join(PAPER_TABLE2)}: {PAPER_SOURCE}."
)

_MISSING = "—"
#: The baseline whose scores :func:`render_comparison` subtracts from every other row: the
#: ``constant`` reference interpreter (one fixed answer per category).
_FLOOR = "constant"


def table2_summaries(scores: Scores, variant: str = "") -> list[Estimate | None]:
    """Per column of :data:`TABLE2_COLUMNS`, the run's estimate, or None where it has no finite mean.
    ``variant`` (one of :data:`VARIANTS`) reads another aggregate of each cell than the column's metric."""
    names = [VARIANTS[variant][1](col.metric) if variant else col.metric for col in TABLE2_COLUMNS]
    return [_finite(scores.estimate(col.category, col.method, name)) if name else None
            for col, name in zip(TABLE2_COLUMNS, names)]


def _finite(est: Estimate | None) -> Estimate | None:
    """``est`` where it has a finite mean, else None."""
    return est if est is not None and est.mean is not None and math.isfinite(est.mean) else None


#: Rows beside a run's Table 2 row: how each is labelled after the interpreter's name, and the aggregate of each
#: cell it reads (None: the column has none).
VARIANTS = {
    "observed": ("floor: its own observations", lambda m: f"{m}_observed"),
    "margin": ("margin over its own observations", lambda m: f"{m}_margin"),
    "margin_plan": ("margin over the observed plan's floor", lambda m: f"{m}_margin_plan"),
    "near": ("near-miss unit tests", lambda m: "unit_test_accuracy_near" if m == "unit_test_accuracy" else None),
    "near_margin": ("near-miss margin over its own observations",
                    lambda m: "unit_test_accuracy_near_margin" if m == "unit_test_accuracy" else None),
}
#: What the variant rows mean, under the table.
VARIANTS_NOTE = (
    "Floor: what an agent that understood nothing but made the same calls would score, from the inputs it "
    "called run through the function (numeric: the best of a constant, a least-squares line and linear "
    "interpolation of the pairs; strings code: a lookup table of them; descriptions: the best of "
    f"{DESCRIPTION_SUBSETS} seeded listings of the pairs within the judge's budget, no rule; rasp, beside "
    "those: the row's most common output at every position, the input copied, the family's name as the "
    "description and a hedged description naming several families). Margin: score "
    "minus that floor, per function, with a paired bootstrap interval. Margin over the observed plan's "
    "floor: the same against the floor of the `observed` reference's fixed plan of calls, which no "
    "transcript can move. Near-miss unit tests: every option shares the input, the wrong outputs come from "
    "near misses of the function (FIND v1 rows have none)."
)


def variant_rows(interpreter: str, scores: Scores) -> list[list[str]]:
    """The rows under a run's Table 2 row: :data:`VARIANTS` that have any value, as cell text."""
    summaries = {variant: table2_summaries(scores, variant) for variant in VARIANTS}
    return [[f"{interpreter}: {label}",
             *(_format_cell(s, signed=variant.endswith("margin")) for s in summaries[variant])]
            for variant, (label, _) in VARIANTS.items() if any(s is not None for s in summaries[variant])]


def _format_cell(summary: Estimate | None, *, signed: bool = False) -> str:
    """One cell: ``0.83 [0.62, 0.97] (n=6)†``, "—" for None; ``signed``: the mean with its sign (a margin)."""
    if summary is None or summary.mean is None:
        return _MISSING
    text = format_ci(summary.mean, summary.ci, summary.n)
    return ("+" + text) if signed and summary.mean >= 0 else text


def table2_rows(interpreter: str, scores: Scores) -> list[list[str]]:
    """Table 2's body as cell text: the paper's rows, then ``interpreter``'s (this run), last."""
    return [*([name, *(_fmt(v) for v in values)] for name, values in PAPER_TABLE2.items()),
            [interpreter, *(_format_cell(s) for s in table2_summaries(scores))]]


def table2_notes(
    scores: Scores, counts: Mapping[str, Mapping[str, int]] | None = None, notes: Iterable[str] = ()
) -> list[str]:
    """The lines under Table 2: the functions behind each of the run's cells (from ``counts``,
    ``{category: {method: n}}``), ``notes``, :data:`VARIANTS_NOTE` where the run has :func:`variant_rows`,
    the degenerate answers per category and method where there are any, the interval method and the
    small-n legend."""
    out = [*notes, *([VARIANTS_NOTE] if variant_rows("", scores) else [])]
    if degenerate := [f"{c}/{m}: {cell.n_degenerate}" for c, m, cell in scores if cell.n_degenerate]:
        out.append("Degenerate answers (empty, the prompt's placeholder, or identical across functions; still "
                   f"scored): {', '.join(degenerate)}.")
    out += _interval_notes(table2_summaries(scores))
    if counts is not None:
        listed = [f"{c.header}: {n}" for c in TABLE2_COLUMNS if (n := (counts.get(c.category) or {}).get(c.method))]
        if listed:
            out.insert(0, "Functions scored in this run: " + ", ".join(listed) + ".")
    return out


def _interval_notes(summaries: Iterable[Estimate | None]) -> list[str]:
    """The interval method and, when a cell is marked, the small-n legend."""
    ns = [s.n for s in summaries if s is not None]
    return [INTERVAL_NOTE] + ([SMALL_N_LEGEND] if any(is_small(n) for n in ns) else []) if ns else []


def _fmt(value: float | None) -> str:
    return _MISSING if value is None else f"{value:.2f}"


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(rows: Iterable[Iterable[str]], headers: Sequence[str] = TABLE2_HEADERS, left: int = 1) -> list[str]:
    # a markdown table's lines: its first ``left`` columns aligned left, the others right
    return [
        "| " + " | ".join(headers) + " |",
        "|" + "---|" * left + "---:|" * (len(headers) - left),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def render_table(
    interpreter: str,
    scores: Scores,
    *,
    counts: Mapping[str, Mapping[str, int]] | None = None,
    notes: Iterable[str] = (),
) -> str:
    """Markdown of Table 2 (``table.md``): the paper's interpreters, then ``interpreter`` (this
    run) in bold, and :func:`table2_notes` as a list under the table."""
    *paper, (_, *cells) = table2_rows(interpreter, scores)
    run = [f"**{_escape(interpreter)}** (this run)", *(c if c == _MISSING else f"**{c}**" for c in cells)]
    extra_rows = [[_escape(r[0]), *r[1:]] for r in variant_rows(interpreter, scores)]
    lines = ["# FIND Table 2", "", TABLE2_CAPTION, "", *_md_table([*paper, run, *extra_rows])]
    if extra := table2_notes(scores, counts, notes):
        lines += [""] + [f"- {note}" for note in extra]
    return "\n".join(lines) + "\n"


def render_comparison(runs: Mapping[str, Scores], *, title: str = "FIND Table 2", floor: str = _FLOOR) -> str:
    """Markdown of Table 2 with the paper's rows and one row per run (``{name: scores}``); when ``floor``
    (default ``constant``) is a run, a second table gives each run's mean minus the floor's."""
    summaries = {name: table2_summaries(scores) for name, scores in runs.items()}
    rows = [[f"{name} (paper)", *(_fmt(v) for v in values)] for name, values in PAPER_TABLE2.items()]
    rows += [[f"**{_escape(name)}**", *(_format_cell(v) for v in cells)] for name, cells in summaries.items()]
    lines = [f"### {title}", "", *_md_table(rows)]
    notes = [
        f"Paper rows: {PAPER_SOURCE}, on the whole benchmark (no interval reported). Success rates: numeric code "
        "NMSE < 0.1, string code exact match, unit-test accuracy of descriptions.",
        *_interval_notes(v for cells in summaries.values() for v in cells),
    ]
    lines += [line for note in notes for line in ("", note)]
    for variant, heading in (("margin", "Margin over each interpreter's own observations"),
                             ("margin_plan", "Margin over the observed plan's floor"),
                             ("near", "Near-miss unit tests")):
        cells_of = {name: table2_summaries(scores, variant) for name, scores in runs.items()}
        if any(v is not None for cells in cells_of.values() for v in cells):
            lines += [
                "",
                f"#### {heading}",
                *(["", VARIANTS_NOTE] if variant == "margin" else []),
                "",
                *_md_table(
                    [f"**{_escape(name)}**", *(_format_cell(v, signed=variant != "near") for v in cells)]
                    for name, cells in cells_of.items()
                ),
            ]
    others = [name for name in summaries if name != floor]
    if floor in summaries and others:
        lines += [
            "",
            f"#### Δ vs {floor}",
            "",
            f"How far above the `{floor}` baseline (one fixed answer per category) each interpreter is: its mean "
            f"minus `{floor}`'s, per column (a difference of means; `findbench compare` tests it on shared functions).",
            "",
            *_md_table(
                [
                    f"**{_escape(name)}**",
                    *(
                        _MISSING if a is None or b is None else f"{a.mean - b.mean:+.2f}"
                        for a, b in zip(summaries[name], summaries[floor])
                    ),
                ]
                for name in others
            ),
        ]
    return "\n".join(lines) + "\n"


#: The rasp access table (``findbench main``): per metric of a rasp cell, its heading. The circuit metrics
#: (``role_f1``, ``node_auroc``) exist only where the model is open (not under ``black``).
RASP_ACCESS_METRICS = {
    "unit_test_accuracy": "unit tests",
    "exact_match": "code exact match",
    "position_accuracy": "position accuracy",
    "role_f1": "role F1",
    "node_auroc": "node AUROC",
}
#: The runs the ``floors`` row of the rasp access table takes its best cell from (``observed``: its
#: ``<metric>_observed`` floor, what its calls alone support).
RASP_FLOORS = ("random", "constant", "empty", "observed")
RASP_FLOORS_NOTE = (
    "floors: per cell, the highest mean among the `random`, `constant` and `empty` references and the "
    "`<metric>_observed` floor of the `observed` run (the answer its own calls alone support with the fixed "
    "floors; for role F1 and node AUROC: every component given the majority role, or marked, or the components "
    "its ablations changed), named in brackets. "
    "white − rotated: the white cell's mean minus the rotated one's (a difference of means over the "
    "same functions), how much an interpreter leans on the compiler's basis."
)


def _rasp_estimate(scores: Scores | None, name: str) -> Estimate | None:
    """The rasp aia aggregate ``name`` of a run, None where it has no finite mean."""
    return None if scores is None else _finite(scores.estimate("rasp", "aia", name))


def _rasp_cell(runs: Mapping[str, Scores], name: str, metric: str) -> tuple[Estimate, str] | None:
    """Row ``name``'s cell of one access condition's ``runs``: its estimate (and ``""``), or for the ``floors``
    row (:data:`RASP_FLOORS_NOTE`) the highest floor estimate and its source; None where there is none."""
    found = [(_rasp_estimate(runs.get(name), metric), "")]
    if name == "floors":
        found = [(_rasp_estimate(runs.get(floor), metric), floor) for floor in RASP_FLOORS[:-1]]
        found.append((_rasp_estimate(runs.get(RASP_FLOORS[-1]), f"{metric}_observed"), f"{RASP_FLOORS[-1]}'s floor"))
    found = [(est, source) for est, source in found if est is not None]
    return max(found, key=lambda pair: pair[0].mean) if found else None


def render_rasp_access(access_runs: Mapping[str, Mapping[str, Scores]]) -> str:
    """Markdown of the rasp access table (``{access: {interpreter: scores}}``, black first): per metric of
    :data:`RASP_ACCESS_METRICS`, one row per interpreter (``oracle``, ``floors``, ``observed``, ``attribution``,
    then the LMs), a column per access condition and the gap ``white − rotated``; :data:`RASP_FLOORS_NOTE`
    under it."""
    names = list(dict.fromkeys(name for runs in access_runs.values() for name in runs))
    fixed = ["oracle", "floors", "observed", "attribution"]
    rows = [n for n in fixed if n in names or (n == "floors" and set(RASP_FLOORS) & set(names))]
    rows += [n for n in names if n not in (*fixed, *RASP_FLOORS)]
    lines = []
    for metric, heading in RASP_ACCESS_METRICS.items():
        table = []
        for name in rows:
            cells = {access: None if access == "black" and metric in CIRCUIT_METRICS else _rasp_cell(runs, name, metric)
                     for access, runs in access_runs.items()}
            white, rotated = cells.get("white"), cells.get("rotated")
            table.append([f"**{_escape(name)}**",
                          *(_MISSING if c is None else _format_cell(c[0]) + (f" ({c[1]})" if c[1] else "")
                            for c in cells.values()),
                          _MISSING if white is None or rotated is None else f"{white[0].mean - rotated[0].mean:+.2f}"])
        lines += ["", f"#### {heading} (`{metric}`)", "",
                  *_md_table(table, ["interpreter", *access_runs, "white − rotated"])]
    notes = _interval_notes(_rasp_estimate(s, m) for runs in access_runs.values() for s in runs.values()
                            for m in RASP_ACCESS_METRICS)
    return "\n".join([*lines[1:], *(line for note in [RASP_FLOORS_NOTE, *notes] for line in ("", note))]) + "\n"
