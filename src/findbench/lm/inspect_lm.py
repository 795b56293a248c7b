"""Inspect models as findbench LMs: how a model role (the unit-test judge, AutoInterp's explainer
and scorer) becomes the LM findbench calls.

:func:`role_lm` reads a role through the model it names:

- ``findbench/<spec>`` (:class:`findbench.lm.inspect_provider.FindbenchModelAPI`): its
  findbench LM, batched, with log-probabilities and grammars;
- a model at an OpenAI-compatible server (``vllm/<model>`` or ``vllm/<base>:<adapter>`` with
  ``base_url`` or ``$VLLM_BASE_URL``, ``openai-api/…``; :func:`served_at`): an
  :class:`~findbench.lm.OpenAILM` on that URL naming the served model, which reads vLLM's prompt
  log-probabilities;
- any other Inspect model: :class:`InspectLM`, which generates through Inspect (its connection
  limits, retries and cache apply) and has no log-probabilities.

What an Inspect task checks while it is built, as the command line checks its flags: its ``-T``
arguments (:func:`task_arguments`) and the findbench models of ``--model`` and ``--model-role``
(:func:`check_models`); a refusal is :class:`TaskArgumentError`, which ``inspect eval`` prints as one
message (no traceback) and exits non-zero.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

# Inspect prints a PrerequisiteError as its message alone; inspect_ai 0.3.285 has no public path to it.
from inspect_ai._util.error import PrerequisiteError
from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    get_model,
    model_roles,
)

from findbench._checks import did_you_mean, is_user_error
from findbench.constants import UsageError
from findbench.lm.base import Conversation, check_generate


class TaskArgumentError(PrerequisiteError, UsageError):
    """An Inspect task's argument or model refused: one line naming ``-T <name>`` (or ``--model``,
    ``--model-role <role>``); a :class:`~findbench.constants.UsageError` to Python callers."""

    def __init__(self, message: str) -> None:
        from rich.text import Text

        UsageError.__init__(self, message)
        self.message = Text(message)  # what Inspect prints: plain text, no console markup


def _task_message(message: str, known: Collection[str]) -> str:
    """A config's message about a flag (``--max-tokens must be ≥ 1``, ``configs: ...``) naming the
    task argument instead (``-T max_tokens: must be ≥ 1``, ``-T configs: ...``); a command quoted in
    backticks keeps its flags."""
    def argument(word: str) -> str | None:
        name = word[2:].replace("-", "_") if word.startswith("--") else word
        return name if name in known else None

    head = re.match(r"(--[a-z][a-z0-9-]*|[a-z][a-z0-9_]*)(?=:| must )", message)
    if head and argument(head[1]):
        message = f"-T {argument(head[1])}: {message[head.end():].lstrip(': ')}"
    parts = message.split("`")
    parts[::2] = (re.sub(r"--[a-z][a-z0-9-]*", lambda m: f"-T {argument(m[0])}" if argument(m[0]) else m[0], p)
                  for p in parts[::2])
    return "`".join(parts)


def task_arguments(task: str, names: Iterable[str] = ()) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate an Inspect task's builder (under ``@task``) whose arguments are ``names`` and its own
    parameters: an unknown argument, or one its configs refuse (:func:`findbench._checks.is_user_error`),
    raises :class:`TaskArgumentError` naming ``-T <name>`` before anything runs."""

    def wrap(build: Callable[..., Any]) -> Callable[..., Any]:
        params = inspect.signature(build).parameters.values()
        known = sorted({*names, *(p.name for p in params if p.kind is not p.VAR_KEYWORD)})

        @functools.wraps(build)
        def checked(*args: Any, **kwargs: Any) -> Any:
            for name in kwargs:
                if name not in known:
                    hint = did_you_mean(name, known) or f" (its arguments: {', '.join(known)})"
                    raise TaskArgumentError(f"-T {name}: {task} has no such argument{hint}")
            try:
                return build(*args, **kwargs)
            except Exception as exc:
                if isinstance(exc, TaskArgumentError) or not is_user_error(exc):  # named already / a bug
                    raise
                raise TaskArgumentError(_task_message(str(exc), known)) from None

        return checked

    return wrap


def eval_models() -> dict[str, Any]:
    """The eval's models by the option that named them (``--model``, ``--model-role <role>``; the
    first model of a role bound to a list); ``{}`` outside an eval. Inspect binds them before it
    builds the tasks (and an ``eval_set`` leaves them bound after it: :func:`check_models` skips a
    findbench model that already loaded its LM)."""
    try:
        models = {"--model": get_model()}
    except (ValueError, LookupError):  # no eval: no active model
        return {}
    try:
        roles = model_roles()
    except LookupError:
        roles = {}
    return models | {f"--model-role {role}": m[0] if isinstance(m, list) else m for role, m in roles.items()}


def check_models(roles: Sequence[str], models: dict[str, Any] | None = None) -> None:
    """Each role of ``models`` (default :func:`eval_models`) is one of the task's ``roles``, and each
    findbench model (``findbench/<spec>``) names a model findbench can load
    (:func:`findbench.models.check_spec`), else :class:`TaskArgumentError` naming the option: a
    misspelled role or model fails here, not after the first sample's retries."""
    from findbench.models import check_spec

    for option, model in (eval_models() if models is None else models).items():
        role = option.removeprefix("--model-role ")
        if role != option and role not in roles:
            hint = did_you_mean(role, roles) or f" (its roles: {', '.join(roles)})"
            raise TaskArgumentError(f"--model-role {role}: the task has no such role{hint}")
        spec = getattr(model.api, "spec", None) if is_findbench_model(model) else None
        if isinstance(spec, str) and not model.api.loaded:  # loaded: the model of an eval run before
            try:
                check_spec(spec, flag=f"{option}=findbench/{spec}")
            except UsageError as exc:
                raise TaskArgumentError(str(exc)) from None


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
    served = served_at(model)
    if served is None and hasattr(model.api, "adapter"):
        await model.generate("Reply with OK.", config=GenerateConfig(max_tokens=1, temperature=0.0))
        served = served_at(model)
    return served


def is_findbench_model(model: Any) -> bool:
    """Whether the Inspect ``model`` is ``findbench/<spec>``: its ``api`` a
    :class:`~findbench.lm.inspect_provider.FindbenchModelAPI`, whose ``lm`` is the findbench LM."""
    from findbench.lm.inspect_provider import FindbenchModelAPI

    return isinstance(getattr(model, "api", None), FindbenchModelAPI)


async def role_lm(model: Any, role: str, **options: Any) -> Any:
    """The findbench LM of Inspect ``model`` bound to ``role`` (module docstring); ``options`` go to
    :func:`findbench.lm.load_lm` for a served model (``max_workers``, ``cache``)."""
    from findbench.lm import load_lm

    if is_findbench_model(model):
        return model.api.lm
    served = await endpoint(model)  # (server URL, served model name)
    return InspectLM(model, role=role) if served is None else load_lm(served[0], model=served[1], **options)


def chat_messages(conversation: Conversation) -> list[Any]:
    """A findbench conversation (``{"role", "content"}`` dicts) as Inspect chat messages."""
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
        check_generate(conversations, max_new_tokens, temperature, None)
        config = GenerateConfig(max_tokens=max_new_tokens, temperature=temperature)

        async def answers() -> list[str]:
            calls = (self.model.generate(chat_messages(c), config=config) for c in conversations)
            return [o.completion for o in await asyncio.gather(*calls)]

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
