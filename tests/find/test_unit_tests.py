"""Schema helpers and the unit-test triplet rules (FIND §3.1)."""

import collections

import pytest

from findbench import schema
from findbench.find.unit_tests import build_unit_tests


def test_function_id_round_trip():
    assert schema.function_id("numeric", 42) == "numeric/f00042"
    assert schema.parse_function_id("strings/f00999") == ("strings", 999)


@pytest.mark.parametrize("bad", ["numeric", "numbers/f00001", "numeric/42", "numeric/fabc", 7])
def test_parse_function_id_rejects(bad):
    with pytest.raises(ValueError, match="function_id"):
        schema.parse_function_id(bad)


def test_empty_row_names_unknown_column():
    with pytest.raises(ValueError, match="descripton"):
        schema.empty_row(descripton="typo")
    row = schema.empty_row(function_id="numeric/f00001", category="numeric")
    assert row["unit_tests"] == [] and row["code"] is None
    schema.check_row(row)


def test_check_row_names_bad_field():
    row = schema.empty_row(function_id="numeric/f00001", params="{not json")
    with pytest.raises(ValueError, match="params"):
        schema.check_row(row)
    row = schema.empty_row(
        function_id="numeric/f00001", unit_tests=[{"inputs": ["a", "b", "c"], "outputs": None, "correct": 4}]
    )
    with pytest.raises(ValueError, match="correct"):
        schema.check_row(row)


def _pairs(n_functions=20, n_items=10):
    return [[(f"in{f}-{k}", f"out{f}-{k}") for k in range(n_items)] for f in range(n_functions)]


def test_unit_tests_rules_pairs():
    items = _pairs()
    tests = build_unit_tests(items, seed=3)
    assert len(tests) == 20 and all(len(t) == 10 for t in tests)
    positions = collections.Counter()
    for f, function_tests in enumerate(tests):
        for k, t in enumerate(function_tests):
            c = t["correct"]
            assert 1 <= c <= 3
            positions[c] += 1
            assert (t["inputs"][c - 1], t["outputs"][c - 1]) == items[f][k]
            others = [(i, o) for j, (i, o) in enumerate(zip(t["inputs"], t["outputs"])) if j != c - 1]
            assert len(set(others)) == 2
            for i, o in others:
                assert (i, o) != items[f][k]
                assert not i.startswith(f"in{f}-")  # distractors come from other functions
    # correct position roughly uniform over 200 tests
    assert all(45 <= positions[p] <= 90 for p in (1, 2, 3)), positions


def test_unit_tests_words_and_determinism():
    words = [[f"w{f}_{k}" for k in range(10)] for f in range(5)]
    a = build_unit_tests(words, seed=0)
    assert a == build_unit_tests(words, seed=0)
    assert a != build_unit_tests(words, seed=1)
    assert all(t["outputs"] is None for ft in a for t in ft)


def test_unit_tests_distractor_never_equals_correct_even_when_shared():
    # function 1 shares an item with function 0: it must never be a distractor for it
    items = [[("x", "1"), ("y", "2")], [("x", "1"), ("z", "3"), ("w", "4")], [("q", "5"), ("r", "6")]]
    for seed in range(20):
        for t in build_unit_tests(items, seed=seed)[0]:
            pairs = list(zip(t["inputs"], t["outputs"]))
            assert len(set(pairs)) == 3


def test_unit_tests_bad_input():
    with pytest.raises(ValueError, match="correct_items"):
        build_unit_tests([["a"]], seed=0)
    with pytest.raises(TypeError, match="seed"):
        build_unit_tests([["a"], ["b"]], seed="0")
    with pytest.raises(TypeError, match="correct_items"):
        build_unit_tests([["a"], [("b", "c")]], seed=0)


def test_unit_tests_respect_allowed_and_is_correct():
    # functions 0 and 1 are "the same family" (not allowed to lend to each other); items whose
    # output is "x" count as right for function 2 and must never be its distractors
    items = [[(f"i{f}{k}", "x" if f == 3 else f"o{f}{k}") for k in range(10)] for f in range(6)]
    family = {0: 0, 1: 0, 2: 1, 3: 2, 4: 3, 5: 4}
    tests = build_unit_tests(
        items,
        seed=5,
        allowed=lambda i, j: family[i] != family[j],
        is_correct=lambda i, item: i == 2 and item[1] == "x",
    )
    for f, function_tests in enumerate(tests):
        for t in function_tests:
            for k, (x, y) in enumerate(zip(t["inputs"], t["outputs"])):
                if k == t["correct"] - 1:
                    continue
                owner = int(x[1])
                assert family[owner] != family[f]
                assert not (f == 2 and y == "x")


def test_unit_tests_without_valid_distractors_is_an_error():
    with pytest.raises(ValueError, match="distractors"):
        build_unit_tests([["a"], ["b"], ["c"]], seed=0, is_correct=lambda i, item: True)
