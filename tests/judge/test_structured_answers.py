"""The judge's "generate" mode under structured outputs: the answer grammar reaches the LM
where it applies, every answer then parses, and the result says whether it applied."""

from __future__ import annotations

import re

import pytest

from findbench.judge import judge_unit_tests, parse_answer
from findbench.judge.scoring import answer_constraint

TESTS = [[{"inputs": ["Peru", "Tristan", "Germany"], "outputs": ["Lima", "male", "Euro"], "correct": 1},
          {"inputs": ["Chad", "Oslo", "Mali"], "outputs": ["N'Djamena", "cold", "red"], "correct": 1}]]
DESC = ["Maps a country to its capital city."]


class Talker:
    """Answers in prose unless given a grammar; under one, with its first allowed answer."""

    name = "talker"
    supports_constraints = True
    in_process = True

    def __init__(self):
        self.constraints = []

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False, constraint=None):
        self.constraints.append(constraint)
        if constraint is None:
            return ["I think the first one fits best." for _ in conversations]
        return ["[ANSWER]: 1" for _ in conversations]

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
        return [[0.0] + [-1.0] * (len(candidates) - 1) for _ in conversations]


def test_answer_grammar():
    grammar = re.compile(answer_constraint().regex)
    assert all(grammar.fullmatch(f"[ANSWER]: {k}") and parse_answer(f"[ANSWER]: {k}") == k for k in (1, 2, 3))
    assert not any(grammar.fullmatch(t) for t in ("[ANSWER]: 4", "[ANSWER]:1", "2", "[ANSWER]: 1 because"))
    with pytest.raises(ValueError, match="n_options"):
        answer_constraint(0)


@pytest.mark.parametrize(("setting", "applied"), [("auto", True), ("on", True), ("off", False)])
def test_generate_mode_constrains_where_it_applies(setting, applied):
    lm = Talker()
    out = judge_unit_tests(lm, DESC, TESTS, "neurons_relations", mode="generate", structured_outputs=setting)
    assert out["structured_outputs"] is applied
    if applied:
        assert lm.constraints == [[answer_constraint(3)] * 2]
        assert out["choices"] == [[1, 1]] and out["unit_test_accuracy"] == 1.0
    else:
        assert lm.constraints == [None] and out["choices"] == [[None, None]]  # prose never parses


def test_server_judges_answer_freely_under_auto_and_other_modes_never_constrain():
    lm = Talker()
    lm.in_process = False  # a vLLM server: capable models answer as FIND's judge prompt asks
    assert judge_unit_tests(lm, DESC, TESTS, "neurons_relations", mode="generate")["structured_outputs"] is False
    assert judge_unit_tests(Talker(), DESC, TESTS, "neurons_relations", mode="logprob")["structured_outputs"] is False


@pytest.mark.slow
def test_embedded_judge_answers_always_parse_under_the_grammar(embedded_lm):
    tests = TESTS * 3
    descs = [DESC[0], "Returns the gender of a first name.", "Gives the currency of a country."]
    off = judge_unit_tests(embedded_lm, descs, tests, "neurons_relations", mode="generate", structured_outputs="off")
    on = judge_unit_tests(embedded_lm, descs, tests, "neurons_relations", mode="generate")
    assert on["structured_outputs"] and not off["structured_outputs"]
    assert all(c is not None for row in on["choices"] for c in row)
