"""AutoInterp for sparse-autoencoder latents (SAEBench's method, plus more scorers and
planted-feature validation).

>>> from findbench.autointerp import AutoInterpCommand, AutoInterpConfig, run_autointerp      # doctest: +SKIP
>>> run_autointerp(AutoInterpCommand(sae="embedded", config=AutoInterpConfig.quick(n_latents=20)))  # doctest: +SKIP

Names are imported lazily: importing this package (the ``autointerp`` metric does, for
:mod:`findbench.autointerp.detection`) loads neither torch nor sae_lens.
"""

from __future__ import annotations

from findbench._lazy import lazy_getattr, names_of

# (train_sae, the function, stays in findbench.autointerp.train_sae: the submodule shares its name)
_MODULES = {
    "findbench.autointerp.commands": ("AutoInterpCommand",),
    "findbench.autointerp.config": ("AutoInterpConfig", "SCORERS", "TrainSAEConfig"),
    "findbench.autointerp.run": ("run_autointerp",),
    "findbench.autointerp.sae": ("load_sae",),
    "findbench.autointerp.synthetic": ("SyntheticSAE",),
    "findbench.autointerp.validation": ("planted_validation",),
}
__getattr__ = lazy_getattr(__name__, _MODULES)
__all__ = names_of(_MODULES)
