"""Floors from the agent's own observations, the `observed` reference interpreter and degenerate answers.

Floors are checked against values computed by hand on small rows; the `observed` interpreter
runs through the real Inspect loop on the harness's small dataset folder, and its margin is 0."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from findbench.find.rows import load_rows
from findbench.interpret.evaluate import FLOOR_COLUMNS, _degenerate, evaluate_run
from findbench.interpret.floors import (
    floor_answers,
    lookup_code,
    numeric_floor_codes,
    observed_pairs,
    observed_plan,
)
from findbench.interpret.truth import row_fingerprint
from tests.interpret.fakes import KnowingJudge


def _function(code: str):
    namespace: dict = {}
    exec(code, namespace)  # our own floor code, not a model's
    return namespace["function"]


def calls(inputs, outputs, errors=None):
    return {"round": 1, "command": "PYTHON(...)", "inputs": list(inputs), "outputs": list(outputs),
            "errors": list(errors or [None] * len(inputs))}


def test_observed_pairs_keep_first_successful_call_of_each_input():
    episode = {"calls": [calls(["1", "2", "x"], [10.0, None, None], [None, "boom", "not a number"]),
                         calls(["1", "3"], [99.0, 30.0])]}
    assert observed_pairs(episode) == [("1", 10.0), ("3", 30.0)]
    assert observed_pairs(None) == [] and observed_pairs({"calls": ["junk", {"inputs": 3}]}) == []


def test_numeric_floors_equal_hand_computed_fits():
    pairs = [("0", 1.0), ("1", 3.0), ("2", 5.0), ("2.0", 7.0)]  # x = 2 twice: its mean output, 6
    codes = numeric_floor_codes(pairs)
    assert list(codes) == ["constant", "line", "interpolation"]
    constant, line, interp = (_function(codes[k]) for k in codes)
    assert constant(123.0) == pytest.approx((1 + 3 + 6) / 3)
    # least squares through (0, 1), (1, 3), (2, 6): slope 2.5, intercept 5/6
    assert line(0.0) == pytest.approx(5 / 6) and line(1.0) == pytest.approx(5 / 6 + 2.5)
    assert interp(0.5) == pytest.approx(2.0) and interp(1.5) == pytest.approx(4.5)
    assert interp(-50.0) == 1.0 and interp(50.0) == 6.0  # flat outside the called range
    assert numeric_floor_codes([("a", "b")]) == {}


def test_lookup_floor_and_examples_only_description():
    fn = _function(lookup_code([("abc", "cba"), ("x y", "y x")]))
    assert (fn("abc"), fn("x y"), fn("unseen")) == ("cba", "y x", "unseen")
    (answer,) = floor_answers("strings", [("abc", "cba")])
    assert "(abc, cba)" in answer.description and answer.code
    (entities,) = floor_answers("neurons_entities", [("mammoth", 0.98), ("fossil", 0.9)])
    assert entities.description == "mammoth, fossil" and entities.code is None
    # no observation: the constant reference answer
    assert floor_answers("numeric", [])[0].code.strip().endswith("return 0")


def test_observed_plan_is_seeded_and_never_uses_the_functions_own_tests():
    numeric = observed_plan({"category": "numeric", "function_id": "numeric/f00000"}, [], calls=5)
    assert numeric == ["-128", "-64", "0", "64", "128"]
    rows = load_rows("strings")[:20]
    plan = observed_plan(rows[0], rows, calls=15, seed=3)
    assert plan == observed_plan(rows[0], rows, calls=15, seed=3) != observed_plan(rows[0], rows, calls=15, seed=4)
    own = {str(x).lower() for x in rows[0]["test_inputs"]} | {
        str(x).lower() for t in rows[0]["unit_tests"] for x in t["inputs"]}
    assert len(plan) == 15 and not own & {x.lower() for x in plan}
    with pytest.raises(ValueError, match="observed_calls"):
        observed_plan(rows[0], rows, calls=0)


def test_degenerate_answers_are_flagged():
    recs = [{"function_id": f"strings/f0000{i}", "category": "strings", "method": "aia", "description": d}
            for i, d in enumerate(["", "In words, what f(x) does.", "same answer", "Same  answer", "a real rule"])]
    assert _degenerate(recs) == ["empty", "placeholder", "identical to 1 other function(s)",
                                        "identical to 1 other function(s)", ""]


def _episode(root: Path, row: dict, description: str, code: str, episode_calls: list) -> None:
    category, local = row["function_id"].split("/")
    folder = root / category / "aia" / local
    folder.mkdir(parents=True)
    (folder / "description.txt").write_text(description)
    (folder / "code.py").write_text(code)
    (folder / "episode.json").write_text(json.dumps({"function_id": row["function_id"], "category": category,
                                                     "method": "aia", "calls": episode_calls, "row": row,
                                                     "row_fingerprint": row_fingerprint(row)}))


def test_evaluate_reports_floors_margins_and_degenerate_answers(tmp_path):
    linear = next(r for r in load_rows("numeric") if r["subcategory"] == "atomic" and "linear" in r["name"].lower()
                  and not r.get("corruption_type") and not json.loads(r["params"]).get("noise"))
    strings = load_rows("strings")[:2]
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"interpreter": "t", "seed": 0, "source": "procedural"}))
    from findbench.find import load_function

    f = load_function(linear)
    xs = ["-100", "50"]
    _episode(run, linear, "", "def function(x):\n    return 0\n", [calls(xs, [float(f(float(x))) for x in xs])])
    g = load_function(strings[0])
    seen = list(strings[0]["test_inputs"])[:4]  # the agent happened to call 4 of the 10 test inputs
    _episode(run, strings[0], strings[0]["description"], strings[0]["code"], [calls(seen, [g(x) for x in seen])])
    _episode(run, strings[1], "In words, what f(x) does.", "", [])
    result = evaluate_run(run, judge=KnowingJudge({"strings": strings}), out=tmp_path / "out", progress=False)
    from findbench._io import read_csv_rows

    per = {r["function_id"]: r for r in read_csv_rows(tmp_path / "out" / "per_function.csv")}
    assert set(FLOOR_COLUMNS) <= set(per[linear["function_id"]])
    # two points of a line: the least-squares line is exact
    assert float(per[linear["function_id"]]["nmse_observed"]) < 1e-9
    cell = result["scores"]["numeric"]["aia"]
    assert (cell["nmse_success"], cell["nmse_success_observed"], cell["nmse_success_margin"]) == (0.0, 1.0, -1.0)
    # strings: the lookup table is right on the 4 test inputs seen, and wherever the function keeps the input
    expected = sum(x in seen or g(x) == x for x in strings[0]["test_inputs"]) / len(strings[0]["test_inputs"])
    row0 = per[strings[0]["function_id"]]
    assert float(row0["exact_match_observed"]) == pytest.approx(expected)
    assert float(row0["exact_match_margin"]) == pytest.approx(1.0 - expected)
    # no calls: the constant answer is the floor
    assert float(per[strings[1]["function_id"]]["exact_match_observed"]) == 0.0
    assert per[strings[1]["function_id"]]["degenerate"] == "placeholder"
    st = result["scores"]["strings"]["aia"]
    assert st["n_degenerate"] == 1 and st["exact_match_margin_n"] == 2
    assert st["exact_match_margin"] == pytest.approx(((1.0 - expected) + 0.0) / 2)
    assert "margin over its own observations" in result["table"] and "Degenerate answers" in result["table"]
    assert math.isfinite(st["unit_test_accuracy_observed"])


@pytest.mark.slow  # the Inspect loop, three categories of the harness's small data folder
def test_the_observed_interpreter_meets_its_own_floor(data_dir, tmp_path):
    from findbench.interpret.run import run_interpretations

    out = run_interpretations(str(data_dir), "observed", configs=["numeric", "strings"], limit=3, rounds=3,
                              out=tmp_path / "run", progress=False, observed_calls=12)
    info = json.loads((out / "run.json").read_text())
    assert info["observed_calls"] == 12
    episode = json.loads(next((out / "numeric" / "aia").glob("f*/episode.json")).read_text())
    assert len(episode["calls"]) == 1 and len(episode["calls"][0]["inputs"]) == 12 and episode["finished"]
    rows = {c: load_rows(c, data=data_dir) for c in ("strings",)}
    result = evaluate_run(out, judge=KnowingJudge(rows), out=tmp_path / "scores", progress=False)
    for category, metrics in (("numeric", ("nmse_success",)), ("strings", ("exact_match", "unit_test_accuracy"))):
        cell = result["scores"][category]["aia"]
        for metric in metrics:
            assert cell[f"{metric}_margin"] == 0.0, (category, metric, cell)
