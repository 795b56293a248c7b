"""Names shared across layers: category tuples, file names and cached-model names.

A leaf module (no findbench imports), so every layer can read these without importing the
code that writes the files they name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator


class UsageError(ValueError):
    """A user's input (a flag, a config field, an argument) is wrong. Raised at the boundary
    with one line naming the flag or field; the command line prints it without a traceback."""


class UsageTypeError(UsageError, TypeError):
    """A user's input of the wrong type (a list where a number goes): a :class:`UsageError` that
    Python callers may also catch as the TypeError it is."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped a resumable run; ``left`` says what a rerun of the same command still does
    (``"3 episodes left"``). The command line prints it in one line and exits 130."""

    def __init__(self, left: str) -> None:
        super().__init__(left)
        self.left = left


@contextlib.contextmanager
def resumable(left: Callable[[], str]) -> Iterator[None]:
    """Ctrl-C inside the block raised as :class:`Interrupted` saying ``left()`` (asked then)."""
    try:
        yield
    except Interrupted:
        raise
    except KeyboardInterrupt:
        raise Interrupted(left()) from None


#: FIND categories that have unit tests, so a judge can score them (numeric functions are
#: scored by NMSE instead).
JUDGE_CATEGORIES = ("strings", "neurons_entities", "neurons_relations")

#: File written last into a finished judge folder (``findbench train-judge``): the
#: training summary, including the ``judge_mode`` the judge was trained for.
TRAINED_MARKER = "findbench_evaluator.json"

#: Registered name of the judge fine-tuned from the embedded model, and the recipe version in
#: its cache folder name (bumped when the recipe changes, so an old judge is never picked up).
EMBEDDED_JUDGE_NAME = "embedded-evaluator"
EMBEDDED_JUDGE_VERSION = "v2"

#: The category-generic description of the ``constant`` floor: one fixed text per category,
#: whatever the function. The ``constant`` reference interpreter answers with it
#: (``findbench.interpret.references.CONSTANT_ANSWERS``) and the judge card's ``constant`` rung
#: shows it to the judge (``findbench.judge.card``); kept here, in the leaf module, so both
#: layers read the same text.
CONSTANT_DESCRIPTIONS = {
    "numeric": "f(x) returns a number",
    "strings": "f(s) returns a string",
    "neurons_entities": "the neuron responds to words",
    "neurons_relations": "the function maps an input word to another word",
    "rasp": "f(x) returns one value per token of its input sequence",
}
