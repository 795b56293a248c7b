"""Intervals for findbench's aggregates: one seeded bootstrap, one paired comparison, one way
to print them.

Every interval findbench writes is a **percentile bootstrap over the scored units**, the things
an aggregate averages over, resampled whole: a function (Table 2 cells, ``find_unit_test``,
``find_exact_match``, ``find_domain``), an item (``find_nmse``'s success rate), a neuron
(``explanation_f1``; the ``probe`` config: a held-out item) or an intervention pair (``iia``).
Units are drawn with replacement :data:`DEFAULT_RESAMPLES` times from numpy's
``default_rng(seed)``; the interval is the ``(1 ± confidence) / 2`` quantiles of the statistic
(default: the mean) over the draws. All-equal units give a zero-width interval. Cells with
n < :data:`SMALL_N` units are marked :data:`SMALL_N_MARK` (legend: :data:`SMALL_N_LEGEND`).
:func:`paired_bootstrap` compares two runs on the same units through the bootstrap of the
per-unit differences (numpy, not ``scipy.stats.bootstrap``: the paired p-value needs the
resampled values themselves). :func:`auroc_ci` bootstraps an AUROC over paired units.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_RESAMPLES = 10_000
DEFAULT_CONFIDENCE = 0.95
DEFAULT_SEED = 0
#: Fewer scored units than this and a cell is marked: its interval is a rough guide only.
SMALL_N = 10
SMALL_N_MARK = "†"
SMALL_N_LEGEND = (
    f"{SMALL_N_MARK} n < {SMALL_N}: fewer than {SMALL_N} scored units; the interval is a rough guide "
    "(a percentile bootstrap on few units is too narrow) and differences between such cells are not established."
)
INTERVAL_NOTE = (
    f"[low, high]: {DEFAULT_CONFIDENCE:.0%} percentile bootstrap interval over the scored units "
    f"({DEFAULT_RESAMPLES:,} resamples, seed {DEFAULT_SEED}); n: number of units."
)

#: Upper bound on resampled values held at once (indices of a chunk of resamples).
_CHUNK_VALUES = 2_000_000

Statistic = Callable[[np.ndarray], np.ndarray]


def _check_options(n_resamples: int, confidence: float) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive int, got {n_resamples!r}")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


def _as_units(values: Any, name: str = "values") -> np.ndarray:
    """``values`` as a float array with one unit per row; non-finite values are refused."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of numbers, got {type(values).__name__}")
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a sequence of numbers (or of equal-length number rows)") from exc
    if arr.ndim == 0:
        raise TypeError(f"{name} must be a sequence of numbers, got a scalar")
    bad = np.flatnonzero(~np.isfinite(arr.reshape(len(arr), -1)).all(axis=1)) if arr.size else []
    if len(bad):
        raise ValueError(
            f"{name}[{int(bad[0])}] is not finite ({arr[bad[0]]!r}); drop or score it before the bootstrap"
        )
    return arr


def _resampled_statistics(units: np.ndarray, statistic: Statistic, seed: int, n_resamples: int) -> np.ndarray:
    """The statistic on ``n_resamples`` draws (with replacement) of the rows of ``units``."""
    rng = np.random.default_rng(seed)
    n = len(units)
    chunk = max(1, min(n_resamples, _CHUNK_VALUES // max(n, 1)))
    out = np.empty(n_resamples, dtype=np.float64)
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        idx = rng.integers(0, n, size=(size, n))
        out[start : start + size] = np.asarray(statistic(units[idx]), dtype=np.float64).reshape(size)
    return out


def _mean(sample: np.ndarray) -> np.ndarray:
    return sample.mean(axis=1)


def _interval(stats: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(low), float(high)


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    *,
    statistic: Statistic | None = None,
    seed: int = DEFAULT_SEED,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[float, float]:
    """Percentile bootstrap interval ``(low, high)`` of a statistic over scored units.

    Args:
        values: one finite score per unit, or one row per unit (``(n, k)``) for a ``statistic``
            that needs several numbers per unit.
        statistic: vectorised: maps resampled units ``(resamples, n, ...)`` to ``(resamples,)``.
            Default: the mean.
        confidence: coverage of the interval, in (0, 1).

    Returns ``(nan, nan)`` for no units.
    """
    _check_options(n_resamples, confidence)
    units = _as_units(values)
    if len(units) == 0:
        return (math.nan, math.nan)
    if statistic is None:
        if units.ndim == 1 and np.ptp(units) == 0:
            m = float(np.mean(units))
            return (m, m)
        statistic = _mean
    return _interval(_resampled_statistics(units, statistic, seed, n_resamples), confidence)


def mean_ci(
    values: Sequence[float] | np.ndarray,
    *,
    seed: int = DEFAULT_SEED,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
) -> dict[str, Any]:
    """``{"mean": float, "ci": [low, high], "n": int}`` of per-unit scores (plain Python types,
    ready for JSON and for :func:`format_ci` as ``format_ci(**mean_ci(v))``). No units: NaNs and
    ``n = 0``."""
    units = _as_units(values)
    low, high = bootstrap_ci(units, seed=seed, n_resamples=n_resamples, confidence=confidence)
    return {"mean": float(np.mean(units)) if len(units) else math.nan, "ci": [low, high], "n": int(len(units))}


@dataclass(frozen=True)
class PairedComparison:
    """Result of :func:`paired_bootstrap`."""

    n: int
    mean_a: float
    mean_b: float
    #: mean of ``a - b`` over the shared units (= ``mean_a - mean_b``)
    diff: float
    #: percentile bootstrap interval of ``diff``
    diff_ci: tuple[float, float]
    #: two-sided bootstrap p-value of "no difference"
    p_value: float
    #: whether ``diff_ci`` excludes 0
    differs: bool
    confidence: float


def paired_bootstrap(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    seed: int = DEFAULT_SEED,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
) -> PairedComparison:
    """Paired percentile bootstrap of ``mean(a) - mean(b)``; ``a[i]`` and ``b[i]`` score the same unit.

    ``p_value`` is the two-sided ``min(1, 2 (min(#{d* <= 0}, #{d* >= 0}) + 1) / (n_resamples + 1))``
    over the resampled mean differences ``d*``. Identical runs give ``diff = 0``, ``p_value = 1``
    and ``differs = False``; no shared unit gives NaNs.
    """
    _check_options(n_resamples, confidence)
    ua, ub = _as_units(a, "a"), _as_units(b, "b")
    if ua.ndim != 1 or ub.ndim != 1:
        raise ValueError("a and b must be flat vectors of per-unit scores")
    if len(ua) != len(ub):
        raise ValueError(f"a and b must score the same units in the same order ({len(ua)} != {len(ub)})")
    n = len(ua)
    if n == 0:
        return PairedComparison(0, math.nan, math.nan, math.nan, (math.nan, math.nan), math.nan, False,
                                float(confidence))
    d = ua - ub
    diff = float(np.mean(d))
    stats = np.full(n_resamples, diff) if np.ptp(d) == 0 else _resampled_statistics(d, _mean, seed, n_resamples)
    low, high = _interval(stats, confidence)
    extreme = min(int(np.sum(stats <= 0)), int(np.sum(stats >= 0)))
    return PairedComparison(
        n,
        float(np.mean(ua)),
        float(np.mean(ub)),
        diff,
        (low, high),
        float(min(1.0, 2.0 * (extreme + 1) / (n_resamples + 1))),  # the two-sided p-value
        bool(low > 0 or high < 0),
        float(confidence),
    )


def is_small(n: int) -> bool:
    """Whether ``n`` units are too few for a trustworthy interval (n < :data:`SMALL_N`)."""
    return n < SMALL_N


def format_ci(
    mean: float | None, ci: Sequence[float] | None, n: int, *, digits: int = 2, mark: str = SMALL_N_MARK
) -> str:
    """A cell such as ``0.83 [0.62, 0.97] (n=6)†`` (``mark`` when n < :data:`SMALL_N`).

    A missing or non-finite mean prints ``–``; a missing interval is left out. Takes
    ``**mean_ci(values)``.
    """
    suffix = f"(n={n}){mark if is_small(n) else ''}"
    if mean is None or not math.isfinite(mean):
        return f"– {suffix}"
    text = f"{mean:.{digits}f}"
    if ci is not None and len(ci) == 2 and all(x is not None and math.isfinite(x) for x in ci):
        text += f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"
    return f"{text} {suffix}"


# -- AUROC (the judge card's separation of the truth from each other rung)


def auroc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """AUROC of scores ``positive`` against ``negative``: the chance a positive outscores a negative, ties half."""
    from sklearn.metrics import roc_auc_score

    pos, neg = np.asarray(positive, dtype=np.float64), np.asarray(negative, dtype=np.float64)
    if not len(pos) or not len(neg):
        return math.nan
    if np.ptp(np.concatenate([pos, neg])) == 0:
        return 0.5  # every score equal (sklearn's value too, but without its warning)
    return float(roc_auc_score(np.r_[np.ones(len(pos)), np.zeros(len(neg))], np.r_[pos, neg]))


def _auroc_statistic(n_levels: int):
    """Vectorised AUROC of paired units ``(resamples, n, 2)`` of level indices (Mann-Whitney sum)."""

    def statistic(sample: np.ndarray) -> np.ndarray:
        size, n, _ = sample.shape
        offset = (np.arange(size) * n_levels)[:, None]
        pos, neg = (np.bincount((sample[..., side].astype(np.int64) + offset).ravel(), minlength=size * n_levels)
                    .reshape(size, n_levels) for side in (0, 1))
        below = np.cumsum(neg, axis=1) - neg  # negatives strictly below each level
        return ((pos * below).sum(1) + 0.5 * (pos * neg).sum(1)) / (n * n)

    return statistic


def auroc_ci(
    positive: Sequence[float], negative: Sequence[float], *, seed: int | None = None, n_resamples: int | None = None
) -> dict[str, Any]:
    """``{"auroc", "ci": [low, high], "n"}`` of paired scores (unit ``i``: ``positive[i]``,
    ``negative[i]``), bootstrapped over units (:func:`bootstrap_ci`)."""
    pos, neg = np.asarray(positive, dtype=np.float64), np.asarray(negative, dtype=np.float64)
    if pos.shape != neg.shape or pos.ndim != 1:
        raise ValueError(
            f"positive and negative must be paired 1-d score lists, got shapes {pos.shape} and {neg.shape}"
        )
    n = int(len(pos))
    if n == 0:
        return {"auroc": math.nan, "ci": [math.nan, math.nan], "n": 0}
    levels = np.unique(np.concatenate([pos, neg]))
    units = np.stack([np.searchsorted(levels, pos), np.searchsorted(levels, neg)], axis=1).astype(np.float64)
    low, high = bootstrap_ci(
        units,
        statistic=_auroc_statistic(len(levels)),
        seed=DEFAULT_SEED if seed is None else seed,
        n_resamples=DEFAULT_RESAMPLES if n_resamples is None else n_resamples,
    )
    return {"auroc": auroc(pos, neg), "ci": [low, high], "n": n}
