"""Score a folder of interpretations into FIND's Table 2 (``findbench evaluate``).

The folder is read by :mod:`findbench.interpret.runs` (its logs, or FIND's layout; untrusted input).

Outputs: ``per_function.csv`` (:func:`score_interpretations` and the process columns of
:mod:`findbench.interpret.process`), ``unit_tests.csv`` (:data:`UNIT_TEST_COLUMNS`; ``margin``:
correct option minus the best wrong one, in the mode's units), ``process.json``, ``scores.json``
(per category and method: :data:`SCORE_METRICS`, each with ``<metric>_ci``, the 95 % percentile
bootstrap interval over functions, seed 0, and ``<metric>_n``, :func:`unit_values`) and
``table.md`` (Table 2)."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from findbench._guards import degenerate_reasons
from findbench._io import atomic_dir, csv_text
from findbench.find.code_scoring import NMSE_THRESHOLD, score_exact_match, score_nmse, score_rasp
from findbench.interpret.config import EvaluateConfig
from findbench.interpret.log_scores import write_log_scores
from findbench.interpret.logs import LOG_DIR
from findbench.interpret.process import PROCESS_COLUMNS, aggregate_process, episode_process, render_process
from findbench.interpret.protocol import METHODS
from findbench.interpret.runs import read_scored_run
from findbench.interpret.scores import SCORES_FILE, Cell, Estimate, Scores
from findbench.interpret.whitebox import CIRCUIT_METRICS, circuit_scores
from findbench.judge import judge_mode_of, judge_unit_tests, normalize_unit_test, render_pmi_option
from findbench.schema import CONFIGS

logger = logging.getLogger(__name__)

#: Aggregate metric names in ``scores.json``.
SCORE_METRICS = (
    "nmse_success",
    "mean_nmse",
    "exact_match",
    "unit_test_accuracy",
    "domain_iou",
    "unit_test_accuracy_near",
    "position_accuracy",
    *CIRCUIT_METRICS,
)
#: Columns of ``per_function.csv`` (then :data:`FLOOR_COLUMNS`, ``floor_missing``: why a floor of the
#: episode could not be computed (its columns are then empty), ``degenerate``, ``code_error``: why the
#: answer's code failed in the sandbox, ``damage``: why a part of the episode could not be read,
#: ``source_log``: the log it was read from, ``logs/<file>.eval``, empty for a run without logs, then
#: the process columns).
CSV_COLUMNS = (
    "function_id",
    "category",
    "method",
    "nmse",
    "exact_match",
    "unit_test_accuracy",
    "domain_iou",
    "unit_test_accuracy_near",
    "position_accuracy",
    *CIRCUIT_METRICS,
)
#: Which aggregates a category has in ``scores.json``.
CATEGORY_METRICS: dict[str, tuple[str, ...]] = {
    "numeric": ("nmse_success", "mean_nmse", "domain_iou"),
    "strings": ("exact_match", "unit_test_accuracy", "unit_test_accuracy_near"),
    "neurons_entities": ("unit_test_accuracy", "unit_test_accuracy_near"),
    "neurons_relations": ("unit_test_accuracy", "unit_test_accuracy_near"),
    "rasp": ("exact_match", "position_accuracy", "unit_test_accuracy", "unit_test_accuracy_near", *CIRCUIT_METRICS),
}
#: The per-function metrics with a floor from the agent's own observations (:mod:`findbench.interpret.floors`).
_FLOOR_METRICS = ("nmse", "exact_match", "unit_test_accuracy", "unit_test_accuracy_near", "position_accuracy")
#: The two floors of an episode, each with the name of the margin over it: ``observed``, the floor of
#: the inputs its episode recorded; ``plan``, the floor of the fixed ``observed`` plan, which no
#: transcript can move (:mod:`findbench.interpret.floors`).
_FLOOR_KINDS = {"observed": "margin", "plan": "margin_plan"}
#: ``per_function.csv``: each floor metric's ``<metric>_observed`` and ``<metric>_margin`` (metric
#: minus its floor; for ``nmse`` lower is better, so a negative margin is the good side), then
#: ``<metric>_plan`` and ``<metric>_margin_plan``, the same against the plan's floor.
FLOOR_COLUMNS = tuple(f"{m}_{kind}" for m in _FLOOR_METRICS for pair in _FLOOR_KINDS.items() for kind in pair)
#: ``find_circuit``'s metrics under white-box access each get ``<metric>_observed``, the floor of what the
#: episode's tool replies alone support (:func:`~findbench.interpret.whitebox.tool_floor`), and
#: ``<metric>_margin`` (in ``per_function.csv`` after :data:`FLOOR_COLUMNS`, and in ``scores.json``).
CIRCUIT_FLOOR_COLUMNS = tuple(f"{m}_{kind}" for m in CIRCUIT_METRICS for kind in ("observed", "margin"))
#: Aggregates of ``scores.json`` with a floor: each gets ``<metric>_observed``, ``<metric>_margin`` and
#: ``<metric>_margin_plan`` (with ``_ci`` and ``_n``; a margin's interval is a paired bootstrap over functions).
FLOORED_SCORES = ("nmse_success", "exact_match", "unit_test_accuracy", "unit_test_accuracy_near", "position_accuracy")
#: Characters of a ``floor_missing`` reason kept.
_REASON_CHARS = 300
#: The unit tests each judged metric reads from a row: FIND's, and the near misses of the function.
_UNIT_TEST_SETS = {"unit_test_accuracy": ("unit_tests", "find"), "unit_test_accuracy_near": ("unit_tests_near", "near")}
#: Columns of ``unit_tests.csv``: one row per unit test judged (``test``: its 0-based position
#: in the row's ``unit_tests`` or ``unit_tests_near``, which ``tests`` names: ``find`` or ``near``;
#: ``empty``: 1 when the description was empty and not shown to the judge, which then chose nothing).
UNIT_TEST_COLUMNS = (
    "function_id",
    "category",
    "method",
    "test",
    "option_1",
    "option_2",
    "option_3",
    "correct",
    "chosen",
    "right",
    "score_1",
    "score_2",
    "score_3",
    "margin",
    "mode",
    "truncated",
    "empty",
    "answer",
    "tests",
)
#: Every column of ``per_function.csv``.
PER_FUNCTION_COLUMNS = (*CSV_COLUMNS, *FLOOR_COLUMNS, *CIRCUIT_FLOOR_COLUMNS, "floor_missing", "degenerate",
                        "code_error", "damage", "source_log", *PROCESS_COLUMNS)
_OUTPUT_FILES = (SCORES_FILE, "per_function.csv", "table.md", "unit_tests.csv", "process.json")

def reference_program(row: dict) -> tuple[str, list[str]] | None:
    """What a string interpretation's exact match is measured against: the row's code on its test
    inputs; without code (FIND v1's strings), a lookup table of its unit tests' correct pairs; None
    when the row has neither."""
    if str(row.get("code") or "").strip():
        return row["code"], [str(x) for x in row.get("test_inputs") or []]
    table: dict[str, str] = {}
    for test in row.get("unit_tests") or []:
        inputs, outputs, correct = test.get("inputs") or [], test.get("outputs") or [], test.get("correct")
        if isinstance(correct, int) and 1 <= correct <= min(len(inputs), len(outputs)):
            table.setdefault(str(inputs[correct - 1]), str(outputs[correct - 1]))
    return (f"_TABLE = {table!r}\n\n\ndef function(s):\n    return _TABLE[s]\n", list(table)) if table else None


def score_interpretations(
    records: list[dict[str, Any]],
    rows: list[dict],
    *,
    metrics: Sequence[str] = CSV_COLUMNS[3:],
    judge: Any = None,
    mode: str = "logprob",
    progress: bool = False,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Score interpretations of one category against their rows (``rows[i]`` is ``records[i]``'s): set
    ``nmse`` (numeric; ``inf`` without code), ``exact_match`` (strings, :func:`reference_program`),
    ``domain_iou`` (numeric) and ``unit_test_accuracy`` (strings and neurons, with the ``judge``; its
    decisions under ``"unit_test_rows"``), None where a metric does not apply; only ``metrics``
    (rasp under white-box access: ``find_circuit``'s, with the tool-reply floor of the run's ``seed``).
    The one scoring path of ``findbench evaluate`` and the Inspect scorers."""
    category = records[0]["category"] if records else None
    for rec in records:
        rec.update({metric: rec.get(metric) for metric in CSV_COLUMNS[3:]})
    coded = [i for i, r in enumerate(records) if r["code"].strip()]
    if category == "numeric" and "nmse" in metrics:
        for rec in records:
            rec["nmse"] = math.inf
        if coded:
            out = score_nmse([records[i]["code"] for i in coded], [rows[i]["code"] for i in coded], progress=progress)
            for i, value, why in zip(coded, out["nmse"], out["errors"]):
                records[i]["nmse"], records[i]["code_error"] = float(value), why
    if category == "numeric" and "domain_iou" in metrics:
        from findbench.find.domain import score_domain

        for rec, value in zip(records, score_domain([r["domain"] for r in records], rows)["iou"]):
            rec["domain_iou"] = float(value)
    if category == "strings" and "exact_match" in metrics:
        references = [reference_program(row) for row in rows]
        for rec, ref in zip(records, references):
            rec["exact_match"] = 0.0 if ref is not None else None
        if missing := sum(ref is None for ref in references):
            logger.warning(
                "exact_match: %d strings function(s) have neither reference code nor unit-test outputs; left empty",
                missing,
            )
        if scored := [i for i in coded if references[i] is not None]:
            out = score_exact_match(
                [records[i]["code"] for i in scored],
                [references[i][0] for i in scored],
                [references[i][1] for i in scored],
                progress=progress,
            )
            for i, value, why in zip(scored, out["per_function"], out["errors"]):
                records[i]["exact_match"], records[i]["code_error"] = float(value), why
    if category == "rasp" and {"exact_match", "position_accuracy"} & set(metrics):  # held-out in-domain inputs
        for rec in records:
            rec["exact_match"] = rec["position_accuracy"] = 0.0
        if coded:
            out = score_rasp([records[i]["code"] for i in coded], [records[i]["function_id"] for i in coded],
                             progress=progress)
            for i, em, pos, why in zip(coded, out["per_function"], out["per_function_positions"], out["errors"]):
                records[i].update(exact_match=float(em), position_accuracy=float(pos), code_error=why)
    if category == "rasp" and set(CIRCUIT_METRICS) & set(metrics):  # white-box runs' component maps
        for rec, row in zip(records, rows):
            rec.update(circuit_scores(rec.get("episode"), row, seed) or {})
    for metric, (column, tests) in _UNIT_TEST_SETS.items():
        if category in (None, "numeric") or metric not in metrics:
            continue
        judged = [i for i, row in enumerate(rows) if row.get(column)]
        if len(judged) < len(records):
            logger.info(
                "%s: %d %s function(s) have no %s; left empty", metric, len(records) - len(judged), category, column
            )
        if judged:
            out = judge_unit_tests(
                judge,
                [records[i]["description"] for i in judged],
                [[normalize_unit_test(t) for t in rows[i][column]] for i in judged],
                category,
                mode=mode,
                progress=progress,
            )
            for i, value in zip(judged, out["per_function"]):
                records[i][metric] = float(value)
            _keep_decisions(records, judged, rows, out, category, mode, column, tests)
    return records


def _add_floors(
    category: str, records: list[dict[str, Any]], lm: Any, mode: str, pool: Sequence[dict], seed: int
) -> None:
    """Set each record's floors (:data:`_FLOOR_KINDS`; :data:`_FLOOR_METRICS`: the best its floor answers
    score, :func:`findbench.interpret.floors.floor_answers`) and the margins over them. The ``observed``
    floor is built from the episode's recorded inputs run through the row's function (``seed``: the
    run's), the ``plan`` floor from the ``observed`` plan on ``pool``. A floor that cannot be computed
    is left empty, with the reason in ``floor_missing``; the others are scored as usual."""
    from findbench.interpret.floors import (
        floor_answers,
        observed_pairs,
        plan_pairs,
        rasp_floor_answers,
        recorded_inputs,
    )

    answers: dict[tuple[int, str], list[tuple[int, str, str]]] = {}  # (episode, kind): its answers' keys
    scored: dict[tuple[int, str, str], dict[str, Any]] = {}  # an answer both floors of an episode give: scored once
    for k, rec in enumerate(records):
        rec["floor_missing"] = None
        fid = rec["function_id"]
        for kind in _FLOOR_KINDS:
            try:
                pairs = (
                    observed_pairs(rec["row"], recorded_inputs(rec.get("episode"), fid), seed=seed)
                    if kind == "observed"
                    else plan_pairs(rec["row"], pool, method=rec["method"], seed=seed)
                )
                # the plan's floor is the one answer the observed reference gives
                found = floor_answers(category, pairs, key=fid, lm=lm, **({"listings": 1} if kind == "plan" else {}))
                if category == "rasp":  # its fixed floors: constant output, copy, family name, hedge
                    found += rasp_floor_answers(rec["row"])
            except Exception as exc:  # noqa: BLE001 - one episode's floor never stops the run
                _floor_missing(rec, kind, exc)
                continue
            answers[(k, kind)] = [(k, a.description, a.code or "") for a in found]
            for key in answers[(k, kind)]:
                scored.setdefault(key, {"function_id": fid, "category": category, "method": rec["method"],
                                        "description": key[1], "domain": "", "code": key[2]})
    metrics = [m for m in _FLOOR_METRICS if any(r.get(m) is not None for r in records)]
    if scored and metrics:
        try:
            score_interpretations(list(scored.values()), [records[key[0]]["row"] for key in scored], metrics=metrics,
                                  judge=lm, mode=mode)
        except Exception as exc:  # noqa: BLE001 - then each episode's floors alone, so only its own fail
            logger.warning("floors: scored one episode at a time after %s: %s", type(exc).__name__, exc)
            for k in dict.fromkeys(key[0] for key in scored):
                mine = [f for key, f in scored.items() if key[0] == k]
                try:
                    score_interpretations(mine, [records[k]["row"]] * len(mine), metrics=metrics, judge=lm, mode=mode)
                except Exception as exc:  # noqa: BLE001
                    for kind in [kind for owner, kind in answers if owner == k]:
                        del answers[(k, kind)]
                        _floor_missing(records[k], kind, exc)
    for k, rec in enumerate(records):
        for kind, margin in _FLOOR_KINDS.items():
            for metric in _FLOOR_METRICS:
                values = [scored[key][metric] for key in answers.get((k, kind), [])
                          if scored[key].get(metric) is not None]
                best = (min if metric == "nmse" else max)(values) if values and rec.get(metric) is not None else None
                rec[f"{metric}_{kind}"] = best
                diff = None if best is None else rec[metric] - best
                rec[f"{metric}_{margin}"] = diff if diff is not None and math.isfinite(diff) else None


def _floor_missing(rec: dict[str, Any], kind: str, exc: BaseException) -> None:
    """Note in ``rec["floor_missing"]`` why its ``kind`` floor could not be computed (one line)."""
    why = " ".join(f"{kind} floor: {type(exc).__name__}: {exc}".split())[:_REASON_CHARS]
    logger.warning("%s (%s): %s", rec["function_id"], rec["method"], why)
    rec["floor_missing"] = "; ".join(filter(None, (rec.get("floor_missing"), why)))


def _degenerate(records: Sequence[dict[str, Any]]) -> list[str]:
    """Why each record's answer is degenerate (:func:`findbench._guards.degenerate_reasons`, case and
    spacing aside), as ``per_function.csv`` writes it: ``""``, ``placeholder`` (the prompt's own form
    text, :data:`~findbench.interpret.prompts.DESCRIPTION_PLACEHOLDERS`), ``empty`` or ``identical to N
    other function(s)`` (of its category and method). Numeric answers count their code too."""
    from findbench.interpret.prompts import DESCRIPTION_PLACEHOLDERS

    def norm(text: Any) -> str:
        return " ".join(str(text or "").split()).lower()

    texts = [norm(r.get("description")) for r in records]
    found = degenerate_reasons(
        texts,
        prompt_texts=DESCRIPTION_PLACEHOLDERS,
        normalize=norm,
        parts=[(t, norm(r.get("code"))) if r.get("category") == "numeric" else (t,) for t, r in zip(texts, records)],
        groups=[(r.get("category"), r.get("method")) for r in records],
    )
    said = {"prompt_text": "placeholder", "empty": "empty"}
    return ["" if why is None else said.get(why[0], f"identical to {why[1]} other function(s)") for why in found]


def _score_category(
    category: str,
    records: list[dict[str, Any]],
    lm: Any,
    mode: str,
    progress: bool,
    unverified: bool,
    pool: Sequence[dict] = (),
    seed: int = 0,
) -> dict[str, Cell]:
    """Score each record and its floors; return each method's :class:`~findbench.interpret.scores.Cell`:
    an estimate of each aggregate of :data:`CATEGORY_METRICS` (the floored ones followed by
    ``<metric>_observed`` and ``<metric>_margin``, paired per function), ``n_degenerate`` and ``unverified``."""
    score_interpretations(records, [r["row"] for r in records], judge=lm, mode=mode, progress=progress, seed=seed)
    _add_floors(category, records, lm, mode, pool or [r["row"] for r in records], seed)
    for rec, reason in zip(records, _degenerate(records)):
        rec["degenerate"] = reason
    names = [
        f"{m}{kind}"
        for m in CATEGORY_METRICS[category]
        for kind in ("", "_observed", "_margin", "_margin_plan")
        if not kind or m in FLOORED_SCORES or (m in CIRCUIT_METRICS and kind != "_margin_plan")
    ]
    return {
        method: Cell(
            **{name: Estimate.of(unit_values(name, group)) for name in names},
            n_degenerate=sum(bool(r["degenerate"]) for r in group),
            unverified=unverified,
        )
        for method in METHODS
        if (group := [r for r in records if r["method"] == method])
    }


def unit_values(metric: str, records: Sequence[dict[str, Any]]) -> list[float]:
    """The per-function values (bootstrap units) an aggregate of ``scores.json`` averages, from records
    or ``per_function.csv`` rows: ``nmse_success`` 1/0 per function (no finite NMSE fails; its
    ``_observed`` and ``_margin`` from ``nmse_observed``), ``mean_nmse`` the finite NMSEs, the
    others (``<metric>_observed`` and ``<metric>_margin`` too) their finite values."""
    def number(value: Any) -> float | None:
        return None if value is None or value == "" else float(value)

    def success(value: Any) -> float:
        v = number(value)
        return 1.0 if v is not None and v < NMSE_THRESHOLD else 0.0

    if metric == "nmse_success":
        return [success(r.get("nmse")) for r in records]
    if metric in ("nmse_success_observed", "nmse_success_margin", "nmse_success_margin_plan"):  # with a floor only
        floor = "nmse_plan" if metric.endswith("plan") else "nmse_observed"
        floored = [r for r in records if number(r.get(floor)) is not None]
        return ([success(r[floor]) for r in floored] if metric.endswith("observed")
                else [success(r.get("nmse")) - success(r[floor]) for r in floored])
    values = [number(r.get("nmse" if metric == "mean_nmse" else metric)) for r in records]
    return [v for v in values if v is not None and math.isfinite(v)]


def _csv(columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> str:
    """``rows`` as CSV text of ``columns`` (the csv module writes None as an empty cell, a float at full
    precision: inf stays "inf")."""
    return csv_text(columns, ([row.get(col) for col in columns] for row in rows))


def _keep_decisions(
    records: list[dict[str, Any]],
    judged: list[int],
    truth: list[dict],
    out: dict[str, Any],
    category: str,
    mode: str,
    column: str,
    tests_name: str,
) -> None:
    """Add the judge's decision on each unit test of ``column`` of the judged records to ``"unit_test_rows"``."""
    truncated, empty = set(out.get("truncated") or []), set(out.get("empty") or [])
    for pos, i in enumerate(judged):
        rec = records[i]
        tests = [normalize_unit_test(t) for t in truth[i][column]]
        rows = [
            {
                "function_id": rec["function_id"],
                "category": category,
                "method": rec["method"],
                "test": k,
                **{f"option_{c}": render_pmi_option(test, c, category) for c in range(1, len(test["inputs"]) + 1)},
                "correct": d["correct"],
                "chosen": d["chosen"],
                "right": int(d["right"]),
                **{f"score_{c}": v for c, v in enumerate(d["scores"] or [], 1)},
                "margin": d["margin"],
                "mode": mode,
                "truncated": int(pos in truncated),
                "empty": int(pos in empty),
                "answer": d["answer"],
                "tests": tests_name,
            }
            for k, (test, d) in enumerate(zip(tests, out["decisions"][pos]))
        ]
        rec["unit_test_rows"] = [r for r in rec.get("unit_test_rows") or [] if r["tests"] != tests_name] + rows


def _plan_pool(category: str, run: dict[str, Any]) -> list[dict]:
    """The functions the ``observed`` plan draws other inputs from: the category's rows of the run's data
    (as the ``observed`` interpreter drew them); an unverified run's, or where they cannot be read, the
    rows scored. Numeric and rasp plans need none."""
    if category in ("numeric", "rasp") or not run["verified"]:
        return []
    from findbench.find.rows import load_rows

    try:
        return load_rows(category, seed=run["seed"], data=run["data"])
    except (OSError, ValueError) as exc:
        logger.warning("plan floor of %s: the rows scored stand in for the data's (%s)", category, exc)
        return []


def _check_out(out: Path, run_dir: Path) -> None:
    """Refuse an output folder whose replacement would lose other files."""
    out_r, run_r = out.resolve(), run_dir.resolve()
    if out_r == run_r or out_r in run_r.parents:
        raise ValueError(
            f"out: {out} would replace the run folder {run_dir}; give a folder of its own (default <run_dir>/scores)"
        )
    if out.exists():
        if not out.is_dir():
            raise ValueError(f"out: {out} exists and is not a folder")
        # report.html and its PNG figures describe the old scores and go with them
        others = sorted(
            p.name
            for p in out.iterdir()
            if p.name not in _OUTPUT_FILES and p.name != "report.html" and not (p.suffix == ".png" and p.is_file())
        )
        if others:
            raise ValueError(
                f"out: {out} holds other files ({', '.join(others[:5])}); it is replaced as a whole, so "
                f"give a new folder or one holding only {', '.join(_OUTPUT_FILES)}"
            )


def _notes(run_path: Path, run: dict[str, Any], damaged: list[dict[str, Any]], records: list[dict[str, Any]],
           identity: Any) -> list[str]:
    """The notes under ``table.md``'s Table 2: where the episodes and the truth come from, the damaged
    episodes, the logs not scored, the missing floors and the judge."""
    notes = [f"Run: `{run_path}` ("
             + (f"episodes from its {LOG_DIR}/" if run["from_logs"] else f"{run['layout']} layout")
             + f"); truth: {run['truth']}."]
    if damaged or run["unscorable"]:
        names = ", ".join(f"{r['function_id']} ({r['method']})" for r in damaged[:10]) + (
            " …" if len(damaged) > 10 else ""
        )
        notes.append(
            f"Damaged: {len(damaged)} episode(s) could not be read in full and are scored as if the unreadable "
            f"parts were missing ({len(run['unscorable'])} not scored: no log record or no row to score against): "
            f"{names}; see the damage column of per_function.csv."
        )
    if run["log_problems"]:
        notes.append(
            f"Logs not scored: {len(run['log_problems'])}: {'; '.join(run['log_problems'][:5])}"
            + (" …" if len(run["log_problems"]) > 5 else "")
            + "."
        )
    if no_floor := [r for r in records if r.get("floor_missing")]:
        notes.append(
            f"Floors missing: {len(no_floor)} episode(s) have a floor that could not be computed (its columns are "
            "empty; the episode is scored): "
            + "; ".join(f"{r['function_id']} ({r['method']}): {r['floor_missing']}" for r in no_floor[:5])
            + (" …" if len(no_floor) > 5 else "")
            + "; see the floor_missing column of per_function.csv."
        )
    return notes + ([f"Judge: {identity.describe()}."] if identity is not None else [])


def evaluate_run(cfg: EvaluateConfig, *, progress: bool = True) -> dict[str, Any]:
    """Score the interpretations in ``cfg.run_dir`` and write ``scores.json``, ``per_function.csv``,
    ``unit_tests.csv``, ``process.json`` and ``table.md`` to ``cfg.out`` (replaced in one rename).

    Args:
        cfg: the settings (:class:`~findbench.interpret.config.EvaluateConfig`, ``findbench
            evaluate``'s flags). ``data``: dataset folder for episodes that carry no row (FIND's
            layout); default ``data`` in ``run.json``, else procedural rows with its
            ``seed``. ``judge``: as the flag, or a :class:`findbench.lm.LM`; loaded only for string or
            neuron episodes. ``out``: must not be ``run_dir`` (or hold it), nor hold other files.
        progress: show a progress bar while judging.

    ``scores.json`` cells carry ``unverified`` (true when the truth was not the evaluator's choice:
    the data folder the run's run.json names, or the rows an in-memory run carries;
    :mod:`findbench.interpret.truth`).

    Returns ``{"interpreter", "layout", "scores", "counts", "out", "table", "process", "verified"}``
    (``scores``: the content of ``scores.json``; :meth:`findbench.interpret.scores.Scores.from_json` types it)."""
    from findbench.interpret.scoreboard import render_table

    run_path, out_path = Path(cfg.run_dir), Path(cfg.out)
    _check_out(out_path, run_path)
    run = read_scored_run(run_path, data=cfg.data, method=cfg.method, exclude=[out_path])
    layout, records, interpreter = run["layout"], run["records"], run["interpreter"]
    damaged = [r for r in records + run["unscorable"] if r["damage"]]
    for rec in damaged:
        logger.warning("damaged episode %s (%s): %s", rec["function_id"], rec["method"], rec["damage"])
    if not records:
        raise ValueError(f"run_dir: nothing to score in {run_path}: " + (
            f"no readable log records an episode ({run['log_problems'][0]})" if run["log_problems"]
            else "no episode carries a readable row"))

    lm, mode, identity = None, "logprob", None
    if any(r["category"] != "numeric" for r in records):
        from findbench.judge import load_judge  # looked up when called (tests replace it)
        from findbench.models import judge_identity

        mode = cfg.judge_mode or judge_mode_of(cfg.judge, judge_model=cfg.judge_model)
        lm = load_judge(cfg.judge, judge_model=cfg.judge_model, cache=cfg.judge_cache)  # before the sandbox: fails fast
        identity = judge_identity(cfg.judge, judge_model=cfg.judge_model, mode=mode)
        logger.info("judge: %s", identity.describe())

    cells: dict[str, dict[str, Cell]] = {}
    counts: dict[str, dict[str, int]] = {}
    for category in CONFIGS:
        group = [r for r in records if r["category"] == category]
        if not group:
            continue
        logger.info("scoring %d %s interpretation(s)", len(group), category)
        cells[category] = _score_category(category, group, lm, mode, progress, unverified=not run["verified"],
                                          pool=_plan_pool(category, run), seed=run["seed"])
        counts[category] = {
            m: sum(r["method"] == m for r in group) for m in METHODS if any(r["method"] == m for r in group)
        }

    scores = Scores(cells, identity)
    table = render_table(interpreter, scores, counts=counts, notes=_notes(run_path, run, damaged, records, identity))
    for rec in records:  # the process columns, from the episode (probed_corruption as 0/1)
        values = episode_process(rec["episode"], rec["row"])
        rec.update(values, probed_corruption=None if values["probed_corruption"] is None
                   else int(values["probed_corruption"]))
    process = aggregate_process(records)
    if section := render_process(process):
        table = table.rstrip("\n") + "\n\n" + section
    files = {
        SCORES_FILE: scores.dumps(),
        "per_function.csv": _csv(PER_FUNCTION_COLUMNS, records),
        "unit_tests.csv": _csv(UNIT_TEST_COLUMNS, (row for rec in records for row in rec.get("unit_test_rows") or [])),
        "process.json": json.dumps(process, indent=2, allow_nan=False) + "\n",
        "table.md": table,
    }
    with atomic_dir(out_path) as tmp:
        for name, text in files.items():
            (tmp / name).write_text(text, encoding="utf-8")
    write_log_scores(run_path, records, judge=identity, mode=mode)
    return {
        "interpreter": interpreter,
        "layout": layout,
        "scores": scores.to_json(),
        "counts": counts,
        "out": str(out_path),
        "table": table,
        "process": process,
        "verified": run["verified"],
    }
