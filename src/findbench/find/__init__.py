"""FIND (Schwettmann et al., NeurIPS 2023): functions with ground-truth descriptions.

- :mod:`findbench.find.rows`: :func:`generate_rows` / :func:`load_rows` /
  :func:`load_function` (and :func:`sample_rows`), the one entry point to build or call any FIND function
  (re-exported here).
- function families: :mod:`~findbench.find.numeric` (with :mod:`~findbench.find.mlp`),
  :mod:`~findbench.find.strings` (with :mod:`~findbench.find.string_ops`) and
  :mod:`findbench.find.synthetic_neurons` (entity and relation neurons, their word lists
  and relation tables, backbones and the appendix-G report).
- :mod:`~findbench.find.find_v1`: import of the original release.
- :mod:`~findbench.find.unit_tests`: the unit-test construction rule shared by every family.
- :mod:`~findbench.find.code_scoring`: NMSE and exact match of interpreter-written code (run in
  :mod:`findbench.sandbox`).
- :mod:`~findbench.find.export`: function scripts and FIND's ``Function input - output pairs``
  text for external interpreter harnesses.
"""

from __future__ import annotations

from findbench.find.rows import generate_rows, load_function, load_rows, sample_rows

__all__ = ["generate_rows", "load_function", "load_rows", "sample_rows"]
