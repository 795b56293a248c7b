"""explanation_f1: precision, recall and F1 of natural-language explanations of neurons
(Huang et al. 2023). The algorithm lives in :mod:`findbench.neuron_explanations.f1`."""

import datasets
import evaluate

from findbench import _checks, citations
from findbench.neuron_explanations.f1 import explanation_f1, probe_scores

_DESCRIPTION = """\
Scores an explanation of a neuron on an observational test set. Each item is a text span with
(a) whether the span is in the explanation's denotation (the explanation predicts the neuron
fires) and (b) the neuron's per-token activations on the span. The neuron fires on an item when
the span's maximum activation exceeds `threshold` (default 0). Precision = fraction of
in-denotation items on which the neuron fires; recall = fraction of firing items that are in
the denotation; F1 = their harmonic mean. Scores are computed per neuron and macro-averaged,
and also pooled over all items.

Config "probe": references are per-item activation vectors of N neurons; a logistic-regression
probe trained on a stratified train split predicts denotation membership, and its positive
predictions on the held-out split play the role of "fires".
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `bool`): per item, whether the span is in the explanation's denotation.
    references (`list` of `list` of `float`): per item, the span's per-token activations
        (config "probe": the item's activations of N neurons).
    neurons (`list` of `str`, optional): per item, the neuron id ("layer:index"); default: one neuron.
    threshold (`float`, default 0.0): the neuron fires when the span's max activation exceeds it.
    test_size (`float`, default 0.3), seed (`int`, default 0): config "probe" only.
Returns:
    precision (`float`), recall (`float`), f1 (`float`): macro averages over neurons, in [0, 1].
    precision_ci, recall_ci, f1_ci (`list` of `float`): `[low, high]`, 95% percentile bootstrap
        intervals of the macro scores over neurons (10,000 resamples, seed 0; `findbench.stats`);
        a single neuron gives a zero-width interval.
    n (`int`): number of neurons (the bootstrap's units; equals n_neurons).
    pooled_precision, pooled_recall, pooled_f1 (`float`): from counts pooled over all items.
    n_neurons, n_items (`int`); per_neuron (`list` of `dict`: neuron, precision, recall, f1,
    n_items, n_in, n_fire, tp).
    Config "probe": precision, recall, f1, accuracy, their intervals precision_ci, recall_ci,
    f1_ci, accuracy_ci over the held-out items (the trained probe held fixed), n (= n_test),
    n_train, n_test.
Examples:
    >>> import evaluate, findbench
    >>> f1 = evaluate.load(findbench.metric_path("explanation_f1"))
    >>> out = f1.compute(predictions=[True, True, False, False],
    ...                  references=[[0.5, -0.1], [-0.2], [0.9], [-0.3, -0.1]],
    ...                  neurons=["3:7"] * 4)
    >>> round(out["precision"], 3), round(out["recall"], 3), round(out["f1"], 3)
    (0.5, 0.5, 0.5)
    >>> out["f1_ci"], out["n"]
    ([0.5, 0.5], 1)
"""

_CITATION = citations.HUANG2023


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ExplanationF1(evaluate.Metric):
    """Precision / recall / F1 of neuron explanations on observational test sets."""

    def _info(self):
        _checks.one_of("config_name", self.config_name, ("default", "probe"))
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("bool"), "references": datasets.Sequence(datasets.Value("float64"))}
            ),
            reference_urls=["https://arxiv.org/abs/2309.10312", "https://github.com/explanare/eval-neuron-explanation"],
        )

    def _compute(
        self,
        *,
        predictions: list[bool],
        references: list[list[float]],
        neurons: list[str] | None = None,
        threshold: float = 0.0,
        test_size: float = 0.3,
        seed: int = 0,
    ) -> dict:
        if self.config_name == "probe":
            return probe_scores(references, predictions, test_size=test_size, seed=seed)
        out = explanation_f1(predictions, references, neurons, threshold=threshold)
        return {**out, "per_neuron": [{"neuron": k, **v} for k, v in out["per_neuron"].items()]}
