"""The ``rasp`` config through the interpreter harness: calls to the compiled model, the references
and floors, and ``findbench evaluate``'s code metric and unit tests."""

from __future__ import annotations

import csv
import json

import pytest

from findbench.find import load_rows
from findbench.find.rasp import black_box
from findbench.interpret.calls import FunctionRunner
from findbench.interpret.config import EvaluateConfig, InterpretConfig
from findbench.interpret.evaluate import evaluate_run
from findbench.interpret.floors import floor_answers, observed_plan, rasp_floor_answers
from findbench.interpret.prompts import build_messages
from findbench.interpret.protocol import CallError
from findbench.interpret.references import constant_answer, oracle_answer
from findbench.interpret.run import run_interpretations
from tests.interpret.fakes import KnowingJudge

IDS = ("rasp/f00030", "rasp/f00200")


@pytest.fixture(scope="module")
def rows():
    by_id = {r["function_id"]: r for r in load_rows("rasp", seed=0)}
    return [by_id[f] for f in IDS]


def test_calls_run_the_compiled_model_on_token_sequences(rows):
    row = rows[0]  # fraction of the tokens so far equal to 4
    shown, outputs = FunctionRunner(row).evaluate(["4 4 2", "[4, 1]", "4,9", ""])
    assert shown[:2] == ["[4, 4, 2]", "[4, 1]"]
    assert outputs[:2] == ["[1.0, 1.0, 0.6667]", "[1.0, 0.5]"]
    assert isinstance(outputs[2], CallError) and "9" in outputs[2].message and "vocabulary" in outputs[2].message
    assert isinstance(outputs[3], CallError) and "empty" in outputs[3].message


def test_prompt_states_the_domain_never_the_program(rows):
    row = rows[0]
    text = build_messages(row, "aia", protocol="text")[1]["content"]
    assert "Its tokens are 0 1 2 3 4 5 6; a sequence has 1 to 6 tokens." in text
    assert "def function(x)" in text
    program = json.loads(row["program"])
    assert not any(op["name"] in text for op in program["ops"] if len(op["name"]) > 3)
    assert row["code"] not in text


def test_observed_plan_is_in_domain_and_apart_from_the_tests(rows):
    row = rows[1]
    plan = observed_plan(row, [], calls=40, seed=0)
    assert len(plan) == 40 and plan == observed_plan(row, [], calls=40, seed=0)
    shown = {" ".join(str(t) for t in json.loads(x)) for x in row["test_inputs"]}
    assert not shown & set(plan)
    assert all(isinstance(y, str) for y in FunctionRunner(row).evaluate(plan)[1])


def test_lookup_floor_answers_what_it_saw_and_copies_the_rest():
    code = black_box.lookup_code([("1 2", "[5, 6]"), ("[3]", "[0.5]"), ("bad", "not json")])
    env: dict = {}
    exec(compile(code, "<floor>", "exec"), env)  # noqa: S102 - our own generated code
    assert env["function"]([1, 2]) == [5, 6] and env["function"]([3]) == [0.5]
    assert env["function"]([4, 4]) == [4, 4]
    answers = floor_answers("rasp", [("1 2", "[5, 6]")], key="k")
    assert answers[0].code is not None and "Function input - output pairs" in answers[0].description


def test_references_and_fixed_floors_on_a_rasp_row(rows):
    row = rows[0]
    assert oracle_answer(row).code == row["code"]
    constant = constant_answer(row).code
    assert "len(tokens)" in constant and constant != row["code"]
    family, hedged = rasp_floor_answers(row)
    assert family.description == "frac prev" and "list(tokens)" in hedged.code
    assert "frac prev" in hedged.description and hedged.description.count(",") >= 2


@pytest.fixture(scope="module")
def scored(rows, tmp_path_factory):
    root = tmp_path_factory.mktemp("rasp-runs")
    out = {}
    for name in ("oracle", "constant", "observed"):
        run = run_interpretations(InterpretConfig(interpreter=name, out=str(root / name), functions=",".join(IDS)),
                                  progress=False)
        out[name] = evaluate_run(EvaluateConfig(run, judge=KnowingJudge(rows), out=root / f"{name}-scores"),
                                 progress=False)
    return out


def test_oracle_scores_full_marks_and_the_floors_below(scored):
    oracle = scored["oracle"]["scores"]["rasp"]["aia"]
    assert oracle["exact_match"] == 1.0 and oracle["position_accuracy"] == 1.0
    assert oracle["unit_test_accuracy"] == 1.0 and oracle["exact_match_n"] == 2
    # beside it: the floor (the best of the lookup table, constant output and copy) and the margin over it
    assert oracle["exact_match_observed"] < 1.0 and oracle["exact_match_margin"] > 0.0
    assert oracle["position_accuracy_observed"] < 1.0 and oracle["exact_match_ci"][0] <= 1.0
    for name in ("constant", "observed"):
        cell = scored[name]["scores"]["rasp"]["aia"]
        assert cell["exact_match"] < 1.0 and cell["position_accuracy"] < 1.0, name
        assert cell["unit_test_accuracy"] < 1.0, name
    assert "rasp code (exact match)" in scored["oracle"]["table"]


def test_per_function_csv_has_the_rasp_columns(scored):
    with open(f"{scored['observed']['out']}/per_function.csv", encoding="utf-8") as f:
        found = list(csv.DictReader(f))
    assert [r["function_id"] for r in found] == list(IDS)
    for r in found:
        assert 0.0 <= float(r["position_accuracy"]) < 1.0 and r["position_accuracy_observed"] != ""
