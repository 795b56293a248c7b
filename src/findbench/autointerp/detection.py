"""Parsing and scoring of SAEBench's AutoInterp *detection* task, as pure functions.

A scorer LM reads a latent's explanation and ``n`` shuffled windows (SAEBench: 14) and answers
with the 1-based numbers of the active ones, or "None"; a latent scores the share of windows
classified correctly. Every AutoInterp score is reported with n, a seeded bootstrap interval
and its scorer's floors (:func:`score_summary`).

Departures from SAEBench (``sae_bench/evals/autointerp/main.py``), on purpose: an unparseable
answer scores 0 and is counted (``n_unparsed``) instead of dropping the latent; a window number
outside ``1..n`` or "and" as a separator makes the answer unparseable; the explanation is the
text after the *first* "activates on" (any case), on that line.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from findbench.stats import DEFAULT_SEED, bootstrap_ci

#: Floor of the fuzz, embedding and likelihood scorers (a constant answer).
CHANCE = 0.5

_PHRASE = re.compile(r"activates\s+on", re.IGNORECASE)
#: Opening quote -> its closing quote, for labels wrapped in quotes.
_QUOTES = {'"': '"', "'": "'", "`": "`", "\u201c": "\u201d", "\u2018": "\u2019"}
_INDEX = re.compile(r"[0-9]+")


def clean_label(text: str) -> str:
    """Strip whitespace, a leading colon, trailing periods and one pair of surrounding quotes
    (only when the quote does not also occur inside), until nothing changes."""
    while True:
        before = text
        text = text.strip().lstrip(":").strip().rstrip(".").strip()
        if len(text) >= 2 and text[0] in _QUOTES and text[-1] == _QUOTES[text[0]]:
            inner = text[1:-1]
            if text[0] not in inner and text[-1] not in inner:
                text = inner
        if text == before:
            return text


def parse_explanation(text: str) -> str:
    """The label in an explainer's answer: the rest of the line after the first "activates on"
    (else the next non-empty line; without the phrase, the first one), cleaned; "" when blank.

    >>> parse_explanation('This neuron activates on the word "knows" in rhetorical questions.')
    'the word "knows" in rhetorical questions'
    >>> parse_explanation("Verbs of motion")
    'Verbs of motion'
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected a string, got {type(text).__name__}")
    match = _PHRASE.search(text)
    return next((label for label in map(clean_label, (text[match.end():] if match else text).splitlines()) if label),
                "")


def _n(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name}: expected a positive int, got {value!r}")
    return int(value)


def _windows(values: Any, n: int, name: str) -> set[int]:
    """``values`` as a set of window numbers in ``1..n``, or ValueError naming ``name[i]``."""
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise ValueError(f"{name}: expected a list of 1-based window numbers, got {values!r}")
    found: set[int] = set()
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= n:
            raise ValueError(f"{name}[{i}]: expected a window number in 1..{n}, got {value!r}")
        found.add(int(value))
    return found


def _per_latent(n_examples: Any, count: int, other: str) -> list[tuple[int, str]]:
    """``(n, name)`` per latent from one int for all or one per latent."""
    if isinstance(n_examples, numbers.Integral) and not isinstance(n_examples, bool):
        return [(_n(n_examples, "n_examples"), "n_examples")] * count
    if isinstance(n_examples, (str, bytes, Mapping)) or not isinstance(n_examples, Iterable):
        raise ValueError(f"n_examples: expected a positive int or one per latent, got {n_examples!r}")
    per = list(n_examples)
    if len(per) != count:
        raise ValueError(f"n_examples ({len(per)}) and {other} ({count}) differ in length")
    return [(_n(n, f"n_examples[{i}]"), f"n_examples[{i}]") for i, n in enumerate(per)]


def parse_detection(text: str, n_examples: int) -> list[int] | None:
    """The windows a scorer's answer marks as active (sorted, unique), or ``None`` when unparseable.

    Strict: only comma-separated numbers in ``1..n_examples`` or "None" (any case), with one
    trailing period allowed.

    >>> parse_detection("1, 3, 5", 14)
    [1, 3, 5]
    >>> parse_detection("None", 14)
    []
    >>> parse_detection("1 and 3", 14) is None
    True
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected a string, got {type(text).__name__}")
    n = _n(n_examples, "n_examples")
    answer = text.strip().removesuffix(".").strip()
    if not answer:
        return None
    if answer.lower() == "none":
        return []
    items = [item.strip() for item in answer.split(",")]
    return sorted({int(item) for item in items}) if all(
        _INDEX.fullmatch(item) and 1 <= int(item) <= n for item in items) else None


def detection_score(predicted: Sequence[int] | None, active: Sequence[int], n_examples: int, *,
                    names: tuple[str, str, str] = ("predicted", "active", "n_examples")) -> float:
    """Share of ``n_examples`` windows classified correctly (SAEBench's per-latent score);
    an unparseable answer (``None``) scores 0.0. Errors name the item (``names``).

    >>> detection_score([1, 3], [1, 2], 4)   # window 1 right, 2 missed, 3 false alarm, 4 right
    0.5
    >>> detection_score(None, [1, 2], 4)
    0.0
    """
    n = _n(n_examples, names[2])
    truth = _windows(active, n, names[1])
    if predicted is None:
        return 0.0
    guess = _windows(predicted, n, names[0])
    return sum((i in guess) == (i in truth) for i in range(1, n + 1)) / n


def _finite_scores(scores: Any) -> list[float]:
    if isinstance(scores, (str, bytes, Mapping)) or not isinstance(scores, Iterable):
        raise ValueError(f"scores: expected a list of numbers, got {scores!r}")
    values = []
    for i, value in enumerate(scores):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise ValueError(f"scores[{i}]: expected a finite number, got {value!r}")
        values.append(float(value))
    if not values:
        raise ValueError("scores: at least one score is needed")
    return values


def summarize(scores: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (``n - 1``, as SAEBench; ``nan`` for one score) of per-latent scores.

    >>> summarize([1.0, 0.5, 0.75])
    (0.75, 0.25)
    """
    values = _finite_scores(scores)
    n = len(values)
    mean = math.fsum(values) / n
    return mean, math.nan if n == 1 else math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))


def detection_floors(references: Sequence[Sequence[int]], n_examples: int | Sequence[int]) -> dict[str, float]:
    """Mean detection score of the constant answers ``"none"`` and ``"all"`` over the latents.

    >>> detection_floors([[1, 2, 3, 4]], 14)
    {'none': 0.7142857142857143, 'all': 0.2857142857142857}
    """
    references = list(references)
    if not references:
        raise ValueError("references: at least one latent is needed")
    per = _per_latent(n_examples, len(references), "references")
    active = [(n, len(_windows(ref, n, f"references[{i}]"))) for i, (ref, (n, _)) in enumerate(zip(references, per))]
    return {"none": math.fsum((n - a) / n for n, a in active) / len(active),
            "all": math.fsum(a / n for n, a in active) / len(active)}


def score_summary(scores: Sequence[float], floors: Mapping[str, float], *, seed: int = DEFAULT_SEED) -> dict:
    """``n``, ``mean``, ``ci`` (seeded 95 % bootstrap over latents), ``floors``, ``best_floor`` and ``margin`` over it.

    >>> s = score_summary([0.75, 0.75], {"none": 0.714, "all": 0.286})
    >>> s["n"], s["ci"], s["best_floor"], round(s["margin"], 3)
    (2, [0.75, 0.75], 'none', 0.036)
    """
    values = _finite_scores(scores)
    if not floors:
        raise ValueError("floors: at least one floor is needed")
    mean = math.fsum(values) / len(values)
    best = max(floors, key=lambda k: floors[k])
    return {"n": len(values), "mean": mean, "ci": list(bootstrap_ci(values, seed=seed)),
            "floors": {k: float(v) for k, v in floors.items()},
            "best_floor": best, "margin": mean - float(floors[best])}


def score_detections(predictions: Sequence[Sequence[int] | None], references: Sequence[Sequence[int]],
                     n_examples: int | Sequence[int]) -> dict:
    """Score many latents (``n_examples``: one int or one per latent): ``autointerp_score``,
    ``autointerp_std_dev``, ``scores``, ``n_unparsed`` and :func:`score_summary`'s keys.

    >>> out = score_detections([[1, 3], None, []], [[1, 2], [1], []], 4)
    >>> out["scores"], out["n_unparsed"]
    ([0.5, 0.0, 1.0], 1)
    >>> round(out["autointerp_score"], 4), round(out["autointerp_std_dev"], 4)
    (0.5, 0.5)
    """
    predictions, references = list(predictions), list(references)
    if len(predictions) != len(references):
        raise ValueError(f"predictions ({len(predictions)}) and references ({len(references)}) differ in length")
    if not predictions:
        raise ValueError("predictions: at least one latent is needed")
    per = _per_latent(n_examples, len(predictions), "predictions")
    scores = [detection_score(pred, ref, n, names=(f"predictions[{i}]", f"references[{i}]", n_name))
              for i, (pred, ref, (n, n_name)) in enumerate(zip(predictions, references, per))]
    mean, std = summarize(scores)
    summary = score_summary(scores, detection_floors(references, [n for n, _ in per]))
    return {"autointerp_score": mean, "autointerp_std_dev": std, "scores": scores,
            "n_unparsed": sum(pred is None for pred in predictions),
            **{k: summary[k] for k in ("n", "ci", "floors", "best_floor", "margin")}}
