"""The ground truth a run is scored against.

An episode carries the row it interpreted (its log sample's metadata ``row``). It comes from a
folder someone handed over, so it is a convenience, never the truth: :func:`attach_truth` takes
each function's row from the data (``--data``, else the dataset folder or procedural seed
``run.json`` records) and refuses a run whose carried rows differ from it (by :func:`row_fingerprint`).

Scores are ``verified`` only when the evaluator chose the truth: ``--data``, or the procedural
rows regenerated from the recorded seed. A run scored against the data folder its own
``run.json`` names, or (made on in-memory rows, with no data to check against) on its carried
rows, is marked ``unverified`` wherever its scores are shown."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from findbench._io import fingerprint
from findbench.constants import UsageError
from findbench.schema import CONFIGS

#: The fields of a row its fingerprint covers: what defines the function and its tests.
TRUTH_FIELDS = ("function_id", "code", "params", "description", "test_inputs", "unit_tests")
#: Shown where scores come from carried rows nobody checked.
UNVERIFIED_NOTE = ("unverified: scored against the rows the run folder carries (the run was made on in-memory rows, "
                   "so no data can check them)")
#: Shown where the truth is the data folder the run's own run.json names.
UNVERIFIED_RUN_DATA = "unverified: the run chose this truth itself; pass --data to verify"


def json_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as plain JSON values (arrays as lists), as episodes carry it and Inspect logs it."""
    return json.loads(json.dumps(dict(row), default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v)))


def row_fingerprint(row: Mapping[str, Any]) -> str:
    """The content hash of a row's :data:`TRUTH_FIELDS` (as JSON values)."""
    values = json_row(row)
    return fingerprint({k: values.get(k) for k in TRUTH_FIELDS})


def _truth_source(
    info: Mapping[str, Any], data: str | os.PathLike | None, run_path: Path
) -> tuple[Any, str, bool] | None:
    """``(data, text, verified)``: where the truth comes from (a folder, or None for procedural rows)
    and whether the evaluator chose it; None for a run with no data at all (in-memory rows and no
    ``--data``)."""
    if data is not None:
        return data, f"data folder `{data}` (--data)", True
    if info.get("source") == "rows":
        return None
    if recorded := info.get("data"):
        folder = Path(str(recorded)).resolve()
        if folder == run_path.resolve() or run_path.resolve() in folder.parents:
            raise UsageError(
                f"--data: {run_path}/run.json names a data folder inside the run folder ({recorded}); the truth "
                "cannot come from the folder being scored: pass --data with the dataset folder"
            )
        return str(recorded), f"data folder `{recorded}` named by run.json ({UNVERIFIED_RUN_DATA})", False
    return None, f"procedural, seed {info.get('seed') or 0}", True


def attach_truth(
    records: Sequence[dict[str, Any]], info: Mapping[str, Any], data: str | os.PathLike | None, run_path: Path
) -> tuple[bool, str]:
    """Set each record's ``"row"``, the row it is scored against; return ``(verified, source text)``.

    Records hold ``"episode"`` (the log's record, with its ``"row"``, or None). With data (``data``,
    else ``run.json``'s folder or seed), every function's row comes from it and every carried row
    must match it (UsageError naming the functions otherwise); only ``data`` and the procedural rows
    of the seed verify (the run's own folder leaves it unverified). A run on in-memory rows without
    ``data`` keeps its carried rows; an episode with no readable row is then left without one
    (``"row"`` None)."""
    from findbench.find.rows import load_rows

    if (source := _truth_source(info, data, run_path)) is None:
        for rec in records:
            row = (rec.get("episode") or {}).get("row")
            rec["row"] = row if isinstance(row, dict) else None
        if all(rec["row"] is None for rec in records):
            raise UsageError(
                f"--data: {run_path} was run on in-memory rows (run.json source 'rows') and carries no readable "
                "row; pass --data with the dataset folder those rows came from"
            )
        return False, UNVERIFIED_NOTE
    folder, text, verified = source
    mismatched = []
    for category in (c for c in CONFIGS if any(r["category"] == c for r in records)):
        by_id = {row["function_id"]: row for row in load_rows(category, seed=info.get("seed") or 0, data=folder)}
        for rec in (r for r in records if r["category"] == category):
            if (truth := by_id.get(rec["function_id"])) is None:
                raise ValueError(
                    f"function_id: {rec['function_id']} ({rec['method']}) is not in the {category} rows of the "
                    f"{text} ({len(by_id)} functions)"
                )
            carried = (rec.get("episode") or {}).get("row")
            if carried is not None and (not isinstance(carried, dict)
                                        or row_fingerprint(carried) != row_fingerprint(truth)):
                mismatched.append(f"{rec['function_id']} ({rec['method']})")
            rec["row"] = truth
    if mismatched:
        raise UsageError(
            f"--data: the rows carried by {len(mismatched)} episode(s): {', '.join(mismatched[:5])}"
            + (f" and {len(mismatched) - 5} more" if len(mismatched) > 5 else "")
            + f" differ from the {text}: the run was made on other "
            "rows, or its folder was changed; pass --data with the dataset folder the run used"
        )
    return verified, text
