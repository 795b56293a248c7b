"""FIND string-function score: exact output match of interpreter code on test inputs (sandboxed)."""

import datasets
import evaluate

from findbench import citations
from findbench.find import code_scoring
from findbench.sandbox import DEFAULT_CPU_SECONDS, DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT, SandboxLimits

_CITATION = citations.FIND

_DESCRIPTION = """\
Scores the Python code an interpreter wrote for a FIND string function. The interpretation (the last
top-level `def` of the interpreter's code) and the ground truth (`function(x)` in the dataset's `code`
column) both run in findbench's sandbox on the function's test inputs (passed as data, never
formatted into code). On each input the interpretation is right when its output equals the ground
truth's; an exception fails only that input. The score of a function is its share of right inputs;
`exact_match` is the mean over functions.

For `rasp` rows (white-box FIND: compiled transformers), pass `function_ids`: the interpretation
`function(tokens)` is then scored against the compiled model itself on 100 held-out in-domain token
lists: `exact_match` counts whole output sequences, `position_accuracy` single positions (BOS
excluded; numerical outputs within the domain's tolerance).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): interpreter code, one program per function; its last top-level
        `def` is the interpretation.
    references (`list` of `str`): ground-truth code defining `function(x)`.
    test_inputs (`list` of `list` of `str`): the inputs of each function (FIND: 10 strings each).
    timeout (`float`, optional, default 10): wall-clock seconds per program.
    cpu_seconds (`float`, optional, default 5): CPU seconds per program.
    memory_mb (`int`, optional, default 1024): memory (address space) of a sandbox worker in MiB.
    workers (`int`, optional): sandbox worker processes (default min(4, CPUs)).
    function_ids (`list` of `str`, optional): `rasp/fNNNNN` ids; scores against the compiled models
        (then `test_inputs` is not used and `references` may be the rows' `code`).
Returns:
    exact_match (`float`): mean over functions of the per-input accuracy, in [0, 1], higher is better.
    exact_match_ci (`list` of `float`): `[low, high]`, the 95% percentile bootstrap interval of
        `exact_match` over the functions (10,000 resamples, seed 0; `findbench.stats`).
    n (`int`): number of functions scored (the bootstrap's units).
    per_function (`list` of `float`): per-input accuracy of each function, in [0, 1].
    errors (`list` of `str` or `None`): per function, None when the interpretation ran on every
        input, else one short line: the sandbox's reason the program did not run
        (``SyntaxError: invalid syntax (line 3)``, ``timeout: ...``), or the first exception it raised
        and on how many inputs; never a traceback, findbench's own paths shown as ``<findbench>``.
    isolation (`str`): the sandbox layers the programs ran under (e.g. ``landlock+netns+uid``).
    position_accuracy, position_accuracy_ci, per_function_positions: rasp only, per position.
Examples:
    >>> import evaluate, findbench
    >>> find_exact_match = evaluate.load(findbench.metric_path("find_exact_match"))
    >>> gt = "def function(x):\\n    return x.upper()\\n"
    >>> guess = "def f(x):\\n    return x.upper() if len(x) < 4 else x\\n"
    >>> out = find_exact_match.compute(predictions=[gt, guess], references=[gt, gt],
    ...                                test_inputs=[["ab", "it's"], ["ab", "it's"]])
    >>> out["exact_match"], out["per_function"], out["exact_match_ci"], out["n"], out["errors"]
    (0.75, [1.0, 0.5], [0.5, 1.0], 2, [None, None])
    >>> find_exact_match.compute(predictions=["def f(x):\\n    return x[2]\\n"], references=[gt],
    ...                          test_inputs=[["ab", "it's"]])["errors"]
    ['IndexError: string index out of range (on test input 0; 1 of 2 inputs raised)']
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class FindExactMatch(evaluate.Metric):
    """Exact output match of interpreter code on FIND test inputs, run in findbench's sandbox."""

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
            reference_urls=["https://github.com/multimodal-interpretability/FIND", "https://arxiv.org/abs/2309.03886"],
        )

    def _compute(
        self,
        *,
        predictions: list[str],
        references: list[str],
        test_inputs: list[list[str]] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        cpu_seconds: float = DEFAULT_CPU_SECONDS,
        memory_mb: int = DEFAULT_MEMORY_MB,
        workers: int | None = None,
        function_ids: list[str] | None = None,
    ) -> dict:
        limits = SandboxLimits(timeout=timeout, cpu_seconds=cpu_seconds, memory_mb=memory_mb, workers=workers)
        if function_ids is not None:  # (evaluate has checked that predictions and references are as many)
            return code_scoring.score_rasp(predictions, function_ids, limits=limits)
        return code_scoring.score_exact_match(predictions, references, test_inputs, limits=limits)
