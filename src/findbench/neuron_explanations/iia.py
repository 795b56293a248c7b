"""Interchange-intervention accuracy (IIA) from predictions and expected outputs.

Pure Python on purpose: the ``iia`` evaluate metric and anything else that only scores the
outputs of interventions import this module without pulling in torch. Running the
interventions themselves is :mod:`findbench.neuron_explanations.interventions`.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["iia_score"]


def iia_score(predictions: Sequence, references: Sequence) -> dict:
    """IIA from intervened predictions and expected outputs (token ids or strings).

    Returns ``iia`` (fraction equal, in [0, 1]), ``n_success`` and ``n_total``.
    """
    for name, seq in (("predictions", predictions), ("references", references)):
        if isinstance(seq, (str, bytes)) or not hasattr(seq, "__len__"):
            raise TypeError(f"{name} must be a sequence of tokens (ids or strings)")
    if len(predictions) == 0:
        raise ValueError("predictions must not be empty")
    if len(predictions) != len(references):
        raise ValueError(f"references has {len(references)} items but predictions has {len(predictions)}")
    for name, seq in (("predictions", predictions), ("references", references)):
        for i, v in enumerate(seq):
            if v is None or isinstance(v, (bool, float, list, dict)):
                raise ValueError(f"{name}[{i}] must be a token id or a string, got {v!r}")
    hits = sum(int(p == r) for p, r in zip(predictions, references))
    return {"iia": hits / len(predictions), "n_success": hits, "n_total": len(predictions)}
