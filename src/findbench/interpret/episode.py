"""One interpreter episode on one FIND function (FIND §3): what it records beside its Inspect sample
(:class:`EpisodeState`), and :func:`run_command`, which runs a command in a worker thread (one long
message must not stall the other episodes in flight). The loop on Inspect is in
:mod:`findbench.interpret.solver` (``milan`` shows the outputs on the row's exemplars first and allows
two turns; ``aia+milan`` shows them, then allows the full loop)."""

from __future__ import annotations

import asyncio
from typing import Any

from inspect_ai.util import StoreModel
from pydantic import Field

from findbench.interpret.calls import FunctionRunner
from findbench.interpret.protocol import Answer, Command


class EpisodeState(StoreModel):
    """What one episode records beside its Inspect sample (``state.store_as(EpisodeState)``; the log
    validates it when read back). The transcript, token usage and turns are the sample's own
    (``messages``, ``model_usage``); the row interpreted and the method are its metadata.

    Attributes:
        answer: the parsed final answer, or None when a limit came first.
        stop_reason: ``"answer"``, ``"round_limit"``, ``"token_limit"`` (a turn passed
            ``episode_tokens``: the episode stopped, without that turn) or ``<type>_limit`` (a
            limit of the sample).
        calls: one record per command run (:meth:`FunctionRunner.run`), exemplars first (round 0).
        malformed_commands: commands (tool calls) that could not run.
        unrecognized_turns: turns with neither a command (tool call) nor an answer.
        truncated_messages: messages longer than :data:`~findbench.interpret.protocol.MAX_MESSAGE_CHARS`
            (only their start was read for commands).
        dropped_commands: commands (tool calls) past
            :data:`~findbench.interpret.protocol.MAX_COMMANDS_PER_MESSAGE` in their message, not run.
        access: the access condition (:data:`~findbench.interpret.protocol.ACCESS`).
        tool_calls: one record per white-box tool call, refused ones too (``round``, ``tool``,
            ``arguments`` as JSON text cut to 500 characters, ``error``, ``reply_chars``)."""

    answer: Answer | None = None
    stop_reason: str = "round_limit"
    calls: list[dict[str, Any]] = Field(default_factory=list)
    malformed_commands: int = 0
    unrecognized_turns: int = 0
    truncated_messages: int = 0
    dropped_commands: int = 0
    access: str = "black"
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def description(self) -> str:
        return self.answer.description if self.answer else ""

    @property
    def domain(self) -> str:
        return (self.answer.domain or "") if self.answer else ""

    @property
    def code(self) -> str:
        return (self.answer.code or "") if self.answer else ""


#: The prefix of the store keys of an episode's record (``EpisodeState:<field>``), as a log holds them.
STORE_PREFIX = f"{EpisodeState.__name__}:"


async def run_command(runner: FunctionRunner, command: Command, round: int, episode: EpisodeState) -> str:
    """Run ``command`` (in a worker thread), add its record to ``episode.calls`` (and count it
    when malformed); return the reply line."""
    line, record = await asyncio.to_thread(runner.run, command, round=round)
    episode.calls.append(record)
    episode.malformed_commands += command.malformed
    return line
