"""FIND numeric-function score: NMSE of interpreter code against ground-truth code (sandboxed)."""

import datasets
import evaluate

from findbench import citations
from findbench.find import code_scoring
from findbench.sandbox import DEFAULT_CPU_SECONDS, DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT, SandboxLimits

_CITATION = citations.FIND

_DESCRIPTION = """\
Scores the Python code an interpreter wrote for a FIND numeric function. The interpretation (the
last top-level `def` of the interpreter's code) and the ground truth (`function(x)` in the dataset's
`code` column) are both run in findbench's sandbox (worker processes with CPU, wall-clock, memory,
file, process and network limits) on x = -127.5, -126.5, ..., 127.5 (256 points).
NMSE = sum((gt - pred)^2) / sum(gt^2) over the points where the ground truth is finite; an
interpretation succeeds when NMSE < threshold (0.1, as in FIND). Any failure (no function, an
exception, a timeout, a non-finite or non-numeric prediction) scores NMSE = inf.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): interpreter code, one program per function; its last top-level
        `def` is the interpretation.
    references (`list` of `str`): ground-truth code defining `function(x)` (FIND's `code` column;
        may draw seeded noise).
    threshold (`float`, optional, default 0.1): an item succeeds when NMSE < threshold.
    timeout (`float`, optional, default 10): wall-clock seconds per program.
    cpu_seconds (`float`, optional, default 5): CPU seconds per program.
    memory_mb (`int`, optional, default 1024): memory (address space) of a sandbox worker in MiB.
    workers (`int`, optional): sandbox worker processes (default min(4, CPUs)).
Returns:
    success_rate (`float`): share of items with NMSE < threshold, in [0, 1], higher is better.
    success_rate_ci (`list` of `float`): `[low, high]`, the 95% percentile bootstrap interval of
        `success_rate` over the items (10,000 resamples, seed 0; `findbench.stats`).
    n (`int`): number of items scored (the bootstrap's units).
    mean_nmse (`float`): mean NMSE over the items with a finite NMSE (NaN if none), lower is better.
    n_failed (`int`): items whose NMSE is inf (the program failed).
    isolation (`str`): the sandbox layers the programs ran under (e.g. ``landlock+netns+uid``).
    nmse (`list` of `float`): NMSE per item (inf on failure).
    errors (`list` of `str` or `None`): per item, None where NMSE is finite, else why it is inf in one
        short line: the sandbox's reason (``SyntaxError: invalid syntax (line 3)``, ``timeout: ...``)
        or the first grid point the code raised or gave no finite number on (``... (at x = 0.5)``);
        never a traceback, findbench's own paths shown as ``<findbench>``.
Examples:
    >>> import evaluate, findbench
    >>> find_nmse = evaluate.load(findbench.metric_path("find_nmse"))
    >>> gt = "def function(x):\\n    return 2 * x + 1\\n"
    >>> guess = "def helper(x):\\n    return x\\ndef f(x):\\n    return 2 * x\\n"
    >>> out = find_nmse.compute(predictions=[gt, guess], references=[gt, gt])
    >>> out["success_rate"], out["nmse"][0], round(out["nmse"][1], 7)
    (1.0, 0.0, 4.58e-05)
    >>> out["success_rate_ci"], out["n"], out["errors"]
    ([1.0, 1.0], 2, [None, None])
    >>> find_nmse.compute(predictions=["def f(x):\\n    return 1 / 0\\n"], references=[gt])["errors"]
    ['ZeroDivisionError: division by zero (at x = -127.5)']
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class FindNmse(evaluate.Metric):
    """NMSE of interpreter code on FIND's 256-point grid, run in findbench's sandbox."""

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
        threshold: float = 0.1,
        timeout: float = DEFAULT_TIMEOUT,
        cpu_seconds: float = DEFAULT_CPU_SECONDS,
        memory_mb: int = DEFAULT_MEMORY_MB,
        workers: int | None = None,
    ) -> dict:
        return code_scoring.score_nmse(predictions, references, threshold=threshold, limits=SandboxLimits(
            timeout=timeout, cpu_seconds=cpu_seconds, memory_mb=memory_mb, workers=workers))
