"""Precision, recall and F1 of neuron explanations on observational test sets
(Huang et al. 2023, "Rigorously Assessing Natural Language Explanations of Neurons").

The neuron *fires* on a span when its maximum activation exceeds ``threshold`` (default 0, the
convention of the paper's released labels: it reproduces 9,580 of the 9,592). precision =
P(fires | in denotation), recall = P(in denotation | fires); a zero denominator gives 0. Macro
scores average per neuron, pooled ones sum counts; 95 % bootstrap intervals (seed 0) are over
neurons, or over held-out items for the probe (:func:`probe_scores`).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from findbench import _checks
from findbench.stats import bootstrap_ci


def _prf(tp: int | np.ndarray, n_in: int | np.ndarray, n_fire: int | np.ndarray) -> dict[str, np.ndarray]:
    """Precision, recall and F1 from counts (numbers or arrays of them); a zero denominator gives 0."""
    tp, n_in, n_fire = (np.asarray(x, dtype=np.float64) for x in (tp, n_in, n_fire))
    p = np.divide(tp, n_in, out=np.zeros(tp.shape), where=n_in > 0)
    r = np.divide(tp, n_fire, out=np.zeros(tp.shape), where=n_fire > 0)
    return {"precision": p, "recall": r, "f1": np.divide(2 * p * r, p + r, out=np.zeros(tp.shape), where=p + r > 0)}


def prf_from_counts(tp: int, n_in: int, n_fire: int) -> dict:
    """Precision/recall/F1 from the counts: in denotation and firing (``tp``), in denotation, firing."""
    return {key: float(v) for key, v in _prf(tp, n_in, n_fire).items()}


def neuron_fires(activations: Sequence[float], threshold: float = 0.0) -> bool:
    """True when the span's maximum activation exceeds ``threshold``."""
    threshold = _checks.number("threshold", threshold)
    if isinstance(activations, (str, bytes)) or not hasattr(activations, "__len__") or len(activations) == 0:
        raise ValueError("references: each item must be a non-empty list of per-token activations")
    try:
        vals = [float(a) for a in activations]
    except (TypeError, ValueError) as exc:
        raise ValueError("references: activations must be numbers") from exc
    if any(math.isnan(v) for v in vals):
        raise ValueError("references: activations must not be NaN")
    return max(vals) > threshold


def explanation_f1(
    predictions: Sequence[bool],
    references: Sequence[Sequence[float]],
    neurons: Sequence[str] | None = None,
    threshold: float = 0.0,
) -> dict:
    """Per-neuron, macro and pooled precision/recall/F1 of explanations.

    ``predictions``: per item, whether the span is in the explanation's denotation;
    ``references``: its per-token activations; ``neurons``: its neuron id (default ``"0"``).
    Returns macro ``precision``, ``recall``, ``f1`` with ``*_ci`` and ``n`` (neurons),
    ``pooled_*``, ``n_neurons``, ``n_items`` and ``per_neuron`` (in order of first appearance).
    """
    _checks.number("threshold", threshold)
    n = len(predictions)
    if n == 0:
        raise ValueError("predictions must not be empty")
    if len(references) != n:
        raise ValueError(f"references has {len(references)} items but predictions has {n}")
    if neurons is None:
        neurons = ["0"] * n
    elif isinstance(neurons, (str, bytes)) or len(neurons) != n:
        raise ValueError(f"neurons must be a sequence of {n} neuron ids (one per prediction)")
    counts: OrderedDict[str, list[int]] = OrderedDict()
    for i, (pred, ref, nid) in enumerate(zip(predictions, references, neurons)):
        if not isinstance(pred, (bool, np.bool_)) and pred not in (0, 1):
            raise ValueError(f"predictions[{i}] must be a bool, got {pred!r}")
        fires = neuron_fires(ref, threshold)
        c = counts.setdefault(str(nid), [0, 0, 0, 0])  # n, n_in, n_fire, tp
        c[:] = [c[0] + 1, c[1] + bool(pred), c[2] + fires, c[3] + (bool(pred) and fires)]
    per = {nid: {**prf_from_counts(tp, n_in, n_fire), "n_items": k, "n_in": n_in, "n_fire": n_fire, "tp": tp}
           for nid, (k, n_in, n_fire, tp) in counts.items()}
    tot = np.array(list(counts.values())).sum(0)
    pooled = prf_from_counts(int(tot[3]), int(tot[1]), int(tot[2]))
    macro = {key: [v[key] for v in per.values()] for key in ("precision", "recall", "f1")}
    return {
        **{key: float(np.mean(macro[key])) for key in macro},
        **{f"{key}_ci": list(bootstrap_ci(macro[key])) for key in macro},
        "n": len(per),
        **{f"pooled_{key}": pooled[key] for key in macro},
        "n_neurons": len(per),
        "n_items": n,
        "per_neuron": per,
    }


def probe_scores(
    features: Sequence[Sequence[float]],
    labels: Sequence[bool],
    *,
    test_size: float = 0.3,
    seed: int = 0,
    C: float = 1.0,
) -> dict:
    """Explanation F1 of a logistic-regression probe (standardised, balanced) over N neurons' activations
    per item, trained on a stratified ``1 - test_size`` split to predict denotation membership; its
    positive prediction plays "fires" on the held-out items. ``precision``, ``recall``, ``f1``,
    ``accuracy``, their ``*_ci`` over the held-out items, ``n`` (= ``n_test``), ``n_train``, ``n_test``.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    try:
        x = np.asarray(features, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError("references: probe features must be equal-length lists of numbers") from exc
    y = np.asarray([bool(v) for v in labels])
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError("references: probe features must be a non-empty [items, neurons] table")
    if len(y) != x.shape[0]:
        raise ValueError(f"predictions has {len(y)} items but references has {x.shape[0]}")
    if not np.isfinite(x).all():
        raise ValueError("references: probe features must be finite")
    if not 0 < test_size < 1:
        raise ValueError(f"test_size must be in (0, 1), got {test_size!r}")
    if y.all() or not y.any():
        raise ValueError("predictions: the probe needs both in- and out-of-denotation items")
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=test_size, random_state=seed, stratify=y)
    probe = make_pipeline(
        StandardScaler(), LogisticRegression(C=C, class_weight="balanced", max_iter=2000, random_state=seed)
    )
    fire = probe.fit(x_tr, y_tr).predict(x_te).astype(bool)
    rows = np.stack([fire, y_te], axis=1).astype(np.float64)
    return {
        **prf_from_counts(int((fire & y_te).sum()), int(y_te.sum()), int(fire.sum())),
        "accuracy": float((fire == y_te).mean()),
        **{f"{key}_ci": list(bootstrap_ci(rows, statistic=stat)) for key, stat in _PRF_STATISTICS.items()},
        "n": int(len(y_te)),
        "n_train": int(len(y_tr)),
        "n_test": int(len(y_te)),
    }


def _prf_of_samples(sample: np.ndarray) -> dict[str, np.ndarray]:
    """Precision, recall and F1 per resample of ``(fires, in denotation)`` rows (shape
    ``(resamples, n, 2)``), with :func:`prf_from_counts`' zero-division conventions."""
    fire, inside = sample[..., 0] > 0.5, sample[..., 1] > 0.5
    return _prf((fire & inside).sum(axis=1), inside.sum(axis=1), fire.sum(axis=1))


_PRF_STATISTICS = {
    "precision": lambda s: _prf_of_samples(s)["precision"],
    "recall": lambda s: _prf_of_samples(s)["recall"],
    "f1": lambda s: _prf_of_samples(s)["f1"],
    "accuracy": lambda s: (s[..., 0] == s[..., 1]).mean(axis=1),
}
