"""Near-miss unit tests (``unit_tests_near``): the triplet assembler and the string functions'."""

from __future__ import annotations

import collections
import json
import random

import pytest

from findbench import schema
from findbench.find import strings
from findbench.find.strings import OPERATIONS, make_function, near_miss_steps, near_miss_unit_tests
from findbench.find.unit_tests import NearMissTests, near_miss_tests


def test_near_miss_tests_place_the_item_among_distinct_near_misses():
    items = [(f"x{k}", f"y{k}") for k in range(12)]

    def near(item):
        x, y = item
        if x == "x3":  # one near miss only (twice, and once equal to the item itself): skipped
            return [(x, y), (x, "a"), (x, "a")]
        return [(x, y), (x, "a"), (x, "a"), (x, "b"), (x, "c")]

    got = near_miss_tests(items, near, rng=random.Random(0))
    assert got.skipped == 1 and len(got.tests) == 10
    assert [t["inputs"][t["correct"] - 1] for t in got.tests] == [x for x, _ in items if x != "x3"][:10]
    for t in got.tests:
        k = t["correct"] - 1
        assert t["outputs"][k].startswith("y") and len(set(t["inputs"])) == 1
        assert sorted(o for j, o in enumerate(t["outputs"]) if j != k) == ["a", "b"]  # the first two distinct
    assert near_miss_tests(items, near, rng=random.Random(0)) == got
    positions = collections.Counter(t["correct"] for t in near_miss_tests(items * 30, near, rng=random.Random(1),
                                                                          n_tests=300).tests)
    assert set(positions) == {1, 2, 3} and min(positions.values()) > 70


def test_near_miss_tests_of_words_and_running_out():
    words = iter(f"w{k}" for k in range(100))
    got = near_miss_tests([f"c{k}" for k in range(10)], lambda _w: words, rng=random.Random(2))
    assert all(t["outputs"] is None and len(set(t["inputs"])) == 3 for t in got.tests)
    assert len({w for t in got.tests for w in t["inputs"]}) == 30  # one shared stream: no word twice
    with pytest.raises(ValueError, match="candidates: only 9 of 10"):
        near_miss_tests(
            [("x", "y")] * 9 + [("z", "y")],
            lambda item: [(item[0], "q"), (item[0], "r")] * (item[0] == "x"),
            rng=random.Random(0),
        )


def _steps(*ops):
    return strings.validate_params({"ops": [{"op": name, "params": params} for name, params in ops]})


def test_near_miss_steps_change_one_step_by_a_parameter_or_a_sibling():
    steps = _steps(("caesar_shift", {"shift": 3}), ("remove_char", {"char": "a"}))
    misses = near_miss_steps(steps, random.Random(0))
    assert len({strings._key(m) for m in misses}) == len(misses) and strings._key(steps) not in {
        strings._key(m) for m in misses
    }
    shifts = {m[0][1]["shift"] for m in misses if m[0][0].name == "caesar_shift" and m[1] == steps[1]}
    assert {2, 4, -3} <= shifts  # one step either way, and the other direction
    assert any(m[1][0].name == "remove_char" and m[1][1] == {"char": "A"} for m in misses)  # the other case
    for m in misses:
        changed = [k for k in range(2) if m[k] != steps[k]]
        assert len(changed) == 1  # exactly one step differs ...
        (k,) = changed
        assert m[k][0].family == steps[k][0].family  # ... by a parameter or an operation of its family
    siblings = {m[0][0].name for m in misses if m[0][0].name != "caesar_shift"}
    assert siblings == {s.name for s in OPERATIONS.values() if s.family == "shift"} - {"caesar_shift"}
    # a sibling keeps the parameters it shares with the step when they are valid for it
    assert all(m[0][1]["shift"] == 3 for m in misses if m[0][0].name in ("shift_first_char", "shift_last_char"))


def test_near_miss_outputs_of_an_atomic_function_are_its_siblings():
    steps = _steps(("uppercase", {}))
    got = near_miss_unit_tests(
        steps,
        ["Hello World", "the cat", "MiXeD", "a b c", "Quiet", "ok go", "Tom & Jerry", "alpha beta", "x1y2", "Bob"],
        random.Random(0),
    )
    siblings = [
        OPERATIONS[n].impl
        for n in ("lowercase", "swapcase", "capitalize_first", "title_case", "alternate_case", "uppercase_vowels")
    ]
    for t in got.tests:
        x = t["inputs"][0]
        assert t["outputs"][t["correct"] - 1] == x.upper()
        wrong = [o for j, o in enumerate(t["outputs"]) if j != t["correct"] - 1]
        assert all(o in {f(x) for f in siblings} and o != x.upper() for o in wrong)


def test_inputs_without_two_near_misses_are_replaced():
    steps = _steps(("reverse", {}))
    # on "a" every sibling (reverse the words, the halves, the vowels, ...) answers "a" too
    got = near_miss_unit_tests(steps, ["a"] + [f"word{k}x" for k in range(9)], random.Random(0))
    assert got.skipped >= 1 and len(got.tests) == 10 and "a" not in {t["inputs"][0] for t in got.tests}


@pytest.fixture(scope="module")
def rows():
    return strings.generate(80, seed=3, progress=False)


def test_string_rows_near_tests_share_the_input_and_only_the_function_makes_the_right_output(rows):
    for row in rows:
        fn = make_function(row)
        namespace: dict = {}
        exec(row["code"], namespace)  # the row's own code
        assert len(row["unit_tests_near"]) == 10
        for t in row["unit_tests_near"]:
            k = t["correct"] - 1
            assert len(t["inputs"]) == len(t["outputs"]) == 3 and len(set(t["inputs"])) == 1
            x = t["inputs"][0]
            assert t["outputs"][k] == fn(x) == namespace["function"](x)
            wrong = [o for j, o in enumerate(t["outputs"]) if j != k]
            assert len(set(wrong)) == 2 and fn(x) not in wrong
        # the test inputs come first, in their order; new inputs only replace those without two near misses
        inputs = [t["inputs"][0] for t in row["unit_tests_near"]]
        own = [x for x in row["test_inputs"] if x in inputs]
        assert inputs[: len(own)] == own and len(set(inputs)) == 10
        schema.check_row(row)


def test_string_near_tests_are_deterministic_and_leave_everything_else_as_it_was(rows, monkeypatch):
    assert strings.generate(80, seed=3, progress=False) == rows
    monkeypatch.setattr(strings, "near_miss_unit_tests", lambda *a: NearMissTests([]))
    without = strings.generate(80, seed=3, progress=False)
    assert [{**r, "unit_tests_near": []} for r in rows] == without


def test_the_judge_reads_near_tests_as_it_reads_unit_tests(rows):
    from findbench.judge import check_unit_tests, normalize_unit_test, render_judge_prompt

    near = [[normalize_unit_test(t) for t in row["unit_tests_near"]] for row in rows[:5]]
    check_unit_tests(near, "strings", argument="unit_tests_near")
    prompt = render_judge_prompt(rows[0]["description"], near[0][0], "strings")[1]["content"]
    x = near[0][0]["inputs"][0]
    assert all(
        f"{k}. {json.dumps(x, ensure_ascii=False)} -> {json.dumps(o, ensure_ascii=False)}" in prompt
        for k, o in enumerate(near[0][0]["outputs"], 1)
    )


def test_a_function_without_enough_near_misses_is_named(monkeypatch):
    def short(*a):
        raise ValueError("candidates: only 3 of 10 items have 2 distinct near misses")

    monkeypatch.setattr(strings, "near_miss_unit_tests", short)
    with pytest.raises(ValueError, match=r"unit_tests_near of strings/f00000 \(.+\): candidates: only 3 of 10"):
        strings.generate(5, seed=0, progress=False)
