"""The settings of the judge commands, each written once: a field's default, its help (the flag
``findbench`` makes of it) and its check (``arg(..., check=...)``, called with the flag and the value by
``__post_init__`` / ``validate``; UsageError, one line naming the flag).

:class:`JudgeCardConfig` is what :func:`findbench.judge.card.judge_card` takes; FIND's Table A3
(true vs wrong descriptions, untuned vs tuned) is the card with ``rungs=["true", "other"]`` and a
``baseline``. :class:`JudgeDataConfig` is
``findbench judge-data``'s (:func:`findbench.judge.data.build_judge_data`).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, fields
from functools import partial
from typing import Any

from findbench._checks import integer, number, one_of, positive_int, str_list
from findbench._config import Csv, HelpFormatter, add_arguments, arg, flag, from_namespace
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

# The checks fields name (``check=``), beside those of findbench._checks.
_COUNT = partial(integer, low=0)
_OPTIONAL_COUNT = partial(integer, low=0, optional=True)
_NON_NEGATIVE = partial(number, low=0)


def _choice(*choices: Any) -> Any:
    return partial(one_of, choices=choices)


def _fraction(name: str, value: Any) -> None:
    if not 0 < number(name, value) < 1:
        raise UsageError(f"{name} must be in (0, 1), got {value}")


def _rate(name: str, value: Any) -> None:
    if not 0 <= number(name, value) < 1:
        raise UsageError(f"{name} must be in [0, 1), got {value!r}")


def _check_fields(config: Any) -> None:
    """Each field's own check, in the fields' order."""
    for f in fields(config):
        if "check" in f.metadata:
            f.metadata["check"](flag(f.name), getattr(config, f.name))


def _functions_per_category(text: str) -> int | None:
    """argparse ``type=`` for ``--functions-per-category``: an int >= 2, or ``all``."""
    if text != "all" and (not text.isdigit() or int(text) < 2):
        raise argparse.ArgumentTypeError(f"--functions-per-category must be an int >= 2 or 'all', got {text!r}")
    return None if text == "all" else int(text)


def _check_judge(name: str, judge: Any) -> None:
    """A judge named by a string must name a model (from Python, an LM object is taken as it is; None: no
    baseline)."""
    if isinstance(judge, (str, os.PathLike)):
        from findbench.models import check_spec

        check_spec(judge, flag=name)


@dataclass
class JudgeCardConfig:
    """an instrument card for a judge: accuracy on held-out functions with true, partial, near-miss, other, constant
    and empty descriptions and gaming probes (examples_only, hedged, stuffed, padded, master_key), AUROC, each
    probe's inflation over the truth, cost"""

    judge: Any = arg(MISSING, "judge: embedded-evaluator, embedded, a judge folder, a Hub id or server URL",
                     check=_check_judge)
    out: str | None = arg(MISSING, "card folder: README.md, judge_card.json, judge_card.png")
    judge_mode: str | None = arg(None, _MODE, choices=JUDGE_MODES, check=_choice(None, *JUDGE_MODES))
    categories: Csv = arg(_CATEGORIES, "comma-separated categories")
    functions_per_category: int | None = arg(8, "held-out functions per category, a seeded sample stratified by "
                                                "subcategory, or 'all'", parse=_functions_per_category,
                                             check=partial(integer, low=2, optional=True))  # `other` needs two
    seed: int = arg(0, "seeds the sample and the description ladder", check=integer)
    data: str | None = arg(None, "dataset folder written by `findbench build` (default: regenerate the functions)")
    evaluator_data: str | None = arg(None, "judge data folder whose recorded function split to use")
    judge_cache: str | None = arg(None, "sqlite file caching the judge's answers (fixed models only): reruns are free")
    tests: str = arg("find", "unit tests that judge the descriptions: find (the rows' unit_tests, FIND's), near (their "
                             "unit_tests_near) or both", choices=list(TESTS), check=_choice(*TESTS))
    rungs: Csv = arg(None, "comma-separated descriptions to judge, true among them (default: every rung and probe); "
                           "true,other is FIND's Table A3 (true vs wrong)")
    baseline: Any = arg(None, "a second judge (e.g. embedded, the untuned model) measured on the same "
                              "descriptions, reported as 'before' beside --judge", check=_check_judge)
    baseline_mode: Csv = arg(None, "the baseline's mode(s), comma-separated, e.g. logprob,pmi (default: as for "
                                   "--judge-mode)")
    baseline_cache: str | None = arg(None, "sqlite file caching the baseline's answers")
    batch_size: int = arg(8, "judge prompts per batch", check=positive_int)
    n_resamples: int | None = arg(None, "bootstrap resamples of every interval (default 10,000)",
                                  check=partial(positive_int, optional=True))
    function_seed: int = arg(0, "seed the functions are regenerated from (without --data)", check=integer)
    data_seed: int = arg(0, "seed of the judge-data split (without --evaluator-data)", check=integer)
    heldout_fraction: float = arg(0.2, "fraction of function groups the judge-data split holds out", check=_fraction)

    def __post_init__(self) -> None:
        _check_fields(self)
        self.categories = str_list("--categories", self.categories)
        if not self.categories:
            raise UsageError("--categories must name at least one category")
        self.rungs = str_list("--rungs", self.rungs, optional=True)
        if self.rungs is not None:
            for rung in self.rungs:
                one_of("--rungs", rung, ALL_RUNGS)
            if "true" not in self.rungs:
                raise UsageError(f"--rungs must include 'true' (every other rung is compared with it), "
                                 f"got {self.rungs}")
        self.baseline_mode = str_list("--baseline-mode", self.baseline_mode, optional=True)
        if self.baseline_mode is not None and not self.baseline_mode:
            raise UsageError("--baseline-mode must name at least one mode")
        for mode in self.baseline_mode or ():
            one_of("--baseline-mode", mode, JUDGE_MODES)
        if self.baseline_mode is not None and self.baseline is None:
            raise UsageError("--baseline-mode needs a baseline (--baseline)")


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
    n: int = arg(30000, "training rows, uniform over strings/entities/relations", check=positive_int)
    n_heldout: int | None = arg(None, "validation rows from held-out functions (default n/10)", check=_OPTIONAL_COUNT)
    seed: int = arg(0, "seed of the function split and the draws", check=integer)
    heldout_fraction: float = arg(0.2, "fraction of function groups held out", check=_fraction)
    data: str | None = arg(None, "take function rows from a `findbench build` folder (default: procedural, seed 0)")
    n_near: int | None = arg(None, "more training rows: the training functions' near-miss unit tests (same input, "
                                   "outputs of near misses of the function); default n/2", check=_OPTIONAL_COUNT)
    negatives: bool = arg(True, "each training row lists the descriptions that must lose to its truth (near misses' "
                                "own, examples-only, hedged, category-generic) for train-judge's pairwise term",
                          no_help="no losing descriptions")
    extra_string_functions: int = arg(0, "more strings training functions from the generator's next seeds, none with "
                                         "the code or description of a function of --data / seed 0", check=_COUNT)
    categories: Csv = arg(_CATEGORIES, "comma-separated categories")
    function_seed: int = arg(0, "seed the functions are regenerated from (without --data)", check=integer)

    def __post_init__(self) -> None:
        _check_fields(self)
        self.categories = [_category(c) for c in str_list("--categories", self.categories)]


#: The name of train-judge's default output folders, before the UTC date-time.
_NEW_JUDGE = "judge-"


# -- arguments: four groups, one parser (findbench._config); a field's name is its flag (lora_r: --lora-r)
# and its --config YAML key


@dataclass
class DataArgs:
    """What the judge trains on: the judge data, how much of it, and how rows become tokens."""

    data: str | None = arg(None, "judge data folder (findbench judge-data); default: build n_data rows in memory")
    n_data: int = arg(30000, "rows to build when --data is not given", check=positive_int)
    data_seed: int = arg(0, "seed of the data build (function split, draws)")
    max_train_rows: int | None = arg(3600, "train on the first N (shuffled) rows only; 0: all", check=_OPTIONAL_COUNT)
    eval_rows: int = arg(
        150, "validation rows scored at the end (loss, judge accuracy), taken evenly across categories", check=_COUNT
    )
    judge_mode: str = arg(
        "pmi",
        "pmi: learn to write a function's example given its description (the judge scores options by "
        "pointwise mutual information, findbench.judge mode 'pmi'); logprob: learn FIND's answer '[ANSWER]: k'",
        check=_choice("pmi", "logprob"),
    )
    max_length: int = arg(1024, "longer rows are truncated from the left of the prompt", check=positive_int)


@dataclass
class ModelArgs:
    """The base model and what is trained on it: a LoRA adapter (the default) or every weight."""

    model: str = arg("embedded", "base model: 'embedded', a folder or a Hub id")
    full_finetune: bool = arg(False, "train every weight instead of a LoRA adapter")
    lora_r: int = arg(16, "LoRA rank", check=positive_int)
    lora_alpha: int = arg(32, "LoRA alpha", check=positive_int)
    lora_dropout: float = arg(0.05, "LoRA dropout", check=_rate)
    lora_top_layers: int = arg(
        12, "LoRA on the top N decoder layers only (0: all); the frozen layers below need no backward pass",
        check=_COUNT,
    )
    lora_target_modules: str = arg("all-linear", "peft target_modules: 'all-linear' or comma-separated module names")


@dataclass
class OptimArgs:
    """Optimizer, schedule, batch shape, seeds and numerics."""

    learning_rate: float = arg(1e-3, "peak learning rate")
    loss_reduction: str = arg(
        "token", "row: answer-token losses summed per row, mean over rows; token: mean over tokens",
        check=_choice("row", "token"),
    )
    lr_scheduler_type: str = arg("cosine", "transformers scheduler name")
    warmup_ratio: float = arg(0.05, "fraction of steps of linear warm-up", check=_rate)
    weight_decay: float = arg(0.0, "AdamW weight decay")
    max_grad_norm: float = arg(1.0, "gradient clipping (0: off)")
    num_train_epochs: float = arg(1.0, "epochs over the training rows")
    max_steps: int = arg(-1, "optimizer steps (overrides epochs when > 0)")
    per_device_train_batch_size: int = arg(8, "rows per forward pass and device", check=positive_int)
    gradient_accumulation_steps: int = arg(1, "forward passes per optimizer step", check=positive_int)
    seed: int = arg(0, "seed of initialisation and data order")
    mixed_precision: str | None = arg(None, "no, fp16 or bf16; default: the accelerate config's (or no)",
                                      check=_choice(None, "no", "fp16", "bf16"))
    num_threads: int | None = arg(None, "torch CPU threads (default: torch's choice)")


@dataclass
class ComparativeArgs:
    """The comparative term beside the likelihood: on a row's unit test, the judge's own decision score
    (judge_mode's: pmi or the option number's log-probability) of the correct option under the true
    description must beat its score under each losing description (the row's `negatives`, from
    findbench judge-data) and the near-miss options' scores under the truth, each by a margin (hinge)."""

    likelihood_weight: float = arg(1.0, "weight of the likelihood term (the answer tokens' cross-entropy)",
                                   check=_NON_NEGATIVE)
    pairwise_weight: float = arg(
        0.0, "weight of the pairwise hinge term (0: off, the shipped recipe; training/configs/comparative.yaml: 1)",
        check=_NON_NEGATIVE,
    )
    pairwise_margin: float = arg(1.0, "margin in nats the truth's score must win each comparison by",
                                 check=_NON_NEGATIVE)
    negatives_per_example: int = arg(4, "losing descriptions per row, a seeded sample of its negatives",
                                     check=positive_int)


@dataclass
class OutputArgs:
    """Where the judge goes, logging, checkpoints and the optional Hub upload."""

    output_dir: str | None = arg(
        None, f"where the judge is written; default: a new folder ./{_NEW_JUDGE}<UTC date-time> (with "
        "--resume-from-checkpoint latest: the newest such folder with checkpoints left)"
    )
    install_as_default: bool = arg(
        False, "then install the judge as the default embedded-evaluator (a copy in findbench's cache, which evaluate, "
        "main and judge-card use from then on instead of the shipped one); without it the default judge is untouched"
    )
    logging_steps: int = arg(25, "log every N optimizer steps", check=_COUNT)
    save_steps: int = arg(50, "checkpoint every N optimizer steps (0: only at the end)", check=_COUNT)
    save_total_limit: int = arg(2, "checkpoints kept", check=_COUNT)
    resume_from_checkpoint: str | None = arg(
        None, "a checkpoint folder, or 'latest' for the newest under output_dir/checkpoints"
    )
    merge: bool = arg(False, "also write merged weights to output_dir/merged (LoRA)")
    push_to_hub: bool = arg(False, "upload the judge folder to the Hub at the end")
    hub_model_id: str | None = arg(None, "Hub repo id for --push-to-hub")
    hub_private: bool = arg(True, "create the Hub repo as private", no_help="create the Hub repo as public")


#: The argument groups, in parsing order, with their titles (``--help`` lists the flags by group).
ARG_GROUPS: dict[type, str] = {DataArgs: "data", ModelArgs: "model", OptimArgs: "optimisation",
                               ComparativeArgs: "comparative objective", OutputArgs: "output"}


@dataclass
class TrainArgs(OutputArgs, ComparativeArgs, OptimArgs, ModelArgs, DataArgs):
    """fine-tune the judge with accelerate + peft: every argument of train_judge, flat (defaults: the
    embedded-evaluator recipe)"""

    def validate(self) -> None:
        """Raise UsageError naming the first bad field: the fields' own checks in parsing order, then
        those across fields."""
        _check_fields(self)
        if not self.learning_rate > 0:
            raise UsageError(f"--learning-rate must be > 0, got {self.learning_rate!r}")
        if self.max_steps <= 0 and not self.num_train_epochs > 0:
            raise UsageError(f"--num-train-epochs must be > 0 when --max-steps is not set, "
                             f"got {self.num_train_epochs!r}")
        if self.likelihood_weight == 0 and self.pairwise_weight == 0:
            raise UsageError("--likelihood-weight and --pairwise-weight are both 0: nothing to train")
        if self.push_to_hub and not self.hub_model_id:
            raise UsageError("--hub-model-id is required with --push-to-hub")
        if self.full_finetune and self.merge:
            raise UsageError("--merge applies to LoRA training only (a full fine-tune already writes full weights)")


def make_parser(**kwargs: Any) -> argparse.ArgumentParser:
    """The parser of ``training/train_evaluator.py``: the training flags, a group per class of
    :data:`ARG_GROUPS` (``--lora-r``, as ``findbench train-judge`` has them), plus ``--config``.
    Standard library only: ``--help`` imports no model library."""
    parser = argparse.ArgumentParser(**{"description": "Fine-tune FIND's unit-test judge (accelerate + peft).",
                                        "formatter_class": HelpFormatter, **kwargs})
    for group, title in ARG_GROUPS.items():
        add_arguments(parser.add_argument_group(title, group.__doc__), group)
    parser.add_argument(
        "--config", default=None, metavar="FILE.yaml",
        help="YAML file of flat field: value pairs (e.g. training/configs/embedded.yaml); flags given here win",
    )
    return parser


def parse_train_args(argv: Sequence[str] | None = None, *, prog: str | None = None) -> TrainArgs:
    """TrainArgs from command-line flags (default ``sys.argv[1:]``); ``--config file.yaml`` supplies
    values that flags override. ValueError naming an unknown YAML field or a bad value."""
    parser = make_parser(**({"prog": prog} if prog else {}))
    # first pass: find --config, whose values become defaults that flags override in the second
    known, _ = parser.parse_known_args(argv)
    if known.config:
        import yaml

        with open(known.config, encoding="utf-8") as fh:
            values = yaml.safe_load(fh) or {}
        if not isinstance(values, dict):
            raise ValueError(f"--config {known.config}: expected a mapping of training fields")
        unknown = sorted(set(values) - {f.name for f in fields(TrainArgs)})
        if unknown:
            raise ValueError(f"--config {known.config}: unknown fields {unknown}")
        parser.set_defaults(**values)
    args = from_namespace(TrainArgs, parser.parse_args(argv))
    args.validate()
    return args
