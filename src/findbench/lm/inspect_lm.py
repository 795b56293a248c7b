"""Inspect models as findbench LMs: how a model role (the unit-test judge, AutoInterp's explainer
and scorer) becomes the LM findbench calls.

:func:`role_lm` reads a role through the model it names:

- ``findbench/<spec>`` (:class:`findbench.interpret.inspect_tasks.FindbenchModelAPI`): its
  findbench LM, batched, with log-probabilities and grammars;
- a model at an OpenAI-compatible server (``vllm/<model>`` or ``vllm/<base>:<adapter>`` with
  ``base_url`` or ``$VLLM_BASE_URL``, ``openai-api/…``; :func:`served_at`): an
  :class:`~findbench.lm.OpenAILM` on that URL naming the served model, which reads vLLM's prompt
  log-probabilities;
- any other Inspect model: :class:`InspectLM`, which generates through Inspect (its connection
  limits, retries and cache apply) and has no log-probabilities.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from findbench.lm.base import Conversation, check_generate


def served_at(model: Any) -> tuple[str, str] | None:
    """(server URL, served model name) of an Inspect model of an OpenAI-compatible provider, or None
    (``vllm/<base>:<adapter>`` is served under the adapter's name)."""
    api = model.api
    url = getattr(api, "base_url", None) or (os.environ.get("VLLM_BASE_URL") if hasattr(api, "adapter") else None)
    if not url:
        return None
    adapter = getattr(api, "adapter", None)
    return str(url), adapter.name if adapter is not None else str(getattr(api, "base_model", None) or api.model_name)


async def endpoint(model: Any) -> tuple[str, str] | None:
    """:func:`served_at`, after one one-token request where a ``vllm/…`` model has not yet connected
    (Inspect resolves its URL on the first request)."""
    from inspect_ai.model import GenerateConfig

    served = served_at(model)
    if served is None and hasattr(model.api, "adapter"):
        await model.generate("Reply with OK.", config=GenerateConfig(max_tokens=1, temperature=0.0))
        served = served_at(model)
    return served


def is_findbench_model(model: Any) -> bool:
    """Whether ``model`` is ``findbench/<spec>`` (its ``api.lm`` is the findbench LM)."""
    from inspect_ai.model import ModelName

    return ModelName(model).api == "findbench"


async def role_lm(model: Any, role: str, **options: Any) -> Any:
    """The findbench LM of Inspect ``model`` bound to ``role`` (module docstring); ``options`` go to
    :func:`findbench.lm.load_lm` for a served model (``max_workers``, ``cache``)."""
    from findbench.lm import load_lm

    if is_findbench_model(model):
        return model.api.lm
    served = await endpoint(model)
    if served is not None:
        url, name = served
        return load_lm(url, model=name, **options)
    return InspectLM(model, role=role)


def chat_messages(conversation: Conversation) -> list[Any]:
    """A findbench conversation (``{"role", "content"}`` dicts) as Inspect chat messages."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
    return [kinds[m["role"]](content=m["content"]) for m in conversation]


class InspectLM:
    """A findbench LM that generates through an Inspect model, on the event loop of the eval that
    made it (call it from a worker thread, e.g. ``asyncio.to_thread``). Generation only: it has no
    log-probabilities and no grammars."""

    supports_constraints = False
    in_process = False

    def __init__(self, model: Any, *, role: str = "model", loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.model, self.role = model, role
        self.loop = loop or asyncio.get_running_loop()
        self.name = f"inspect:{model}"

    def __repr__(self) -> str:
        return f"InspectLM({self.model}, role={self.role!r})"

    def generate(
        self,
        conversations: Sequence[Conversation],
        *,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        progress: bool = False,
    ) -> list[str]:
        from inspect_ai.model import GenerateConfig

        check_generate(conversations, max_new_tokens, temperature, None)
        config = GenerateConfig(max_tokens=max_new_tokens, temperature=temperature)

        async def answers() -> list[str]:
            calls = (self.model.generate(chat_messages(c), config=config) for c in conversations)
            outputs = await asyncio.gather(*calls)
            return [o.completion for o in outputs]

        if not conversations:
            return []
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:  # waiting here would block the very loop that answers
            raise RuntimeError(f"{self!r}.generate must be called from a worker thread, not its event loop")
        return asyncio.run_coroutine_threadsafe(answers(), self.loop).result()

    def candidate_logprobs(
        self,
        conversations: Sequence[Conversation],
        candidates: Sequence[str],
        *,
        assistant_prefix: str = "",
        progress: bool = False,
    ) -> list[list[float]]:
        raise ValueError(
            f"--model-role {self.role}={self.model}: this needs next-token log-probabilities, which findbench reads "
            "from a findbench model (findbench/<spec>) or an OpenAI-compatible server (vllm/<model> with base_url, "
            "openai-api/…), not from this provider"
        )
