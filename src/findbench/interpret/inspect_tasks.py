"""FIND's interpreter harness on Inspect (``inspect-ai``, the ``interpret`` extra).

Inspect supplies the parts around an episode: model providers, concurrency limits, retries,
token accounting, transcripts and ``.eval`` logs (read them with ``inspect view``). The
episode itself is findbench's: the solver hands :func:`findbench.interpret.episode.run_episode`
a chat that calls Inspect's model, so prompts, the text command protocol and the function
calls are those of ``findbench interpret --engine native``. Inspect also runs the ``tools``
protocol, which the native engine does not: the agent experiments with native tool calls of
``call_function(inputs)`` (:func:`call_function_tool`, :func:`run_tool_episode`).

What this module registers (importing it registers them; Inspect imports it through the
``inspect_ai`` entry point of the findbench distribution, :mod:`findbench.interpret._inspect_registry`):

- task ``findbench/find_interpret``: one :class:`~inspect_ai.dataset.Sample` per FIND function
  (id: the function id, metadata: the dataset row and the method), solved by
  :func:`find_agent` and scored by the scorers below::

      inspect eval findbench/find_interpret -T configs=strings -T limit=2 --model hf/local -M model_path=<folder>

- solver :func:`find_agent`: one episode; the :class:`~findbench.interpret.episode.Episode`
  record goes to the sample's store under :data:`STORE_KEY`, the conversation to the
  sample's messages (``tools``: Inspect's own, tool calls and results included), the parsed
  answer (in the protocol's format) to its output.
- scorers, thin wrappers over findbench's scoring functions: :func:`nmse_success` (numeric,
  :func:`~findbench.find.code_scoring.score_nmse`), :func:`exact_match` (strings,
  :func:`~findbench.find.code_scoring.score_exact_match`), :func:`domain_iou` (numeric,
  :func:`findbench.find.domain.score_domain`) and :func:`unit_test_accuracy` (strings and
  neurons, :func:`findbench.judge.judge_unit_tests`). Interpreter code runs in findbench's
  sandbox, never in this process. A scorer gives no score for a category it does not apply to.
- model API ``findbench``: ``--model findbench/<spec>`` answers with a findbench LM
  (:func:`findbench.lm.load_lm`: ``embedded``, a folder, a Hub id; a server URL with
  ``-M model=<served name>``, or ``--model findbench/<served name> --model-base-url <URL>``).
  ``-M cache=<file>`` puts findbench's sqlite request cache
  (:class:`~findbench.lm.cache.CachedLM`) around it, so a rerun after an interruption does
  not repeat finished requests.

:func:`run_inspect_interpretations` (``findbench interpret --engine inspect``) runs the task
with Inspect's ``eval()`` and writes the usual run folder from the logs, so
``findbench evaluate`` scores it unchanged.

Protocols (task argument ``protocol``, recorded in the task's metadata, each episode and
``run.json``):

- ``text`` (default): FIND's ``PYTHON(function.py ...)`` commands in the messages, with every model.
- ``tools``: the model gets one tool, ``call_function(inputs: list[str | float])``; each call
  runs the row's function in this process through the same
  :class:`~findbench.interpret.calls.FunctionRunner` as a text command (same values, same
  outputs and seeded noise, the same ``Response: ...`` line as the tool's result) and is
  recorded in the episode's ``calls`` with its round. A call with bad inputs
  (:func:`~findbench.interpret.protocol.tool_command`: not a list of strings or numbers,
  empty, too many or too long values) is a tool error, counted in ``malformed_commands``; a
  message with neither a tool call nor an answer gets
  :data:`~findbench.interpret.protocol.TOOL_UNRECOGNIZED_REPLY` and is counted in
  ``unrecognized_turns``, as in ``text``. The answer is text, as in
  ``text``, and ends the episode (tool calls in it are not run); so does the round limit. It
  needs a provider that passes tools to its model (``openai-api/...``, ``vllm/...``, ``hf/...``
  with a chat template that has tools, ``mockllm/model`` in tests); findbench's own models
  (``findbench/<spec>``) are text-only and refuse tools.

Both protocols take a budget of generated tokens per episode (task argument
``episode_tokens``, ``findbench interpret --episode-tokens``): each turn's ``max_tokens`` is
capped at what is left, and a turn without an answer that spends it ends the episode
(``stop_reason`` ``"token_limit"``). Turns count the ``output_tokens`` Inspect reports for
them (``findbench/<spec>`` models: counted with the LM's tokenizer), else an estimate of 4
characters a token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
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
from inspect_ai.tool import ToolChoice, ToolDef, ToolError, ToolInfo

from findbench._version import __version__
from findbench.interpret.calls import FunctionRunner
from findbench.interpret.episode import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_ROUNDS,
    ChatReply,
    Episode,
    _add_usage,
    _budget_spent,
    _reply_tokens,
    _turn_limit,
    count_tokens,
    open_episode,
    run_command,
    run_episode,
)
from findbench.interpret.prompts import check_method, turn_grammar
from findbench.interpret.protocol import (
    MAX_INPUT_CHARS,
    MAX_INPUTS_PER_COMMAND,
    NEURON_CATEGORIES,
    PROTOCOL,
    REPLY_PREFIX,
    TOOL_NAME,
    TOOL_UNRECOGNIZED_REPLY,
    check_protocol,
    format_answer,
    parse_answer,
    tool_call_text,
    tool_command,
)
from findbench.interpret.references import REFERENCE_INTERPRETERS, reference_answer
from findbench.interpret.run import (
    LM_CACHE,
    _as_list,
    _check_int,
    check_methods,
    episode_dir,
    is_complete_episode,
    record_run_info,
    run_info,
    write_episode,
)
from findbench.lm.base import Constraint, check_structured_outputs, use_structured_outputs
from findbench.schema import CATEGORIES, parse_function_id

__all__ = [
    "ENGINE",
    "STORE_KEY",
    "TASK_NAME",
    "LOG_DIR",
    "find_interpret",
    "find_samples",
    "find_agent",
    "call_function_tool",
    "run_tool_episode",
    "inspect_chat",
    "nmse_success",
    "exact_match",
    "domain_iou",
    "unit_test_accuracy",
    "judge_explanation",
    "FindbenchModelAPI",
    "findbench_model_api",
    "to_chat_messages",
    "from_chat_messages",
    "inspect_model_name",
    "episodes_from_log",
    "run_inspect_interpretations",
]

#: ``engine`` of run folders written from Inspect logs.
ENGINE = "inspect"
#: Key of the episode record (``Episode.to_dict()``) in a sample's store.
STORE_KEY = "findbench_episode"
#: The task's registry name (``inspect eval findbench/find_interpret``).
TASK_NAME = "findbench/find_interpret"
#: Folder of the ``.eval`` logs inside a run folder.
LOG_DIR = "logs"


# ----------------------------------------------------------------------------------- messages


def to_chat_messages(messages: Iterable[Mapping[str, str]]) -> list[ChatMessage]:
    """findbench's ``{"role", "content"}`` dicts as Inspect chat messages."""
    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
    out: list[ChatMessage] = []
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in kinds:
            raise ValueError(f"messages[{i}]['role'] must be one of {tuple(kinds)}, got {role!r}")
        out.append(kinds[role](content=str(m.get("content", ""))))
    return out


def from_chat_messages(messages: Iterable[ChatMessage]) -> list[dict[str, str]]:
    """Inspect chat messages as findbench's ``{"role", "content"}`` dicts (text content only),
    the transcript of an episode record. Tool calls become text lines after the assistant's
    text (``call_function(inputs=["a", "b"])``, :func:`~findbench.interpret.protocol.tool_call_text`);
    a tool result becomes a message of role ``tool`` holding its reply line, or for a refused
    call ``Response: Error in <call>: <why>.`` as a malformed text command is answered."""
    out = []
    calls: dict[str, str] = {}
    for i, m in enumerate(messages):
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
        else:
            raise ValueError(f"messages[{i}]: role {m.role!r} is not part of an interpreter episode")
    return out


def _usage_dict(usage: ModelUsage | None) -> dict[str, int] | None:
    if usage is None:
        return None
    return {k: v for k, v in usage.model_dump().items() if isinstance(v, int) and not isinstance(v, bool)}


def inspect_chat(model: Any = None, constraint: Any = None) -> Any:
    """An episode chat over an Inspect model (the task's model when None): each turn is one
    ``generate`` call, so it is logged, retried, rate-limited and counted by Inspect; the
    reply carries the call's token usage. ``constraint`` (a grammar, or a function of the
    messages giving the next turn's) travels as vLLM's ``structured_outputs`` request field in
    the call's ``extra_body``: findbench's model API applies it, and so does a vLLM server."""
    from findbench.lm.openai_lm import structured_outputs_field

    async def chat(messages: list[dict[str, str]], max_tokens: int | None = None) -> ChatReply:
        active = get_model(model)
        grammar = constraint(messages) if callable(constraint) else constraint
        config = GenerateConfig(max_tokens=max_tokens,
                                extra_body={"structured_outputs": structured_outputs_field(grammar)} if grammar else None)
        output = await active.generate(to_chat_messages(messages), config=config)
        return ChatReply(output.completion, usage=_usage_dict(output.usage))

    return chat


# -------------------------------------------------------------------------- the tools protocol


_TOOL_DESCRIPTION = (
    "Run the unknown function f(x) on each of the inputs. Returns one line: "
    "'Response: Function input - output pairs: (x1, f(x1)) (x2, f(x2)) ...'."
)
_INPUTS_DESCRIPTION = (
    f"The inputs to run f(x) on, one call per input: strings, or numbers for a function of numbers. "
    f"1 to {MAX_INPUTS_PER_COMMAND} inputs, each at most {MAX_INPUT_CHARS} characters."
)


def call_function_tool(runner: FunctionRunner, episode: Episode) -> ToolDef:
    """The ``call_function(inputs)`` tool of one episode.

    Each call checks its inputs (:func:`~findbench.interpret.protocol.tool_command`), runs
    them through ``runner`` as a text command's values run, adds the call's record to
    ``episode.calls`` with round ``episode.rounds`` (the turn in progress) and returns the reply
    line. Bad inputs are recorded and counted in ``episode.malformed_commands``, then raised as
    a :class:`~inspect_ai.tool.ToolError` for the model to read. Calls run one at a time, in
    the order the model made them; the result is never truncated.
    """
    if not isinstance(runner, FunctionRunner):
        raise TypeError(f"runner must be a FunctionRunner, got {type(runner).__name__}")
    if not isinstance(episode, Episode):
        raise TypeError(f"episode must be an Episode, got {type(episode).__name__}")

    async def execute(inputs: list[str | float]) -> str:
        command = tool_command(inputs)
        line = await run_command(runner, command, episode.rounds, episode)
        if command.malformed:
            raise ToolError(str(command.error))
        return line

    return ToolDef(execute, name=TOOL_NAME, description=_TOOL_DESCRIPTION, parameters={"inputs": _INPUTS_DESCRIPTION},
                   parallel=False, max_output=0)


async def _run_tool_calls(messages: list[ChatMessage], tool: ToolDef, episode: Episode) -> None:
    """Run the tool calls of the last (assistant) message, append the results to ``messages``
    and keep ``episode.calls`` in the order of the calls. A call Inspect refuses before the tool
    runs (arguments that do not fit the tool's schema, another tool's name, unparsable JSON)
    is recorded and counted here as malformed; the tool records the calls it runs."""
    assistant = messages[-1]
    assert isinstance(assistant, ChatMessageAssistant)
    by_id = {call.id: call for call in assistant.tool_calls or []}
    start = len(episode.calls)
    result = await execute_tools(messages, [tool])
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


async def run_tool_episode(
    row: Mapping[str, Any],
    model: Any = None,
    *,
    method: str = "aia",
    rounds: int = DEFAULT_ROUNDS,
    max_tokens: int | None = None,
    seed: int = 0,
    function: Any = None,
    reference: str | None = None,
    episode_tokens: int | None = None,
) -> tuple[Episode, list[ChatMessage]]:
    """One episode of the ``tools`` protocol on ``row`` with an Inspect model (the task's
    model when None); the record and Inspect's conversation (tool calls and results included).

    The loop of :func:`~findbench.interpret.episode.run_episode`, with the ``tools`` prompts
    and :func:`call_function_tool` offered on every turn: a message with an answer ends the
    episode (its tool calls are not run), one with tool calls has them run, one with neither
    gets :data:`~findbench.interpret.protocol.TOOL_UNRECOGNIZED_REPLY` and counts in
    ``unrecognized_turns``. Arguments as :func:`~findbench.interpret.episode.run_episode`'s; ``max_tokens``
    goes to the model's ``GenerateConfig``; ``reference`` is an answer given on the first turn
    instead of calling a model (the ``oracle`` / ``random`` interpreters). With
    ``episode_tokens``, each turn's ``max_tokens`` is capped at what is left of that budget and
    a turn without an answer that spends it ends the episode (after its tool calls run),
    ``stop_reason`` ``"token_limit"``; a turn counts the ``output_tokens`` of its
    ``ModelOutput.usage``, else an estimate of 4 characters a token of its text and tool calls.
    """
    _check_int("max_tokens", max_tokens, 1, optional=True)
    _check_int("episode_tokens", episode_tokens, 1, optional=True)
    if reference is not None and not isinstance(reference, str):
        raise TypeError(f"reference must be an answer text or None, got {type(reference).__name__}")
    runner, episode = await open_episode(row, method=method, rounds=rounds, seed=seed, function=function, protocol="tools",
                                         episode_tokens=episode_tokens)
    tool = call_function_tool(runner, episode)
    messages = to_chat_messages(episode.messages)
    for turn in range(1, episode.max_rounds + 1):
        episode.rounds = turn
        if reference is not None:
            output = ModelOutput.from_content(model="none", content=reference)
        else:
            limit = _turn_limit(max_tokens, episode_tokens, episode.generated_tokens or 0)
            config = GenerateConfig(max_tokens=limit) if limit is not None else GenerateConfig()
            output = await get_model(model).generate(messages, tools=[tool], config=config)
        usage = _usage_dict(output.usage)
        episode.usage = _add_usage(episode.usage, usage)
        message = output.message
        generated = "\n".join([message.text] + [tool_call_text(c.arguments, c.function) for c in message.tool_calls or []])
        episode.generated_tokens = (episode.generated_tokens or 0) + _reply_tokens(usage, generated)
        messages.append(message)
        answer = parse_answer(message.text)
        if answer is not None:
            episode.answer, episode.finished, episode.stop_reason = answer, True, "answer"
            break
        if message.tool_calls:
            await _run_tool_calls(messages, tool, episode)
        else:
            messages.append(ChatMessageUser(content=TOOL_UNRECOGNIZED_REPLY))
            episode.unrecognized_turns += 1
        if _budget_spent(episode):
            episode.stop_reason = "token_limit"
            break
    episode.messages = from_chat_messages(messages)
    return episode, messages


# ------------------------------------------------------------------------------------ dataset


def _json_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as plain JSON values (the log stores sample metadata as JSON)."""
    return json.loads(json.dumps(dict(row), default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v)))


def find_samples(
    configs: Sequence[str] | str | None = None,
    method: str = "aia",
    *,
    limit: int | None = None,
    sample: int | None = None,
    functions: Sequence[str] | str | None = None,
    data: str | os.PathLike | None = None,
    seed: int = 0,
    interpreter: str | None = None,
) -> list[Sample]:
    """One sample per FIND function: id the function id, metadata ``{"row", "method"}``.

    ``configs`` default to every category (``aia``) or the neuron ones (MILAN methods), less
    those ``functions`` leave out; ``limit`` keeps the first functions of each config,
    ``sample`` a seeded sample of them stratified by subcategory;
    ``interpreter`` ``"oracle"`` / ``"random"`` / ``"constant"`` / ``"empty"`` adds the reference
    answer (:func:`findbench.interpret.references.reference_answer`) to the metadata
    (the solver then answers with it, no model is called).
    """
    check_method(method, "neurons_entities")
    function_list = _as_list("functions", functions)
    for f in function_list or []:
        try:
            parse_function_id(f)
        except ValueError as exc:
            raise ValueError(f"functions: {exc}") from None
    config_list = _as_list("configs", configs)
    if config_list is None:
        config_list = [c for c in CATEGORIES if method == "aia" or c in NEURON_CATEGORIES]
        if function_list:
            config_list = [c for c in config_list if any(parse_function_id(f)[0] == c for f in function_list)]
    if not config_list:
        raise ValueError(f"configs: give at least one of {CATEGORIES}")
    for c in config_list:
        if c not in CATEGORIES:
            raise ValueError(f"configs: unknown config {c!r}; choose from {CATEGORIES}")
        try:
            check_method(method, c)
        except ValueError as exc:
            raise ValueError(f"method: {exc}") from None
    _check_int("limit", limit, 1, optional=True)
    _check_int("sample", sample, 1, optional=True)
    _check_int("seed", seed, None)
    if interpreter is not None and interpreter not in REFERENCE_INTERPRETERS:
        raise ValueError(f"interpreter must be one of {REFERENCE_INTERPRETERS} or None (the task's model), got {interpreter!r}")

    from findbench.find import load_rows
    from findbench.find.rows import sample_rows

    wanted = set(function_list or [])
    samples: list[Sample] = []
    found: set[str] = set()
    for category in config_list:
        pool = load_rows(category, seed=seed, data=data)
        rows = [r for r in pool if not wanted or r["function_id"] in wanted]
        if limit is not None:
            rows = rows[:limit]
        if sample is not None:
            rows = sample_rows(rows, sample, seed=seed)
        for row in rows:
            found.add(row["function_id"])
            metadata: dict[str, Any] = {"row": _json_row(row), "method": method}
            if interpreter is not None:
                answer = reference_answer(interpreter, row, pool, seed=seed)
                metadata["reference_answer"] = format_answer(answer.description, answer.domain, answer.code)
            samples.append(Sample(input=f"Interpret the FIND function {row['function_id']} (method {method}).",
                                  target=str(row.get("description") or ""), id=row["function_id"], metadata=metadata))
    missing = sorted(f for f in wanted - found if parse_function_id(f)[0] in config_list)
    if missing:
        where = f"data folder {data}" if data is not None else f"procedural data (seed {seed})"
        raise ValueError(f"functions: {missing} are not in the {where}")
    stray = sorted(f for f in wanted if parse_function_id(f)[0] not in config_list)
    if stray:
        raise ValueError(f"functions: {stray} are not in configs {config_list}")
    return samples


# ------------------------------------------------------------------------------------- solver


@solver
def find_agent(rounds: int = DEFAULT_ROUNDS, max_tokens: int | None = None, seed: int = 0, protocol: str = PROTOCOL,
               episode_tokens: int | None = None, structured_outputs: str = "auto"):
    """One FIND episode per sample with the task's model (or the sample's reference answer),
    in ``protocol`` (``text``: :func:`~findbench.interpret.episode.run_episode`; ``tools``:
    :func:`run_tool_episode`), at most ``rounds`` turns of at most ``max_tokens`` tokens and,
    with ``episode_tokens``, at most that many generated tokens in all.

    The episode's record is stored under :data:`STORE_KEY`; the sample's messages become the
    episode's conversation and its output the parsed answer (empty when a limit came first).
    ``structured_outputs`` (``auto``/``on``/``off``): each ``text`` turn follows
    :func:`~findbench.interpret.prompts.turn_grammar` where
    :func:`~findbench.lm.base.use_structured_outputs` says so for a findbench model (``auto``:
    in-process models), and with ``on`` for any other provider (as vLLM's request field).
    """
    _check_int("rounds", rounds, 1)
    _check_int("max_tokens", max_tokens, 1, optional=True)
    _check_int("episode_tokens", episode_tokens, 1, optional=True)
    check_protocol(protocol)
    check_structured_outputs(structured_outputs)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        row, method = state.metadata["row"], state.metadata["method"]
        reference = state.metadata.get("reference_answer")
        if protocol == "tools":
            episode, messages = await run_tool_episode(row, method=method, rounds=rounds, max_tokens=max_tokens, seed=seed,
                                                       reference=reference, episode_tokens=episode_tokens)
            state.messages = messages
        else:
            if reference is not None:
                async def chat(messages: list[dict[str, str]], max_tokens: int | None = None) -> str:
                    return reference
            else:
                api = getattr(get_model(), "api", None)
                applied = (use_structured_outputs(api.lm, structured_outputs) if isinstance(api, FindbenchModelAPI)
                           else structured_outputs == "on")
                chat = inspect_chat(constraint=turn_grammar(row["category"], rounds) if applied else None)
            episode = await run_episode(row, chat, method=method, rounds=rounds, max_tokens=max_tokens, seed=seed,
                                        episode_tokens=episode_tokens)
            state.messages = to_chat_messages(episode.messages)
        state.store.set(STORE_KEY, episode.to_dict())
        answer = format_answer(episode.description, episode.answer.domain, episode.answer.code) if episode.answer else ""
        state.output = ModelOutput.from_content(model=str(state.model), content=answer)
        return state

    return solve


def _episode(state: TaskState) -> Episode:
    record = state.store.get(STORE_KEY)
    if record is None:
        raise ValueError(f"sample {state.sample_id}: no episode in the store under {STORE_KEY!r} (solve it with find_agent)")
    return Episode.from_dict(record)


# ------------------------------------------------------------------------------------ scorers


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


@scorer(metrics=[mean(), stderr()])
def nmse_success():
    """Numeric functions: 1.0 when the answer's code has NMSE below FIND's threshold
    (:func:`~findbench.find.code_scoring.score_nmse`, run in the sandbox), else 0.0; the
    NMSE itself in the score's metadata (None for inf: no code, failure)."""
    from findbench.find.code_scoring import NMSE_THRESHOLD, score_nmse

    async def score(state: TaskState, target: Target) -> Score | None:
        row = state.metadata["row"]
        if row["category"] != "numeric":
            return None
        code = _episode(state).code
        value = math.inf
        if code.strip():
            value = float((await asyncio.to_thread(score_nmse, [code], [row["code"]]))["nmse"][0])
        return Score(value=float(value < NMSE_THRESHOLD), answer=code, explanation=f"NMSE {value}",
                     metadata={"nmse": _finite(value)})

    return score


@scorer(metrics=[mean(), stderr()])
def exact_match():
    """String functions: the share of the row's test inputs on which the answer's code returns
    the ground truth's output (:func:`~findbench.find.code_scoring.score_exact_match`, run in
    the sandbox); 0.0 without code."""
    from findbench.find.code_scoring import score_exact_match

    async def score(state: TaskState, target: Target) -> Score | None:
        row = state.metadata["row"]
        if row["category"] != "strings":
            return None
        code = _episode(state).code
        value = 0.0
        if code.strip():
            out = await asyncio.to_thread(score_exact_match, [code], [row["code"]], [list(row["test_inputs"])])
            value = float(out["per_function"][0])
        return Score(value=value, answer=code)

    return score


@scorer(metrics=[mean(), stderr()])
def domain_iou():
    """Numeric functions: IoU of the answer's ``[DOMAIN]`` with the corrupted interval
    (:func:`findbench.find.domain.score_domain`)."""
    from findbench.find.domain import score_domain

    async def score(state: TaskState, target: Target) -> Score | None:
        row = state.metadata["row"]
        if row["category"] != "numeric":
            return None
        domain = _episode(state).domain
        out = await asyncio.to_thread(score_domain, [domain], [row])
        return Score(value=float(out["iou"][0]), answer=domain, metadata={"status": out["status"][0]})

    return score


def _check_judge(judge: Any) -> None:
    """Fail before any episode runs when a registered judge (``embedded-evaluator``) is not
    available, rather than at the first score."""
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
    """Strings and neurons: the share of the row's unit tests the judge answers right from the
    answer's description (:func:`findbench.judge.judge_unit_tests`).

    ``judge`` is a spec for :func:`findbench.lm.load_lm` (loaded on the first score, once per
    scorer) or an LM instance; ``judge_mode`` defaults to the mode a trained judge records.
    Calls to the judge run one at a time. The score's metadata records ``truncated``: whether
    the description was cut to the judge's limit (:data:`findbench.judge.MAX_DESCRIPTION_TOKENS`),
    and ``decisions``: the judge's decision on each unit test (``"decisions"`` of
    :func:`~findbench.judge.judge_unit_tests`), which the explanation lists with the options
    (:func:`judge_explanation`).
    """
    from findbench.judge import judge_mode_of, judge_unit_tests, load_judge, normalize_unit_test

    mode = judge_mode or judge_mode_of(judge)
    lock = threading.Lock()
    loaded: list[Any] = []

    def run(description: str, tests: list[dict], category: str) -> tuple[float, bool, list[dict]]:
        with lock:
            if not loaded:
                loaded.append(load_judge(judge, judge_model=judge_model, cache=judge_cache))
            out = judge_unit_tests(loaded[0], [description], [tests], category, mode=mode)
        return float(out["per_function"][0]), bool(out["truncated"]), out["decisions"][0]

    async def score(state: TaskState, target: Target) -> Score | None:
        row = state.metadata["row"]
        if row["category"] == "numeric" or not row.get("unit_tests"):
            return None
        description = _episode(state).description
        tests = [normalize_unit_test(t) for t in row["unit_tests"]]
        value, truncated, decisions = await asyncio.to_thread(run, description, tests, row["category"])
        return Score(value=value, answer=description, explanation=judge_explanation(tests, decisions, row["category"], mode),
                     metadata={"judge_mode": mode, "truncated": truncated, "decisions": decisions})

    return score


def judge_explanation(tests: list[dict], decisions: list[dict], category: str, mode: str) -> str:
    """The judge's decisions on a function's unit tests as text, one line per test: right or
    wrong, the pick, the correct option, the margin (the correct option's score minus the best
    wrong one's, in the ``mode``'s units; the raw answer in ``generate`` mode) and the options."""
    from findbench.judge import render_pmi_option

    right = sum(bool(d["right"]) for d in decisions)
    lines = [f"judge ({mode}): {right}/{len(decisions)} unit tests right; margin = score of the correct option "
             "minus the best wrong one"]
    for k, (test, d) in enumerate(zip(tests, decisions), 1):
        options = " | ".join(f"{c}: {render_pmi_option(test, c, category)}" for c in range(1, len(test["inputs"]) + 1))
        if d["margin"] is not None:
            how = f", margin {d['margin']:+.3g}"
        elif d["answer"] is not None:
            how = f", answer {d['answer'][:80]!r}"
        else:
            how = ", not judged (empty description)" if d["chosen"] is None else ""
        verdict = "right" if d["right"] else "WRONG"
        lines.append(f"{k}. {verdict}: chose {d['chosen']}, correct {d['correct']}{how} — {options}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------- task


@task
def find_interpret(
    configs: str | list[str] | None = None,
    method: str = "aia",
    limit: int | None = None,
    sample: int | None = None,
    functions: str | list[str] | None = None,
    rounds: int = DEFAULT_ROUNDS,
    data: str | None = None,
    seed: int = 0,
    max_tokens: int | None = None,
    interpreter: str | None = None,
    judge: Any = "embedded-evaluator",
    judge_mode: str | None = None,
    judge_model: str | None = None,
    judge_cache: str | None = None,
    protocol: str = PROTOCOL,
    episode_tokens: int | None = None,
    structured_outputs: str = "auto",
) -> Task:
    """FIND's interpretation task (FIND §3, Table 2) for one method.

    Args:
        configs: categories (comma-separated or a list); default: all (``aia``) or the neuron
            ones (MILAN methods).
        method: ``aia``, ``milan`` or ``aia+milan``.
        limit: first ``limit`` functions per config; ``sample``: that many per config, seeded
            and stratified by subcategory; ``functions``: function ids to keep.
        rounds: most model turns per episode; ``max_tokens``: per-turn limit (None: the
            model's ``GenerateConfig``).
        data: dataset folder written by ``findbench build`` (default: procedural rows of ``seed``).
        seed: procedural rows and numeric noise.
        interpreter: ``oracle`` / ``random`` / ``constant`` / ``empty`` answer without a model
            (:mod:`findbench.interpret.references`); None
            uses the eval's model.
        judge: unit-test judge spec (or LM); ``None`` or ``"none"`` leaves the description
            unscored (``findbench evaluate`` scores it later). Loaded only when scored.
        judge_mode, judge_model, judge_cache: as ``findbench evaluate``'s.
        protocol: ``text`` (FIND's ``PYTHON(...)`` commands, any model) or ``tools`` (native
            calls of the ``call_function`` tool; the model's provider must support tools).
            Recorded in the task's metadata and each episode.
        episode_tokens: most tokens the model may generate over one episode, summed over its
            turns (``-T episode_tokens=N``; None: no limit); an episode that spends it without
            answering stops with ``stop_reason`` ``"token_limit"``.
        structured_outputs: ``auto`` / ``on`` / ``off``: whether each ``text`` turn follows the
            turn grammar (see :func:`find_agent`).
    """
    check_protocol(protocol)
    _check_int("episode_tokens", episode_tokens, 1, optional=True)
    samples = find_samples(configs, method, limit=limit, sample=sample, functions=functions, data=data, seed=seed, interpreter=interpreter)
    present = {s.metadata["row"]["category"] for s in samples}
    scorers = []
    if "numeric" in present:
        scorers += [nmse_success(), domain_iou()]
    if "strings" in present:
        scorers.append(exact_match())
    if judge not in (None, "none") and present - {"numeric"}:
        _check_judge(judge)
        scorers.append(unit_test_accuracy(judge, judge_mode=judge_mode, judge_model=judge_model, judge_cache=judge_cache))
    return Task(
        dataset=MemoryDataset(samples, name="find"),
        solver=find_agent(rounds=rounds, max_tokens=max_tokens, seed=seed, protocol=protocol, episode_tokens=episode_tokens,
                          structured_outputs=structured_outputs),
        scorer=scorers or None,
        metadata={"findbench_version": __version__, "protocol": protocol, "method": method, "episode_tokens": episode_tokens,
                  "structured_outputs": structured_outputs},
    )


# ---------------------------------------------------------------------------------- model API


def _thread_safe(lm: Any) -> bool:
    from findbench.lm.cache import CachedLM
    from findbench.lm.openai_lm import OpenAILM

    return isinstance(lm.inner if isinstance(lm, CachedLM) else lm, OpenAILM)


class FindbenchModelAPI(ModelAPI):
    """Inspect's view of a findbench LM (``--model findbench/<spec>``).

    Model args (``-M``): ``cache`` (sqlite file of :class:`~findbench.lm.cache.CachedLM`),
    ``model`` (served model name, for URL specs), ``lm`` (an LM instance instead of a spec,
    from Python), and backend options passed to :func:`findbench.lm.load_lm` (``batch_size``,
    ``device``, ``dtype``, ...). Token usage is counted with the backend's tokenizer where it
    has one (prompt rendered with the chat template), else estimated at 4 characters a token
    (:func:`~findbench.interpret.episode.count_tokens`, as the native engine counts).

    The LM is loaded on the first ``generate``: Inspect also builds providers just to look up
    model information, and those must not load weights.
    """

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


# ----------------------------------------------------------------------------- run folders


def _inspect_providers() -> set[str]:
    from inspect_ai._util.registry import registry_find, registry_unqualified_name

    return {registry_unqualified_name(info) for info in
            (getattr(o, "__registry_info__", None) for o in registry_find(lambda i: i.type == "modelapi")) if info is not None}


def inspect_model_name(interpreter: str) -> str:
    """The Inspect model for an interpreter: ``"none"`` for the references (``oracle``,
    ``random``, ``constant``, ``empty``: no model is called); ``<provider>/<model>`` as is
    when Inspect knows the provider (``hf/local``, ``mockllm/model``, ``openai-api/...``,
    ``vllm/...``, ``findbench/...``); any other spec (``embedded``, a folder, a Hub id, a
    server URL) as ``findbench/<spec>``."""
    if not isinstance(interpreter, str) or not interpreter.strip():
        raise ValueError(f"interpreter must be a non-empty string, got {interpreter!r}")
    if interpreter in REFERENCE_INTERPRETERS:
        return "none"
    head, sep, _ = interpreter.partition("/")
    if sep and head and not interpreter.startswith(("http://", "https://")) and not Path(interpreter).exists():
        if head in _inspect_providers():
            return interpreter
    return f"findbench/{interpreter}"


def episodes_from_log(log: Any) -> list[Episode]:
    """The episodes of a log's samples that finished without error (an ``EvalLog``, or the
    path of a ``.eval`` / ``.json`` log)."""
    if isinstance(log, (str, os.PathLike)):
        from inspect_ai.log import read_eval_log

        log = read_eval_log(os.fspath(log))
    episodes = []
    for sample in log.samples or []:
        record = (sample.store or {}).get(STORE_KEY)
        if sample.error is None and record is not None:
            episodes.append(Episode.from_dict(record))
    return episodes


def _shown_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """Model args for run.json: JSON values as they are, anything else by its name."""
    plain = (str, int, float, bool, type(None))
    return {k: v if isinstance(v, plain) else getattr(v, "name", None) or type(v).__name__ for k, v in args.items()}


def run_inspect_interpretations(
    rows_or_data: str | os.PathLike | None = None,
    interpreter: str = "embedded",
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
    model_args: Mapping[str, Any] | None = None,
    display: str | None = None,
    protocol: str = PROTOCOL,
    episode_tokens: int | None = None,
    structured_outputs: str = "auto",
) -> Path:
    """:func:`findbench.interpret.run.run_interpretations` on Inspect: ``eval()`` of
    :func:`find_interpret` (one task per method) with ``interpreter`` as the model, the
    ``.eval`` logs in ``<out>/logs/``, then the run folder written from the logs.

    ``interpreter`` is mapped by :func:`inspect_model_name`; findbench models get the run's
    request cache (``<out>/lm-cache.sqlite``) and ``model`` (served name, URL specs).
    Other Inspect models take their model args from ``model_args`` or, when that is empty,
    from ``INSPECT_EVAL_MODEL_ARGS`` (e.g. ``model_path=<folder>`` for ``hf/local``).
    ``max_connections`` is Inspect's limit of concurrent model calls; ``max_tokens`` the
    per-turn limit (default :data:`~findbench.interpret.episode.DEFAULT_MAX_TOKENS`);
    ``episode_tokens`` the most tokens generated over one episode (None: no limit; recorded in
    ``run.json``, a resumed run must give the same). A rerun
    with the same ``out`` runs only the episodes without a folder. Samples that fail leave
    no folder; RuntimeError names the log when a task did not finish.

    ``protocol`` ``tools`` runs native tool calls (see the module docstring): it needs an
    Inspect provider whose model supports tools (or a reference such as ``oracle``, which calls no
    model); findbench's own models (``findbench/<spec>``) are text-only, ValueError. The
    protocol is recorded in ``run.json``; a folder holds runs of one protocol.
    ``structured_outputs`` (``auto``/``on``/``off``, see :func:`find_agent`) is recorded there
    too, and a resumed run must give the same.
    """
    from inspect_ai import eval as inspect_eval

    method_list = check_methods(methods)
    check_protocol(protocol)
    check_structured_outputs(structured_outputs)
    _check_int("rounds", rounds, 1)
    _check_int("max_connections", max_connections, 1)
    _check_int("max_tokens", max_tokens, 1, optional=True)
    _check_int("episode_tokens", episode_tokens, 1, optional=True)
    if rows_or_data is not None and not isinstance(rows_or_data, (str, os.PathLike)):
        raise TypeError(f"rows_or_data must be a data folder or None with the inspect engine, got {type(rows_or_data).__name__}")
    data = str(Path(rows_or_data).resolve()) if rows_or_data is not None else None
    model_name = inspect_model_name(interpreter)
    reference = interpreter if interpreter in REFERENCE_INTERPRETERS else None
    if protocol == "tools" and model_name.startswith("findbench/"):
        raise ValueError(f"protocol 'tools': {model_name} is one of findbench's own models, which speak FIND's text protocol "
                         "only (no tool calls); give an Inspect model whose provider supports tool calls as --interpreter "
                         "(e.g. openai-api/<service>/<model>, vllm/<model>), or use --protocol text")
    out = Path(out)
    args = dict(model_args or {})
    if model_name.startswith("findbench/"):
        args.setdefault("cache", str(out.resolve() / LM_CACHE))
        if model is not None:
            args.setdefault("model", model)
    elif model is not None:
        raise ValueError(f"model: the served model name applies to findbench server URLs; for {model_name!r} name the model "
                         "in the interpreter (e.g. openai-api/<service>/<model>)")
    tokens = max_tokens or DEFAULT_MAX_TOKENS

    tasks, config_list = [], []
    for m in method_list:
        samples = find_samples(configs, m, limit=limit, sample=sample, functions=functions, data=data, seed=seed, interpreter=reference)
        config_list += [c for c in CATEGORIES if c not in config_list and any(s.metadata["row"]["category"] == c for s in samples)]
        pending = [str(s.id) for s in samples if not is_complete_episode(episode_dir(out, str(s.id), m))]
        if pending:
            tasks.append(find_interpret(configs=sorted({parse_function_id(f)[0] for f in pending}), method=m, functions=pending,
                                        rounds=rounds, data=data, seed=seed, max_tokens=tokens, interpreter=reference, judge=None,
                                        protocol=protocol, episode_tokens=episode_tokens,
                                        structured_outputs=structured_outputs))
    info = {
        **run_info(interpreter=interpreter if reference else model_name, model=model, rounds=rounds, seed=seed, data=data,
                   source="data" if data is not None else "procedural", max_tokens=max_tokens, methods=method_list,
                   configs=config_list, protocol=protocol, episode_tokens=episode_tokens),
        "engine": ENGINE,
        "structured_outputs": structured_outputs,
        "inspect_model": model_name,
        "inspect_model_args": _shown_args(args) if args else os.environ.get("INSPECT_EVAL_MODEL_ARGS") or None,
    }
    out.mkdir(parents=True, exist_ok=True)
    old = out / "run.json"
    if old.is_file():
        recorded = json.loads(old.read_text(encoding="utf-8"))
        engine = recorded.get("engine", "native")
        if engine != ENGINE:
            raise ValueError(f"out: {out} holds a run of the {engine} engine; give a new folder for an inspect run")
        if recorded.get("structured_outputs", structured_outputs) != structured_outputs:
            raise ValueError(f"out: {out} holds a run with other settings: structured_outputs={recorded['structured_outputs']!r} "
                             f"(now {structured_outputs!r}); give a new folder to start another run")
    record_run_info(out, info)
    if not tasks:
        return out

    logs = inspect_eval(tasks, model=model_name, model_args=args, log_dir=str(out / LOG_DIR), max_connections=max_connections,
                        display=display, log_format="eval")
    unfinished = []
    for log in logs:
        for episode in episodes_from_log(log):
            write_episode(out, episode)
        if log.status != "success":
            unfinished.append(f"{log.location} ({log.status}{': ' + log.error.message if log.error else ''})")
    if unfinished:
        raise RuntimeError(f"inspect eval did not finish: {'; '.join(unfinished)}; rerun with the same --out to run the rest")
    return out
