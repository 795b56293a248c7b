"""Model roles of the Inspect task: the interpreter is the task's model, the unit-test judge the
``judge`` role.

``inspect eval findbench/find_interpret --model … --model-role judge=<model>`` and the task's
``judge`` argument (``-T judge=…``; ``findbench evaluate --judge``) end in one findbench LM and one
scoring mode, which :func:`findbench.interpret.evaluate.score_interpretations` uses (the one
scoring path). A role is read through the model it names (as every role is: :mod:`findbench.lm.inspect_lm`):

- ``findbench/<spec>``: the findbench LM of :class:`~findbench.lm.inspect_provider.FindbenchModelAPI`
  (``findbench/embedded-evaluator`` in process; with ``base_url``, the model of that name served
  there: ``judge={model: findbench/embedded-evaluator, model_args: {base_url: http://host:8001/v1}}``);
- any OpenAI-compatible provider with a server URL (``vllm/<base>:<adapter>`` or ``vllm/<model>``
  with ``base_url`` or ``$VLLM_BASE_URL``, ``openai-api/…``): an :class:`~findbench.lm.OpenAILM` on
  that URL naming the served model (the LoRA adapter's name for ``vllm/<base>:<adapter>``), which
  reads vLLM's ``prompt_logprobs``. A ``vllm/…`` model not yet connected answers one one-token
  request first, so that Inspect resolves its URL.

The mode is ``judge_mode`` where given, else the one the served judge records
(:func:`findbench.judge.judge_mode_of`: ``pmi`` for ``embedded-evaluator``), else ``logprob``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from findbench.judge import judge_mode_of, load_judge
from findbench.judge.scoring import unwrap_lm
from findbench.lm.inspect_lm import endpoint, is_findbench_model, served_at

#: The name of the judge's model role.
JUDGE_ROLE = "judge"


def _unreadable(model: Any) -> str:
    return (
        f"--model-role {JUDGE_ROLE}={model}: findbench's judge reads log-probabilities from an "
        "OpenAI-compatible server (vllm/<model> with base_url, openai-api/…) or a findbench model "
        "(findbench/<spec>); this model has neither"
    )


def check_judge(judge: Any, option: str = "judge") -> None:
    """Fail before any episode runs when ``judge`` names no model (UsageError) or a registered judge
    (``embedded-evaluator``) that is not available (FileNotFoundError), naming ``option``."""
    from findbench.models import REGISTRY, check_spec, resolve

    if not isinstance(judge, str) or judge.startswith(("http://", "https://")) or Path(judge).is_dir():
        return
    check_spec(judge, flag=option)

    if judge in REGISTRY:
        try:
            resolve(judge)
        except FileNotFoundError as exc:
            raise FileNotFoundError(
                f"{option}: {exc}; or pass judge=none (-T judge=none) to leave descriptions unscored "
                "here (findbench evaluate scores them later)"
            ) from None


def check_role_judge(model: Any) -> None:
    """Fail before any episode runs when the ``judge`` role names a model :func:`role_judge` cannot
    read: a registered findbench judge not available (:func:`check_judge`) or a provider that is no
    OpenAI-compatible server (ValueError naming the role)."""
    if is_findbench_model(model):
        check_judge(model.api.spec, option=f"--model-role {JUDGE_ROLE}={model}")
    elif served_at(model) is None and not hasattr(model.api, "adapter"):  # a vllm/… model finds its URL later
        raise ValueError(_unreadable(model))


def judge_model_of(judge: Any, *, judge_model: str | None = None, judge_cache: str | None = None) -> Any:
    """The Inspect model (``findbench/<spec>``, not yet loaded) standing for a task's ``judge``
    argument: a :func:`findbench.lm.load_lm` spec (``judge_model``: a server URL's served name) or
    an LM instance."""
    from inspect_ai.model import get_model

    if not isinstance(judge, (str, os.PathLike)):
        return get_model(f"findbench/{getattr(judge, 'name', type(judge).__name__)}", memoize=False, lm=judge)
    spec = os.fspath(judge)
    if spec.startswith(("http://", "https://")) and judge_model is not None:  # the served name, at the URL
        return get_model(f"findbench/{judge_model}", base_url=spec, memoize=False, cache=judge_cache)
    return get_model(f"findbench/{spec}", memoize=False, cache=judge_cache)


async def role_judge(model: Any, *, judge_mode: str | None = None, judge_cache: str | None = None) -> tuple[Any, str]:
    """The findbench LM and scoring mode of a judge given as an Inspect model (a role, or
    :func:`judge_model_of`); ValueError naming the role for a model whose log-probabilities findbench
    cannot read."""
    from findbench.lm.openai_lm import OpenAILM

    api = model.api
    if is_findbench_model(model):
        lm = api.lm
        inner = unwrap_lm(lm)
        served = inner.model if isinstance(inner, OpenAILM) else None
        return lm, judge_mode or judge_mode_of(api.base_url or api.model_name, judge_model=served)
    if (served := await endpoint(model)) is None:
        raise ValueError(_unreadable(model))
    url, name = served
    return load_judge(url, judge_model=name, cache=judge_cache), judge_mode or judge_mode_of(url, judge_model=name)
