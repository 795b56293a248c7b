"""Inspect's entry point into findbench (``[project.entry-points.inspect_ai]``): importing
:mod:`findbench.interpret.task` registers FIND's task, solver and scorers
(``inspect eval findbench/find_interpret``), :mod:`findbench.lm.inspect_provider` the model API
(``--model findbench/embedded``), and :mod:`findbench.autointerp.inspect_task` the AutoInterp task
(``inspect eval findbench/autointerp``)."""

import findbench.autointerp.inspect_task  # noqa: F401
import findbench.interpret.task  # noqa: F401
import findbench.lm.inspect_provider  # noqa: F401
