"""Inspect's entry point into findbench (``[project.entry-points.inspect_ai]``): importing
:mod:`findbench.interpret.inspect_tasks` registers FIND's task, solver, scorers and model API
(``inspect eval findbench/find_interpret``, ``--model findbench/embedded``), and
:mod:`findbench.autointerp.inspect_task` the AutoInterp task (``inspect eval findbench/autointerp``)."""

import findbench.autointerp.inspect_task  # noqa: F401
import findbench.interpret.inspect_tasks  # noqa: F401
