"""Importer of the original FIND release, on the anchor copy of its files."""

from __future__ import annotations

import json

import pytest

from findbench.find import find_v1
from findbench.find.find_v1 import convert_unit_tests, load_rows, parse_test_inputs
from findbench.schema import check_row


@pytest.fixture(scope="module")
def release(anchor):
    return anchor("find-v1")


@pytest.fixture(scope="module")
def rows(release):
    return {c: load_rows(c, release) for c in ("strings", "neurons_entities", "neurons_relations")}


@pytest.mark.parametrize(
    "text, expected",
    [
        (': "a", "b, c", "d"', ["a", "b, c", "d"]),
        (": hello1, aAbbB12, Test", ["hello1", "aAbbB12", "Test"]),
        (': "abcdefghji\u201d, \u201cfunction is working\u201d, "x"', ["abcdefghji", "function is working", "x"]),
        (': "Ready, Red, Rabbit"', ["Ready", "Red", "Rabbit"]),
        (': Hello, "!Hello", "", " ", end,', ["Hello", "!Hello", "", " ", "end"]),
        (': "Str"\n"It rains", "x"', ["Str", "It rains", "x"]),
        (": 'it''s', 'b'", ["it''s", "b"]),
        ("", []),
    ],
)
def test_parse_test_inputs_quirks(text, expected):
    assert parse_test_inputs(text) == expected


def test_parse_test_inputs_rejects_non_text():
    with pytest.raises(TypeError, match="test_inputs"):
        parse_test_inputs(["a"])


def test_convert_unit_tests_formats():
    rec = {"name": "f00003", "test_vec": [[["a", "b", "c"], [" A", "B ", "C"]]], "correct_inx": [2]}
    assert convert_unit_tests(rec, "strings") == [
        {"inputs": ["a", "b", "c"], "outputs": [" A", "B ", "C"], "correct": 2}
    ]
    assert convert_unit_tests(rec, "neurons_relations")[0]["outputs"] == ["A", "B", "C"]
    ent = {"name": "f00001", "test_vec": [["w1", "w2", "w3"]], "correct_inx": [3]}
    assert convert_unit_tests(ent, "neurons_entities") == [
        {"inputs": ["w1", "w2", "w3"], "outputs": None, "correct": 3}
    ]
    with pytest.raises(ValueError, match="correct_inx"):
        convert_unit_tests({"name": "f1", "test_vec": [["a", "b", "c"]], "correct_inx": [4]}, "neurons_entities")
    with pytest.raises(ValueError, match="test_vec"):
        convert_unit_tests({"name": "f1", "test_vec": [["a", "b"]], "correct_inx": [1, 2]}, "strings")


def test_counts_schema_and_ids(rows):
    for cat, expected in (("strings", 1000), ("neurons_entities", 200), ("neurons_relations", 75)):
        got = rows[cat]
        assert len(got) == expected == find_v1.EXPECTED_COUNTS[cat]
        assert [r["function_id"] for r in got] == [f"{cat}/f{i:05d}" for i in range(expected)]
        for r in got:
            check_row(r)
            assert r["source"] == "find-v1" and r["category"] == cat
            assert len(r["unit_tests"]) == 10
            assert r["unit_tests_near"] == []  # no generators to draw near misses from (see the card)


def test_unit_tests_match_release(rows, release):
    raw = json.loads((release / "strings" / "unit_test_data.json").read_text())
    first = rows["strings"][0]["unit_tests"]
    assert first[0] == {
        "inputs": raw[0]["test_vec"][0][0],
        "outputs": raw[0]["test_vec"][0][1],
        "correct": raw[0]["correct_inx"][0],
    }
    assert [t["correct"] for t in first] == [3, 2, 1, 3, 1, 3, 2, 3, 1, 2]
    # unit-test inputs stay verbatim: their outputs were computed on them
    assert first[0]["inputs"][2] == '"hello'
    ent = rows["neurons_entities"][0]["unit_tests"][0]
    assert ent == {"inputs": ["fuel", "Chomsky", "NFL"], "outputs": None, "correct": 3}
    rel = rows["neurons_relations"][0]["unit_tests"][0]
    assert rel["inputs"] == ["John Lennon", "The Green Mile", "Denmark"]
    assert rel["outputs"] == ["1940", "Frank Darabont", "Copenhagen"]  # leading spaces stripped
    assert rel["correct"] == 3


def test_strings_fields(rows):
    r = rows["strings"][1]
    assert r["description"].startswith("The function takes a string as input and appends")
    assert not r["description"].startswith(":")
    assert r["test_inputs"] == [
        "Hello",
        "World",
        "test",
        "example",
        "concatenate",
        "Python",
        "function",
        "strings",
        "append",
        "coding",
    ]
    assert r["code"] == ""  # code is only in the Zenodo archive
    assert rows["strings"][0]["test_inputs"][3:5] == ["abcdefghji", "function is working properly"]
    n10 = sum(len(r["test_inputs"]) == 10 for r in rows["strings"])
    assert n10 >= 980
    assert not any(r["description"].startswith((":", " ")) for r in rows["strings"])


def test_neuron_fields(rows):
    ents = rows["neurons_entities"]
    assert sum(r["subcategory"] == "atomic" for r in ents) == 140
    assert sum(r["subcategory"] == "composition" for r in ents) == 60
    e0 = ents[0]
    assert (e0["concept1"], e0["concept2"]) == ("sport organizations", None)
    assert e0["exemplars"][:3] == ["Metropolitan Museum of Art", "one third", "NFL"]
    assert all(w == w.strip() for r in ents for w in r["exemplars"])  # e.g. 'tennis ' of f00001
    assert "tennis" in ents[1]["exemplars"]
    assert "sport organizations" in e0["description"]
    rels = rows["neurons_relations"]
    assert sum(r["subcategory"] == "atomic" for r in rels) == 25
    assert sum(r["subcategory"] == "corruption" for r in rels) == 50
    r0 = rels[0]
    assert (r0["concept1"], r0["concept2"], r0["exception"]) == ("a country", "the capital of that country", None)
    assert all(r["exception"] == r["exception"].strip() for r in rels if r["exception"])
    assert rels[74]["exception"] == "the input country is in South America"
    for r in ents + rels:
        if r["prompt"] is not None:
            assert r["concept1"] in r["prompt"]


def test_leading_space_exception_is_stripped(release, rows):
    raw = json.loads((release / "neurons_relations" / "data.json").read_text())
    spaced = [i for i, rec in enumerate(raw) if rec.get("exeption") and rec["exeption"] != rec["exeption"].strip()]
    assert spaced, "the release has one exception with a leading space"
    for i in spaced:
        assert rows["neurons_relations"][i]["exception"] == raw[i]["exeption"].strip()


def test_numeric_import(release):
    rows = load_rows("numeric", release)
    assert len(rows) == 1000
    served = json.loads((release / "numeric" / "func_name_dict.json").read_text())
    mlp = [r for r in rows if r["subcategory"] == "mlp"]
    assert len(mlp) == sum(v == "load_mlp.py" for v in served.values()) == 150
    with_weights = [r for r in mlp if not json.loads(r["params"]).get("mlp_weights_missing")]
    assert [r["function_id"] for r in with_weights] == [f"numeric/f{i:05d}" for i in range(5)]
    for r in rows[:10] + rows[-10:]:
        check_row(r)
        assert r["source"] == "find-v1"


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="category"):
        load_rows("images", tmp_path)
    with pytest.raises(FileNotFoundError, match="not a folder"):
        load_rows("strings", tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="test_data.json"):
        load_rows("strings", tmp_path)
