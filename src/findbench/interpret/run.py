"""Run an interpreter over FIND functions and write the run folder (``findbench interpret``).

Layout of ``out``::

    run.json                                  interpreter, protocol, rounds, token limits, seed, data, version
    lm-cache.sqlite                           LM interpreters: the request cache (reruns are free)
    <category>/<method>/fNNNNN/
        description.txt  domain.txt  code.py  the answer's parts ("" where not given)
        episode.json                          the Episode record, transcript included

Each episode folder is written in a temporary folder and renamed into place when the episode
ends, so a folder is either complete or absent. A rerun with the same ``out`` skips the
episodes whose folder exists and runs the rest, and again those whose ``episode.json`` is
unreadable or lacks a required key (damaged by a crash or a full disk; one warning line names
each). ``run.json`` must then agree on the settings that change answers (interpreter, rounds,
max_tokens, episode_tokens, seed, data, ...), else ValueError naming ``out``.

Episodes run concurrently, at most ``max_connections`` at a time, on one asyncio loop;
findbench LMs are synchronous and run in a thread pool of that size (backends that are not
thread-safe, such as in-process transformers, one call at a time).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from findbench._io import atomic_dir, atomic_write_json
from findbench._version import __version__
from findbench.find.rows import sample_rows
from findbench.interpret.episode import DEFAULT_ROUNDS, Chat, Episode, _takes_max_tokens, lm_chat, read_episode_file, run_episode
from findbench.interpret.prompts import MILAN_TURNS, check_method, turn_grammar
from findbench.interpret.protocol import METHODS, NEURON_CATEGORIES, PROTOCOL, check_protocol
from findbench.interpret.references import REFERENCE_INTERPRETERS, answer_chat, reference_answer
from findbench.lm.base import check_structured_outputs, use_structured_outputs
from findbench.schema import CATEGORIES, parse_function_id

__all__ = [
    "RUN_INFO",
    "LM_CACHE",
    "EPISODE_FILES",
    "run_interpretations",
    "episode_dir",
    "is_complete_episode",
    "write_episode",
    "record_run_info",
    "summarize_run",
]

logger = logging.getLogger(__name__)

RUN_INFO = "run.json"
LM_CACHE = "lm-cache.sqlite"
#: The files of a complete episode folder.
EPISODE_FILES = ("description.txt", "domain.txt", "code.py", "episode.json")
#: run.json fields a resumed run must share with the folder's.
_SETTINGS = ("interpreter", "model", "protocol", "rounds", "seed", "data", "source", "max_tokens", "episode_tokens")


def episode_dir(out: str | os.PathLike, function_id: str, method: str) -> Path:
    """``<out>/<category>/<method>/fNNNNN``."""
    category, _ = parse_function_id(function_id)
    return Path(out) / category / method / function_id.split("/", 1)[1]


def _is_complete(folder: Path) -> bool:
    if not all((folder / name).is_file() for name in EPISODE_FILES):
        return False
    try:
        read_episode_file(folder / "episode.json")
    except ValueError as exc:
        logger.warning("%s; running that episode again", exc)
        return False
    return True


def _write_episode(folder: Path, episode: Episode) -> None:
    with atomic_dir(folder) as tmp:
        (tmp / "description.txt").write_text(episode.description + ("\n" if episode.description else ""), encoding="utf-8")
        (tmp / "domain.txt").write_text(episode.domain + ("\n" if episode.domain else ""), encoding="utf-8")
        (tmp / "code.py").write_text(episode.code + ("\n" if episode.code else ""), encoding="utf-8")
        text = json.dumps(episode.to_dict(), indent=2, ensure_ascii=False, allow_nan=False)
        (tmp / "episode.json").write_text(text + "\n", encoding="utf-8")


def is_complete_episode(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` holds every file of :data:`EPISODE_FILES` and a readable
    ``episode.json`` (a finished episode); a damaged one is logged as a warning naming it."""
    return _is_complete(Path(folder))


def write_episode(out: str | os.PathLike, episode: Episode) -> Path:
    """Write ``episode`` to its folder of the run ``out`` (``<out>/<category>/<method>/fNNNNN``,
    replaced at once) as :func:`run_interpretations` does; return the folder. For run folders
    written by other drivers (the Inspect engine, :mod:`findbench.interpret.inspect_tasks`)."""
    folder = episode_dir(out, episode.function_id, episode.method)
    _write_episode(folder, episode)
    return folder


def record_run_info(out: str | os.PathLike, info: dict[str, Any]) -> None:
    """Write ``<out>/run.json`` from ``info``, or check it against the one there (resuming):
    ValueError when a setting that changes answers differs; ``methods`` and ``configs`` are
    merged. ``info`` holds the fields :func:`run_interpretations` records."""
    _check_run_info(Path(out).resolve(), info)


# ---------------------------------------------------------------------------------- arguments


def _as_list(name: str, value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, Iterable) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{name} must be a list of strings or a comma-separated string, got {value!r}")
    return list(dict.fromkeys(value))


def run_info(*, interpreter: str, model: str | None, rounds: int, seed: int, data: str | None, source: str,
             max_tokens: int | None, methods: list[str], configs: list[str], protocol: str = PROTOCOL,
             episode_tokens: int | None = None) -> dict[str, Any]:
    """The settings a run folder records in ``run.json`` (both engines write these);
    ``protocol`` is the one the episodes ran (``text`` or ``tools``), ``max_tokens`` and
    ``episode_tokens`` the limits per turn and per episode (None: the default, no limit). A
    ``run.json`` written before ``episode_tokens`` existed reads as None there."""
    return {
        "interpreter": interpreter,
        "model": model,
        "protocol": check_protocol(protocol),
        "rounds": rounds,
        "seed": seed,
        "data": data,
        "source": source,
        "max_tokens": max_tokens,
        "episode_tokens": episode_tokens,
        "methods": methods,
        "configs": configs,
        "findbench_version": __version__,
    }


def check_methods(methods: Sequence[str] | str) -> list[str]:
    """The interpretation methods asked for (a list or a comma-separated string), each one of
    :data:`~findbench.interpret.protocol.METHODS`; ValueError naming ``methods`` otherwise."""
    method_list = _as_list("methods", methods)
    if not method_list:
        raise ValueError(f"methods: give at least one of {METHODS}")
    for m in method_list:
        if m not in METHODS:
            raise ValueError(f"methods: unknown method {m!r}; choose from {METHODS}")
    return method_list


def _check_int(name: str, value: Any, low: int | None, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
        bound = f" >= {low}" if low is not None else ""
        raise ValueError(f"{name} must be an int{bound}{' or None' if optional else ''}, got {value!r}")


def _load_rows(rows_or_data: Any, configs: list[str], seed: int) -> dict[str, list[dict]]:
    from findbench.find import load_rows

    if rows_or_data is None or isinstance(rows_or_data, (str, os.PathLike)):
        return {c: load_rows(c, seed=seed, data=rows_or_data) for c in configs}
    rows: dict[str, list[dict]] = {c: [] for c in configs}
    for row in rows_or_data:
        if not isinstance(row, Mapping):
            raise TypeError(f"rows_or_data must be a data folder or rows (mappings), got an item of type {type(row).__name__}")
        if row.get("category") in rows:
            rows[row["category"]].append(dict(row))
    return rows


def _default_configs(rows_or_data: Any, methods: list[str], functions: list[str] | None) -> list[str]:
    if functions:
        present = {parse_function_id(f)[0] for f in functions}
    elif rows_or_data is None:
        present = set(CATEGORIES)
    elif isinstance(rows_or_data, (str, os.PathLike)):
        root = Path(rows_or_data)
        if not root.is_dir():
            raise FileNotFoundError(f"rows_or_data: data folder {root} does not exist (run `findbench build --out {root}`)")
        present = {c for c in CATEGORIES if (root / c).is_dir()}
    else:
        present = {row.get("category") for row in rows_or_data if isinstance(row, Mapping)}
    if any(m != "aia" for m in methods):
        present &= set(NEURON_CATEGORIES)
    return [c for c in CATEGORIES if c in present]


def _interpreter_name(interpreter: Any) -> str:
    if isinstance(interpreter, (str, os.PathLike)):
        return os.fspath(interpreter)
    name = getattr(interpreter, "name", None)
    if isinstance(name, str) and name:
        return name
    return getattr(interpreter, "__qualname__", None) or type(interpreter).__name__


def _check_run_info(out: Path, info: dict[str, Any]) -> None:
    path = out / RUN_INFO
    if not path.is_file():
        atomic_write_json(path, info)
        return
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"out: {path} is not readable JSON ({exc}); give a new --out folder") from None
    diff = [k for k in _SETTINGS if old.get(k) != info.get(k)]
    if diff:
        what = ", ".join(f"{k}={old.get(k)!r} (now {info.get(k)!r})" for k in diff)
        raise ValueError(f"out: {out} holds a run with other settings: {what}; give a new folder to start another run")
    if old.get("findbench_version") != info["findbench_version"]:
        logger.warning("resuming a run of findbench %s with findbench %s", old.get("findbench_version"), info["findbench_version"])
    merged = dict(old)
    for key in ("methods", "configs"):
        merged[key] = list(dict.fromkeys(list(old.get(key) or []) + list(info[key])))
    if merged != old:
        atomic_write_json(path, merged)


def _is_thread_safe(lm: Any) -> bool:
    """Whether concurrent ``generate`` calls are safe: true for the HTTP backend (behind the
    thread-safe cache or not); in-process backends get one call at a time."""
    from findbench.lm.cache import CachedLM
    from findbench.lm.openai_lm import OpenAILM

    inner = lm.inner if isinstance(lm, CachedLM) else lm
    return isinstance(inner, OpenAILM)


# ----------------------------------------------------------------------------------- the run


def run_interpretations(
    rows_or_data: Any = None,
    interpreter: Any = "embedded",
    *,
    methods: Sequence[str] | str = ("aia",),
    configs: Sequence[str] | str | None = None,
    limit: int | None = None,
    sample: int | None = None,
    functions: Sequence[str] | str | None = None,
    rounds: int = DEFAULT_ROUNDS,
    out: str | os.PathLike = "outputs/interpret",
    seed: int = 0,
    max_connections: int = 4,
    max_tokens: int | None = None,
    model: str | None = None,
    progress: bool = True,
    protocol: str = PROTOCOL,
    episode_tokens: int | None = None,
    structured_outputs: str = "auto",
) -> Path:
    """Interpret FIND functions and write the run folder ``out`` (see the module docstring).

    Args:
        rows_or_data: None (procedural rows of ``seed``, :func:`findbench.find.load_rows`), a
            dataset folder written by ``findbench build``, or rows (an iterable of mappings,
            e.g. a ``datasets.Dataset``).
        interpreter: a reference (``"oracle"``, ``"random"``, ``"constant"``, ``"empty"``:
            :mod:`findbench.interpret.references`), an LM spec for :func:`findbench.lm.load_lm`
            (``"embedded"``, a folder, a Hub id, an OpenAI-compatible URL with ``model=``), an
            LM instance, or an async chat (``chat(messages) -> str``, used as is, no cache).
        methods: ``aia``, ``milan``, ``aia+milan`` (a list or comma-separated); the MILAN ones
            need neuron configs.
        configs: categories to run (default: those available, neurons only for MILAN methods).
        limit: first ``limit`` functions per config (after ``functions``).
        sample: ``sample`` functions per config, seeded by ``seed`` and stratified by
            subcategory (:func:`findbench.find.rows.sample_rows`; after ``limit``).
        functions: function ids to run (e.g. ``["strings/f00007"]``).
        rounds: most model turns per episode.
        out: run folder.
        seed: procedural rows, numeric noise and the ``random`` interpreter's picks.
        max_connections: episodes in flight at once.
        max_tokens: per-turn generation limit of LM interpreters (default
            :data:`~findbench.interpret.episode.DEFAULT_MAX_TOKENS`).
        model: served model name, for URL interpreters.
        progress: show a tqdm bar.
        protocol: ``text`` only: FIND's text commands. Native tool calls (``tools``) need the
            Inspect engine (:func:`findbench.interpret.inspect_tasks.run_inspect_interpretations`)
            and a model whose provider supports them; ValueError here.
        episode_tokens: most tokens an LM interpreter (or chat) may generate over one episode,
            summed over its turns (None: no limit): each turn's limit is capped at what is left,
            and an episode that spends it without answering stops (``stop_reason``
            ``"token_limit"``). LM turns are counted with the LM's tokenizer where it has one,
            else estimated at 4 characters a token; a chat's by its reported ``output_tokens``
            (a chat must then take ``max_tokens=``). The references (``oracle``, ``random``, ``constant``,
            ``empty``) answer on the first turn, whatever the limits. Recorded in ``run.json`` and each episode
            (``max_episode_tokens``); a resumed run must give the same.
        structured_outputs: LM interpreters: ``auto`` (each turn of an LM running in process,
            such as the embedded SmolLM2, is generated under
            :func:`~findbench.interpret.prompts.turn_constraint`: a short free-text line, then
            commands or the answer; the episode's last turn, the answer), ``on`` (a server LM
            too, through vLLM's structured outputs) or ``off`` (free turns, as FIND). Recorded
            in ``run.json`` (``structured_outputs``, and ``structured_outputs_applied`` once
            the LM is loaded).

    Returns:
        The run folder.
    """
    if isinstance(rows_or_data, Mapping):
        raise TypeError("rows_or_data must be a data folder, None or an iterable of rows, got a single mapping")
    if rows_or_data is not None and not isinstance(rows_or_data, (str, os.PathLike)):
        if not isinstance(rows_or_data, Iterable):
            raise TypeError(f"rows_or_data must be a data folder, None or an iterable of rows, got {type(rows_or_data).__name__}")
        rows_or_data = list(rows_or_data)
    if check_protocol(protocol) != PROTOCOL:
        raise ValueError(f"protocol {protocol!r}: native tool calls need the Inspect engine (findbench interpret --engine inspect) "
                         "and a model whose provider supports tool calls (e.g. openai-api/<service>/<model>, vllm/<model>); "
                         f"the native engine, like findbench's own models, speaks FIND's text protocol only ({PROTOCOL!r})")
    method_list = check_methods(methods)
    function_list = _as_list("functions", functions)
    for f in function_list or []:
        try:
            parse_function_id(f)
        except ValueError as exc:
            raise ValueError(f"functions: {exc}") from None
    config_list = _as_list("configs", configs)
    if config_list is None:
        config_list = _default_configs(rows_or_data, method_list, function_list)
        if not config_list:
            raise ValueError(f"configs: nothing to run for methods {method_list} (MILAN methods need {', '.join(NEURON_CATEGORIES)})")
    if not config_list:
        raise ValueError(f"configs: give at least one of {CATEGORIES}")
    for c in config_list:
        if c not in CATEGORIES:
            raise ValueError(f"configs: unknown config {c!r}; choose from {CATEGORIES}")
        for m in method_list:
            try:
                check_method(m, c)
            except ValueError as exc:
                raise ValueError(f"methods: {exc}; drop {c!r} from configs or run it with method 'aia'") from None
    if function_list:
        stray = [f for f in function_list if parse_function_id(f)[0] not in config_list]
        if stray:
            raise ValueError(f"functions: {stray} are not in configs {config_list}")
    _check_int("limit", limit, 1, optional=True)
    _check_int("sample", sample, 1, optional=True)
    _check_int("rounds", rounds, 1)
    _check_int("seed", seed, None)
    _check_int("max_connections", max_connections, 1)
    _check_int("max_tokens", max_tokens, 1, optional=True)
    _check_int("episode_tokens", episode_tokens, 1, optional=True)
    check_structured_outputs(structured_outputs)
    is_chat = callable(interpreter) and not hasattr(interpreter, "generate")
    if not (isinstance(interpreter, (str, os.PathLike)) or is_chat or hasattr(interpreter, "generate")):
        raise TypeError(f"interpreter must be one of {REFERENCE_INTERPRETERS}, an LM spec, an LM or an async chat, "
                        f"got {type(interpreter).__name__}")
    if isinstance(interpreter, str) and not interpreter.strip():
        raise ValueError("interpreter must be a non-empty spec")
    if is_chat and episode_tokens is not None and not _takes_max_tokens(interpreter):
        raise TypeError("episode_tokens: the chat interpreter does not take a max_tokens keyword, so its turns cannot be "
                        "capped at the tokens left; leave episode_tokens=None or give a chat(messages, max_tokens=None)")

    out = Path(out)
    if isinstance(rows_or_data, (str, os.PathLike)):
        data, source = str(Path(rows_or_data).resolve()), "data"
    elif rows_or_data is None:
        data, source = None, "procedural"
    else:
        data, source = None, "rows"
    info = run_info(interpreter=_interpreter_name(interpreter), model=model, rounds=rounds, seed=seed, data=data,
                    source=source, max_tokens=max_tokens, methods=method_list, configs=config_list,
                    episode_tokens=episode_tokens)
    all_rows = _load_rows(rows_or_data if source != "data" else data, config_list, seed)

    wanted = set(function_list or [])
    found = {r["function_id"] for rows in all_rows.values() for r in rows}
    missing = sorted(wanted - found)
    if missing:
        raise ValueError(f"functions: {missing} are not in the data ({source}{': ' + data if data else ''})")
    jobs: list[tuple[str, dict]] = []
    for category in config_list:
        rows = [r for r in all_rows[category] if not wanted or r["function_id"] in wanted]
        if limit is not None:
            rows = rows[:limit]
        if sample is not None:
            rows = sample_rows(rows, sample, seed=seed)
        jobs += [(m, r) for m in method_list for r in rows]

    out.mkdir(parents=True, exist_ok=True)
    _check_run_info(out.resolve(), info)
    pending = [(m, r) for m, r in jobs if not _is_complete(episode_dir(out, r["function_id"], m))]
    logger.info("%d episodes, %d already done, %d to run -> %s", len(jobs), len(jobs) - len(pending), len(pending), out)
    if not pending:
        return out

    name = interpreter if isinstance(interpreter, str) else None
    executor = ThreadPoolExecutor(max_workers=max_connections, thread_name_prefix="findbench-interpret")
    lm = None
    try:
        if name in REFERENCE_INTERPRETERS:

            def chat_for(row: dict, method: str) -> Chat:
                return answer_chat(reference_answer(name, row, all_rows[row["category"]], seed=seed))

            run_tokens = None
        elif is_chat:
            shared = interpreter

            def chat_for(row: dict, method: str) -> Chat:
                return shared

            run_tokens = max_tokens
        else:
            from findbench.lm import load_lm

            kwargs = {"model": model} if model is not None else {}
            lm = load_lm(interpreter, cache=out / LM_CACHE, **kwargs)
            lock = None if _is_thread_safe(lm) else threading.Lock()
            shared_lm_chat = lm_chat(lm, max_tokens=max_tokens, executor=executor, lock=lock)
            structured = use_structured_outputs(lm, structured_outputs)
            _record_structured_outputs(out, structured_outputs, structured)
            grammar_chats: dict[tuple[str, str], Chat] = {}

            def chat_for(row: dict, method: str) -> Chat:
                if not structured:
                    return shared_lm_chat
                key = (row["category"], method)
                if key not in grammar_chats:
                    turns = min(rounds, MILAN_TURNS) if method == "milan" else rounds
                    grammar_chats[key] = lm_chat(lm, max_tokens=max_tokens, executor=executor, lock=lock,
                                                 constraint=turn_grammar(row["category"], turns))
                return grammar_chats[key]

            run_tokens = max_tokens
        asyncio.run(_run_all(pending, chat_for, out=out, rounds=rounds, seed=seed, max_tokens=run_tokens,
                             episode_tokens=episode_tokens, max_connections=max_connections, progress=progress))
    finally:
        # a generation still running finishes (and lands in the cache) before the cache closes
        executor.shutdown(wait=True, cancel_futures=True)
        close = getattr(lm, "close", None)
        if callable(close):
            close()
    return out


def _record_structured_outputs(out: Path, setting: str, applied: bool) -> None:
    """Add the structured-outputs setting and whether it applied to ``run.json``; a resumed
    run must use the setting it was started with (its episodes were generated under it)."""
    path = out / RUN_INFO
    info = json.loads(path.read_text(encoding="utf-8"))
    if info.get("structured_outputs", setting) != setting:
        raise ValueError(f"out: {out} holds a run with other settings: structured_outputs={info['structured_outputs']!r} "
                         f"(now {setting!r}); give a new folder to start another run")
    info.update(structured_outputs=setting, structured_outputs_applied=applied)
    atomic_write_json(path, info)


async def _run_all(pending, chat_for, *, out: Path, rounds: int, seed: int, max_tokens: int | None,
                   episode_tokens: int | None, max_connections: int, progress: bool) -> None:
    from tqdm.auto import tqdm

    semaphore = asyncio.Semaphore(max_connections)
    bar = tqdm(total=len(pending), desc="interpret", unit="episode", disable=not progress)

    async def one(method: str, row: dict) -> None:
        async with semaphore:
            episode = await run_episode(row, chat_for(row, method), method=method, rounds=rounds, max_tokens=max_tokens, seed=seed,
                                        episode_tokens=episode_tokens)
            await asyncio.to_thread(_write_episode, episode_dir(out, row["function_id"], method), episode)
            bar.update(1)

    tasks = [asyncio.ensure_future(one(m, r)) for m, r in pending]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        bar.close()


# ------------------------------------------------------------------------------------ summary


def summarize_run(out: str | os.PathLike) -> list[dict[str, Any]]:
    """One summary per (category, method) of the episodes in the run folder ``out``:
    ``{"category", "method", "episodes", "answered", "mean_rounds", "calls", "malformed_commands"}``.
    ValueError naming the file for a damaged ``episode.json`` (:func:`read_episode_file`)."""
    root = Path(out)
    summary = []
    for category in CATEGORIES:
        for method in METHODS:
            folder = root / category / method
            if not folder.is_dir():
                continue
            records = []
            for sub in sorted(folder.iterdir()):
                if sub.is_dir() and not sub.name.startswith(".") and (sub / "episode.json").is_file():
                    try:
                        records.append(read_episode_file(sub / "episode.json"))
                    except ValueError as exc:
                        raise ValueError(f"{exc}; rerun with the same out to run that episode again") from None
            if not records:
                continue
            summary.append({
                "category": category,
                "method": method,
                "episodes": len(records),
                "answered": sum(bool(r.get("finished")) for r in records),
                "mean_rounds": sum(int(r.get("rounds", 0)) for r in records) / len(records),
                "calls": sum(len(r.get("calls", [])) for r in records),
                "malformed_commands": sum(int(r.get("malformed_commands", 0)) for r in records),
            })
    return summary
