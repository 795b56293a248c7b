"""FIND's unit-test judge (FIND §3.1, app. F1): does a description identify its function?

:mod:`~findbench.judge.scoring` (prompts, the ``logprob`` / ``generate`` / ``pmi`` modes,
:func:`judge_unit_tests`; re-exported here), :mod:`~findbench.judge.data` (judge training
data, split by function), :mod:`~findbench.judge.train` (accelerate + peft fine-tuning) and
:mod:`~findbench.judge.card` (a judge's instrument card; FIND Table A3 is its view with
``rungs=["true", "other"]`` and a baseline). The shipped judge keeps FIND's name, "evaluator"
(``embedded-evaluator``); the library calls it the judge. Names load their module on first use.
"""

from __future__ import annotations

from findbench._lazy import lazy_getattr, names_of

#: The package's names, by the module that defines them; each loads its module on first use.
_MODULES = {
    "findbench.constants": ("JUDGE_CATEGORIES",),
    "findbench.judge.scoring": (
        "ANSWER_PREFIX",
        "JUDGE_MODES",
        "MAX_DESCRIPTION_TOKENS",
        "N_OPTIONS",
        "NULL_DESCRIPTION",
        "PMI_SYSTEM_PROMPT",
        "SYSTEM_PROMPT",
        "bound_description",
        "check_unit_test",
        "check_unit_tests",
        "clean_description",
        "description_token_limit",
        "judge_category",
        "judge_mode_of",
        "judge_unit_tests",
        "load_judge",
        "normalize_unit_test",
        "parse_answer",
        "render_judge_prompt",
        "render_judge_target",
        "render_pmi_option",
        "render_pmi_prompt",
    ),
    "findbench.judge.data": ("build_judge_data", "build_judge_rows", "split_functions"),
    "findbench.judge.config": ("TrainArgs",),
    "findbench.judge.train": ("train_judge",),
    "findbench.judge.card": ("judge_card",),
}
__getattr__ = lazy_getattr(__name__, _MODULES)
__all__ = names_of(_MODULES)
