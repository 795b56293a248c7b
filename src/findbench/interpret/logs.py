"""The episodes of a run's Inspect logs, the run's one record (``findbench evaluate`` and ``report``).

A run's ``logs/`` is read as untrusted input, like the rest of the run folder: each ``.eval`` is a
regular file (no symlink, device or FIFO) of at most :data:`LOG_MAX_BYTES`, a zip whose members
declare at most :data:`LOG_MAX_UNPACKED_BYTES` in all (``zipfile`` never inflates a member past its
declared size, so the check bounds the memory a crafted archive can take). A log that fails any of
this, or that Inspect cannot parse, is named in :attr:`RunLogs.problems` and the other logs are read.

An episode is a sample that finished without error and holds findbench's record in its store
(``findbench.interpret.agent.STORE_KEY``); a record that is not an episode of that sample and
of the log's task (``find_interpret_<method>``) is kept as damaged. Where logs hold the same episode
(a run resumed into a new log), the log whose name sorts last wins: Inspect names logs by their
start time."""

from __future__ import annotations

import io
import logging
import os
import stat
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from findbench._io import read_untrusted_bytes
from findbench.interpret.episode import EPISODE_KEYS, Episode
from findbench.interpret.protocol import METHODS
from findbench.schema import parse_function_id

logger = logging.getLogger(__name__)

#: The folder of a run that holds its Inspect logs.
LOG_DIR = "logs"
#: The largest ``.eval`` read (a 1,000-episode run of 20 rounds is tens of MiB).
LOG_MAX_BYTES = 512 * 2**20
#: The most bytes the members of one ``.eval`` may declare unpacked.
LOG_MAX_UNPACKED_BYTES = 4 * 2**30
#: The most members one ``.eval`` may hold.
LOG_MAX_MEMBERS = 200_000
_TASK_PREFIX = "find_interpret_"


@dataclass
class LogEpisode:
    """One episode as a log records it: ``record`` (the store's dict, None when unreadable),
    ``damage`` (why it is not a readable episode of its sample, else None) and ``log`` (the file)."""

    function_id: str
    method: str
    record: dict[str, Any] | None
    damage: str | None
    log: str


@dataclass
class RunLogs:
    """The episodes of a run's logs by ``(method, function_id)``, the logs read and the problems
    (one line per log that could not be read, naming it)."""

    episodes: dict[tuple[str, str], LogEpisode] = field(default_factory=dict)
    logs: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def log_files(run_dir: str | os.PathLike) -> list[Path]:
    """The ``.eval`` files of ``<run_dir>/logs`` in name order: regular files only (a symlink or
    other entry is skipped with a warning naming it); ``[]`` without the folder."""
    folder = Path(run_dir) / LOG_DIR
    if folder.is_symlink() or not folder.is_dir():
        if folder.is_symlink():
            logger.warning("run_dir: %s is a symbolic link; its logs are not read", folder)
        return []
    found = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if not entry.name.endswith(".eval") or entry.name.startswith("."):
                continue
            if not stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
                logger.warning("run_dir: log %s is not a regular file; skipped", Path(entry.path))
                continue
            found.append(Path(entry.path))
    return sorted(found, key=lambda p: p.name)


def read_log(path: str | os.PathLike) -> Any:
    """The ``EvalLog`` of an untrusted ``.eval`` file (see the module's caps). ValueError, one line
    naming the file, when it is refused or cannot be parsed."""
    from inspect_ai.log import read_eval_log

    data = read_untrusted_bytes(path, LOG_MAX_BYTES, "log")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ValueError(f"log {path} is not an Inspect .eval archive ({exc})") from None
    if len(members) > LOG_MAX_MEMBERS:
        raise ValueError(f"log {path} holds {len(members):,} members, over the cap of {LOG_MAX_MEMBERS:,}")
    unpacked = sum(m.file_size for m in members)
    if unpacked > LOG_MAX_UNPACKED_BYTES:
        raise ValueError(f"log {path} unpacks to {unpacked:,} bytes, over the {LOG_MAX_UNPACKED_BYTES:,}-byte cap")
    try:
        return read_eval_log(io.BytesIO(data), format="eval")
    except Exception as exc:  # noqa: BLE001 - anything Inspect raises on a crafted archive is a damaged log
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ValueError(f"log {path} cannot be read by Inspect ({type(exc).__name__}: {first[:200]})") from None


def log_episodes(log: Any, where: str = "") -> list[LogEpisode]:
    """The episodes of an ``EvalLog``'s samples that finished without error, checked against their
    sample and task (a mismatch, or a record :class:`Episode` cannot hold, is kept as damaged)."""
    from findbench.interpret.agent import STORE_KEY  # imports inspect_ai: only once there is a log

    where = where or str(getattr(log, "location", "") or "log")
    task = str(getattr(getattr(log, "eval", None), "task", "") or "")
    task_method = task[len(_TASK_PREFIX):] if task.startswith(_TASK_PREFIX) else None
    found = []
    for sample in log.samples or []:
        record = (sample.store or {}).get(STORE_KEY)
        if sample.error is not None or record is None:
            continue
        function_id = str(sample.id)
        try:
            category, _ = parse_function_id(function_id)
        except ValueError:
            logger.warning("%s: sample id %r is no FIND function id; skipped", where, function_id[:80])
            continue
        method = record.get("method") if isinstance(record, Mapping) else None
        damage = _damage(record, function_id, category, task_method)
        if damage is None and method not in METHODS:
            damage = f"method {str(method)[:80]!r} is none of {METHODS}"
        if not isinstance(method, str) or method not in METHODS:
            method = task_method if task_method in METHODS else None
        if method is None:
            logger.warning("%s: sample %s has no method findbench knows; skipped", where, function_id)
            continue
        found.append(LogEpisode(function_id, method, None if damage else dict(record),
                                f"episode {function_id} ({method}) in {where}: {damage}" if damage else None, where))
    return found


def _damage(record: Any, function_id: str, category: str, task_method: str | None) -> str | None:
    """Why ``record`` is not a readable episode of the sample ``function_id`` (None when it is)."""
    if not isinstance(record, Mapping):
        return f"the record is a {type(record).__name__}, not an object"
    missing = [k for k in EPISODE_KEYS if k not in record]
    if missing:
        return f"the record lacks {missing}"
    if record["function_id"] != function_id:
        return f"the record is that of another episode ({str(record['function_id'])[:80]!r})"
    if record["category"] != category:
        return f"the record's category {str(record['category'])[:80]!r} is not that of {function_id}"
    if task_method is not None and record["method"] != task_method:
        return f"the record is of method {str(record['method'])[:80]!r}, its task of {task_method!r}"
    try:
        Episode.from_dict(record)
    except (TypeError, ValueError) as exc:
        return f"the record is no episode ({type(exc).__name__}: {str(exc)[:200]})"
    return None


def read_run_logs(run_dir: str | os.PathLike) -> RunLogs:
    """Every episode of ``<run_dir>/logs`` (the module's rules: untrusted files, the last log by
    name wins)."""
    result = RunLogs()
    for path in log_files(run_dir):
        try:
            log = read_log(path)
        except ValueError as exc:
            result.problems.append(str(exc))
            continue
        result.logs.append(str(path))
        for episode in log_episodes(log, str(path)):
            result.episodes[(episode.method, episode.function_id)] = episode
    return result


def episodes_from_log(log: Any) -> list[Episode]:
    """The readable episodes of a log (an ``EvalLog``, or the path of one, read as untrusted)."""
    if isinstance(log, (str, os.PathLike)):
        log = read_log(log)
    return [Episode.from_dict(e.record) for e in log_episodes(log) if e.record is not None]
