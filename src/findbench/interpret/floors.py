"""Floors from an agent's own observations: what an agent that understood nothing, but saw the
same input → output pairs, would score with the same metric and judge.

The pairs are the episode's **recorded inputs run through the data's function** (:func:`observed_pairs`,
as the harness answers calls), never the outputs the record shows: a log whose outputs were deleted or
changed has the same floor. At most :data:`MAX_FLOOR_INPUTS` distinct inputs count (the first by a
hash of the function id and the input where there are more), so neither the order nor the number of
calls can shape the floor. The answers built from them:

- numeric code: each of :data:`NUMERIC_FLOORS`, a constant (the mean output), a least-squares
  line and linear interpolation (flat outside the called range), fitted in float64 with overflow
  ignored (a candidate that comes out non-finite is dropped); the floor is the best of them by NMSE
  on FIND's grid;
- strings code: a lookup table of the observed pairs, the input unchanged where unseen (rasp: the
  same over token sequences, and the plan draws in-domain sequences);
- rasp, beside those (:func:`rasp_floor_answers`): the constant-output and copy-the-input codes, the
  family's name and a hedged description naming several families;
- descriptions (strings, entities, relations): the observed pairs listed, no rule, one listing per
  :data:`DESCRIPTION_SUBSETS` seeded shuffles, each filled in one pass up to the judge's description
  budget counted with its tokenizer (:func:`listed_description`); the best counts.

An episode with no usable observation has the ``constant`` reference answer as its floor. The
``observed`` reference interpreter (:func:`observed_plan`, :func:`observed_answer`) probes on a
fixed seeded plan and answers with the floor of the calls its episode recorded, so its margin is 0
on code (on descriptions it answers the first listing, so at most 0)."""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

from findbench.interpret.protocol import (
    MAX_COMMANDS_PER_MESSAGE,
    MAX_INPUT_CHARS,
    MAX_INPUTS_PER_COMMAND,
    SCRIPT_NAME,
    Answer,
    CallError,
    format_answer,
)

#: The numeric floor's candidate answers.
NUMERIC_FLOORS = ("constant", "line", "interpolation")
#: Calls of the ``observed`` interpreter's plan (``--observed-calls``).
DEFAULT_OBSERVED_CALLS = 40
#: The most ``--observed-calls``: the plan goes out as one message, which runs at most
#: ``MAX_COMMANDS_PER_MESSAGE`` commands of ``MAX_INPUTS_PER_COMMAND`` inputs (2,000).
MAX_OBSERVED_CALLS = MAX_COMMANDS_PER_MESSAGE * MAX_INPUTS_PER_COMMAND
#: Distinct inputs of one episode a floor is built from (more: the first by a seeded hash).
MAX_FLOOR_INPUTS = 2000
#: Seeded listings of the observed pairs tried as the description floor (the best one counts).
DESCRIPTION_SUBSETS = 3
#: FIND's numeric domain, over which the ``observed`` interpreter spaces its calls.
NUMERIC_RANGE = (-128.0, 128.0)

Pair = tuple[str, Any]


def recorded_inputs(episode: Mapping[str, Any] | None, key: str = "") -> list[str]:
    """The distinct inputs an episode's calls record (text as the agent wrote it, at most
    ``MAX_INPUT_CHARS`` characters), sorted; more than :data:`MAX_FLOOR_INPUTS`: those first by the
    hash of ``key`` (the function id) and the input. Outputs and malformed records are not read."""
    found = (episode or {}).get("calls")
    inputs: set[str] = set()
    for call in found if isinstance(found, list) else []:  # the record is read from a file: any shape
        values = call.get("inputs") if isinstance(call, Mapping) else None
        if isinstance(values, list):
            inputs.update(x for x in values if isinstance(x, str) and len(x) <= MAX_INPUT_CHARS)
    if len(inputs) > MAX_FLOOR_INPUTS:
        inputs = set(sorted(inputs, key=lambda x: hashlib.sha256(f"{key}\0{x}".encode()).digest())[:MAX_FLOOR_INPUTS])
    return sorted(inputs)


def observed_pairs(row: Mapping[str, Any], inputs: Sequence[str], *, seed: int = 0) -> list[Pair]:
    """``(input, output)`` for each of ``inputs`` run through ``row``'s function as the harness runs
    calls (:class:`~findbench.interpret.calls.FunctionRunner`, noise keyed by the run ``seed``); inputs
    that fail or give a non-scalar output are left out. Entity neurons: output None (their floor lists
    the words only, so the function is not run)."""
    from findbench.interpret.calls import FunctionRunner

    if row.get("category") == "neurons_entities":
        return [(x, None) for x in inputs]
    if not inputs:
        return []
    return [(x, y) for x, y in zip(inputs, FunctionRunner(row, seed=seed).evaluate(list(inputs))[1])
            if not isinstance(y, (CallError, bool)) and isinstance(y, (str, int, float))]


def _numeric_points(pairs: Sequence[Pair]) -> list[tuple[float, float]]:
    """Finite ``(x, y)`` points, the mean output where an x repeats (as written differently), sorted by x."""
    by_x: dict[float, list[float]] = {}
    for x, y in pairs:
        try:
            xv, yv = float(x), float(y)
        except (TypeError, ValueError, OverflowError):
            continue
        if math.isfinite(xv) and math.isfinite(yv):
            by_x.setdefault(xv, []).append(yv)
    points = ((x, math.fsum(ys) / len(ys)) for x, ys in by_x.items())
    return sorted(p for p in points if math.isfinite(p[1]))


def numeric_floor_codes(pairs: Sequence[Pair]) -> dict[str, str]:
    """The code of each of :data:`NUMERIC_FLOORS` fitted to ``pairs`` (in float64, overflow ignored; a
    candidate whose constants are not finite is left out); ``{}`` without a finite point."""
    import numpy as np

    if not (points := _numeric_points(pairs)):
        return {}
    xs, ys = np.array(points, dtype=np.float64).T
    with np.errstate(all="ignore"):
        mean = float(ys.mean())
        slope, intercept = 0.0, mean
        if len(xs) > 1:
            dx = xs - xs.mean()
            slope = float((dx * (ys - mean)).sum() / (dx * dx).sum())
            intercept = float(mean - slope * xs.mean())
    codes = {
        "constant": f"def function(x):\n    return {mean!r}\n" if math.isfinite(mean) else None,
        "line": (f"def function(x):\n    return {slope!r} * x + {intercept!r}\n"
                 if math.isfinite(slope) and math.isfinite(intercept) else None),
        "interpolation": (
            f"_XS = {xs.tolist()!r}\n_YS = {ys.tolist()!r}\n\n\n"
            "def function(x):\n"
            "    import bisect\n"
            "    if x <= _XS[0]:\n        return _YS[0]\n"
            "    if x >= _XS[-1]:\n        return _YS[-1]\n"
            "    i = bisect.bisect_right(_XS, x)\n"
            "    x0, x1, y0, y1 = _XS[i - 1], _XS[i], _YS[i - 1], _YS[i]\n"
            "    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)\n"
        ),
    }
    return {name: code for name, code in codes.items() if code is not None}


def lookup_code(pairs: Sequence[Pair]) -> str:
    """A strings function answering each observed input with its output, any other input unchanged."""
    table = {str(x): str(y) for x, y in pairs}
    return f"_TABLE = {table!r}\n\n\ndef function(s):\n    return _TABLE.get(s, s)\n"


def listed_description(category: str, pairs: Sequence[Pair], *, key: str = "", lm: Any = None) -> tuple[str, bool]:
    """The observed pairs listed, no rule (``Function input - output pairs: (x, y) …``, the line an agent's
    calls print; entities, the words comma-separated), in the order of a shuffle seeded by ``key`` of the
    pairs sorted (so the calls' order plays no part), each taken in one pass where it still fits the
    judge ``lm``'s description budget (:func:`~findbench.judge.scoring.description_token_limit`, counted
    with its tokenizer; without one, 2 characters a token, the judge's own cut): a long pair is skipped,
    not a reason to stop. Returns the text (``""`` for no pairs) and whether it lists every pair."""
    from findbench.find.export import format_value
    from findbench.judge.scoring import description_token_limit, unwrap_lm

    entities = category == "neurons_entities"
    prefix, sep = ("", ", ") if entities else ("Function input - output pairs: ", " ")
    pieces = sorted({str(x) if entities else f"({format_value(x)}, {format_value(y)})" for x, y in pairs})
    random.Random(f"{key}:floor").shuffle(pieces)
    limit = description_token_limit(lm)
    tokenizer = getattr(unwrap_lm(lm), "tokenizer", None)

    def cost(texts: list[str]) -> list[int]:
        return ([len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
                if callable(tokenizer) and texts else [math.ceil(len(t) / 2) for t in texts])

    room = limit - cost([prefix])[0] if prefix else limit
    chosen: list[str] = []
    for piece, n in zip(pieces, cost([sep + p for p in pieces])):
        if n <= room:
            chosen.append(piece)
            room -= n
    text = prefix + sep.join(chosen)
    while chosen and cost([text])[0] > limit:  # a join tokenized differently from its pieces: rare, a few steps
        chosen.pop()
        text = prefix + sep.join(chosen)
    return (text if chosen else ""), len(chosen) == len(pieces)


def floor_answers(
    category: str, pairs: Sequence[Pair], *, key: str = "", lm: Any = None, listings: int = DESCRIPTION_SUBSETS
) -> list[Answer]:
    """The floor answers of one episode (the best of them counts): numeric, one per fitted
    :data:`NUMERIC_FLOORS` candidate; others, ``listings`` listings of the pairs
    (:func:`listed_description`, seeded by ``key`` and the listing's number, within judge ``lm``'s
    budget; one where it lists every pair), the first with the lookup code for strings. No observation: the
    ``constant`` reference answer."""
    from findbench.interpret.references import CONSTANT_ANSWERS

    if category == "numeric":
        codes = numeric_floor_codes(pairs)
        return [Answer(description="", code=code) for code in codes.values()] or [CONSTANT_ANSWERS["numeric"]]
    if not pairs:
        return [CONSTANT_ANSWERS[category]]
    texts: dict[str, None] = {}
    for k in range(listings):
        text, every = listed_description(category, pairs, key=f"{key}:{k}", lm=lm)
        texts[text or CONSTANT_ANSWERS[category].description] = None
        if every:  # another listing would only reorder the same pairs
            break
    code = None
    if category in ("strings", "rasp"):  # rasp: each observed sequence answered with its output, any other copied
        from findbench.find.rasp.black_box import lookup_code as rasp_lookup_code

        code = (lookup_code if category == "strings" else rasp_lookup_code)(pairs)
    return [Answer(description=text, code=code if not k else None) for k, text in enumerate(texts)]


def observed_plan(
    row: Mapping[str, Any], pool: Sequence[Mapping[str, Any]], *, calls: int = DEFAULT_OBSERVED_CALLS, seed: int = 0
) -> list[str]:
    """The inputs the ``observed`` interpreter calls ``row``'s function on: numeric, ``calls`` values
    evenly spaced over :data:`NUMERIC_RANGE`; otherwise ``calls`` inputs drawn (seeded by ``seed``
    and the function id) from the category's input pool: every test and unit-test input of the
    other functions of ``pool``, less those of the row's own tests (which would give answers away)."""
    from findbench.judge.probes import shown_inputs

    if isinstance(calls, bool) or not isinstance(calls, int) or not 1 <= calls <= MAX_OBSERVED_CALLS:
        raise ValueError(f"observed_calls must be an integer from 1 to {MAX_OBSERVED_CALLS}, got {calls!r}")
    if row.get("category") == "rasp":  # in-domain sequences: rasp functions differ in vocabulary
        from findbench.find.rasp.black_box import plan_inputs

        return plan_inputs(row, calls, seed)
    if row.get("category") == "numeric":
        low, high = NUMERIC_RANGE
        return ["0"] if calls == 1 else [f"{low + (high - low) * i / (calls - 1):g}" for i in range(calls)]
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


def rasp_floor_answers(row: Mapping[str, Any]) -> list[Answer]:
    """The rasp config's fixed floors, scored beside the observed ones: the row's most common output at
    every position with its family's name as the description, and the input copied with a hedged
    description naming several families (:func:`findbench.find.rasp.circuit.code_floors`,
    :func:`~findbench.find.rasp.circuit.description_floors`)."""
    from findbench.find.rasp.catalog import FAMILIES
    from findbench.find.rasp.circuit import code_floors, description_floors

    codes, texts = code_floors(dict(row)), description_floors(dict(row), sorted(FAMILIES))
    return [Answer(description=texts["family"], code=codes["constant"]),
            Answer(description=texts["hedged"], code=codes["copy"])]


def best_floor(row: Mapping[str, Any], answers: Sequence[Answer]) -> Answer:
    """The floor answer that counts: numeric, the candidate of least NMSE on FIND's grid against the
    row's code (the first on a tie); otherwise the first."""
    if row.get("category") != "numeric" or len(answers) == 1:
        return answers[0]
    from findbench.find.code_scoring import score_nmse

    values = score_nmse([a.code or "" for a in answers], [row["code"]] * len(answers), progress=False)["nmse"]
    return answers[min(range(len(answers)), key=lambda i: (values[i], i))]


def plan_pairs(
    row: Mapping[str, Any], pool: Sequence[Mapping[str, Any]], *, method: str, seed: int = 0
) -> list[Pair]:
    """The pairs of the fixed ``observed`` plan (:func:`observed_plan`, :data:`DEFAULT_OBSERVED_CALLS`
    calls; the MILAN methods' exemplars too), run through the function: the floor no transcript moves
    (its answers: ``floor_answers(..., listings=1)``, those the ``observed`` interpreter gives)."""
    inputs = observed_plan(row, pool, seed=seed)
    if method != "aia":
        inputs += [str(x) for x in row.get("exemplars") or []]
    return observed_pairs(row, recorded_inputs({"calls": [{"inputs": inputs}]}, str(row.get("function_id"))),
                          seed=seed)


def observed_turns(
    row: Mapping[str, Any],
    pool: Sequence[Mapping[str, Any]],
    *,
    calls: int,
    seed: int,
) -> list[str | None]:
    """The ``observed`` interpreter's two turns on ``row``: its plan as ``PYTHON(...)`` commands
    (:func:`observed_plan`), then None: the answer is :func:`observed_answer` of the calls the episode
    recorded (only those that ran count)."""
    plan = observed_plan(row, pool, calls=calls, seed=seed)
    # each input one shell word in single quotes (commas and spaces inside stay one value)
    quoted = ["'" + x.replace("'", "'\"'\"'") + "'" for x in plan]
    chunks = [quoted[i : i + MAX_INPUTS_PER_COMMAND] for i in range(0, len(quoted), MAX_INPUTS_PER_COMMAND)]
    return ["\n".join(f"PYTHON({SCRIPT_NAME} {' '.join(chunk)})" for chunk in chunks), None]


def observed_answer(row: Mapping[str, Any], calls: Sequence[Mapping[str, Any]], *, seed: int = 0) -> str:
    """The ``observed`` interpreter's answer: the floor (:func:`best_floor`; one listing for a
    description) of the calls its episode recorded, in the answer format."""
    fid = str(row.get("function_id"))
    pairs = observed_pairs(row, recorded_inputs({"calls": list(calls)}, fid), seed=seed)
    answer = best_floor(row, floor_answers(str(row.get("category")), pairs, key=fid, listings=1))
    return format_answer(answer.description, answer.domain, answer.code)
