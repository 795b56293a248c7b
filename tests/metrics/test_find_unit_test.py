"""find_unit_test's default judge: the shipped embedded-evaluator, scored in the pmi mode it was
trained for (the untuned embedded judge in logprob mode, the old default, is at chance)."""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

import pytest

import findbench


@pytest.fixture(scope="module")
def metric():
    import evaluate

    return evaluate.load(findbench.metric_path("find_unit_test"))


class PmiOnly:
    """Scores an option by whether it is the first word the description names: pmi mode only."""

    name = "pmi-only"

    def generate(self, conversations, **kwargs):
        raise AssertionError("the default judge is scored in pmi mode, never by a written answer")

    def candidate_logprobs(self, conversations, candidates, **kwargs):
        raise AssertionError("the default judge is scored in pmi mode, never by option numbers")

    def continuation_logprobs(self, conversations, continuations, *, progress=False):
        return [0.0 if cont in conv[-1]["content"] else -1.0 for conv, cont in zip(conversations, continuations)]


def test_the_default_judge_is_the_shipped_evaluator_in_pmi_mode(metric, monkeypatch):
    from findbench import judge
    from findbench.constants import TRAINED_MARKER
    from findbench.models import shipped_judge_dir

    module = sys.modules[type(metric).__module__]
    assert module.DEFAULT_JUDGE == "embedded-evaluator"
    assert inspect.signature(metric._compute).parameters["judge"].default == "embedded-evaluator"
    # the shipped judge records pmi, and the mode a judge records is the metric's default
    shipped = shipped_judge_dir()
    assert shipped is not None and json.loads((Path(shipped) / TRAINED_MARKER).read_text())["judge_mode"] == "pmi"
    assert judge.judge_mode_of("embedded-evaluator") == "pmi"

    loaded = []

    def load_judge(spec, **kwargs):  # the model itself is not needed to see what the metric asks for
        loaded.append(spec)
        return PmiOnly()

    monkeypatch.setattr(judge, "load_judge", load_judge)
    tests = [{"inputs": ["rook", "tulip", "NBA"], "outputs": None, "correct": 1},
             {"inputs": ["NHL", "rook", "dog"], "outputs": None, "correct": 2}]
    out = metric.compute(predictions=["rook and other chess words"], references=[tests], category="neurons_entities")
    assert loaded == ["embedded-evaluator"]
    assert out["judge"] == "pmi-only" and out["per_function"] == [1.0]  # scored by continuation log-probs: pmi


def test_the_metric_card_says_what_each_judge_measures_and_links_its_card():
    from findbench.resources import data_path

    folder = Path(findbench.metric_path("find_unit_test")).parent
    card = (folder / "README.md").read_text(encoding="utf-8")
    for name in ("embedded-evaluator", "embedded"):
        link = f"../../data/judge/cards/{name}/README.md"
        assert f"]({link})" in card, name
        assert (folder / link).resolve() == (data_path("judge", "cards", name) / "README.md").resolve()
    assert "**judge** (`str` or LM, default `\"embedded-evaluator\"`)" in card
