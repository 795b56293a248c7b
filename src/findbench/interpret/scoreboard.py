"""FIND's Table 2 as markdown: a run's scores beside the interpreters the paper reported.

Only rendering lives here; :mod:`findbench.interpret.evaluate` computes the scores and calls
:func:`render_table` with them. Each column is one ``(category, method, metric)`` cell of the
``scores.json`` mapping ``{category: {method: {metric: value}}}``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

__all__ = ["Column", "TABLE2_COLUMNS", "PAPER_TABLE2", "PAPER_SOURCE", "table2_cells", "render_table"]


class Column(NamedTuple):
    """One column of Table 2: where its value sits in ``scores.json`` and its header."""

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
    Column("neurons_entities", "aia", "unit_test_accuracy", "entities AIA"),
    Column("neurons_entities", "milan", "unit_test_accuracy", "entities MILAN"),
    Column("neurons_entities", "aia+milan", "unit_test_accuracy", "entities AIA+MILAN"),
    Column("neurons_relations", "aia", "unit_test_accuracy", "relations AIA"),
    Column("neurons_relations", "milan", "unit_test_accuracy", "relations MILAN"),
    Column("neurons_relations", "aia+milan", "unit_test_accuracy", "relations AIA+MILAN"),
)

PAPER_SOURCE = "FIND (Schwettmann et al., NeurIPS 2023), Table 2"

#: Success rates the FIND paper reports per interpreter LM, in :data:`TABLE2_COLUMNS` order.
#: Source: Schwettmann et al., "FIND: A Function Description Benchmark for Evaluating
#: Interpretability Methods", NeurIPS 2023 Datasets and Benchmarks, Table 2.
PAPER_TABLE2: dict[str, tuple[float, ...]] = {
    "GPT-4": (0.33, 0.23, 0.82, 0.56, 0.89, 0.89, 0.78, 0.74, 0.92),
    "GPT-3.5": (0.12, 0.13, 0.66, 0.39, 0.81, 0.88, 0.37, 0.64, 0.68),
    "Llama-2-70b-chat": (0.01, 0.01, 0.33, 0.34, 0.61, 0.62, 0.47, 0.44, 0.46),
}

_MISSING = "—"


def table2_cells(scores: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[float | None]:
    """The run's value for each column of :data:`TABLE2_COLUMNS` (None where it has none)."""
    cells: list[float | None] = []
    for col in TABLE2_COLUMNS:
        value = (scores.get(col.category) or {}).get(col.method, {}).get(col.metric)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        cells.append(float(value) if ok else None)
    return cells


def _fmt(value: float | None) -> str:
    return _MISSING if value is None else f"{value:.2f}"


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_table(
    interpreter: str,
    scores: Mapping[str, Mapping[str, Mapping[str, Any]]],
    *,
    counts: Mapping[str, Mapping[str, int]] | None = None,
    notes: Iterable[str] = (),
) -> str:
    """Markdown of Table 2: the paper's interpreters first, then ``interpreter`` (this run).

    ``scores`` is the ``scores.json`` mapping; a column the run has no finite value for shows
    "—". ``counts`` (``{category: {method: n}}``) adds a line with the number of functions
    behind each of the run's cells; ``notes`` are extra lines printed under the table.
    """
    headers: Sequence[str] = ["interpreter", *(c.header for c in TABLE2_COLUMNS)]
    lines = [
        "# FIND Table 2",
        "",
        f"Success rates: numeric code NMSE < 0.1, string code exact match, unit-test accuracy of descriptions. "
        f"{', '.join(PAPER_TABLE2)}: {PAPER_SOURCE}.",
        "",
        "| " + " | ".join(headers) + " |",
        "|---|" + "---:|" * len(TABLE2_COLUMNS),
    ]
    for name, values in PAPER_TABLE2.items():
        lines.append(f"| {name} | " + " | ".join(_fmt(v) for v in values) + " |")
    run_cells = table2_cells(scores)
    lines.append(f"| **{_escape(interpreter)}** (this run) | " + " | ".join(f"**{_fmt(v)}**" if v is not None else _MISSING
                                                                                for v in run_cells) + " |")
    extra = list(notes)
    if counts is not None:
        sizes = [(c.header, (counts.get(c.category) or {}).get(c.method)) for c in TABLE2_COLUMNS]
        listed = [f"{h}: {n}" for h, n in sizes if n]
        if listed:
            extra.insert(0, "Functions scored in this run: " + ", ".join(listed) + ".")
    if extra:
        lines += [""] + [f"- {note}" for note in extra]
    return "\n".join(lines) + "\n"


def render_comparison(runs: Mapping[str, Mapping[str, Mapping[str, Mapping[str, Any]]]], *, title: str = "FIND Table 2") -> str:
    """Markdown of Table 2 with the paper's rows and one row per run (``{name: scores}``), for
    comparing interpreters scored the same way (the main job: oracle, random, an LM)."""
    headers: Sequence[str] = ["interpreter", *(c.header for c in TABLE2_COLUMNS)]
    lines = [
        f"### {title}",
        "",
        "| " + " | ".join(headers) + " |",
        "|---|" + "---:|" * len(TABLE2_COLUMNS),
    ]
    for name, values in PAPER_TABLE2.items():
        lines.append(f"| {name} (paper) | " + " | ".join(_fmt(v) for v in values) + " |")
    for name, scores in runs.items():
        lines.append(f"| **{_escape(name)}** | " + " | ".join(_fmt(v) for v in table2_cells(scores)) + " |")
    lines += ["", f"Paper rows: {PAPER_SOURCE}. Success rates: numeric code NMSE < 0.1, string code exact match, "
              "unit-test accuracy of descriptions."]
    return "\n".join(lines) + "\n"
