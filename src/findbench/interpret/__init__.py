"""Interpreting FIND functions and scoring the interpretations (FIND §3, Table 2).

An *interpreter* is an agent that experiments on a black-box function and then describes it.
This package is FIND's interpreter harness; its core needs no agent framework:

- :mod:`~findbench.interpret.protocol`: the text protocol. The agent writes
  ``PYTHON(function.py x1 x2 ...)`` commands; the harness replies
  ``Response: Function input - output pairs: (x1, y1) ...``; the agent ends with
  ``[DESCRIPTION]:`` (and ``[DOMAIN]:`` / ``[CODE]:`` where the category asks for them).
- :mod:`~findbench.interpret.prompts`: the system and task messages per category and method
  (``aia``; ``milan`` and ``aia+milan`` for neurons).
- :mod:`~findbench.interpret.calls`: the function runs in this process on the agent's values,
  as ``findbench call`` runs it; no shell, no path, no flag ever reaches it.
- :mod:`~findbench.interpret.episode`: the episode record and the text loop, async around a
  ``chat(messages)`` (the Inspect solver's model).
- :mod:`~findbench.interpret.references`: ``oracle`` and ``random`` interpreters and the
  ``constant`` and ``empty`` baselines (no LM).
- :mod:`~findbench.interpret.run`: many episodes through ``inspect_ai.eval``, exported as a
  resumable run folder ``<out>/<category>/<method>/fNNNNN/`` (``findbench interpret``).
- :mod:`~findbench.interpret.inspect_tasks`: task ``findbench/find_interpret``, its solver and
  scorers, and the ``findbench/<spec>`` model API. Not imported here (it imports
  ``inspect_ai``); Inspect finds it through the ``inspect_ai`` entry point.

The run folders are scored by :mod:`findbench.interpret.evaluate` (rendered as Table 2 by
:mod:`findbench.interpret.scoreboard`), and a scored run is drawn as ``report.html`` with its
figures by :mod:`findbench.interpret.report` (``findbench report``); none of the three is
imported here.
"""

from __future__ import annotations

from findbench.interpret.calls import FunctionRunner
from findbench.interpret.episode import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_ROUNDS,
    Chat,
    ChatReply,
    Episode,
    run_episode,
)
from findbench.interpret.prompts import MILAN_TURNS, build_messages, system_prompt, task_prompt
from findbench.interpret.protocol import (
    METHODS,
    PROTOCOL,
    UNRECOGNIZED_REPLY,
    Answer,
    CallError,
    Command,
    format_answer,
    format_reply,
    parse_answer,
    parse_commands,
)
from findbench.interpret.references import (
    CONSTANT_ANSWERS,
    REFERENCE_INTERPRETERS,
    constant_answer,
    empty_answer,
    oracle_answer,
    random_answer,
    reference_answer,
    reference_domain,
)
from findbench.interpret.run import run_interpretations, summarize_run

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_ROUNDS",
    "METHODS",
    "MILAN_TURNS",
    "PROTOCOL",
    "CONSTANT_ANSWERS",
    "REFERENCE_INTERPRETERS",
    "UNRECOGNIZED_REPLY",
    "Answer",
    "CallError",
    "Chat",
    "ChatReply",
    "Command",
    "Episode",
    "FunctionRunner",
    "build_messages",
    "constant_answer",
    "empty_answer",
    "format_answer",
    "format_reply",
    "oracle_answer",
    "parse_answer",
    "parse_commands",
    "random_answer",
    "reference_answer",
    "reference_domain",
    "run_episode",
    "run_interpretations",
    "summarize_run",
    "system_prompt",
    "task_prompt",
]
