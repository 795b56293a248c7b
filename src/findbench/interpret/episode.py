"""One interpreter episode on one FIND function: the agent loop of FIND §3.

:func:`run_episode` is the core, ``async`` so a caller with its own event loop (an Inspect
solver, a server) can drive the model: it only needs a *chat*, an async callable
``chat(messages) -> str`` that returns the assistant's next message for the conversation so
far (or a :class:`ChatReply` carrying token usage). :func:`run_episode_sync` runs the same
loop on a findbench :class:`~findbench.lm.base.LM`.

The loop: the system and task messages (:mod:`findbench.interpret.prompts`), then up to
``rounds`` model turns. After each turn, a message with an answer (``[DESCRIPTION]:``) ends
the episode; otherwise every ``PYTHON(...)`` command in it is run in order
(:class:`~findbench.interpret.calls.FunctionRunner`) and the reply lines go back as the next
user message, or the unrecognized-command reply when there is none. An episode may also have
a budget of generated tokens (``episode_tokens``): each turn's limit is capped at what is
left of it, and a turn without an answer that spends it ends the episode. ``milan`` episodes
show the function's outputs on the row's exemplars first and allow two model turns;
``aia+milan`` shows the exemplars, then runs the full loop.

That loop speaks the ``text`` protocol. The ``tools`` protocol (native tool calls, on Inspect:
:func:`findbench.interpret.inspect_tasks.run_tool_episode`) drives the same record with the
same pieces: :func:`open_episode` (checks, exemplars, first messages) and :func:`run_command`
(one function call, recorded with its round).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
import os
import threading
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Executor
from dataclasses import asdict, dataclass, field
from typing import Any

from findbench._io import read_json_object
from findbench.interpret.calls import FunctionRunner
from findbench.interpret.prompts import MILAN_TURNS, build_messages, check_row
from findbench.interpret.protocol import (
    PROTOCOL,
    UNRECOGNIZED_REPLY,
    Answer,
    Command,
    check_protocol,
    parse_answer,
    parse_commands,
)
from findbench.lm.base import Constraint

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_ROUNDS",
    "Chat",
    "ChatReply",
    "EPISODE_KEYS",
    "Episode",
    "count_tokens",
    "estimate_tokens",
    "lm_chat",
    "open_episode",
    "read_episode_file",
    "run_command",
    "run_episode",
    "run_episode_sync",
]

#: FIND's cap on model turns per episode.
DEFAULT_ROUNDS = 20
#: Tokens a findbench LM may generate per turn when ``max_tokens`` is not given.
DEFAULT_MAX_TOKENS = 512


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
        function_id, category, method: what was interpreted, and how.
        messages: the transcript, system and task messages first (``tools`` protocol: each tool
            call as a line ``call_function(inputs=[...])`` after the assistant's text, each
            result as a message of role ``tool`` holding the reply line).
        answer: the parsed final answer, or None when a limit came first.
        rounds: model turns used; ``max_rounds`` the limit that applied.
        finished: whether the agent answered; ``stop_reason`` is ``"answer"``, ``"round_limit"``
            (``max_rounds`` turns without an answer) or ``"token_limit"`` (a turn without an
            answer spent the episode's token budget, ``max_episode_tokens``).
        calls: one record per command run (see :meth:`FunctionRunner.run`), exemplars first
            (round 0) for the MILAN methods.
        malformed_commands: commands that could not run (unclosed, unbalanced quotes, no inputs);
            ``tools`` protocol: tool calls refused (bad inputs).
        unrecognized_turns: model turns with neither a command (tool call) nor an answer,
            answered with the "Unrecognized command" reply (both protocols).
        protocol: ``"text"`` (commands and answers in the message text) or ``"tools"``
            (experiments as native tool calls, answers in text).
        usage: summed token usage when the chat reported it, else None.
        max_episode_tokens: the most tokens the interpreter could generate over the episode
            (None: no such limit; also in records written before the limit existed).
        generated_tokens: tokens generated over the episode as counted against that budget:
            each turn's reported ``output_tokens``, else an estimate (:func:`estimate_tokens`);
            None in records written before it was counted.
        seed: the run seed.
    """

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
    protocol: str = PROTOCOL
    usage: dict[str, int] | None = None
    max_episode_tokens: int | None = None
    generated_tokens: int | None = None
    seed: int = 0

    @property
    def description(self) -> str:
        return self.answer.description if self.answer else ""

    @property
    def domain(self) -> str:
        return (self.answer.domain or "") if self.answer else ""

    @property
    def code(self) -> str:
        return (self.answer.code or "") if self.answer else ""

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


def read_episode_file(path: str | os.PathLike) -> dict[str, Any]:
    """The record an ``episode.json`` holds. ValueError, one line naming the file, when it cannot
    be read, is not a JSON object or lacks one of :data:`EPISODE_KEYS` (e.g. truncated by a crash
    or a full disk); a run resumed with the same ``out`` runs such an episode again."""
    record = read_json_object(path, "episode file")
    missing = [k for k in EPISODE_KEYS if k not in record]
    if missing:
        raise ValueError(f"episode file {path} lacks {missing}")
    return record


# ---------------------------------------------------------------------------------- the loop


def _check_positive(name: str, value: Any, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int{' or None' if optional else ''}, got {value!r}")


def _takes_max_tokens(chat: Callable) -> bool:
    try:
        params = inspect.signature(chat).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "max_tokens" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _add_usage(total: dict[str, int] | None, usage: Mapping[str, Any] | None) -> dict[str, int] | None:
    if not usage:
        return total
    total = dict(total or {})
    for key, value in usage.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            total[key] = total.get(key, 0) + int(value)
    return total


def estimate_tokens(text: str) -> int:
    """An estimate of the tokens of ``text`` for when nothing counted them: 4 characters a
    token, ``ceil(len(text) / 4)``."""
    return math.ceil(len(text) / 4)


def count_tokens(lm: Any, text: str = "", *, conversation: list[Mapping[str, str]] | None = None) -> int:
    """Tokens of ``text``, or with ``conversation`` of that conversation as ``lm``'s prompt.

    Counted with the tokenizer of the findbench LM ``lm`` (of the LM a
    :class:`~findbench.lm.cache.CachedLM` wraps) when it has one and a ``render`` method (a
    conversation is rendered with its chat template first); else estimated with
    :func:`estimate_tokens` (a conversation's contents joined). One tokenizer call: hold the
    LM's lock around it where the LM is not thread-safe.
    """
    inner = getattr(lm, "inner", lm)
    tokenizer, render = getattr(inner, "tokenizer", None), getattr(inner, "render", None)
    if tokenizer is not None and callable(render):
        rendered = render(conversation) if conversation is not None else text
        return len(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    if conversation is not None:
        text = "".join(m["content"] for m in conversation)
    return estimate_tokens(text)


def _reply_tokens(usage: Mapping[str, Any] | None, text: str) -> int:
    """Tokens a turn generated: ``usage["output_tokens"]`` when the chat reported it, else
    :func:`estimate_tokens` of the reply's ``text``."""
    value = (usage or {}).get("output_tokens")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return int(value)
    return estimate_tokens(text)


def _turn_limit(max_tokens: int | None, episode_tokens: int | None, generated: int) -> int | None:
    """The generation limit of the next turn: ``max_tokens`` (None: the chat's own default),
    capped, when the episode has a token budget, at what is left of it (then
    ``min(max_tokens or DEFAULT_MAX_TOKENS, episode_tokens - generated)``)."""
    if episode_tokens is None:
        return max_tokens
    return max(1, min(max_tokens or DEFAULT_MAX_TOKENS, episode_tokens - generated))


def _budget_spent(episode: Episode) -> bool:
    """Whether ``episode`` has a token budget and its turns generated all of it."""
    return episode.max_episode_tokens is not None and (episode.generated_tokens or 0) >= episode.max_episode_tokens


async def run_command(runner: FunctionRunner, command: Command, round: int, episode: Episode) -> str:
    """Run ``command`` (in a worker thread), add its record to ``episode.calls`` (and count it
    when malformed); return the reply line."""
    line, record = await asyncio.to_thread(runner.run, command, round=round)
    episode.calls.append(record)
    episode.malformed_commands += command.malformed
    return line


async def _run_commands(runner: FunctionRunner, commands: list[Command], round: int, episode: Episode) -> str:
    return "\n".join([await run_command(runner, command, round, episode) for command in commands])


async def open_episode(
    row: Mapping[str, Any],
    *,
    method: str = "aia",
    rounds: int = DEFAULT_ROUNDS,
    seed: int = 0,
    function: Callable | None = None,
    protocol: str = PROTOCOL,
    episode_tokens: int | None = None,
) -> tuple[FunctionRunner, Episode]:
    """Check the arguments of an episode on ``row`` and start it: the function's runner and the
    record, its messages the system and task messages of ``protocol`` (the MILAN methods run
    the exemplars first, as round 0). See :func:`run_episode` for the arguments."""
    category = check_row(row, method)
    check_protocol(protocol)
    _check_positive("rounds", rounds)
    _check_positive("episode_tokens", episode_tokens, optional=True)
    runner = FunctionRunner(row, seed=seed, function=function)
    max_rounds = min(rounds, MILAN_TURNS) if method == "milan" else rounds
    episode = Episode(function_id=row["function_id"], category=category, method=method, max_rounds=max_rounds,
                      protocol=protocol, max_episode_tokens=episode_tokens, generated_tokens=0, seed=seed)
    exemplar_reply = None
    if method != "aia":
        exemplars = [str(x) for x in (row.get("exemplars") or [])]
        if not exemplars:
            raise ValueError(f"row['exemplars'] of {row['function_id']} is empty: method {method!r} needs exemplar inputs")
        exemplar_reply = await run_command(runner, Command("exemplars", tuple(exemplars)), 0, episode)
    episode.messages = build_messages(row, method, exemplar_reply=exemplar_reply, protocol=protocol)
    return runner, episode


async def run_episode(
    row: Mapping[str, Any],
    chat: Chat,
    *,
    method: str = "aia",
    rounds: int = DEFAULT_ROUNDS,
    max_tokens: int | None = None,
    seed: int = 0,
    function: Callable | None = None,
    episode_tokens: int | None = None,
) -> Episode:
    """Interpret ``row``'s function with the agent behind ``chat``.

    Args:
        row: a dataset row.
        chat: ``async chat(messages) -> str | ChatReply``: the assistant's next message for
            the conversation so far (a list of ``{"role", "content"}`` dicts, a fresh copy
            each call).
        method: ``aia``; for neuron rows also ``milan`` (two model turns) or ``aia+milan``.
        rounds: most model turns (``milan``: at most :data:`MILAN_TURNS`).
        max_tokens: per-turn generation limit, passed to ``chat`` as ``max_tokens=`` (chat
            must take that keyword); None passes nothing.
        seed: run seed (noise of numeric functions).
        function: the row's callable, if already built (else built on first use).
        episode_tokens: the most tokens the agent may generate over the episode (None: no
            limit). Each turn's ``max_tokens=`` is capped at what is left
            (``min(max_tokens or DEFAULT_MAX_TOKENS, left)``, so chat must take that keyword);
            a turn without an answer that leaves nothing ends the episode (after its commands
            run), ``stop_reason`` ``"token_limit"``. A turn counts the ``output_tokens`` of the
            chat's :class:`ChatReply` usage, or, when the chat reports none (a plain ``str``),
            an estimate of 4 characters a token (:func:`estimate_tokens`).
    """
    _check_positive("max_tokens", max_tokens, optional=True)
    _check_positive("episode_tokens", episode_tokens, optional=True)
    if not callable(chat):
        raise TypeError(f"chat must be an async callable (messages) -> str, got {type(chat).__name__}")
    takes_max_tokens = _takes_max_tokens(chat)
    if max_tokens is not None and not takes_max_tokens:
        raise TypeError("max_tokens: chat does not take a max_tokens keyword; leave max_tokens=None or set the limit in chat")
    if episode_tokens is not None and not takes_max_tokens:
        raise TypeError("episode_tokens: chat does not take a max_tokens keyword, so its turns cannot be capped at the "
                        "tokens left; leave episode_tokens=None or give a chat(messages, max_tokens=None)")

    runner, episode = await open_episode(row, method=method, rounds=rounds, seed=seed, function=function,
                                         episode_tokens=episode_tokens)
    for turn in range(1, episode.max_rounds + 1):
        limit = _turn_limit(max_tokens, episode_tokens, episode.generated_tokens or 0)
        kwargs = {"max_tokens": limit} if limit is not None else {}
        reply = await chat([dict(m) for m in episode.messages], **kwargs)
        if isinstance(reply, ChatReply):
            text, usage = reply.text, reply.usage
        elif isinstance(reply, str):
            text, usage = reply, None
        else:
            raise TypeError(f"chat must return a str or a ChatReply, got {type(reply).__name__}")
        episode.usage = _add_usage(episode.usage, usage)
        episode.generated_tokens = (episode.generated_tokens or 0) + _reply_tokens(usage, text)
        episode.rounds = turn
        episode.messages.append({"role": "assistant", "content": text})
        answer = parse_answer(text)
        if answer is not None:
            episode.answer, episode.finished, episode.stop_reason = answer, True, "answer"
            return episode
        commands = parse_commands(text)
        if commands:
            response = await _run_commands(runner, commands, turn, episode)
        else:
            response = UNRECOGNIZED_REPLY
            episode.unrecognized_turns += 1
        episode.messages.append({"role": "user", "content": response})
        if _budget_spent(episode):
            episode.stop_reason = "token_limit"
            return episode
    return episode


# ------------------------------------------------------------------------------ findbench LMs


def lm_chat(
    lm: Any,
    *,
    max_tokens: int | None = None,
    temperature: float = 0.0,
    executor: Executor | None = None,
    lock: threading.Lock | None = None,
    constraint: Constraint | Callable[[list[dict[str, str]]], Constraint | None] | None = None,
) -> Chat:
    """An async chat over a findbench LM's ``generate``, run in ``executor`` (a thread pool;
    the loop's default one when None) so the event loop stays free. Each reply is a
    :class:`ChatReply` whose usage holds ``output_tokens``, counted with the LM's tokenizer
    where it has one, else estimated (:func:`count_tokens`).

    Args:
        lm: an :class:`~findbench.lm.base.LM` (``generate(conversations, ...)``).
        max_tokens: default per-turn generation limit (:data:`DEFAULT_MAX_TOKENS` when None);
            a ``max_tokens=`` given per call wins.
        temperature: sampling temperature (0: greedy).
        lock: held around each ``generate`` call, for backends that are not thread-safe.
        constraint: structured outputs: a grammar every reply follows, or a function of the
            messages so far giving the next reply's grammar (or None); needs an LM with
            ``supports_constraints`` (see :func:`findbench.interpret.prompts.turn_constraint`).
    """
    if not callable(getattr(lm, "generate", None)):
        raise TypeError(f"lm must be a findbench LM (with generate), got {type(lm).__name__}")
    _check_positive("max_tokens", max_tokens, optional=True)
    if constraint is not None and not getattr(lm, "supports_constraints", False):
        raise TypeError(f"constraint: {getattr(lm, 'name', type(lm).__name__)} cannot constrain generation")
    default_tokens = max_tokens or DEFAULT_MAX_TOKENS

    def generate(messages: list[dict[str, str]], limit: int) -> ChatReply:
        grammar = constraint(messages) if callable(constraint) else constraint
        kwargs = {"constraint": grammar} if grammar is not None else {}
        with lock if lock is not None else contextlib.nullcontext():
            text = lm.generate([messages], max_new_tokens=limit, temperature=temperature, **kwargs)[0]
            return ChatReply(text, {"output_tokens": count_tokens(lm, text)})

    async def chat(messages: list[dict[str, str]], max_tokens: int | None = None) -> ChatReply:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(executor, generate, messages, max_tokens or default_tokens)

    chat.__qualname__ = f"lm_chat({getattr(lm, 'name', type(lm).__name__)})"
    return chat


def run_episode_sync(
    row: Mapping[str, Any],
    lm: Any,
    *,
    method: str = "aia",
    rounds: int = DEFAULT_ROUNDS,
    max_tokens: int | None = None,
    seed: int = 0,
    temperature: float = 0.0,
    function: Callable | None = None,
    episode_tokens: int | None = None,
) -> Episode:
    """:func:`run_episode` with a findbench LM (an instance, or a spec for
    :func:`findbench.lm.load_lm` such as ``"embedded"``), from synchronous code.

    ``max_tokens`` is the per-turn generation limit (default :data:`DEFAULT_MAX_TOKENS`),
    ``episode_tokens`` the most tokens over the episode (None: no limit), counted with the
    LM's tokenizer where it has one.
    Must not be called from a running event loop (await :func:`run_episode` there).
    """
    if isinstance(lm, str):
        from findbench.lm import load_lm

        lm = load_lm(lm)
    chat = lm_chat(lm, max_tokens=max_tokens, temperature=temperature)
    return asyncio.run(run_episode(row, chat, method=method, rounds=rounds, max_tokens=max_tokens, seed=seed,
                                   function=function, episode_tokens=episode_tokens))
