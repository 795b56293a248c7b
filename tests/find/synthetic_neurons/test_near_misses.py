"""Near-miss unit tests (``unit_tests_near``) of the synthetic neurons, on small in-test data
(the four hand-written concepts with MiniLM features; three relation tables)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from findbench import schema
from findbench.find.synthetic_neurons import (
    UNDEFINED,
    entities,
    generate_entities,
    generate_relations,
    make_function,
    relations,
)
from findbench.find.synthetic_neurons.entities import (
    N_NEAR_CONCEPTS,
    OVERLAP_SHARE,
    SELECT_THRESHOLD,
    entity_splits,
    near_miss_words,
)
from findbench.find.synthetic_neurons.relation_tables import Entry, RelationException, RelationTable
from findbench.find.synthetic_neurons.relations import nearest_relations
from findbench.find.unit_tests import NearMissTests
from findbench.lm.encoder import EMBEDDED_ENCODER
from tests._words import ENTITY_WORDS as WORDS
from tests.find.synthetic_neurons.test_neurons import COUNTRIES, _tables


def _three_tables():
    """The two test tables and a second relation on the same countries (their continent)."""
    capital, rivers = _tables()
    continent = RelationTable(
        "country_continent",
        "a country",
        "the continent where that country is located",
        tuple(Entry(e.input, e.attrs["continent"], (), e.attrs) for e in COUNTRIES),
        (
            RelationException("the input country is in Asia", "continent", "eq", "Asia"),
            RelationException("the input country is in Europe", "continent", "eq", "Europe"),
        ),
    )
    return [capital, rivers, continent]


@pytest.fixture(scope="module")
def relation_rows():
    return generate_relations(0, tables=_three_tables())


@pytest.fixture(scope="module")
def entity_rows():
    return generate_entities(0, words=WORDS, n_compositions=2, encoder=EMBEDDED_ENCODER)


def test_nearest_relations_are_those_answering_most_inputs():
    tables = _three_tables()
    assert nearest_relations(tables, 0) == [(1.0, 2)] and nearest_relations(tables, 2) == [(1.0, 0)]
    assert nearest_relations(tables, 1) == []  # no other relation answers rivers


def test_relation_near_tests_share_the_input_and_only_the_neuron_gives_the_right_answer(relation_rows):
    tables = {t.key: t for t in _three_tables()}
    for row in relation_rows:
        params = json.loads(row["params"])
        table, v = tables[params["relation"]], params["exception_index"]
        fn = make_function(row, tables=list(tables.values()))
        assert len(row["unit_tests_near"]) == 10
        # the correct pairs are FIND's unit-test pairs, in their order
        assert [(t["inputs"][t["correct"] - 1], t["outputs"][t["correct"] - 1]) for t in row["unit_tests_near"]] == [
            (t["inputs"][t["correct"] - 1], t["outputs"][t["correct"] - 1]) for t in row["unit_tests"]
        ]
        for t in row["unit_tests_near"]:
            k = t["correct"] - 1
            x, y = t["inputs"][0], t["outputs"][k]
            assert len(set(t["inputs"])) == 1 and fn(x) == y
            entry = table.lookup(x)
            wrong = [o for j, o in enumerate(t["outputs"]) if j != k]
            assert len(set(wrong)) == 2
            for o in wrong:  # never the neuron's answer nor one it accepts
                assert o != y and (o != UNDEFINED if y == UNDEFINED else not entry.accepts(o))
            if y == UNDEFINED:  # inside the exception: the relation without it answers
                assert entry.output in wrong
            elif v is None and any(e.matches(entry) for e in table.exceptions):  # an atomic relation with one
                assert UNDEFINED in wrong
            if table.key in ("country_capital", "country_continent"):  # the nearest relation answers
                other = tables["country_continent" if table.key == "country_capital" else "country_capital"]
                assert other.lookup(x).output in wrong
        schema.check_row(row)


def test_relation_near_tests_are_deterministic_and_leave_everything_else_as_it_was(relation_rows, monkeypatch):
    assert generate_relations(0, tables=_three_tables()) == relation_rows
    monkeypatch.setattr(relations, "near_miss_tests", lambda *a, **k: NearMissTests([]))
    without = generate_relations(0, tables=_three_tables())
    assert [{**r, "unit_tests_near": []} for r in relation_rows] == without


class _FakeNeuron:
    """Activations by hand: concept ``c``'s words score ``level[c]``, except the listed words."""

    def __init__(self, concepts, member, level, special=None):
        self.concepts = concepts
        self._act = {w: special.get(w, level[c]) if special else level[c] for c, ws in member.items() for w in ws}

    def scores(self, words):
        return np.array([self._act[w] for w in words])


def test_near_miss_words_come_from_the_nearest_concepts_and_are_not_selected():
    member = {c: [f"{c}{k}" for k in range(8)] for c in "abcdefgh"}
    level = {"a": 0.9, "b": 0.1, "c": 0.4, "d": 0.3, "e": 0.2, "f": 0.35, "g": 0.05, "h": 0.45}
    # h overlaps a: the neuron selects half of its words, so h lends none, though nearest on average
    special = {"c0": 0.8, "c1": 0.6, **{f"h{k}": 0.7 for k in range(4)}}
    neuron = _FakeNeuron(("a",), member, level, special=special)
    got = near_miss_words(neuron, member, n_words=10)
    # nearest: c (0.4 mean, with two selected words), f, d: 6 + 8 + 8 words, enough for 10
    assert N_NEAR_CONCEPTS == 3 and OVERLAP_SHARE == 0.5
    assert got == [f"c{k}" for k in range(2, 8)] + member["f"] + member["d"]
    assert near_miss_words(neuron, member, n_words=25) == got + member["e"]  # the next concept while too few
    assert all(neuron.scores([w])[0] < SELECT_THRESHOLD for w in got)


def test_entity_near_tests_offer_words_of_other_concepts_the_neuron_does_not_select(entity_rows):
    unit_owner = {w: c for c, (unit, _held) in entity_splits(0, words=WORDS).items() for w in unit}
    for row in entity_rows:
        params = json.loads(row["params"])
        fn = make_function(row)
        tests = row["unit_tests_near"]
        assert len(tests) == 10 and [t["inputs"][t["correct"] - 1] for t in tests] == params["unit_words"]
        assert all(t["outputs"] is None and len(set(t["inputs"])) == 3 for t in tests)
        wrong = [w for t in tests for j, w in enumerate(t["inputs"]) if j != t["correct"] - 1]
        # FIND's pool (other concepts' unit-test words), each word once while the pool lasts: the
        # three other concepts lend 30 to an atomic neuron, the two of a composition at most 20
        assert all(unit_owner[w] not in params["concepts"] for w in wrong)
        assert len(set(wrong)) == 20 if len(params["concepts"]) == 1 else len(set(wrong)) >= 15
        assert max(fn(wrong)) < SELECT_THRESHOLD  # the neuron selects none of them
        # the right word scores above both wrong ones in every test
        assert all(
            fn(t["inputs"][t["correct"] - 1])
            > max(fn([w for w in t["inputs"]])[j] for j in range(3) if j != t["correct"] - 1)
            for t in tests
        )
        schema.check_row(row)


def test_entity_near_tests_are_deterministic_and_leave_everything_else_as_it_was(entity_rows, monkeypatch):
    assert generate_entities(0, words=WORDS, n_compositions=2, encoder=EMBEDDED_ENCODER) == entity_rows
    monkeypatch.setattr(entities, "near_miss_tests", lambda *a, **k: NearMissTests([]))
    without = generate_entities(0, words=WORDS, n_compositions=2, encoder=EMBEDDED_ENCODER)
    assert [{**r, "unit_tests_near": []} for r in entity_rows] == without
