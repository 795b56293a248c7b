"""Scoring of interpreter-written code against FIND's ground-truth functions.

Two scores, both computed by running the code in :mod:`findbench.sandbox` (never in-process):

* :func:`score_nmse` (numeric functions): the interpretation (the last top-level ``def`` of the
  interpreter's code) and the ground truth (``function`` in the dataset's ``code``) are
  evaluated on FIND's grid x = -127.5, -126.5, ..., 127.5 (256 points);
  NMSE = sum((gt - pred)^2) / sum(gt^2) over the points where the ground truth is finite.
  An interpretation succeeds when NMSE < ``threshold`` (0.1 in FIND).
* :func:`score_exact_match` (string functions): the share of test inputs on which the
  interpretation returns exactly the ground truth's output, averaged over functions.

Both return ``errors``, one entry per item: ``None`` where the interpretation ran, else one short
line saying why it did not (the sandbox's reason, e.g. ``SyntaxError: invalid syntax (line 3)``
or ``PermissionError: [Errno 13] Permission denied: '/etc/shadow'``; :func:`failure_reason`).

The metric modules ``metrics/find_nmse`` and ``metrics/find_exact_match`` are thin wrappers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from findbench import _checks
from findbench.sandbox import Sandbox, SandboxLimits, SandboxResult, run_functions, short_reason
from findbench.stats import bootstrap_ci

NMSE_GRID: tuple[float, ...] = tuple(float(x) for x in np.arange(-127.5, 128.0, 1.0))
"""FIND's 256 evaluation points for numeric functions: -127.5, -126.5, ..., 127.5."""
NMSE_THRESHOLD = 0.1
REFERENCE_ENTRY = "function"
"""Name of the function that ground-truth code defines."""


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def nmse(ground_truth: Sequence[Any], prediction: Sequence[Any]) -> float:
    """NMSE of ``prediction`` against ``ground_truth`` (two equally long value lists).

    Points where the ground truth is not a finite real number (``None`` for an exception,
    NaN, inf, a non-number) are skipped.  On the remaining points the prediction must be a
    finite real number everywhere, otherwise the result is ``inf`` (failure).  When the ground
    truth is identically zero on those points NMSE is undefined: it is ``0.0`` for an exact
    match and ``inf`` otherwise.  Raises ``ValueError`` when no point is usable.
    """
    return _nmse(ground_truth, prediction)[0]


def _nmse(ground_truth: Sequence[Any], prediction: Sequence[Any]) -> tuple[float, int | None, str | None]:
    """``(NMSE, point, why)``: :func:`nmse`, and where it is ``inf`` why (``None`` otherwise) and the
    index of the first point the prediction failed on (``None`` when no one point is to blame)."""
    if len(ground_truth) != len(prediction):
        raise ValueError(
            f"ground_truth and prediction must have the same length ({len(ground_truth)} != {len(prediction)})"
        )
    gt, pred = [], []
    for i, (g, p) in enumerate(zip(ground_truth, prediction)):
        if not _is_real(g) or not math.isfinite(g):
            continue
        if not _is_real(p):
            return math.inf, i, "no value" if p is None else f"returned {type(p).__name__}, not a number"
        if not math.isfinite(p):
            return math.inf, i, f"returned {float(p)}"
        gt.append(float(g))
        pred.append(float(p))
    if not gt:
        raise ValueError("ground_truth has no finite value")
    g = np.asarray(gt, dtype=np.float64)
    p = np.asarray(pred, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        num = float(np.sum((g - p) ** 2))
        den = float(np.sum(g**2))
    if not math.isfinite(den):
        return math.inf, None, "NMSE undefined: the ground truth's squares overflow float64"
    if not math.isfinite(num):
        return math.inf, None, "the squared error overflows float64"
    if den == 0.0:
        if num == 0.0:
            return 0.0, None, None
        return math.inf, None, "NMSE undefined: the ground truth is 0 wherever it is finite, and the prediction is not"
    return num / den, None, None


def failure_reason(result: SandboxResult) -> str:
    """Why a program did not run (its status is not ``"ok"``), as one short line: the sandbox's
    message (:func:`findbench.sandbox.short_reason`), after ``timeout: `` or ``killed: ``."""
    prefix = "" if result.status == "error" else f"{result.status}: "
    return prefix + short_reason(result.message or "no reason given")


def nmse_and_reason(reference: SandboxResult, prediction: SandboxResult, *, index: int = 0) -> tuple[float, str | None]:
    """NMSE from two sandbox results on :data:`NMSE_GRID` (``inf`` when the prediction failed) and,
    where it is ``inf``, why in one short line (``None`` otherwise): the program's failure
    (:func:`failure_reason`), or the first grid point where it raised or gave no finite number
    (``ZeroDivisionError: division by zero (at x = 0.5)``).

    A reference that did not run (status other than ``"ok"``) or has no finite value raises
    ``ValueError`` naming ``references[index]``.
    """
    if reference.status != "ok":
        raise ValueError(f"references[{index}]: ground-truth code failed ({reference.status}): {reference.message}")
    gt = [v if e is None else None for v, e in zip(reference.values, reference.errors)]
    if prediction.status != "ok":
        return math.inf, failure_reason(prediction)
    pred = [v if e is None else None for v, e in zip(prediction.values, prediction.errors)]
    try:
        value, point, why = _nmse(gt, pred)
    except ValueError:
        raise ValueError(f"references[{index}]: ground-truth code gives no finite value on the grid") from None
    if point is not None:
        if prediction.errors[point] is not None:
            why = short_reason(prediction.errors[point])
        where = f"x = {NMSE_GRID[point]:g}" if len(gt) == len(NMSE_GRID) else f"input {point}"
        why = f"{why} (at {where})"
    return value, why


def _check_codes(name: str, codes: Any) -> list[str]:
    _checks.instance(name, codes, Sequence, "a list of code strings", exclude=(str, bytes))
    return [_checks.instance(f"{name}[{i}]", code, str, "a string of Python code") for i, code in enumerate(codes)]


def check_code_pairs(predictions: Any, references: Any) -> tuple[list[str], list[str]]:
    """Validate two equally long lists of code strings (errors name the bad field)."""
    preds = _check_codes("predictions", predictions)
    refs = _check_codes("references", references)
    if len(preds) != len(refs):
        raise ValueError(f"predictions and references must have the same length ({len(preds)} != {len(refs)})")
    return preds, refs


def score_nmse(
    predictions: Sequence[str],
    references: Sequence[str],
    *,
    threshold: float = NMSE_THRESHOLD,
    limits: SandboxLimits | None = None,
    sandbox: Sandbox | None = None,
    progress: bool = False,
) -> dict:
    """Score interpreter code for numeric functions by NMSE on :data:`NMSE_GRID`.

    ``predictions[i]`` is the interpreter's code (its last top-level ``def`` counts),
    ``references[i]`` the ground-truth code; both run in the sandbox (one pool per call with
    ``limits``, default :class:`~findbench.sandbox.SandboxLimits`, or ``sandbox`` with its own).
    Returns ``{"success_rate" (share with NMSE < ``threshold``), "success_rate_ci"
    (95 % bootstrap, seed 0), "n", "mean_nmse" (over finite values, NaN if none), "n_failed",
    "nmse" (per item; ``inf`` on any failure or a non-finite prediction where the truth is finite),
    "errors" (per item: ``None`` where NMSE is finite, else why it is ``inf`` in one short line;
    :func:`nmse_and_reason`), "isolation"}``.
    """
    preds, refs = check_code_pairs(predictions, references)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not threshold > 0:
        raise ValueError(f"threshold must be a positive number, got {threshold!r}")
    n = len(preds)
    if n == 0:
        return {
            "success_rate": math.nan,
            "success_rate_ci": [math.nan, math.nan],
            "n": 0,
            "mean_nmse": math.nan,
            "n_failed": 0,
            "nmse": [],
            "errors": [],
            "isolation": "",
        }
    grid = list(NMSE_GRID)
    results = run_functions(refs + preds, [grid] * (2 * n), entry=[REFERENCE_ENTRY] * n + ["last_def"] * n,
                            limits=limits, sandbox=sandbox, progress=progress)
    scored = [nmse_and_reason(results[i], results[n + i], index=i) for i in range(n)]
    scores = [s for s, _ in scored]
    finite = [s for s in scores if math.isfinite(s)]
    success = [float(s < threshold) for s in scores]
    return {
        "success_rate": float(sum(success) / n),
        "success_rate_ci": list(bootstrap_ci(success)),
        "n": n,
        "mean_nmse": float(np.mean(finite)) if finite else math.nan,
        "n_failed": int(n - len(finite)),
        "nmse": [float(s) for s in scores],
        "errors": [why for _, why in scored],
        "isolation": _isolation(results),
    }


def score_exact_match(
    predictions: Sequence[str],
    references: Sequence[str],
    test_inputs: Sequence[Sequence[Any]],
    *,
    limits: SandboxLimits | None = None,
    sandbox: Sandbox | None = None,
    progress: bool = False,
) -> dict:
    """Score interpreter code by exact output match on each function's test inputs.

    ``test_inputs[i]`` lists the inputs of function ``i`` (FIND: 10 strings); they are passed
    to both programs as data.  On an input, the interpretation (last top-level ``def`` of
    ``predictions[i]``) is right when it returns a value equal (``==`` after the sandbox's
    JSON conversion: tuples compare as lists) to the ground truth's (``function`` of
    ``references[i]``); an exception fails only that input.  Inputs on which the ground truth
    itself raises are not counted.

    Returns ``{"exact_match", "exact_match_ci", "n", "per_function", "errors", "isolation"}``: the
    per-function accuracies, their mean, its 95 % percentile bootstrap interval ``[low, high]``
    over the ``n`` functions (:func:`findbench.stats.bootstrap_ci`, seed 0), per function ``None``
    when the interpretation ran on every counted input, else one short line: why the program did not
    run (:func:`failure_reason`), or the first exception it raised and on how many inputs
    (``IndexError: empty (on test input 3; 1 of 5 inputs raised)``), and the sandbox layers the
    programs ran under.
    """
    preds, refs = check_code_pairs(predictions, references)
    inputs = check_test_inputs(test_inputs, len(preds))
    n = len(preds)
    if n == 0:
        return {
            "exact_match": math.nan,
            "exact_match_ci": [math.nan, math.nan],
            "n": 0,
            "per_function": [],
            "errors": [],
            "isolation": "",
        }
    results = run_functions(refs + preds, inputs + inputs, entry=[REFERENCE_ENTRY] * n + ["last_def"] * n,
                            limits=limits, sandbox=sandbox, progress=progress)
    per_function, errors = [], []
    for i, (ref, pred) in enumerate(zip(results[:n], results[n:])):
        if ref.status != "ok":
            raise ValueError(f"references[{i}]: ground-truth code failed ({ref.status}): {ref.message}")
        counted = [j for j in range(len(inputs[i])) if ref.errors[j] is None]  # the truth ran on these
        ran = [j for j in counted if pred.status == "ok" and pred.errors[j] is None]
        raised = [j for j in counted if pred.status == "ok" and pred.errors[j] is not None]
        if not counted:
            raise ValueError(f"references[{i}]: ground-truth code raised on every test input")
        per_function.append(sum(_same(pred.values[j], ref.values[j]) for j in ran) / len(counted))
        errors.append(failure_reason(pred) if pred.status != "ok" else (
            f"{short_reason(pred.errors[raised[0]])} (on test input {raised[0]}; "
            f"{len(raised)} of {len(counted)} inputs raised)" if raised else None))
    return {
        "exact_match": float(np.mean(per_function)),
        "exact_match_ci": list(bootstrap_ci(per_function)),
        "n": n,
        "per_function": [float(s) for s in per_function],
        "errors": errors,
        "isolation": _isolation(results),
    }


def _isolation(results: Sequence[SandboxResult]) -> str:
    """The sandbox layers every program of a call ran under (one level, or several joined by ', ')."""
    return ", ".join(sorted({r.isolation for r in results}))


def check_test_inputs(test_inputs: Any, n: int) -> list[list[Any]]:
    """Validate ``test_inputs``: ``n`` non-empty lists of inputs (errors name the bad field)."""
    if test_inputs is None:
        raise ValueError("test_inputs is required: one list of test inputs per prediction")
    _checks.instance("test_inputs", test_inputs, Sequence, "a list of input lists", exclude=(str, bytes))
    if len(test_inputs) != n:
        raise ValueError(f"test_inputs must have one input list per prediction ({len(test_inputs)} != {n})")
    for i, row in enumerate(test_inputs):
        _checks.instance(f"test_inputs[{i}]", row, Sequence, "a list of inputs", exclude=(str, bytes))
        if len(row) == 0:
            raise ValueError(f"test_inputs[{i}] is empty")
    return [list(row) for row in test_inputs]


def _same(a: Any, b: Any) -> bool:
    """Equality of JSON-plain values where ``True != 1`` (types of scalars must agree)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


#: Held-out inputs per rasp function (drawn apart from its test inputs).
RASP_HELDOUT = 100


def score_rasp(
    predictions: Sequence[str],
    function_ids: Sequence[str],
    *,
    n_inputs: int = RASP_HELDOUT,
    seed: int = 0,
    limits: SandboxLimits | None = None,
    sandbox: Sandbox | None = None,
    progress: bool = False,
) -> dict:
    """Score interpreter code for ``rasp`` functions against their compiled models (not the code).

    Each prediction's last top-level ``def`` runs in the sandbox on ``n_inputs`` held-out in-domain
    token lists (seeded, drawn apart from the rows' test inputs); the truth is the compiled model's
    output (BOS excluded). A position is right when it equals the model's (numerical outputs within
    the domain's ``tolerance``). Returns ``{"exact_match"`` (share of inputs right at every position,
    averaged over functions), ``"exact_match_ci"``, ``"position_accuracy"``, ``"position_accuracy_ci"``,
    ``"n"``, ``"per_function"``, ``"per_function_positions"``, ``"errors"``, ``"isolation"}``.
    """
    from findbench.find.rasp import programs, store

    preds = _check_codes("predictions", predictions)
    if isinstance(function_ids, (str, bytes)) or len(function_ids) != len(preds):
        raise ValueError("function_ids: one rasp function id per prediction")
    n = len(preds)
    if n == 0:
        nan2 = [math.nan, math.nan]
        return {"exact_match": math.nan, "exact_match_ci": nan2, "position_accuracy": math.nan,
                "position_accuracy_ci": nan2, "n": 0, "per_function": [], "per_function_positions": [],
                "errors": [], "isolation": ""}
    # per function: its held-out inputs, the model's outputs on them, the domain's tolerance, numerical outputs?
    cases = []
    for i, fid in enumerate(function_ids):
        dom = store.program_record(fid, seed)["domain"]
        xs = programs.domain_inputs(dom, n_inputs, np.random.default_rng([seed, 29, i, len(fid)]))
        model = store.load_model(fid, seed=seed)
        cases.append((xs, model.run_batch(xs), dom["tolerance"], model.numerical))
    results = run_functions(preds, [[list(x) for x in xs] for xs, *_ in cases], entry="last_def", limits=limits,
                            sandbox=sandbox, progress=progress)
    exact, positions, errors = [], [], []
    for res, (_, truth, tolerance, numerical) in zip(results, cases):
        right_seq = right_pos = 0
        for j, want in enumerate(truth):
            got = res.values[j] if res.status == "ok" and res.errors[j] is None else None
            if not isinstance(got, list) or len(got) != len(want):
                continue
            ok = [_position_ok(g, w, numerical, tolerance) for g, w in zip(got, want)]
            right_pos += sum(ok)
            right_seq += all(ok)
        exact.append(right_seq / len(truth))
        positions.append(right_pos / sum(len(want) for want in truth))
        raised = [j for j, e in enumerate(res.errors or []) if e is not None]
        errors.append(failure_reason(res) if res.status != "ok" else (
            f"{short_reason(res.errors[raised[0]])} (on input {raised[0]}; {len(raised)} of {len(truth)} raised)"
            if raised else None))
    return {
        "exact_match": float(np.mean(exact)), "exact_match_ci": list(bootstrap_ci(exact)),
        "position_accuracy": float(np.mean(positions)), "position_accuracy_ci": list(bootstrap_ci(positions)),
        "n": n, "per_function": [float(s) for s in exact], "per_function_positions": [float(s) for s in positions],
        "errors": errors, "isolation": _isolation(results),
    }


def _position_ok(got: Any, want: Any, numerical: bool, tolerance: float) -> bool:
    if numerical:
        return _is_real(got) and math.isfinite(got) and abs(float(got) - float(want)) <= tolerance
    return _same(got, want)
