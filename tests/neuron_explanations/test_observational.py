"""Observational test-set generation on a tiny random model with a scripted generator LM."""

from __future__ import annotations

import pytest
import torch

from findbench import sites as acts
from findbench.neuron_explanations import observational as obs
from tests.neuron_explanations._tiny import tiny_llama, word_tokenizer

torch.set_num_threads(1)

DAYS = {"monday", "tuesday", "friday", "sunday", "thursday"}


class ScriptedLM:
    """A deterministic stand-in for the generator LM (the LM protocol's two calls)."""

    name = "scripted"

    def __init__(self):
        self.judged = []

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        out = []
        for conv in conversations:
            text = conv[-1]["content"]
            if text.startswith("List"):
                out.append('- Monday\n- Tuesday\n2. Friday\n"Sunday"\nmonday\n')
            elif '"Friday"' in text:
                out.append("A sentence without the requested word.")
            else:
                word = text.split('"')[1]
                out.append(f"We met on {word} morning.\nSecond line ignored.")
        return out

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
        res = []
        for conv in conversations:
            span = conv[-1]["content"].split('Does the word "')[1].split('"')[0]
            self.judged.append(span)
            yes = span.lower() in DAYS
            res.append([-0.1, -2.0] if yes else [-2.0, -0.1])
        return res


@pytest.fixture(scope="module")
def setup():
    corpus = obs.load_corpus()
    tok = word_tokenizer(corpus + ["We met on Monday Tuesday Sunday Friday morning .", "Here is an example : Friday ."])
    model = tiny_llama(len(tok), seed=3)
    return model, tok, corpus


def test_parse_list():
    assert obs.parse_list("1. apple\n2) Pear.\n- 'kiwi'\n* apple\n\nHere are more:\n", 10) == ["apple", "Pear", "kiwi"]
    assert obs.parse_list("red, green, blue", 2) == ["red", "green"]
    assert obs.parse_list("The days of the week are: Monday\n- Tuesday\nmonday", 5) == ["Monday", "Tuesday"]


def test_corpus_and_labels(tmp_path):
    corpus = obs.load_corpus()
    assert len(corpus) == 83 and all(not s.startswith("#") for s in corpus)
    f = tmp_path / "c.txt"
    f.write_text("# comment\nOne.\n\nTwo.\n")
    assert obs.load_corpus(f) == ["One.", "Two."]
    with pytest.raises(ValueError, match="corpus"):
        obs.load_corpus([])
    assert [obs.label_for(i, f) for i, f in [(True, True), (True, False), (False, True), (False, False)]] == [
        "true_positive", "false_positive", "false_negative", "true_negative"]


def test_top_activating_spans(setup):
    model, tok, corpus = setup
    spans = obs.top_activating_spans(model, tok, corpus, layer=1, neuron=7, k=6)
    assert len(spans) == 6
    tops = [max(s["activations"]) for s in spans]
    assert tops == sorted(tops, reverse=True)
    # the best span's activations are the neuron's values at those tokens
    s = spans[0]
    enc = tok(s["sentence"], return_offsets_mapping=True)
    vals = acts.record(model, torch.tensor([enc["input_ids"]]), layer=1, neurons=[7])[0, :, 0]
    pos = [i for i, (a, b) in enumerate(enc["offset_mapping"]) if a < s["end"] and b > s["start"]]
    assert s["activations"] == pytest.approx(vals[pos].tolist())
    assert s["sentence"][s["start"] : s["end"]] == s["span"]
    # and no word anywhere in the corpus beats the top span
    best_overall = max(
        float(acts.record(model, torch.tensor([tok(c)["input_ids"]]), layer=1, neurons=[7]).max()) for c in corpus
    )
    assert tops[0] == pytest.approx(best_overall)


def test_observational_rows_with_lm_and_regex_judges(setup):
    model, tok, corpus = setup
    lm = ScriptedLM()
    rows = obs.observational_rows(
        model, tok, layer=1, neuron=7, explanation="days of the week", generator=lm, judge="lm", corpus=corpus,
        n_strings=20, n_activating=5, model_name="tiny",
    )
    expl = [r for r in rows if r["block"] == "explanation"]
    act = [r for r in rows if r["block"] == "activating"]
    assert [r["span"] for r in expl] == ["Monday", "Tuesday", "Friday", "Sunday"]
    assert [r["sentence_source"] for r in expl] == ["generated", "generated", "template", "generated"]
    assert expl[2]["sentence"] == "Here is an example: Friday."
    assert expl[0]["sentence"] == "We met on Monday morning."
    assert all(r["in_explanation"] for r in expl) and len(act) == 5
    assert lm.judged == [r["span"] for r in act]
    for r in rows:
        assert r["fires"] == (max(r["activations"]) > 0)
        assert r["label"] == obs.label_for(r["in_explanation"], r["fires"])
        assert r["neuron"] == "1:7" and r["model"] == "tiny"
    assert [r["item_index"] for r in rows] == list(range(len(rows)))
    for r in act:
        assert r["in_explanation"] == (r["span"].lower() in DAYS)
    regex = obs.observational_rows(
        model, tok, layer=1, neuron=7, explanation="words ending in -ed", generator=ScriptedLM(), judge="regex:ed$",
        corpus=corpus, n_strings=2, n_activating=5,
    )
    for r in regex:
        if r["block"] == "activating":
            assert r["in_explanation"] == r["span"].lower().endswith("ed") and r["judge"] == "regex:ed$"


def test_observational_errors(setup):
    model, tok, corpus = setup
    common = dict(generator=ScriptedLM(), corpus=corpus)
    with pytest.raises(ValueError, match="explanation"):
        obs.observational_rows(model, tok, layer=1, neuron=7, explanation=" ", **common)
    with pytest.raises(ValueError, match="neuron"):
        obs.observational_rows(model, tok, layer=1, neuron=48, explanation="x", **common)
    with pytest.raises(ValueError, match="layer"):
        obs.observational_rows(model, tok, layer=9, neuron=0, explanation="x", **common)
    with pytest.raises(ValueError, match="judge"):
        obs.observational_rows(model, tok, layer=1, neuron=0, explanation="x", judge="regex:(", **common)


@pytest.mark.slow
def test_observational_on_embedded_model():
    from findbench.models import load_causal_lm

    model, tok = load_causal_lm("embedded")  # a broken embedded install fails here, not skips
    rows = obs.observational_rows(
        model, tok, layer=0, neuron=100, explanation="days of the week", generator="embedded",
        judge="regex:day$", n_strings=5, n_activating=3, model_name="embedded",
    )
    expl = [r for r in rows if r["block"] == "explanation"]
    act = [r for r in rows if r["block"] == "activating"]
    assert 1 <= len(expl) <= 5 and len(act) == 3
    # measured: neuron 0:100 of SmolLM2-135M fires most on "law" in the shipped corpus
    assert act[0]["span"] == "law" and act[0]["max_activation"] == pytest.approx(1.067, abs=0.01)
    for r in rows:
        assert r["span"].lower() in r["sentence"].lower()
        assert len(r["span_tokens"]) == len(r["activations"]) >= 1
        assert r["label"] == obs.label_for(r["in_explanation"], max(r["activations"]) > 0)
