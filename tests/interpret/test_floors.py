"""Floors from the agent's own observations, the `observed` reference interpreter and degenerate answers.

Floors are checked against values computed by hand on small rows; the `observed` interpreter
runs through the real Inspect loop on the harness's small dataset folder, and its margin is 0."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from findbench.find.rows import load_rows
from findbench.interpret.config import EvaluateConfig
from findbench.interpret.evaluate import FLOOR_COLUMNS, _degenerate, evaluate_run
from findbench.interpret.floors import (
    MAX_FLOOR_INPUTS,
    floor_answers,
    lookup_code,
    numeric_floor_codes,
    observed_pairs,
    observed_plan,
    recorded_inputs,
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


def test_floor_pairs_are_the_recorded_inputs_run_through_the_function():
    row = load_rows("strings")[0]
    f = _row_function(row)
    episode = {"calls": [calls(["b", "a", "x" * 501], ["forged", None, None], [None, "boom", None]),
                         calls(["a", "c"], [99.0, 30.0]), "junk", {"inputs": 3}]}
    assert recorded_inputs(episode) == ["a", "b", "c"]  # distinct, sorted; an input over the length cap dropped
    assert recorded_inputs(None) == [] and recorded_inputs({"calls": ["junk", {"inputs": 3}]}) == []
    # the outputs the record shows are never read: the function gives them
    assert observed_pairs(row, ["a", "b"]) == [("a", f("a")), ("b", f("b"))]
    many = {"calls": [calls([str(i) for i in range(MAX_FLOOR_INPUTS + 50)], [])]}
    kept = recorded_inputs(many, "strings/f00000")
    assert len(kept) == MAX_FLOOR_INPUTS and kept == recorded_inputs({"calls": many["calls"][::-1]}, "strings/f00000")


def _row_function(row):
    from findbench.find import load_function

    return load_function(row)


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
    entities = floor_answers("neurons_entities", [("mammoth", 0.98), ("fossil", 0.9)])
    assert {a.description for a in entities} <= {"mammoth, fossil", "fossil, mammoth"}
    assert all(a.code is None for a in entities)
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
    config = EvaluateConfig(run, judge=KnowingJudge({"strings": strings}), out=tmp_path / "out")
    result = evaluate_run(config, progress=False)
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
    from tests.interpret.fakes import interpret

    out = interpret(str(data_dir), "observed", configs=["numeric", "strings"], limit=3, rounds=3,
                              out=tmp_path / "run", progress=False, observed_calls=12)
    info = json.loads((out / "run.json").read_text())
    assert info["observed_calls"] == 12
    episode = json.loads(next((out / "numeric" / "aia").glob("f*/episode.json")).read_text())
    assert len(episode["calls"]) == 1 and len(episode["calls"][0]["inputs"]) == 12 and episode["finished"]
    rows = {c: load_rows(c, data=data_dir) for c in ("strings",)}
    result = evaluate_run(EvaluateConfig(out, judge=KnowingJudge(rows), out=tmp_path / "scores"), progress=False)
    for category, metrics in (("numeric", ("nmse_success",)), ("strings", ("exact_match", "unit_test_accuracy"))):
        cell = result["scores"][category]["aia"]
        for metric in metrics:
            assert cell[f"{metric}_margin"] == 0.0, (category, metric, cell)


def _run_folder(root: Path, episodes: list[tuple[dict, str, str, list]]) -> Path:
    root.mkdir()
    (root / "run.json").write_text(json.dumps({"interpreter": "t", "seed": 0, "source": "procedural"}))
    for row, description, code, episode_calls in episodes:
        _episode(root, row, description, code, episode_calls)
    return root


def _per_function(out: Path) -> dict[str, dict]:
    from findbench._io import read_csv_rows

    return {r["function_id"]: r for r in read_csv_rows(out / "per_function.csv")}


def _clean_numeric(predicate) -> list[dict]:
    return [r for r in load_rows("numeric") if r["subcategory"] == "atomic" and not r.get("corruption_type")
            and not json.loads(r["params"]).get("noise") and predicate(r)]


def _honest(f, xs) -> list[float]:
    return [float(f(float(x))) for x in xs]


def test_a_call_at_huge_inputs_or_a_failing_floor_never_stops_the_run(tmp_path, monkeypatch):
    """`PYTHON(function.py 1e308 -1e308)` on a function finite there: the fit overflows in float64
    and the floor is still computed; a floor that cannot be computed at all is left empty with its
    reason (per_function.csv and table.md) and every episode is scored."""
    from findbench.find import load_function
    from findbench.interpret import floors

    def finite_far(row):
        f = load_function(row)
        return all(math.isfinite(v) and v != 0 for v in _honest(f, ["1e308", "-1e308"]))

    far, other, third = _clean_numeric(finite_far)[:1] + _clean_numeric(lambda r: "linear" in r["name"].lower())[:2]
    xs = ["1e308", "-1e308", "-3", "5"]
    episodes = [(row, "", "def function(x):\n    return 0\n", [calls(xs, _honest(load_function(row), xs))])
                for row in (far, other, third)]
    original = floors.floor_answers

    def failing(category, pairs, *, key="", **kwargs):
        if key == third["function_id"]:
            raise MemoryError("no room for this floor")
        return original(category, pairs, key=key, **kwargs)

    monkeypatch.setattr(floors, "floor_answers", failing)
    run = _run_folder(tmp_path / "run", episodes)
    result = evaluate_run(EvaluateConfig(run, out=tmp_path / "out"), progress=False)
    per = _per_function(tmp_path / "out")
    assert math.isfinite(float(per[far["function_id"]]["nmse_observed"])) and not per[far["function_id"]][
        "floor_missing"]
    assert float(per[other["function_id"]]["nmse_observed"]) < 1e-9  # points of a line: the line is exact
    missing = per[third["function_id"]]
    assert missing["nmse"] and not missing["nmse_observed"] and not missing["nmse_margin"]
    assert "MemoryError: no room for this floor" in missing["floor_missing"]
    assert "Floors missing: 1 episode(s)" in result["table"] and third["function_id"] in result["table"]
    assert result["scores"]["numeric"]["aia"]["nmse_success_margin_n"] == 2


def test_deleted_or_zeroed_outputs_do_not_move_the_floor_and_the_plan_margin_ignores_the_calls(tmp_path):
    (row,) = _clean_numeric(lambda r: "linear" in r["name"].lower())[:1]
    from findbench.find import load_function

    xs = ["-100", "50", "7"]
    honest = calls(xs, _honest(load_function(row), xs))
    variants = {"honest": [honest], "zeroed": [calls(xs, [0.0] * 3)],
                "deleted": [{**honest, "outputs": [], "errors": []}], "no calls": []}
    found = {}
    for name, episode_calls in variants.items():
        run = _run_folder(tmp_path / name, [(row, "", "def function(x):\n    return 0\n", episode_calls)])
        result = evaluate_run(EvaluateConfig(run, out=tmp_path / f"{name}-out"), progress=False)
        found[name] = (_per_function(tmp_path / f"{name}-out")[row["function_id"]], result["scores"]["numeric"]["aia"])
    floor = {name: per["nmse_observed"] for name, (per, _) in found.items()}
    assert floor["honest"] == floor["zeroed"] == floor["deleted"] and float(floor["honest"]) < 1e-9
    assert float(floor["no calls"]) > 0.1  # no input called: the constant answer
    plan = {name: (per["nmse_plan"], per["nmse_margin_plan"], cell["nmse_success_margin_plan"])
            for name, (per, cell) in found.items()}
    assert len(set(plan.values())) == 1 and float(plan["honest"][0]) < 1e-9
    assert found["no calls"][1]["nmse_success_margin"] == 0.0 and plan["no calls"][2] == -1.0
    from findbench.interpret.scoreboard import render_comparison
    from findbench.interpret.scores import Scores

    table = render_comparison({"t": Scores.read(tmp_path / "no calls-out" / "scores.json")})
    assert "#### Margin over the observed plan's floor" in table
    assert "t: margin over the observed plan's floor" in (tmp_path / "no calls-out" / "table.md").read_text()


def test_no_call_order_or_length_lowers_the_description_floor(tmp_path):
    """One long junk call first left the old floor (pairs in call order, dropped from the end) almost
    nothing; now the same calls in any order give the same floor and margin."""
    from findbench.find import load_function
    from tests.interpret.fakes import ListingJudge

    row = load_rows("strings")[0]
    f = load_function(row)
    tests = [str(t["inputs"][t["correct"] - 1]) for t in row["unit_tests"]]
    junk = "q" * 480
    orders = {"junk first": [junk, *tests], "junk last": [*tests, junk]}
    margins = {}
    for name, xs in orders.items():
        run = _run_folder(tmp_path / name, [(row, row["description"], "", [calls(xs, [f(x) for x in xs])])])
        evaluate_run(EvaluateConfig(run, judge=ListingJudge(), out=tmp_path / f"{name}-out"), progress=False)
        per = _per_function(tmp_path / f"{name}-out")[row["function_id"]]
        margins[name] = (per["unit_test_accuracy_observed"], per["unit_test_accuracy_margin"])
    assert margins["junk first"] == margins["junk last"]
    assert float(margins["junk first"][0]) >= 0.5  # the listed test inputs reach the judge


def test_observed_calls_are_bounded_by_one_message_of_the_protocol(tmp_path):
    from findbench.constants import UsageError
    from findbench.interpret.config import InterpretConfig
    from findbench.interpret.floors import MAX_OBSERVED_CALLS

    assert MAX_OBSERVED_CALLS == 2000
    assert InterpretConfig(interpreter="observed", observed_calls=2000).observed_calls == 2000
    for calls_ in (2001, 10**6):
        with pytest.raises(UsageError, match=r"^--observed-calls: at most 2000 "):
            InterpretConfig(interpreter="observed", observed_calls=calls_)
    with pytest.raises(ValueError, match="observed_calls"):
        observed_plan({"category": "numeric", "function_id": "numeric/f00000"}, [], calls=2001)


def test_the_observed_interpreter_answers_from_the_calls_it_recorded(by_id, tmp_path):
    """In the tools protocol its text commands are not tool calls and run nothing: its answer is then
    the floor of no observation (the constant answer), not the floor of a plan that never ran."""
    from findbench.interpret.floors import observed_turns
    from findbench.interpret.references import CONSTANT_ANSWERS
    from tests.interpret.scripted import run_episode

    row = by_id["numeric/f00000"]
    turns = observed_turns(row, [], calls=12, seed=0)
    text = run_episode(row, None, reference=turns, log_dir=tmp_path / "text", rounds=3)
    assert len(text.calls[0]["inputs"]) == 12 and "return 2.0 * x + -1.0" in text.answer.code  # the line's exact
    tools = run_episode(row, None, reference=turns, log_dir=tmp_path / "tools", rounds=3, protocol="tools")
    assert tools.calls == [] and tools.answer.code.strip() == CONSTANT_ANSWERS["numeric"].code.strip()
