"""Parsing and scoring of SAEBench's AutoInterp *detection* task, as pure functions.

In SAEBench's AutoInterp an explainer LM reads a latent's top-activating windows and writes
"This neuron activates on ...". A scorer LM then sees that explanation and ``n`` shuffled windows
(SAEBench's default: 14, usually 4 of them active) and answers with the 1-based numbers of
the windows it thinks activate it, comma-separated, or "None". A latent's score is the share of
the ``n`` windows classified correctly (active and predicted, or inactive and not predicted); an
SAE's ``autointerp_score`` is the mean over latents and ``autointerp_std_dev`` their standard
deviation.

This module holds the parts that need no LM and no torch: :func:`parse_explanation`,
:func:`parse_detection`, :func:`detection_score`, :func:`summarize` and the batch form
:func:`score_detections` that the ``autointerp`` evaluate metric calls; and what every
AutoInterp score is reported with (:func:`score_summary`): its n, a seeded percentile
bootstrap interval over latents (:func:`findbench.stats.bootstrap_ci`) and the floors of its scorer,
the scores of answers that need no explanation. For detection those are "None" for every
latent (the share of inactive windows: 10/14 = 0.714 in SAEBench's setting of 2 top +
2 importance-weighted + 10 random windows) and "all" (the share of active ones, 4/14 = 0.286),
computed from the windows actually shown (:func:`detection_floors`); for the fuzz scorer and
the AUC scorers, chance (:data:`CHANCE`, 0.5).

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

from findbench.stats import DEFAULT_SEED, bootstrap_ci

__all__ = [
    "CHANCE",
    "parse_explanation",
    "parse_detection",
    "detection_score",
    "detection_floors",
    "summarize",
    "score_summary",
    "score_detections",
]

#: Score of a constant answer for the fuzz scorer (as many correctly as wrongly marked windows)
#: and of any constant score for the AUC scorers (embedding, likelihood).
CHANCE = 0.5

_PHRASE = re.compile(r"activates\s+on", re.IGNORECASE)
#: Opening quote -> its closing quote, for labels wrapped in quotes.
_QUOTES = {'"': '"', "'": "'", "`": "`", "\u201c": "\u201d", "\u2018": "\u2019"}
_INDEX = re.compile(r"[0-9]+")


# ----------------------------------------------------------------------------- explanations


def _clean_label(text: str) -> str:
    """Strip whitespace, a leading colon, trailing periods and one pair of surrounding quotes,
    until nothing changes. A pair of quotes is removed only when the quote character does not
    also occur inside (``'knows' and 'says'`` keeps its quotes)."""
    while True:
        before = text
        text = text.strip().lstrip(":").strip().rstrip(".").strip()
        if len(text) >= 2 and text[0] in _QUOTES and text[-1] == _QUOTES[text[0]]:
            inner = text[1:-1]
            if text[0] not in inner and text[-1] not in inner:
                text = inner
        if text == before:
            return text


def _first_label(text: str) -> str:
    """The first line of ``text`` that is not empty once cleaned."""
    return next((label for label in map(_clean_label, text.splitlines()) if label), "")


def parse_explanation(text: str) -> str:
    """The label an explainer's answer gives a latent.

    The label is what follows the first "activates on" (case-insensitive, any whitespace between
    the words), up to the end of that line, or the next non-empty line when nothing follows on
    it. Without the phrase, the answer's first non-empty line is the label. Either way the label
    is stripped of surrounding whitespace, a leading colon, trailing periods and one pair of
    surrounding quotes (``"`` ``'`` backtick, curly quotes; repeatedly, so ``"cats".`` gives
    ``cats``). An empty or blank answer gives "".

    >>> parse_explanation('This neuron activates on the word "knows" in rhetorical questions.')
    'the word "knows" in rhetorical questions'
    >>> parse_explanation("Verbs of motion")
    'Verbs of motion'

    Args:
        text: the explainer LM's answer.
    Returns:
        The label, possibly "".
    Raises:
        TypeError: ``text`` is not a string.
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected a string, got {type(text).__name__}")
    match = _PHRASE.search(text)
    rest = text[match.end():] if match else text
    return _first_label(rest)


# ------------------------------------------------------------------------- scorer answers


def _check_n(n_examples: object, name: str) -> int:
    if isinstance(n_examples, bool) or not isinstance(n_examples, numbers.Integral):
        raise ValueError(f"{name}: expected a positive int, got {n_examples!r}")
    if n_examples < 1:
        raise ValueError(f"{name}: expected a positive int, got {n_examples!r}")
    return int(n_examples)


def parse_detection(text: str, n_examples: int) -> list[int] | None:
    """The windows a scorer's answer marks as active, or ``None`` when the answer is unparseable.

    The rule is strict, as SAEBench's prompt asks for "nothing else" than the list:

    * surrounding whitespace and one trailing period are ignored;
    * "None" in any case (``"none."`` too) means no window: ``[]``;
    * otherwise the answer must be a comma-separated list of plain decimal numbers, each in
      ``1..n_examples``, with any whitespace (newlines too) around the numbers. The result is
      sorted with duplicates removed (``" 3 ,1,3 "`` gives ``[1, 3]``).

    Anything else is unparseable (``None``), to be scored 0 and reported: an empty answer, words
    ("I think 2", "1 and 3"), brackets ("[1, 3]"), an empty item ("1,,3", "1, 3,"), a number out
    of range ("0", or "15" with 14 windows), or "None" mixed with numbers.

    >>> parse_detection("1, 3, 5", 14)
    [1, 3, 5]
    >>> parse_detection("None", 14)
    []
    >>> parse_detection("1 and 3", 14) is None
    True

    Args:
        text: the scorer LM's answer.
        n_examples: how many windows the scorer was shown (a positive int).
    Returns:
        Sorted unique 1-based window numbers, ``[]`` for "None", ``None`` if unparseable.
    Raises:
        TypeError: ``text`` is not a string.
        ValueError: ``n_examples`` is not a positive int.
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected a string, got {type(text).__name__}")
    n = _check_n(n_examples, "n_examples")
    answer = text.strip()
    if answer.endswith("."):
        answer = answer[:-1].strip()
    if not answer:
        return None
    if answer.lower() == "none":
        return []
    found: set[int] = set()
    for item in answer.split(","):
        item = item.strip()
        if not _INDEX.fullmatch(item):
            return None
        index = int(item)
        if not 1 <= index <= n:
            return None
        found.add(index)
    return sorted(found)


# -------------------------------------------------------------------------------- scoring


def _check_indices(values: object, n: int, name: str) -> set[int]:
    """``values`` as a set of 1-based window numbers, or ValueError naming ``name[i]``."""
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise ValueError(f"{name}: expected a list of 1-based window numbers, got {values!r}")
    found: set[int] = set()
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f"{name}[{i}]: expected an int window number, got {value!r}")
        if not 1 <= value <= n:
            raise ValueError(f"{name}[{i}]: window number {value} is outside 1..{n}")
        found.add(int(value))
    return found


def _score(predicted: object, active: object, n_examples: object, names: tuple[str, str, str]) -> float:
    n = _check_n(n_examples, names[2])
    truth = _check_indices(active, n, names[1])
    if predicted is None:
        return 0.0
    guess = _check_indices(predicted, n, names[0])
    correct = sum((i in guess) == (i in truth) for i in range(1, n + 1))
    return correct / n


def detection_score(predicted: Sequence[int] | None, active: Sequence[int], n_examples: int) -> float:
    """Share of a latent's ``n_examples`` windows that the scorer classified correctly.

    Window ``i`` (1-based) is predicted active iff ``i`` is in ``predicted`` and truly active iff
    it is in ``active``; the score counts the windows where the two agree, divided by
    ``n_examples`` (SAEBench's per-latent score). Repeated numbers count once. An unparseable
    answer (``predicted is None``) scores 0.0: every window counts as wrong.

    >>> detection_score([1, 3], [1, 2], 4)   # window 1 right, 2 missed, 3 false alarm, 4 right
    0.5
    >>> detection_score(None, [1, 2], 4)
    0.0

    Args:
        predicted: the windows the scorer marked (:func:`parse_detection`), or ``None``.
        active: the windows that truly activate the latent.
        n_examples: how many windows the scorer was shown (a positive int).
    Returns:
        A float in [0, 1].
    Raises:
        ValueError: naming the argument (and item) for a non-int or out-of-range window number,
            a non-list ``predicted``/``active``, or a non-positive ``n_examples``.
    """
    return _score(predicted, active, n_examples, ("predicted", "active", "n_examples"))


def summarize(scores: Sequence[float]) -> tuple[float, float]:
    """Mean and standard deviation of per-latent scores, as SAEBench reports ``autointerp_score``
    and ``autointerp_std_dev``.

    SAEBench computes them with ``torch.Tensor.mean()`` and ``torch.Tensor.std()``, whose default
    is the *sample* standard deviation (Bessel's correction, dividing by ``n - 1``); so does this
    function. With one score the sample standard deviation is undefined and, as in torch, ``nan``.

    >>> summarize([1.0, 0.5, 0.75])
    (0.75, 0.25)

    Args:
        scores: per-latent scores (finite real numbers), at least one.
    Returns:
        ``(mean, std)`` as Python floats.
    Raises:
        ValueError: ``scores`` is empty or holds a non-number or a non-finite value.
    """
    values = _finite_scores(scores)
    if not values:
        raise ValueError("scores: at least one score is needed")
    n = len(values)
    mean = math.fsum(values) / n
    if n == 1:
        return mean, math.nan
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, std


def detection_floors(references: Sequence[Sequence[int]], n_examples: int | Sequence[int]) -> dict[str, float]:
    """Mean detection score of the two constant answers over the given latents.

    ``"none"``: the scorer answers "None" for every latent, so it is right on each inactive
    window (share ``(n - active) / n`` per latent); ``"all"``: it lists every window, right on
    each active one (``active / n``). With SAEBench's 4 active of 14 windows these are 10/14 =
    0.714 and 4/14 = 0.286.

    >>> detection_floors([[1, 2, 3, 4]], 14)
    {'none': 0.7142857142857143, 'all': 0.2857142857142857}
    """
    references = list(references)
    if not references:
        raise ValueError("references: at least one latent is needed")
    if isinstance(n_examples, numbers.Integral) and not isinstance(n_examples, bool):
        per_latent = [int(n_examples)] * len(references)
    else:
        per_latent = list(n_examples)  # type: ignore[arg-type]
        if len(per_latent) != len(references):
            raise ValueError(f"n_examples ({len(per_latent)}) and references ({len(references)}) differ in length")
    none, every = [], []
    for i, (ref, n) in enumerate(zip(references, per_latent)):
        n = _check_n(n, f"n_examples[{i}]")
        active = len(_check_indices(ref, n, f"references[{i}]"))
        none.append((n - active) / n)
        every.append(active / n)
    return {"none": math.fsum(none) / len(none), "all": math.fsum(every) / len(every)}


def _finite_scores(scores: object) -> list[float]:
    if isinstance(scores, (str, bytes, Mapping)) or not isinstance(scores, Iterable):
        raise ValueError(f"scores: expected a list of numbers, got {scores!r}")
    values = []
    for i, value in enumerate(scores):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise ValueError(f"scores[{i}]: expected a finite number, got {value!r}")
        values.append(float(value))
    return values


def score_summary(scores: Sequence[float], floors: Mapping[str, float], *, seed: int = DEFAULT_SEED) -> dict:
    """A scorer's summary over latents: ``n``, ``mean``, ``ci`` (``[low, high]``, the 95 %
    percentile bootstrap interval over latents of :func:`findbench.stats.bootstrap_ci`, seeded),
    ``floors`` (name -> score of that trivial answer), ``best_floor`` (the highest one's name)
    and ``margin`` (``mean`` minus it: how far the explanations beat the best answer that needs
    none; negative when they do worse).

    >>> s = score_summary([0.75, 0.75], {"none": 0.714, "all": 0.286})
    >>> s["n"], s["ci"], s["best_floor"], round(s["margin"], 3)
    (2, [0.75, 0.75], 'none', 0.036)
    """
    values = _finite_scores(scores)
    if not values:
        raise ValueError("scores: at least one score is needed")
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
    """Score many latents at once: :func:`detection_score` per latent, then :func:`summarize`.

    >>> out = score_detections([[1, 3], None, []], [[1, 2], [1], []], 4)
    >>> out["scores"], out["n_unparsed"]
    ([0.5, 0.0, 1.0], 1)
    >>> round(out["autointerp_score"], 4), round(out["autointerp_std_dev"], 4)
    (0.5, 0.5)

    Args:
        predictions: per latent, the windows the scorer marked, or ``None`` if unparseable.
        references: per latent, the windows that truly activate it.
        n_examples: how many windows each latent was shown: one int for all, or one per latent.
    Returns:
        A dict with ``autointerp_score`` (mean), ``autointerp_std_dev`` (sample standard
        deviation, ``nan`` for one latent), ``scores`` (per latent), ``n_unparsed`` (how many
        predictions were ``None``), and :func:`score_summary`'s ``n``, ``ci``,
        ``floors`` (``none`` and ``all``, :func:`detection_floors`), ``best_floor`` and ``margin``.
    Raises:
        ValueError: naming the field, e.g. ``predictions (3) and references (2)``,
            ``n_examples (2) and predictions (3)``, ``predictions[2][0]`` or ``references[1]``.
    """
    predictions, references = list(predictions), list(references)
    if len(predictions) != len(references):
        raise ValueError(f"predictions ({len(predictions)}) and references ({len(references)}) differ in length")
    if not predictions:
        raise ValueError("predictions: at least one latent is needed")
    if isinstance(n_examples, numbers.Integral) and not isinstance(n_examples, bool):
        per_latent = [n_examples] * len(predictions)
        n_names = ["n_examples"] * len(predictions)
    elif isinstance(n_examples, (str, bytes, Mapping)) or not isinstance(n_examples, Iterable):
        raise ValueError(f"n_examples: expected a positive int or one per latent, got {n_examples!r}")
    else:
        per_latent = list(n_examples)
        if len(per_latent) != len(predictions):
            raise ValueError(f"n_examples ({len(per_latent)}) and predictions ({len(predictions)}) differ in length")
        n_names = [f"n_examples[{i}]" for i in range(len(predictions))]
    scores = [
        _score(pred, ref, n, (f"predictions[{i}]", f"references[{i}]", n_name))
        for i, (pred, ref, n, n_name) in enumerate(zip(predictions, references, per_latent, n_names))
    ]
    mean, std = summarize(scores)
    summary = score_summary(scores, detection_floors(references, per_latent))
    return {
        "autointerp_score": mean,
        "autointerp_std_dev": std,
        "scores": scores,
        "n_unparsed": sum(pred is None for pred in predictions),
        **{k: summary[k] for k in ("n", "ci", "floors", "best_floor", "margin")},
    }
