"""Inspect's entry point into findbench (``[project.entry-points.inspect_ai]``).

Inspect imports this module when a name in the ``findbench/`` namespace is looked up
(``inspect eval findbench/find_interpret``, ``--model findbench/embedded``); importing it
registers the task, solver, scorers and model API of
:mod:`findbench.interpret.inspect_tasks`.
"""

from __future__ import annotations

from findbench.interpret.inspect_tasks import (
    domain_iou,
    exact_match,
    find_agent,
    find_interpret,
    findbench_model_api,
    nmse_success,
    unit_test_accuracy,
)

__all__ = [
    "domain_iou",
    "exact_match",
    "find_agent",
    "find_interpret",
    "findbench_model_api",
    "nmse_success",
    "unit_test_accuracy",
]
