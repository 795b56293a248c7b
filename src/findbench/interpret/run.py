"""Run an interpreter over FIND functions on Inspect and export the run folder (``findbench interpret``).

Layout of ``out``::

    run.json                                  interpreter, protocol, rounds, token limits, seed, data, version
    lm-cache.sqlite                           findbench LM interpreters: the request cache
    logs/                                     Inspect's ``.eval`` logs (``inspect view``)
    <category>/<method>/fNNNNN/
        description.txt  domain.txt  code.py  the answer's parts ("" where not given), FIND's layout

The logs are the record: the run is one ``inspect_ai.eval_set`` over ``logs/`` (no retries; one task
per method and set of episodes, each set that of the log holding them), so a failed or killed run,
rerun with the same ``out``, resumes its unfinished log reusing the samples already done (a finished
log runs nothing), and a lost episode folder is exported again from its log. Episode folders are an
export of the logs for FIND's tools, each written once and renamed into place; a rerun's ``run.json``
settings that change answers must agree (else ValueError naming ``out``)."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import sys
from collections.abc import Iterable, Mapping, Set
from pathlib import Path
from typing import Any

from findbench._io import atomic_dir, atomic_write_json
from findbench._version import __version__
from findbench.constants import Interrupted, UsageError
from findbench.interpret.config import DEFAULT_API_MAX_TOKENS, InterpretConfig
from findbench.interpret.logs import LOG_DIR
from findbench.interpret.protocol import METHODS
from findbench.schema import CATEGORIES, parse_function_id

logger = logging.getLogger(__name__)

RUN_INFO = "run.json"
LM_CACHE = "lm-cache.sqlite"
#: run.json fields a resumed run must share with the folder's.
_SETTINGS = ("interpreter", "model", "protocol", "rounds", "seed", "data", "source", "max_tokens", "episode_tokens",
             "structured_outputs", "observed_calls")


def episode_dir(out: str | os.PathLike, function_id: str, method: str) -> Path:
    """``<out>/<category>/<method>/fNNNNN``."""
    category, _ = parse_function_id(function_id)
    return Path(out) / category / method / function_id.split("/", 1)[1]


def write_episode(out: str | os.PathLike, function_id: str, method: str, answer: Mapping[str, Any] | None) -> Path:
    """Write the parts of ``answer`` (an episode record's, None for no answer) to the episode's folder
    of the run ``out`` in FIND's layout (replaced at once); return the folder."""
    folder = episode_dir(out, function_id, method)
    with atomic_dir(folder) as tmp:
        for part, name in (("description", "description.txt"), ("domain", "domain.txt"), ("code", "code.py")):
            text = (answer or {}).get(part) or ""
            (tmp / name).write_text(text + ("\n" if text else ""), encoding="utf-8")
    return folder


def _run_info(out: Path, info: dict[str, Any]) -> dict[str, Any] | None:
    """The ``<out>/run.json`` to write for ``info`` (None: the one there stands), checked against the
    one there (resuming): UsageError when a setting that changes answers differs; ``methods`` and
    ``configs`` are merged."""
    path = out / RUN_INFO
    if not path.is_file():
        return info
    old = json.loads(path.read_text(encoding="utf-8"))
    diff = [k for k in _SETTINGS if old.get(k) != info.get(k)]
    if diff:
        what = ", ".join(f"{k}={old.get(k)!r} (now {info.get(k)!r})" for k in diff)
        raise UsageError(f"out: {out} holds a run with other settings: {what}; give a new folder to start another run")
    if old.get("findbench_version") != info["findbench_version"]:
        logger.warning(
            "resuming a run of findbench %s with findbench %s", old.get("findbench_version"), info["findbench_version"]
        )
    merged = {**info, **old}
    for key in ("methods", "configs"):
        merged[key] = list(dict.fromkeys(list(old.get(key) or []) + list(info[key])))
    return None if merged == old else merged


def _samples_version(samples: Iterable[Any]) -> str:
    """The task version of a set of samples (a hash of their ids): ``eval_set`` pairs a task with
    its log by name, model, plan and version, so another set of missing episodes is another task."""
    return hashlib.sha256("\n".join(sorted(str(s.id) for s in samples)).encode()).hexdigest()[:12]


def _task_samples(log_dir: Path, method: str, samples: list[Any], missing: list[Any]) -> list[list[Any]]:
    """The sample sets of the tasks that run a method's ``missing`` episodes (of its ``samples``):
    that of each log of the method in ``log_dir`` (newest first) holding some of them, so
    ``eval_set`` resumes an unfinished one reusing its samples done (a finished one: nothing runs,
    its episodes are exported again), and one of the rest."""
    from findbench.interpret.logs import read_log

    ids = {str(s.id) for s in samples}
    left = {str(s.id) for s in missing}
    groups = []
    for path in sorted(log_dir.glob("*.eval"), reverse=True):
        try:
            header = read_log(path)  # within the caps of findbench.interpret.logs, as evaluate reads it
        except ValueError as exc:  # a damaged zip, a file that is no log, a member past its size
            raise ValueError(f"out: {exc}; move it out of {log_dir} to resume without it") from None
        held = {str(i) for i in header.eval.dataset.sample_ids or []}
        if header.eval.task == f"find_interpret_{method}" and held <= ids and held & left:
            groups.append([s for s in samples if str(s.id) in held])
            left -= held
    return groups + ([[s for s in missing if str(s.id) in left]] if left else [])


#: The run that logs a line per finished episode (:class:`_EpisodeLines`): ``{"done", "total"}``.
_LINES: dict[str, int] = {}


@functools.cache
def _episode_lines() -> Any:
    """Inspect's hook (registered once) that logs ``episode 3/12 done: strings/f00002 (aia)`` while
    :data:`_LINES` is set: a run without a terminal shows its progress."""
    from inspect_ai.hooks import Hooks, SampleEnd, hooks

    @hooks(name="findbench_episode_lines", description="findbench interpret: a line per finished episode")
    class EpisodeLines(Hooks):
        def enabled(self) -> bool:
            return bool(_LINES)

        async def on_sample_end(self, data: SampleEnd) -> None:
            _LINES["done"] += 1
            sample = data.sample
            error = f", error: {sample.error.message.splitlines()[0][:200]}" if sample.error else ""
            logger.info("episode %d/%d done: %s (%s)%s", _LINES["done"], _LINES["total"], sample.id,
                        (sample.metadata or {}).get("method", "?"), error)

    return EpisodeLines


def _left(log_dir: Path, pending: Mapping[str, list[Any]]) -> int:
    """How many of the ``pending`` episodes (method -> samples) no log in ``log_dir`` holds
    finished without error: what a rerun runs."""
    from findbench.interpret.logs import read_log

    left = {(m, str(s.id)) for m, ss in pending.items() for s in ss}
    for path in log_dir.glob("*.eval"):
        try:
            log = read_log(path)
        except ValueError:  # a log cut short by the interrupt holds nothing finished
            continue
        method = log.eval.task.removeprefix("find_interpret_")
        left -= {(method, str(s.id)) for s in log.samples or [] if s.error is None}
    return len(left)


def export_episodes(out: str | os.PathLike, log: Any, missing: Set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Export the readable episodes of ``log`` (an ``EvalLog``, its samples read from ``log.location``
    when it has none, or a log path) that ``missing`` names (``(method, function_id)``) to the run
    folder ``out`` (a folder already there is kept); return the names the log holds."""
    from inspect_ai.log import read_eval_log

    from findbench.interpret.logs import log_episodes, read_log

    if isinstance(log, (str, os.PathLike)):
        log = read_log(log)
    elif not log.samples:  # a log eval_set just wrote, by its location (a URI)
        log = read_eval_log(log.location)
    found = set()
    for episode in log_episodes(log):
        key = (episode.method, episode.function_id)
        if episode.record is None or key not in missing or key in found:
            continue
        if not episode_dir(out, episode.function_id, episode.method).is_dir():
            write_episode(out, episode.function_id, episode.method, episode.record["answer"])
        found.add(key)
    return found


def run_interpretations(
    cfg: InterpretConfig | Any = None,
    rows: Any = None,
    /,
    *,
    progress: bool = True,
    model_args: Mapping[str, Any] | None = None,
    display: str | None = None,
    **settings: Any,
) -> Path:
    """Interpret FIND functions with ``inspect_ai.eval`` and export the run folder ``cfg.out`` (returned).

    Args:
        cfg: the settings (:class:`~findbench.interpret.config.InterpretConfig`, ``findbench
            interpret``'s flags); ``cfg.interpreter`` may also be an LM object.
        rows: in-memory rows to interpret instead of ``cfg.data``'s (or the procedural rows of
            ``cfg.seed``); such a run is marked unverified.
        progress, display: Inspect's progress display (``display`` wins).
        model_args: Inspect model args (``cache=None`` turns a findbench LM's request cache off).

    The keyword form ``run_interpretations(rows_or_data, interpreter, **settings)`` (``rows_or_data``:
    None, a ``findbench build`` folder or rows; ``methods=`` for ``method``) builds the same config."""
    if not isinstance(cfg, InterpretConfig):
        cfg, rows = _config_from_keywords(cfg, rows, settings)
    elif settings:
        raise TypeError(f"run_interpretations(cfg) takes no settings beside the config, got {sorted(settings)}")
    if rows is not None:
        if isinstance(rows, (Mapping, str, os.PathLike)) or not isinstance(rows, Iterable):
            raise TypeError(f"rows must be an iterable of rows, got {type(rows).__name__}")
        rows = list(rows)
        if not all(isinstance(r, Mapping) for r in rows):
            raise TypeError("rows must be an iterable of rows (mappings)")
        data, source = None, "rows"
    elif cfg.data is not None:  # a folder (InterpretConfig checked it)
        data, source = str(Path(cfg.data).resolve()), "data"
    else:
        data, source = None, "procedural"
    from inspect_ai import eval_set, task_with
    from inspect_ai.model import get_model

    from findbench.interpret.inspect_tasks import (
        default_configs,
        find_samples,
        inspect_model_name,
        interpret_task,
        structured_outputs_applied,
    )

    interpreter, reference, max_tokens = cfg.interpreter, cfg.reference, cfg.max_tokens
    name = (
        interpreter
        if isinstance(interpreter, str)
        else getattr(interpreter, "name", None) or type(interpreter).__name__
    )
    rows_or_data = rows if source == "rows" else data
    configs = cfg.configs if cfg.configs is not None else default_configs(rows_or_data, cfg.method, cfg.functions)
    samples = {
        m: find_samples(
            configs,
            m,
            limit=cfg.limit,
            sample=cfg.sample,
            functions=cfg.functions,
            data=rows_or_data,
            seed=cfg.seed,
            interpreter=reference,
            observed_calls=cfg.observed_calls,
        )
        for m in cfg.method
    }

    out = Path(cfg.out)
    model_name = inspect_model_name(name)
    findbench_model = model_name.startswith("findbench/")
    if cfg.protocol == "tools" and findbench_model:
        raise UsageError(
            f"--protocol tools: {model_name} is one of findbench's own models, which speak FIND's text protocol "
            "only; give an Inspect model whose provider supports tool calls (e.g. openai-api/<service>/<model>, "
            "vllm/<model>), or use --protocol text"
        )
    if cfg.model is not None and not findbench_model:
        raise UsageError(
            f"--model: the served model name applies to findbench server URLs; for {model_name!r} name the model "
            "in the interpreter (e.g. openai-api/<service>/<model>)"
        )
    if max_tokens is None and not reference and not findbench_model:
        max_tokens = DEFAULT_API_MAX_TOKENS
    info = {
        "interpreter": name,
        "model": cfg.model,
        "protocol": cfg.protocol,
        "rounds": cfg.rounds,
        "seed": cfg.seed,
        "data": data,
        "source": source,
        "max_tokens": max_tokens,
        "episode_tokens": cfg.episode_tokens,
        "methods": cfg.method,
        "configs": configs,
        "structured_outputs": cfg.structured_outputs,
        "inspect_model": model_name,
        "observed_calls": cfg.observed_calls if reference == "observed" else None,
        "findbench_version": __version__,
    }
    out.mkdir(parents=True, exist_ok=True)
    record = _run_info(out.resolve(), info)
    pending = samples  # eval_set resumes from the logs: a finished log runs nothing
    total, to_run = sum(map(len, samples.values())), _left(out / LOG_DIR, pending)
    logger.info("%d episodes, %d already done, %d to run -> %s", total, total - to_run, to_run, out)
    if not to_run:  # every episode is in a log, finished: complete the export, start no model
        missing = {(m, str(s.id)) for m, ss in pending.items() for s in ss}
        for path in sorted((out / LOG_DIR).glob("*.eval"), reverse=True):  # the newest log wins
            missing -= export_episodes(out, path, missing)
        if not missing:  # else eval_set below names the episodes no log records
            if record is not None:
                atomic_write_json(out / RUN_INFO, record)
            return out

    args = dict(model_args or {})
    if findbench_model:
        args = {
            "cache": str(out.resolve() / LM_CACHE),
            **({"model": cfg.model} if cfg.model is not None else {}),
            **({"lm": interpreter} if not isinstance(interpreter, str) else {}),
            **args,
        }
    inspect_model = get_model(model_name, memoize=False, **args) if findbench_model else model_name
    if (
        findbench_model and "lm" in args
    ):  # an LM instance: no part of the task's identity (its repr changes per process)
        inspect_model.model_args.pop("lm")
    tasks = [
        task_with(
            interpret_task(
                ss,
                rounds=cfg.rounds,
                max_tokens=max_tokens,
                seed=cfg.seed,
                protocol=cfg.protocol,
                episode_tokens=cfg.episode_tokens,
                structured_outputs=cfg.structured_outputs,
                interpreter=name,
            ),
            name=f"find_interpret_{m}",
            version=_samples_version(ss),
        )
        for m, missing in pending.items()
        if missing
        for ss in _task_samples(out / LOG_DIR, m, samples[m], missing)
    ]
    # Inspect sets the root logger's level to its own: findbench's records keep the caller's
    level, own = logging.getLogger().level, logging.getLogger("findbench").level
    logging.getLogger("findbench").setLevel(level)
    if not (sys.stdout.isatty() and sys.stderr.isatty()):  # no live display: a line per finished episode
        _episode_lines()
        _LINES.update(done=0, total=to_run)
    try:
        if not reference:
            current = record or json.loads((out / RUN_INFO).read_text(encoding="utf-8"))
            applied = structured_outputs_applied(inspect_model, cfg.structured_outputs)
            record = (
                None
                if current.get("structured_outputs_applied") == applied and record is None
                else {**current, "structured_outputs_applied": applied}
            )
        if record is not None:
            atomic_write_json(out / RUN_INFO, record)
        # no retries: a failed task stops the run (rerun with the same out to resume it)
        _, logs = eval_set(
            tasks,
            log_dir=str(out / LOG_DIR),
            retry_attempts=0,
            retry_immediate=False,
            log_dir_allow_dirty=True,
            model=inspect_model,
            model_args={} if findbench_model else args,
            max_connections=cfg.max_connections,
            display=display or (None if progress else "none"),
            log_format="eval",
        )
    except KeyboardInterrupt:
        raise Interrupted(f"{_left(out / LOG_DIR, pending)} episodes left") from None
    finally:
        _LINES.clear()
        logging.getLogger().setLevel(level)
        logging.getLogger("findbench").setLevel(own)
        if findbench_model:
            inspect_model.api.close()
    unfinished = []
    missing = {(m, str(s.id)) for m, ss in pending.items() for s in ss}
    for log in logs:
        missing -= export_episodes(out, log, missing)
        if log.status != "success":
            unfinished.append(f"{log.location} ({log.status}{': ' + log.error.message if log.error else ''})")
    if unfinished:
        raise RuntimeError(
            f"inspect eval did not finish: {'; '.join(unfinished)}; rerun with the same --out to run the rest"
        )
    if missing:  # finished logs without an episode record for them (logs of another findbench)
        names = ", ".join(f"{f} ({m})" for m, f in sorted(missing)[:5]) + (" ..." if len(missing) > 5 else "")
        raise RuntimeError(
            f"out: the logs in {out / LOG_DIR} hold no episode record for {len(missing)} episode(s): {names}; "
            "move those logs out of it to run the episodes again"
        )
    return out


def _config_from_keywords(rows_or_data: Any, interpreter: Any, settings: dict[str, Any]) -> tuple[InterpretConfig, Any]:
    """The config and rows of the keyword form ``run_interpretations(rows_or_data, interpreter, **settings)``."""
    if isinstance(rows_or_data, Mapping) or not (
        rows_or_data is None or isinstance(rows_or_data, (str, os.PathLike, Iterable))
    ):
        raise TypeError(
            f"rows_or_data must be a data folder, None or an iterable of rows, got {type(rows_or_data).__name__}"
        )
    if "methods" in settings:
        settings["method"] = settings.pop("methods")
    if interpreter is not None:
        settings["interpreter"] = interpreter
    if "out" in settings:
        settings["out"] = os.fspath(settings["out"])
    if isinstance(rows_or_data, (str, os.PathLike)):
        return InterpretConfig(data=os.fspath(rows_or_data), **settings), None
    return InterpretConfig(**settings), rows_or_data


def summarize_run(out: str | os.PathLike) -> list[dict[str, Any]]:
    """One summary per (category, method) of the readable episodes of the run ``out``'s logs
    (:func:`~findbench.interpret.logs.read_run_logs`): ``{"category", "method", "episodes", "answered",
    "mean_rounds", "calls", "malformed_commands", "dropped_commands", "truncated_messages"}`` (the
    last two: over the per-turn caps)."""
    from findbench.interpret.logs import read_run_logs
    from findbench.interpret.runs import read_run_info

    found = read_run_logs(out, read_run_info(out)).episodes
    summary = []
    for category in CATEGORIES:
        for method in METHODS:
            records = [e.record for (m, f), e in sorted(found.items())
                       if m == method and f.startswith(f"{category}/") and e.record is not None]
            if not records:
                continue
            summary.append(
                {
                    "category": category,
                    "method": method,
                    "episodes": len(records),
                    "answered": sum(r["answer"] is not None for r in records),
                    "mean_rounds": sum(r["rounds"] for r in records) / len(records),
                    "calls": sum(len(r["calls"]) for r in records),
                    **{k: sum(r[k] for r in records)
                       for k in ("malformed_commands", "dropped_commands", "truncated_messages")},
                }
            )
    return summary
