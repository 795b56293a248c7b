"""White-box FIND (`rasp` config): a component map of a compiled transformer against its ground truth."""

import datasets
import evaluate

from findbench import citations
from findbench.find.rasp import circuit
from findbench.sandbox import DEFAULT_CPU_SECONDS, DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT, SandboxLimits

_CITATION = citations.FIND

_DESCRIPTION = """\
Scores an interpreter's map of a compiled RASP transformer (findbench's `rasp` config) against the
row's `components`: which attention heads and MLP unit groups matter, what each one does (its role:
map, sequence_map, linear_map, mover, averager, counter, inactive), what it reads, and optionally
code computing its variable (run in findbench's sandbox against the row's `variable_values`).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): per function, JSON text of a list of components, each
        `{"hook", "head"}` or `{"hook", "units"}` with `role`, and optionally `reads`, `score`, `code`.
    references (`list` of `str`): per function, JSON text of the row's `components`.
    test_inputs (`list` of `list` of `str`, optional): the rows' `test_inputs` (for components' code).
    variable_values (`list` of `str`, optional): the rows' `variable_values` (for components' code).
    timeout (`float`, optional, default 10): wall-clock seconds per component's program.
    cpu_seconds (`float`, optional, default 5): CPU seconds per program.
    memory_mb (`int`, optional, default 1024): memory of a sandbox worker in MiB.
    workers (`int`, optional): sandbox worker processes (default min(4, CPUs)).
Returns:
    role_accuracy, role_f1, node_precision, node_recall, node_auroc, reads_f1,
    component_code_accuracy (`float` in [0, 1], higher is better; NaN where undefined), each with
    `<name>_ci` (95% bootstrap interval over functions) and `<name>_n` (functions where defined);
    per_function (`list` of `dict`).
Examples:
    >>> import evaluate, findbench, json
    >>> find_circuit = evaluate.load(findbench.metric_path("find_circuit"))
    >>> truth = [{"hook": "blocks.0.attn.hook_result", "layer": 0, "head": 0, "units": [], "variable": "v2",
    ...           "op": "aggregate", "reads": ["indices", "v1"], "role": "averager"}]
    >>> guess = [{"hook": "blocks.0.attn.hook_result", "head": 0, "role": "mover"}]
    >>> out = find_circuit.compute(predictions=[json.dumps(guess)], references=[json.dumps(truth)])
    >>> out["role_accuracy"], out["node_recall"], out["node_precision"]
    (0.0, 1.0, 1.0)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class FindCircuit(evaluate.Metric):
    """Component maps of compiled transformers against their ground truth."""

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
            reference_urls=["https://github.com/google-deepmind/tracr"],
        )

    def _compute(
        self,
        *,
        predictions: list[str],
        references: list[str],
        test_inputs: list[list[str]] | None = None,
        variable_values: list[str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        cpu_seconds: float = DEFAULT_CPU_SECONDS,
        memory_mb: int = DEFAULT_MEMORY_MB,
        workers: int | None = None,
    ) -> dict:
        preds = [circuit.parse_json_list(p, f"predictions[{i}]") for i, p in enumerate(predictions)]
        refs = [circuit.parse_json_list(r, f"references[{i}]") for i, r in enumerate(references)]
        return circuit.score_circuit(preds, refs, test_inputs=test_inputs, variable_values=variable_values,
                                     limits=SandboxLimits(timeout=timeout, cpu_seconds=cpu_seconds,
                                                          memory_mb=memory_mb, workers=workers))
