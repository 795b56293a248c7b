"""FIND's agent on Inspect (:func:`find_agent`): one episode per sample, over Inspect's own chat
messages, on Inspect's ``react`` loop in either protocol.

- ``text``: each turn follows :func:`~findbench.interpret.prompts.turn_grammar` where structured
  outputs apply; ``on_continue`` reads the message for FIND's commands
  (an answer, else :func:`~findbench.interpret.protocol.turn_commands`, in a worker thread, within the per-turn caps),
  runs them and returns the reply line, which ``react`` sends as the next user message.
- ``tools``: :func:`call_function_tool`, no submit tool; ``on_continue`` keeps the record (call
  order, refused and dropped calls).

Either stops on an answer or the round limit. Reference interpreters answer with the sample's
``reference_turns`` instead of a model. The record is per-sample state
(``store_as(EpisodeState)``, :class:`~findbench.interpret.episode.EpisodeState`); the transcript,
usage and turns are the sample's own.

Budgets are Inspect limits: ``episode_tokens`` is an output-token limit scoped to the episode
(``token_limit(..., type="output")``). The turn whose generation passes the budget stops the
episode (``stop_reason`` ``"token_limit"``) and is not kept (its tokens count in the sample's
usage)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from inspect_ai.agent import AgentState, react
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    GenerateConfig,
    ModelOutput,
    get_model,
)
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import ToolDef, ToolError
from inspect_ai.util import LimitExceededError, apply_limits, token_limit

from findbench.interpret.calls import FunctionRunner
from findbench.interpret.config import AgentConfig
from findbench.interpret.episode import EpisodeState, run_command
from findbench.interpret.prompts import MILAN_TURNS, build_messages, turn_grammar
from findbench.interpret.protocol import (
    MAX_COMMANDS_PER_MESSAGE,
    MAX_INPUT_CHARS,
    MAX_INPUTS_PER_COMMAND,
    REPLY_PREFIX,
    TOOL_NAME,
    TOOL_UNRECOGNIZED_REPLY,
    UNRECOGNIZED_REPLY,
    Answer,
    Command,
    format_answer,
    parse_answer,
    tool_call_text,
    tool_command,
    turn_commands,
)
from findbench.interpret.whitebox import WhiteBox
from findbench.lm.inspect_lm import chat_messages
from findbench.lm.inspect_provider import structured_outputs_applied


def transcript(messages: Iterable[ChatMessage]) -> list[dict[str, str]]:
    """Inspect chat messages as ``{"role", "content"}`` dicts (text only): tool calls
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


# ----------------------------------------------------------------------------- the tools protocol

_TOOL_DESCRIPTION = (
    "Run the unknown function f(x) on each of the inputs. Returns one line: "
    "'Response: Function input - output pairs: (x1, f(x1)) (x2, f(x2)) ...'."
)
_INPUTS_DESCRIPTION = (
    f"The inputs to run f(x) on, one call per input: strings, or numbers for a function of numbers. "
    f"1 to {MAX_INPUTS_PER_COMMAND} inputs, each at most {MAX_INPUT_CHARS} characters."
)
#: The tool error of a call past :data:`MAX_COMMANDS_PER_MESSAGE` in its message.
DROPPED_CALL = f"not run: at most {MAX_COMMANDS_PER_MESSAGE} {TOOL_NAME} calls per message"
#: The tool error of a call in a message that gives the answer.
ANSWERED_CALL = "not run: the message gives the answer, which ends the episode"


@dataclass
class _Turn:
    """The current turn (``number``, from 1) and what the tool did during it, in call order: a call
    record, or None for a call that did not run (past the cap, or in a message that answers)."""

    number: int = 0
    outcomes: list[dict[str, Any] | None] = field(default_factory=list)
    answered: bool = False


def call_function_tool(runner: FunctionRunner, episode: EpisodeState, turn: _Turn | None = None) -> ToolDef:
    """The ``call_function(inputs)`` tool of one episode: runs the inputs through ``runner`` as a text
    command's values, records the call in ``episode.calls`` and returns the reply line; bad inputs are
    recorded as malformed and raised as :class:`~inspect_ai.tool.ToolError`. With ``turn`` (the
    ``tools`` loop's), calls past :data:`MAX_COMMANDS_PER_MESSAGE` in a message, or in a message that
    answers, do not run (a ToolError) and each outcome goes to ``turn.outcomes``."""

    async def execute(inputs: list[str | float]) -> str:
        if turn is not None and (turn.answered or len(turn.outcomes) >= MAX_COMMANDS_PER_MESSAGE):
            turn.outcomes.append(None)
            raise ToolError(ANSWERED_CALL if turn.answered else DROPPED_CALL)
        command = await asyncio.to_thread(tool_command, inputs)  # the agent's list: checked off the event loop
        line = await run_command(runner, command, turn.number if turn is not None else 0, episode)
        if turn is not None:
            turn.outcomes.append(episode.calls[-1])
        if command.malformed:
            raise ToolError(str(command.error))
        return line

    return ToolDef(
        execute,
        name=TOOL_NAME,
        description=_TOOL_DESCRIPTION,
        parameters={"inputs": _INPUTS_DESCRIPTION},
        parallel=False,
        max_output=0,
    )


def _settle_calls(messages: list[ChatMessage], turn: _Turn, episode: EpisodeState) -> None:
    """Put the turn's calls in ``episode.calls`` in call order: a call Inspect refused before the tool
    ran (a schema error) is recorded as malformed; one past the cap is counted in ``dropped_commands``."""
    last = max(i for i, m in enumerate(messages) if isinstance(m, ChatMessageAssistant))
    by_id = {call.id: call for call in messages[last].tool_calls or []}
    # the white-box tools keep their own record
    results = [m for m in messages[last + 1 :] if isinstance(m, ChatMessageTool) and m.function in (TOOL_NAME, None)]
    start = len(episode.calls) - sum(o is not None for o in turn.outcomes)
    del episode.calls[start:]
    outcomes = iter(turn.outcomes)
    for m in results:
        if m.error is None or m.error.type == "unknown":  # the tool ran (a ToolError is "unknown")
            record = next(outcomes, None)
            if record is not None:
                episode.calls.append(record)
            elif m.error is not None and m.error.message == DROPPED_CALL:
                episode.dropped_commands += 1
            continue
        call = by_id.get(m.tool_call_id or "")
        episode.calls.append(
            {
                "round": turn.number,
                "inputs": [],
                "outputs": [],
                "errors": [],
                "error": m.error.message,
                "command": tool_call_text(call.arguments if call else None, call.function if call else TOOL_NAME),
            }
        )
        episode.malformed_commands += 1
    episode.calls.extend(record for record in outcomes if record is not None)  # ran, with no result to show


def find_agent(cfg: AgentConfig) -> Solver:
    """One FIND episode per sample with the task's model (or the sample's reference answer) in
    ``cfg.protocol``; the record goes to the store (``store_as(EpisodeState)``), the parsed answer to
    the output. ``cfg.structured_outputs`` (``auto``/``on``/``off``): each ``text`` turn follows
    :func:`~findbench.interpret.prompts.turn_grammar` (``auto``: where
    :func:`~findbench.lm.base.use_structured_outputs` says so for a findbench model). The solver is
    registered as ``findbench/find_agent``, its log parameters the fields of ``cfg``."""
    return _find_agent(**asdict(cfg))


@solver(name="find_agent")
def _find_agent(**settings: Any) -> Solver:
    cfg = AgentConfig(**settings)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        episode = await run_episode(state, cfg, state.metadata.get("reference_turns"))
        answer = episode.answer
        content = format_answer(answer.description, answer.domain, answer.code, answer.components) if answer else ""
        state.output = ModelOutput.from_content(model=str(state.model), content=content)
        return state

    return solve


async def run_episode(
    state: TaskState, cfg: AgentConfig, reference: Sequence[str | None] | None = None
) -> EpisodeState:
    """One episode on the sample's row on ``react``: at most ``cfg.rounds`` turns (``milan``: two) of
    the task's model (``cfg.max_tokens`` a turn) or of the ``reference`` turns; an answer in a
    message, or the round limit, ends it. ``text``: ``on_continue`` runs the message's commands and
    returns the reply; ``tools``: :func:`call_function_tool` runs the calls, ``on_continue`` settles
    them."""
    from findbench.lm.openai_lm import structured_outputs_field

    episode, row, method = state.store_as(EpisodeState), state.metadata["row"], state.metadata["method"]
    runner, episode.access, exemplar_reply = FunctionRunner(row, seed=cfg.seed), cfg.access, None
    if method != "aia":  # the MILAN methods run the exemplars first, as round 0
        exemplars = Command("exemplars", tuple(str(x) for x in row.get("exemplars") or []))
        exemplar_reply = await run_command(runner, exemplars, 0, episode)
    messages = build_messages(row, method, exemplar_reply=exemplar_reply, protocol=cfg.protocol)
    box = None if cfg.access == "black" else await asyncio.to_thread(WhiteBox, row, cfg.access, cfg.seed)
    if box is not None:  # the task message gets the architecture and the tools
        messages[-1]["content"] += "\n" + box.prompt(cfg.protocol)
    state.messages = chat_messages(messages)  # the system and task messages
    limit = min(cfg.rounds, MILAN_TURNS) if method == "milan" else cfg.rounds  # milan: at most two turns
    text = cfg.protocol != "tools"
    # the turn grammar of a text episode on the task's model, where structured outputs apply
    grammar = (turn_grammar(row["category"], limit, cfg.access != "black") if text and reference is None
               and structured_outputs_applied(get_model(), cfg.structured_outputs) else None)
    turn = _Turn()
    tools = [] if text else [call_function_tool(runner, episode, turn)]
    if box is not None and not text:
        tools += box.inspect_tools(episode, lambda: turn.answered, lambda: turn.number)

    async def model(agent: AgentState, tools: list) -> AgentState:
        if reference is not None:  # its turn-th message (the last repeats); None: the observed interpreter's answer
            content = reference[min(turn.number + 1, len(reference)) - 1]
            if content is None:
                from findbench.interpret.floors import observed_answer

                content = await asyncio.to_thread(observed_answer, runner.row, list(episode.calls), seed=runner.seed)
            output = ModelOutput.from_content(model="none", content=content)
        else:
            extra = None if grammar is None else {
                "structured_outputs": structured_outputs_field(grammar([{"role": m.role} for m in agent.messages]))}
            output = await get_model().generate(
                agent.messages, tools, config=GenerateConfig(max_tokens=cfg.max_tokens, extra_body=extra))
        turn.number += 1
        if not text:
            turn.outcomes, turn.answered = [], False
            answer = await asyncio.to_thread(parse_answer, output.message.text)  # off the event loop: the agent's
            if answer is not None:
                episode.answer, episode.stop_reason, turn.answered = answer, "answer", True
        agent.output = output
        agent.messages.append(output.message)
        return agent

    async def on_text(agent: AgentState) -> bool | str:
        text = agent.output.message.text  # its answer, else its commands within the per-turn caps (off the loop)
        commands = await asyncio.to_thread(lambda: parse_answer(text) or turn_commands(text))
        if isinstance(commands, Answer):
            episode.answer, episode.stop_reason = commands, "answer"
            return False
        lines = [await run_command(runner, c, turn.number, episode) for c in commands.commands]
        if box is not None:
            lines += await box.text_replies(agent.output.message.text, episode, turn.number)
        if not lines:
            lines = [UNRECOGNIZED_REPLY]
            episode.unrecognized_turns += 1
        episode.truncated_messages += commands.truncated
        episode.dropped_commands += commands.dropped
        reply = "\n".join(lines + ([commands.note] if commands.note else []))
        if turn.number < limit:
            return reply
        agent.messages.append(ChatMessageUser(content=reply))
        return False

    async def on_tools(agent: AgentState) -> bool | str:
        _settle_calls(agent.messages, turn, episode)
        if box is not None:
            box.settle(agent.messages, episode, turn.number)
        if turn.answered:
            return False
        if not agent.output.message.tool_calls:
            episode.unrecognized_turns += 1
            if turn.number < limit:
                return TOOL_UNRECOGNIZED_REPLY
            agent.messages.append(ChatMessageUser(content=TOOL_UNRECOGNIZED_REPLY))
        return turn.number < limit

    agent = AgentState(messages=state.messages)
    loop = react(prompt=None, tools=tools, model=model, submit=False, on_continue=on_text if text else on_tools)
    try:  # the episode's token budget: stop_reason token_limit when a turn passes it
        with apply_limits([token_limit(cfg.episode_tokens, type="output")], catch_errors=True) as scope:
            agent = await loop(agent)
    except LimitExceededError as exc:  # a limit of the sample, which goes on
        episode.stop_reason = f"{exc.type}_limit"
        raise
    finally:  # however the loop stops, the sample keeps the transcript (and the code tool's sandbox stops)
        state.messages = agent.messages
        if box is not None:
            await asyncio.to_thread(box.close)
    if scope.limit_error is not None:
        episode.stop_reason = "token_limit"
    return episode
