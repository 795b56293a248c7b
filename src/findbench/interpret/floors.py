"""Floors from an agent's own observations: what an agent that understood nothing, but saw the
same input → output pairs, would score with the same metric and judge.

The answers built from an episode's recorded calls (:func:`observed_pairs`):

- numeric code: each of :data:`NUMERIC_FLOORS`, a constant (the mean output), a least-squares
  line and linear interpolation (flat outside the called range); the floor is the best of them
  by NMSE on FIND's grid;
- strings code: a lookup table of the observed pairs, the input unchanged where unseen;
- descriptions (strings, entities, relations): the observed pairs listed, no rule
  (:func:`findbench.judge.probes.examples_only_description`, within the judge's cap).

An episode with no usable observation has the ``constant`` reference answer as its floor. The
``observed`` reference interpreter (:func:`observed_plan`, :func:`observed_answer`) probes on a
fixed seeded plan and answers with exactly these floors, so its margin is 0."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

from findbench.interpret.protocol import Answer

#: The numeric floor's candidate answers.
NUMERIC_FLOORS = ("constant", "line", "interpolation")
#: Calls of the ``observed`` interpreter's plan (``--observed-calls``).
DEFAULT_OBSERVED_CALLS = 40
#: FIND's numeric domain, over which the ``observed`` interpreter spaces its calls.
NUMERIC_RANGE = (-128.0, 128.0)

Pair = tuple[str, Any]


def observed_pairs(episode: Mapping[str, Any] | None) -> list[Pair]:
    """The ``(input, output)`` pairs an episode's calls returned, first call of an input only;
    failed values, non-scalar outputs and malformed records are left out. Inputs as the agent wrote them."""
    pairs: dict[str, Any] = {}
    found = (episode or {}).get("calls")
    for call in found if isinstance(found, list) else []:  # the record is read from a file: any shape
        if not isinstance(call, Mapping):
            continue
        inputs, outputs, errors = (
            call.get(k) if isinstance(call.get(k), list) else [] for k in ("inputs", "outputs", "errors")
        )
        for k, (x, y) in enumerate(zip(inputs, outputs)):
            failed = k < len(errors) and errors[k] is not None
            if isinstance(x, str) and y is not None and not failed and isinstance(y, (str, int, float)):
                pairs.setdefault(x, y)
    return list(pairs.items())


def _numeric_points(pairs: Sequence[Pair]) -> list[tuple[float, float]]:
    """Finite ``(x, y)`` points, the mean output where an x repeats (as written differently), sorted by x."""
    by_x: dict[float, list[float]] = {}
    for x, y in pairs:
        try:
            xv, yv = float(x), float(y)
        except (TypeError, ValueError):
            continue
        if math.isfinite(xv) and math.isfinite(yv):
            by_x.setdefault(xv, []).append(yv)
    return sorted((x, sum(ys) / len(ys)) for x, ys in by_x.items())


def numeric_floor_codes(pairs: Sequence[Pair]) -> dict[str, str]:
    """The code of each of :data:`NUMERIC_FLOORS` fitted to ``pairs``; ``{}`` without a finite point."""
    points = _numeric_points(pairs)
    if not points:
        return {}
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mean = sum(ys) / len(ys)
    slope, intercept = 0.0, mean
    if len(xs) > 1:
        mx = sum(xs) / len(xs)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - mean) for x, y in zip(xs, ys)) / sxx
        intercept = mean - slope * mx
    return {
        "constant": f"def function(x):\n    return {mean!r}\n",
        "line": f"def function(x):\n    return {slope!r} * x + {intercept!r}\n",
        "interpolation": (
            f"_XS = {xs!r}\n_YS = {ys!r}\n\n\n"
            "def function(x):\n"
            "    import bisect\n"
            "    if x <= _XS[0]:\n        return _YS[0]\n"
            "    if x >= _XS[-1]:\n        return _YS[-1]\n"
            "    i = bisect.bisect_right(_XS, x)\n"
            "    x0, x1, y0, y1 = _XS[i - 1], _XS[i], _YS[i - 1], _YS[i]\n"
            "    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)\n"
        ),
    }


def lookup_code(pairs: Sequence[Pair]) -> str:
    """A strings function answering each observed input with its output, any other input unchanged."""
    table = {str(x): str(y) for x, y in pairs}
    return f"_TABLE = {table!r}\n\n\ndef function(s):\n    return _TABLE.get(s, s)\n"


def floor_answers(category: str, pairs: Sequence[Pair]) -> list[Answer]:
    """The floor answers of one episode: numeric, one per fitted :data:`NUMERIC_FLOORS` candidate
    (the best counts); others, one answer (the listed examples, and strings the lookup code).
    No observation: the ``constant`` reference answer."""
    from findbench.interpret.references import CONSTANT_ANSWERS
    from findbench.judge.probes import examples_only_description

    if category == "numeric":
        codes = numeric_floor_codes(pairs)
        return [Answer(description="", code=code) for code in codes.values()] or [CONSTANT_ANSWERS["numeric"]]
    if not pairs:
        return [CONSTANT_ANSWERS[category]]
    listed = [(x, None if category == "neurons_entities" else y) for x, y in pairs]
    description = examples_only_description(category, listed) or CONSTANT_ANSWERS[category].description
    return [Answer(description=description, code=lookup_code(pairs) if category == "strings" else None)]


def observed_plan(
    row: Mapping[str, Any], pool: Sequence[Mapping[str, Any]], *, calls: int = DEFAULT_OBSERVED_CALLS, seed: int = 0
) -> list[str]:
    """The inputs the ``observed`` interpreter calls ``row``'s function on: numeric, ``calls`` values
    evenly spaced over :data:`NUMERIC_RANGE`; otherwise ``calls`` inputs drawn (seeded by ``seed``
    and the function id) from the category's input pool: every test and unit-test input of the
    other functions of ``pool``, less those of the row's own tests (which would give answers away)."""
    from findbench.judge.probes import shown_inputs

    if isinstance(calls, bool) or not isinstance(calls, int) or calls < 1:
        raise ValueError(f"observed_calls must be a positive integer, got {calls!r}")
    if row.get("category") == "numeric":
        low, high = NUMERIC_RANGE
        if calls == 1:
            return ["0"]
        return [f"{low + (high - low) * i / (calls - 1):g}" for i in range(calls)]
    shown = shown_inputs(row)
    candidates = set()
    for other in pool:
        if other.get("function_id") == row.get("function_id") or other.get("category") != row.get("category"):
            continue
        inputs = [str(x) for x in other.get("test_inputs") or []]
        for test in other.get("unit_tests") or []:
            inputs += [str(x) for x in test.get("inputs") or []]
        candidates |= {x for x in inputs if x.strip() and x.strip().lower() not in shown}
    ordered = sorted(candidates)
    return random.Random(f"{seed}:{row.get('function_id')}:observed").sample(ordered, min(calls, len(ordered)))


def best_floor(row: Mapping[str, Any], answers: Sequence[Answer]) -> Answer:
    """The floor answer that counts: numeric, the candidate of least NMSE on FIND's grid against the
    row's code (the first on a tie); otherwise the one answer."""
    if row.get("category") != "numeric" or len(answers) == 1:
        return answers[0]
    from findbench.find.code_scoring import score_nmse

    values = score_nmse([a.code or "" for a in answers], [row["code"]] * len(answers), progress=False)["nmse"]
    return answers[min(range(len(answers)), key=lambda i: (values[i], i))]


def _quoted(value: str) -> str:
    """``value`` as one shell word in single quotes (commas and spaces inside stay one value)."""
    return "'" + value.replace("'", "'\"'\"'") + "'"


def observed_turns(
    row: Mapping[str, Any],
    pool: Sequence[Mapping[str, Any]],
    *,
    method: str = "aia",
    calls: int = DEFAULT_OBSERVED_CALLS,
    seed: int = 0,
) -> list[str]:
    """The ``observed`` interpreter's two turns on ``row``: its plan as ``PYTHON(...)`` commands
    (:func:`observed_plan`), then the floor answer of what those calls (and, for the MILAN
    methods, the exemplars shown first) return, run here exactly as the harness runs them."""
    from findbench.interpret.calls import FunctionRunner
    from findbench.interpret.protocol import MAX_INPUTS_PER_COMMAND, SCRIPT_NAME, Command, format_answer

    plan = observed_plan(row, pool, calls=calls, seed=seed)
    chunks = [plan[i : i + MAX_INPUTS_PER_COMMAND] for i in range(0, len(plan), MAX_INPUTS_PER_COMMAND)]
    commands = [f"PYTHON({SCRIPT_NAME} {' '.join(_quoted(x) for x in chunk)})" for chunk in chunks]
    runner = FunctionRunner(row, seed=seed)
    records = []
    if method != "aia" and row.get("exemplars"):
        records.append(runner.run(Command(text="exemplars", inputs=tuple(str(x) for x in row["exemplars"])))[1])
    records += [runner.run(Command(text=text, inputs=tuple(chunk)))[1] for text, chunk in zip(commands, chunks)]
    category = str(row.get("category"))
    answer = best_floor(row, floor_answers(category, observed_pairs({"calls": records})))
    return ["\n".join(commands), format_answer(answer.description, answer.domain, answer.code)]
