"""Parsing and scoring of SAEBench's AutoInterp *detection* task, as pure functions.

A scorer LM reads a latent's explanation and ``n`` shuffled windows (SAEBench: 14, usually 4
active) and answers with the 1-based numbers of the active ones, or "None". A latent scores the
share of windows classified correctly; ``autointerp_score`` is the mean over latents and
``autointerp_std_dev`` their standard deviation.

This module holds the parts that need no LM and no torch (the ``autointerp`` metric calls
:func:`score_detections`), and what every AutoInterp score is reported with
(:func:`score_summary`): n, a seeded bootstrap interval over latents and the floors of its
scorer, the scores of answers that need no explanation (:func:`detection_floors`; chance,
:data:`CHANCE`, for the other scorers).

Where findbench departs from SAEBench (``sae_bench/evals/autointerp/main.py``), on purpose:

* an unparseable scorer answer scores 0 and is counted (``n_unparsed``); SAEBench drops the latent
  from the mean, which rewards a scorer for failing on hard latents;
* a window number outside ``1..n`` makes the answer unparseable; SAEBench keeps it and it simply
  matches no window;
* "and" is not a separator ("1 and 3" is unparseable); SAEBench reads it as a comma;
* the explanation is the text after the *first* "activates on" (any case), on that line; SAEBench
  takes the text after the last, case-sensitive occurrence, to the end of the answer.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from findbench.stats import DEFAULT_SEED, bootstrap_ci

#: Score of a constant answer for the fuzz scorer (as many correctly as wrongly marked windows)
#: and of any constant score for the AUC scorers (embedding, likelihood).
CHANCE = 0.5

_PHRASE = re.compile(r"activates\s+on", re.IGNORECASE)
#: Opening quote -> its closing quote, for labels wrapped in quotes.
_QUOTES = {'"': '"', "'": "'", "`": "`", "\u201c": "\u201d", "\u2018": "\u2019"}
_INDEX = re.compile(r"[0-9]+")


# ----------------------------------------------------------------------------- explanations


def _clean_label(text: str) -> str:
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
    """The label an explainer's answer gives a latent: what follows the first "activates on"
    (any case and whitespace) to the end of that line, or the next non-empty line when nothing
    follows; without the phrase, the first non-empty line. Cleaned of surrounding whitespace, a
    leading colon, trailing periods and surrounding quotes; "" for a blank answer.

    >>> parse_explanation('This neuron activates on the word "knows" in rhetorical questions.')
    'the word "knows" in rhetorical questions'
    >>> parse_explanation("Verbs of motion")
    'Verbs of motion'
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected a string, got {type(text).__name__}")
    match = _PHRASE.search(text)
    rest = text[match.end():] if match else text
    return next((label for label in map(_clean_label, rest.splitlines()) if label), "")


# ------------------------------------------------------------------------- scorer answers


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
    """The windows a scorer's answer marks as active, or ``None`` when it is unparseable.

    Strict, as SAEBench's prompt asks for "nothing else" than the list: surrounding whitespace
    and one trailing period are ignored; "None" in any case means ``[]``; otherwise the answer
    must be comma-separated plain decimal numbers in ``1..n_examples`` (any whitespace around
    them), returned sorted and unique. Anything else (words, brackets, an empty item, a number
    out of range, "None" mixed with numbers, an empty answer) is unparseable.

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
    answer = text.strip()
    if answer.endswith("."):
        answer = answer[:-1].strip()
    if not answer:
        return None
    if answer.lower() == "none":
        return []
    items = [item.strip() for item in answer.split(",")]
    if not all(_INDEX.fullmatch(item) and 1 <= int(item) <= n for item in items):
        return None
    return sorted({int(item) for item in items})


# -------------------------------------------------------------------------------- scoring


def detection_score(predicted: Sequence[int] | None, active: Sequence[int], n_examples: int, *,
                    names: tuple[str, str, str] = ("predicted", "active", "n_examples")) -> float:
    """Share of a latent's ``n_examples`` windows the scorer classified correctly (SAEBench's
    per-latent score): window ``i`` (1-based) counts when it is in both ``predicted`` and
    ``active`` or in neither. Repeated numbers count once; an unparseable answer (``None``)
    scores 0.0. Errors name the argument and item (``names``).

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
    """Mean and *sample* standard deviation (``n - 1``, as SAEBench's ``torch.std``; ``nan`` for
    one score) of per-latent scores: ``autointerp_score`` and ``autointerp_std_dev``.

    >>> summarize([1.0, 0.5, 0.75])
    (0.75, 0.25)
    """
    values = _finite_scores(scores)
    n = len(values)
    mean = math.fsum(values) / n
    if n == 1:
        return mean, math.nan
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))


def detection_floors(references: Sequence[Sequence[int]], n_examples: int | Sequence[int]) -> dict[str, float]:
    """Mean detection score of the two constant answers over the given latents: ``"none"``
    (right on each inactive window) and ``"all"`` (right on each active one).

    >>> detection_floors([[1, 2, 3, 4]], 14)
    {'none': 0.7142857142857143, 'all': 0.2857142857142857}
    """
    references = list(references)
    if not references:
        raise ValueError("references: at least one latent is needed")
    none, every = [], []
    for i, (ref, (n, _)) in enumerate(zip(references, _per_latent(n_examples, len(references), "references"))):
        active = len(_windows(ref, n, f"references[{i}]"))
        none.append((n - active) / n)
        every.append(active / n)
    return {"none": math.fsum(none) / len(none), "all": math.fsum(every) / len(every)}


def score_summary(scores: Sequence[float], floors: Mapping[str, float], *, seed: int = DEFAULT_SEED) -> dict:
    """A scorer's summary over latents: ``n``, ``mean``, ``ci`` (95 % percentile bootstrap
    interval over latents, :func:`findbench.stats.bootstrap_ci`, seeded), ``floors``,
    ``best_floor`` (the highest floor's name) and ``margin`` (``mean`` minus it).

    >>> s = score_summary([0.75, 0.75], {"none": 0.714, "all": 0.286})
    >>> s["n"], s["ci"], s["best_floor"], round(s["margin"], 3)
    (2, [0.75, 0.75], 'none', 0.036)
    """
    values = _finite_scores(scores)
    if not floors:
        raise ValueError("floors: at least one floor is needed")
    mean = math.fsum(values) / len(values)
    low, high = bootstrap_ci(values, seed=seed)
    best = max(floors, key=lambda k: floors[k])
    return {"n": len(values), "mean": mean, "ci": [low, high], "floors": {k: float(v) for k, v in floors.items()},
            "best_floor": best, "margin": mean - float(floors[best])}


def score_detections(
    predictions: Sequence[Sequence[int] | None],
    references: Sequence[Sequence[int]],
    n_examples: int | Sequence[int],
) -> dict:
    """Score many latents at once (``n_examples``: one int for all or one per latent):
    ``autointerp_score``, ``autointerp_std_dev`` (:func:`summarize`), ``scores`` (per latent),
    ``n_unparsed`` (predictions that are ``None``) and :func:`score_summary`'s ``n``, ``ci``,
    ``floors`` (:func:`detection_floors`), ``best_floor`` and ``margin``. Errors name the field
    (``predictions[2][0]``, ``references[1]``, ``n_examples (2) and predictions (3)``).

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
