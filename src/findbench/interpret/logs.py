"""The episodes of a run's Inspect logs, the run's one record (``findbench evaluate`` and ``report``).

A run's ``logs/`` is read as untrusted input, like the rest of the run folder: each ``.eval`` is a
regular file (no symlink, device or FIFO) of at most :data:`LOG_MAX_BYTES`, a zip of at most
:data:`LOG_MAX_MEMBERS` members whose declared sizes add up to at most :data:`LOG_MAX_RATIO` times
the file's size and :data:`LOG_MAX_UNPACKED_BYTES`. findbench inflates each member itself, stored,
deflate or zstd, never past its declared size (zstd frames stream through a bounded reader, their
window at most :data:`_ZSTD_MAX_WINDOW`), and checks its CRC-32; only then does Inspect parse the
archive, handed the inflated members. A log that fails any of this, or that Inspect cannot parse,
is named in :attr:`RunLogs.problems` and the other logs are read.

The logs of a run must agree (:func:`log_identity`): on the interpreter and agent settings its
``run.json`` records, and on model, interpreter and task arguments with each other; logs of more
than one epoch are refused (findbench scores one answer per function and method). A log that does
not agree is named and its episodes are not scored.

An episode is a sample that finished without error and holds findbench's record in its store
(:class:`~findbench.interpret.episode.EpisodeState`, validated as Inspect's ``store_as`` does); its
transcript and turns are the sample's own messages, its row and method the sample's metadata. A
record that is not an EpisodeState, or metadata that is not of that sample and of the log's task
(``find_interpret_<method>``), is kept as damaged. Where logs hold the same episode
(a run resumed into a new log), the log whose name sorts last wins: Inspect names logs by their
start time."""

from __future__ import annotations

import collections
import functools
import io
import json
import logging
import os
import stat
import struct
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zstandard

from findbench._io import read_untrusted_bytes
from findbench.interpret.protocol import METHODS
from findbench.schema import parse_function_id

logger = logging.getLogger(__name__)

#: The folder of a run that holds its Inspect logs.
LOG_DIR = "logs"
#: The largest ``.eval`` read (a 1,000-episode run of 20 rounds is tens of MiB).
LOG_MAX_BYTES = 512 * 2**20
#: The most bytes the members of one ``.eval`` may declare unpacked in all ...
LOG_MAX_UNPACKED_BYTES = 2 * 2**30
#: ... and at most this many times the file's size (Inspect's logs of findbench runs unpack to about 10).
LOG_MAX_RATIO = 100
#: The largest window a zstd member may ask the decoder for (Inspect writes 2 MiB windows).
_ZSTD_MAX_WINDOW = 2**23
_ZIP_ZSTD = 93
#: A zip member's local header: its signature, then the lengths of its name and extra field.
_LOCAL_HEADER = struct.Struct("<4s22xHH")
#: The most members one ``.eval`` may hold.
LOG_MAX_MEMBERS = 200_000
_TASK_PREFIX = "find_interpret_"
_AGENT = "findbench/find_agent"
#: Task arguments that only select functions or set Inspect's scorers: the logs of a run may differ in them.
_SELECTION_ARGS = ("configs", "method", "limit", "sample", "functions", "judge", "judge_mode", "judge_model",
                   "judge_cache")


@dataclass
class LogEpisode:
    """One episode as a log records it: ``record`` (:func:`sample_episode`, None when unreadable),
    ``damage`` (why it is not a readable episode of its sample, else None) and ``log`` (the file)."""

    function_id: str
    method: str
    record: dict[str, Any] | None
    damage: str | None
    log: str


@dataclass
class RunLogs:
    """The episodes of a run's logs by ``(method, function_id)``, the logs read, the problems
    (one line per log not read, naming it) and the :func:`log_identity` the logs read share."""

    episodes: dict[tuple[str, str], LogEpisode] = field(default_factory=dict)
    logs: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    identity: dict[str, Any] | None = None


def log_files(run_dir: str | os.PathLike) -> list[Path]:
    """The ``.eval`` files of ``<run_dir>/logs`` in name order: regular files only (a symlink or
    other entry is skipped with a warning naming it); ``[]`` without the folder."""
    folder = Path(run_dir) / LOG_DIR
    if folder.is_symlink() or not folder.is_dir():
        if folder.is_symlink():
            logger.warning("run_dir: %s is a symbolic link; its logs are not read", folder)
        return []
    found = []
    # os.listdir raises on a folder it may not read, where Path.glob would quietly find nothing
    for path in (folder / name for name in sorted(os.listdir(folder))
                 if name.endswith(".eval") and not name.startswith(".")):
        if stat.S_ISREG(path.lstat().st_mode):
            found.append(path)
        else:
            logger.warning("run_dir: log %s is not a regular file; skipped", path)
    return found


def read_log(path: str | os.PathLike) -> Any:
    """The ``EvalLog`` of an untrusted ``.eval`` file (see the module's caps). ValueError, one line
    naming the file, when it is refused or cannot be parsed.

    Inspect parses only what findbench inflated first (:func:`_inflate`), handed over as stored members."""
    data = read_untrusted_bytes(path, LOG_MAX_BYTES, "log")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise ValueError(f"log {path} is not an Inspect .eval archive ({exc})") from None
    if len(members) > LOG_MAX_MEMBERS:
        raise ValueError(f"log {path} holds {len(members):,} members, over the cap of {LOG_MAX_MEMBERS:,}")
    if len({m.filename for m in members}) < len(members):
        raise ValueError(f"log {path} names a member twice")
    unpacked, cap = sum(m.file_size for m in members), min(LOG_MAX_UNPACKED_BYTES, LOG_MAX_RATIO * len(data))
    if unpacked > cap:
        raise ValueError(f"log {path} unpacks to {unpacked:,} bytes, over the {cap:,}-byte cap (at most "
                         f"{LOG_MAX_RATIO} times its size, {LOG_MAX_UNPACKED_BYTES:,} bytes in all)")
    stored = io.BytesIO()
    with zipfile.ZipFile(stored, "w", zipfile.ZIP_STORED) as archive:
        for member in members:  # one inflated member in memory at a time
            archive.writestr(member.filename, _inflate(data, member, f"log {path}: member {member.filename[:80]!r}"))
    from inspect_ai.log import read_eval_log

    stored.seek(0)
    try:
        return read_eval_log(stored, format="eval")
    except Exception as exc:  # noqa: BLE001 - anything Inspect raises on a crafted archive is a damaged log
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ValueError(f"log {path} cannot be read by Inspect ({type(exc).__name__}: {first[:200]})") from None


def _inflate(data: bytes, member: zipfile.ZipInfo, where: str) -> bytes:
    """The bytes of ``member`` of the archive ``data``, inflated here, never past the size the archive
    declares for it (stored, deflate or zstd; the output must be that size and match its CRC-32).
    A zstd frame may declare no content size (Inspect's never do): the stream stops at the
    archive's size all the same; one that declares more is refused before inflating."""
    head = data[member.header_offset:member.header_offset + _LOCAL_HEADER.size]
    if len(head) < _LOCAL_HEADER.size or head[:4] != b"PK\x03\x04":
        raise ValueError(f"{where} has no local header")
    start = member.header_offset + _LOCAL_HEADER.size + sum(_LOCAL_HEADER.unpack(head)[1:])
    raw, size = data[start:start + member.compress_size], member.file_size
    if len(raw) < member.compress_size or member.flag_bits & 1:
        raise ValueError(f"{where} is {'encrypted' if member.flag_bits & 1 else 'cut short'}")
    try:
        if member.compress_type == zipfile.ZIP_STORED:
            out = raw
        elif member.compress_type == zipfile.ZIP_DEFLATED:
            out = zlib.decompressobj(-zlib.MAX_WBITS).decompress(raw, size + 1)
        elif member.compress_type == _ZIP_ZSTD:
            declared = zstandard.get_frame_parameters(raw).content_size
            if declared != zstandard.CONTENTSIZE_UNKNOWN and declared > size:
                raise ValueError(f"{where} is a zstd frame declaring {declared:,} bytes, the archive {size:,}")
            reader = zstandard.ZstdDecompressor(max_window_size=_ZSTD_MAX_WINDOW).stream_reader(
                raw, read_across_frames=True)
            out = bytearray()
            while len(out) <= size and (chunk := reader.read(min(2**20, size + 1 - len(out)))):
                out += chunk
        else:
            raise ValueError(f"{where} is compressed with method {member.compress_type} (stored, deflate or zstd)")
    except (zlib.error, zstandard.ZstdError) as exc:
        raise ValueError(f"{where} cannot be inflated ({exc})") from None
    if len(out) != size:
        raise ValueError(f"{where} inflates {'past' if len(out) > size else 'short of'} its declared {size:,} bytes")
    if zlib.crc32(out) != member.CRC:
        raise ValueError(f"{where} does not match its CRC-32")
    return out


def sample_episode(sample: Any) -> dict[str, Any]:
    """The episode a log's sample records, as plain values: the fields of its store's
    :class:`~findbench.interpret.episode.EpisodeState` (validated; ``answer`` a dict or None), then
    ``"row"`` (its metadata's, None when not an object), ``"messages"`` (its transcript, text only:
    :func:`~findbench.interpret.solver.transcript`) and ``"rounds"`` (its assistant messages).
    ValueError (pydantic's) when the store's record is no EpisodeState."""
    from inspect_ai.util import Store  # imports inspect_ai: only once there is a log

    from findbench.interpret.episode import STORE_PREFIX, EpisodeState
    from findbench.interpret.solver import transcript

    fields = {k: v for k, v in (sample.store or {}).items() if k.startswith(STORE_PREFIX)}
    row = (sample.metadata or {}).get("row")
    return {
        **EpisodeState(store=Store(fields)).model_dump(),
        "row": row if isinstance(row, dict) else None,
        "messages": transcript(sample.messages or []),
        "rounds": sum(m.role == "assistant" for m in sample.messages or []),
    }


def log_episodes(log: Any, where: str = "") -> list[LogEpisode]:
    """The episodes of an ``EvalLog``'s samples that finished without error, checked against their
    sample and task (a record that is no EpisodeState, or metadata of another sample or method, is
    kept as damaged)."""
    from findbench.interpret.episode import STORE_PREFIX

    where = where or str(getattr(log, "location", "") or "log")
    task = str(getattr(getattr(log, "eval", None), "task", "") or "")
    task_method = task[len(_TASK_PREFIX):] if task.startswith(_TASK_PREFIX) else None
    found = []
    for sample in log.samples or []:
        if sample.error is not None or not any(k.startswith(STORE_PREFIX) for k in sample.store or {}):
            continue
        function_id = str(sample.id)
        try:
            category, _ = parse_function_id(function_id)
        except ValueError:
            logger.warning("%s: sample id %r is no FIND function id; skipped", where, function_id[:80])
            continue
        metadata = sample.metadata or {}
        damage = _damage(metadata, function_id, category, task_method)
        # the record's method, else the task's
        if (method := next((m for m in (metadata.get("method"), task_method) if m in METHODS), None)) is None:
            logger.warning("%s: sample %s has no method findbench knows; skipped", where, function_id)
            continue
        record = None
        if damage is None:
            try:
                record = sample_episode(sample)
            except ValueError as exc:
                damage = f"the record is no episode ({' '.join(str(exc).split())[:200]})"
        found.append(LogEpisode(function_id, method, record,
                                f"episode {function_id} ({method}) in {where}: {damage}" if damage else None, where))
    return found


def _damage(metadata: Mapping[str, Any], function_id: str, category: str, task_method: str | None) -> str | None:
    """Why a sample's ``metadata`` is not that of an episode of the sample ``function_id`` (None when it is)."""
    method, row = metadata.get("method"), metadata.get("row")
    if method not in METHODS:
        return f"method {str(method)[:80]!r} is none of {METHODS}"
    if task_method is not None and method != task_method:
        return f"the record is of method {str(method)[:80]!r}, its task of {task_method!r}"
    if row is None:
        return None
    if not isinstance(row, Mapping):
        return f"the row is a {type(row).__name__}, not an object"
    if row.get("function_id") != function_id:
        return f"the row is that of another episode ({str(row.get('function_id'))[:80]!r})"
    if row.get("category") != category:
        return f"the row's category {str(row.get('category'))[:80]!r} is not that of {function_id}"
    return None


def log_identity(log: Any) -> dict[str, Any]:
    """What the logs of one run share: ``model``, ``interpreter`` (as the task's metadata or
    arguments record it, else the model), ``task arguments`` (the agent's settings and the task's
    arguments but those that only select functions or set Inspect's scorers) and ``epochs`` (the
    most of the task's setting and its samples' epochs)."""
    spec = log.eval
    args = dict(spec.task_args or {})
    return {
        "model": spec.model,
        "interpreter": (spec.metadata or {}).get("interpreter") or args.get("interpreter") or spec.model,
        "task arguments": {
            **{k: v for k, v in args.items() if k not in _SELECTION_ARGS},
            "agent": [step.params for step in (log.plan.steps if log.plan else []) if step.solver == _AGENT],
        },
        "epochs": max([spec.config.epochs or 1] + [s.epoch for s in log.samples or []]),
    }


def _disagreement(identity: dict[str, Any], run: dict[str, Any] | None, info: Mapping[str, Any]) -> str | None:
    """Why a log of ``identity`` is not one of the run's (None when it is): ``run`` is the identity
    of the run's logs, ``info`` its run.json (its interpreter and the agent's settings it records)."""
    if identity["epochs"] != 1:
        return f"holds {identity['epochs']} epochs; findbench scores one epoch per episode (run with epochs=1)"
    recorded = {"interpreter": identity["interpreter"],
                **{k: v for params in identity["task arguments"]["agent"] for k, v in params.items()}}
    for key, value in recorded.items():
        if key in info and info[key] != value:
            return f"records {key} {value!r:.80}, the run's (run.json) is {info[key]!r:.80}"
    if differ := [k for k in identity if run is not None and identity[k] != run[k]]:
        mine, theirs = (json.dumps(i[differ[0]], sort_keys=True, default=str)[:120] for i in (identity, run or {}))
        return f"disagrees with the run's other logs on {', '.join(differ)} ({differ[0]} {mine}, the run's {theirs})"
    return None


def read_run_logs(run_dir: str | os.PathLike, info: Mapping[str, Any] | None = None) -> RunLogs:
    """Every episode of ``<run_dir>/logs`` (the module's rules: untrusted files, the last log by
    name wins) from the logs of the run: those of one epoch, recording the interpreter and agent
    settings of ``info`` (the run's run.json) and sharing the :func:`log_identity` most of them
    share (ties: that of the newest). Any other log is named in :attr:`RunLogs.problems` and its
    episodes are not read."""
    info = info or {}
    result, read = RunLogs(), []
    for path in log_files(run_dir):
        try:
            log = read_log(path)
        except ValueError as exc:
            result.problems.append(str(exc))
            continue
        read.append((path, log, log_identity(log)))
    key = functools.partial(json.dumps, sort_keys=True, default=str)
    candidates = [i for _, _, i in read if _disagreement(i, None, info) is None]
    counts = collections.Counter(map(key, candidates))
    result.identity = max(reversed(candidates), key=lambda i: counts[key(i)], default=None)
    for path, log, identity in read:
        if (why := _disagreement(identity, result.identity, info)) is not None:
            result.problems.append(f"log {path} {why}; its episodes are not scored")
            continue
        result.logs.append(str(path))
        result.episodes.update({(e.method, e.function_id): e for e in log_episodes(log, str(path))})
    return result
