"""The find_unit_test judge: prompts, answer parsing, scoring plumbing, the metric module."""

from __future__ import annotations

import time

import pytest
import torch

from findbench.judge import (
    ANSWER_PREFIX,
    MAX_DESCRIPTION_TOKENS,
    NULL_DESCRIPTION,
    bound_description,
    clean_description,
    description_token_limit,
    judge_unit_tests,
    normalize_unit_test,
    parse_answer,
    render_judge_prompt,
    render_judge_target,
)
from tests._paths import REPO

STR_TEST = {"inputs": ["ab", 'say "hi"', "x "], "outputs": ["AB", "SAY", "X "], "correct": 1}
ENT_TEST = {"inputs": ["NBA", "tulip", "cat"], "outputs": None, "correct": 1}
REL_TEST = {"inputs": ["France", "Spain", "cat"], "outputs": [" Paris", "Madrid", "meow"], "correct": 1}


def test_render_strings_prompt():
    msgs = render_judge_prompt("Uppercases the input. [DOMAIN]: all strings [CODE]: def f(x): ...", STR_TEST, "strings")
    assert [m["role"] for m in msgs] == ["system", "user"]
    user = msgs[1]["content"]
    assert "Description: Uppercases the input.\n" in user
    assert "[DOMAIN]" not in user and "[CODE]" not in user
    assert user.endswith('1. "ab" -> "AB"\n2. "say \\"hi\\"" -> "SAY"\n3. "x " -> "X "')
    assert "[ANSWER]: k" in user and "[ANSWER]: k" in msgs[0]["content"]
    assert "correct" not in user.lower().split("description:")[1]  # the answer is never shown


def test_render_entities_and_relations():
    ent = render_judge_prompt("[DESCRIPTION]: sports leagues", ENT_TEST, "neurons_entities")[1]["content"]
    assert "Description: sports leagues\n" in ent
    assert ent.endswith("1. NBA\n2. tulip\n3. cat")
    rel = render_judge_prompt("capitals", REL_TEST, "relations")[1]["content"]  # short alias
    assert rel.endswith("1. France -> Paris\n2. Spain -> Madrid\n3. cat -> meow")


def test_keep_full_description():
    text = "Adds one. [DOMAIN]: numbers"
    assert clean_description(text) == "Adds one."
    assert clean_description(text, keep_full_description=True) == text
    full = render_judge_prompt(text, ENT_TEST, "neurons_entities", keep_full_description=True)[1]["content"]
    assert "[DOMAIN]: numbers" in full


def test_prompts_of_one_function_share_their_beginning():
    a = render_judge_prompt("d", STR_TEST, "strings")[1]["content"]
    b = render_judge_prompt("d", {**STR_TEST, "inputs": ["q", "r", "s"]}, "strings")[1]["content"]
    head = a[: a.index("1. ")]
    assert b.startswith(head) and "Description: d" in head


def test_render_rejects_bad_input():
    with pytest.raises(ValueError, match="category"):
        render_judge_prompt("d", STR_TEST, "numeric")
    with pytest.raises(ValueError, match="outputs"):
        render_judge_prompt("d", {"inputs": ["a", "b", "c"], "outputs": None, "correct": 1}, "strings")
    with pytest.raises(ValueError, match="correct"):
        render_judge_prompt("d", {**ENT_TEST, "correct": 0}, "neurons_entities")
    with pytest.raises(ValueError, match="correct"):
        render_judge_prompt("d", {**ENT_TEST, "correct": 4}, "neurons_entities")
    with pytest.raises(TypeError, match="description"):
        render_judge_prompt(None, ENT_TEST, "neurons_entities")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[ANSWER]: 2", 2),
        ("I think [ANSWER]:3", 3),
        ("[ANSWER] : 1.", 1),
        ("[ANSWER]: 2 ... so [ANSWER]: 2", 2),
        ("[ANSWER]: 1 or [ANSWER]: 2", None),  # contradictory
        ("The answer is 2", None),  # a bare number never counts
        ("[ANSWER]: 4", None),  # out of range
        ("[ANSWER]: 12", None),
        ("", None),
        ("Example 2. [ANSWER]: two", None),
    ],
)
def test_parse_answer(text, expected):
    assert parse_answer(text) == expected


def test_render_target_round_trips():
    assert render_judge_target(STR_TEST) == "[ANSWER]: 1"
    assert parse_answer(render_judge_target({"correct": 3})) == 3
    assert ANSWER_PREFIX == "[ANSWER]: "


@pytest.fixture(scope="module")
def always_two_lm(chat_tokenizer):
    """A tiny Llama whose lm_head bias makes the token "2" win every time (over the tiny
    stand-in tokenizer; over the embedded model's tokenizer under -m slow)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from findbench.lm import TransformersLM

    tok = chat_tokenizer
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).eval()
    head = torch.nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=True)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
        head.bias[tok.convert_tokens_to_ids("2")] = 5.0
        head.bias[tok.convert_tokens_to_ids("3")] = 4.0  # runner-up: argmax must not be off by one
    model.lm_head = head
    return TransformersLM(model, tokenizer=tok, device="cpu", batch_size=4, name="always-two")


def _tests(corrects, category="neurons_entities"):
    out = []
    for k, c in enumerate(corrects):
        t = {"inputs": [f"w{k}a", f"w{k}b", f"w{k}c"], "outputs": None, "correct": c}
        if category != "neurons_entities":
            t["outputs"] = ["o1", "o2", "o3"]
        out.append(t)
    return out


def test_judge_plumbing_with_known_answers(always_two_lm):
    unit_tests = [_tests([2, 2, 1, 3]), _tests([1, 1, 1]), _tests([2] * 10)]
    for shared in (False, True):
        out = judge_unit_tests(always_two_lm, ["d1", "d2", "d3"], unit_tests, "neurons_entities", shared_prefix=shared)
        assert out["per_function"] == [0.5, 0.0, 1.0]
        assert out["unit_test_accuracy"] == pytest.approx(0.5)
        assert out["choices"] == [[2] * 4, [2] * 3, [2] * 10]
        assert out["judge"] == "always-two"
    rel = judge_unit_tests(always_two_lm, ["d"], [_tests([3, 2], "strings")], "strings")
    assert rel["per_function"] == [0.5]


class ScriptedLM:
    """Answers generate() from a list of texts, in order."""

    name = "scripted"

    def __init__(self, texts):
        self.texts = list(texts)

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        out, self.texts = self.texts[: len(conversations)], self.texts[len(conversations):]
        return out

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
        raise AssertionError("generate mode must not score log-probs")


def test_generate_mode_parses_strictly():
    lm = ScriptedLM(["[ANSWER]: 1", "The answer is 2", "[ANSWER]: 3", "[ANSWER]:2"])
    out = judge_unit_tests(lm, ["a", "b"], [_tests([1, 2]), _tests([3, 1])], "neurons_entities", mode="generate")
    assert out["choices"] == [[1, None], [3, 2]]
    assert out["per_function"] == [0.5, 0.5]


def test_judge_bad_arguments(always_two_lm):
    with pytest.raises(ValueError, match="mode"):
        judge_unit_tests(always_two_lm, ["d"], [_tests([1])], "neurons_entities", mode="vote")
    with pytest.raises(ValueError, match="differ in length"):
        judge_unit_tests(always_two_lm, ["d", "e"], [_tests([1])], "neurons_entities")
    with pytest.raises(ValueError, match=r"unit_tests\[0\]\[0\]\['correct'\]"):
        judge_unit_tests(
            always_two_lm, ["d"], [[{"inputs": ["a", "b", "c"], "outputs": None, "correct": 5}]], "neurons_entities"
        )
    with pytest.raises(TypeError, match=r"descriptions\[0\]"):
        judge_unit_tests(always_two_lm, [3], [_tests([1])], "neurons_entities")
    with pytest.raises(ValueError, match="empty"):
        judge_unit_tests(always_two_lm, [], [], "neurons_entities")


@pytest.fixture(scope="module")
def metric():
    import evaluate

    return evaluate.load(str(REPO / "metrics" / "find_unit_test"))


def test_metric_loads_offline_and_scores(metric, always_two_lm):
    out = metric.compute(
        predictions=["d1", "d2"],
        references=[_tests([2, 2, 1, 3]), _tests([1, 2])],
        category="neurons_entities",
        judge=always_two_lm,
    )
    assert out["unit_test_accuracy"] == pytest.approx(0.5) and out["per_function"] == [0.5, 0.5]
    assert out["truncated"] == [False, False] and out["judge"] == "always-two"
    strings = metric.compute(
        predictions=["d"], references=[_tests([2, 1], "strings")], category="strings", judge=always_two_lm
    )
    assert strings["per_function"] == [0.5]


def test_metric_validates(metric, always_two_lm):
    with pytest.raises(ValueError, match="category"):
        metric.compute(predictions=["d"], references=[_tests([1])], judge=always_two_lm)
    with pytest.raises(ValueError, match=r"references\[0\]\[0\]\['outputs'\]"):
        metric.compute(predictions=["d"], references=[_tests([1])], category="strings", judge=always_two_lm)
    # a non-string first description is refused by evaluate's feature check, before _compute
    with pytest.raises(ValueError, match=r"Input predictions: \[1\]"):
        metric.compute(predictions=[1], references=[_tests([1])], category="neurons_entities", judge=always_two_lm)
    with pytest.raises(TypeError, match=r"predictions\[1\]"):
        metric.compute(
            predictions=["d", None], references=[_tests([1])] * 2, category="neurons_entities", judge=always_two_lm
        )


@pytest.mark.slow
def test_embedded_judge_end_to_end(metric, anchor):
    """The embedded judge on a few FIND v1 entity functions: loads once, valid scores."""
    from findbench.find.find_v1 import load_rows

    rows = load_rows("neurons_entities", anchor("find-v1"))[:3]
    refs = [r["unit_tests"] for r in rows]
    out = metric.compute(predictions=[r["description"] for r in rows], references=refs, category="neurons_entities")
    assert out["judge"] == "transformers:embedded-evaluator"  # the default judge
    assert len(out["per_function"]) == 3
    assert all(x in {k / 10 for k in range(11)} for x in out["per_function"])
    assert out["unit_test_accuracy"] == pytest.approx(sum(out["per_function"]) / 3)
    judges = metric.__dict__["_judges"]
    again = metric.compute(predictions=[rows[0]["description"]], references=refs[:1], category="neurons_entities")
    assert again["per_function"][0] == out["per_function"][0]
    assert metric.__dict__["_judges"] is judges and len(judges) == 1  # loaded once


# -- "pmi" mode ----------------------------------------------------------------------------
class TableLM:
    """Continuation log-probs from a table: ``(description or None, option) -> value``; counts calls."""

    name = "table"

    def __init__(self, table):
        self.table = table
        self.scored: list[tuple[str | None, str]] = []

    def generate(self, conversations, **kw):
        raise AssertionError("pmi mode must not generate")

    def candidate_logprobs(self, conversations, candidates, **kw):
        raise AssertionError("pmi mode must not score option numbers")

    def continuation_logprobs(self, conversations, continuations, *, progress=False):
        self.bars = [*getattr(self, "bars", []), progress]
        out = []
        for conv, cont in zip(conversations, continuations):
            desc = conv[-1]["content"].split("Description: ", 1)[1].split("\n\n", 1)[0]
            key = (None if desc == NULL_DESCRIPTION else desc, cont)
            self.scored.append(key)
            out.append(self.table[key])
        return out


def test_render_pmi_prompt_and_options():
    from findbench.judge import render_pmi_option, render_pmi_prompt

    msgs = render_pmi_prompt("[DESCRIPTION]: Uppercases the input. [CODE]: def f(x): ...", "strings")
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert (
        msgs[1]["content"].startswith("Description: Uppercases the input.\n\n") and "[CODE]" not in msgs[1]["content"]
    )
    assert [render_pmi_option(STR_TEST, k, "strings") for k in (1, 2, 3)] == [
        '"ab" -> "AB"',
        '"say \\"hi\\"" -> "SAY"',
        '"x " -> "X "',
    ]
    assert render_pmi_option(ENT_TEST, 2, "entities") == "tulip"
    assert render_pmi_option(REL_TEST, 1, "relations") == "France -> Paris"
    # options are never part of the prompt, so every option of a description shares it
    assert render_pmi_prompt("sports leagues", "entities") == render_pmi_prompt("sports leagues", "neurons_entities")
    with pytest.raises(ValueError, match="k must be"):
        render_pmi_option(STR_TEST, 4, "strings")
    # an interpreter's output with nothing before [CODE] renders an empty description (judge_unit_tests never sends it)
    assert render_pmi_prompt("[CODE]: def f(x): ...", "strings")[1]["content"].startswith("Description: \n\n")


def test_pmi_mode_subtracts_each_options_prior_once():
    ut = {"inputs": ["NBA", "tulip", "the"], "outputs": None, "correct": 1}
    table = {
        # "the" is the likeliest word under the description, but only because it is likely anyway
        ("sports leagues", "NBA"): -5.0,
        ("sports leagues", "tulip"): -9.0,
        ("sports leagues", "the"): -2.0,
        ("flowers", "NBA"): -9.0,
        ("flowers", "tulip"): -4.0,
        ("flowers", "the"): -2.0,
        (None, "NBA"): -8.0,
        (None, "tulip"): -8.0,
        (None, "the"): -1.0,
    }
    lm = TableLM(table)
    ut2 = {**ut, "correct": 2}
    out = judge_unit_tests(lm, ["sports leagues", "flowers"], [[ut, ut], [ut2]], "neurons_entities", mode="pmi")
    assert out["choices"] == [[1, 1], [2]] and out["per_function"] == [1.0, 1.0]
    priors = [k for k in lm.scored if k[0] is None]
    assert sorted(priors) == sorted({(None, w) for w in ut["inputs"]})  # one prior per distinct option
    # plain conditional likelihood would pick "the" every time: the prior is what fixes it
    assert max(ut["inputs"], key=lambda w: table[("sports leagues", w)]) == "the"
    assert lm.bars == [False, False]  # no progress bars asked for
    judge_unit_tests(lm, ["flowers"], [[ut2]], "neurons_entities", mode="pmi", progress=True)
    # each pass's bar says what it computes
    assert lm.bars[2:] == ["judge, neurons_entities: log P(output | description)",
                           "judge, neurons_entities: log P(output)"]


def test_empty_descriptions_score_zero_without_a_judge_call(always_two_lm):
    ut = {"inputs": ["NBA", "tulip", "the"], "outputs": None, "correct": 1}
    # the judge's prior alone would pick the right option here (what an empty description gets when judged)
    table = {("sports leagues", w): v for w, v in (("NBA", -5.0), ("tulip", -9.0), ("the", -2.0))}
    table.update({(None, "NBA"): -8.0, (None, "tulip"): -8.0, (None, "the"): -1.0})
    lm = TableLM(table)
    out = judge_unit_tests(
        lm,
        ["", "sports leagues", "[CODE]: def f(x): ...", "  "],
        [[ut], [ut], [ut], [ut]],
        "neurons_entities",
        mode="pmi",
    )
    assert out["per_function"] == [0.0, 1.0, 0.0, 0.0] and out["empty"] == [0, 2, 3]
    assert out["choices"] == [[None], [1], [None], [None]] and out["unit_test_accuracy"] == 0.25
    assert {k[0] for k in lm.scored} == {"sports leagues", None}  # no empty description reached the judge
    # all empty: no call at all; other modes too
    assert judge_unit_tests(TableLM({}), [""], [[ut]], "neurons_entities", mode="pmi")["per_function"] == [0.0]
    out = judge_unit_tests(always_two_lm, ["", "d"], [_tests([2]), _tests([2])], "neurons_entities")
    assert out["per_function"] == [0.0, 1.0] and out["empty"] == [0]
    assert judge_unit_tests(always_two_lm, ["d"], [_tests([2])], "neurons_entities")["empty"] == []


def test_decisions_record_each_choice_with_its_margin(always_two_lm):
    """Per test: the options' scores in the mode's units, the pick, the correct option, and the
    margin of the correct option over the best wrong one; generate mode keeps the raw answer."""
    # pmi: PMI = conditional - prior; NBA 3, tulip -1, the -1 under "sports leagues"
    ut = {"inputs": ["NBA", "tulip", "the"], "outputs": None, "correct": 1}
    table = {
        ("sports leagues", "NBA"): -5.0,
        ("sports leagues", "tulip"): -9.0,
        ("sports leagues", "the"): -2.0,
        (None, "NBA"): -8.0,
        (None, "tulip"): -8.0,
        (None, "the"): -1.0,
    }
    out = judge_unit_tests(
        TableLM(table), ["sports leagues", ""], [[ut, {**ut, "correct": 2}], [ut]], "neurons_entities", mode="pmi"
    )
    first, second = out["decisions"][0]
    assert first == {
        "chosen": 1,
        "correct": 1,
        "right": True,
        "scores": [3.0, -1.0, -1.0],
        "margin": 4.0,
        "answer": None,
    }
    assert second["chosen"] == 1 and not second["right"] and second["margin"] == -4.0
    assert out["decisions"][1] == [
        {"chosen": None, "correct": 1, "right": False, "scores": None, "margin": None, "answer": None}
    ]  # an empty description: not judged
    assert [[d["chosen"] for d in f] for f in out["decisions"]] == out["choices"]
    assert [sum(d["right"] for d in f) / len(f) for f in out["decisions"]] == out["per_function"]

    # logprob: the next-token log-probs of "1", "2", "3" ("2" wins, "3" is runner-up)
    out = judge_unit_tests(always_two_lm, ["d"], [_tests([2, 3, 1])], "neurons_entities")
    decisions = out["decisions"][0]
    assert [d["chosen"] for d in decisions] == [2, 2, 2] and [d["right"] for d in decisions] == [True, False, False]
    for d in decisions:
        s = d["scores"]
        assert len(s) == 3 and max(s) == s[1] and s[2] > s[0]
        assert d["margin"] == pytest.approx(
            s[d["correct"] - 1] - max(v for k, v in enumerate(s, 1) if k != d["correct"])
        )
    assert decisions[0]["margin"] > 0 > decisions[1]["margin"] > decisions[2]["margin"]

    # generate: no margin, the raw answer
    out = judge_unit_tests(
        ScriptedLM(["[ANSWER]: 1", "The answer is 2"]), ["a"], [_tests([1, 2])], "neurons_entities", mode="generate"
    )
    assert [(d["chosen"], d["right"], d["margin"], d["scores"], d["answer"]) for d in out["decisions"][0]] == [
        (1, True, None, None, "[ANSWER]: 1"),
        (None, False, None, None, "The answer is 2"),
    ]


def test_pmi_mode_needs_a_scoring_lm(always_two_lm):
    with pytest.raises(TypeError, match="continuation_logprobs"):
        judge_unit_tests(ScriptedLM([]), ["d"], [_tests([1])], "neurons_entities", mode="pmi")


def test_judge_mode_of_reads_trained_folders(tmp_path):
    import json

    from findbench.judge import judge_mode_of

    (tmp_path / "findbench_evaluator.json").write_text(json.dumps({"judge_mode": "pmi"}))
    assert judge_mode_of(str(tmp_path)) == "pmi"
    assert judge_mode_of(tmp_path / "missing") == "logprob"
    assert judge_mode_of("http://127.0.0.1:8000/v1") == "logprob"
    assert judge_mode_of(object(), default="generate") == "generate"
    (tmp_path / "findbench_evaluator.json").write_text(json.dumps({"method": "lora"}))  # a v1 judge: FIND's format
    assert judge_mode_of(str(tmp_path)) == "logprob"


@pytest.mark.slow
def test_untuned_embedded_pmi_judge_on_clear_cases(embedded_lm):
    """The embedded model in pmi mode, untuned, on tests a 135M model can tell apart."""
    tests = [
        {"inputs": ["Spain", "Tristan", "piano"], "outputs": ["Madrid", "male", "instrument"], "correct": 1},
        {"inputs": ["Tristan", "Italy", "piano"], "outputs": ["male", "Rome", "instrument"], "correct": 2},
        {"inputs": ["Tristan", "piano", "Japan"], "outputs": ["male", "instrument", "Tokyo"], "correct": 3},
    ]
    out = judge_unit_tests(
        embedded_lm, ["Maps a country to its capital city."], [tests], "neurons_relations", mode="pmi"
    )
    assert out["per_function"][0] >= 2 / 3


# -- bounded judge input --------------------------------------------------------------------
class RecordingLM:
    """A server-like judge (no tokenizer) that answers 1 and keeps every prompt it is sent."""

    name = "recording"

    def __init__(self):
        self.prompts: list[str] = []

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        self.prompts += [c[-1]["content"] for c in conversations]
        return ["[ANSWER]: 1"] * len(conversations)

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
        self.prompts += [c[-1]["content"] for c in conversations]
        return [[0.0 if c == "1" else -5.0 for c in candidates] for _ in conversations]


def test_a_2mb_description_is_cut_to_the_limit_and_flagged(metric, always_two_lm):
    """A 2 MB description costs what a long one does: cut to the token limit before the judge
    sees it (a cheap character cut first, so it is never tokenized whole) and flagged."""
    huge = "Counts the vowels of the input and repeats them. " * 42_000
    assert len(huge) > 2_000_000
    start = time.perf_counter()
    out = metric.compute(
        predictions=[huge, "d"],
        references=[_tests([2, 1]), _tests([2])],
        category="neurons_entities",
        judge=always_two_lm,
    )
    assert time.perf_counter() - start < 20
    assert out["truncated"] == [True, False] and out["per_function"] == [0.5, 1.0]
    text, cut = bound_description(huge, always_two_lm)
    assert cut and huge.startswith(text)
    assert len(always_two_lm.tokenizer(text, add_special_tokens=False)["input_ids"]) == MAX_DESCRIPTION_TOKENS
    assert bound_description("short [CODE]" + "x" * 100_000, always_two_lm) == (
        "short",
        False,
    )  # cut by cleaning, not the limit


def test_judge_without_a_tokenizer_cuts_characters_conservatively():
    lm = RecordingLM()
    out = judge_unit_tests(lm, ["y" * 3_000_000, "adds one"], [_tests([1]), _tests([1])], "neurons_entities")
    assert out["truncated"] == [0] and out["per_function"] == [1.0, 1.0]
    shown = [p.split("Description: ", 1)[1].split("\n\n", 1)[0] for p in lm.prompts]
    assert shown == ["y" * 2 * MAX_DESCRIPTION_TOKENS, "adds one"]
    out = judge_unit_tests(RecordingLM(), ["a b c d e f"], [_tests([1])], "neurons_entities", max_description_tokens=2)
    assert out["truncated"] == [0]


def test_the_limit_follows_the_judges_context_window(always_two_lm):
    class Wrapper:  # as findbench.lm.CachedLM holds its LM
        inner = always_two_lm

    class SmallContext:
        model = type("M", (), {"config": type("C", (), {"max_position_embeddings": 600})()})()

    assert description_token_limit(always_two_lm) == description_token_limit(Wrapper()) == MAX_DESCRIPTION_TOKENS
    assert description_token_limit(SmallContext()) == 600 - 256
    assert description_token_limit(RecordingLM()) == description_token_limit(None) == MAX_DESCRIPTION_TOKENS
    with pytest.raises(ValueError, match="max_tokens"):
        bound_description("d", max_tokens=0)


@pytest.mark.parametrize(
    ("bad", "exc", "field"),
    [
        ({"inputs": ["a", "b"]}, ValueError, r"\[1\]\[0\]\['inputs'\] must list exactly 3 options"),
        ({"inputs": ["a", "b", "c", "d"]}, ValueError, r"\[1\]\[0\]\['inputs'\] must list exactly 3 options"),
        ({"correct": None}, ValueError, r"\[1\]\[0\] is missing 'correct'"),
        ({"correct": 5}, ValueError, r"\[1\]\[0\]\['correct'\] must be 1, 2 or 3, got 5"),
        ({"correct": "2"}, ValueError, r"\[1\]\[0\]\['correct'\] must be 1, 2 or 3, got '2'"),
        ({"correct": True}, ValueError, r"\[1\]\[0\]\['correct'\] must be 1, 2 or 3, got True"),
    ],
)
def test_malformed_unit_tests_are_refused_naming_field_and_index(metric, bad, exc, field):
    unit_test = {**ENT_TEST, **bad}
    if bad.get("correct", 1) is None:
        del unit_test["correct"]
    with pytest.raises(exc, match="unit_tests" + field):
        judge_unit_tests(RecordingLM(), ["a", "b"], [[ENT_TEST], [unit_test]], "neurons_entities")
    with pytest.raises(exc, match="references" + field):
        metric.compute(
            predictions=["a", "b"],
            references=[[ENT_TEST], [unit_test]],
            category="neurons_entities",
            judge=RecordingLM(),
        )
    # rows read back from files (findbench evaluate) go through normalize_unit_test first: it
    # converts integers only, so the check still names what was there
    with pytest.raises(exc, match="unit_tests" + field):
        judge_unit_tests(RecordingLM(), ["a", "b"], [[ENT_TEST], [normalize_unit_test(unit_test)]], "neurons_entities")


def test_normalize_keeps_integers_only():
    import numpy as np

    assert normalize_unit_test({**ENT_TEST, "correct": np.int32(2)}) == {**ENT_TEST, "correct": 2}
    assert type(normalize_unit_test({**ENT_TEST, "correct": np.int64(3)})["correct"]) is int
    assert normalize_unit_test({**ENT_TEST, "correct": "2"})["correct"] == "2"
    assert "correct" not in normalize_unit_test({"inputs": ["a", "b", "c"], "outputs": None})


def test_a_lone_surrogate_fails_only_its_own_text(metric, always_two_lm, caplog):
    """An unencodable character is replaced in its description; the other items score as usual."""
    out = metric.compute(
        predictions=["d1", "x\ud800y", "d3"],
        references=[_tests([2]), _tests([2]), _tests([1])],
        category="neurons_entities",
        judge=always_two_lm,
    )
    assert out["per_function"] == [1.0, 1.0, 0.0]
    assert "predictions[1]" in caplog.text
    assert bound_description("x\ud800y") == ("x?y", False)
    direct = judge_unit_tests(always_two_lm, ["d1", "\udfff"], [_tests([2]), _tests([2])], "neurons_entities")
    assert direct["per_function"] == [1.0, 1.0]
