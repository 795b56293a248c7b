"""findbench: the FIND benchmark and neuron-explanation evaluation, the Hugging Face way.

The package is organised by the paper each part comes from (see the README's layout section):

- :mod:`findbench.find`: FIND (Schwettmann et al. 2023): function families, synthetic
  neurons, the ``find-v1`` import, unit tests, code scoring.
- :mod:`findbench.neuron_explanations`: Huang et al. (2023): observational test sets,
  explanation F1, interchange interventions and IIA.
- :mod:`findbench.judge`: FIND's unit-test judge: prompts, scoring modes, training data,
  fine-tuning and the before/after report.
- low layers: :mod:`findbench.schema`, :mod:`findbench.constants`, :mod:`findbench.sandbox`,
  :mod:`findbench.lm`, :mod:`findbench.models`, :mod:`findbench.sites`.

``import findbench`` is cheap: the row helpers load on first use.
"""

from __future__ import annotations

from findbench._lazy import lazy_getattr
from findbench._version import __version__
from findbench.resources import metric_path

__all__ = ["__version__", "generate_rows", "load_function", "load_rows", "metric_path"]

__getattr__ = lazy_getattr(__name__, dict.fromkeys(("generate_rows", "load_function", "load_rows"), "findbench.find.rows"))
