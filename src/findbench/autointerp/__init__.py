"""AutoInterp for sparse-autoencoder latents (SAEBench's method, plus more scorers and
planted-feature validation).

>>> from findbench.autointerp import AutoInterpConfig, run_autointerp      # doctest: +SKIP
>>> run_autointerp(sae="embedded", config=AutoInterpConfig(n_latents=10, total_tokens=100_000))  # doctest: +SKIP

Names are imported lazily: importing this package (the ``autointerp`` metric does, for
:mod:`findbench.autointerp.detection`) loads neither torch nor sae_lens.
"""

from __future__ import annotations

from findbench._lazy import lazy_getattr

# (train_sae, the function, stays in findbench.autointerp.train_sae: the submodule shares its name)
__all__ = [
    "AutoInterpConfig",
    "SCORERS",
    "run_autointerp",
    "load_sae",
    "SyntheticSAE",
    "planted_validation",
    "TrainSAEConfig",
]

_LAZY = {
    "AutoInterpConfig": "findbench.autointerp.config",
    "SCORERS": "findbench.autointerp.config",
    "run_autointerp": "findbench.autointerp.run",
    "load_sae": "findbench.autointerp.sae",
    "SyntheticSAE": "findbench.autointerp.synthetic",
    "planted_validation": "findbench.autointerp.validation",
    "TrainSAEConfig": "findbench.autointerp.config",
}


__getattr__ = lazy_getattr(__name__, _LAZY)
