"""AutoInterp as an Inspect task, its explainer and scorer as model roles::

    inspect eval findbench/autointerp --model findbench/embedded -T sae=synthetic -T out=outputs/ai
    inspect eval findbench/autointerp --model none --model-role explainer=vllm/M -M base_url=… \\
        --model-role scorer=findbench/embedded -T n_latents=100

One sample per run, solved by :func:`~findbench.autointerp.run.run_autointerp`, the one AutoInterp
path (``findbench autointerp`` runs it too), so both write the same result files in ``out`` and
resume from them (``eval_set`` retries a failed run). ``-T`` takes ``findbench autointerp``'s
settings with its defaults (:func:`~findbench.autointerp.commands.autointerp_configs`).

- **explainer**: the ``explainer`` role, else the eval's model (``--model``) unless it is ``none``,
  else ``-T explainer`` (a findbench LM spec; default ``embedded``);
- **scorer**: the ``scorer`` role, else ``-T scorer``, else the explainer.

A role becomes a findbench LM as the judge's does (:func:`findbench.lm.inspect_lm.role_lm`):
``findbench/<spec>`` in process, a model at a vLLM or OpenAI-compatible server through that server
(with log-probabilities and grammars), any other Inspect model through Inspect (explanations and
detection only: the fuzz and likelihood scorers need log-probabilities).

The score holds each scorer's mean under SAEBench's key (``autointerp`` for detection) and its margin
over its best floor (``autointerp_margin``, …); its metadata the results' ``eval_result_metrics``
(n, intervals, floors) and the files written.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import get_model, model_roles
from inspect_ai.scorer import Score, Target, mean, scorer
from inspect_ai.solver import Generate, TaskState, solver

from findbench._version import __version__
from findbench.autointerp.commands import AutoInterpCommand, autointerp_configs, format_score
from findbench.autointerp.config import AutoInterpConfig
from findbench.constants import UsageError

#: The model roles of the task.
EXPLAINER_ROLE, SCORER_ROLE = "explainer", "scorer"


async def _lm(model: Any, role: str, command: AutoInterpCommand) -> Any:
    """The findbench LM of Inspect ``model`` as ``role`` (a spec or None: as given)."""
    from findbench.lm.inspect_lm import role_lm

    if model is None or isinstance(model, str):
        return model
    return await role_lm(model, role, max_workers=command.max_connections)


@solver
def autointerp_run(command: AutoInterpCommand, config: AutoInterpConfig):
    """Explain and score the run's latents (:func:`~findbench.autointerp.run.run_autointerp`) with
    the roles' LMs; the results JSON (with ``files``) goes into the sample's metadata."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        from findbench.autointerp.run import run_autointerp

        bound, model = model_roles(), get_model()
        explainer = get_model(role=EXPLAINER_ROLE) if EXPLAINER_ROLE in bound else (
            command.explainer if str(model) == "none/none" else model)
        scorer = get_model(role=SCORER_ROLE) if SCORER_ROLE in bound else command.scorer
        explainer, scorer = await _lm(explainer, EXPLAINER_ROLE, command), await _lm(scorer, SCORER_ROLE, command)
        settings = {f.name: getattr(command, f.name) for f in dataclasses.fields(command)}
        settings |= {"explainer": explainer, "scorer": scorer}
        report = settings.pop("report")
        result = await asyncio.to_thread(run_autointerp, config=config, progress=False, **settings)
        if report:
            from findbench.autointerp.report import write_report

            result["files"]["report"] = str(await asyncio.to_thread(write_report, result["files"]["results"]))
        state.metadata["results"] = result
        state.output.completion = "\n".join(format_score(k, v) for k, v in result["eval_result_metrics"].items())
        state.completed = True
        return state

    return solve


@scorer(metrics={"*": [mean()]})
def autointerp_scores():
    """Each scorer's mean over the run's latents under SAEBench's key (``autointerp``: detection) and
    its margin over its best floor (``<key>_margin``)."""

    async def score(state: TaskState, target: Target) -> Score:
        result = state.metadata["results"]
        metrics = result["eval_result_metrics"]
        return Score(
            value={name: value for key, values in metrics.items()
                   for name, value in ((key, values[f"{key}_score"]), (f"{key}_margin", values.get("margin")))
                   if value is not None},
            explanation=state.output.completion,
            metadata={"eval_result_metrics": metrics, "files": result["files"], "shard": result.get("shard")},
        )

    return score


@task
def autointerp(**settings: Any) -> Task:
    """SAE latents explained and scored (``findbench autointerp``), the explainer and scorer as
    model roles (module docstring); ``settings``: ``findbench autointerp``'s (``-T name=value``)."""
    command, config = autointerp_configs(settings)
    if command.token_shard is not None:
        raise UsageError("token_shard: the task explains and scores; save a token shard's activations with "
                         "findbench autointerp --token-shard, then give the folders as -T activations=[…]")
    sample = Sample(
        id=f"{command.sae}:{command.sae_id or ''}@{command.model}" + (f"#{command.shard}" if command.shard else ""),
        input=f"Explain and score the latents of SAE {command.sae} on {command.model}.",
    )
    return Task(
        dataset=MemoryDataset([sample], name="autointerp"),
        solver=autointerp_run(command, config),
        scorer=autointerp_scores(),
        metadata={"findbench_version": __version__, "out": command.out, "config": config.to_dict()},
    )
