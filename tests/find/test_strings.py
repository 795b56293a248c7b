"""FIND string functions: hand-checked operations, generator invariants, code/callable agreement,
unit tests and input validation."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from findbench import schema
from findbench.find import string_ops as so
from findbench.find import strings as S


def fn(op: str, s: str, **params) -> str:
    """Apply one registry operation through make_function (params validated as in a row)."""
    return S.make_function({"ops": [{"op": op, "params": params}]})(s)


@pytest.fixture(scope="module")
def rows():
    return S.generate(1000, seed=0, progress=False)


# ----------------------------------------------------------------------------- hand-checked ops


@pytest.mark.parametrize(
    "n, words",
    [(0, "zero"), (7, "seven"), (13, "thirteen"), (20, "twenty"), (21, "twenty-one"), (40, "forty"),
     (99, "ninety-nine"), (100, "one hundred"), (105, "one hundred five"), (999, "nine hundred ninety-nine"),
     (2001, "two thousand one"), (1_000_000, "one million"), (-3, "minus three")],
)
def test_number_to_words(n, words):
    assert so.number_to_words(n) == words


@pytest.mark.parametrize(
    "op, s, params, expected",
    [
        # case
        ("uppercase", "abC d1", {}, "ABC D1"),
        ("lowercase", "AbC D1", {}, "abc d1"),
        ("swapcase", "aB c", {}, "Ab C"),
        ("capitalize_first", "hELLO wORLD", {}, "Hello world"),
        ("title_case", "hello  wORLD it's", {}, "Hello  World It's"),
        ("alternate_case", "abcd e", {}, "AbCd e"),
        ("uppercase_vowels", "banana split", {}, "bAnAnA splIt"),
        # reversals
        ("reverse", "abc", {}, "cba"),
        ("reverse_words", "  hello big world ", {}, "  world big hello "),
        ("reverse_each_word", "ab cd  ef", {}, "ba dc  fe"),
        ("reverse_first_half", "abcde", {}, "bacde"),
        ("reverse_second_half", "abcde", {}, "abedc"),
        ("swap_halves", "abcde", {}, "cdeab"),
        ("swap_halves", "abcd", {}, "cdab"),
        ("reverse_vowels", "hello world", {}, "hollo werld"),
        # digits / letters
        ("extract_digits", "a1b22c", {}, "122"),
        ("extract_letters", "a1 B-é", {}, "aB"),
        ("remove_digits", "a1b2", {}, "ab"),
        ("remove_vowels", "Education", {}, "dctn"),
        ("remove_duplicate_chars", "Mississippi", {}, "Misp"),
        ("digits_to_words", "a1b23", {}, "aonebtwothree"),
        # counts as words
        ("length_word", "hello", {}, "five"),
        ("length_word", "a" * 21, {}, "twenty-one"),
        ("count_vowels_word", "Apple pie", {}, "four"),
        ("count_consonants_word", "Rhythm 42", {}, "six"),
        ("count_digits_word", "Rhythm 42", {}, "two"),
        ("count_words_word", "  a b\tc ", {}, "three"),
        ("count_uppercase_word", "Hello World ÉA", {}, "three"),
        ("count_char_word", "Mamma mia", {"char": "m"}, "three"),
        ("count_substring_word", "aaaa", {"sub": "aa"}, "two"),
        ("find_substring_word", "the cat", {"sub": "at"}, "five"),
        ("find_substring_word", "the dog", {"sub": "at"}, "none"),
        # positions
        ("first_char", "hello", {}, "h"),
        ("middle_char", "abc", {}, "b"),
        ("middle_char", "abcd", {}, "c"),
        ("middle_char", "", {}, ""),
        ("last_char", "hello", {}, "o"),
        ("char_at_index", "hello", {"index": 4}, "o"),
        ("char_at_index", "hello", {"index": 5}, ""),
        ("first_char_order", "Cat", {}, "three"),
        ("middle_char_order", "abz", {}, "two"),
        ("last_char_order", "jazZ", {}, "twenty-six"),
        ("first_char_order", "1ab", {}, "none"),
        ("last_char_order", "", {}, "none"),
        # whitespace
        ("strip_whitespace", "  hi \t", {}, "hi"),
        ("strip_left", "  hi \t", {}, "hi \t"),
        ("strip_right", "  hi \t", {}, "  hi"),
        ("remove_whitespace", " a b\tc\n", {}, "abc"),
        ("collapse_whitespace", "  a \t b\n", {}, " a b "),
        # replacement / removal
        ("replace_vowels", "Banana", {"char": "*"}, "B*n*n*"),
        ("replace_char", "Hello", {"old": "l", "new": "L"}, "HeLLo"),
        ("replace_substring", "the thin thing", {"old": "th", "new": "TH"}, "THe THin THing"),
        ("replace_spaces", "a b c", {"char": "_"}, "a_b_c"),
        ("remove_char", "Mississippi", {"char": "s"}, "Miiippi"),
        ("remove_substring", "banana", {"sub": "an"}, "ba"),
        # shifts and ciphers
        ("caesar_shift", "abc", {"shift": 3}, "def"),
        ("caesar_shift", "xyz XYZ!", {"shift": 3}, "abc ABC!"),
        ("caesar_shift", "aB", {"shift": -1}, "zA"),
        ("caesar_shift_by_length", "abc", {}, "def"),
        ("caesar_shift_by_length", "z", {}, "a"),
        ("caesar_shift_by_char_order", "abc", {"index": 1, "direction": 1}, "cde"),
        ("caesar_shift_by_char_order", "abc", {"index": 1, "direction": -1}, "yza"),
        ("caesar_shift_by_char_order", "abc", {"index": 5, "direction": 1}, "abc"),
        ("caesar_shift_by_char_order", "a1c", {"index": 1, "direction": 1}, "a1c"),
        ("shift_middle_char", "abc", {"shift": 1}, "acc"),
        ("shift_first_char", "Zoo", {"shift": 1}, "Aoo"),
        ("shift_first_char", "1ab", {"shift": 1}, "1ab"),
        ("shift_last_char", "abz", {"shift": 2}, "abb"),
        ("atbash", "Abc xyz", {}, "Zyx cba"),
        ("letter_permutation", "Abc!", {"mapping": {"a": "b", "b": "c", "c": "a"}}, "Bca!"),
        # insertion / concatenation
        ("insert_at_middle", "abcd", {"text": "XY"}, "abXYcd"),
        ("insert_at_middle", "abc", {"text": "XY"}, "aXYbc"),
        ("insert_at_index", "hello", {"index": 2, "text": "-"}, "he-llo"),
        ("insert_at_index", "hello", {"index": 10, "text": "-"}, "hello-"),
        ("append_if_missing", "cat", {"char": "t"}, "cat"),
        ("append_if_missing", "dog", {"char": "t"}, "dogt"),
        ("append_if_missing", "Tom", {"char": "t"}, "Tomt"),
        ("append_text", "ab", {"text": "XyZ"}, "abXyZ"),
        ("prepend_text", "ab", {"text": "42"}, "42ab"),
        ("insert_separator", "abc", {"sep": "-"}, "a-b-c"),
        ("concat_reverse", "ab", {}, "abba"),
        # splitting
        ("split_keep_first", "a-b-c", {"char": "-"}, "a"),
        ("split_keep_last", "a-b-c", {"char": "-"}, "c"),
        ("split_reverse_pieces", "a-b-c", {"char": "-"}, "c-b-a"),
        ("split_reverse_pieces", "no dash", {"char": "-"}, "no dash"),
        # duplication
        ("duplicate_first_char", "cat", {}, "ccat"),
        ("duplicate_middle_char", "cat", {}, "caat"),
        ("duplicate_middle_char", "bird", {}, "birrd"),
        ("duplicate_last_char", "cat", {}, "catt"),
        ("duplicate_each_char", "ab c", {}, "aabb  cc"),
        # swaps
        ("swap_first_last", "hello", {}, "oellh"),
        ("swap_first_last", "a", {}, "a"),
        ("swap_indices", "abcdef", {"i": 1, "j": 4}, "aecdbf"),
        ("swap_indices", "abcdef", {"i": 1, "j": 6}, "abcdef"),
        ("swap_adjacent_pairs", "abcde", {}, "badce"),
        ("rotate_left", "abcdef", {"k": 2}, "cdefab"),
        ("rotate_left", "abcdef", {"k": 8}, "cdefab"),
    ],
)
def test_operation_examples(op, s, params, expected):
    assert fn(op, s, **params) == expected


def test_every_operation_has_an_example_and_handles_empty_string():
    source = open(__file__, encoding="utf-8").read()
    missing = [name for name in S.OPERATIONS if f'("{name}",' not in source]
    assert not missing, f"operations without a hand-checked example: {missing}"
    assert len(S.OPERATIONS) >= 67 and len(S.OPERATIONS) == len(S._OPS)  # no operation name twice
    for name, spec in S.OPERATIONS.items():
        params = spec.sample(__import__("random").Random(0))
        assert isinstance(spec.impl("", **params), str), name


def test_composition_applies_inner_then_outer():
    f = S.make_function({"ops": [{"op": "uppercase", "params": {}}, {"op": "caesar_shift", "params": {"shift": 1}}]})
    assert f("abz") == "BCA"
    g = S.make_function({"ops": [{"op": "count_vowels_word", "params": {}}, {"op": "reverse", "params": {}}]})
    assert g("education") == "evif"  # five vowels -> "five" -> reversed
    steps = S.validate_params(
        {"ops": [{"op": "uppercase", "params": {}}, {"op": "caesar_shift", "params": {"shift": 1}}]}
    )
    assert S.function_name(steps) == "caesar_shift∘uppercase"
    text = S.describe(steps)
    assert text.index("uppercase") < text.index("1 place forward")


# ----------------------------------------------------------------------------- generator


def test_generate_shape_and_schema(rows):
    assert len(rows) == 1000
    assert [r["function_id"] for r in rows] == [schema.function_id("strings", i) for i in range(1000)]
    counts = Counter(r["subcategory"] for r in rows)
    assert counts == {"composition": 700, "atomic": 300}
    for r in rows:
        schema.check_row(r)
        assert r["category"] == "strings" and r["source"] == "procedural"
        ops = json.loads(r["params"])["ops"]
        assert len(ops) == (2 if r["subcategory"] == "composition" else 1)
        assert r["name"] == "∘".join(step["op"] for step in reversed(ops))
        assert len(r["test_inputs"]) == 10 and len(set(r["test_inputs"])) == 10
        assert all(isinstance(x, str) and x for x in r["test_inputs"])
    # every operation appears somewhere, and atomics cover all of them
    atomic_names = {r["name"] for r in rows if r["subcategory"] == "atomic"}
    assert atomic_names == set(S.OPERATIONS)


def test_no_duplicates_by_params_or_behaviour(rows):
    assert len({r["params"] for r in rows}) == len(rows)
    signatures = {tuple(S.make_function(r)(p) for p in S.PROBES) for r in rows}
    assert len(signatures) == len(rows)


def test_no_degenerate_compositions(rows):
    names = {r["name"] for r in rows}
    for banned in (
        "lowercase∘uppercase",
        "uppercase∘lowercase",
        "reverse∘reverse",
        "length_word∘reverse",
        "length_word∘uppercase",
        "count_vowels_word∘reverse",
        "count_vowels_word∘swapcase",
        "reverse∘reverse_words",
        "strip_whitespace∘strip_left",
    ):
        assert banned not in names
    identity = S.PROBES
    for r in rows:
        steps = S.validate_params(r["params"])
        f = S.make_function(r)
        sig = tuple(f(p) for p in S.PROBES)
        assert sig != identity and len(set(sig)) > 1, r["name"]
        if len(steps) == 2:
            (inner, _), (outer, _) = steps
            assert S.composition_allowed(outer, inner), r["name"]
            assert inner.family != outer.family and inner.composable
            for spec, p in steps:  # never equal to one of its parts
                part = S.make_function({"ops": [{"op": spec.name, "params": p}]})
                assert sig != tuple(part(x) for x in S.PROBES), r["name"]


def test_structural_ban_rules():
    OPS = S.OPERATIONS
    assert not S.composition_allowed(OPS["lowercase"], OPS["uppercase"])
    assert not S.composition_allowed(OPS["length_word"], OPS["caesar_shift"])  # length of a length-preserving op
    assert not S.composition_allowed(OPS["count_vowels_word"], OPS["swapcase"])  # case-insensitive after case-only
    assert not S.composition_allowed(OPS["count_digits_word"], OPS["swap_halves"])  # order-insensitive after reorder
    assert not S.composition_allowed(OPS["reverse"], OPS["first_char"])  # position ops are not composable inside
    assert S.composition_allowed(OPS["caesar_shift"], OPS["uppercase"])
    assert S.composition_allowed(OPS["length_word"], OPS["remove_vowels"])


def test_determinism_and_seed_sensitivity():
    a = S.generate(60, seed=7, progress=False)
    b = S.generate(60, seed=7, progress=False)
    c = S.generate(60, seed=8, progress=False)
    assert a == b
    assert [r["params"] for r in a] != [r["params"] for r in c]
    assert Counter(r["subcategory"] for r in a) == {"composition": 42, "atomic": 18}


def test_test_inputs_reveal_parameters(rows):
    """Inputs of functions with a character/substring parameter mostly contain it (but not all)."""
    checked = 0
    for r in rows:
        steps = S.validate_params(r["params"])
        spec, p = steps[0]
        if spec.name in ("count_char_word", "remove_char", "split_keep_first", "append_if_missing"):
            hits = sum(p["char"] in x for x in r["test_inputs"])
            assert 3 <= hits <= 9, (r["name"], p, r["test_inputs"])
            checked += 1
        if spec.name in ("strip_whitespace", "strip_left", "strip_right", "collapse_whitespace"):
            assert any(x != x.strip() for x in r["test_inputs"])
        if spec.name == "char_at_index" and p["index"] >= 1:
            lengths = [len(x) for x in r["test_inputs"]]
            assert min(lengths) <= p["index"] < max(lengths)
    assert checked > 10
    # most functions change most of their inputs
    changed = [sum(S.make_function(r)(x) != x for x in r["test_inputs"]) for r in rows]
    assert sum(c >= 6 for c in changed) >= 0.9 * len(rows)


# ----------------------------------------------------------------------------- code and descriptions

TRICKY = ["", "a", 'it\'s "quoted"', "back\\slash\\n", "naïve café Zoë ß", "tab\tnew\nline", "  ", "123 ABC xyz!?"]


def _exec_code(code: str):
    namespace: dict = {}
    exec(compile(code, "<row code>", "exec"), namespace)  # noqa: S102 - our own generated code
    return namespace["function"]


def test_code_agrees_with_make_function_on_all_rows(rows):
    for r in rows:
        code_fn = _exec_code(r["code"])
        made = S.make_function(r)
        for x in r["test_inputs"] + TRICKY:
            assert code_fn(x) == made(x), (r["function_id"], r["name"], x)
        assert "import" not in r["code"]


def test_code_runs_alone_in_a_fresh_interpreter(rows):
    row = next(r for r in rows if r["name"].startswith("caesar_shift_by_char_order"))
    inputs = row["test_inputs"] + TRICKY
    script = (
        row["code"] + "\nimport json, sys\nprint(json.dumps([function(x) for x in json.loads(sys.stdin.read())]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", script],
        input=json.dumps(inputs),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == [S.make_function(row)(x) for x in inputs]


def test_descriptions_carry_parameters(rows):
    for r in rows:
        text = r["description"]
        assert text.startswith("The function takes a string")
        for spec, p in S.validate_params(r["params"]):
            for name, value in p.items():
                if name == "mapping":
                    assert all(f"{k} -> {v}" in text for k, v in value.items())
                elif name == "shift":
                    assert f"{abs(value)} place" in text
                elif name == "direction":
                    assert ("forward" if value > 0 else "backward") in text
                else:
                    assert (repr(value) if isinstance(value, str) else str(value)) in text, (r["name"], name, value)
    assert (
        S.describe(S.validate_params({"ops": [{"op": "caesar_shift", "params": {"shift": -4}}]})).count(
            "4 places backward"
        )
        == 1
    )


def test_quotes_backslashes_unicode_parameters():
    params = {
        "ops": [
            {"op": "replace_char", "params": {"old": "'", "new": "\\"}},
            {"op": "append_text", "params": {"text": 'é"\\'}},
        ]
    }
    steps = S.validate_params(params)
    code_fn = _exec_code(S.function_code(steps))
    made = S.make_function(params)
    for x in ["it's", "a'b'c", "ü", ""]:
        assert code_fn(x) == made(x)
    assert made("it's") == 'it\\sé"\\'


# ----------------------------------------------------------------------------- unit tests


def test_unit_tests_shape_and_correctness(rows):
    for r in rows:
        f = S.make_function(r)
        tests = r["unit_tests"]
        assert len(tests) == 10
        correct_inputs = []
        for t in tests:
            assert len(t["inputs"]) == 3 and len(t["outputs"]) == 3 and 1 <= t["correct"] <= 3
            k = t["correct"] - 1
            x, y = t["inputs"][k], t["outputs"][k]
            assert x in r["test_inputs"] and f(x) == y
            correct_inputs.append(x)
            pairs = list(zip(t["inputs"], t["outputs"]))
            assert len(set(pairs)) == 3
            for j, (xd, yd) in enumerate(pairs):
                if j != k:
                    assert f(xd) != yd, (r["name"], xd, yd)  # a distractor is never also right
        assert sorted(correct_inputs) == sorted(r["test_inputs"])
    positions = Counter(t["correct"] for r in rows for t in r["unit_tests"])
    assert all(2800 <= positions[k] <= 3900 for k in (1, 2, 3))


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "params, exc, field",
    [
        ("{not json", ValueError, "params"),
        (42, TypeError, "params"),
        ({"ops": []}, ValueError, "params.ops"),
        ({"ops": [{"op": "nope", "params": {}}]}, ValueError, r"params.ops\[0\].op"),
        ({"ops": ["reverse"]}, TypeError, r"params.ops\[0\]"),
        ({"ops": [{"op": "caesar_shift", "params": {}}]}, ValueError, "missing"),
        ({"ops": [{"op": "reverse", "params": {"k": 1}}]}, ValueError, "unknown"),
        ({"ops": [{"op": "caesar_shift", "params": {"shift": 0}}]}, ValueError, "shift"),
        ({"ops": [{"op": "caesar_shift", "params": {"shift": "3"}}]}, ValueError, "shift"),
        ({"ops": [{"op": "caesar_shift", "params": {"shift": True}}]}, ValueError, "shift"),
        ({"ops": [{"op": "remove_char", "params": {"char": "ab"}}]}, ValueError, "char"),
        ({"ops": [{"op": "replace_char", "params": {"old": "a", "new": "a"}}]}, ValueError, "new"),
        ({"ops": [{"op": "swap_indices", "params": {"i": 3, "j": 2}}]}, ValueError, r"\.i"),
        ({"ops": [{"op": "rotate_left", "params": {"k": 0}}]}, ValueError, r"\.k"),
        ({"ops": [{"op": "letter_permutation", "params": {"mapping": {"a": "b", "b": "b"}}}]}, ValueError, "mapping"),
        ({"ops": [{"op": "letter_permutation", "params": {"mapping": {"a": "a"}}}]}, ValueError, "mapping"),
        (
            {"ops": [{"op": "caesar_shift_by_char_order", "params": {"index": 1, "direction": 2}}]},
            ValueError,
            "direction",
        ),
        ({"function_id": "strings/f00000"}, ValueError, "params"),
    ],
)
def test_make_function_rejects_bad_params(params, exc, field):
    with pytest.raises(exc, match=field):
        S.make_function(params)


def test_function_rejects_non_string_input():
    with pytest.raises(TypeError, match="x"):
        S.make_function({"ops": [{"op": "reverse", "params": {}}]})(12)


def test_make_function_accepts_row_json_and_mapping(rows):
    r = rows[0]
    x = r["test_inputs"][0]
    y = S.make_function(r)(x)
    assert S.make_function(r["params"])(x) == y
    assert S.make_function(json.loads(r["params"]))(x) == y


def test_small_n_and_dataset_features():
    import datasets

    one = S.generate(1, seed=3, progress=False)
    assert len(one) == 1 and one[0]["unit_tests"] == [] and len(one[0]["test_inputs"]) == 10
    two = S.generate(2, seed=3, progress=False)
    assert Counter(r["subcategory"] for r in two) == {"composition": 1, "atomic": 1}
    assert all(len(r["unit_tests"]) == 10 for r in two)
    rows20 = S.generate(20, seed=3, progress=False)
    ds = datasets.Dataset.from_list(rows20, features=schema.features())
    assert (
        ds[5]["name"] == rows20[5]["name"]
        and ds[5]["unit_tests"][0]["correct"] == rows20[5]["unit_tests"][0]["correct"]
    )


def test_index_descriptions_read_well():
    text = S.describe(S.validate_params({"ops": [{"op": "char_at_index", "params": {"index": 0}}]}))
    assert "if the string is empty" in text
    text = S.describe(S.validate_params({"ops": [{"op": "char_at_index", "params": {"index": 1}}]}))
    assert "has 1 character or fewer" in text


def test_compositions_show_both_steps_on_their_test_inputs(rows):
    """Appending text and then reading the first letter (its first step never shows) is not
    drawn, and every composition's test inputs tell it apart from the identity and each step."""
    from findbench.find.strings import OPERATIONS, _shows_both_steps, _steps_signature, degenerate

    assert all(degenerate(row) is None for row in rows)
    append_then_first = [(OPERATIONS["append_text"], {"text": "abc"}), (OPERATIONS["first_char_order"], {})]
    assert not _shows_both_steps(append_then_first, _steps_signature(append_then_first))
    row = dict(
        rows[0],
        params=json.dumps(
            {"ops": [{"op": "insert_separator", "params": {"sep": "0"}}, {"op": "first_char", "params": {}}]}
        ),
        test_inputs=["abc", "xyz"],
    )
    assert "equals its second step" in degenerate(row)
