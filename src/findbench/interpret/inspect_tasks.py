"""FIND's interpreter harness on Inspect (registered via :mod:`findbench.interpret._inspect_registry`).

- task ``findbench/find_interpret``: one sample per FIND function (metadata: the row and the method),
  solved by :func:`find_agent` and scored by :func:`nmse_success`, :func:`exact_match`,
  :func:`domain_iou` and :func:`unit_test_accuracy` (views of
  :func:`findbench.interpret.evaluate.score_interpretations`)::

      inspect eval findbench/find_interpret -T configs=strings -T limit=2 --model findbench/embedded

- solver :func:`find_agent`: one episode in the ``text`` protocol (FIND's ``PYTHON(...)`` commands, any
  model) or the ``tools`` protocol (``call_function(inputs)`` tool calls, :func:`run_tool_episode`);
  the record goes to the store under :data:`STORE_KEY`.
- model API ``findbench``: ``--model findbench/<spec>`` answers with a findbench LM
  (``-M cache=<file>``: sqlite request cache; ``-M lm=<instance>`` from Python)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    GenerateConfig,
    ModelAPI,
    ModelOutput,
    ModelUsage,
    execute_tools,
    get_model,
    modelapi,
)
from inspect_ai.scorer import Score, Target, mean, scorer, stderr
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.tool import ToolCallError, ToolChoice, ToolDef, ToolError, ToolInfo

from findbench import _checks
from findbench._version import __version__
from findbench.constants import UsageError
from findbench.interpret.calls import FunctionRunner
from findbench.interpret.episode import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_ROUNDS,
    ChatReply,
    Episode,
    count_tokens,
    open_episode,
    run_command,
    run_episode,
)
from findbench.interpret.floors import DEFAULT_OBSERVED_CALLS, observed_turns
from findbench.interpret.prompts import MILAN_TURNS, check_method, turn_grammar
from findbench.interpret.protocol import (
    MAX_COMMANDS_PER_MESSAGE,
    MAX_INPUT_CHARS,
    MAX_INPUTS_PER_COMMAND,
    NEURON_CATEGORIES,
    PROTOCOL,
    REPLY_PREFIX,
    TOOL_NAME,
    TOOL_UNRECOGNIZED_REPLY,
    format_answer,
    parse_answer,
    tool_call_text,
    tool_command,
)
from findbench.interpret.references import REFERENCE_INTERPRETERS, reference_answer
from findbench.interpret.truth import UNVERIFIED_NOTE, json_row
from findbench.lm.base import Constraint, use_structured_outputs
from findbench.schema import CATEGORIES, parse_function_id

#: Key of the episode record (``Episode.to_dict()``) in a sample's store.
STORE_KEY = "findbench_episode"
#: The task's registry name (``inspect eval findbench/find_interpret``).
TASK_NAME = "findbench/find_interpret"
#: Folder of the ``.eval`` logs inside a run folder.
LOG_DIR = "logs"


def to_chat_messages(messages: Iterable[Mapping[str, str]]) -> list[ChatMessage]:
    """findbench's ``{"role", "content"}`` dicts as Inspect chat messages."""
    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
    return [kinds[m["role"]](content=str(m.get("content", ""))) for m in messages]


def from_chat_messages(messages: Iterable[ChatMessage]) -> list[dict[str, str]]:
    """Inspect chat messages as findbench's ``{"role", "content"}`` dicts (text only): tool calls
    become text lines after the assistant's text, a tool result a ``tool`` message with its reply line
    (``Response: Error in <call>: <why>.`` for a refused call)."""
    out = []
    calls: dict[str, str] = {}
    for m in messages:
        if m.role in ("system", "user"):
            out.append({"role": m.role, "content": m.text})
        elif isinstance(m, ChatMessageAssistant):
            lines = [m.text] if m.text else []
            for call in m.tool_calls or []:
                calls[call.id] = tool_call_text(call.arguments, call.function)
                lines.append(calls[call.id])
            out.append({"role": "assistant", "content": "\n".join(lines)})
        elif isinstance(m, ChatMessageTool):
            call = calls.get(m.tool_call_id or "") or tool_call_text(None, m.function or TOOL_NAME)
            content = f"{REPLY_PREFIX}Error in {call}: {m.error.message}." if m.error is not None else m.text
            out.append({"role": "tool", "content": content})
    return out


def _usage_dict(usage: ModelUsage | None) -> dict[str, int] | None:
    if usage is None:
        return None
    return {k: v for k, v in usage.model_dump().items() if isinstance(v, int) and not isinstance(v, bool)}


def inspect_chat(model: Any = None, constraint: Any = None) -> Any:
    """An episode chat over an Inspect model (the task's model when None), one ``generate`` per turn.
    ``constraint`` (a grammar, or a function of the messages giving one) travels as vLLM's
    ``structured_outputs`` field in ``extra_body``."""
    from findbench.lm.openai_lm import structured_outputs_field

    async def chat(messages: list[dict[str, str]], max_tokens: int | None = None) -> ChatReply:
        active = get_model(model)
        grammar = constraint(messages) if callable(constraint) else constraint
        config = GenerateConfig(max_tokens=max_tokens,
                                extra_body={"structured_outputs": structured_outputs_field(grammar)} if grammar else None)
        output = await active.generate(to_chat_messages(messages), config=config)
        return ChatReply(output.completion, usage=_usage_dict(output.usage))

    return chat


_TOOL_DESCRIPTION = (
    "Run the unknown function f(x) on each of the inputs. Returns one line: "
    "'Response: Function input - output pairs: (x1, f(x1)) (x2, f(x2)) ...'."
)
_INPUTS_DESCRIPTION = (
    f"The inputs to run f(x) on, one call per input: strings, or numbers for a function of numbers. "
    f"1 to {MAX_INPUTS_PER_COMMAND} inputs, each at most {MAX_INPUT_CHARS} characters."
)


def call_function_tool(runner: FunctionRunner, episode: Episode) -> ToolDef:
    """The ``call_function(inputs)`` tool of one episode: runs the inputs through ``runner`` as a text
    command's values, records the call in ``episode.calls`` and returns the reply line; bad inputs are
    recorded as malformed and raised as :class:`~inspect_ai.tool.ToolError`."""
    async def execute(inputs: list[str | float]) -> str:
        command = await asyncio.to_thread(tool_command, inputs)  # the agent's list: checked off the event loop
        line = await run_command(runner, command, episode.rounds, episode)
        if command.malformed:
            raise ToolError(str(command.error))
        return line

    return ToolDef(execute, name=TOOL_NAME, description=_TOOL_DESCRIPTION, parameters={"inputs": _INPUTS_DESCRIPTION},
                   parallel=False, max_output=0)


async def _run_tool_calls(messages: list[ChatMessage], tool: ToolDef, episode: Episode) -> None:
    """Run the tool calls of the last (assistant) message, append the results to ``messages`` and keep
    ``episode.calls`` in call order; a call Inspect refuses before the tool runs is recorded as malformed.
    Calls past :data:`MAX_COMMANDS_PER_MESSAGE` do not run: each gets a ``limit`` error and is counted in
    ``episode.dropped_commands``."""
    assistant = messages[-1]
    assert isinstance(assistant, ChatMessageAssistant)
    tool_calls = assistant.tool_calls or []
    by_id = {call.id: call for call in tool_calls}
    start = len(episode.calls)
    dropped = tool_calls[MAX_COMMANDS_PER_MESSAGE:]
    capped = [*messages[:-1], assistant.model_copy(update={"tool_calls": tool_calls[:MAX_COMMANDS_PER_MESSAGE]})]
    result = await execute_tools(capped if dropped else messages, [tool])
    ran = episode.calls[start:]
    del episode.calls[start:]
    for m in result.messages:
        messages.append(m)
        if not isinstance(m, ChatMessageTool):
            continue
        if (m.error is None or m.error.type == "unknown") and ran:  # the tool ran (a ToolError is "unknown")
            episode.calls.append(ran.pop(0))
            continue
        call = by_id.get(m.tool_call_id or "")
        why = m.error.message if m.error is not None else "the tool did not run"
        episode.calls.append({"round": episode.rounds, "inputs": [], "outputs": [], "errors": [], "error": why,
                              "command": tool_call_text(call.arguments if call else None, call.function if call else TOOL_NAME)})
        episode.malformed_commands += 1
    episode.calls.extend(ran)
    why = f"not run: at most {MAX_COMMANDS_PER_MESSAGE} {TOOL_NAME} calls per message"
    messages.extend(ChatMessageTool(content="", tool_call_id=call.id, function=call.function,
                                    error=ToolCallError("limit", why)) for call in dropped)
    episode.dropped_commands += len(dropped)


async def run_tool_episode(row: Mapping[str, Any], model: Any = None, *, method: str = "aia", rounds: int = DEFAULT_ROUNDS,
                           max_tokens: int | None = None, seed: int = 0, reference: Sequence[str] | None = None,
                           episode_tokens: int | None = None) -> tuple[Episode, list[ChatMessage]]:
    """One ``tools``-protocol episode on ``row``: the record and Inspect's conversation. The loop of
    :func:`~findbench.interpret.episode.run_episode` with :func:`call_function_tool` offered each turn;
    ``reference``: turns given instead of calling a model (the last one repeats)."""
    runner, episode = await open_episode(row, method=method, rounds=rounds, seed=seed, protocol="tools",
                                         episode_tokens=episode_tokens)
    tool = call_function_tool(runner, episode)
    messages = to_chat_messages(episode.messages)
    for turn in range(1, episode.max_rounds + 1):
        episode.rounds = turn
        if reference is not None:
            output = ModelOutput.from_content(model="none", content=reference[min(turn, len(reference)) - 1])
        else:
            config = GenerateConfig(max_tokens=episode.turn_limit(max_tokens))
            output = await get_model(model).generate(messages, tools=[tool], config=config)
        message = output.message
        episode.count_turn(_usage_dict(output.usage),
                           "\n".join([message.text] + [tool_call_text(c.arguments, c.function) for c in message.tool_calls or []]))
        messages.append(message)
        answer = await asyncio.to_thread(parse_answer, message.text)  # off the event loop: the message is the agent's
        if answer is not None:
            episode.answer, episode.finished, episode.stop_reason = answer, True, "answer"
            break
        if message.tool_calls:
            await _run_tool_calls(messages, tool, episode)
        else:
            messages.append(ChatMessageUser(content=TOOL_UNRECOGNIZED_REPLY))
            episode.unrecognized_turns += 1
        if episode.budget_spent:
            episode.stop_reason = "token_limit"
            break
    episode.messages = from_chat_messages(messages)
    return episode, messages


def _rows(data: Any, category: str, seed: int) -> list[dict]:
    from findbench.find import load_rows

    if data is None or isinstance(data, (str, os.PathLike)):
        return load_rows(category, seed=seed, data=data)
    return [dict(r) for r in data if r.get("category") == category]


def default_configs(data: Any, methods: Sequence[str], functions: Sequence[str] | None) -> list[str]:
    """The categories a run covers when none are named: those ``data`` (a folder, rows or None:
    procedural) holds, only the neuron ones when a MILAN method is asked, only those of ``functions``."""
    present = set(CATEGORIES)
    if functions:
        present = {f.split("/", 1)[0] for f in functions}
    elif isinstance(data, (str, os.PathLike)):
        present = {c for c in CATEGORIES if (Path(data) / c).is_dir()}
    elif data is not None:
        present = {r.get("category") for r in data}
    if any(m != "aia" for m in methods):
        present &= set(NEURON_CATEGORIES)
    return [c for c in CATEGORIES if c in present]


def find_samples(configs: Sequence[str] | str | None = None, method: str = "aia", *, limit: int | None = None, sample: int | None = None,
                 functions: Sequence[str] | str | None = None, data: Any = None, seed: int = 0,
                 interpreter: str | None = None, observed_calls: int = DEFAULT_OBSERVED_CALLS) -> list[Sample]:
    """One sample per FIND function: id the function id, metadata ``{"row", "method", "unverified"}``
    (``unverified``: the row came from in-memory rows, which no data checks).

    ``data``: a dataset folder, rows or None (procedural rows of ``seed``); ``configs`` default to
    :func:`default_configs`; ``sample`` is seeded and stratified by subcategory (after ``limit``).
    A reference ``interpreter`` (``oracle``, ``random``, ...) adds its turns to the metadata
    (``reference_turns``; ``observed`` calls ``observed_calls`` inputs first)."""
    from findbench.find.rows import sample_rows

    function_list = _checks.str_list("functions", functions, optional=True)
    for f in function_list or []:
        try:
            parse_function_id(f)
        except ValueError as exc:
            raise UsageError(f"functions: {exc}") from None
    config_list = _checks.str_list("configs", configs, optional=True)
    if config_list is None:
        config_list = default_configs(data, [method], function_list)
    if not config_list:
        raise UsageError(f"configs: nothing to run for method {method!r} (MILAN methods need {', '.join(NEURON_CATEGORIES)})")
    for c in config_list:
        _checks.one_of("configs", c, CATEGORIES)
        try:
            check_method(method, c)
        except ValueError as exc:
            raise UsageError(f"methods: {exc}; drop {c!r} from configs or run it with method 'aia'") from None
    stray = sorted(f for f in function_list or [] if parse_function_id(f)[0] not in config_list)
    if stray:
        raise UsageError(f"functions: {stray} are not in configs {config_list}")
    _checks.positive_int("limit", limit, optional=True)
    _checks.positive_int("sample", sample, optional=True)
    _checks.integer("seed", seed)

    wanted = set(function_list or [])
    samples: list[Sample] = []
    found: set[str] = set()
    for category in config_list:
        pool = _rows(data, category, seed)
        rows = [r for r in pool if not wanted or r["function_id"] in wanted]
        if limit is not None:
            rows = rows[:limit]
        if sample is not None:
            rows = sample_rows(rows, sample, seed=seed)
        for row in rows:
            found.add(row["function_id"])
            metadata: dict[str, Any] = {"row": json_row(row), "method": method,
                                        "unverified": data is not None and not isinstance(data, (str, os.PathLike))}
            if interpreter == "observed":
                metadata["reference_turns"] = observed_turns(row, pool, method=method, calls=observed_calls, seed=seed)
            elif interpreter is not None:
                answer = reference_answer(interpreter, row, pool, seed=seed)
                metadata["reference_turns"] = [format_answer(answer.description, answer.domain, answer.code)]
            samples.append(Sample(input=f"Interpret the FIND function {row['function_id']} (method {method}).",
                                  target=str(row.get("description") or ""), id=row["function_id"], metadata=metadata))
    missing = sorted(wanted - found)
    if missing:
        where = f"data folder {data}" if isinstance(data, (str, os.PathLike)) else "rows given" if data else f"procedural data (seed {seed})"
        raise UsageError(f"functions: {missing} are not in the {where}")
    return samples


@solver
def find_agent(rounds: int = DEFAULT_ROUNDS, max_tokens: int | None = None, seed: int = 0, protocol: str = PROTOCOL,
               episode_tokens: int | None = None, structured_outputs: str = "auto"):
    """One FIND episode per sample with the task's model (or the sample's reference answer) in
    ``protocol``; the record goes to the store under :data:`STORE_KEY`, the parsed answer to the output.
    ``structured_outputs`` (``auto``/``on``/``off``): each ``text`` turn follows
    :func:`~findbench.interpret.prompts.turn_grammar` (``auto``: where
    :func:`~findbench.lm.base.use_structured_outputs` says so for a findbench model)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        row, method = state.metadata["row"], state.metadata["method"]
        reference = state.metadata.get("reference_turns")
        if protocol == "tools":
            episode, messages = await run_tool_episode(row, method=method, rounds=rounds, max_tokens=max_tokens, seed=seed,
                                                       reference=reference, episode_tokens=episode_tokens)
            state.messages = messages
        else:
            if reference is not None:
                async def chat(messages: list[dict[str, str]], max_tokens: int | None = None) -> str:
                    turn = sum(m.get("role") == "assistant" for m in messages)
                    return reference[min(turn, len(reference) - 1)]
            else:
                chat = inspect_chat(constraint=_turn_grammar(row["category"], method, rounds, structured_outputs))
            episode = await run_episode(row, chat, method=method, rounds=rounds, max_tokens=max_tokens, seed=seed,
                                        episode_tokens=episode_tokens)
            state.messages = to_chat_messages(episode.messages)
        state.store.set(STORE_KEY, episode.to_dict())
        answer = format_answer(episode.description, episode.answer.domain, episode.answer.code) if episode.answer else ""
        state.output = ModelOutput.from_content(model=str(state.model), content=answer)
        return state

    return solve


def _turn_grammar(category: str, method: str, rounds: int, setting: str) -> Any:
    """The turn grammar of an episode on the task's model, or None where structured outputs do not apply."""
    applied = structured_outputs_applied(get_model(), setting)
    return turn_grammar(category, min(rounds, MILAN_TURNS) if method == "milan" else rounds) if applied else None


def structured_outputs_applied(model: Any, setting: str) -> bool:
    """Whether ``text`` turns on ``model`` follow the turn grammar: a findbench model as
    :func:`~findbench.lm.base.use_structured_outputs` says, any other with ``on``."""
    api = getattr(model, "api", None)
    return use_structured_outputs(api.lm, setting) if isinstance(api, FindbenchModelAPI) else setting == "on"


def _episode(state: TaskState) -> Episode:
    record = state.store.get(STORE_KEY)
    if record is None:
        raise ValueError(f"sample {state.sample_id}: no episode in the store under {STORE_KEY!r} (solve it with find_agent)")
    return Episode.from_dict(record)


def _scored(state: TaskState, metric: str, **judge: Any) -> dict[str, Any]:
    """The sample's episode scored on ``metric`` by :func:`~findbench.interpret.evaluate.score_interpretations`."""
    from findbench.interpret.evaluate import score_interpretations

    ep = _episode(state)
    record = {"function_id": ep.function_id, "category": ep.category, "method": ep.method, "description": ep.description,
              "domain": ep.domain, "code": ep.code}
    return score_interpretations([record], [state.metadata["row"]], metrics=(metric,), **judge)[0]


def _marked(state: TaskState, score: Score | None) -> Score | None:
    """``score`` with :data:`~findbench.interpret.truth.UNVERIFIED_NOTE` opening its explanation
    when the sample's row came from in-memory rows."""
    if score is not None and state.metadata.get("unverified"):
        score.explanation = UNVERIFIED_NOTE + (f"\n{score.explanation}" if score.explanation else "")
    return score


def _metric_scorer(category: str, metric: str, to_score: Any) -> Any:
    """A scorer of ``category``'s samples: ``to_score(value, episode)`` of the episode's ``metric``."""

    async def score(state: TaskState, target: Target) -> Score | None:
        if state.metadata["row"]["category"] != category:
            return None
        return _marked(state, to_score((await asyncio.to_thread(_scored, state, metric))[metric], _episode(state)))

    return score


@scorer(metrics=[mean(), stderr()])
def nmse_success():
    """Numeric functions: 1.0 when the answer's code has NMSE below FIND's threshold, else 0.0 (NMSE in the metadata)."""
    from findbench.find.code_scoring import NMSE_THRESHOLD

    return _metric_scorer("numeric", "nmse", lambda value, ep: Score(
        value=float(value < NMSE_THRESHOLD), answer=ep.code, explanation=f"NMSE {value}",
        metadata={"nmse": value if math.isfinite(value) else None}))


@scorer(metrics=[mean(), stderr()])
def exact_match():
    """String functions: the share of the row's test inputs on which the answer's code is right."""
    return _metric_scorer("strings", "exact_match", lambda value, ep: None if value is None else Score(value=value, answer=ep.code))


@scorer(metrics=[mean(), stderr()])
def domain_iou():
    """Numeric functions: IoU of the answer's ``[DOMAIN]`` with the corrupted interval."""
    return _metric_scorer("numeric", "domain_iou", lambda value, ep: Score(value=value, answer=ep.domain))


def _check_judge(judge: Any) -> None:
    """Fail before any episode runs when a registered judge (``embedded-evaluator``) is not available."""
    if not isinstance(judge, str) or judge.startswith(("http://", "https://")) or Path(judge).is_dir():
        return
    from findbench.models import REGISTRY, resolve

    if judge in REGISTRY:
        try:
            resolve(judge)
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"judge: {exc}; or pass judge=none (-T judge=none) to leave descriptions unscored "
                                    "here (findbench evaluate scores them later)") from None


@scorer(metrics=[mean(), stderr()])
def unit_test_accuracy(judge: Any = "embedded-evaluator", judge_mode: str | None = None, judge_model: str | None = None,
                       judge_cache: str | None = None):
    """Strings and neurons: the share of the row's unit tests the judge answers right from the answer's
    description (``judge``: a :func:`findbench.lm.load_lm` spec, loaded on the first score, or an LM);
    the metadata holds ``truncated`` and ``decisions`` (the rows of ``unit_tests.csv``)."""
    from findbench.judge import judge_mode_of, load_judge

    mode = judge_mode or judge_mode_of(judge)
    lock = threading.Lock()
    loaded: list[Any] = []

    def run(state: TaskState) -> dict[str, Any]:
        with lock:
            if not loaded:
                loaded.append(load_judge(judge, judge_model=judge_model, cache=judge_cache))
            return _scored(state, "unit_test_accuracy", judge=loaded[0], mode=mode)

    async def score(state: TaskState, target: Target) -> Score | None:
        row = state.metadata["row"]
        if row["category"] == "numeric" or not row.get("unit_tests"):
            return None
        record = await asyncio.to_thread(run, state)
        rows = record["unit_test_rows"]
        return _marked(state, Score(value=record["unit_test_accuracy"], answer=record["description"],
                                    explanation=judge_explanation(rows, mode),
                                    metadata={"judge_mode": mode, "truncated": bool(rows[0]["truncated"]), "decisions": rows}))

    return score


def judge_explanation(decisions: list[dict], mode: str) -> str:
    """The judge's decisions on a function's unit tests (rows of ``unit_tests.csv``) as text, one line per test."""
    right = sum(bool(d["right"]) for d in decisions)
    lines = [f"judge ({mode}): {right}/{len(decisions)} unit tests right; margin = score of the correct option "
             "minus the best wrong one"]
    for k, d in enumerate(decisions, 1):
        options = " | ".join(f"{c}: {d[f'option_{c}']}" for c in range(1, 10) if f"option_{c}" in d)
        if d["margin"] is not None:
            how = f", margin {d['margin']:+.3g}"
        elif d["answer"] is not None:
            how = f", answer {d['answer'][:80]!r}"
        else:
            how = ", not judged (empty description)" if d["chosen"] is None else ""
        lines.append(f"{k}. {'right' if d['right'] else 'WRONG'}: chose {d['chosen']}, correct {d['correct']}{how} — {options}")
    return "\n".join(lines)


@task
def find_interpret(configs: str | list[str] | None = None, method: str = "aia", limit: int | None = None, sample: int | None = None,
                   functions: str | list[str] | None = None, rounds: int = DEFAULT_ROUNDS, data: str | None = None, seed: int = 0,
                   max_tokens: int | None = None, interpreter: str | None = None, judge: Any = "embedded-evaluator",
                   judge_mode: str | None = None, judge_model: str | None = None, judge_cache: str | None = None, protocol: str = PROTOCOL,
                   episode_tokens: int | None = None, structured_outputs: str = "auto") -> Task:
    """FIND's interpretation task (FIND §3, Table 2) for one method (``-T name=value``).

    Row selection as :func:`find_samples`, the episode as :func:`find_agent`; ``interpreter``: a
    reference answering without a model; ``judge`` (``None``/``"none"``: descriptions unscored) as
    ``findbench evaluate``'s."""
    samples = find_samples(configs, method, limit=limit, sample=sample, functions=functions, data=data, seed=seed,
                           interpreter=interpreter)
    present = {s.metadata["row"]["category"] for s in samples}
    judged = judge not in (None, "none") and bool(present - {"numeric"})
    if judged:
        _check_judge(judge)
    scorers = [s for s, wanted in ((nmse_success(), "numeric" in present), (domain_iou(), "numeric" in present),
                                   (exact_match(), "strings" in present)) if wanted]
    if judged:
        scorers.append(unit_test_accuracy(judge, judge_mode=judge_mode, judge_model=judge_model, judge_cache=judge_cache))
    return interpret_task(samples, scorers, rounds=rounds, max_tokens=max_tokens, seed=seed, protocol=protocol,
                          episode_tokens=episode_tokens, structured_outputs=structured_outputs)


def interpret_task(samples: list[Sample], scorers: list | None = None, *, rounds: int, max_tokens: int | None, seed: int,
                   protocol: str, episode_tokens: int | None, structured_outputs: str) -> Task:
    """The task over ``samples`` (of one method), solved by :func:`find_agent`."""
    return Task(
        dataset=MemoryDataset(samples, name="find"),
        solver=find_agent(rounds=rounds, max_tokens=max_tokens, seed=seed, protocol=protocol, episode_tokens=episode_tokens,
                          structured_outputs=structured_outputs),
        scorer=scorers or None,
        metadata={"findbench_version": __version__, "protocol": protocol, "episode_tokens": episode_tokens,
                  "structured_outputs": structured_outputs},
    )


def _thread_safe(lm: Any) -> bool:
    from findbench.lm.cache import CachedLM
    from findbench.lm.openai_lm import OpenAILM

    return isinstance(lm.inner if isinstance(lm, CachedLM) else lm, OpenAILM)


class FindbenchModelAPI(ModelAPI):
    """Inspect's view of a findbench LM (``--model findbench/<spec>``).

    Model args (``-M``): ``cache`` (sqlite file), ``model`` (served name, for URL specs), ``lm`` (an LM
    instance) and options of :func:`findbench.lm.load_lm`. Token usage uses the backend's tokenizer
    where it has one, else 4 characters a token. The LM is loaded on the first ``generate`` (Inspect
    also builds providers only to look up model information)."""

    def __init__(self, model_name: str, base_url: str | None = None, api_key: str | None = None,
                 config: GenerateConfig = GenerateConfig(), **model_args: Any) -> None:
        super().__init__(model_name, base_url, api_key, [], config)
        self._cache = model_args.pop("cache", None)
        lm = model_args.pop("lm", None)
        if base_url is not None:
            model_args.setdefault("model", model_name)
        self._spec = lm if lm is not None else (base_url or model_name)
        self._options = model_args
        self._lm: Any = None
        self._load_lock = threading.Lock()
        self._lock: Any = contextlib.nullcontext()  # a threading.Lock once a non-thread-safe LM is loaded

    @property
    def lm(self) -> Any:
        """The findbench LM (loaded on first use)."""
        with self._load_lock:
            if self._lm is None:
                from findbench.lm import load_lm

                self._lm = load_lm(self._spec, cache=self._cache, **self._options)
                if not _thread_safe(self._lm):
                    self._lock = threading.Lock()
            return self._lm

    def max_tokens(self) -> int | None:
        return DEFAULT_MAX_TOKENS

    def close(self) -> None:
        close = getattr(self._lm, "close", None)
        if callable(close):
            close()

    def _count(self, text: str) -> int:
        lm = self.lm
        with self._lock:
            return count_tokens(lm, text)

    async def count_text_tokens(self, text: str) -> int:
        return await asyncio.to_thread(self._count, text)

    def _generate(self, messages: list[dict[str, str]], limit: int, temperature: float, constraint: Any) -> tuple[str, int, int]:
        lm = self.lm
        kwargs = {"constraint": constraint} if constraint is not None else {}
        with self._lock:
            text = lm.generate([messages], max_new_tokens=limit, temperature=temperature, **kwargs)[0]
            return text, count_tokens(lm, conversation=messages), count_tokens(lm, text)

    async def generate(self, input: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice,
                       config: GenerateConfig) -> ModelOutput:
        if tools or any(m.role == "tool" or getattr(m, "tool_calls", None) for m in input):
            raise ValueError(f"findbench/{self.model_name} takes FIND's text protocol only: findbench's own models do not "
                             "support tool calls; run the text protocol (-T protocol=text, findbench interpret --protocol text) "
                             "or, for the tools protocol, an Inspect provider whose models support tool calls")
        messages = from_chat_messages(input)
        limit = config.max_tokens or DEFAULT_MAX_TOKENS
        field = (config.extra_body or {}).get("structured_outputs")
        constraint = None
        if field:  # vLLM's request field, as inspect_chat (or a caller) sends it
            constraint = Constraint(regex=field["regex"]) if "regex" in field else Constraint(json_schema=field["json"])
            if not getattr(self.lm, "supports_constraints", False):
                raise ValueError(f"structured_outputs: findbench/{self.model_name} cannot constrain generation")
        text, n_in, n_out = await asyncio.to_thread(self._generate, messages, limit, float(config.temperature or 0.0), constraint)
        output = ModelOutput.from_content(model=self.model_name, content=text)
        output.usage = ModelUsage(input_tokens=n_in, output_tokens=n_out, total_tokens=n_in + n_out)
        return output


@modelapi(name="findbench")
def findbench_model_api() -> type[ModelAPI]:
    """The ``findbench`` model API (``--model findbench/<spec>``)."""
    return FindbenchModelAPI


def _inspect_providers() -> set[str]:
    from inspect_ai._util.registry import registry_find, registry_unqualified_name

    return {registry_unqualified_name(info) for info in
            (getattr(o, "__registry_info__", None) for o in registry_find(lambda i: i.type == "modelapi")) if info is not None}


def inspect_model_name(interpreter: str) -> str:
    """The Inspect model for an interpreter: ``"none"`` for the references; ``<provider>/<model>`` as
    is when Inspect knows the provider; any other spec (``embedded``, a folder, a Hub id, a URL) as
    ``findbench/<spec>``."""
    if interpreter in REFERENCE_INTERPRETERS:
        return "none"
    head, sep, _ = interpreter.partition("/")
    if sep and head and not interpreter.startswith(("http://", "https://")) and not Path(interpreter).exists():
        if head in _inspect_providers():
            return interpreter
    return f"findbench/{interpreter}"


def episodes_from_log(log: Any) -> list[Episode]:
    """The episodes of a log's samples that finished without error (an ``EvalLog`` or a log path)."""
    if isinstance(log, (str, os.PathLike)):
        from inspect_ai.log import read_eval_log

        log = read_eval_log(os.fspath(log))
    episodes = []
    for sample in log.samples or []:
        record = (sample.store or {}).get(STORE_KEY)
        if sample.error is None and record is not None:
            episodes.append(Episode.from_dict(record))
    return episodes
