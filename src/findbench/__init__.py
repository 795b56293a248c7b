"""findbench: the FIND benchmark and neuron-explanation evaluation, the Hugging Face way.

Organised by paper (see the README's layout): :mod:`findbench.find` (FIND, Schwettmann et al.
2023), :mod:`findbench.neuron_explanations` (Huang et al. 2023), :mod:`findbench.judge` (FIND's
unit-test judge). ``import findbench`` is cheap: the row helpers load on first use.
"""

from __future__ import annotations

from findbench._lazy import lazy_getattr, names_of
from findbench._version import __version__
from findbench.resources import metric_path

_MODULES = {"findbench.find.rows": ("generate_rows", "load_function", "load_rows")}
__getattr__ = lazy_getattr(__name__, _MODULES)
__all__ = ["__version__", "metric_path", *names_of(_MODULES)]
