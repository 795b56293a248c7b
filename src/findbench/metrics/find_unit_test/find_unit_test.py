"""FIND unit-test accuracy: an LM judge checks whether a description picks out its function."""

import datasets
import evaluate

from findbench import citations
from findbench import judge as _judge

_CITATION = citations.FIND

_DESCRIPTION = """\
FIND's unit-test score for descriptions of string functions and synthetic neurons. Each function
has 10 unit tests; a test shows three examples (entities: words; strings and relations:
input -> output pairs) of which exactly one comes from the function. A judge LM reads the
description and picks the matching example ("[ANSWER]: k"). A function scores the fraction of its
tests picked right; `unit_test_accuracy` is the mean over functions (chance: 1/3). By default the
judge's choice is the most probable of the option tokens "1", "2", "3" after the assistant prefix
"[ANSWER]: " (one forward pass per test); `mode="generate"` parses a written answer strictly;
`mode="pmi"` scores each example on its own, as how much more likely the judge is to write it
given the description than given none, and picks the highest. A trained judge folder records
the mode it was trained for (`embedded-evaluator`: "pmi") and is scored in that mode by default.
The judge is `embedded` (SmolLM2-135M-Instruct, offline) unless `judge=` names another model, a
local folder, `embedded-evaluator` (the embedded model fine-tuned as a judge by
`findbench train-evaluator`), or an OpenAI-compatible server URL (e.g. vLLM serving the paper's
Vicuna judge).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): one description per function. Text from `[DOMAIN]` or `[CODE]`
        on is cut, and a leading `[DESCRIPTION]:` label dropped, unless `keep_full_description=True`.
    references (`list` of `list` of `dict`): each function's unit tests, as in the dataset's
        `unit_tests` column: `{"inputs": [3 str], "outputs": [3 str] or None, "correct": int (1-based)}`.
    category (`str`): `strings`, `neurons_entities` or `neurons_relations`.
    judge (`str` or LM, optional, default "embedded"): `embedded`, a local folder or Hub id
        (in-process transformers), an OpenAI-compatible base URL such as "http://127.0.0.1:8000/v1",
        or a `findbench.lm` LM instance.
    judge_model (`str`, optional): the served model name, for URL judges.
    mode (`str`, optional): "logprob", "generate" or "pmi"; default: the mode a trained judge
        folder records, else "logprob".
    keep_full_description (`bool`, optional, default False): show the description uncut.
    judge_cache (`str`, optional): sqlite file caching the judge's answers (resumable runs).
    batch_size (`int`, optional, default 16): prompts per forward pass (in-process judges).
Returns:
    unit_test_accuracy (`float`): mean over functions of the fraction of unit tests judged right,
        in [0, 1], higher is better; 1/3 is chance.
    per_function (`list` of `float`): each function's fraction, in [0, 1].
    judge (`str`): the judge's identity.
Examples:
    >>> import evaluate
    >>> find_unit_test = evaluate.load("metrics/find_unit_test")
    >>> tests = [{"inputs": ["cat", "NBA", "tulip"], "outputs": None, "correct": 2}]
    >>> out = find_unit_test.compute(predictions=["sports leagues"], references=[tests],
    ...                              category="neurons_entities")  # doctest: +SKIP
    >>> sorted(out)  # doctest: +SKIP
    ['judge', 'per_function', 'unit_test_accuracy']
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

    def compute(self, *, predictions=None, references=None, **kwargs):
        """Validate the inputs (errors name the field), then compute as usual."""
        if predictions is not None or references is not None:  # else: data came from add_batch
            if not isinstance(predictions, (list, tuple)) or not all(isinstance(p, str) for p in predictions):
                raise TypeError("predictions must be a list of description strings")
            if "category" not in kwargs:
                raise ValueError("category is required: strings, neurons_entities or neurons_relations")
            _judge.check_unit_tests(references, kwargs["category"], argument="references")
            if len(predictions) != len(references):
                raise ValueError(f"predictions ({len(predictions)}) and references ({len(references)}) differ in length")
            references = [[_judge.normalize_unit_test(t) for t in tests] for tests in references]
        return super().compute(predictions=predictions, references=references, **kwargs)

    def _judge_lm(self, judge, judge_model, judge_cache, batch_size):
        """The judge LM, loaded once per module instance and judge spec."""
        from findbench.lm import load_lm

        if not isinstance(judge, str):
            return load_lm(judge, cache=judge_cache)
        key = (judge, judge_model, judge_cache, batch_size)
        judges = self.__dict__.setdefault("_judges", {})
        if key not in judges:
            kwargs = {"model": judge_model} if judge.startswith(("http://", "https://")) else {"batch_size": batch_size}
            judges[key] = load_lm(judge, cache=judge_cache, **kwargs)
        return judges[key]

    def _compute(
        self,
        predictions,
        references,
        category=None,
        judge="embedded",
        judge_model=None,
        mode=None,
        keep_full_description=False,
        judge_cache=None,
        batch_size=16,
    ):
        if mode is None:
            mode = _judge.judge_mode_of(judge)
        lm = self._judge_lm(judge, judge_model, judge_cache, batch_size)
        references = [[_judge.normalize_unit_test(t) for t in tests] for tests in references]
        out = _judge.judge_unit_tests(
            lm, predictions, references, category, mode=mode, keep_full_description=keep_full_description
        )
        return {
            "unit_test_accuracy": float(out["unit_test_accuracy"]),
            "per_function": [float(x) for x in out["per_function"]],
            "judge": out["judge"],
        }
