"""Tests for the curated entity word lists (findbench.find.synthetic_neurons.entity_words)."""

from __future__ import annotations

import json

import pytest

from findbench.find.synthetic_neurons.entity_words import ENTITY_CONCEPTS, load_entity_words, split_words

#: The FIND v1 entity neurons, under the anchor root (reached through the ``anchor`` fixture).
ENTITIES = "find-v1/neurons_entities"


def _norm(word: str) -> str:
    return word.strip().lower()


def _anchor_atomic_entries(anchor) -> list[dict]:
    path = anchor(f"{ENTITIES}/data.json")
    return [e for e in json.loads(path.read_text(encoding="utf-8")) if e["concept2"] is None]


def test_140_concepts_in_table_a1_order():
    words = load_entity_words()
    assert len(ENTITY_CONCEPTS) == 140
    assert list(words) == list(ENTITY_CONCEPTS)
    assert ENTITY_CONCEPTS[0] == "sport organizations"
    assert ENTITY_CONCEPTS[-1] == "World War II"
    assert "a quantity indicating a percentage" in ENTITY_CONCEPTS


def test_concepts_match_find_release(anchor):
    names = [e["concept1"] for e in _anchor_atomic_entries(anchor)]
    assert names == list(ENTITY_CONCEPTS)


def test_each_list_long_clean_and_unique():
    seen: dict[str, str] = {}
    for concept, words in load_entity_words().items():
        assert len(words) >= 24, concept
        for word in words:
            assert isinstance(word, str) and word.strip(), (concept, word)
            assert word == word.strip(), (concept, word)
            key = _norm(word)
            assert key not in seen, f"{word!r} in both {seen.get(key)!r} and {concept!r}"
            seen[key] = concept


def test_hand_checked_words():
    words = load_entity_words()
    assert "Magnus Carlsen" in words["chess"]
    assert "Wimbledon" in words["tennis"]
    assert "badminton" in words["racket sports"]
    assert "Wimbledon" not in words["racket sports"]
    assert "Bitcoin" in words["cryptocurrencies"]
    assert "Eiffel Tower" in words["Paris"]


def test_load_returns_fresh_copies():
    first = load_entity_words()
    first["chess"].append("tiddlywinks")
    first.pop("golf")
    second = load_entity_words()
    assert "tiddlywinks" not in second["chess"]
    assert "golf" in second


def test_split_deterministic_disjoint_and_complete():
    words = load_entity_words()
    for concept in ENTITY_CONCEPTS:
        unit, held = split_words(concept)
        assert len(unit) == 10
        assert len(held) == len(words[concept]) - 10
        assert not set(unit) & set(held)
        assert sorted(unit + held) == sorted(words[concept])
        assert (unit, held) == split_words(concept, n_unit=10, seed=0)
    # held-out words keep the file order
    unit, held = split_words("chess")
    assert held == [w for w in words["chess"] if w not in unit]


def test_split_depends_on_seed_and_concept():
    assert split_words("chess", seed=0)[0] != split_words("chess", seed=1)[0]
    assert split_words("golf", n_unit=3)[0] == split_words("golf", n_unit=5)[0][:3]
    # different concepts are shuffled differently (same-length lists would otherwise align)
    words = load_entity_words()
    positions = {
        concept: tuple(words[concept].index(w) for w in split_words(concept)[0])
        for concept in ENTITY_CONCEPTS
    }
    assert len(set(positions.values())) > 100


def test_split_rejects_bad_arguments():
    with pytest.raises(ValueError, match="concept"):
        split_words("checkers championships")
    with pytest.raises(TypeError, match="concept"):
        split_words(3)
    with pytest.raises(ValueError, match="n_unit"):
        split_words("chess", n_unit=0)
    with pytest.raises(ValueError, match="n_unit"):
        split_words("chess", n_unit=len(load_entity_words()["chess"]))
    with pytest.raises(TypeError, match="n_unit"):
        split_words("chess", n_unit=2.5)
    with pytest.raises(TypeError, match="seed"):
        split_words("chess", seed="0")


def test_lists_are_not_copied_from_release_unit_tests(anchor):
    """Canonical words coincide (violin, Lake Superior), but most of our lists differ."""
    entries = _anchor_atomic_entries(anchor)
    path = anchor(f"{ENTITIES}/unit_test_data.json")
    tests = {t["name"]: t for t in json.loads(path.read_text(encoding="utf-8"))}
    words = load_entity_words()
    shared = total = 0
    for entry in entries:
        test = tests[entry["dir"]]
        correct = {_norm(opts[k - 1]) for opts, k in zip(test["test_vec"], test["correct_inx"])}
        shared += len(correct & {_norm(w) for w in words[entry["concept1"]]})
        total += len(correct)
    assert total > 1000
    assert shared / total < 0.5


# ----------------------------------------------------------------------------- associations
def load_associations(role: str) -> dict[str, tuple[str, ...]]:
    """The packaged association lists as written."""
    from findbench.find.synthetic_neurons.entity_words import _load_associations

    return dict(_load_associations(role))


def test_association_files_as_written():
    train, held = load_associations("train"), load_associations("held-out")
    assert list(train) == list(held) == list(ENTITY_CONCEPTS)
    assert min(len(v) for v in train.values()) >= 24 and {len(v) for v in held.values()} == {16}


def trained_used_keys():
    from findbench.find.synthetic_neurons.entity_words import training_associations

    return {_norm(w) for ws in training_associations().values() for w in ws}


def test_heldout_associations_were_never_seen_by_the_probes():
    from findbench.find.synthetic_neurons.entity_words import (
        default_probe_words,
        heldout_associations,
        training_associations,
    )

    held = heldout_associations()
    members = {_norm(w) for ws in load_entity_words().values() for w in ws}
    trained = {_norm(w) for ws in load_associations("train").values() for w in ws}
    keys = [_norm(w) for ws in held.values() for w in ws]
    assert len(keys) == len(set(keys)) > 140 * 8  # no word counts for two concepts
    assert not set(keys) & (members | trained_used_keys())
    assert min(len(v) for v in held.values()) >= 4
    # the probes learn from unit words and training associations only, and no training
    # association is a member word (those stay in the member split)
    probe = default_probe_words()
    assert not {_norm(w) for ws in probe.values() for w in ws} & set(keys)
    trained_used = {_norm(w) for ws in training_associations().values() for w in ws}
    assert not trained_used & members
    # decontaminated: a training association that a held-out writer also wrote is not learned from
    raw_held = {_norm(w) for ws in load_associations("held-out").values() for w in ws}
    assert trained & raw_held and not trained_used & raw_held
    unit0, held0 = split_words(ENTITY_CONCEPTS[0], n_unit=10, seed=0)
    assert probe[ENTITY_CONCEPTS[0]][:10] == unit0 and not set(held0) & set(probe[ENTITY_CONCEPTS[0]])
    # a word the held-out writers gave to two concepts is dropped from both
    raw = load_associations("held-out")
    shared = {
        _norm(w)
        for c, ws in raw.items()
        for w in ws
        if sum(_norm(w) in {_norm(x) for x in v} for v in raw.values()) > 1
    }
    assert shared and not shared & set(keys)
