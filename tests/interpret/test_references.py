"""The LM-free interpreters: oracle (ground truth), random (another function's), and the floors
constant (one fixed answer per category) and empty (no answer), scored by the same path."""

from __future__ import annotations

import pytest

from findbench.interpret.config import EvaluateConfig
from findbench.interpret.protocol import Answer, format_answer
from findbench.interpret.references import (
    CONSTANT_ANSWERS,
    oracle_answer,
    random_answer,
    reference_answer,
    reference_domain,
)
from tests.interpret.fakes import KnowingJudge
from tests.interpret.scripted import run_episode


def answer_turns(answer: Answer) -> list[str]:
    """The reference turns giving ``answer`` on the first turn, as a sample's ``reference_turns``."""
    return [format_answer(answer.description, answer.domain, answer.code)]


def test_oracle_answers_with_the_ground_truth(by_id, rows):
    corrupted = oracle_answer(by_id["numeric/f00002"])
    assert corrupted.description == by_id["numeric/f00002"]["description"]
    assert "[10, 20]" in corrupted.domain and "10 < x < 20" in corrupted.domain
    assert corrupted.code == by_id["numeric/f00002"]["code"]
    assert "no interval" in oracle_answer(by_id["numeric/f00000"]).domain
    strings = oracle_answer(by_id["strings/f00000"])
    assert strings.domain is None and strings.code == by_id["strings/f00000"]["code"]
    entity = oracle_answer(rows["neurons_entities"][0])
    assert (
        entity.description == rows["neurons_entities"][0]["description"]
        and entity.domain is None
        and entity.code is None
    )
    relations = rows["neurons_relations"]
    exc = next(r for r in relations if r["exception"])
    assert exc["exception"] in oracle_answer(exc).domain and oracle_answer(exc).code is None
    plain = next(r for r in relations if not r["exception"])
    assert plain["concept1"] in reference_domain(plain)


def test_numeric_domains_for_each_corruption_kind(by_id):
    row = dict(by_id["numeric/f00002"])
    for kind, boundary, interval in [
        ("below", [-20.0], "[-100, -20]"),
        ("above", [30.5], "[30.5, 100]"),
        ("inside", [1, 6], "[1, 6]"),
    ]:
        row.update(corruption_type=kind, corruption_params=f'{{"boundary": {boundary}, "mean": 1.5, "std": 0.1}}')
        text = reference_domain(row)
        assert interval in text and "mean 1.5" in text


@pytest.mark.parametrize("category", ["numeric", "strings", "neurons_entities", "neurons_relations"])
def test_random_never_answers_with_its_own_and_is_seeded(category, rows):
    pool = rows[category]
    descriptions = {r["description"] for r in pool}
    for row in pool:
        ans = random_answer(row, pool, seed=0)
        assert ans.description in descriptions
        picked = next(r for r in pool if r["description"] == ans.description and r["function_id"] != row["function_id"])
        assert picked["function_id"] != row["function_id"]
        assert random_answer(row, list(reversed(pool)), seed=0) == ans  # not the pool's order
    picks = {s: [random_answer(r, pool, seed=s).description for r in pool] for s in range(4)}
    assert len({tuple(p) for p in picks.values()}) > 1  # the seed matters


def test_random_needs_another_function(rows):
    row = rows["strings"][0]
    with pytest.raises(ValueError, match="pool"):
        random_answer(row, [row])
    with pytest.raises(ValueError, match="pool"):
        random_answer(row, rows["numeric"])


@pytest.mark.parametrize(
    "fid", ["numeric/f00002", "strings/f00001", "neurons_entities/f00004", "neurons_relations/f00030"]
)
def test_oracle_episode_round_trips_through_the_protocol(fid, by_id, tmp_path):
    row = by_id[fid]
    truth = oracle_answer(row)
    ep = run_episode(row, None, reference=answer_turns(truth), log_dir=tmp_path)
    assert ep.finished and ep.rounds == 1 and ep.calls == []
    assert ep.answer.description == truth.description and ep.answer.domain == truth.domain
    assert (ep.answer.code or "").strip() == (truth.code or "").strip()


# ----------------------------------------------------------------- the constant and empty floors


def test_constant_and_empty_answers():
    from findbench.interpret.references import REFERENCE_INTERPRETERS, constant_answer, empty_answer

    assert REFERENCE_INTERPRETERS == ("oracle", "random", "constant", "empty", "observed")
    assert set(CONSTANT_ANSWERS) == {"numeric", "strings", "neurons_entities", "neurons_relations", "rasp"}
    numeric = constant_answer({"category": "numeric", "function_id": "numeric/f00009"})
    assert numeric.description == "f(x) returns a number" and numeric.code == "def f(x):\n    return 0\n"
    assert constant_answer({"category": "numeric", "function_id": "numeric/f00001"}) == numeric  # whatever the function
    assert constant_answer({"category": "strings"}).description == "f(s) returns a string"
    assert constant_answer({"category": "neurons_entities"}).code is None
    assert empty_answer({"category": "numeric"}) == Answer(description="")
    with pytest.raises(ValueError, match="category"):
        constant_answer({"category": "images"})
    with pytest.raises(ValueError, match="name must be one of"):
        reference_answer("ground-truth", {"category": "numeric"})


def test_constant_domain_says_no_interval():
    from findbench.find.domain import parse_intervals

    assert parse_intervals(CONSTANT_ANSWERS["numeric"].domain) == []


@pytest.mark.parametrize("name", ["constant", "empty"])
@pytest.mark.parametrize("fid", ["numeric/f00002", "strings/f00001", "neurons_relations/f00030"])
def test_baseline_episodes_round_trip_through_the_protocol(name, fid, by_id, tmp_path):
    row = by_id[fid]
    answer = reference_answer(name, row)
    ep = run_episode(row, None, reference=answer_turns(answer), log_dir=tmp_path)
    assert ep.finished and ep.rounds == 1 and ep.calls == []
    assert ep.answer.description == answer.description and ep.answer.domain == answer.domain
    assert (ep.answer.code or "").strip() == (answer.code or "").strip()


def test_inspect_samples_carry_the_baseline_answer(data_dir):
    pytest.importorskip("inspect_ai")
    from findbench.interpret.config import InterpretConfig
    from findbench.interpret.task import find_samples

    (sample,) = find_samples(InterpretConfig(configs="strings", limit=1, data=str(data_dir), interpreter="constant"),
                             "aia")
    assert sample.metadata["reference_turns"][0].startswith("[DESCRIPTION]: f(s) returns a string")
    (sample,) = find_samples(InterpretConfig(configs="strings", limit=1, data=str(data_dir), interpreter="empty"),
                             "aia")
    assert sample.metadata["reference_turns"] == ["[DESCRIPTION]: "]


_CODE_METRICS = (("numeric", "nmse_success"), ("strings", "exact_match"))
_UNIT_TESTS = (("strings", "unit_test_accuracy"), ("neurons_relations", "unit_test_accuracy"))


def _score_references(data, rows, out, names, limit=None):
    """Each reference interpreter run and scored by ``evaluate_run`` with the
    scripted judge (right on a ground-truth description, option 1 otherwise)."""
    from findbench.interpret.evaluate import evaluate_run
    from tests.interpret.fakes import interpret

    scores = {}
    for name in names:
        run = interpret(
            data, name, configs=["numeric", "strings", "neurons_relations"], limit=limit, out=out / name, progress=False
        )
        config = EvaluateConfig(run, judge=KnowingJudge(rows), out=run / "scores")
        scores[name] = evaluate_run(config, progress=False)["scores"]
    return scores


def test_baselines_score_below_random_where_random_is_informative(tmp_path, rows):
    """Every function has a twin (same code and description, another id), so ``random`` (which
    answers with another function's ground truth) is right: the floors, scored by the same
    path, stay below it on code and at or below it on unit tests."""
    from findbench.find import numeric
    from tests.interpret.conftest import NUMERIC_PARAMS, write_data_folder

    def twins(row):
        category, _ = row["function_id"].split("/")
        return [dict(row, function_id=f"{category}/f00000"), dict(row, function_id=f"{category}/f00001")]

    twin_rows = {
        "numeric": [numeric.row_from_params(NUMERIC_PARAMS[0], 0), numeric.row_from_params(NUMERIC_PARAMS[0], 1)],
        "strings": twins(rows["strings"][0]),
        "neurons_relations": twins(rows["neurons_relations"][0]),
    }
    data = write_data_folder(tmp_path / "twins", twin_rows)
    scores = _score_references(data, twin_rows, tmp_path / "runs", ("random", "constant", "empty"))
    rand = scores["random"]
    for category, metric in _CODE_METRICS + _UNIT_TESTS:
        assert rand[category]["aia"][metric] == 1.0
    for name in ("constant", "empty"):
        for category, metric in _CODE_METRICS:
            assert scores[name][category]["aia"][metric] == 0.0 < rand[category]["aia"][metric]
            assert scores[name][category]["aia"][f"{metric}_n"] == 2
        for category, metric in _UNIT_TESTS:
            assert scores[name][category]["aia"][metric] <= rand[category]["aia"][metric]
    for category, metric in _UNIT_TESTS:
        assert scores["constant"][category]["aia"][metric] < 1.0
        assert scores["empty"][category]["aia"][metric] == 0.0  # never shown to the judge
    # constant's [DOMAIN] ("no interval") is right on these clean functions; empty gives none
    if scores["constant"]["numeric"]["aia"]["domain_iou"] is not None:
        assert scores["constant"]["numeric"]["aia"]["domain_iou"] == 1.0
        assert scores["empty"]["numeric"]["aia"]["domain_iou"] == 0.0


def test_baselines_on_real_functions(tmp_path, data_dir, rows):
    """On distinct functions: the floors fail every code metric (no fixed program is right)
    and judge at or below ``random``, far below the ``oracle``."""
    scores = _score_references(data_dir, rows, tmp_path, ("oracle", "random", "constant", "empty"), limit=3)
    for category, metric in _CODE_METRICS + _UNIT_TESTS:
        top, rand = scores["oracle"][category]["aia"][metric], scores["random"][category]["aia"][metric]
        assert top == 1.0
        for name in ("constant", "empty"):
            floor = scores[name][category]["aia"][metric]
            assert floor <= rand and floor < top
            assert scores[name][category]["aia"][f"{metric}_n"] == 3
    for category, metric in _CODE_METRICS:
        assert scores["constant"][category]["aia"][metric] == scores["empty"][category]["aia"][metric] == 0.0
