"""The one LM protocol every LM-backed part of findbench talks to (:class:`LM`, :class:`ScoringLM`).

A *conversation* is a list of chat messages ``{"role": "system"|"user"|"assistant", "content":
str}``; backends apply the model's chat template with a generation prompt. A generation request
may carry a :class:`Constraint` (a regex or a JSON schema) where the backend has
``supports_constraints``; :func:`use_structured_outputs` decides from ``auto`` / ``on`` / ``off``.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from findbench._checks import instance, number, positive_int

Message = dict  # {"role": str, "content": str}

#: Set on Ctrl-C (the command line's SIGINT handler): in-process generation and scoring stop at the
#: next token or batch (:func:`check_interrupt`), so the worker threads of a run end within seconds.
INTERRUPT = threading.Event()


def check_interrupt() -> None:
    """KeyboardInterrupt once :data:`INTERRUPT` is set (nothing half-done is returned or cached)."""
    if INTERRUPT.is_set():
        raise KeyboardInterrupt("interrupted")
Conversation = Sequence[Message]


@dataclass(frozen=True)
class Constraint:
    """A grammar a generated answer must match: exactly one of ``regex`` (matching the whole answer)
    or ``json_schema`` (a dict or JSON text; stored as canonical JSON text, a stable cache key).

    >>> Constraint(regex=r"None|[0-9]+(, [0-9]+)*").to_dict()
    {'regex': 'None|[0-9]+(, [0-9]+)*'}
    """

    regex: str | None = None
    json_schema: str | Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if (self.regex is None) == (self.json_schema is None):
            raise ValueError("a Constraint takes exactly one of regex= or json_schema=")
        if self.regex is not None and (not isinstance(self.regex, str) or not self.regex):
            raise ValueError(f"regex must be a non-empty string, got {self.regex!r}")
        if self.json_schema is not None:
            schema: Any = self.json_schema
            if isinstance(schema, str):
                try:
                    schema = json.loads(schema)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"json_schema must be a JSON schema (dict or JSON text): {exc}") from None
            if not isinstance(schema, Mapping):
                raise ValueError(f"json_schema must be a JSON object schema, got {type(schema).__name__}")
            object.__setattr__(self, "json_schema", json.dumps(schema, sort_keys=True, separators=(",", ":")))

    def to_dict(self) -> dict[str, str]:
        """``{"regex": ...}`` or ``{"json_schema": <canonical JSON text>}`` (cache keys, records)."""
        return {"regex": self.regex} if self.regex is not None else {"json_schema": str(self.json_schema)}

    def schema(self) -> dict[str, Any] | None:
        """The JSON schema as a dict (None for a regex)."""
        return None if self.json_schema is None else json.loads(self.json_schema)


def _one_each(name: str, value: object, n: int, types: type | tuple[type, ...], what: str) -> list:
    """``value`` as a list of ``n`` items, one per conversation, each one of ``types``; else one line
    naming ``name`` or the bad item (``what``: what one item must be)."""
    instance(name, value, Sequence, f"a list with {what} per conversation", exclude=(str, bytes, Mapping))
    if len(value) != n:
        raise ValueError(f"{name} ({len(value)}) and conversations ({n}) differ in length")
    for i, item in enumerate(value):
        instance(f"{name}[{i}]", item, types, what)
    return list(value)


def check_constraints(constraint: object, n: int) -> list[Constraint | None]:
    """One constraint (or None) per conversation from None, a :class:`Constraint` or a list of ``n``."""
    if constraint is None or isinstance(constraint, Constraint):
        return [constraint] * n
    return _one_each("constraint", constraint, n, (Constraint, type(None)), "a Constraint or None")


def split_candidates(
    context: str, candidates: Sequence[str], encode: Callable[[str], list[int] | None], *,
    keep_space_first: bool = False,
) -> tuple[str, list[int]] | None:
    """``(text, ids)``: the text to score one-token ``candidates`` after and each candidate's token
    id, by ``encode`` (text -> token ids, None when it cannot tell). The trailing whitespace of
    ``context`` moves into the candidates where that makes each one token ("[ANSWER]:" + " 1"),
    else they follow ``context`` itself (``keep_space_first``: ``context`` itself is tried first);
    None when they are not one token either way."""
    fulls = [encode(context + c) for c in candidates]
    tries = (context.rstrip(), context)
    for text in dict.fromkeys(tries[::-1] if keep_space_first else tries):
        base = encode(text)
        if base is not None and all(f is not None and len(f) == len(base) + 1 and f[: len(base)] == base
                                    for f in fulls):
            return text, [f[-1] for f in fulls]
    return None


def progress_label(progress: bool | str, default: str) -> str:
    """The label of a backend's progress bar: ``progress`` when the caller names what the pass
    computes (``progress="judge: log P(output | description)"``), else ``default``."""
    return progress if isinstance(progress, str) and progress else default


#: Settings of structured outputs (:func:`use_structured_outputs`).
STRUCTURED_OUTPUTS = ("auto", "on", "off")


def use_structured_outputs(lm: object, setting: str = "auto") -> bool:
    """Whether requests to ``lm`` carry their grammar: ``auto``, where ``lm`` supports constraints and
    runs in process (a small local model rarely follows a format; a server model answers freely);
    ``on``, always (ValueError where ``lm`` cannot); ``off``, never."""
    if setting not in STRUCTURED_OUTPUTS:
        raise ValueError(f"structured_outputs must be one of {STRUCTURED_OUTPUTS}, got {setting!r}")
    if setting == "off":
        return False
    supported = bool(getattr(lm, "supports_constraints", False))
    if setting == "on":
        if not supported:
            raise ValueError(
                f"structured_outputs='on' but {getattr(lm, 'name', type(lm).__name__)} cannot constrain generation"
            )
        return True
    return supported and bool(getattr(lm, "in_process", False))


@runtime_checkable
class LM(Protocol):
    """Chat generation and candidate-token log-probabilities."""

    #: Identity used in cache keys and reports, e.g. "transformers:/path/to/model".
    name: str

    def generate(
        self,
        conversations: Sequence[Conversation],
        *,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        progress: bool = False,
    ) -> list[str]:
        """Complete each conversation (greedy when ``temperature == 0``); one string each.

        Backends with ``supports_constraints = True`` also take ``constraint=`` (a
        :class:`Constraint`, or one per conversation); an answer cut at ``max_new_tokens`` may
        stop before the grammar is complete.
        """

    def candidate_logprobs(
        self,
        conversations: Sequence[Conversation],
        candidates: Sequence[str],
        *,
        assistant_prefix: str = "",
        progress: bool = False,
    ) -> list[list[float]]:
        """Next-token log-probabilities of each one-token candidate after the generation prompt and
        ``assistant_prefix`` (e.g. ``"[ANSWER]: "``), under the full distribution (not renormalised)."""


@runtime_checkable
class ScoringLM(LM, Protocol):
    """An LM that can also score whole continuations (the judge's ``"pmi"`` mode needs it)."""

    def continuation_logprobs(
        self, conversations: Sequence[Conversation], continuations: Sequence[str], *, progress: bool = False
    ) -> list[float]:
        """Log-probability of each conversation's continuation as the start of the assistant turn:
        the sum over its tokens (tokenized on their own, after the generation prompt)."""


_ROLES = ("system", "user", "assistant")


def check_conversations(conversations: object, *, argument: str = "conversations") -> None:
    """Raise naming the bad item unless ``conversations`` is a list of non-empty lists of ``{"role", "content"}``."""
    instance(argument, conversations, Sequence, "a list of conversations", exclude=(str, dict))
    for i, conv in enumerate(conversations):
        if isinstance(conv, (str, dict)) or not isinstance(conv, Sequence) or not conv:
            raise TypeError(f"{argument}[{i}] must be a non-empty list of chat messages, got {conv!r:.80}")
        for j, msg in enumerate(conv):
            if not isinstance(msg, dict) or set(msg) - {"role", "content"} or "role" not in msg or "content" not in msg:
                raise ValueError(f"{argument}[{i}][{j}] must be a dict with keys 'role' and 'content', got {msg!r:.80}")
            if msg["role"] not in _ROLES:
                raise ValueError(f"{argument}[{i}][{j}]['role'] must be one of {_ROLES}, got {msg['role']!r}")
            instance(f"{argument}[{i}][{j}]['content']", msg["content"], str, "a str")


def check_generate(
    conversations: object, max_new_tokens: object, temperature: object, constraint: object
) -> list[Constraint | None]:
    """The checks of every backend's ``generate``; returns one constraint (or None) per conversation."""
    check_conversations(conversations)
    positive_int("max_new_tokens", max_new_tokens)
    number("temperature", temperature, 0)
    return check_constraints(constraint, len(conversations))  # type: ignore[arg-type]


def check_candidates(conversations: object, candidates: object, assistant_prefix: object = "") -> list[str]:
    """The checks of every backend's ``candidate_logprobs``; returns the candidate tokens as a list."""
    check_conversations(conversations)
    if (
        isinstance(candidates, str)
        or not isinstance(candidates, Sequence)
        or not candidates
        or not all(isinstance(c, str) and c for c in candidates)
    ):
        raise ValueError(f"candidates must be a non-empty list of non-empty strings, got {candidates!r}")
    instance("assistant_prefix", assistant_prefix, str, "a str")
    return list(candidates)


def check_continuations(conversations: object, continuations: object) -> list[str]:
    """The checks of every backend's ``continuation_logprobs``; returns the continuations as a list."""
    check_conversations(conversations)
    texts = _one_each("continuations", continuations, len(conversations), str, "a str")  # type: ignore[arg-type]
    if "" in texts:
        raise ValueError(f"continuations[{texts.index('')}] is empty: nothing to score")
    return texts


#: Tokens a findbench LM may generate per turn when ``max_tokens`` is not given.
DEFAULT_MAX_TOKENS = 512


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
