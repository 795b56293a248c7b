"""AutoInterp as an Inspect task, its explainer and scorer as model roles::

    inspect eval findbench/autointerp --model findbench/embedded -T sae=synthetic -T out=outputs/ai
    inspect eval findbench/autointerp --model none --model-role explainer=vllm/M -M base_url=… \\
        --model-role scorer=findbench/embedded -T n_latents=100

One sample per latent of the run (``id`` its position, 1-based, among the latents the run explains;
the latent itself in the input where ``-T latents`` names it, else in the metadata once solved). The
first sample to start runs :func:`~findbench.autointerp.run.run_autointerp` once for all of them, the
one AutoInterp path (``findbench autointerp`` runs it too), so both write the same result files in
``out`` and resume from them (``eval_set`` retries a failed run); each sample then shows its latent:
the explanation as its output, each scorer's score, and the dashboard's panel of the latent
(``-T report=true``). ``-T`` takes ``findbench autointerp``'s settings with its defaults
(:func:`~findbench.autointerp.commands.autointerp_command`); a misspelled one, a refused value or an
unknown findbench model fails before anything runs (:func:`findbench.lm.inspect_lm.task_arguments`).

- **explainer**: the ``explainer`` role, else the eval's model (``--model``) unless it is ``none``,
  else ``-T explainer`` (a findbench LM spec; default ``embedded``);
- **scorer**: the ``scorer`` role, else ``-T scorer``, else the explainer.

A role becomes a findbench LM as the judge's does (:func:`findbench.lm.inspect_lm.role_lm`):
``findbench/<spec>`` in process, a model at a vLLM or OpenAI-compatible server through that server
(with log-probabilities and grammars), any other Inspect model through Inspect (explanations and
detection only: the fuzz and likelihood scorers need log-probabilities).

Each sample's score holds its latent's score from each scorer under SAEBench's key (``autointerp``
for detection; a skipped latent is unscored), so the eval's results are each scorer's mean over the
latents; its metadata the latent's record (firing statistics, degenerate explanation) and the files
written, whose results JSON holds the run's intervals, floors and margins.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import get_model, model_roles
from inspect_ai.scorer import Score, Target, mean, scorer
from inspect_ai.solver import Generate, TaskState, solver

from findbench._version import __version__
from findbench.autointerp.commands import AutoInterpCommand, autointerp_command, parse_shard, setting_names
from findbench.autointerp.results import METRIC_KEYS
from findbench.constants import UsageError
from findbench.lm.inspect_lm import check_models, task_arguments

if TYPE_CHECKING:
    from findbench.autointerp.run import AutoInterpOutput

#: The model roles of the task.
EXPLAINER_ROLE, SCORER_ROLE = "explainer", "scorer"
#: The task's registry name.
TASK_NAME = "findbench/autointerp"


async def _lm(model: Any, role: str, command: AutoInterpCommand) -> Any:
    """The findbench LM of Inspect ``model`` as ``role`` (a spec or None: as given)."""
    from findbench.lm.inspect_lm import role_lm

    return model if model is None or isinstance(model, str) else await role_lm(
        model, role, max_workers=command.max_connections)


async def _run(command: AutoInterpCommand) -> AutoInterpOutput:
    """The run (:func:`~findbench.autointerp.run.run_autointerp` with the roles' LMs, no progress bars)."""
    from findbench.autointerp.run import run_autointerp

    bound, model = model_roles(), get_model()
    explainer = get_model(role=EXPLAINER_ROLE) if EXPLAINER_ROLE in bound else (
        command.explainer if str(model).startswith("none/") else model)
    scorer = get_model(role=SCORER_ROLE) if SCORER_ROLE in bound else command.scorer
    explainer, scorer = await _lm(explainer, EXPLAINER_ROLE, command), await _lm(scorer, SCORER_ROLE, command)
    return await asyncio.to_thread(run_autointerp, dataclasses.replace(command, explainer=explainer, scorer=scorer,
                                                                        progress=False))


@solver
def autointerp_run(command: AutoInterpCommand):
    """Explain and score the run's latents once (the first sample to start runs it, the others wait
    for it); each sample takes its latent's record: the explanation as its output, the record and the
    files written in its metadata (``latent``, ``record``, ``files``)."""
    run: list[asyncio.Future] = []

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if not run:
            run.append(asyncio.ensure_future(_run(command)))
        result = await asyncio.shield(run[0])
        records, position = result.records, int(state.metadata["position"])
        state.metadata["files"] = result.files
        if position > len(records):
            state.output.completion = (f"no latent: the run explains {len(records)} latents (only those firing more "
                                       f"than dead_latent_threshold={command.config.dead_latent_threshold} times)")
        else:
            rec = records[position - 1]
            state.metadata |= {"latent": rec["latent"], "record": {k: v for k, v in rec.items() if k != "windows"}}
            state.output.completion = rec["explanation"] or f"skipped: {rec['skipped']}"
        state.completed = True
        return state

    return solve


@scorer(metrics={"*": [mean()]})
def autointerp_scores():
    """The sample's latent's score from each scorer under SAEBench's key (``autointerp``: detection);
    None (unscored) for a skipped latent or a position past the run's latents. The eval's results are
    each key's mean over the latents, the run's score."""

    async def score(state: TaskState, target: Target) -> Score | None:
        rec = state.metadata.get("record")
        if rec is None or rec["skipped"] is not None:
            return None
        files = state.metadata["files"]
        report = files.get("report")
        return Score(
            value={METRIC_KEYS[name]: value for name, value in rec["scores"].items()},
            answer=rec["explanation"],
            explanation=state.output.completion,
            metadata={
                "latent": rec["latent"],
                "degenerate_reason": rec["degenerate_reason"],
                "explanation_truncated": rec["explanation_truncated"],
                "dashboard": f"{Path(report).resolve().as_uri()}#latent-{rec['latent']}" if report else None,
                "files": files,
            },
        )

    return score


@task
@task_arguments(TASK_NAME, setting_names())
def autointerp(**settings: Any) -> Task:
    """SAE latents explained and scored (``findbench autointerp``), one sample per latent, the explainer
    and scorer as model roles (module docstring); ``settings``: ``findbench autointerp``'s (``-T name=value``)."""
    command = autointerp_command(settings)
    config = command.config
    if command.token_shard is not None:
        raise UsageError("--token-shard: the task explains and scores; save a token shard's activations with "
                         "findbench autointerp --token-shard, then give the folders as -T activations=[…]")
    check_models([EXPLAINER_ROLE, SCORER_ROLE])
    latents = config.override_latents or [None] * config.n_latents
    start, step = parse_shard(command.shard) or (0, 1)
    where = f"SAE {command.sae}{':' + command.sae_id if command.sae_id else ''} on {command.model}"
    return Task(
        dataset=MemoryDataset([
            Sample(
                id=position,
                input=f"Explain and score latent {latent} of {where}." if latent is not None else
                f"Explain and score latent #{position} of those the run draws from {where}.",
                metadata={"position": position},
            )
            for position, latent in enumerate(latents[start::step], 1)
        ], name="autointerp"),
        solver=autointerp_run(command),
        scorer=autointerp_scores(),
        metadata={"findbench_version": __version__, "out": command.out, "config": config.to_dict()},
    )
