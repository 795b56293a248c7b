"""Interpreting FIND functions and scoring the interpretations (FIND §3, Table 2).

An *interpreter* is an agent that experiments on a black-box function and then describes it.

- :mod:`~findbench.interpret.protocol`: ``PYTHON(function.py x1 x2 ...)`` commands, their reply
  lines and the ``[DESCRIPTION]:`` / ``[DOMAIN]:`` / ``[CODE]:`` answer;
- :mod:`~findbench.interpret.prompts`: the system and task messages per category and method;
- :mod:`~findbench.interpret.calls`: the function runs in this process on the agent's values;
- :mod:`~findbench.interpret.episode`: the episode record;
- :mod:`~findbench.interpret.references`: ``oracle``, ``random``, ``constant``, ``empty`` (no LM);
- :mod:`~findbench.interpret.run`: episodes through ``inspect_ai.eval``, exported as a run folder;
- :mod:`~findbench.interpret.task`, :mod:`~findbench.interpret.solver`, :mod:`~findbench.interpret.scorers`: the
  Inspect task, its agent (``text`` and ``tools`` protocols) and its scorers.

Names below load their module on first use. Not exported: ``task``, ``solver`` and ``scorers`` (Inspect finds them
through its entry point), ``evaluate`` (scoring), ``scoreboard`` (Table 2) and ``report`` (``report.html``)."""

from __future__ import annotations

from findbench._lazy import lazy_getattr, names_of

# Loaded on first use, so that ``findbench --help`` (which reads interpret/config.py) imports
# none of the episode machinery.
_MODULES = {
    "findbench.interpret.calls": ("FunctionRunner",),
    "findbench.interpret.episode": ("DEFAULT_MAX_TOKENS", "DEFAULT_ROUNDS", "Episode"),
    "findbench.interpret.prompts": ("MILAN_TURNS", "build_messages", "system_prompt", "task_prompt"),
    "findbench.interpret.protocol": (
        "METHODS",
        "PROTOCOL",
        "UNRECOGNIZED_REPLY",
        "Answer",
        "CallError",
        "Command",
        "format_answer",
        "format_reply",
        "parse_answer",
        "parse_commands",
    ),
    "findbench.interpret.references": (
        "CONSTANT_ANSWERS",
        "REFERENCE_INTERPRETERS",
        "constant_answer",
        "empty_answer",
        "oracle_answer",
        "random_answer",
        "reference_answer",
        "reference_domain",
    ),
    "findbench.interpret.run": ("run_interpretations", "summarize_run"),
}
__getattr__ = lazy_getattr(__name__, _MODULES)
__all__ = names_of(_MODULES)
