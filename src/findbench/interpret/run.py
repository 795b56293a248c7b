"""Run an interpreter over FIND functions on Inspect and export the run folder (``findbench interpret``).

Layout of ``out``::

    run.json                                  the config's fields, as the run resolved them, the Inspect model,
                                              source (data, rows, procedural), version
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
from collections.abc import Iterable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from findbench._io import atomic_dir, atomic_write_json
from findbench._version import __version__
from findbench.constants import Interrupted, UsageError
from findbench.interpret.config import DEFAULT_API_MAX_TOKENS, AgentConfig, InterpretConfig
from findbench.interpret.logs import LOG_DIR, read_log, read_run_logs
from findbench.interpret.protocol import METHODS
from findbench.interpret.runs import read_run_info
from findbench.schema import CONFIGS, parse_function_id

logger = logging.getLogger(__name__)

RUN_INFO = "run.json"
LM_CACHE = "lm-cache.sqlite"
#: run.json fields a resumed run must share with the folder's, beside the agent's (:class:`AgentConfig`).
_RUN_SETTINGS = ("interpreter", "model", "data", "source", "observed_calls")
#: run.json fields merged (as lists) on resuming: the selection of methods and configs grows.
_MERGED = ("method", "configs")


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
    one there (resuming): UsageError when a setting that changes answers differs; ``method`` and
    ``configs`` are merged."""
    path = out / RUN_INFO
    if not path.is_file():
        return info
    old = json.loads(path.read_text(encoding="utf-8"))
    if diff := [k for k in [*(f.name for f in fields(AgentConfig)), *_RUN_SETTINGS] if old.get(k) != info.get(k)]:
        raise UsageError(f"out: {out} holds a run with other settings: "
                         + ", ".join(f"{k}={old.get(k)!r} (now {info.get(k)!r})" for k in diff)
                         + "; give a new folder to start another run")
    if old.get("findbench_version") != info["findbench_version"]:
        logger.warning(
            "resuming a run of findbench %s with findbench %s", old.get("findbench_version"), info["findbench_version"]
        )
    merged = {**info, **old, **{key: list(dict.fromkeys([*(old.get(key) or []), *info[key]])) for key in _MERGED}}
    return None if merged == old else merged


def _logs_held(log_dir: Path, *, strict: bool) -> list[tuple[str, set[str], set[str]]]:
    """``(task, sample ids, ids finished without error)`` of each log in ``log_dir``, newest first, read
    within the caps of :mod:`findbench.interpret.logs` as evaluate reads it. A log that cannot be read
    (a damaged zip, a file that is no log, a member past its size): ValueError naming ``out`` when
    ``strict``, else skipped (a log cut short by an interrupt holds nothing finished)."""
    held = []
    for path in sorted(log_dir.glob("*.eval"), reverse=True):
        try:
            log = read_log(path)
        except ValueError as exc:
            if strict:
                raise ValueError(f"out: {exc}; move it out of {log_dir} to resume without it") from None
            continue
        held.append((log.eval.task, {str(i) for i in log.eval.dataset.sample_ids or []},
                     {str(s.id) for s in log.samples or [] if s.error is None}))
    return held


def _left(held: list[tuple[str, set[str], set[str]]], samples: Mapping[str, list[Any]]) -> int:
    """How many episodes of ``samples`` (method -> samples) no log (:func:`_logs_held`) holds finished
    without error: what a rerun runs."""
    done = {(task.removeprefix("find_interpret_"), i) for task, _, finished in held for i in finished}
    return sum((m, str(s.id)) not in done for m, ss in samples.items() for s in ss)


def _task_samples(held: list[tuple[str, set[str], set[str]]], method: str, samples: list[Any]) -> list[list[Any]]:
    """The sample sets of the tasks that run a method's ``samples``: that of each log of the method
    (:func:`_logs_held`, newest first) holding some of them, so ``eval_set`` resumes an unfinished one
    reusing its samples done (a finished one: nothing runs, its episodes are exported again), and one
    of the rest."""
    ids = {str(s.id) for s in samples}
    left = set(ids)
    groups = []
    for task, in_log, _ in held:
        if task == f"find_interpret_{method}" and in_log <= ids and in_log & left:
            groups.append([s for s in samples if str(s.id) in in_log])
            left -= in_log
    return groups + ([[s for s in samples if str(s.id) in left]] if left else [])


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


def _inspect_model(cfg: InterpretConfig, out: Path, model_name: str, model_args: Mapping[str, Any] | None) -> Any:
    """The eval's model: a findbench model built here (its request cache in ``out``; an LM object
    passed as is) or the name of a provider's, with ``model_args`` Inspect's."""
    from inspect_ai.model import get_model

    if not model_name.startswith("findbench/"):
        return model_name
    lm = cfg.interpreter if not isinstance(cfg.interpreter, str) else None
    args = {
        "cache": str(out.resolve() / LM_CACHE),
        **({"model": cfg.model} if cfg.model is not None else {}),
        **({"lm": lm} if lm is not None else {}),
        **(model_args or {}),
    }
    model = get_model(model_name, memoize=False, **args)
    if lm is not None:  # an LM instance: no part of the task's identity (its repr changes per process)
        model.model_args.pop("lm")
    return model


def _check_model(cfg: InterpretConfig, model_name: str) -> None:
    """The protocol and ``--model`` suit the interpreter's Inspect model (UsageError naming the flag)."""
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


def run_interpretations(
    cfg: InterpretConfig,
    rows: Any = None,
    /,
    *,
    progress: bool = True,
    model_args: Mapping[str, Any] | None = None,
    display: str | None = None,
) -> Path:
    """Interpret FIND functions with ``inspect_ai.eval_set`` over :func:`~findbench.interpret.task.interpret_task`
    and export the run folder ``cfg.out`` (returned).

    Args:
        cfg: the settings (``findbench interpret``'s flags); ``cfg.interpreter`` may also be an LM object.
        rows: in-memory rows to interpret instead of ``cfg.data``'s (or the procedural rows of
            ``cfg.seed``); such a run is marked unverified.
        progress, display: Inspect's progress display (``display`` wins).
        model_args: Inspect model args (``cache=None`` turns a findbench LM's request cache off)."""
    from inspect_ai import eval_set

    from findbench.interpret.task import default_configs, find_samples, interpret_task, interpreter_model
    from findbench.lm.inspect_provider import structured_outputs_applied

    if not isinstance(cfg, InterpretConfig):
        raise TypeError(f"run_interpretations takes an InterpretConfig, got {type(cfg).__name__}")
    if rows is not None:
        if isinstance(rows, (Mapping, str, os.PathLike)) or not isinstance(rows, Iterable):
            raise TypeError(f"rows must be an iterable of rows, got {type(rows).__name__}")
        rows = list(rows)
        if not all(isinstance(r, Mapping) for r in rows):
            raise TypeError("rows must be an iterable of rows (mappings)")
    name = cfg.interpreter if isinstance(cfg.interpreter, str) else (
        getattr(cfg.interpreter, "name", None) or type(cfg.interpreter).__name__)
    out = Path(cfg.out)
    model_name = interpreter_model(name)
    _check_model(cfg, model_name)
    findbench_model = model_name.startswith("findbench/")
    # an Inspect provider's model gets a turn budget (without one a turn may run to tens of thousands of tokens)
    max_tokens = (DEFAULT_API_MAX_TOKENS if cfg.max_tokens is None and not cfg.reference and not findbench_model
                  else cfg.max_tokens)
    agent = cfg.agent(max_tokens=max_tokens)
    data = str(Path(cfg.data).resolve()) if rows is None and cfg.data is not None else None
    info = {
        **{f.name: getattr(cfg, f.name) for f in fields(cfg)},  # asdict would deep-copy an LM object
        "out": os.fspath(cfg.out),
        "interpreter": name,
        "data": data,
        "max_tokens": max_tokens,
        "configs": cfg.configs or default_configs(rows if rows is not None else data, cfg.method, cfg.functions,
                                                  cfg.seed),
        "observed_calls": cfg.observed_calls if cfg.reference == "observed" else None,
        "source": "rows" if rows is not None else "data" if data is not None else "procedural",
        "inspect_model": model_name,
        "findbench_version": __version__,
    }
    inspect_model = _inspect_model(cfg, out, model_name, model_args)  # a findbench LM loads on its first turn
    samples = {m: find_samples(cfg, m, rows) for m in cfg.method}
    out.mkdir(parents=True, exist_ok=True)
    record = _run_info(out.resolve(), info)
    # eval_set resumes from the logs: a finished log runs nothing
    held = _logs_held(out / LOG_DIR, strict=True)
    total, to_run = sum(map(len, samples.values())), _left(held, samples)
    logger.info("%d episodes, %d already done, %d to run -> %s", total, total - to_run, to_run, out)
    if not to_run:  # every episode is in a log, finished: complete the export, start no model
        _export(out, samples)
        if record is not None:
            atomic_write_json(out / RUN_INFO, record)
        return out

    # a task's version hashes its samples' ids: eval_set pairs a task with its log by name, model, plan and
    # version, so another set of missing episodes is another task
    tasks = [
        interpret_task(ss, agent, interpreter=name, name=f"find_interpret_{m}",
                       version=hashlib.sha256("\n".join(sorted(str(s.id) for s in ss)).encode()).hexdigest()[:12])
        for m, method_samples in samples.items()
        for ss in _task_samples(held, m, method_samples)
    ]
    # Inspect sets the root logger's level to its own: findbench's records keep the caller's
    level, own = logging.getLogger().level, logging.getLogger("findbench").level
    logging.getLogger("findbench").setLevel(level)
    if not (sys.stdout.isatty() and sys.stderr.isatty()):  # no live display: a line per finished episode
        _episode_lines()
        _LINES.update(done=0, total=to_run)
    try:
        if not cfg.reference:
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
            model_args={} if findbench_model else dict(model_args or {}),
            max_connections=cfg.max_connections,
            display=display or (None if progress else "none"),
            log_format="eval",
        )
    except KeyboardInterrupt:
        raise Interrupted(f"{_left(_logs_held(out / LOG_DIR, strict=False), samples)} episodes left") from None
    finally:
        _LINES.clear()
        logging.getLogger().setLevel(level)
        logging.getLogger("findbench").setLevel(own)
        if findbench_model:
            inspect_model.api.close()
    _export(out, samples, logs)
    return out


def _export(out: Path, samples: Mapping[str, list[Any]], logs: Iterable[Any] = ()) -> None:
    """Export the episodes of ``samples`` (method -> samples) that the run's logs record
    (:func:`~findbench.interpret.logs.read_run_logs`: the last log by name wins) to ``out`` in FIND's
    layout (a folder already there is kept); then RuntimeError naming what is left: a log of the eval
    (``logs``) that did not finish, or episodes no log records."""
    episodes = read_run_logs(out, read_run_info(out)).episodes
    missing = []
    for method, function_id in ((m, str(s.id)) for m, ss in samples.items() for s in ss):
        found = episodes.get((method, function_id))
        if found is None or found.record is None:
            missing.append((method, function_id))
        elif not episode_dir(out, function_id, method).is_dir():
            write_episode(out, function_id, method, found.record["answer"])
    unfinished = [f"{log.location} ({log.status}{': ' + log.error.message if log.error else ''})"
                  for log in logs if log.status != "success"]
    if unfinished:
        raise RuntimeError(
            f"inspect eval did not finish: {'; '.join(unfinished)}; rerun with the same --out to run the rest"
        )
    if missing:  # finished logs without an episode record for them (logs of another findbench)
        raise RuntimeError(
            f"out: the logs in {out / LOG_DIR} hold no episode record for {len(missing)} episode(s): "
            + ", ".join(f"{f} ({m})" for m, f in sorted(missing)[:5]) + (" ..." if len(missing) > 5 else "")
            + "; move those logs out of it to run the episodes again"
        )


def summarize_run(out: str | os.PathLike) -> list[dict[str, Any]]:
    """One summary per (category, method) of the readable episodes of the run ``out``'s logs
    (:func:`~findbench.interpret.logs.read_run_logs`): ``{"category", "method", "episodes", "answered",
    "mean_rounds", "calls", "malformed_commands", "dropped_commands", "truncated_messages"}`` (the
    last two: over the per-turn caps)."""
    found = read_run_logs(out, read_run_info(out)).episodes
    groups = {(category, method): [e.record for (m, f), e in sorted(found.items())
                                   if m == method and f.startswith(f"{category}/") and e.record is not None]
              for category in CONFIGS for method in METHODS}
    return [
        {
            "category": category,
            "method": method,
            "episodes": len(records),
            "answered": sum(r["answer"] is not None for r in records),
            "mean_rounds": sum(r["rounds"] for r in records) / len(records),
            "calls": sum(len(r["calls"]) for r in records),
            **{k: sum(r[k] for r in records) for k in ("malformed_commands", "dropped_commands", "truncated_messages")},
        }
        for (category, method), records in groups.items()
        if records
    ]
