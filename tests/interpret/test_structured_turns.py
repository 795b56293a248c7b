"""Interpreter turns under structured outputs: the turn grammar (a short free-text line, then
commands or FIND's answer block; the answer alone on the last turn), how the run applies and
records it, and the embedded SmolLM2 under it (slow)."""

from __future__ import annotations

import json
import re

import pytest

from findbench.interpret.prompts import MAX_TURN_COMMANDS, turn_constraint, turn_grammar
from findbench.interpret.protocol import format_answer, parse_answer, parse_commands
from findbench.schema import CATEGORIES
from tests.interpret.fakes import GenerationLM, interpret

CODE = "def function(x):\n    return x + 2"


def _answer(category: str) -> str:
    parts = {
        "numeric": ("adds 2", "all inputs", CODE),
        "strings": ("reverses", None, CODE),
        "neurons_entities": ("birds", None, None),
        "neurons_relations": ("capital of a country", "countries", None),
    }[category]
    return format_answer(*parts)


@pytest.mark.parametrize("category", CATEGORIES)
def test_the_grammar_allows_commands_or_the_answer_and_both_parse(category):
    grammar = re.compile(turn_constraint(category).regex)
    last = re.compile(turn_constraint(category, answer_only=True).regex)
    commands = 'I will try a few inputs first.\nPYTHON(function.py 1 -2.5 "New York")\nPYTHON(function.py cat)'
    assert grammar.fullmatch(commands) and not last.fullmatch(commands)
    assert [c.inputs for c in parse_commands(commands)] == [("1", "-2.5", "New York"), ("cat",)]
    assert parse_answer(commands) is None
    for text in (_answer(category), "Here is my answer.\n" + _answer(category)):
        assert grammar.fullmatch(text) and last.fullmatch(text), text
        assert parse_answer(text) is not None and not parse_commands(text)
    for bad in (
        "Let me think (hard).\nPYTHON(function.py 1)",
        "PYTHON(function.py)",
        "just prose",
        "\n".join(["PYTHON(function.py 1)"] * (MAX_TURN_COMMANDS + 1)),
        "[DESCRIPTION]: a\nPYTHON(function.py 1)",
    ):
        assert not grammar.fullmatch(bad), bad


def test_answer_parts_follow_each_categorys_task_message():
    assert "DOMAIN" in turn_constraint("numeric").regex and "CODE" in turn_constraint("numeric").regex
    assert "DOMAIN" not in turn_constraint("strings").regex and "CODE" in turn_constraint("strings").regex
    assert (
        "DOMAIN" not in turn_constraint("neurons_entities").regex
        and "CODE" not in turn_constraint("neurons_entities").regex
    )
    assert (
        "DOMAIN" in turn_constraint("neurons_relations").regex
        and "CODE" not in turn_constraint("neurons_relations").regex
    )
    with pytest.raises(ValueError, match="category"):
        turn_constraint("images")


def test_the_last_turn_must_answer():
    pick = turn_grammar("strings", 3)
    system, task = {"role": "system", "content": "s"}, {"role": "user", "content": "t"}
    turn = [{"role": "assistant", "content": "PYTHON(function.py a)"}, {"role": "user", "content": "Response: ..."}]
    assert pick([system, task]) == turn_constraint("strings")
    assert pick([system, task, *turn]) == turn_constraint("strings")
    assert pick([system, task, *turn, *turn]) == turn_constraint("strings", answer_only=True)


class GrammarAgent(GenerationLM):
    """Experiments while it may, answers when the grammar leaves it nothing else; records grammars."""

    name = "grammar-agent"
    supports_constraints = True
    in_process = True

    def __init__(self):
        self.constraints = []

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False, constraint=None):
        self.constraints.append(constraint)
        if constraint is not None and "PYTHON" not in constraint.regex:
            return [format_answer("my guess", code=CODE)]
        return ["PYTHON(function.py abc)"]


@pytest.mark.parametrize(("setting", "applied"), [("auto", True), ("off", False)])
def test_run_applies_and_records_the_setting(setting, applied, data_dir, tmp_path):
    lm = GrammarAgent()
    out = interpret(
        data_dir,
        lm,
        configs="strings",
        limit=1,
        rounds=3,
        out=tmp_path / setting,
        progress=False,
        structured_outputs=setting,
    )
    info = json.loads((out / "run.json").read_text())
    assert info["structured_outputs"] == setting and info["structured_outputs_applied"] is applied
    (episode,) = out.glob("strings/aia/f*/episode.json")
    record = json.loads(episode.read_text())
    if applied:
        assert lm.constraints == [turn_constraint("strings")] * 2 + [turn_constraint("strings", answer_only=True)]
        assert record["answer"]["description"] == "my guess" and record["rounds"] == 3
    else:
        assert lm.constraints == [None] * 3 and record["answer"] is None
    with pytest.raises(ValueError, match="--structured-outputs"):
        interpret(data_dir, lm, configs="strings", limit=1, out=tmp_path / "bad", structured_outputs="yes")
    # a resumed run keeps the setting its episodes were generated under
    other = "off" if setting == "auto" else "on"
    with pytest.raises(ValueError, match=f"structured_outputs='{setting}' \\(now '{other}'\\)"):
        interpret(
            data_dir, lm, configs="strings", limit=2, rounds=3, out=out, progress=False, structured_outputs=other
        )


@pytest.mark.slow
def test_every_embedded_turn_is_a_command_or_an_answer(embedded_lm, data_dir, tmp_path):
    out = interpret(
        data_dir,
        embedded_lm,
        configs="numeric,neurons_entities",
        limit=1,
        rounds=2,
        max_tokens=96,
        out=tmp_path / "run",
        progress=False,
    )
    assert json.loads((out / "run.json").read_text())["structured_outputs_applied"] is True
    episodes = [json.loads(p.read_text()) for p in sorted(out.glob("*/aia/f*/episode.json"))]
    assert len(episodes) == 2
    for record in episodes:
        turns = [m["content"] for m in record["messages"] if m["role"] == "assistant"]
        assert turns and all(parse_commands(t) or parse_answer(t) is not None for t in turns), turns
        assert record["answer"] is not None  # the last turn answers


@pytest.mark.parametrize(("setting", "applied"), [("auto", True), ("off", False)])
def test_the_inspect_engine_applies_the_same_turn_grammar(setting, applied, data_dir, tmp_path):
    """On Inspect the grammar travels as vLLM's structured_outputs field in the call's
    extra_body, and findbench's model API hands it to the LM: the same turns as the native engine."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    from findbench.interpret.solver import STORE_KEY
    from findbench.interpret.task import find_interpret

    lm = GrammarAgent()
    task = find_interpret(
        configs="strings", limit=1, data=str(data_dir), rounds=3, judge=None, structured_outputs=setting
    )
    [log] = inspect_eval(
        task,
        model=get_model("findbench/grammar-agent", lm=lm, memoize=False),
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    assert log.status == "success"
    episode = log.samples[0].store[STORE_KEY]
    if applied:
        assert lm.constraints == [turn_constraint("strings")] * 2 + [turn_constraint("strings", answer_only=True)]
        assert episode["answer"]["description"] == "my guess" and episode["rounds"] == 3
    else:
        assert lm.constraints == [None] * 3 and episode["answer"] is None
