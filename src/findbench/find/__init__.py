"""FIND (Schwettmann et al., NeurIPS 2023): functions with ground-truth descriptions.

- :mod:`~findbench.find.rows`: :func:`generate_rows` / :func:`load_rows` / :func:`load_function`
  (and :func:`sample_rows`), the one entry point to build or call any FIND function.
- families: :mod:`~findbench.find.numeric` (+ :mod:`~findbench.find.mlp`),
  :mod:`~findbench.find.strings` (+ :mod:`~findbench.find.string_ops`),
  :mod:`findbench.find.synthetic_neurons`; :mod:`~findbench.find.find_v1` imports the release.
- :mod:`~findbench.find.unit_tests` (shared unit-test rule), :mod:`~findbench.find.code_scoring`
  (NMSE / exact match of interpreter code), :mod:`~findbench.find.export` (scripts for
  external harnesses).
"""

from __future__ import annotations

from findbench.find.rows import generate_rows, load_function, load_rows, sample_rows

__all__ = ["generate_rows", "load_function", "load_rows", "sample_rows"]
