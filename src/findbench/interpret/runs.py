"""Read a folder of interpretations as ``findbench evaluate`` and ``findbench report`` score it.

Two layouts:

- a ``findbench interpret`` run, whose record is its Inspect logs (``<run>/logs/*.eval``, read by
  :mod:`findbench.interpret.logs`; each episode carries the row interpreted). Its exported
  ``<category>/<method>/fNNNNN/`` folders are for FIND's tools and are not read; one that no readable
  log records is named and not scored;
- FIND's results layout, the answer's parts only: ``<dir>/<category>/fNNNNN/{description.txt,
  domain.txt, code.py}`` (the episodes of ``--method``, default ``aia``), or with a method level,
  ``<dir>/<category>/<method>/fNNNNN/`` (a run folder without its logs). Its episodes carry no row.

Either way the truth comes from the data (:mod:`findbench.interpret.truth`), never from the folder
being scored.

A run folder is untrusted: only regular files are read (no symlinks, devices or FIFOs; symlinked
folders are skipped), each part at most :data:`_PART_MAX_BYTES`, each log within the caps of
:mod:`findbench.interpret.logs`. A missing part is scored as a failure where its metric applies; a
part or episode record that cannot be read marks its episode damaged (``damage`` in
``per_function.csv``, named in ``table.md``), scored as if the part were missing, and the other
episodes are scored as usual; a log that cannot be read, or that is not of the run (another
interpreter, model, task arguments or more than one epoch), is named in ``table.md`` and not scored."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from findbench._io import read_untrusted_json, read_untrusted_text
from findbench.interpret.logs import LOG_DIR, log_files, read_run_logs
from findbench.interpret.protocol import METHODS
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
_EPISODE = re.compile(r"^f\d{5}$")
_RUN_INFO = "run.json"


def read_run_info(run_dir: str | os.PathLike) -> dict[str, Any]:
    """``<run_dir>/run.json`` as a dict (``{}`` when the folder has none)."""
    path = Path(run_dir) / _RUN_INFO
    return read_untrusted_json(path, _RUN_INFO_MAX_BYTES, "run.json:") if os.path.lexists(path) else {}


def _subdirs(folder: Path) -> list[Path]:
    """Visible subfolders, sorted (hidden ones are temporary folders of atomic writers); a symlink
    to a folder is not followed (a warning names it)."""
    visible = [p for p in sorted(folder.iterdir()) if not p.name.startswith(".") and p.is_dir()]
    for p in visible:
        if p.is_symlink():
            logger.warning("run_dir: %s is a symbolic link to a folder; skipped (run folders are read without "
                           "links)", p)
    return [p for p in visible if not p.is_symlink()]


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
            **dict.fromkeys(PARTS, ""),  # a missing part stays ""
        }
        for part in (p for p in PARTS if os.path.lexists(sub / _PART_FILES[p])):
            try:
                record[part] = read_untrusted_text(
                    sub / _PART_FILES[part], _PART_MAX_BYTES[part], f"{part} of {category}/{sub.name} ({method}):"
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
    for folder in _subdirs(run_dir):  # its kind: "run" (method folders), "find" (episode folders) or None
        names = [] if folder.resolve() in skip else [p.name for p in _subdirs(folder)]
        kind = "run" if any(n in METHODS for n in names) else "find" if any(map(_EPISODE.match, names)) else None
        if kind is not None and folder.name not in CONFIGS:  # holds episodes: a category this benchmark lacks
            raise ValueError(
                f"category: unknown category folder {folder.name!r} in {run_dir}; categories are {CONFIGS}"
            )
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
    records, problems = _from_logs(run_dir, method, records) if has_logs else (records, [])
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
    logs = read_run_logs(run_dir, read_run_info(run_dir))
    records = []
    for (m, function_id), found in logs.episodes.items():
        if method is not None and m != method:
            continue
        rec: dict[str, Any] = {
            "function_id": function_id,
            "category": function_id.split("/", 1)[0],
            "method": m,
            "damage": found.damage,
            "episode": found.record,
            "source_log": f"{LOG_DIR}/{Path(found.log).name}",
            "interpreter": (logs.identity or {}).get("interpreter"),
            **dict.fromkeys(PARTS, ""),
        }
        answer = (found.record or {}).get("answer") or {}
        for part in PARTS:
            value = answer.get(part) or ""  # text or None: the log's record is validated (EpisodeState)
            if len(value.encode("utf-8", errors="replace")) > _PART_MAX_BYTES[part]:
                _add_damage(rec, f"{part} of {function_id} ({m}) in {found.log} is over the "
                                 f"{_PART_MAX_BYTES[part]:,}-byte cap")
            else:
                rec[part] = value
        records.append(rec)
    held = {(r["method"], r["function_id"]) for r in records}
    records += [
        {
            **rec,
            **dict.fromkeys(PARTS, ""),
            "episode": None,
            "unrecorded": True,
            "damage": f"no readable log in {run_dir / LOG_DIR} records this episode; its exported folder is not the "
            "record and is not scored",
        }
        for rec in exported
        if (rec["method"], rec["function_id"]) not in held
    ]
    records.sort(key=lambda r: (CONFIGS.index(r["category"]), METHODS.index(r["method"]), r["function_id"]))
    return records, logs.problems


def load_interpretations(run_dir: str | os.PathLike, method: str | None = None) -> list[dict[str, Any]]:
    """One record per episode of ``run_dir`` (either layout), in category, method, function order:
    ``{"function_id", "category", "method", "description", "domain", "code", "damage"}`` (``""`` for a
    missing or unreadable part; ``damage``: why a part could not be read, else None). A run with logs
    is read from them: its records also carry ``"episode"``, and an exported folder no log records
    carries ``"unrecorded"``. ``method``: the method of a FIND-layout folder's episodes (default
    ``aia``); for a run, keep only that method's episodes."""
    return _scan(Path(run_dir), method)[1]


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
    ``"episode"`` (the log's record, :func:`~findbench.interpret.logs.sample_episode`; None in
    FIND's layout or when unreadable), ``"damage"`` (why a damaged one is unreadable) and ``"row"``, the truth it is
    scored against (:func:`findbench.interpret.truth.attach_truth`: the data's row, checked against
    the carried one; on an unverifiable run the carried row)."""
    from findbench.interpret.truth import attach_truth

    run_path = Path(run_dir)
    layout, records, problems = _scan(run_path, method, exclude)
    info = read_run_info(run_path)
    unrecorded = [r for r in records if r.get("unrecorded")]
    records = [{"episode": None, **r} for r in records if not r.get("unrecorded")]  # FIND's layout: the parts only
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
        "seed": info.get("seed") or 0,
        "data": data if data is not None else info.get("data"),
        "verified": verified,
        "truth": truth,
        "records": records,
        "unscorable": unscorable + [{**r, "row": None} for r in unrecorded],
        "log_problems": problems,
        "from_logs": bool(log_files(run_path)),
    }
