"""FIND's interpretation task on Inspect (registered via :mod:`findbench.interpret._inspect_registry`):
``findbench/find_interpret``, one sample per FIND function (metadata: the row and the method), solved
by :func:`~findbench.interpret.solver.find_agent` and scored by :mod:`findbench.interpret.scorers`::

    inspect eval findbench/find_interpret -T configs=strings -T limit=2 --model findbench/embedded

:func:`interpret_task` builds the task, for this registry entry and for ``findbench interpret``
(:func:`~findbench.interpret.run.run_interpretations`) alike."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample

from findbench import _checks
from findbench._version import __version__
from findbench.constants import UsageError
from findbench.interpret.config import AgentConfig, InterpretConfig
from findbench.interpret.floors import observed_turns
from findbench.interpret.prompts import check_method
from findbench.interpret.protocol import NEURON_CATEGORIES, format_answer
from findbench.interpret.references import REFERENCE_INTERPRETERS, reference_answer
from findbench.interpret.roles import JUDGE_ROLE, check_judge, check_role_judge
from findbench.interpret.scorers import domain_iou, exact_match, find_circuit, nmse_success, unit_test_accuracy
from findbench.interpret.solver import find_agent
from findbench.interpret.truth import json_row
from findbench.interpret.whitebox import reference_components
from findbench.judge.scoring import JUDGE_MODES
from findbench.lm.inspect_lm import check_models, eval_models, task_arguments
from findbench.lm.inspect_provider import inspect_model_name
from findbench.schema import CONFIGS, RASP, parse_function_id

#: The task's registry name (``inspect eval findbench/find_interpret``).
TASK_NAME = "findbench/find_interpret"


def _rows(data: Any, category: str, seed: int) -> list[dict]:
    from findbench.find import load_rows

    if data is None or isinstance(data, (str, os.PathLike)):
        return load_rows(category, seed=seed, data=data)
    return [dict(r) for r in data if r.get("category") == category]


def default_configs(data: Any, methods: Sequence[str], functions: Sequence[str] | None, seed: int) -> list[str]:
    """The categories a run covers when none are named: those ``data`` (a folder, rows or None:
    procedural; ``rasp`` only where ``seed``'s compiled weights are at hand) holds, only the neuron ones
    when a MILAN method is asked, only those of ``functions``."""
    from findbench.find.rasp.store import compiled

    present = set(CONFIGS) if compiled(seed) else set(CONFIGS) - {RASP}
    if functions:
        present = {f.split("/", 1)[0] for f in functions}
    elif isinstance(data, (str, os.PathLike)):
        present = {c for c in CONFIGS if (Path(data) / c).is_dir()}
    elif data is not None:
        present = {r.get("category") for r in data}
    if any(m != "aia" for m in methods):
        present &= set(NEURON_CATEGORIES)
    return [c for c in CONFIGS if c in present]


def interpreter_model(name: str) -> str:
    """The Inspect model of an interpreter: ``none/<name>`` for a reference (no model; Inspect shows
    the name), else :func:`~findbench.lm.inspect_provider.inspect_model_name` of the spec."""
    return f"none/{name}" if name in REFERENCE_INTERPRETERS else inspect_model_name(name)


def find_samples(cfg: InterpretConfig, method: str, rows: Sequence[dict] | None = None) -> list[Sample]:
    """One sample per FIND function of ``cfg``'s selection run with ``method``: id the function id,
    metadata ``{"row", "method", "unverified"}`` (``unverified``: the row came from in-memory ``rows``,
    which no data checks).

    The rows are ``rows``, else those of ``cfg.data`` (a dataset folder; None: the procedural rows of
    ``cfg.seed``); ``cfg.configs`` default to :func:`default_configs`; ``cfg.sample`` is seeded and
    stratified by subcategory (after ``cfg.limit``). A reference interpreter adds its turns to the
    metadata (``reference_turns``; ``observed`` calls ``cfg.observed_calls`` inputs first)."""
    from findbench.find.rows import sample_rows

    data = rows if rows is not None else cfg.data
    config_list = cfg.configs if cfg.configs is not None else default_configs(data, cfg.method, cfg.functions, cfg.seed)
    if not config_list:
        raise UsageError(
            f"--configs: nothing to run for method {method!r} (MILAN methods need {', '.join(NEURON_CATEGORIES)})"
        )
    for c in config_list:
        try:
            check_method(method, c)
        except ValueError as exc:
            raise UsageError(f"--method: {exc}; drop {c!r} from --configs or run it with method 'aia'") from None
    if stray := sorted(f for f in cfg.functions or [] if parse_function_id(f)[0] not in config_list):
        raise UsageError(f"--functions: {stray} are not in --configs {config_list}")

    wanted = set(cfg.functions or [])
    samples: list[Sample] = []
    for category in config_list:
        pool = _rows(data, category, cfg.seed)
        chosen = [r for r in pool if not wanted or r["function_id"] in wanted][: cfg.limit]
        if cfg.sample is not None:
            chosen = sample_rows(chosen, cfg.sample, seed=cfg.seed)
        for row in chosen:
            metadata: dict[str, Any] = {"row": json_row(row), "method": method, "unverified": rows is not None}
            if cfg.reference == "observed":
                metadata["reference_turns"] = observed_turns(row, pool, calls=cfg.observed_calls, seed=cfg.seed)
            elif cfg.reference is not None:
                answer = reference_answer(cfg.reference, row, pool, seed=cfg.seed)
                components = (reference_components(cfg.reference, row, cfg.access)
                              if cfg.access != "black" and cfg.reference in ("oracle", "attribution") else None)
                metadata["reference_turns"] = [format_answer(answer.description, answer.domain, answer.code,
                                                             components)]
            samples.append(
                Sample(
                    input=f"Interpret the FIND function {row['function_id']} (method {method}).",
                    target=str(row.get("description") or ""),
                    id=row["function_id"],
                    metadata=metadata,
                )
            )
    if missing := sorted(wanted - {str(s.id) for s in samples}):
        where = "rows given" if rows is not None else (f"data folder {data}" if data is not None
                                                      else f"procedural data (seed {cfg.seed})")
        raise UsageError(f"--functions: {missing} are not in the {where}")
    return samples


def interpret_task(
    samples: list[Sample],
    cfg: AgentConfig,
    *,
    interpreter: str | None,
    scorers: list | None = None,
    name: str | None = None,
    version: int | str = 0,
    model: str | None = None,
) -> Task:
    """The task over ``samples`` (of one method), solved by :func:`find_agent` with ``cfg``; its
    metadata records ``interpreter`` (the run's name for it; None: the model), which ``findbench
    evaluate`` checks; ``name``, ``version`` and ``model`` as Inspect's ``Task`` takes them."""
    return Task(
        dataset=MemoryDataset(samples, name="find"),
        solver=find_agent(cfg),
        scorer=scorers or None,
        metadata={
            "findbench_version": __version__,
            "protocol": cfg.protocol,
            "episode_tokens": cfg.episode_tokens,
            "structured_outputs": cfg.structured_outputs,
            "access": cfg.access,
            "interpreter": interpreter,
        },
        name=name,
        version=version,
        model=model,
    )


@task
@task_arguments(TASK_NAME, [f.name for f in dataclasses.fields(InterpretConfig)])
def find_interpret(
    judge: Any = "embedded-evaluator",
    judge_mode: str | None = None,
    judge_model: str | None = None,
    judge_cache: str | None = None,
    **settings: Any,
) -> Task:
    """FIND's interpretation task (FIND §3, Table 2) for one method (``-T name=value``).

    ``settings``: ``findbench interpret``'s (:class:`~findbench.interpret.config.InterpretConfig`,
    which checks them), for one ``method``; rows as :func:`find_samples`, the episode as
    :func:`find_agent`; a reference ``interpreter`` answers without a model. ``judge``
    (``None``/``"none"``: descriptions unscored) as ``findbench evaluate``'s; the ``judge`` model role
    (``--model-role judge=…``) replaces it. Arguments, the eval's findbench models and the judge are
    checked here, each refusal one line naming its ``-T`` argument or option (:func:`task_arguments`)."""
    settings.pop("model", None)  # Inspect passes its --model to every task: that model is the interpreter
    if settings.get("interpreter") is None:
        settings.pop("interpreter", None)
    cfg = InterpretConfig(**settings)
    if len(cfg.method) != 1:
        raise UsageError(f"--method: the task runs one method, got {','.join(cfg.method)}")
    if judge_mode is not None:
        _checks.one_of("--judge-mode", judge_mode, JUDGE_MODES)
    models = eval_models()
    check_models([JUDGE_ROLE], models)
    samples = find_samples(cfg, cfg.method[0])
    present = {s.metadata["row"]["category"] for s in samples}
    judged = judge not in (None, "none") and bool(present - {"numeric"})
    if judged:
        if (role := models.get(f"--model-role {JUDGE_ROLE}")) is not None:
            check_role_judge(role)
        else:
            check_judge(judge)
    scorers = [
        s
        for s, wanted in (
            (nmse_success(), "numeric" in present),
            (domain_iou(), "numeric" in present),
            (exact_match(), bool(present & {"strings", "rasp"})),
            (find_circuit(), "rasp" in present and cfg.access != "black"),
        )
        if wanted
    ]
    if judged:
        scorers.append(
            unit_test_accuracy(judge, judge_mode=judge_mode, judge_model=judge_model, judge_cache=judge_cache)
        )
    # a reference answers without a model: Inspect shows the run's model as none/<reference>
    return interpret_task(samples, cfg.agent(), interpreter=cfg.reference, scorers=scorers,
                          model=interpreter_model(cfg.reference) if cfg.reference else None)
