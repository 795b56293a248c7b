"""autointerp: SAEBench's AutoInterp detection score for sparse-autoencoder latents. Parsing and
scoring live in the torch-free :mod:`findbench.autointerp.detection`; the LM runs that produce
the scorer's answers live elsewhere in :mod:`findbench.autointerp`."""

import datasets
import evaluate

from findbench import citations
from findbench.autointerp.detection import score_detections

_CITATION = citations.SAEBENCH

_DESCRIPTION = """\
AutoInterp detection score of sparse-autoencoder latents, as SAEBench reports it. For each latent
an explainer LM writes an explanation from the latent's top-activating windows; a scorer LM reads
the explanation and n shuffled windows (SAEBench: 14, usually four of them active) and names the
windows it thinks activate the latent, as 1-based numbers or "None". A latent scores the share of
its n windows classified correctly (predicted active and active, or neither). `autointerp_score`
is the mean over latents and `autointerp_std_dev` their sample standard deviation (n - 1, as
SAEBench's torch.std). An unparseable scorer answer (None; see
`findbench.autointerp.detection.parse_detection`) scores 0 and is counted in `n_unparsed`;
SAEBench drops such latents instead.

Every score comes with its n, a 95% percentile bootstrap interval over latents (10,000 resamples,
seed 0; `findbench.stats.bootstrap_ci`) and the floors of the detection task, computed from the
windows given: `none` (answer "None" for every latent: the share of inactive windows, 10/14 =
0.714 in SAEBench's setting of 2 top + 2 importance-weighted + 10 random windows) and `all`
(list every window: 4/14 = 0.286). `margin` is the score minus the best floor: a scorer that
does not beat answering "None" has not used the explanations.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `list` of `int`, or `None`): per latent, the 1-based numbers of the
        windows the scorer marked as active (`[]` for "None"), or `None` for an unparseable
        answer: `findbench.autointerp.detection.parse_detection(answer, n)`.
    references (`list` of `list` of `int`): per latent, the 1-based numbers of the windows that
        truly activate it.
    n_examples (`int`, or `list` of `int`): how many windows each latent was shown: one number
        for all latents or one per latent. Required.
Returns:
    autointerp_score (`float`): mean per-latent score, in [0, 1], higher is better.
    autointerp_std_dev (`float`): sample standard deviation of the per-latent scores (`nan` for
        a single latent).
    scores (`list` of `float`): per latent, the share of its windows classified correctly.
    n_unparsed (`int`): how many predictions were `None` (each scored 0).
    n (`int`): number of latents.
    ci (`list` of two `float`): 95% percentile bootstrap interval of `autointerp_score` over latents.
    floors (`dict`): `none` and `all`, the mean scores of answering "None" / every window.
    best_floor (`str`): the name of the higher floor.
    margin (`float`): `autointerp_score` minus the best floor (negative: worse than a constant answer).
Examples:
    >>> import evaluate, findbench
    >>> from findbench.autointerp.detection import parse_detection
    >>> autointerp = evaluate.load(findbench.metric_path("autointerp"))
    >>> preds = [parse_detection(answer, 4) for answer in ["1, 3", "I think 2", "None"]]
    >>> preds
    [[1, 3], None, []]
    >>> out = autointerp.compute(predictions=preds, references=[[1, 2], [1], []], n_examples=4)
    >>> out["scores"], out["n_unparsed"]
    ([0.5, 0.0, 1.0], 1)
    >>> round(out["autointerp_score"], 4), round(out["autointerp_std_dev"], 4)
    (0.5, 0.5)
    >>> out["n"], out["floors"], out["best_floor"], round(out["margin"], 4)
    (3, {'none': 0.75, 'all': 0.25}, 'none', -0.25)
    >>> out = autointerp.compute(predictions=[[2], [1, 2]], references=[[2], [1]], n_examples=[14, 2])
    >>> out["scores"]
    [1.0, 0.5]
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Autointerp(evaluate.Metric):
    """SAEBench's AutoInterp detection score: per-latent accuracy of an LM scorer, mean and spread."""

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS_DESCRIPTION,
            # a whole list may be None (an unparseable answer): datasets keeps a null list
            features=datasets.Features({"predictions": datasets.Sequence(datasets.Value("int64")),
                                        "references": datasets.Sequence(datasets.Value("int64"))}),
            reference_urls=["https://arxiv.org/abs/2503.09532", "https://github.com/adamkarvonen/SAEBench"],
        )

    def _compute(
        self,
        *,
        predictions: list[list[int] | None],
        references: list[list[int]],
        n_examples: int | list[int] | None = None,
    ) -> dict:
        return score_detections(predictions, references, n_examples)  # checks every item, naming it; plain Python out
