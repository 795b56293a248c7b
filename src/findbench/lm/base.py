"""The one LM protocol every LM-backed part of findbench talks to.

Neurons, the judge, the explainer and the interpreter all use these two calls, so any backend
(in-process transformers, an OpenAI-compatible server such as vLLM, a cache wrapper) serves
all of them.

A *conversation* is a list of chat messages ``{"role": "system"|"user"|"assistant",
"content": str}``. Backends apply the model's chat template with a generation prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

__all__ = ["LM", "ScoringLM", "Message", "Conversation", "check_candidates", "check_continuations", "check_conversations"]

Message = dict  # {"role": str, "content": str}
Conversation = Sequence[Message]


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
        """Complete each conversation (greedy when ``temperature == 0``); one string each."""
        ...

    def candidate_logprobs(
        self,
        conversations: Sequence[Conversation],
        candidates: Sequence[str],
        *,
        assistant_prefix: str = "",
        progress: bool = False,
    ) -> list[list[float]]:
        """Next-token log-probabilities of each candidate after the generation prompt.

        ``assistant_prefix`` is text the assistant turn starts with before the scored token
        (e.g. ``"[ANSWER]: "``). Each candidate must be one token. Values are log-probs under
        the model's full next-token distribution (not renormalised over the candidates), from
        one forward pass per conversation.
        """
        ...


@runtime_checkable
class ScoringLM(LM, Protocol):
    """An LM that can also score whole continuations (the judge's ``"pmi"`` mode needs it)."""

    def continuation_logprobs(
        self,
        conversations: Sequence[Conversation],
        continuations: Sequence[str],
        *,
        progress: bool = False,
    ) -> list[float]:
        """Log-probability of each continuation as the text the assistant turn starts with.

        One continuation per conversation; the value is the sum of the log-probs of the
        continuation's tokens (tokenized on their own, after the generation prompt), each
        under the model's full next-token distribution.
        """
        ...


_ROLES = ("system", "user", "assistant")


def check_conversations(conversations: object, *, argument: str = "conversations") -> None:
    """Raise TypeError/ValueError naming the bad item unless ``conversations`` is a list of
    conversations, each a non-empty list of ``{"role", "content"}`` messages."""
    if isinstance(conversations, (str, dict)) or not isinstance(conversations, Sequence):
        raise TypeError(f"{argument} must be a list of conversations, got {type(conversations).__name__}")
    for i, conv in enumerate(conversations):
        if isinstance(conv, (str, dict)) or not isinstance(conv, Sequence) or not conv:
            raise TypeError(f"{argument}[{i}] must be a non-empty list of chat messages, got {conv!r:.80}")
        for j, msg in enumerate(conv):
            if not isinstance(msg, dict) or set(msg) - {"role", "content"} or "role" not in msg or "content" not in msg:
                raise ValueError(f"{argument}[{i}][{j}] must be a dict with keys 'role' and 'content', got {msg!r:.80}")
            if msg["role"] not in _ROLES:
                raise ValueError(f"{argument}[{i}][{j}]['role'] must be one of {_ROLES}, got {msg['role']!r}")
            if not isinstance(msg["content"], str):
                raise TypeError(f"{argument}[{i}][{j}]['content'] must be a str, got {type(msg['content']).__name__}")


def check_candidates(candidates: object, assistant_prefix: object = "") -> list[str]:
    """The candidate tokens as a list; ValueError/TypeError naming ``candidates`` or
    ``assistant_prefix`` unless they are a non-empty list of non-empty strings and a string."""
    if isinstance(candidates, str) or not isinstance(candidates, Sequence) or not candidates or not all(
        isinstance(c, str) and c for c in candidates
    ):
        raise ValueError(f"candidates must be a non-empty list of non-empty strings, got {candidates!r}")
    if not isinstance(assistant_prefix, str):
        raise TypeError(f"assistant_prefix must be a str, got {type(assistant_prefix).__name__}")
    return list(candidates)


def check_continuations(continuations: object, n: int) -> list[str]:
    """The continuations as a list; ValueError/TypeError naming ``continuations`` unless
    they are ``n`` non-empty strings (one per conversation)."""
    if isinstance(continuations, str) or not isinstance(continuations, Sequence):
        raise TypeError(f"continuations must be a list of strings, got {type(continuations).__name__}")
    if len(continuations) != n:
        raise ValueError(f"continuations ({len(continuations)}) and conversations ({n}) differ in length")
    for i, c in enumerate(continuations):
        if not isinstance(c, str):
            raise TypeError(f"continuations[{i}] must be a str, got {type(c).__name__}")
        if not c:
            raise ValueError(f"continuations[{i}] is empty: nothing to score")
    return list(continuations)
