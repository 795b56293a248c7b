"""Score a folder of interpretations into FIND's Table 2 (``findbench evaluate``).

Layouts: a ``findbench interpret`` run, whose record is its Inspect logs (``<run>/logs/*.eval``, read
by :mod:`findbench.interpret.logs`; each episode carries the row interpreted and its fingerprint),
and FIND's results layout, ``<dir>/<category>/fNNNNN/{description.txt, domain.txt, code.py}``. A run
without logs (folders written by :func:`~findbench.interpret.run.write_episode`) is read
from its exported ``<category>/<method>/fNNNNN/{..., episode.json}`` folders; in a run with logs
those folders are an export for FIND's tools and are not read, and one that no readable log records
is named and not scored. Either way the truth comes from the data
(:mod:`findbench.interpret.truth`), never from the folder being scored.

A run folder is untrusted: only regular files are read (no symlinks, devices or FIFOs; symlinked
folders are skipped), each part at most :data:`_PART_MAX_BYTES`, each log within the caps of
:mod:`findbench.interpret.logs`. A missing part is scored as a failure where its metric applies; a
part or episode record that cannot be read marks its episode damaged (``damage`` in
``per_function.csv``, named in ``table.md``), scored as if the part were missing, and the other
episodes are scored as usual; a log that cannot be read, or that is not of the run (another
interpreter, model, task arguments or more than one epoch), is named in ``table.md`` and not scored.

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
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from findbench._guards import degenerate_reasons
from findbench._io import atomic_dir, csv_text, read_untrusted_json, read_untrusted_text
from findbench.interpret.config import EvaluateConfig
from findbench.interpret.episode import Episode
from findbench.interpret.log_scores import write_log_scores
from findbench.interpret.logs import LOG_DIR, log_files
from findbench.interpret.protocol import METHODS
from findbench.interpret.scores import SCORES_FILE, Cell, Estimate, Scores
from findbench.schema import CONFIGS

logger = logging.getLogger(__name__)

#: The files an episode folder may hold, without their suffix: ``description.txt``,
#: ``domain.txt``, ``code.py``.
PARTS = ("description", "domain", "code")
_PART_FILES = {"description": "description.txt", "domain": "domain.txt", "code": "code.py"}
#: The largest part read; a larger one marks its episode damaged.
_PART_MAX_BYTES = {"description": 64 * 1024, "domain": 64 * 1024, "code": 256 * 1024}
#: The largest ``run.json`` read.
_RUN_INFO_MAX_BYTES = 1024 * 1024
#: Aggregate metric names in ``scores.json``.
SCORE_METRICS = (
    "nmse_success",
    "mean_nmse",
    "exact_match",
    "unit_test_accuracy",
    "domain_iou",
    "unit_test_accuracy_near",
    "position_accuracy",
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
)
#: Which aggregates a category has in ``scores.json``.
CATEGORY_METRICS: dict[str, tuple[str, ...]] = {
    "numeric": ("nmse_success", "mean_nmse", "domain_iou"),
    "strings": ("exact_match", "unit_test_accuracy", "unit_test_accuracy_near"),
    "neurons_entities": ("unit_test_accuracy", "unit_test_accuracy_near"),
    "neurons_relations": ("unit_test_accuracy", "unit_test_accuracy_near"),
    "rasp": ("exact_match", "position_accuracy", "unit_test_accuracy", "unit_test_accuracy_near"),
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
_OUTPUT_FILES = (SCORES_FILE, "per_function.csv", "table.md", "unit_tests.csv", "process.json")

_EPISODE = re.compile(r"^f\d{5}$")
_RUN_INFO = "run.json"


def read_run_info(run_dir: str | os.PathLike) -> dict[str, Any]:
    """``<run_dir>/run.json`` as a dict (``{}`` when the folder has none)."""
    path = Path(run_dir) / _RUN_INFO
    return read_untrusted_json(path, _RUN_INFO_MAX_BYTES, "run.json:") if os.path.lexists(path) else {}


def _subdirs(folder: Path) -> list[Path]:
    """Visible subfolders, sorted (hidden ones are temporary folders of atomic writers); a symlink
    to a folder is not followed (a warning names it)."""
    found = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith("."):
            continue
        if p.is_symlink():
            if p.is_dir():
                logger.warning(
                    "run_dir: %s is a symbolic link to a folder; skipped (run folders are read without links)", p
                )
            continue
        if p.is_dir():
            found.append(p)
    return found


def _kind(folder: Path) -> str | None:
    """``"run"`` (method folders), ``"find"`` (episode folders) or None (neither, e.g. a scores folder)."""
    names = [p.name for p in _subdirs(folder)]
    if any(n in METHODS for n in names):
        return "run"
    if any(_EPISODE.match(n) for n in names):
        return "find"
    return None


def _add_damage(record: dict[str, Any], why: str) -> None:
    """Add ``why`` to the reasons ``record``'s episode is damaged."""
    record["damage"] = "; ".join(filter(None, (record["damage"], why)))


def _episodes_of(folder: Path, category: str, method: str, where: str) -> list[dict[str, Any]]:
    records = []
    for sub in _subdirs(folder):
        if not _EPISODE.match(sub.name):
            raise ValueError(
                f"run_dir: episode folder {where}/{sub.name} must be named fNNNNN (a function id such as f00042)"
            )
        record: dict[str, Any] = {
            "function_id": f"{category}/{sub.name}",
            "category": category,
            "method": method,
            "damage": None,
        }
        for part in PARTS:
            path = sub / _PART_FILES[part]
            record[part] = ""
            if not os.path.lexists(path):
                continue
            try:
                record[part] = read_untrusted_text(
                    path, _PART_MAX_BYTES[part], f"{part} of {category}/{sub.name} ({method}):"
                )
            except ValueError as exc:
                _add_damage(record, str(exc))
        records.append(record)
    return records


def _scan(
    run_dir: Path, method: str | None, exclude: Sequence[Path] = ()
) -> tuple[str, list[dict[str, Any]], list[str]]:
    """The layout (``"run"`` or ``"find"``), the episode records of ``run_dir`` and the problems met
    reading its logs (one line each). A run with logs is read from them (:func:`_from_logs`)."""
    if method is not None and method not in METHODS:
        raise ValueError(f"method must be one of {METHODS} or None, got {method!r}")
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run_dir: {run_dir} is not a folder")
    skip = {p.resolve() for p in exclude}
    kinds: dict[str, str] = {}
    for folder in _subdirs(run_dir):
        if folder.resolve() in skip:
            continue
        kind = _kind(folder)
        if folder.name not in CONFIGS:
            if kind is not None:  # holds episodes: a category this benchmark does not have
                raise ValueError(
                    f"category: unknown category folder {folder.name!r} in {run_dir}; categories are {CONFIGS}"
                )
            continue
        if kind is not None:
            kinds[folder.name] = kind
    has_logs = bool(log_files(run_dir))
    if not kinds and not has_logs:
        raise ValueError(
            f"run_dir: nothing to score in {run_dir}: no {LOG_DIR}/*.eval or <category>/<method>/fNNNNN/ (findbench "
            f"interpret) or <category>/fNNNNN/ (FIND results) folders, with category in {CONFIGS}"
        )
    has_info = (run_dir / _RUN_INFO).is_file()
    layouts = set(kinds.values()) | ({"run"} if has_info or has_logs else set())
    if len(layouts) > 1:
        raise ValueError(
            f"run_dir: {run_dir} mixes layouts: "
            + ", ".join(f"{c}: {k}" for c, k in kinds.items())
            + (" (and has a run.json or logs)" if has_info or has_logs else "")
            + "; expected <category>/<method>/fNNNNN/ throughout"
        )
    layout = layouts.pop()
    records: list[dict[str, Any]] = []
    for category in (c for c in CONFIGS if c in kinds):
        folder = run_dir / category
        if layout == "find":
            records += _episodes_of(folder, category, method or "aia", category)
            continue
        for sub in _subdirs(folder):
            if sub.name not in METHODS:
                raise ValueError(
                    f"method: unknown method folder {category}/{sub.name!r} in {run_dir}; methods are {METHODS}"
                )
        for m in METHODS:
            if (folder / m).is_dir() and (method is None or m == method):
                records += _episodes_of(folder / m, category, m, f"{category}/{m}")
    problems: list[str] = []
    if has_logs:
        records, problems = _from_logs(run_dir, method, records)
    if not records:
        what = f" for method {method!r}" if method is not None else ""
        raise ValueError(
            f"run_dir: nothing to score in {run_dir}: no episodes{what}"
            + (f" ({'; '.join(problems[:3])})" if problems else "")
        )
    return layout, records, problems


def _from_logs(
    run_dir: Path, method: str | None, exported: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The records of a run's logs (:func:`findbench.interpret.logs.read_run_logs`, checked against
    its run.json), each with its ``"episode"``, ``"source_log"`` (``logs/<file>``) and the logs'
    ``"interpreter"``; an exported episode folder no log read records is kept with ``"unrecorded"``
    set (not scored: the logs are the record). Returns the records and the logs' problems."""
    from findbench.interpret.logs import read_run_logs

    logs = read_run_logs(run_dir, read_run_info(run_dir))
    records = []
    for (m, function_id), found in logs.episodes.items():
        if method is not None and m != method:
            continue
        category = function_id.split("/", 1)[0]
        rec: dict[str, Any] = {
            "function_id": function_id,
            "category": category,
            "method": m,
            "damage": found.damage,
            "episode": found.record,
            "source_log": f"{LOG_DIR}/{Path(found.log).name}",
            "interpreter": (logs.identity or {}).get("interpreter"),
            **dict.fromkeys(PARTS, ""),
        }
        if found.record is not None:
            answer = Episode.from_dict(found.record)
            for part in PARTS:
                value, where = getattr(answer, part), f"{part} of {function_id} ({m}) in {found.log}"
                if not isinstance(value, str):
                    _add_damage(rec, f"{where} is a {type(value).__name__}, not text")
                elif len(value.encode("utf-8", errors="replace")) > _PART_MAX_BYTES[part]:
                    _add_damage(rec, f"{where} is over the {_PART_MAX_BYTES[part]:,}-byte cap")
                else:
                    rec[part] = value
        records.append(rec)
    held = {(r["method"], r["function_id"]) for r in records}
    for rec in exported:
        if (rec["method"], rec["function_id"]) not in held:
            records.append(
                {
                    **rec,
                    **dict.fromkeys(PARTS, ""),
                    "episode": None,
                    "unrecorded": True,
                    "damage": f"no readable log in {run_dir / LOG_DIR} records this episode; its exported folder is "
                    "not the record and is not scored",
                }
            )
    order = {c: i for i, c in enumerate(CONFIGS)}
    records.sort(key=lambda r: (order[r["category"]], METHODS.index(r["method"]), r["function_id"]))
    return records, logs.problems


def load_interpretations(run_dir: str | os.PathLike, method: str | None = None) -> list[dict[str, Any]]:
    """One record per episode of ``run_dir`` (either layout), in category, method, function order:
    ``{"function_id", "category", "method", "description", "domain", "code", "damage"}`` (``""`` for a
    missing or unreadable part; ``damage``: why a part could not be read, else None). A run with logs
    is read from them: its records also carry ``"episode"``, and an exported folder no log records
    carries ``"unrecorded"``. ``method``: the method of a FIND-layout folder's episodes (default
    ``aia``); for a run, keep only that method's episodes."""
    return _scan(Path(run_dir), method)[1]


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
    if not table:
        return None
    return f"_TABLE = {table!r}\n\n\ndef function(s):\n    return _TABLE[s]\n", list(table)


def score_interpretations(
    records: list[dict[str, Any]],
    rows: list[dict],
    *,
    metrics: Sequence[str] = CSV_COLUMNS[3:],
    judge: Any = None,
    mode: str = "logprob",
    progress: bool = False,
) -> list[dict[str, Any]]:
    """Score interpretations of one category against their rows (``rows[i]`` is ``records[i]``'s): set
    ``nmse`` (numeric; ``inf`` without code), ``exact_match`` (strings, :func:`reference_program`),
    ``domain_iou`` (numeric) and ``unit_test_accuracy`` (strings and neurons, with the ``judge``; its
    decisions under ``"unit_test_rows"``), None where a metric does not apply; only ``metrics``.
    The one scoring path of ``findbench evaluate`` and the Inspect scorers."""
    from findbench.find.code_scoring import score_exact_match, score_nmse

    category = records[0]["category"] if records else None
    for rec in records:
        for metric in CSV_COLUMNS[3:]:
            rec.setdefault(metric, None)
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
        missing = sum(ref is None for ref in references)
        if missing:
            logger.warning(
                "exact_match: %d strings function(s) have neither reference code nor unit-test outputs; left empty",
                missing,
            )
        scored = [i for i in coded if references[i] is not None]
        if scored:
            out = score_exact_match(
                [records[i]["code"] for i in scored],
                [references[i][0] for i in scored],
                [references[i][1] for i in scored],
                progress=progress,
            )
            for i, value, why in zip(scored, out["per_function"], out["errors"]):
                records[i]["exact_match"], records[i]["code_error"] = float(value), why
    if category == "rasp" and {"exact_match", "position_accuracy"} & set(metrics):
        _score_rasp_code(records, coded, progress)
    for metric, (column, tests) in _UNIT_TEST_SETS.items():
        if category in (None, "numeric") or metric not in metrics:
            continue
        from findbench.judge import judge_unit_tests, normalize_unit_test

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


def _score_rasp_code(records: list[dict[str, Any]], coded: list[int], progress: bool) -> None:
    """``exact_match`` and ``position_accuracy`` of rasp answers' code against the compiled models on
    held-out in-domain inputs (:func:`findbench.find.code_scoring.score_rasp`; 0 without code)."""
    from findbench.find.code_scoring import score_rasp

    for rec in records:
        rec["exact_match"] = rec["position_accuracy"] = 0.0
    if coded:
        out = score_rasp([records[i]["code"] for i in coded], [records[i]["function_id"] for i in coded],
                         progress=progress)
        for i, em, pos, why in zip(coded, out["per_function"], out["per_function_positions"], out["errors"]):
            records[i].update(exact_match=float(em), position_accuracy=float(pos), code_error=why)


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

    floors: list[dict[str, Any]] = []
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
                answers = floor_answers(category, pairs, key=fid, lm=lm, **({"listings": 1} if kind == "plan" else {}))
                if category == "rasp":  # its fixed floors: constant output, copy, family name, hedge
                    answers += rasp_floor_answers(rec["row"])
            except Exception as exc:  # noqa: BLE001 - one episode's floor never stops the run
                _floor_missing(rec, kind, exc)
                continue
            floors += [
                {"function_id": fid, "category": category, "method": rec["method"], "description": a.description,
                 "domain": "", "code": a.code or "", "owner": (k, kind)}
                for a in answers
            ]
    shared: dict[tuple, dict[str, Any]] = {}  # an answer both floors of an episode give is scored once
    for f in floors:
        f["scored"] = shared.setdefault((f["owner"][0], f["description"], f["code"]), f)
    scored = list(shared.values())
    metrics = [m for m in _FLOOR_METRICS if any(r.get(m) is not None for r in records)]
    if scored and metrics:
        try:
            score_interpretations(scored, [records[f["owner"][0]]["row"] for f in scored], metrics=metrics,
                                  judge=lm, mode=mode)
        except Exception as exc:  # noqa: BLE001 - then each episode's floors alone, so only its own fail
            logger.warning("floors: scored one episode at a time after %s: %s", type(exc).__name__, exc)
            for k in dict.fromkeys(f["owner"][0] for f in scored):
                mine = [f for f in scored if f["owner"][0] == k]
                try:
                    score_interpretations(mine, [records[k]["row"]] * len(mine), metrics=metrics, judge=lm, mode=mode)
                except Exception as exc:  # noqa: BLE001
                    for f in mine:
                        f["failed"] = True
                    for kind in dict.fromkeys(f["owner"][1] for f in floors if f["scored"].get("failed")
                                              and f["owner"][0] == k):
                        _floor_missing(records[k], kind, exc)
    by_owner: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for f in floors:
        if not f["scored"].get("failed"):
            by_owner.setdefault(f["owner"], []).append(f["scored"])
    for k, rec in enumerate(records):
        for kind, margin in _FLOOR_KINDS.items():
            for metric in _FLOOR_METRICS:
                values = [f[metric] for f in by_owner.get((k, kind), []) if f.get(metric) is not None]
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
    score_interpretations(records, [r["row"] for r in records], judge=lm, mode=mode, progress=progress)
    _add_floors(category, records, lm, mode, pool or [r["row"] for r in records], seed)
    for rec, reason in zip(records, _degenerate(records)):
        rec["degenerate"] = reason
    names = [
        f"{m}{kind}"
        for m in CATEGORY_METRICS[category]
        for kind in ("", "_observed", "_margin", "_margin_plan")
        if not kind or m in FLOORED_SCORES
    ]
    cells: dict[str, Cell] = {}
    for method in METHODS:
        group = [r for r in records if r["method"] == method]
        if group:
            cells[method] = Cell(
                **{name: Estimate.of(unit_values(name, group)) for name in names},
                n_degenerate=sum(bool(r["degenerate"]) for r in group),
                unverified=unverified,
            )
    return cells


def unit_values(metric: str, records: Sequence[dict[str, Any]]) -> list[float]:
    """The per-function values (bootstrap units) an aggregate of ``scores.json`` averages, from records
    or ``per_function.csv`` rows: ``nmse_success`` 1/0 per function (no finite NMSE fails; its
    ``_observed`` and ``_margin`` from ``nmse_observed``), ``mean_nmse`` the finite NMSEs, the
    others (``<metric>_observed`` and ``<metric>_margin`` too) their finite values."""
    from findbench.find.code_scoring import NMSE_THRESHOLD

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
        if metric.endswith("observed"):
            return [success(r[floor]) for r in floored]
        return [success(r.get("nmse")) - success(r[floor]) for r in floored]
    column = "nmse" if metric == "mean_nmse" else metric
    values = [number(r.get(column)) for r in records]
    return [v for v in values if v is not None and math.isfinite(v)]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # full precision; inf stays "inf"
    return str(value)


def _per_function_csv(records: list[dict[str, Any]]) -> str:
    from findbench.interpret.process import PROCESS_COLUMNS

    columns = (*CSV_COLUMNS, *FLOOR_COLUMNS, "floor_missing", "degenerate", "code_error", "damage", "source_log",
               *PROCESS_COLUMNS)
    return csv_text(columns, ([_cell(rec.get(col)) for col in columns] for rec in records))


def _keep_decisions(
    records: list[dict[str, Any]],
    judged: list[int],
    truth: list[dict],
    out: dict[str, Any],
    category: str,
    mode: str,
    column: str = "unit_tests",
    tests_name: str = "find",
) -> None:
    """Add the judge's decision on each unit test of ``column`` of the judged records to ``"unit_test_rows"``."""
    from findbench.judge import normalize_unit_test, render_pmi_option

    truncated, empty = set(out.get("truncated") or []), set(out.get("empty") or [])
    for pos, i in enumerate(judged):
        rec, rows = records[i], []
        tests = [normalize_unit_test(t) for t in truth[i][column]]
        for k, (test, d) in enumerate(zip(tests, out["decisions"][pos])):
            options = [render_pmi_option(test, c, category) for c in range(1, len(test["inputs"]) + 1)]
            scores = d["scores"] or []
            rows.append(
                {
                    "function_id": rec["function_id"],
                    "category": category,
                    "method": rec["method"],
                    "test": k,
                    **{f"option_{c}": text for c, text in enumerate(options, 1)},
                    "correct": d["correct"],
                    "chosen": d["chosen"],
                    "right": int(d["right"]),
                    **{f"score_{c}": v for c, v in enumerate(scores, 1)},
                    "margin": d["margin"],
                    "mode": mode,
                    "truncated": int(pos in truncated),
                    "empty": int(pos in empty),
                    "answer": d["answer"],
                    "tests": tests_name,
                }
            )
        rec["unit_test_rows"] = [r for r in rec.get("unit_test_rows") or [] if r["tests"] != tests_name] + rows


def _unit_tests_csv(records: list[dict[str, Any]]) -> str:
    rows = (row for rec in records for row in rec.get("unit_test_rows") or [])
    return csv_text(UNIT_TEST_COLUMNS, ([_cell(row.get(col)) for col in UNIT_TEST_COLUMNS] for row in rows))


def read_scored_run(
    run_dir: str | os.PathLike,
    *,
    data: str | os.PathLike | None = None,
    method: str | None = None,
    exclude: Sequence[Path] = (),
) -> dict[str, Any]:
    """A run as ``findbench evaluate`` and ``findbench report`` read it: ``{"layout", "info"
    (run.json), "interpreter", "seed", "data", "verified", "truth" (where the rows come from, in
    words), "records", "unscorable" (records not scored: no row, or no log record), "log_problems"
    (one line per unreadable log), "from_logs"}``. Each record of :func:`load_interpretations` has
    ``"episode"`` (the log's record, else the ``episode.json`` of a run without logs; None when
    unreadable), ``"damage"`` (why a damaged one is unreadable) and ``"row"``, the truth it is
    scored against (:func:`findbench.interpret.truth.attach_truth`: the data's row, checked against
    the carried one; on an unverifiable run the carried row)."""
    from findbench.interpret.episode import read_episode_file
    from findbench.interpret.truth import attach_truth

    run_path = Path(run_dir)
    layout, records, problems = _scan(run_path, method, exclude)
    info = read_run_info(run_path)
    seed = info.get("seed") or 0
    unrecorded = [r for r in records if r.get("unrecorded")]
    records = [r for r in records if not r.get("unrecorded")]
    for rec in records:
        if "episode" in rec:  # read from the logs
            continue
        category, local = rec["function_id"].split("/", 1)
        folder = run_path / category / rec["method"] / local if layout == "run" else run_path / category / local
        rec["episode"] = None
        if os.path.lexists(folder / "episode.json"):
            try:
                rec["episode"] = read_episode_file(folder / "episode.json")
            except ValueError as exc:
                _add_damage(rec, str(exc))
            if rec["episode"] is not None and (rec["episode"].get("function_id"), rec["episode"].get("method")) != (
                rec["function_id"],
                rec["method"],
            ):
                _add_damage(rec, f"episode file {folder / 'episode.json'} is the record of another episode "
                                 f"({rec['episode'].get('function_id')!r}, {rec['episode'].get('method')!r})")
                rec["episode"] = None
    verified, truth = attach_truth(records, info, data, run_path)
    unscorable = [r for r in records if r["row"] is None]
    for rec in unscorable:
        logger.warning(
            "not scored: %s (%s) carries no readable row (%s)", rec["function_id"], rec["method"], rec["damage"]
        )
    for rec in unrecorded:
        logger.warning("not scored: %s (%s): %s", rec["function_id"], rec["method"], rec["damage"])
    records = [r for r in records if r["row"] is not None]
    logged = {str(r["interpreter"]) for r in records if r.get("interpreter")}  # the logs', without a run.json
    for problem in problems:
        logger.warning("%s", problem)
    return {
        "layout": layout,
        "info": info,
        "interpreter": info.get("interpreter") or next(iter(logged), None) or run_path.resolve().name,
        "seed": seed,
        "data": data if data is not None else info.get("data"),
        "verified": verified,
        "truth": truth,
        "records": records,
        "unscorable": unscorable + [{**r, "row": None} for r in unrecorded],
        "log_problems": problems,
        "from_logs": bool(log_files(run_path)),
    }


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


def _add_process(records: list[dict[str, Any]]) -> None:
    """Fill each record's process columns from its episode."""
    from findbench.interpret.process import episode_process

    for rec in records:
        values = episode_process(rec["episode"], rec["row"])
        if values["probed_corruption"] is not None:
            values["probed_corruption"] = int(values["probed_corruption"])
        rec.update(values)


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

    data, judge, judge_mode, judge_model, judge_cache, method = (
        cfg.data,
        cfg.judge,
        cfg.judge_mode,
        cfg.judge_model,
        cfg.judge_cache,
        cfg.method,
    )
    run_path, out_path = Path(cfg.run_dir), Path(cfg.out)
    _check_out(out_path, run_path)
    run = read_scored_run(run_path, data=data, method=method, exclude=[out_path])
    layout, records, interpreter = run["layout"], run["records"], run["interpreter"]
    damaged = [r for r in records + run["unscorable"] if r["damage"]]
    for rec in damaged:
        logger.warning("damaged episode %s (%s): %s", rec["function_id"], rec["method"], rec["damage"])
    if not records:
        why = (
            f"no readable log records an episode ({run['log_problems'][0]})"
            if run["log_problems"]
            else "no episode carries a readable row"
        )
        raise ValueError(f"run_dir: nothing to score in {run_path}: {why}")

    lm, mode, identity = None, "logprob", None
    if any(r["category"] != "numeric" for r in records):
        from findbench.judge import judge_mode_of, load_judge
        from findbench.models import judge_identity

        mode = judge_mode or judge_mode_of(judge, judge_model=judge_model)
        lm = load_judge(
            judge, judge_model=judge_model, cache=judge_cache
        )  # before the sandbox runs: a missing judge fails fast
        identity = judge_identity(judge, judge_model=judge_model, mode=mode)
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

    source = f"episodes from its {LOG_DIR}/" if run["from_logs"] else f"{layout} layout"
    notes = [f"Run: `{run_path}` ({source}); truth: {run['truth']}."]
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
    no_floor = [r for r in records if r.get("floor_missing")]
    if no_floor:
        notes.append(
            f"Floors missing: {len(no_floor)} episode(s) have a floor that could not be computed (its columns are "
            "empty; the episode is scored): "
            + "; ".join(f"{r['function_id']} ({r['method']}): {r['floor_missing']}" for r in no_floor[:5])
            + (" …" if len(no_floor) > 5 else "")
            + "; see the floor_missing column of per_function.csv."
        )
    if identity is not None:
        notes.append(f"Judge: {identity.describe()}.")
    scores = Scores(cells, identity)
    table = render_table(interpreter, scores, counts=counts, notes=notes)
    from findbench.interpret.process import aggregate_process, render_process

    _add_process(records)
    process = aggregate_process(records)
    section = render_process(process)
    if section:
        table = table.rstrip("\n") + "\n\n" + section
    with atomic_dir(out_path) as tmp:
        (tmp / SCORES_FILE).write_text(scores.dumps(), encoding="utf-8")
        (tmp / "per_function.csv").write_text(_per_function_csv(records), encoding="utf-8")
        (tmp / "unit_tests.csv").write_text(_unit_tests_csv(records), encoding="utf-8")
        (tmp / "process.json").write_text(json.dumps(process, indent=2, allow_nan=False) + "\n", encoding="utf-8")
        (tmp / "table.md").write_text(table, encoding="utf-8")
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
