"""FIND's unit-test judge (FIND §3.1): does a description identify its function?

Each function has 10 unit tests of three options, one produced by the function; it scores the
fraction the judge picks right (chance 1/3). Modes (:data:`JUDGE_MODES`): ``logprob`` (argmax of
the log-probs of ``1``/``2``/``3`` after ``[ANSWER]: ``), ``generate`` (the written answer,
:func:`parse_answer`) and ``pmi`` (each option's log-probability as an example of the description
minus without one, :data:`NULL_DESCRIPTION`; the mode of ``embedded-evaluator``).
"""

from __future__ import annotations

import inspect
import json
import logging
import numbers
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from findbench._checks import instance, integer, one_of, positive_int
from findbench.constants import EMBEDDED_JUDGE_NAME, JUDGE_CATEGORIES, TRAINED_MARKER
from findbench.find.unit_tests import N_OPTIONS
from findbench.lm.base import Constraint, use_structured_outputs
from findbench.schema import RASP

log = logging.getLogger(__name__)

#: What the judge's answer starts with; the option number follows.
ANSWER_PREFIX = "[ANSWER]: "


def answer_constraint(n_options: int = N_OPTIONS) -> Constraint:
    """The grammar of a ``"generate"`` answer: :data:`ANSWER_PREFIX` and one option number in
    ``1..n_options`` (``[ANSWER]: 2``), nothing else."""
    if integer("n_options", n_options, 1) > 9:
        raise ValueError(f"n_options must be at most 9 (one digit), got {n_options!r}")
    return Constraint(regex=r"\[ANSWER\]: [1-" + str(n_options) + "]")


_ALIASES = {"entities": "neurons_entities", "relations": "neurons_relations"}

SYSTEM_PROMPT = (
    "You are a careful evaluator of explanations. You read a description of a function and "
    "decide which of several numbered examples was produced by the function it describes. "
    "Exactly one example matches. Reply with the number of that example only, in the form "
    "[ANSWER]: k"
)

_INTRO = {
    "strings": (
        "Here is a description of a Python function that takes a string as input and returns a string.",
        "Which of the following input -> output examples was produced by this function?",
    ),
    "rasp": (
        "Here is a description of a function that takes a sequence of tokens and returns one value per token.",
        "Which of the following input -> output examples was produced by this function?",
    ),
    "neurons_entities": (
        "Here is a description of a neuron: the kind of words it responds to strongly.",
        "Which of the following words would this neuron respond to most strongly?",
    ),
    "neurons_relations": (
        "Here is a description of a function that maps an input word to an output word.",
        "Which of the following input -> output examples was produced by this function?",
    ),
}

#: Scoring modes of :func:`judge_unit_tests` (see the module docstring).
JUDGE_MODES = ("logprob", "generate", "pmi")

#: ``"pmi"`` mode: the system message, the request per category, and the stand-in
#: description under which an option's prior log-probability is measured.
PMI_SYSTEM_PROMPT = "You write examples that fit a description of a function."
NULL_DESCRIPTION = "(none)"
_PMI_ASK = {
    "strings": "Give one input -> output example of this function.",
    "neurons_entities": "Give one word this neuron responds to.",
    "neurons_relations": "Give one input -> output example of this function.",
    "rasp": "Give one input -> output example of this function.",
}

#: The most tokens of a description the judge reads; a longer one is cut and flagged ``truncated``
#: (FIND's reference descriptions have at most 234 tokens).
MAX_DESCRIPTION_TOKENS = 512
#: Tokens of the judge's context kept for the rest of a prompt (instructions and options).
_PROMPT_ROOM = 256
#: Characters per token of the limit: at most this many are tokenized (FIND averages <= 6.5) ...
_MAX_CHARS_PER_TOKEN = 8
#: ... and the cut without a tokenizer (a server judge; every FIND reference description fits).
_MIN_CHARS_PER_TOKEN = 2

_CUT_MARKERS = ("[DOMAIN]", "[CODE]")
_LABEL = re.compile(r"^\s*\[DESCRIPTION\]\s*:?\s*", re.IGNORECASE)
_ANSWER = re.compile(r"\[ANSWER\]\s*:\s*(\d+)(?!\d)")


def judge_category(category: str) -> str:
    """The config name of a judged category (``"entities"`` / ``"relations"`` accepted as aliases);
    ValueError for a category without unit tests."""
    instance("category", category, str, "a str")
    cat = _ALIASES.get(category, category)
    if cat not in (*JUDGE_CATEGORIES, RASP):  # rasp rows are judged too; the judge is not trained on them
        raise ValueError(
            f"category must be one of {(*JUDGE_CATEGORIES, RASP)} (unit tests exist only for these), got {category!r}"
        )
    return cat


def clean_description(description: str, *, keep_full_description: bool = False) -> str:
    """The description the judge sees: cut before ``[DOMAIN]`` or ``[CODE]``, without a leading
    ``[DESCRIPTION]:`` label (``keep_full_description=True``: only stripped)."""
    text = instance("description", description, str, "a str")
    if not keep_full_description:
        cut = min((i for i in (text.find(m) for m in _CUT_MARKERS) if i >= 0), default=len(text))
        text = _LABEL.sub("", text[:cut])
    return text.strip()


def unwrap_lm(lm: Any) -> Any:
    """The LM a wrapper (e.g. :class:`findbench.lm.CachedLM`) holds, or ``lm`` itself."""
    while hasattr(lm, "inner"):
        lm = lm.inner
    return lm


def description_token_limit(lm: Any = None) -> int:
    """Tokens of a description ``lm`` reads: :data:`MAX_DESCRIPTION_TOKENS`, or its context
    window (``model.config.max_position_embeddings`` of an in-process judge) less
    :data:`_PROMPT_ROOM` where that is smaller."""
    config = getattr(getattr(unwrap_lm(lm), "model", None), "config", None)
    window = getattr(config, "max_position_embeddings", None)
    fits = isinstance(window, int) and window > 0
    return max(1, min(MAX_DESCRIPTION_TOKENS, window - _PROMPT_ROOM)) if fits else MAX_DESCRIPTION_TOKENS


def bound_description(
    description: str, lm: Any = None, *, max_tokens: int | None = None, keep_full_description: bool = False
) -> tuple[str, bool]:
    """The description the judge ``lm`` reads (:func:`clean_description`) cut to ``max_tokens``
    (default :func:`description_token_limit`), and whether it was cut.

    Without a tokenizer (a server judge) the cut is at ``2 * max_tokens`` characters; lone
    surrogates become ``?``.
    """
    limit = description_token_limit(lm) if max_tokens is None else positive_int("max_tokens", max_tokens)
    text = clean_description(description, keep_full_description=keep_full_description)
    tokenizer = getattr(unwrap_lm(lm), "tokenizer", None)
    chars = limit * (_MAX_CHARS_PER_TOKEN if callable(tokenizer) else _MIN_CHARS_PER_TOKEN)
    cut = len(text) > chars
    text = text[:chars].encode("utf-8", "replace").decode("utf-8")
    if callable(tokenizer):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) > limit:
            text, cut = tokenizer.decode(ids[:limit]), True
    return text.strip(), cut


def _option_lines(unit_test: Mapping[str, Any], category: str) -> list[str]:
    inputs = unit_test["inputs"]
    if category == "neurons_entities":
        return [f"{k}. {str(w).strip()}" for k, w in enumerate(inputs, 1)]
    outputs = unit_test["outputs"]
    if category == "strings":  # whitespace matters for string functions: show exact, quoted
        return [f"{k}. {json.dumps(i, ensure_ascii=False)} -> {json.dumps(o, ensure_ascii=False)}"
                for k, (i, o) in enumerate(zip(inputs, outputs), 1)]
    return [f"{k}. {str(i).strip()} -> {str(o).strip()}" for k, (i, o) in enumerate(zip(inputs, outputs), 1)]


def check_unit_test(unit_test: Any, category: str | None, *, where: str = "unit_test") -> int:
    """Validate one triplet (``outputs`` not read for entities; with ``category=None``, checked where
    given) and return its number of options; ValueError/TypeError naming the field."""
    if category is not None:
        category = judge_category(category)
    instance(where, unit_test, Mapping, "a dict with inputs/outputs/correct")
    for key in ("inputs", "correct"):
        if key not in unit_test:
            raise ValueError(f"{where} is missing {key!r}")
    inputs = unit_test["inputs"]
    if isinstance(inputs, str) or not isinstance(inputs, Sequence) or len(inputs) != N_OPTIONS:
        raise ValueError(f"{where}['inputs'] must list exactly {N_OPTIONS} options, got {inputs!r:.100}")
    if not all(isinstance(x, str) for x in inputs):
        raise TypeError(f"{where}['inputs'] must hold strings, got {inputs!r:.100}")
    outputs = unit_test.get("outputs")
    if category != "neurons_entities" and (category is not None or outputs is not None):
        if (
            outputs is None
            or isinstance(outputs, str)
            or not isinstance(outputs, Sequence)
            or len(outputs) != len(inputs)
        ):
            raise ValueError(
                f"{where}['outputs'] must list one output per input for {category or 'these tests'}, "
                f"got {outputs!r:.100}"
            )
        if not all(isinstance(x, str) for x in outputs):
            raise TypeError(f"{where}['outputs'] must hold strings, got {outputs!r:.100}")
    correct = unit_test["correct"]
    if isinstance(correct, bool) or not isinstance(correct, numbers.Integral) or not 1 <= correct <= N_OPTIONS:
        raise ValueError(f"{where}['correct'] must be 1, 2 or 3, got {correct!r}")
    return len(inputs)


def normalize_unit_test(unit_test: Mapping[str, Any]) -> dict:
    """A plain ``{"inputs": list, "outputs": list | None, "correct": int}`` copy of a triplet (e.g. read
    back from Arrow); a non-integer ``correct`` is kept for :func:`check_unit_test` to name."""
    instance("unit_test", unit_test, Mapping, "a dict with inputs/outputs/correct")
    outputs = unit_test.get("outputs")
    out = {
        "inputs": [str(x) for x in unit_test.get("inputs") or []],
        "outputs": None if outputs is None else [str(x) for x in outputs],
    }
    if "correct" in unit_test:
        correct = unit_test["correct"]
        out["correct"] = (
            int(correct) if isinstance(correct, numbers.Integral) and not isinstance(correct, bool) else correct
        )
    return out


def check_unit_tests(unit_tests: Any, category: str, *, argument: str = "unit_tests") -> None:
    """Validate every function's list of triplets (raises naming the bad one)."""
    category = judge_category(category)
    instance(argument, unit_tests, Sequence, "a list (one list of triplets per function)", exclude=(str, Mapping))
    for i, tests in enumerate(unit_tests):
        if isinstance(tests, (str, Mapping)) or not isinstance(tests, Sequence) or not tests:
            raise ValueError(f"{argument}[{i}] must be a non-empty list of unit-test triplets")
        for k, ut in enumerate(tests):
            check_unit_test(ut, category, where=f"{argument}[{i}][{k}]")


def render_judge_prompt(
    description: str, unit_test: Mapping[str, Any], category: str, *, keep_full_description: bool = False
) -> list[dict]:
    """The judge's chat messages ``[system, user]`` for one unit test ``{"inputs", "outputs", "correct"}``."""
    category = judge_category(category)
    check_unit_test(unit_test, category)
    return _judge_prompt(
        clean_description(description, keep_full_description=keep_full_description), unit_test, category
    )


def _judge_prompt(desc: str, unit_test: Mapping[str, Any], category: str) -> list[dict]:
    intro, question = _INTRO[category]
    # everything but the options first: a function's prompts share a long prefix
    user = f"{intro}\n\nDescription: {desc}\n\n{question} Answer with its number, as {ANSWER_PREFIX}k\n\n" + "\n".join(
        _option_lines(unit_test, category)
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def render_judge_target(unit_test: Mapping[str, Any]) -> str:
    """The answer a perfect judge writes for ``unit_test`` (training target), e.g. ``"[ANSWER]: 2"``."""
    return f"{ANSWER_PREFIX}{int(unit_test['correct'])}"


def render_pmi_prompt(description: str, category: str, *, keep_full_description: bool = False) -> list[dict]:
    """The ``"pmi"`` judge's chat messages ``[system, user]`` for a description; the options are
    scored as the assistant's reply (:func:`render_pmi_option`)."""
    category = judge_category(category)
    desc = clean_description(description, keep_full_description=keep_full_description)
    return [
        {"role": "system", "content": PMI_SYSTEM_PROMPT},
        {"role": "user", "content": f"Description: {desc}\n\n{_PMI_ASK[category]}"},
    ]


def render_pmi_option(unit_test: Mapping[str, Any], k: int, category: str) -> str:
    """Option ``k`` (1-based) of a unit test as the ``"pmi"`` judge writes an example: the
    word (entities), ``"in" -> "out"`` with JSON quotes (strings) or ``in -> out`` (relations)."""
    category = judge_category(category)
    n = check_unit_test(unit_test, category)
    if integer("k", k, 1) > n:
        raise ValueError(f"k must be an option number in 1..{n}, got {k!r}")
    return _option_lines(unit_test, category)[k - 1].split(". ", 1)[1]


def judge_mode_of(judge: Any, default: str = "logprob", *, judge_model: str | None = None) -> str:
    """The scoring mode a trained judge folder (or registered name) records, else ``default``.

    A server URL's judge is its served model ``judge_model`` where that names a judge folder or
    ``embedded-evaluator`` (its LoRA adapter served as ``vllm serve … --lora-modules
    embedded-evaluator=<folder>``): the mode that judge records here."""
    if isinstance(judge, (str, os.PathLike)) and str(judge).startswith(("http://", "https://")):
        served = judge_model is not None and (judge_model == EMBEDDED_JUDGE_NAME or Path(judge_model).is_dir())
        judge = judge_model if served else None
    if not isinstance(judge, (str, os.PathLike)) or not str(judge):
        return default
    from findbench.models import REGISTRY, resolve

    path = Path(judge)
    if not path.is_dir() and str(judge) in REGISTRY:
        try:
            path = Path(resolve(str(judge)))
        except FileNotFoundError:
            return default
    marker = path / TRAINED_MARKER
    if marker.is_file():
        mode = json.loads(marker.read_text()).get("judge_mode", default)
        if mode in JUDGE_MODES:
            return mode
    return default


def parse_answer(text: str, n_options: int = 3) -> int | None:
    """The 1-based option of the one ``[ANSWER]: k`` in ``text`` (any spacing around the colon);
    None when there is none, several differing ones, or ``k`` outside ``1..n_options``."""
    instance("text", text, str, "a str")
    found = {int(m) for m in _ANSWER.findall(text)}
    if len(found) != 1:
        return None
    k = found.pop()
    return k if 1 <= k <= n_options else None


def _accepts(lm: Any, option: str) -> bool:
    """Whether ``lm.candidate_logprobs`` (of ``lm`` or the LM a wrapper holds) takes ``option``."""
    try:
        params = inspect.signature(unwrap_lm(lm).candidate_logprobs).parameters
    except (TypeError, ValueError, AttributeError):
        return False
    return option in params


def judge_unit_tests(
    lm: Any,
    descriptions: Sequence[str],
    unit_tests: Sequence[Sequence[Mapping[str, Any]]],
    category: str,
    *,
    mode: str = "logprob",
    keep_full_description: bool = False,
    shared_prefix: bool | None = None,
    max_new_tokens: int = 16,
    max_description_tokens: int | None = None,
    structured_outputs: str = "auto",
    progress: bool = False,
) -> dict[str, Any]:
    """Score descriptions (one per function) with FIND's unit tests (per function, its triplets).

    Args:
        mode: ``"logprob"``, ``"generate"`` or ``"pmi"`` (needs a :class:`findbench.lm.ScoringLM`).
        shared_prefix: reuse the KV cache of a function's shared prompt prefix (in-process
            backends); default: on where the backend supports it.
        max_description_tokens: default :func:`description_token_limit`; a longer description
            is cut (:func:`bound_description`) and listed in ``"truncated"``.
        structured_outputs: ``"generate"`` mode: ``auto`` (answers under :func:`answer_constraint`
            where the judge runs in process), ``on`` (also on a server) or ``off``.

    A description empty after cleaning is not shown to the judge (its prior over the options can
    sit well above chance): its function scores 0 and is listed in ``"empty"``.

    Returns ``{"unit_test_accuracy", "per_function", "choices": [[1-based option or None]],
    "decisions", "empty", "truncated", "judge", "structured_outputs"}``. Each decision is
    ``{"chosen", "correct", "right", "scores", "margin", "answer"}``: ``scores`` per option in
    nats (``logprob``: the option number's log-probability; ``pmi``: with minus without the
    description; None in ``generate`` mode), ``margin`` the correct option's score minus the best
    wrong one's (ties go to the lower number), ``answer`` the raw text in ``generate`` mode.
    """
    category = judge_category(category)
    _check_inputs(lm, descriptions, unit_tests, category, mode)
    structured = mode == "generate" and use_structured_outputs(lm, structured_outputs)
    limit = description_token_limit(lm) if max_description_tokens is None else max_description_tokens
    bounded = [
        bound_description(d, lm, max_tokens=limit, keep_full_description=keep_full_description) for d in descriptions
    ]
    truncated = [i for i, (_, cut) in enumerate(bounded) if cut]
    if truncated:
        log.warning(
            "judge: %d description(s) longer than %d tokens cut to that and flagged 'truncated' (indices %s)",
            len(truncated),
            limit,
            truncated[:20],
        )
    descriptions = [text for text, _ in bounded]  # cleaned: the prompts show them as they are
    empty = [i for i, d in enumerate(descriptions) if not d]
    if empty:
        log.info("judge: %d of %d descriptions are empty (scored 0, not judged)", len(empty), len(descriptions))
    kept = [i for i in range(len(descriptions)) if i not in set(empty)]

    flat = [(i, k) for i in kept for k in range(len(unit_tests[i]))]  # (function, test) of the functions judged
    # pmi renders its own prompts (one per description, not per test)
    convs = [] if mode == "pmi" else [_judge_prompt(descriptions[i], unit_tests[i][k], category) for i, k in flat]

    option_scores: list[list[float] | None] = [None] * len(flat)  # logprob / pmi: the judge's score per option
    answers: list[str | None] = [None] * len(flat)  # generate: the judge's raw answer
    if not flat:  # every description empty: no judge call
        pass
    elif mode == "pmi":
        option_scores = _pmi_scores(lm, [descriptions[i] for i in kept], [unit_tests[i] for i in kept], category,
                                    progress)
    elif mode == "logprob":
        use_shared = _accepts(lm, "shared_prefix") if shared_prefix is None else shared_prefix
        option_scores = _logprob_scores(lm, convs, use_shared, progress and category)
    else:  # the judge's greedy answers, under answer_constraint where structured
        grammar = {"constraint": [answer_constraint() for _ in convs]} if structured else {}
        answers = lm.generate(convs, max_new_tokens=max_new_tokens, temperature=0.0,
                              progress=progress and f"judge, {category}: answers", **grammar)
    # the option with the best score (ties to the lower number), else the one the answer names
    picks = [parse_answer(text, N_OPTIONS) if scores is None else max(range(N_OPTIONS), key=scores.__getitem__) + 1
             for scores, text in zip(option_scores, answers)]
    unparsed = sum(p is None for p in picks)
    if unparsed:
        log.info("judge: %d of %d answers did not parse as '%sk' (counted wrong)", unparsed, len(picks), ANSWER_PREFIX)

    decisions = [[_decision(ut, None, None, None) for ut in tests] for tests in unit_tests]
    for j, (i, k) in enumerate(flat):
        decisions[i][k] = _decision(unit_tests[i][k], picks[j], option_scores[j], answers[j])
    choices = [[d["chosen"] for d in tests] for tests in decisions]
    per_function = [float(sum(d["right"] for d in tests) / len(tests)) for tests in decisions]
    return {
        "unit_test_accuracy": float(sum(per_function) / len(per_function)),
        "per_function": per_function,
        "choices": choices,
        "decisions": decisions,
        "empty": empty,
        "truncated": truncated,
        "judge": getattr(lm, "name", type(lm).__name__),
        "structured_outputs": structured,
    }


def _check_inputs(lm: Any, descriptions: Any, unit_tests: Any, category: str, mode: str) -> None:
    """:func:`judge_unit_tests`' argument checks: TypeError / ValueError naming the argument."""
    _check_mode(lm, mode)
    instance("descriptions", descriptions, Sequence, "a list of strings", exclude=str)
    for i, d in enumerate(descriptions):
        instance(f"descriptions[{i}]", d, str, "a str")
    check_unit_tests(unit_tests, category)
    if not descriptions:
        raise ValueError("descriptions is empty: need at least one function to judge")
    if len(descriptions) != len(unit_tests):
        raise ValueError(f"descriptions ({len(descriptions)}) and unit_tests ({len(unit_tests)}) differ in length")


def _check_mode(lm: Any, mode: str) -> None:
    """``mode`` is a judge mode ``lm`` can score in (``pmi`` needs continuation log-probabilities)."""
    one_of("mode", mode, JUDGE_MODES)
    if mode == "pmi" and not callable(getattr(lm, "continuation_logprobs", None)):
        raise TypeError(
            "mode='pmi' needs an LM with continuation_logprobs (findbench.lm.ScoringLM); "
            f"{getattr(lm, 'name', type(lm).__name__)} has none"
        )


def _logprob_scores(
    lm: Any, convs: list[list[dict]], shared_prefix: bool, progress: str | bool
) -> list[list[float] | None]:
    """``logprob`` mode: each option number's log-probability after the answer prefix (every unit test has
    :data:`N_OPTIONS` options: :func:`check_unit_test`)."""
    rows = lm.candidate_logprobs(convs, [str(k) for k in range(1, N_OPTIONS + 1)], assistant_prefix=ANSWER_PREFIX,
                                 progress=progress and f"judge, {progress}: option log-probs",
                                 **({"shared_prefix": True} if shared_prefix else {}))
    return [[float(v) for v in row] for row in rows]


def _decision(
    unit_test: Mapping[str, Any], chosen: int | None, scores: Sequence[float] | None, answer: str | None
) -> dict[str, Any]:
    """One entry of ``"decisions"`` (see :func:`judge_unit_tests`)."""
    correct = int(unit_test["correct"])
    margin = (float(scores[correct - 1] - max(v for c, v in enumerate(scores, 1) if c != correct))
              if scores is not None and len(scores) > 1 else None)
    return {
        "chosen": chosen,
        "correct": correct,
        "right": chosen == correct,
        "scores": None if scores is None else [float(v) for v in scores],
        "margin": margin,
        "answer": answer,
    }


def _pmi_scores(
    lm: Any,
    descriptions: Sequence[str],
    unit_tests: Sequence[Sequence[Mapping[str, Any]]],
    category: str,
    progress: bool,
) -> list[list[float] | None]:
    """``"pmi"`` mode: the PMI of every option (:data:`N_OPTIONS` per test), tests in :func:`judge_unit_tests`'
    flat order."""
    convs: list[list[dict]] = []
    texts: list[str] = []
    for desc, tests in zip(descriptions, unit_tests):
        conv = render_pmi_prompt(desc, category, keep_full_description=True)  # cleaned by bound_description
        for ut in tests:  # consecutive identical prompts: the backend runs each once
            convs += [conv] * N_OPTIONS
            texts += [line.split(". ", 1)[1] for line in _option_lines(ut, category)]
    conditional = lm.continuation_logprobs(convs, texts,
                                           progress=progress and f"judge, {category}: log P(output | description)")
    distinct = sorted(set(texts))
    null = render_pmi_prompt(NULL_DESCRIPTION, category)
    prior = dict(zip(distinct, lm.continuation_logprobs([null] * len(distinct), distinct,
                                                        progress=progress and f"judge, {category}: log P(output)")))
    return [[float(conditional[a + k] - prior[texts[a + k]]) for k in range(N_OPTIONS)]
            for a in range(0, len(texts), N_OPTIONS)]


def load_judge(
    judge: Any, *, judge_model: str | None = None, cache: str | os.PathLike | None = None, batch_size: int = 16
) -> Any:
    """The judge LM for a spec (:func:`findbench.lm.load_lm`; ``judge_model`` names a server's model,
    ``batch_size`` applies in process); ``cache``: a sqlite file caching its answers."""
    from findbench.lm import load_lm

    if not isinstance(judge, (str, os.PathLike)):
        return load_lm(judge, cache=cache)
    spec = os.fspath(judge)
    return load_lm(spec, cache=cache, **({"model": judge_model} if spec.startswith(("http://", "https://"))
                                         else {"batch_size": batch_size}))
