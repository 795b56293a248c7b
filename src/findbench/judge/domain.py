"""Judge the ``[DOMAIN]`` answers of interpretations of corrupted relation neurons.

A relation neuron with an ``exception`` answers "undefined" on a subdomain; shown only the
``[DOMAIN]`` text, a judge picks those unit tests' items only when the text names the subdomain.
An extension of FIND, which asks for the domain but does not score it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

from findbench._checks import one_of, positive_int
from findbench.find.domain import domain_text, domain_unit_tests
from findbench.judge.scoring import JUDGE_MODES, judge_mode_of, judge_unit_tests, load_judge
from findbench.stats import bootstrap_ci

log = logging.getLogger(__name__)


def score_relation_domain(
    predictions: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    *,
    judge: Any,
    mode: str | None = None,
    judge_model: str | None = None,
    judge_cache: str | None = None,
    batch_size: int = 16,
    progress: bool = False,
) -> dict[str, Any]:
    """Unit-test accuracy of ``[DOMAIN]`` answers (:func:`findbench.find.domain.domain_text`) on the
    unit tests of ``neurons_relations`` rows whose correct output is "undefined".

    ``judge``: an LM or a :func:`findbench.lm.load_lm` spec; ``mode`` defaults to the mode a trained
    judge records, else ``"logprob"``.

    Returns ``{"domain_unit_test_accuracy", "domain_unit_test_accuracy_ci" (95 % bootstrap over the
    scored rows), "n", "per_function": [fraction right or None], "status": ["ok" | "no_exception" |
    "no_undefined_tests"], "n_tests", "judge"}``; the accuracy, interval and judge are None when
    nothing was scored. Bad input raises naming the field before any judge loads.
    """
    for name, seq in (("predictions", predictions), ("rows", rows)):
        if isinstance(seq, (str, Mapping)) or not isinstance(seq, Sequence):
            raise TypeError(f"{name} must be a list, got {type(seq).__name__}")
    if len(predictions) != len(rows):
        raise ValueError(f"predictions ({len(predictions)}) and rows ({len(rows)}) differ in length")
    if not predictions:
        raise ValueError("predictions is empty: need at least one function to score")
    for i, p in enumerate(predictions):
        if not isinstance(p, str):
            raise TypeError(f"predictions[{i}] must be a str (the interpretation), got {type(p).__name__}")
    if mode is not None:
        one_of("mode", mode, JUDGE_MODES)
    positive_int("batch_size", batch_size)

    status: list[str] = []
    tests: list[list[dict]] = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise TypeError(f"rows[{i}] must be a dict (a neurons_relations dataset row), got {type(row).__name__}")
        if row.get("category") not in (None, "neurons_relations"):
            raise ValueError(f"rows[{i}]['category'] must be 'neurons_relations', got {row.get('category')!r}")
        picked = domain_unit_tests(row, where=f"rows[{i}]")
        exception = row.get("exception")
        if not (isinstance(exception, str) and exception.strip()):
            status.append("no_exception")
        elif not picked:
            status.append("no_undefined_tests")
        else:
            status.append("ok")
        tests.append(picked)

    scored = [i for i, s in enumerate(status) if s == "ok"]
    missing = status.count("no_undefined_tests")
    if missing:
        log.info(
            "find_domain: %d corrupted relation(s) have no unit test with the output 'undefined' (not scored)", missing
        )
    per_function: list[float | None] = [None] * len(rows)
    name = None
    if scored:
        if mode is None:
            mode = judge_mode_of(judge)
        lm = load_judge(judge, judge_model=judge_model, cache=judge_cache, batch_size=batch_size)
        out = judge_unit_tests(
            lm,
            [domain_text(predictions[i]) for i in scored],
            [tests[i] for i in scored],
            "neurons_relations",
            mode=mode,
            keep_full_description=True,
            progress=progress,
        )  # the [DOMAIN] section is already cut out
        for i, acc in zip(scored, out["per_function"]):
            per_function[i] = float(acc)
        name = out["judge"]
    values = [v for v in per_function if v is not None]
    mean = float(math.fsum(values) / len(values)) if values else None
    return {
        "domain_unit_test_accuracy": mean,
        "domain_unit_test_accuracy_ci": list(bootstrap_ci(values)) if values else None,
        "n": len(values),
        "per_function": per_function,
        "status": status,
        "n_tests": [len(t) for t in tests],
        "judge": name,
    }
