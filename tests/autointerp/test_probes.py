"""Gaming probes of the planted validation: how they are built, and the verdict against the truth."""

from __future__ import annotations

import pytest

from findbench.autointerp import probes as P
from findbench.autointerp.config import PROBES
from findbench.autointerp.evidence import LatentEvidence, Window
from findbench.autointerp.validation import VERDICTS, probe_verdict, validation_tables


class Renderer:
    """Token id k is the piece ' w<k>' (id 0 is a space-only piece)."""

    def pieces(self, ids):
        return [" " if i == 0 else f" w{i}" for i in ids]


def _evidence(latent, generation_acts, scoring_acts=((9, 9, 9),)):
    gen = [Window(row=r, centre=1, tokens=list(ids), acts=list(acts), kind="top")
           for r, (ids, acts) in enumerate(generation_acts)]
    scoring = [Window(row=9, centre=1, tokens=[99, 98, 97], acts=list(a), kind="top") for a in scoring_acts]
    top = max(a for w in gen for a in w.acts)
    return LatentEvidence(latent=latent, generation=gen, scoring=scoring, top_max_act=top)


TRUTH = ["numbers written with digits", "words about birds", "colour words", "the word the"]


def _all_evidence():
    return [
        _evidence(0, [([1, 2, 3], [0.0, 2.0, 1.0]), ([3, 4, 0], [1.5, 0.005, 5.0])]),
        _evidence(1, [([5, 6], [1.0, 1.0])]),
        _evidence(2, [([7, 8], [0.0, 3.0])]),
        _evidence(3, [([9], [1.0])]),
    ]


def test_top_tokens_come_from_the_explainers_windows_strongest_first():
    ev = _all_evidence()[0]
    # w3 fires at 1.0 then 1.5 (its best counts); w4 is below 1 % of the top (5.0); the space piece has no text;
    # scoring windows (w99, w98, w97) are never used
    assert P.top_tokens(ev, Renderer(), 0.01 * ev.top_max_act) == ["w2", "w3"]
    assert P.top_tokens(ev, Renderer(), 0.01 * ev.top_max_act, k=1) == ["w2"]
    tied = _all_evidence()[1]
    assert P.top_tokens(tied, Renderer(), 0.01) == ["w5", "w6"]  # ties keep the order first seen


def test_probes_are_built_from_the_truth_and_the_evidence_deterministically():
    made = P.probe_explanations(TRUTH, _all_evidence(), Renderer(), act_threshold_frac=0.01, seed=7)
    assert list(made) == list(PROBES) and all(len(v) == len(TRUTH) for v in made.values())
    assert made["everything"] == [P.EVERYTHING] * 4
    assert made["examples_only"][0] == '"w2", "w3"'
    assert all(t not in e for t in TRUTH for e in made["examples_only"])  # no rule
    assert made["stuffed"][0] == f'{TRUTH[0]}; keywords: "w2", "w3"'
    for i, text in enumerate(made["hedged"]):
        parts = text.split(" or ")
        assert parts[0] == TRUTH[i] and len(parts) == 1 + P.HEDGE_OTHERS
        assert len(set(parts)) == len(parts) and set(parts[1:]) <= set(TRUTH) - {TRUTH[i]}
    for i, text in enumerate(made["padded"]):
        assert text.count(TRUTH[i]) == P.PAD_FACTOR and len(text.split()) >= P.PAD_FACTOR * len(TRUTH[i].split())
        assert set(text.replace(TRUTH[i], "").replace(";", "").replace(",", "").split()) <= {
            "in", "other", "words", "that", "is", "put", "differently", "to", "say", "it", "again"}
    again = P.probe_explanations(TRUTH, _all_evidence(), Renderer(), act_threshold_frac=0.01, seed=7)
    assert again == made
    other_seeds = {tuple(P.hedged(TRUTH, seed)) for seed in range(10)}
    assert len(other_seeds) > 1  # the seed picks the other latents
    only = P.probe_explanations(TRUTH, _all_evidence(), Renderer(), act_threshold_frac=0.01, seed=7, probes=["padded"])
    assert list(only) == ["padded"] and only["padded"] == made["padded"]
    assert P.padded("x", 2) == "x; in other words, x"
    assert P.hedged(["a", "b"], 0) == ["a or b", "b or a"]  # fewer others than HEDGE_OTHERS: all of them


def test_probe_explanations_name_bad_input():
    with pytest.raises(ValueError, match="differ in length"):
        P.probe_explanations(TRUTH[:2], _all_evidence(), Renderer(), act_threshold_frac=0.01, seed=0)
    with pytest.raises(ValueError, match="unknown probe"):
        P.probe_explanations(TRUTH, _all_evidence(), Renderer(), act_threshold_frac=0.01, seed=0, probes=["nonsense"])


def test_probe_verdict_from_a_paired_bootstrap():
    true = [0.9, 0.8, 0.85, 0.95, 0.7, 0.9, 0.8, 0.75]
    below = [t - 0.2 + 0.01 * k for k, t in enumerate(true)]
    v = probe_verdict(true, below)
    assert v["verdict"] == VERDICTS[0] == "truth above probe" and v["truth_above_probe"] is True
    assert v["inflation"] == pytest.approx(sum(b - t for b, t in zip(below, true)) / 8)
    assert v["inflation_ci"][0] <= v["inflation"] <= v["inflation_ci"][1] < 0
    assert v["n"] == 8 and v["ci"][0] <= v["mean"] <= v["ci"][1]
    above = [t + 0.1 for t in true]
    assert probe_verdict(true, above)["verdict"] == "probe above truth"
    same = probe_verdict(true, list(true))
    assert same["verdict"] == "no difference shown" and same["inflation"] == 0 and not same["truth_above_probe"]
    assert f"{same['inflation']:+.3f}" == "+0.000" and [f"{x:+.3f}" for x in same["inflation_ci"]] == [
        "+0.000",
        "+0.000",
    ]
    mixed = [t + (0.1 if k % 2 else -0.1) for k, t in enumerate(true)]
    assert probe_verdict(true, mixed)["verdict"] == "no difference shown"
    assert probe_verdict(true, below) == probe_verdict(true, below)  # seeded


def test_validation_tables_show_every_probe_with_its_verdict():
    true = [0.9, 0.8, 0.85, 0.7]
    probes = {"everything": probe_verdict(true, [0.5] * 4), "padded": probe_verdict(true, true)}
    from findbench.stats import mean_ci

    scorer = {
        "true": 0.8125,
        "wrong": 0.5,
        "empty": 0.4,
        "separation": 0.3125,
        "win_rate": 1.0,
        "verdict": "separates",
        "n_latents": 4,
        "truth": mean_ci(true),
        "probes": probes,
        "truth_above_every_probe": False,
    }
    result = {
        "scorers": {"embedding": scorer},
        "explanations": {
            "everything": {"n_truncated": 0, "n_degenerate": 4},
            "padded": {"n_truncated": 1, "n_degenerate": 0},
        },
    }
    text = validation_tables(result)
    assert "| embedding | 0.812 | 0.500 | 0.400 | +0.312 | 4 of 4 | separates |" in text
    assert "| embedding | everything | 0.500 [0.500, 0.500] | -0.312 [" in text
    assert "| truth above probe | 4 of 4 | 0 of 4 |" in text
    assert "| embedding | padded | 0.812 [" in text and "| no difference shown | 0 of 4 | 1 of 4 |" in text
    assert text.endswith("Truth above every probe: no scorer (of embedding; paired bootstrap over latents, 95%).")
