"""One interpreter episode on one FIND function (FIND §3): the record and its steps.

:func:`open_episode` starts one (``milan`` shows the outputs on the row's exemplars first and
allows two turns; ``aia+milan`` shows them, then allows the full loop), :func:`read_turn` reads an
agent message within the per-turn caps of :func:`~findbench.interpret.protocol.turn_commands` and
:func:`run_command` runs a command in a worker thread (one long message must not stall the other
episodes in flight). The loop on Inspect is in :mod:`findbench.interpret.solver`."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from findbench._io import read_untrusted_json
from findbench.interpret.calls import FunctionRunner
from findbench.interpret.prompts import MILAN_TURNS, build_messages
from findbench.interpret.protocol import (
    PROTOCOL,
    Answer,
    Command,
    TurnCommands,
    parse_answer,
    turn_commands,
)
from findbench.lm.base import DEFAULT_MAX_TOKENS, count_tokens, estimate_tokens  # noqa: F401 (moved to lm/)

#: FIND's cap on model turns per episode.
DEFAULT_ROUNDS = 20
#: Tokens an Inspect provider's model may generate per turn when ``findbench interpret`` is given no
#: ``max_tokens`` (without one, a provider lets a turn run to tens of thousands of tokens).
DEFAULT_API_MAX_TOKENS = 1024


@dataclass
class Episode:
    """The record of one episode (written as ``episode.json``).

    Attributes:
        messages: the transcript, system and task messages first (``tools``: each tool call as a
            line ``call_function(inputs=[...])``, each result a ``tool`` message).
        answer: the parsed final answer, or None when a limit came first.
        stop_reason: ``"answer"``, ``"round_limit"`` or ``"token_limit"`` (a turn passed
            ``max_episode_tokens``: the episode stopped, without that turn).
        calls: one record per command run (:meth:`FunctionRunner.run`), exemplars first (round 0).
        malformed_commands: commands (tool calls) that could not run.
        unrecognized_turns: turns with neither a command (tool call) nor an answer.
        truncated_messages: messages longer than :data:`~findbench.interpret.protocol.MAX_MESSAGE_CHARS`
            (only their start was read for commands).
        dropped_commands: commands (tool calls) past :data:`~findbench.interpret.protocol.MAX_COMMANDS_PER_MESSAGE`
            in their message, not run.
        usage: summed token usage of the turns kept, when the model reported it.
        generated_tokens: tokens generated (reported, else :func:`estimate_tokens`), with a budget
            also those of a turn that passed it.
        row: the dataset row interpreted (JSON values); ``findbench evaluate`` checks it against the data.
        row_fingerprint: :func:`findbench.interpret.truth.row_fingerprint` of ``row``, set when written."""

    function_id: str
    category: str
    method: str
    messages: list[dict[str, str]] = field(default_factory=list)
    answer: Answer | None = None
    rounds: int = 0
    max_rounds: int = DEFAULT_ROUNDS
    finished: bool = False
    stop_reason: str = "round_limit"
    calls: list[dict[str, Any]] = field(default_factory=list)
    malformed_commands: int = 0
    unrecognized_turns: int = 0
    truncated_messages: int = 0
    dropped_commands: int = 0
    protocol: str = PROTOCOL
    usage: dict[str, int] | None = None
    max_episode_tokens: int | None = None
    generated_tokens: int | None = None
    seed: int = 0
    row: dict[str, Any] | None = None
    row_fingerprint: str | None = None

    @property
    def description(self) -> str:
        return self.answer.description if self.answer else ""

    @property
    def domain(self) -> str:
        return (self.answer.domain or "") if self.answer else ""

    @property
    def code(self) -> str:
        return (self.answer.code or "") if self.answer else ""

    def count_turn(self, usage: Mapping[str, Any] | None, text: str) -> None:
        """Add a turn's usage, and its ``output_tokens`` (else :func:`estimate_tokens` of ``text``)
        to ``generated_tokens``."""
        for key, value in (usage or {}).items():
            if isinstance(value, int) and not isinstance(value, bool):
                self.usage = {**(self.usage or {}), key: (self.usage or {}).get(key, 0) + value}
        spent = (usage or {}).get("output_tokens")
        self.generated_tokens = (self.generated_tokens or 0) + (
            spent if isinstance(spent, int) else estimate_tokens(text)
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of every field."""
        d = asdict(self)
        d["answer"] = self.answer.to_dict() if self.answer else None
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Episode:
        """The inverse of :meth:`to_dict`."""
        values = dict(d)
        answer = values.get("answer")
        values["answer"] = Answer(**answer) if answer else None
        return cls(**values)


#: Keys every ``episode.json`` holds (the fields of :class:`Episode` without a default).
EPISODE_KEYS = ("function_id", "category", "method")
#: The largest ``episode.json`` read (16 MiB; a 20-round episode with its row is well under 1 MiB).
EPISODE_MAX_BYTES = 16 * 2**20


def read_episode_file(path: str | os.PathLike) -> dict[str, Any]:
    """The record an ``episode.json`` holds, read as an untrusted file (a regular file of at most
    :data:`EPISODE_MAX_BYTES`, no symlink). ValueError, one line naming the file, when it cannot be
    read, is not a JSON object or lacks one of :data:`EPISODE_KEYS` (e.g. truncated by a crash or a
    full disk); a run resumed with the same ``out`` runs such an episode again."""
    record = read_untrusted_json(path, EPISODE_MAX_BYTES, "episode file")
    missing = [k for k in EPISODE_KEYS if k not in record]
    if missing:
        raise ValueError(f"episode file {path} lacks {missing}")
    return record


def read_turn(text: str) -> Answer | TurnCommands:
    """An agent message's answer, or (when it does not answer) its commands within the per-turn caps."""
    answer = parse_answer(text)
    return answer if answer is not None else turn_commands(text)


async def run_command(runner: FunctionRunner, command: Command, round: int, episode: Episode) -> str:
    """Run ``command`` (in a worker thread), add its record to ``episode.calls`` (and count it
    when malformed); return the reply line."""
    line, record = await asyncio.to_thread(runner.run, command, round=round)
    episode.calls.append(record)
    episode.malformed_commands += command.malformed
    return line


async def open_episode(row: Mapping[str, Any], cfg: Any, method: str) -> tuple[FunctionRunner, Episode]:
    """Start an episode on ``row`` with ``method``: the function's runner and the record, its messages
    the system and task messages of ``cfg.protocol`` (``cfg``: the run's AgentConfig; the MILAN
    methods run the exemplars first, as round 0)."""
    runner = FunctionRunner(row, seed=cfg.seed)
    max_rounds = min(cfg.rounds, MILAN_TURNS) if method == "milan" else cfg.rounds
    episode = Episode(
        function_id=row["function_id"],
        category=row["category"],
        method=method,
        max_rounds=max_rounds,
        protocol=cfg.protocol,
        max_episode_tokens=cfg.episode_tokens,
        generated_tokens=0,
        seed=cfg.seed,
        row=dict(row),
    )
    exemplar_reply = None
    if method != "aia":
        exemplars = [str(x) for x in (row.get("exemplars") or [])]
        exemplar_reply = await run_command(runner, Command("exemplars", tuple(exemplars)), 0, episode)
    episode.messages = build_messages(row, method, exemplar_reply=exemplar_reply, protocol=cfg.protocol)
    return runner, episode
