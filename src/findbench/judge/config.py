"""The settings of the judge commands, each written once: a field's default, its help (the flag
``findbench`` makes of it) and its check (``__post_init__``, one line naming the field).

:class:`JudgeCardConfig` is what :func:`findbench.judge.card.judge_card` takes; FIND's Table A3
(true vs wrong descriptions, untuned vs tuned) is the card with ``rungs=["true", "other"]`` and a
``baseline``. :class:`JudgeDataConfig` is
``findbench judge-data``'s (:func:`findbench.judge.data.build_judge_data`).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import MISSING, dataclass
from typing import Any

from findbench import _checks
from findbench._config import Csv, arg, flag
from findbench.constants import JUDGE_CATEGORIES, UsageError
from findbench.judge.probes import PROBE_RUNGS
from findbench.judge.scoring import JUDGE_MODES, judge_category

#: ``tests=``: which unit tests judge the descriptions: the rows' ``unit_tests`` (FIND's), their
#: ``unit_tests_near`` or both.
TESTS = ("find", "near", "both")
#: The card's ladder of descriptions, from the right one to none (:data:`findbench.judge.ladder.RUNG_DEFINITIONS`).
RUNGS = ("true", "partial", "near_miss", "other", "constant", "empty")
#: Every rung a card can judge (``rungs=``): the ladder, then the gaming probes.
ALL_RUNGS = (*RUNGS, *PROBE_RUNGS)
_CATEGORIES = ",".join(JUDGE_CATEGORIES)
_MODE = "the judge's scoring mode (default: the mode a trained judge folder records, else logprob)"


def _functions_per_category(text: str) -> int | None:
    """argparse ``type=`` for ``--functions-per-category``: an int >= 2, or ``all``."""
    if text != "all" and (not text.isdigit() or int(text) < 2):
        raise argparse.ArgumentTypeError(f"--functions-per-category must be an int >= 2 or 'all', got {text!r}")
    return None if text == "all" else int(text)


def _check_judge(name: str, judge: Any) -> None:
    """A judge named by a string must name a model (from Python, an LM object is taken as it is)."""
    if isinstance(judge, (str, os.PathLike)):
        from findbench.models import check_spec

        check_spec(judge, flag=flag(name))


def _modes(name: str, value: Csv) -> list[str] | None:
    modes = _checks.str_list(name, value, optional=True)
    if modes is not None and not modes:
        raise UsageError(f"{name} must name at least one mode")
    for mode in modes or ():
        _checks.one_of(name, mode, JUDGE_MODES)
    return modes


@dataclass
class JudgeCardConfig:
    """an instrument card for a judge: accuracy on held-out functions with true, partial, near-miss, other, constant
    and empty descriptions and gaming probes (examples_only, hedged, stuffed, padded, master_key), AUROC, each
    probe's inflation over the truth, cost"""

    judge: Any = arg(MISSING, "judge: embedded-evaluator, embedded, a judge folder, a Hub id or server URL")
    out: str | None = arg(MISSING, "card folder: README.md, judge_card.json, judge_card.png")
    judge_mode: str | None = arg(None, _MODE, choices=JUDGE_MODES)
    categories: Csv = arg(_CATEGORIES, "comma-separated categories")
    functions_per_category: int | None = arg(8, "held-out functions per category, a seeded sample stratified by "
                                                "subcategory, or 'all'", parse=_functions_per_category)
    seed: int = arg(0, "seeds the sample and the description ladder")
    data: str | None = arg(None, "dataset folder written by `findbench build` (default: regenerate the functions)")
    evaluator_data: str | None = arg(None, "judge data folder whose recorded function split to use")
    judge_cache: str | None = arg(None, "sqlite file caching the judge's answers (fixed models only): reruns are free")
    tests: str = arg("find", "unit tests that judge the descriptions: find (the rows' unit_tests, FIND's), near (their "
                             "unit_tests_near) or both", choices=list(TESTS))
    rungs: Csv = arg(None, "comma-separated descriptions to judge, true among them (default: every rung and probe); "
                           "true,other is FIND's Table A3 (true vs wrong)")
    baseline: Any = arg(None, "a second judge (e.g. embedded, the untuned model) measured on the same "
                                     "descriptions, reported as 'before' beside --judge")
    baseline_mode: Csv = arg(None, "the baseline's mode(s), comma-separated, e.g. logprob,pmi (default: as for "
                                   "--judge-mode)")
    baseline_cache: str | None = arg(None, "sqlite file caching the baseline's answers")
    batch_size: int = arg(8, "judge prompts per batch")
    n_resamples: int | None = arg(None, "bootstrap resamples of every interval (default 10,000)")
    function_seed: int = arg(0, "seed the functions are regenerated from (without --data)")
    data_seed: int = arg(0, "seed of the judge-data split (without --evaluator-data)")
    heldout_fraction: float = arg(0.2, "fraction of function groups the judge-data split holds out")

    def __post_init__(self) -> None:
        _check_judge("judge", self.judge)
        if self.judge_mode is not None:
            _checks.one_of("--judge-mode", self.judge_mode, JUDGE_MODES)
        self.categories = _checks.str_list("--categories", self.categories)
        if not self.categories:
            raise UsageError("--categories must name at least one category")
        # `other` needs two
        _checks.integer("--functions-per-category", self.functions_per_category, 2, optional=True)
        _checks.integer("--seed", self.seed)
        _checks.one_of("--tests", self.tests, TESTS)
        self.rungs = _checks.str_list("--rungs", self.rungs, optional=True)
        if self.rungs is not None:
            for rung in self.rungs:
                _checks.one_of("--rungs", rung, ALL_RUNGS)
            if "true" not in self.rungs:
                raise UsageError(f"--rungs must include 'true' (every other rung is compared with it), "
                                 f"got {self.rungs}")
        if self.baseline is not None:
            _check_judge("baseline", self.baseline)
        self.baseline_mode = _modes("--baseline-mode", self.baseline_mode)
        if self.baseline_mode is not None and self.baseline is None:
            raise UsageError("--baseline-mode needs a baseline (--baseline)")
        _checks.positive_int("--batch-size", self.batch_size)
        _checks.positive_int("--n-resamples", self.n_resamples, optional=True)
        _checks.integer("--function-seed", self.function_seed)
        _checks.integer("--data-seed", self.data_seed)
        if not 0 < _checks.number("--heldout-fraction", self.heldout_fraction) < 1:
            raise UsageError(f"--heldout-fraction must be in (0, 1), got {self.heldout_fraction}")


def _category(name: str) -> str:
    """A judged category's config name (``entities`` / ``relations`` accepted), naming --categories."""
    try:
        return judge_category(name)
    except ValueError as exc:
        raise UsageError(f"--categories: {exc}") from None


@dataclass
class JudgeDataConfig:
    """judge training data: simulated unit tests with ground-truth descriptions (FIND app. F1)"""

    out: str = arg("evaluator-data", "dataset folder to write")
    n: int = arg(30000, "training rows, uniform over strings/entities/relations")
    n_heldout: int | None = arg(None, "validation rows from held-out functions (default n/10)")
    seed: int = arg(0, "seed of the function split and the draws")
    heldout_fraction: float = arg(0.2, "fraction of function groups held out")
    data: str | None = arg(None, "take function rows from a `findbench build` folder (default: procedural, seed 0)")
    n_near: int | None = arg(None, "more training rows: the training functions' near-miss unit tests (same input, "
                                   "outputs of near misses of the function); default n/2")
    negatives: bool = arg(True, "each training row lists the descriptions that must lose to its truth (near misses' "
                                "own, examples-only, hedged, category-generic) for train-judge's pairwise term",
                          no_help="no losing descriptions")
    extra_string_functions: int = arg(0, "more strings training functions from the generator's next seeds, none with "
                                         "the code or description of a function of --data / seed 0")
    categories: Csv = arg(_CATEGORIES, "comma-separated categories")
    function_seed: int = arg(0, "seed the functions are regenerated from (without --data)")

    def __post_init__(self) -> None:
        _checks.positive_int("--n", self.n)
        _checks.integer("--n-heldout", self.n_heldout, 0, optional=True)
        _checks.integer("--seed", self.seed)
        if not 0 < _checks.number("--heldout-fraction", self.heldout_fraction) < 1:
            raise UsageError(f"--heldout-fraction must be in (0, 1), got {self.heldout_fraction}")
        _checks.integer("--n-near", self.n_near, 0, optional=True)
        _checks.integer("--extra-string-functions", self.extra_string_functions, 0)
        self.categories = [_category(c) for c in _checks.str_list("--categories", self.categories)]
        _checks.integer("--function-seed", self.function_seed)

