"""FIND unit-test accuracy: an LM judge checks whether a description picks out its function."""

import logging

import datasets
import evaluate

from findbench import _checks, citations
from findbench import judge as _judge
from findbench.stats import bootstrap_ci

_CITATION = citations.FIND

log = logging.getLogger(__name__)

#: The judge without `judge=`: the shipped trained judge, scored in the mode it records ("pmi").
DEFAULT_JUDGE = "embedded-evaluator"

_DESCRIPTION = """\
FIND's unit-test score for descriptions of string functions and synthetic neurons. Each function
has 10 unit tests; a test shows three examples (entities: words; strings and relations:
input -> output pairs) of which exactly one comes from the function. A judge LM reads the
description and picks the matching example ("[ANSWER]: k"). A function scores the fraction of its
tests picked right; `unit_test_accuracy` is the mean over functions (chance: 1/3). The default
judge is `embedded-evaluator` (SmolLM2-135M-Instruct fine-tuned as a judge by `findbench
train-judge`, shipped with findbench, offline) in the mode it was trained for, "pmi": each example
is scored on its own, as how much more likely the judge is to write it given the description
than given none, and the highest wins. `judge=` names another model, a local folder, `embedded`
(the untuned model), or an OpenAI-compatible server URL (e.g. vLLM serving the paper's Vicuna
judge); a trained judge folder is scored in the mode it records, any other judge by default in
"logprob" mode (the most probable of the option tokens "1", "2", "3" after the assistant prefix
"[ANSWER]: ", one forward pass per test); `mode="generate"` parses a written answer strictly.
The judge reads at most `findbench.judge.MAX_DESCRIPTION_TOKENS` (512) tokens of a description;
a longer one is cut to that and flagged in `truncated`. What each judge measures, with its
gaming probes: the metric card and the judge cards in `findbench/data/judge/cards/`.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): one description per function. Text from `[DOMAIN]` or `[CODE]`
        on is cut, and a leading `[DESCRIPTION]:` label dropped, unless `keep_full_description=True`.
        A description left empty (no answer) scores 0 and is never shown to the judge. One longer
        than 512 tokens (fewer where the judge's context is smaller) is cut to that and flagged in
        `truncated`; characters UTF-8 cannot encode (lone surrogates) become "?".
    references (`list` of `list` of `dict`): each function's unit tests, as in the dataset's
        `unit_tests` column: `{"inputs": [3 str], "outputs": [3 str] or None, "correct": 1, 2 or 3}`;
        anything else is refused naming it, e.g. `references[3][2]['correct']`.
    category (`str`): `strings`, `neurons_entities` or `neurons_relations`.
    judge (`str` or LM, optional, default "embedded-evaluator"): `embedded-evaluator` (the shipped
        trained judge), `embedded` (untuned), a local folder or Hub id (in-process transformers), an
        OpenAI-compatible base URL such as "http://127.0.0.1:8000/v1", or a `findbench.lm` LM instance.
    judge_model (`str`, optional): the served model name, for URL judges.
    mode (`str`, optional): "logprob", "generate" or "pmi"; default: the mode a trained judge
        records ("pmi" for the default `embedded-evaluator`), else "logprob".
    keep_full_description (`bool`, optional, default False): show the description uncut.
    judge_cache (`str`, optional): sqlite file caching the judge's answers (resumable runs).
    batch_size (`int`, optional, default 16): prompts per forward pass (in-process judges).
Returns:
    unit_test_accuracy (`float`): mean over functions of the fraction of unit tests judged right,
        in [0, 1], higher is better; 1/3 is chance.
    unit_test_accuracy_ci (`list` of `float`): `[low, high]`, the 95% percentile bootstrap interval
        of `unit_test_accuracy` over the functions (10,000 resamples, seed 0; `findbench.stats`).
    n (`int`): number of functions scored (the bootstrap's units).
    per_function (`list` of `float`): each function's fraction, in [0, 1].
    truncated (`list` of `bool`): per function, whether its description was cut to the limit.
    judge (`str`): the judge's identity.
Examples:
    A stand-in judge that always prefers option 2 (any `findbench.lm` LM works the same way;
    real runs leave the default `embedded-evaluator` or name a model folder or a server URL):

    >>> import evaluate, findbench
    >>> class PickTwo:
    ...     name = "pick-two"
    ...     def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
    ...         return ["[ANSWER]: 2"] * len(conversations)
    ...     def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
    ...         return [[0.0 if c == "2" else -5.0 for c in candidates] for _ in conversations]
    >>> find_unit_test = evaluate.load(findbench.metric_path("find_unit_test"))
    >>> tests = [{"inputs": ["cat", "NBA", "tulip"], "outputs": None, "correct": 2},
    ...          {"inputs": ["NHL", "rose", "dog"], "outputs": None, "correct": 1}]
    >>> find_unit_test.compute(predictions=["sports leagues"], references=[tests],
    ...                        category="neurons_entities", judge=PickTwo())
    {'unit_test_accuracy': 0.5, 'unit_test_accuracy_ci': [0.5, 0.5], 'n': 1, 'per_function': [0.5], \
'truncated': [False], 'judge': 'pick-two'}
    >>> find_unit_test.compute(predictions=["sports leagues"], references=[tests],
    ...                        category="neurons_entities", judge=PickTwo(), mode="generate")["per_function"]
    [0.5]
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class FindUnitTest(evaluate.Metric):
    """FIND unit-test accuracy of descriptions, judged by an LM (findbench.judge)."""

    def _info(self):
        unit_test = {
            "inputs": datasets.List(datasets.Value("string")),
            "outputs": datasets.List(datasets.Value("string")),
            "correct": datasets.Value("int32"),
        }
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.List(unit_test)}
            ),
            reference_urls=["https://github.com/multimodal-interpretability/FIND", "https://arxiv.org/abs/2309.03886"],
        )

    # The checks that Arrow would hide run before evaluate writes the batch: a lone surrogate
    # fails Arrow's UTF-8 encoding (for the whole batch), and Arrow casts "2" to 2 and a missing
    # `correct` to None. Anything that is not a list is left to evaluate's own checks.
    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Add a batch of descriptions and their unit tests (checked here, before Arrow)."""
        if isinstance(predictions, list):
            predictions = [_encodable(p, f"predictions[{i}]") for i, p in enumerate(predictions)]
        if isinstance(references, list):
            for i, tests in enumerate(references):
                for k, unit_test in enumerate(tests if isinstance(tests, list) else []):
                    _judge.check_unit_test(unit_test, None, where=f"references[{i}][{k}]")
        return super().add_batch(predictions=predictions, references=references, **kwargs)

    def add(self, *, prediction=None, reference=None, **kwargs):
        """Add one description and its unit tests (checked here, before Arrow)."""
        prediction = _encodable(prediction, "prediction")
        for k, unit_test in enumerate(reference if isinstance(reference, list) else []):
            _judge.check_unit_test(unit_test, None, where=f"reference[{k}]")
        return super().add(prediction=prediction, reference=reference, **kwargs)

    def _judge_lm(self, judge, judge_model, judge_cache, batch_size):
        """The judge LM, loaded once per module instance and judge spec."""
        if not isinstance(judge, str):
            return _judge.load_judge(judge, cache=judge_cache)
        key = (judge, judge_model, judge_cache, batch_size)
        judges = self.__dict__.setdefault("_judges", {})
        if key not in judges:
            judges[key] = _judge.load_judge(judge, judge_model=judge_model, cache=judge_cache, batch_size=batch_size)
        return judges[key]

    def _compute(
        self,
        *,
        predictions: list[str],
        references: list[list[dict]],
        category: str | None = None,
        judge=DEFAULT_JUDGE,
        judge_model: str | None = None,
        mode: str | None = None,
        keep_full_description: bool = False,
        judge_cache: str | None = None,
        batch_size: int = 16,
    ) -> dict:
        # evaluate has checked the columns against `features` (types, equal lengths) and read
        # them back from Arrow; the checks below name the bad field before any judge loads.
        if category is None:
            raise ValueError("category is required: strings, neurons_entities or neurons_relations")
        for i, p in enumerate(predictions):
            _checks.instance(f"predictions[{i}]", p, str, "a description string")
        _judge.check_unit_tests(references, category, argument="references")
        mode = _judge.judge_mode_of(judge) if mode is None else _checks.one_of("mode", mode, _judge.JUDGE_MODES)
        # Arrow gives back tuples/None where the caller wrote lists: one plain copy per triplet.
        references = [[_judge.normalize_unit_test(t) for t in tests] for tests in references]
        out = _judge.judge_unit_tests(self._judge_lm(judge, judge_model, judge_cache, batch_size), predictions,
                                      references, category, mode=mode, keep_full_description=keep_full_description)
        truncated = set(out["truncated"])
        return {
            "unit_test_accuracy": float(out["unit_test_accuracy"]),
            "unit_test_accuracy_ci": list(bootstrap_ci(out["per_function"])),
            "n": len(out["per_function"]),
            "per_function": [float(x) for x in out["per_function"]],
            "truncated": [i in truncated for i in range(len(predictions))],
            "judge": out["judge"],
        }


def _encodable(text, where):
    """``text`` with the characters UTF-8 cannot encode (lone surrogates) replaced by "?"."""
    if not isinstance(text, str):
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        log.warning("%s holds characters UTF-8 cannot encode (lone surrogates); replaced with '?'", where)
        return text.encode("utf-8", "replace").decode("utf-8")
    return text
