"""Fine-tuning FIND's unit-test judge ("vicuna-evaluator", FIND appendix F1).

- :mod:`findbench.evaluator.data`: simulated unit tests answered with ground-truth
  descriptions (:func:`build_evaluator_data`), split by function into train / held-out.
- :mod:`findbench.evaluator.train`: the accelerate + peft training loop
  (:func:`train_evaluator`, used by ``training/train_evaluator.py`` and
  ``findbench train-evaluator``).
- :mod:`findbench.evaluator.report`: judge accuracy on held-out functions with true and
  with wrong descriptions, before vs after (:func:`evaluator_report`, FIND Table A3).

Heavy imports (torch, transformers, peft, accelerate) happen inside the functions.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "EVALUATOR_CATEGORIES",
    "build_evaluator_data",
    "build_evaluator_rows",
    "split_functions",
    "TrainArgs",
    "train_evaluator",
    "evaluator_report",
    "embedded_evaluator_dir",
]

EVALUATOR_CATEGORIES = ("strings", "neurons_entities", "neurons_relations")

_LAZY = {
    "build_evaluator_data": "findbench.evaluator.data",
    "build_evaluator_rows": "findbench.evaluator.data",
    "split_functions": "findbench.evaluator.data",
    "TrainArgs": "findbench.evaluator.train",
    "train_evaluator": "findbench.evaluator.train",
    "embedded_evaluator_dir": "findbench.evaluator.train",
    "evaluator_report": "findbench.evaluator.report",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'findbench.evaluator' has no attribute {name!r}")
