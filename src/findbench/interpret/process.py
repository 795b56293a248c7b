"""How an interpreter experimented: process metrics read from its episodes' calls (the logs' records).

Per episode (:func:`episode_process`; all None without a transcript): ``calls`` (commands the
agent issued, exemplars not counted), ``distinct_inputs`` (numeric: distinct numbers; strings:
texts; neurons: stripped texts) and ``probed_corruption`` (corrupted functions only: whether an
input lies in the corrupted interval or excepted subdomain). FIND's documented failure is that
agents miss the corrupted interval; this says whether they looked there.
:func:`aggregate_process` summarises per category and method, :func:`render_process` as markdown."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from findbench.interpret.scoreboard import _md_table
from findbench.stats import format_ci, mean_ci

#: Per-episode columns (``per_function.csv``).
PROCESS_COLUMNS = ("calls", "distinct_inputs", "probed_corruption")


def agent_calls(calls: Sequence[Any] | None) -> list[Mapping[str, Any]]:
    """The records of an episode's ``calls`` the agent issued (not round 0, the MILAN exemplars)."""
    return [c for c in calls or [] if isinstance(c, Mapping) and c.get("round") != 0]


def _input_key(category: str, x: Any) -> Any:
    if category == "numeric":
        if isinstance(x, bool):
            return None
        try:
            v = float(x)
        except (TypeError, ValueError):
            return None
        return None if math.isnan(v) else v
    return str(x) if category == "strings" else str(x).strip()


def episode_process(episode: Mapping[str, Any] | None, row: Mapping[str, Any]) -> dict[str, Any]:
    """``{"calls", "distinct_inputs", "probed_corruption"}`` of one episode on ``row`` (see the
    module docstring); every value None when ``episode`` is None (no transcript)."""
    from findbench.find.domain import in_corrupted_subdomain

    if episode is None:
        return dict.fromkeys(PROCESS_COLUMNS)
    category = str(row.get("category"))
    records = agent_calls(episode.get("calls"))
    inputs = [x for c in records for x in (c.get("inputs") or [])]
    keys = {k for k in (_input_key(category, x) for x in inputs) if k is not None}
    inside = in_corrupted_subdomain(row, inputs)
    return {
        "calls": len(records),
        "distinct_inputs": len(keys),
        "probed_corruption": None if inside is None else any(inside),
    }


def _summary(values: Sequence[float]) -> dict[str, Any] | None:
    """:func:`~findbench.stats.mean_ci` of ``values``, None for none."""
    return mean_ci([float(v) for v in values]) if values else None


def aggregate_process(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{category: {method: summary}}`` over records carrying ``category``, ``method``, the
    :data:`PROCESS_COLUMNS` and (numeric) ``domain_iou``: ``episodes``, ``transcripts``, ``calls`` and
    ``distinct_inputs`` (``{"mean", "ci", "n"}``), ``corrupted``, ``probed_corruption`` (share), and
    for numeric ``domain_iou_probed`` / ``domain_iou_not_probed``; None for a summary without units."""
    out: dict[str, dict[str, Any]] = {}
    for rec in records:
        out.setdefault(rec["category"], {}).setdefault(rec["method"], []).append(rec)
    for category, methods in out.items():
        for method, group in methods.items():
            seen = [r for r in group if r.get("calls") is not None]
            corrupted = [r for r in seen if r.get("probed_corruption") is not None]
            summary: dict[str, Any] = {
                "episodes": len(group),
                "transcripts": len(seen),
                "calls": _summary([r["calls"] for r in seen]),
                "distinct_inputs": _summary([r["distinct_inputs"] for r in seen]),
                "corrupted": len(corrupted),
                "probed_corruption": _summary([float(bool(r["probed_corruption"])) for r in corrupted]),
            }
            if category == "numeric":
                for key, probed in (("domain_iou_probed", True), ("domain_iou_not_probed", False)):
                    summary[key] = _summary([
                        r["domain_iou"] for r in corrupted if bool(r["probed_corruption"]) == probed
                        and isinstance(r.get("domain_iou"), (int, float)) and math.isfinite(r["domain_iou"])])
            methods[method] = summary
    return out


#: Headers of the process table (``table.md`` and ``report.html``) and its notes (markdown).
PROCESS_HEADERS = ("category", "method", "transcripts", "calls", "distinct inputs", "corrupted", "probed corruption",
                   "domain IoU (probed)", "domain IoU (not probed)")
PROCESS_NOTES = (
    "calls: commands the agent issued (exemplars not counted); distinct inputs: distinct values it asked about.",
    "probed corruption: share of corrupted functions (numeric corrupted interval, relation exception) "
    "where the agent called the function inside the corrupted part; "
    "domain IoU: numeric `[DOMAIN]` score of those episodes, split by whether the agent probed.",
)


def process_rows(process: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[list[str]]:
    """The cells of the process table, one row per category and method of :func:`aggregate_process`'s
    summary; ``[]`` when no episode has a transcript."""
    if not any(s["transcripts"] for methods in process.values() for s in methods.values()):
        return []

    def cell(summary: Mapping[str, Any] | None, digits: int = 2) -> str:
        return "—" if summary is None else format_ci(summary["mean"], summary["ci"], summary["n"], digits=digits)

    return [
        [
            c,
            m,
            f"{s['transcripts']}/{s['episodes']}",
            cell(s["calls"], 1),
            cell(s["distinct_inputs"], 1),
            str(s["corrupted"]),
            cell(s["probed_corruption"]),
            cell(s.get("domain_iou_probed")),
            cell(s.get("domain_iou_not_probed")),
        ]
        for c, methods in process.items()
        for m, s in methods.items()
    ]


def render_process(process: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """A markdown section (heading, table, notes) of :func:`aggregate_process`'s summary; ``""``
    when no episode has a transcript."""
    rows = process_rows(process)
    return "\n".join(["## How the interpreters experimented", "", *_md_table(rows, PROCESS_HEADERS, left=2), "",
                      *(f"- {n}" for n in PROCESS_NOTES), ""]) if rows else ""
