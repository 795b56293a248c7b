"""The scorers of ``findbench/find_interpret``: views of
:func:`findbench.interpret.evaluate.score_interpretations` on a sample's episode (the record
:func:`~findbench.interpret.solver.find_agent` keeps in the store): :func:`nmse_success`,
:func:`exact_match`, :func:`domain_iou`, :func:`unit_test_accuracy` and (rasp, white-box access)
:func:`find_circuit`."""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Any

from inspect_ai.scorer import Score, Target, mean, scorer, stderr
from inspect_ai.solver import TaskState

from findbench.interpret.episode import STORE_PREFIX, EpisodeState
from findbench.interpret.log_scores import judge_explanation
from findbench.interpret.roles import JUDGE_ROLE, judge_model_of, role_judge
from findbench.interpret.truth import UNVERIFIED_NOTE
from findbench.interpret.whitebox import CIRCUIT_METRICS, circuit_scores


def _episode(state: TaskState) -> EpisodeState:
    if not any(key.startswith(STORE_PREFIX) for key in state.store.keys()):
        raise ValueError(f"sample {state.sample_id}: no episode in the store (solve it with find_agent)")
    return state.store_as(EpisodeState)


def _scored(state: TaskState, metric: str, **judge: Any) -> dict[str, Any]:
    """The sample's episode scored on ``metric`` by :func:`~findbench.interpret.evaluate.score_interpretations`."""
    from findbench.interpret.evaluate import score_interpretations

    ep, row = _episode(state), state.metadata["row"]
    record = {
        "function_id": row["function_id"],
        "category": row["category"],
        "method": state.metadata["method"],
        "description": ep.description,
        "domain": ep.domain,
        "code": ep.code,
    }
    return score_interpretations([record], [row], metrics=(metric,), **judge)[0]


def _marked(state: TaskState, score: Score | None) -> Score | None:
    """``score`` with :data:`~findbench.interpret.truth.UNVERIFIED_NOTE` opening its explanation
    when the sample's row came from in-memory rows."""
    if score is not None and state.metadata.get("unverified"):
        score.explanation = UNVERIFIED_NOTE + (f"\n{score.explanation}" if score.explanation else "")
    return score


def _metric_scorer(category: str | tuple[str, ...], metric: str, to_score: Any) -> Any:
    """A scorer of ``category``'s samples (one or several): ``to_score(value, episode)`` of the episode's
    ``metric``."""

    async def score(state: TaskState, target: Target) -> Score | None:
        if state.metadata["row"]["category"] not in ((category,) if isinstance(category, str) else category):
            return None
        return _marked(state, to_score((await asyncio.to_thread(_scored, state, metric))[metric], _episode(state)))

    return score


@scorer(metrics=[mean(), stderr()])
def nmse_success():
    """Numeric functions: 1.0 when the answer's code has NMSE below FIND's threshold, else 0.0 (NMSE in the
    metadata)."""
    from findbench.find.code_scoring import NMSE_THRESHOLD

    return _metric_scorer(
        "numeric",
        "nmse",
        lambda value, ep: Score(
            value=float(value < NMSE_THRESHOLD),
            answer=ep.code,
            explanation=f"NMSE {value}",
            metadata={"nmse": value if math.isfinite(value) else None},
        ),
    )


@scorer(metrics=[mean(), stderr()])
def exact_match():
    """String functions: the share of the row's test inputs on which the answer's code is right; rasp
    functions: the share of held-out inputs on which it matches the compiled model at every position."""
    return _metric_scorer(
        ("strings", "rasp"),
        "exact_match",
        lambda value, ep: None if value is None else Score(value=value, answer=ep.code),
    )


@scorer(metrics={m: [mean(), stderr()] for m in CIRCUIT_METRICS})
def find_circuit():
    """Rasp samples under white-box access: ``find_circuit``'s metrics of the answer's component map
    (:func:`~findbench.interpret.whitebox.circuit_scores`; an undefined metric is NaN)."""

    async def score(state: TaskState, target: Target) -> Score | None:
        ep = _episode(state)
        found = await asyncio.to_thread(circuit_scores, ep.model_dump(), state.metadata["row"], floor=False)
        if found is None:
            return None
        value = {m: math.nan if v is None else v for m, v in found.items()}
        return _marked(state, Score(value=value, answer=(ep.answer.components if ep.answer else None) or ""))

    return score


@scorer(metrics=[mean(), stderr()])
def domain_iou():
    """Numeric functions: IoU of the answer's ``[DOMAIN]`` with the corrupted interval."""
    return _metric_scorer("numeric", "domain_iou", lambda value, ep: Score(value=value, answer=ep.domain))


@scorer(metrics=[mean(), stderr()])
def unit_test_accuracy(
    judge: Any = "embedded-evaluator",
    judge_mode: str | None = None,
    judge_model: str | None = None,
    judge_cache: str | None = None,
):
    """Strings and neurons: the share of the row's unit tests the judge answers right from the answer's
    description; the metadata holds ``truncated`` and ``decisions`` (the rows of ``unit_tests.csv``).

    The judge is the eval's ``judge`` model role (``--model-role judge=…``) where it names one, else
    ``judge`` (a :func:`findbench.lm.load_lm` spec or an LM), both loaded on the first score and read
    as :func:`findbench.interpret.roles.role_judge` says."""
    from inspect_ai.model import model_roles

    default = judge_model_of(judge, judge_model=judge_model, judge_cache=judge_cache)
    resolving, lock = asyncio.Lock(), threading.Lock()
    judges: dict[int, tuple[Any, Any, str]] = {}  # id(Inspect model): (the model, kept alive; findbench LM, mode)

    async def judge_of(model: Any) -> tuple[Any, str]:
        async with resolving:
            if id(model) not in judges:
                judges[id(model)] = (model, *await role_judge(model, judge_mode=judge_mode, judge_cache=judge_cache))
            return judges[id(model)][1:]

    def run(state: TaskState, lm: Any, mode: str) -> dict[str, Any]:
        with lock:
            return _scored(state, "unit_test_accuracy", judge=lm, mode=mode)

    async def score(state: TaskState, target: Target) -> Score | None:
        row = state.metadata["row"]
        if row["category"] == "numeric" or not row.get("unit_tests"):
            return None
        role = model_roles().get(JUDGE_ROLE) or default
        lm, mode = await judge_of(role[0] if isinstance(role, list) else role)
        record = await asyncio.to_thread(run, state, lm, mode)
        rows = record["unit_test_rows"]
        return _marked(
            state,
            Score(
                value=record["unit_test_accuracy"],
                answer=record["description"],
                explanation=judge_explanation(rows, mode),
                metadata={"judge_mode": mode, "truncated": bool(rows[0]["truncated"]), "decisions": rows},
            ),
        )

    return score
