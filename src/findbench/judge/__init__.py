"""FIND's unit-test judge (FIND §3.1, app. F1): does a description identify its function?

:mod:`~findbench.judge.scoring` (prompts, the ``logprob`` / ``generate`` / ``pmi`` modes,
:func:`judge_unit_tests`; re-exported here), :mod:`~findbench.judge.data` (judge training
data, split by function), :mod:`~findbench.judge.train` (accelerate + peft fine-tuning),
:mod:`~findbench.judge.report` (FIND Table A3 for any judge) and :mod:`~findbench.judge.card`
(a judge's instrument card). The shipped judge keeps FIND's name, "evaluator"
(``embedded-evaluator``); the library calls it the judge. Heavy imports happen inside the functions.
"""

from __future__ import annotations

from findbench._lazy import lazy_getattr
from findbench.constants import JUDGE_CATEGORIES
from findbench.judge.scoring import (
    ANSWER_PREFIX,
    JUDGE_MODES,
    MAX_DESCRIPTION_TOKENS,
    N_OPTIONS,
    NULL_DESCRIPTION,
    PMI_SYSTEM_PROMPT,
    SYSTEM_PROMPT,
    bound_description,
    check_unit_test,
    check_unit_tests,
    clean_description,
    description_token_limit,
    judge_category,
    judge_mode_of,
    judge_unit_tests,
    load_judge,
    normalize_unit_test,
    parse_answer,
    render_judge_prompt,
    render_judge_target,
    render_pmi_option,
    render_pmi_prompt,
)

__all__ = [
    "ANSWER_PREFIX",
    "JUDGE_CATEGORIES",
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
    "build_judge_data",
    "build_judge_rows",
    "split_functions",
    "TrainArgs",
    "train_judge",
    "judge_report",
    "judge_card",
]

_LAZY = {
    "build_judge_data": "findbench.judge.data",
    "build_judge_rows": "findbench.judge.data",
    "split_functions": "findbench.judge.data",
    "TrainArgs": "findbench.judge.train",
    "train_judge": "findbench.judge.train",
    "judge_report": "findbench.judge.report",
    "judge_card": "findbench.judge.card",
    # old names, kept one release (each call warns)
    "build_evaluator_data": "findbench.judge.data",
    "build_evaluator_rows": "findbench.judge.data",
    "train_evaluator": "findbench.judge.train",
    "evaluator_report": "findbench.judge.report",
}


__getattr__ = lazy_getattr(__name__, _LAZY)
