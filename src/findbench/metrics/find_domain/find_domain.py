"""FIND domain score: IoU of the interval an interpreter names in [DOMAIN] with a numeric function's corrupted
interval."""

import datasets
import evaluate

from findbench import citations
from findbench.find import domain as _domain

_CITATION = citations.FIND

_DESCRIPTION = """\
Scores the `[DOMAIN]` part of interpretations of FIND numeric functions, which FIND asks for but
does not score. A corrupted numeric function serves noise instead of its values below a boundary,
above it, or inside an interval; the others (clean, noisy, MLP) have no corrupted interval. The
metric reads the numeric interval(s) the interpreter named ("(2, 7)", "between -3.5 and 10",
"x < 4", "[-inf, -2]", ...; "no unexpected behaviour" reads as none) and compares their union
with the true corrupted interval by intersection over union of lengths, both clipped to the
function's domain. Saying "none" for a function without corruption scores 1; naming an interval
where there is none, or none where there is one, scores 0. An answer from which no interval (and
no "none") can be read is unparseable and scores 0. `domain_iou` is the mean over functions.
Relation neurons with an exception need a judge instead, on the unit tests
`findbench.find.domain.domain_unit_tests` picks.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): one interpretation per function: the whole answer (its
        `[DOMAIN]` section is used, up to `[CODE]`) or the domain answer alone.
    references (`list` of `dict`): per function, the dataset row's `domain_low`, `domain_high`
        (floats), `corruption_type` ("below" / "above" / "inside" or None) and `corruption_params`
        (JSON text with `boundary`, or None): `findbench.find.domain.domain_reference(row)`, or
        `ds.select_columns(["domain_low", "domain_high", "corruption_type", "corruption_params"])`.
Returns:
    domain_iou (`float`): mean IoU over functions, in [0, 1], higher is better (unparseable: 0).
    domain_iou_ci (`list` of `float`): `[low, high]`, the 95% percentile bootstrap interval of
        `domain_iou` over the functions (10,000 resamples, seed 0; `findbench.stats`).
    n (`int`): number of functions scored (the bootstrap's units).
    parse_rate (`float`): share of answers from which an interval, or "none", could be read.
    iou (`list` of `float`): IoU per function, in [0, 1].
    status (`list` of `str`): "ok" or "unparseable" per function.
Examples:
    >>> import evaluate, findbench
    >>> find_domain = evaluate.load(findbench.metric_path("find_domain"))
    >>> refs = [
    ...     {"domain_low": -100.0, "domain_high": 100.0, "corruption_type": "inside",
    ...      "corruption_params": '{"boundary": [2.0, 7.0], "mean": 0.5, "std": 0.1}'},
    ...     {"domain_low": -100.0, "domain_high": 100.0, "corruption_type": "below",
    ...      "corruption_params": '{"boundary": [-50.0], "mean": 0.5, "std": 0.1}'},
    ...     {"domain_low": -100.0, "domain_high": 100.0, "corruption_type": None, "corruption_params": None},
    ...     {"domain_low": -100.0, "domain_high": 100.0, "corruption_type": None, "corruption_params": None},
    ... ]
    >>> preds = [
    ...     "[DESCRIPTION]: f(x) = 2x. [DOMAIN]: The function is corrupted on the interval (2, 7). [CODE]: ...",
    ...     "[DOMAIN]: all real numbers; for x < -40 the output is random",
    ...     "[DOMAIN]: No unexpected behaviour.",
    ...     "[DOMAIN]: hard to tell",
    ... ]
    >>> out = find_domain.compute(predictions=preds, references=refs)
    >>> round(out["domain_iou"], 4), out["parse_rate"], out["n"]
    (0.7083, 0.75, 4)
    >>> [round(v, 4) for v in out["domain_iou_ci"]]
    [0.25, 1.0]
    >>> [round(v, 4) for v in out["iou"]], out["status"]
    ([1.0, 0.8333, 1.0, 0.0], ['ok', 'ok', 'ok', 'unparseable'])
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class FindDomain(evaluate.Metric):
    """IoU of the interval named in an interpretation's [DOMAIN] with a FIND numeric function's corrupted interval."""

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Value("string"),
                    "references": {
                        "domain_low": datasets.Value("float64"),
                        "domain_high": datasets.Value("float64"),
                        "corruption_type": datasets.Value("large_string"),
                        "corruption_params": datasets.Value("large_string"),
                    },
                }
            ),
            reference_urls=["https://github.com/multimodal-interpretability/FIND", "https://arxiv.org/abs/2309.03886"],
        )

    def _compute(self, *, predictions: list[str], references: list[dict]) -> dict:
        out = _domain.score_domain(predictions, references, argument="references")
        return {
            "domain_iou": float(out["domain_iou"]),
            "domain_iou_ci": [float(v) for v in out["domain_iou_ci"]],
            "n": int(out["n"]),
            "parse_rate": float(out["parse_rate"]),
            "iou": [float(v) for v in out["iou"]],
            "status": list(out["status"]),
        }
