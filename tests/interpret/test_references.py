"""The LM-free interpreters: oracle (ground truth) and random (another function's)."""

from __future__ import annotations

import asyncio

import pytest

from findbench.interpret.episode import run_episode
from findbench.interpret.references import answer_chat, oracle_answer, random_answer, reference_domain


def test_oracle_answers_with_the_ground_truth(by_id, rows):
    corrupted = oracle_answer(by_id["numeric/f00002"])
    assert corrupted.description == by_id["numeric/f00002"]["description"]
    assert "[10, 20]" in corrupted.domain and "10 < x < 20" in corrupted.domain
    assert corrupted.code == by_id["numeric/f00002"]["code"]
    assert "no interval" in oracle_answer(by_id["numeric/f00000"]).domain
    strings = oracle_answer(by_id["strings/f00000"])
    assert strings.domain is None and strings.code == by_id["strings/f00000"]["code"]
    entity = oracle_answer(rows["neurons_entities"][0])
    assert entity.description == rows["neurons_entities"][0]["description"] and entity.domain is None and entity.code is None
    relations = rows["neurons_relations"]
    exc = next(r for r in relations if r["exception"])
    assert exc["exception"] in oracle_answer(exc).domain and oracle_answer(exc).code is None
    plain = next(r for r in relations if not r["exception"])
    assert plain["concept1"] in reference_domain(plain)


def test_numeric_domains_for_each_corruption_kind(by_id):
    row = dict(by_id["numeric/f00002"])
    for kind, boundary, interval in [("below", [-20.0], "[-100, -20]"), ("above", [30.5], "[30.5, 100]"), ("inside", [1, 6], "[1, 6]")]:
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
        assert random_answer(row, list(reversed(pool)), seed=0) == ans          # not the pool's order
    picks = {s: [random_answer(r, pool, seed=s).description for r in pool] for s in range(4)}
    assert len({tuple(p) for p in picks.values()}) > 1                          # the seed matters


def test_random_needs_another_function(rows):
    row = rows["strings"][0]
    with pytest.raises(ValueError, match="pool"):
        random_answer(row, [row])
    with pytest.raises(ValueError, match="pool"):
        random_answer(row, rows["numeric"])


@pytest.mark.parametrize("fid", ["numeric/f00002", "strings/f00001", "neurons_entities/f00004", "neurons_relations/f00030"])
def test_oracle_episode_round_trips_through_the_protocol(fid, by_id):
    row = by_id[fid]
    truth = oracle_answer(row)
    ep = asyncio.run(run_episode(row, answer_chat(truth)))
    assert ep.finished and ep.rounds == 1 and ep.calls == []
    assert ep.answer.description == truth.description and ep.answer.domain == truth.domain
    assert (ep.answer.code or "").strip() == (truth.code or "").strip()
