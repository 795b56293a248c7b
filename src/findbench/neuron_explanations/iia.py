"""Interchange-intervention accuracy (IIA) from predictions and expected outputs (no torch import;
the interventions themselves: :mod:`findbench.neuron_explanations.interventions`)."""

from __future__ import annotations

from collections.abc import Sequence

from findbench.stats import bootstrap_ci


def iia_score(predictions: Sequence, references: Sequence) -> dict:
    """IIA from intervened predictions and expected outputs (token ids or strings): ``iia`` (fraction
    equal), ``iia_ci`` (95 % bootstrap over the pairs, seed 0), ``n``, ``n_success`` and ``n_total`` (= ``n``)."""
    if len(predictions) == 0:
        raise ValueError("predictions must not be empty")
    if len(predictions) != len(references):
        raise ValueError(f"references has {len(references)} items but predictions has {len(predictions)}")
    for name, seq in (("predictions", predictions), ("references", references)):
        for i, v in enumerate(seq):
            if v is None or isinstance(v, (bool, float, list, dict)):
                raise ValueError(f"{name}[{i}] must be a token id or a string, got {v!r}")
    matches = [float(p == r) for p, r in zip(predictions, references)]
    hits = int(sum(matches))
    n = len(predictions)
    return {"iia": hits / n, "iia_ci": list(bootstrap_ci(matches)), "n": n, "n_success": hits, "n_total": n}
