"""One interpreter episode on one FIND function: the record and the text loop of FIND §3.

:func:`run_episode` drives the ``text`` protocol over an async ``chat(messages, max_tokens=None)
-> str | ChatReply``: up to ``rounds`` turns; an answer ends the episode, else every command is
run and the reply lines go back. ``milan`` shows the outputs on the row's exemplars first and
allows two turns; ``aia+milan`` shows them, then runs the full loop. Each message is read, and
each command run, in a worker thread (one long message must not stall the other episodes in
flight), within the per-turn caps of :func:`~findbench.interpret.protocol.turn_commands`. The
``tools`` protocol (:func:`findbench.interpret.inspect_tasks.run_tool_episode`) shares the record,
:func:`open_episode` and :func:`run_command`."""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from findbench._io import read_untrusted_json
from findbench.interpret.calls import FunctionRunner
from findbench.interpret.prompts import MILAN_TURNS, build_messages
from findbench.interpret.protocol import (
    PROTOCOL,
    UNRECOGNIZED_REPLY,
    Answer,
    Command,
    TurnCommands,
    parse_answer,
    turn_commands,
)

#: FIND's cap on model turns per episode.
DEFAULT_ROUNDS = 20
#: Tokens a findbench LM may generate per turn when ``max_tokens`` is not given.
DEFAULT_MAX_TOKENS = 512
#: Tokens an Inspect provider's model may generate per turn when ``findbench interpret`` is given no
#: ``max_tokens`` (without one, a provider lets a turn run to tens of thousands of tokens).
DEFAULT_API_MAX_TOKENS = 1024


@dataclass(frozen=True)
class ChatReply:
    """An assistant message with the token usage of the request that made it (keys such as
    ``input_tokens``, ``output_tokens``, ``total_tokens``)."""

    text: str
    usage: Mapping[str, int] | None = None


#: ``async chat(messages) -> str | ChatReply``; it may also take a ``max_tokens`` keyword.
Chat = Callable[..., Awaitable[str | ChatReply]]


@dataclass
class Episode:
    """The record of one episode (written as ``episode.json``).

    Attributes:
        messages: the transcript, system and task messages first (``tools``: each tool call as a
            line ``call_function(inputs=[...])``, each result a ``tool`` message).
        answer: the parsed final answer, or None when a limit came first.
        stop_reason: ``"answer"``, ``"round_limit"`` or ``"token_limit"`` (a turn without an answer
            spent ``max_episode_tokens``).
        calls: one record per command run (:meth:`FunctionRunner.run`), exemplars first (round 0).
        malformed_commands: commands (tool calls) that could not run.
        unrecognized_turns: turns with neither a command (tool call) nor an answer.
        truncated_messages: messages longer than :data:`~findbench.interpret.protocol.MAX_MESSAGE_CHARS`
            (only their start was read for commands).
        dropped_commands: commands (tool calls) past :data:`~findbench.interpret.protocol.MAX_COMMANDS_PER_MESSAGE`
            in their message, not run.
        usage: summed token usage when the chat reported it.
        generated_tokens: tokens counted against the budget (reported, else :func:`estimate_tokens`).
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

    def turn_limit(self, max_tokens: int | None) -> int | None:
        """The next turn's generation limit: ``max_tokens`` (None: the model's default), capped,
        with an episode budget, at what is left of it (``min(max_tokens or DEFAULT_MAX_TOKENS, left)``)."""
        if self.max_episode_tokens is None:
            return max_tokens
        return max(1, min(max_tokens or DEFAULT_MAX_TOKENS, self.max_episode_tokens - (self.generated_tokens or 0)))

    def count_turn(self, usage: Mapping[str, Any] | None, text: str) -> None:
        """Add a turn's usage, and its ``output_tokens`` (else :func:`estimate_tokens` of ``text``)
        to ``generated_tokens``."""
        for key, value in (usage or {}).items():
            if isinstance(value, int) and not isinstance(value, bool):
                self.usage = {**(self.usage or {}), key: (self.usage or {}).get(key, 0) + value}
        spent = (usage or {}).get("output_tokens")
        self.generated_tokens = (self.generated_tokens or 0) + (spent if isinstance(spent, int) else estimate_tokens(text))

    @property
    def budget_spent(self) -> bool:
        """Whether the episode has a token budget and its turns generated all of it."""
        return self.max_episode_tokens is not None and (self.generated_tokens or 0) >= self.max_episode_tokens

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of every field."""
        d = asdict(self)
        d["answer"] = self.answer.to_dict() if self.answer else None
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Episode:
        """The inverse of :meth:`to_dict`; a field missing from an older record gets its
        default (``max_episode_tokens``, ``generated_tokens``: None)."""
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


def estimate_tokens(text: str) -> int:
    """An estimate of the tokens of ``text`` for when nothing counted them: 4 characters a
    token, ``ceil(len(text) / 4)``."""
    return math.ceil(len(text) / 4)


def count_tokens(lm: Any, text: str = "", *, conversation: list[Mapping[str, str]] | None = None) -> int:
    """Tokens of ``text``, or with ``conversation`` of that conversation as ``lm``'s prompt:
    counted with the tokenizer of the findbench LM ``lm`` (or the LM a cache wraps) when it has
    one and a ``render`` method, else :func:`estimate_tokens`."""
    inner = getattr(lm, "inner", lm)
    tokenizer, render = getattr(inner, "tokenizer", None), getattr(inner, "render", None)
    if tokenizer is not None and callable(render):
        rendered = render(conversation) if conversation is not None else text
        return len(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    if conversation is not None:
        text = "".join(m["content"] for m in conversation)
    return estimate_tokens(text)


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


async def open_episode(row: Mapping[str, Any], *, method: str = "aia", rounds: int = DEFAULT_ROUNDS, seed: int = 0,
                       protocol: str = PROTOCOL, episode_tokens: int | None = None) -> tuple[FunctionRunner, Episode]:
    """Start an episode on ``row``: the function's runner and the record, its messages the
    system and task messages of ``protocol`` (the MILAN methods run the exemplars first, as round 0)."""
    runner = FunctionRunner(row, seed=seed)
    max_rounds = min(rounds, MILAN_TURNS) if method == "milan" else rounds
    episode = Episode(function_id=row["function_id"], category=row["category"], method=method, max_rounds=max_rounds,
                      protocol=protocol, max_episode_tokens=episode_tokens, generated_tokens=0, seed=seed,
                      row=dict(row))
    exemplar_reply = None
    if method != "aia":
        exemplars = [str(x) for x in (row.get("exemplars") or [])]
        exemplar_reply = await run_command(runner, Command("exemplars", tuple(exemplars)), 0, episode)
    episode.messages = build_messages(row, method, exemplar_reply=exemplar_reply, protocol=protocol)
    return runner, episode


async def run_episode(row: Mapping[str, Any], chat: Chat, *, method: str = "aia",
                      rounds: int = DEFAULT_ROUNDS, max_tokens: int | None = None, seed: int = 0,
                      episode_tokens: int | None = None) -> Episode:
    """Interpret ``row``'s function in the ``text`` protocol with the agent behind ``chat``
    (``chat(messages, max_tokens=None) -> str | ChatReply``, a fresh copy of the messages each
    call): at most ``rounds`` turns (``milan``: :data:`MILAN_TURNS`) of at most ``max_tokens``
    tokens and, with ``episode_tokens``, that many in all (``stop_reason`` ``"token_limit"``)."""
    runner, episode = await open_episode(row, method=method, rounds=rounds, seed=seed, episode_tokens=episode_tokens)
    for turn in range(1, episode.max_rounds + 1):
        reply = await chat([dict(m) for m in episode.messages], max_tokens=episode.turn_limit(max_tokens))
        text, usage = (reply.text, reply.usage) if isinstance(reply, ChatReply) else (reply, None)
        episode.count_turn(usage, text)
        episode.rounds = turn
        episode.messages.append({"role": "assistant", "content": text})
        commands = await asyncio.to_thread(read_turn, text)  # off the event loop: the message is the agent's
        if isinstance(commands, Answer):
            episode.answer, episode.finished, episode.stop_reason = commands, True, "answer"
            return episode
        if commands.commands:
            lines = [await run_command(runner, c, turn, episode) for c in commands.commands]
        else:
            lines = [UNRECOGNIZED_REPLY]
            episode.unrecognized_turns += 1
        episode.truncated_messages += commands.truncated
        episode.dropped_commands += commands.dropped
        episode.messages.append({"role": "user", "content": "\n".join(lines + ([commands.note] if commands.note else []))})
        if episode.budget_spent:
            episode.stop_reason = "token_limit"
            return episode
    return episode
