"""iia: interchange-intervention accuracy (Geiger et al.; Huang et al. 2023). Sweeps of
interventions live in :mod:`findbench.neuron_explanations.interventions`; this module scores their
outputs with the torch-free :mod:`findbench.neuron_explanations.iia`."""

import datasets
import evaluate

from findbench import _checks, citations
from findbench.neuron_explanations.iia import iia_score

_DESCRIPTION = """\
Interchange-intervention accuracy: the fraction of interchange interventions (a base input run
with some neurons' values taken from a source input) whose prediction equals the output the
source input should produce. Predictions and references are next tokens, as token ids
(config "token_ids") or strings (config "default").
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`, or `int` for config "token_ids"): the intervened model's
        predictions (greedy next token).
    references (`list` of `str`, or `int` for config "token_ids"): the expected output of each
        intervention (the source input's answer).
Returns:
    iia (`float`): fraction of matching pairs, in [0, 1], higher means the patched neurons
        carry the concept; n_success (`int`), n_total (`int`).
    iia_ci (`list` of `float`): `[low, high]`, the 95% percentile bootstrap interval of `iia`
        over the pairs (10,000 resamples, seed 0; `findbench.stats`).
    n (`int`): number of pairs scored (the bootstrap's units; equals n_total).
Examples:
    >>> import evaluate, findbench
    >>> iia = evaluate.load(findbench.metric_path("iia"))
    >>> iia.compute(predictions=["7", "3", "5", "5"], references=["7", "4", "5", "2"])
    {'iia': 0.5, 'iia_ci': [0.0, 1.0], 'n': 4, 'n_success': 2, 'n_total': 4}
    >>> token_ids = evaluate.load(findbench.metric_path("iia"), "token_ids")
    >>> token_ids.compute(predictions=[22, 31, 40], references=[22, 17, 40])["n_success"]
    2
"""

_CITATION = citations.HUANG2023


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class IIA(evaluate.Metric):
    """Interchange-intervention accuracy."""

    def _info(self):
        kind = {"default": "string", "token_ids": "int64"}[
            _checks.one_of("config_name", self.config_name, ("default", "token_ids"))
        ]
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value(kind), "references": datasets.Value(kind)}),
            reference_urls=["https://arxiv.org/abs/2309.10312"],
        )

    def _compute(self, *, predictions: list, references: list) -> dict:
        return iia_score(predictions, references)
