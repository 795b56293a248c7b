"""Every aggregate a findbench metric returns comes with its n and a bootstrap interval:
``<name>_ci`` as ``[low, high]`` (plain floats) and ``n`` (the number of scored units), beside
the keys the metric always returned; the interval is :func:`findbench.stats.bootstrap_ci` of
the per-unit scores the output lists."""

from __future__ import annotations

import json

import numpy as np
import pytest

import findbench
from findbench.stats import bootstrap_ci

GT = "def function(x):\n    return 2 * x + 1\n"
ENTITY_TESTS = [
    {"inputs": ["NBA", "tulip", "cat"], "outputs": None, "correct": 1},
    {"inputs": ["rose", "NHL", "dog"], "outputs": None, "correct": 2},
]


class _PickOne:
    name = "pick-one"

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        return ["[ANSWER]: 1"] * len(conversations)

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
        return [[0.0 if c == "1" else -3.0 for c in candidates] for _ in conversations]


@pytest.fixture(scope="module")
def evaluate():
    import evaluate

    return evaluate


def _load(evaluate, name, config="default"):
    return evaluate.load(findbench.metric_path(name), config)


def _check(out: dict, name: str, units: list[float]) -> None:
    """``out[name + "_ci"]`` is the interval of the per-unit scores and ``out["n"]`` their count."""
    ci = out[f"{name}_ci"]
    assert isinstance(ci, list) and len(ci) == 2 and all(type(x) is float for x in ci)
    assert type(out["n"]) is int and out["n"] == len(units)
    assert ci == list(bootstrap_ci(units))
    assert ci[0] <= out[name] <= ci[1]
    json.dumps({k: v for k, v in out.items()})  # plain Python values


def _domain_ref(corruption=None, boundary=None):
    params = None if boundary is None else json.dumps({"boundary": boundary, "mean": 0.5, "std": 0.1})
    return {"domain_low": -100.0, "domain_high": 100.0, "corruption_type": corruption, "corruption_params": params}


def test_find_unit_test(evaluate):
    out = _load(evaluate, "find_unit_test").compute(
        predictions=["sports", "flowers", ""], references=[ENTITY_TESTS] * 3,
        category="neurons_entities", judge=_PickOne(),
    )
    assert out["per_function"] == [0.5, 0.5, 0.0]  # judge picks 1; the empty answer scores 0
    _check(out, "unit_test_accuracy", out["per_function"])
    assert out["unit_test_accuracy_ci"] == [0.0, 0.5]


def test_find_nmse(evaluate):
    preds = [GT, "def f(x):\n    return 2 * x\n", "def f(x):\n    return 0\n", "x = 1\n"]
    out = _load(evaluate, "find_nmse").compute(predictions=preds, references=[GT] * 4, workers=1)
    _check(out, "success_rate", [float(v < 0.1) for v in out["nmse"]])
    assert out["success_rate"] == 0.5 and 0.0 <= out["success_rate_ci"][0] < 0.5 < out["success_rate_ci"][1]


def test_find_exact_match(evaluate):
    gt = "def function(x):\n    return x.upper()\n"
    out = _load(evaluate, "find_exact_match").compute(
        predictions=[gt, "def f(x):\n    return x\n", gt], references=[gt] * 3,
        test_inputs=[["ab", "CD"]] * 3, workers=1,
    )
    assert out["per_function"] == [1.0, 0.5, 1.0]
    _check(out, "exact_match", out["per_function"])


def test_find_domain(evaluate):
    refs = [_domain_ref("inside", [2.0, 7.0]), _domain_ref(), _domain_ref("below", [-50.0]), _domain_ref()]
    preds = ["[DOMAIN]: (2, 7)", "[DOMAIN]: none", "[DOMAIN]: none", "[DOMAIN]: ???"]
    out = _load(evaluate, "find_domain").compute(predictions=preds, references=refs)
    assert out["iou"] == [1.0, 1.0, 0.0, 0.0]
    _check(out, "domain_iou", out["iou"])


def test_explanation_f1_over_neurons(evaluate):
    rng = np.random.default_rng(0)
    preds, refs, neurons = [], [], []
    for k in range(12):
        for _ in range(10):
            acts = rng.normal(size=3).tolist()
            preds.append(bool(rng.random() < 0.5))
            refs.append(acts)
            neurons.append(f"0:{k}")
    out = _load(evaluate, "explanation_f1").compute(predictions=preds, references=refs, neurons=neurons)
    assert out["n"] == out["n_neurons"] == 12
    per = out["per_neuron"]
    for key in ("precision", "recall", "f1"):
        _check(out, key, [v[key] for v in per])
    assert out["f1_ci"][1] > out["f1_ci"][0]


def test_explanation_f1_probe(evaluate):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 3))
    labels = (x[:, 0] + 0.8 * rng.normal(size=200) > 0).tolist()
    out = _load(evaluate, "explanation_f1", "probe").compute(predictions=labels, references=x.tolist())
    assert out["n"] == out["n_test"]
    for key in ("precision", "recall", "f1", "accuracy"):
        low, high = out[f"{key}_ci"]
        assert type(low) is float and low <= out[key] <= high and high - low > 0
        assert high - low < 0.5


def test_iia(evaluate):
    out = _load(evaluate, "iia").compute(predictions=["7", "3", "5", "5", "1"], references=["7", "4", "5", "2", "1"])
    _check(out, "iia", [1.0, 0.0, 1.0, 0.0, 1.0])
    assert out["n"] == out["n_total"] == 5


def test_probe_statistics_match_the_point_estimates():
    """The vectorised F1 the probe's bootstrap uses agrees with prf_from_counts on each draw."""
    from findbench.neuron_explanations.f1 import _prf_of_samples, prf_from_counts

    rng = np.random.default_rng(1)
    sample = (rng.random((50, 8, 2)) < 0.4).astype(float)
    got = _prf_of_samples(sample)
    for b in range(len(sample)):
        fire, inside = sample[b, :, 0] > 0.5, sample[b, :, 1] > 0.5
        want = prf_from_counts(int((fire & inside).sum()), int(inside.sum()), int(fire.sum()))
        for key in want:
            assert got[key][b] == pytest.approx(want[key])
