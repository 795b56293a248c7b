"""Names shared across layers: category tuples, file names and cached-model names.

A leaf module (no findbench imports), so every layer can read these without importing the
code that writes the files they name.
"""

from __future__ import annotations

__all__ = [
    "JUDGE_CATEGORIES",
    "TRAINED_MARKER",
    "EMBEDDED_EVALUATOR_NAME",
    "EMBEDDED_EVALUATOR_VERSION",
    "UsageError",
]


class UsageError(ValueError):
    """A user's input (a flag, a config field, an argument) is wrong. Raised at the boundary
    with one line naming the flag or field; the command line prints it without a traceback."""

#: FIND categories that have unit tests, so a judge can score them (numeric functions are
#: scored by NMSE instead).
JUDGE_CATEGORIES = ("strings", "neurons_entities", "neurons_relations")

#: File written last into a finished judge folder (``findbench train-evaluator``): the
#: training summary, including the ``judge_mode`` the judge was trained for.
TRAINED_MARKER = "findbench_evaluator.json"

#: Registered name of the judge fine-tuned from the embedded model, and the recipe version in
#: its cache folder name (bumped when the recipe changes, so an old judge is never picked up).
EMBEDDED_EVALUATOR_NAME = "embedded-evaluator"
EMBEDDED_EVALUATOR_VERSION = "v2"
