"""Judge training data: function splits, balanced answers, the judge's exact prompt, the folder."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from findbench.judge import render_judge_prompt
from findbench.judge.config import JudgeDataConfig
from findbench.judge.data import (
    build_judge_data,
    build_judge_rows,
    function_items,
    load_judge_data,
    split_functions,
)
from findbench.judge.ladder import wrong_descriptions


def _entity_rows() -> list[dict]:
    """Hand-made entity rows: 10 atomic concepts (3 words each) and 4 two-concept compositions."""
    concepts = {f"c{i}": [f"w{i}a", f"w{i}b", f"w{i}c"] for i in range(10)}
    rows = []
    for i, (c, words) in enumerate(concepts.items()):
        tests = [{"inputs": [w, "x", "y"], "outputs": None, "correct": 1} for w in words]
        rows.append(
            {
                "function_id": f"neurons_entities/f{i:05d}",
                "category": "neurons_entities",
                "concept1": c,
                "concept2": None,
                "description": f"The neuron fires on words related to {c}.",
                "unit_tests": tests,
            }
        )
    for k, (a, b) in enumerate([("c0", "c1"), ("c2", "c3"), ("c4", "c5"), ("c6", "c7")]):
        words = concepts[a][:1] + concepts[b][:1]
        tests = [{"inputs": ["x", w, "y"], "outputs": None, "correct": 2} for w in words]
        rows.append(
            {
                "function_id": f"neurons_entities/f{10 + k:05d}",
                "category": "neurons_entities",
                "concept1": a,
                "concept2": b,
                "description": f"Words related to {a} or to {b}.",
                "unit_tests": tests,
            }
        )
    return rows


@pytest.fixture(scope="module")
def strings_rows():
    from findbench.find import load_rows

    return load_rows("strings", seed=0)[:60]


@pytest.fixture(scope="module")
def relation_rows():
    from findbench.find import load_rows

    return load_rows("neurons_relations", seed=0)


def test_function_items_are_the_correct_options():
    row = {
        "unit_tests": [
            {"inputs": ["a", "b", "c"], "outputs": ["A", "B", "C"], "correct": 2},
            {"inputs": ["d", "b", "e"], "outputs": ["D", "B", "E"], "correct": 2},
            {"inputs": ["f", "g", "h"], "outputs": ["F", "G", "H"], "correct": 3},
        ]
    }
    assert function_items(row) == [("b", "B"), ("h", "H")]
    assert function_items({"unit_tests": [{"inputs": ["x", "y", "z"], "outputs": None, "correct": 1}]}) == ["x"]


def test_relation_split_keeps_families_together(relation_rows):
    splits = split_functions(relation_rows, seed=0, heldout_fraction=0.2)
    assert set(splits) == {r["function_id"] for r in relation_rows}
    by_family = {}
    for r in relation_rows:
        by_family.setdefault(r["name"].split("~")[0], set()).add(splits[r["function_id"]])
    assert all(len(s) == 1 for s in by_family.values())  # a relation and its corruptions share a side
    assert sum(s == {"heldout"} for s in by_family.values()) == 5  # 20% of 25 relations
    assert split_functions(relation_rows, seed=0, heldout_fraction=0.2) == splits
    assert split_functions(relation_rows, seed=1, heldout_fraction=0.2) != splits


def test_entity_split_by_concept():
    rows = _entity_rows()
    splits = split_functions(rows, seed=3, heldout_fraction=0.3)
    held = {r["concept1"] for r in rows[:10] if splits[r["function_id"]] == "heldout"}
    assert len(held) == 3
    for r in rows[10:]:
        inside = {r["concept1"] in held, r["concept2"] in held}
        expected = "heldout" if inside == {True} else "train" if inside == {False} else "excluded"
        assert splits[r["function_id"]] == expected


def test_rows_follow_the_rules(strings_rows, relation_rows):
    rows = {"strings": strings_rows, "neurons_entities": _entity_rows(), "neurons_relations": relation_rows}
    train, held, splits = build_judge_rows(rows, _rows_config(n=90, n_heldout=30, seed=0, heldout_fraction=0.3))
    assert len(train) == 90 and len(held) == 30
    by_id = {r["function_id"]: r for rs in rows.values() for r in rs}
    counts = Counter(r["category"] for r in train)
    assert counts == {"strings": 30, "neurons_entities": 30, "neurons_relations": 30}
    for cat in counts:  # balanced answer positions within each category
        assert Counter(r["correct"] for r in train if r["category"] == cat) == {1: 10, 2: 10, 3: 10}
    for r in train + held:
        assert splits[r["function_id"]] == r["split"]
        assert r["target"] == f"[ANSWER]: {r['correct']}"
        ut = json.loads(r["unit_test"])
        assert ut["correct"] == r["correct"]
        fn = by_id[r["function_id"]]
        # exactly the judge's prompt for the function's ground-truth description
        assert r["messages"] == render_judge_prompt(fn["description"], ut, r["category"])
        items = ut["inputs"] if ut["outputs"] is None else list(zip(ut["inputs"], ut["outputs"]))
        own = set(function_items(fn))
        assert items[r["correct"] - 1] in own
        assert len(set(items)) == 3
    assert {r["split"] for r in train} == {"train"} and {r["split"] for r in held} == {"heldout"}
    train_ids = {r["function_id"] for r in train}
    held_ids = {r["function_id"] for r in held}
    assert not train_ids & held_ids
    # the same seed gives the same rows
    again, _, _ = build_judge_rows(rows, _rows_config(n=90, n_heldout=30, seed=0, heldout_fraction=0.3))
    assert again == train


def test_string_distractors_are_not_produced_by_the_function(strings_rows):
    from findbench.find import load_function

    train, _, _ = build_judge_rows({"strings": strings_rows}, _rows_config(n=30, n_heldout=0, seed=1))
    assert train  # an empty build would pass the loop below without checking anything
    by_id = {r["function_id"]: r for r in strings_rows}
    checked = 0
    for r in train:
        fn = load_function(by_id[r["function_id"]])
        ut = json.loads(r["unit_test"])
        for k, (i, o) in enumerate(zip(ut["inputs"], ut["outputs"]), 1):
            if k != ut["correct"]:
                assert fn(i) != o
                checked += 1
    assert checked == 2 * len(train)  # two distractors per row, each checked


def _rows_config(**settings) -> JudgeDataConfig:
    """The judge-data settings of an in-memory build (no near-miss rows, no losing descriptions unless asked)."""
    return JudgeDataConfig(**{"n_near": 0, "negatives": False, **settings})


def test_bad_input_names_the_argument(strings_rows):
    with pytest.raises(ValueError, match="n must be"):
        build_judge_rows({"strings": strings_rows}, _rows_config(n=0))
    with pytest.raises(ValueError, match="heldout_fraction"):
        split_functions(strings_rows, heldout_fraction=1.5)
    with pytest.raises(ValueError, match="category"):
        build_judge_rows({"neurons_relations": strings_rows}, _rows_config(n=3))
    with pytest.raises(ValueError, match="category must be one of"):
        build_judge_rows({"numeric": strings_rows}, _rows_config(n=3))
    no_desc = [dict(r, description="") for r in strings_rows[:5]]
    with pytest.raises(ValueError, match="description"):
        build_judge_rows({"strings": no_desc}, _rows_config(n=3))


def test_data_folder_round_trip(tmp_path, strings_rows):
    out = build_judge_data(JudgeDataConfig(
        out=str(tmp_path / "judge-data"),
        n=12,
        n_heldout=6,
        seed=0,
        n_near=0,
        negatives=False,  # hand-made entities: no word lists to write losing descriptions from
    ), rows_by_category={"strings": strings_rows[:30], "neurons_entities": _entity_rows()})
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary leftovers
    dd = load_judge_data(out)
    assert dd["train"].num_rows == 12 and dd["validation"].num_rows == 6
    assert dd["train"][0]["messages"][0]["role"] == "system"
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "data/train-*.parquet" in card and "| strings | 24 | 6 | 0 | 6 |" in card
    splits = json.loads((out / "function_splits.json").read_text())["functions"]
    held = sorted(f for f, s in splits.items() if s == "heldout" and f.startswith("strings/"))
    assert len(held) == 6 and all(h.startswith("strings/") for h in held)
    assert not set(held) & set(dd["train"]["function_id"])
    with pytest.raises(FileNotFoundError, match="findbench judge-data"):
        load_judge_data(tmp_path)


def test_the_config_names_its_flags(tmp_path, strings_rows):
    from findbench.constants import UsageError

    cfg = JudgeDataConfig(out=str(tmp_path / "b"), n=9, n_heldout=3, seed=1, categories="strings,entities")
    assert cfg.categories == ["strings", "neurons_entities"]
    with pytest.raises(UsageError, match="--categories: "):
        JudgeDataConfig(categories="numeric")
    with pytest.raises(UsageError, match="--extra-string-functions needs the strings category"):
        build_judge_data(JudgeDataConfig(out=str(tmp_path / "c"), extra_string_functions=1),
                         rows_by_category={"neurons_entities": _entity_rows()})
    assert not (tmp_path / "c").exists()


def test_wrong_descriptions_never_keep_the_own_text():
    descs = ["a", "b", "c", "d", "a"]
    wrong = wrong_descriptions(descs, seed=0)
    assert sorted(wrong) == sorted(descs)
    assert all(w != d for w, d in zip(wrong, descs))
    assert wrong_descriptions(descs, seed=0) == wrong
    with pytest.raises(ValueError, match="two distinct"):
        wrong_descriptions(["same", "same"])


def test_embedded_evaluator_name_resolves_to_the_cached_judge(tmp_path, monkeypatch):
    import findbench.models
    from findbench.judge.train import TRAINED_MARKER, TrainArgs, embedded_judge_dir
    from findbench.models import resolve

    monkeypatch.setenv("FINDBENCH_CACHE", str(tmp_path))
    shipped = findbench.models.shipped_judge_dir()
    assert shipped is not None and Path(shipped, TRAINED_MARKER).is_file()
    assert resolve("embedded-evaluator") == shipped  # nothing trained here: the packaged adapter
    monkeypatch.setattr(findbench.models, "shipped_judge_dir", lambda: None)
    with pytest.raises(FileNotFoundError, match="findbench train-judge"):
        resolve("embedded-evaluator")
    old = tmp_path / "models" / "embedded-evaluator-v1"  # a judge of the earlier (logprob) recipe is not reused
    old.mkdir(parents=True)
    (old / TRAINED_MARKER).write_text("{}")
    with pytest.raises(FileNotFoundError):
        resolve("embedded-evaluator")
    folder = tmp_path / "models" / "embedded-evaluator-v2"
    folder.mkdir(parents=True)
    (folder / TRAINED_MARKER).write_text("{}")
    assert resolve("embedded-evaluator") == str(folder)
    # only train-judge --install-as-default writes there (its default output is a new folder: test_train)
    assert TrainArgs().install_as_default is False and embedded_judge_dir(must_exist=False) == str(folder)


def test_training_data_keeps_heldout_functions_apart_by_id_and_code(strings_rows):
    """Near-miss rows, losing descriptions and extra functions: nothing of a held-out function (its id, its
    code, its description) reaches a training row; an extra function copying a held-out one is left out."""
    from findbench.find import load_rows
    from findbench.judge.data import NEGATIVE_KINDS, split_functions

    splits = split_functions(strings_rows, seed=0, heldout_fraction=0.2)
    held = [r for r in strings_rows if splits[r["function_id"]] == "heldout"]
    fresh = [{**r, "function_id": f"strings/x-{r['function_id'][-5:]}"} for r in load_rows("strings", seed=0)[60:66]]
    copies = [{**held[0], "function_id": "strings/copy-of-heldout"},  # the same code under a new id
              {**fresh[0], "function_id": held[1]["function_id"]}]  # a held-out id on another function
    settings = _rows_config(n=30, n_heldout=6, seed=0, n_near=30, negatives=True)
    train, valid, out_splits = build_judge_rows({"strings": strings_rows}, settings,
                                                extra_rows={"strings": fresh + copies})
    code = {r["function_id"]: r["code"] for r in strings_rows + fresh}
    held_ids, held_code = {r["function_id"] for r in held}, {r["code"] for r in held}
    held_text = {r["description"].strip().rstrip(".") for r in held}
    assert {r["function_id"] for r in train} & held_ids == set()
    assert {code[r["function_id"]] for r in train} & held_code == set()
    assert {r["function_id"] for r in valid} <= held_ids
    assert "strings/copy-of-heldout" not in out_splits and out_splits[held[1]["function_id"]] == "heldout"
    assert {r["function_id"] for r in fresh} <= {fid for fid, s in out_splits.items() if s == "train"}
    for r in train:  # no held-out description inside a training row, not even inside a hedge
        for text in [r["description"], *(n["description"] for n in json.loads(r["negatives"]))]:
            assert not any(h in text for h in held_text), (r["function_id"], text[:80])

    near = [r for r in train if r["test_set"] == "near"]
    assert len(near) == 30 and Counter(r["test_set"] for r in train)["find"] == 30
    rows = {r["function_id"]: r for r in strings_rows + fresh}
    for r in near:  # a near-miss test of the function itself, its truth shown
        ut = json.loads(r["unit_test"])
        assert ut in [dict(sorted(t.items())) for t in rows[r["function_id"]]["unit_tests_near"]]
        assert len(set(ut["inputs"])) == 1 and r["messages"] == render_judge_prompt(r["description"], ut, "strings")
        negatives = json.loads(r["negatives"])
        kinds = [n["kind"] for n in negatives]
        assert set(kinds) <= set(NEGATIVE_KINDS) and {"examples_only", "hedged_2", "constant"} <= set(kinds)
        assert all(n["description"].strip() != r["description"].strip() for n in negatives)


def test_near_miss_negatives_describe_the_functions_that_give_the_wrong_outputs(strings_rows):
    from findbench.find.strings import describe, make_function, near_miss_steps, validate_params

    settings = _rows_config(n=3, n_heldout=0, seed=0, n_near=20, negatives=True)
    train, _, _ = build_judge_rows({"strings": strings_rows}, settings)
    checked = 0
    for r in train:
        if r["test_set"] != "near":
            continue
        row = next(x for x in strings_rows if x["function_id"] == r["function_id"])
        steps = validate_params(row["params"])
        ut = json.loads(r["unit_test"])
        k = ut["correct"] - 1
        x, y = ut["inputs"][k], ut["outputs"][k]
        wrong = {o for j, o in enumerate(ut["outputs"]) if j != k}
        near = [n["description"] for n in json.loads(r["negatives"]) if n["kind"] == "near_miss"]
        assert near, r["function_id"]
        # every near-miss description is one near miss of the function, wrong on the correct option; the first
        # gives one of the test's wrong outputs (the seed does not matter for the deterministic near values)
        for text in near:
            misses = [m for m in near_miss_steps(steps, __import__("random").Random(0)) if describe(m) == text]
            fns = [make_function({"ops": [{"op": s.name, "params": p} for s, p in m]}) for m in misses]
            assert not fns or all(f(x) != y for f in fns)
            if text == near[0] and fns:
                assert any(f(x) in wrong for f in fns)
                checked += 1
    assert checked >= 5


def test_judge_data_flags(tmp_path, strings_rows):
    from findbench.constants import UsageError
    from findbench.judge.config import JudgeDataConfig

    with pytest.raises(UsageError, match="--n-near"):
        JudgeDataConfig(n_near=-1)
    with pytest.raises(UsageError, match="--extra-string-functions"):
        JudgeDataConfig(extra_string_functions=-2)
    out = build_judge_data(JudgeDataConfig(out=str(tmp_path / "d"), n=12, n_heldout=3, n_near=6),
                           rows_by_category={"strings": strings_rows})
    train = load_judge_data(out)["train"]
    assert Counter(train["test_set"]) == {"find": 12, "near": 6} and all(json.loads(n) for n in train["negatives"])
    meta = json.loads((out / "function_splits.json").read_text())["meta"]
    assert meta["n_near"] == 6 and meta["negatives"] is True and meta["per_category"]["strings"]["near_rows"] == 6
    plain = load_judge_data(build_judge_data(JudgeDataConfig(out=str(tmp_path / "p"), n=6, n_heldout=0, n_near=0,
                                                             negatives=False),
                                             rows_by_category={"strings": strings_rows}))["train"]
    assert set(plain["test_set"]) == {"find"} and set(plain["negatives"]) == {"[]"}


def test_entities_and_relations_get_near_rows_and_negatives_from_training_functions(relation_rows):
    """All of a category's training functions (as `findbench judge-data` takes them): near-miss rows and
    losing descriptions on the real entity and relation rows, none of them a held-out function's text."""
    from findbench.constants import CONSTANT_DESCRIPTIONS
    from findbench.find import load_rows
    from tests.judge.test_card import LetterEncoder

    rows = {"neurons_entities": load_rows("neurons_entities", seed=0), "neurons_relations": relation_rows}
    settings = _rows_config(n=20, n_heldout=0, seed=0, n_near=20, negatives=True)
    train, _, splits = build_judge_rows(rows, settings, encoder=LetterEncoder())
    for cat, cat_rows in rows.items():
        held = [r["description"].strip().rstrip(".") for r in cat_rows if splits[r["function_id"]] != "train"]
        mine = [r for r in train if r["category"] == cat]
        assert Counter(r["test_set"] for r in mine) == {"find": 10, "near": 10}
        for r in mine:
            negatives = json.loads(r["negatives"])
            kinds = {n["kind"] for n in negatives}
            assert {"near_miss", "hedged_near", "hedged_2"} <= kinds and CONSTANT_DESCRIPTIONS[cat] in [
                n["description"] for n in negatives]
            assert not any(h in n["description"] for n in negatives for h in held)
