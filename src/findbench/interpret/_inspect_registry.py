"""Inspect's entry point into findbench (``[project.entry-points.inspect_ai]``): importing
:mod:`findbench.interpret.inspect_tasks` registers its task, solver, scorers and model API
(``inspect eval findbench/find_interpret``, ``--model findbench/embedded``)."""

import findbench.interpret.inspect_tasks  # noqa: F401
