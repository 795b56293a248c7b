"""explanation_f1 on hand-made cases, probe mode, and the evaluate metric modules."""

from __future__ import annotations

import numpy as np
import pytest

from findbench.neuron_explanations.f1 import explanation_f1, neuron_fires, prf_from_counts, probe_scores
from tests._paths import REPO


def test_hand_made_two_neurons():
    # neuron A: in-denotation items fire 2 of 3 -> precision 2/3; firing items 3, 2 in -> recall 2/3
    # neuron B: 1 in-denotation item that does not fire, no firing item -> P = R = F1 = 0
    preds = [True, True, True, False, False, True, False]
    refs = [[0.3, -1.0], [0.01], [-0.2, 0.0], [2.0], [-0.5], [-0.1], [-2.0]]
    neurons = ["A", "A", "A", "A", "A", "B", "B"]
    out = explanation_f1(preds, refs, neurons)
    a, b = out["per_neuron"]["A"], out["per_neuron"]["B"]
    assert (
        a["precision"] == pytest.approx(2 / 3)
        and a["recall"] == pytest.approx(2 / 3)
        and a["f1"] == pytest.approx(2 / 3)
    )
    assert (a["n_items"], a["n_in"], a["n_fire"], a["tp"]) == (5, 3, 3, 2)
    assert (b["precision"], b["recall"], b["f1"], b["n_fire"]) == (0.0, 0.0, 0.0, 0)
    assert out["precision"] == pytest.approx(1 / 3) and out["f1"] == pytest.approx(1 / 3)
    # pooled: tp 2, in 4, fire 3
    assert out["pooled_precision"] == pytest.approx(0.5) and out["pooled_recall"] == pytest.approx(2 / 3)
    assert out["pooled_f1"] == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    assert out["n_neurons"] == 2 and out["n_items"] == 7
    assert list(out["per_neuron"]) == ["A", "B"]


def test_threshold_and_fires():
    assert neuron_fires([0.0]) is False and neuron_fires([-1, 0.5]) is True
    assert neuron_fires([0.5], threshold=0.5) is False
    out = explanation_f1([True, True], [[0.4], [0.9]], threshold=0.5)
    assert out["precision"] == 0.5 and out["recall"] == 1.0
    assert prf_from_counts(0, 0, 0) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(predictions=[], references=[]), "predictions"),
        (dict(predictions=[True], references=[[1.0], [2.0]]), "references"),
        (dict(predictions=[True], references=[[]]), "references"),
        (dict(predictions=[True], references=[["x"]]), "references"),
        (dict(predictions=[True], references=[[float("nan")]]), "references"),
        (dict(predictions=["yes"], references=[[1.0]]), "predictions"),
        (dict(predictions=[True], references=[[1.0]], neurons=["a", "b"]), "neurons"),
        (dict(predictions=[True], references=[[1.0]], threshold="0"), "threshold"),
    ],
)
def test_malformed_inputs(kwargs, field):
    with pytest.raises((TypeError, ValueError), match=field):
        explanation_f1(**kwargs)


def test_probe_separable_and_errors():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 4))
    y = x[:, 2] + 0.1 * rng.normal(size=300) > 0
    out = probe_scores(x, y, seed=1)
    assert out["n_test"] == 90 and out["n_train"] == 210
    assert out["f1"] > 0.9 and out["accuracy"] > 0.9
    assert probe_scores(x, y, seed=1) == out
    noise = probe_scores(rng.normal(size=(300, 4)), y, seed=1)
    assert noise["accuracy"] < 0.7
    with pytest.raises(ValueError, match="predictions"):
        probe_scores(x, [True] * 300)
    with pytest.raises(ValueError, match="references"):
        probe_scores([[1.0, 2.0], [1.0]], [True, False])


def test_evaluate_modules_load_offline():
    import evaluate

    f1 = evaluate.load(str(REPO / "metrics" / "explanation_f1"))
    out = f1.compute(
        predictions=[True, True, False, False],
        references=[[0.5, -0.1], [-0.2], [0.9], [-0.3, -0.1]],
        neurons=["3:7"] * 4,
    )
    assert (out["precision"], out["recall"], out["f1"]) == (0.5, 0.5, 0.5)
    assert out["per_neuron"][0]["neuron"] == "3:7" and out["per_neuron"][0]["tp"] == 1
    probe = evaluate.load(str(REPO / "metrics" / "explanation_f1"), "probe")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(100, 3))
    assert probe.compute(predictions=(x[:, 0] > 0).tolist(), references=x.tolist())["f1"] > 0.85
    iia = evaluate.load(str(REPO / "metrics" / "iia"))
    assert iia.compute(predictions=["7", "3", "5", "5"], references=["7", "4", "5", "2"]) == {
        "iia": 0.5,
        "iia_ci": [0.0, 1.0],
        "n": 4,
        "n_success": 2,
        "n_total": 4,
    }
    ids = evaluate.load(str(REPO / "metrics" / "iia"), "token_ids")
    assert ids.compute(predictions=[10, 11, 12], references=[10, 11, 0])["iia"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        iia.compute(predictions=["7"], references=["7", "8"])
