"""White-box FIND (the ``rasp`` config): RASP programs compiled into transformers with ground truth.

- :mod:`~findbench.find.rasp.programs`: programs as JSON specs over a named function registry, their
  plain-Python meaning (every variable's value) and reference code;
- :mod:`~findbench.find.rasp.catalog`: the seeded programs of the three tiers;
- :mod:`~findbench.find.rasp.compile`: tracr compilation (build time only, ``findbench[rasp]``);
- :mod:`~findbench.find.rasp.model`: the torch module (TransformerLens hook names), the ``rotated`` variant;
- :mod:`~findbench.find.rasp.store`: validation by execution, shipped weights, :func:`load_model`;
- :mod:`~findbench.find.rasp.truth`: components and near misses; :mod:`~findbench.find.rasp.rows`: the rows;
- :mod:`~findbench.find.rasp.circuit`: the ``find_circuit`` scores and floors.
"""

from __future__ import annotations

from findbench._lazy import lazy_getattr

__all__ = ["load_model"]

__getattr__ = lazy_getattr(__name__, {"load_model": "findbench.find.rasp.store"})
