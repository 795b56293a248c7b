"""Synthetic neurons on the packaged data: FIND order (anchor), unit-test rules, the
embedded-backbone goals (appendix G), the report command and the LM backbone end to end."""

from __future__ import annotations

import json

import pytest

from findbench.find.synthetic_neurons import UNDEFINED, generate_entities, generate_relations, make_function
from findbench.find.synthetic_neurons.relation_tables import load_relation_tables, normalize_text
from findbench.find.synthetic_neurons.report import relation_accuracy


def _release_rows(anchor, name: str) -> list[dict]:
    """``find-v1/<name>/data.json`` of the anchor copy of the FIND release."""
    return json.loads(anchor(f"find-v1/{name}/data.json").read_text())


@pytest.fixture(scope="module")
def relation_rows():
    return generate_relations(0)


def test_relations_follow_find_order(relation_rows, anchor):
    release = _release_rows(anchor, "neurons_relations")
    assert len(relation_rows) == len(release) == 75
    for row, ref in zip(relation_rows, release):
        assert normalize_text(row["concept1"]) == normalize_text(ref["concept1"]), row["function_id"]
        assert normalize_text(row["concept2"]) == normalize_text(ref["concept2"]), row["function_id"]
        assert normalize_text(row["exception"] or "") == normalize_text(ref["exeption"] or ""), row["function_id"]
        assert row["subcategory"] == ("atomic" if ref["exeption"] is None else "corruption")


def test_relation_unit_tests_on_packaged_tables(relation_rows):
    tables = {t.key: t for t in load_relation_tables()}
    for row in relation_rows:
        fn = make_function(row)
        key = json.loads(row["params"])["relation"]
        correct = [(t["inputs"][t["correct"] - 1], t["outputs"][t["correct"] - 1]) for t in row["unit_tests"]]
        assert len(correct) == 10
        assert sum(y == UNDEFINED for _x, y in correct) == (0 if row["subcategory"] == "atomic" else 2)
        assert fn([x for x, _y in correct]) == [y for _x, y in correct]
        for t in row["unit_tests"]:
            for j in range(3):
                if j == t["correct"] - 1:
                    continue
                x, y = t["inputs"][j], t["outputs"][j]
                answer = fn(x)
                entry = tables[key].lookup(x)
                assert not (answer == y or (answer != UNDEFINED and entry is not None and entry.accepts(y))), (
                    row["function_id"],
                    x,
                    y,
                )


def test_table_backbone_on_held_out_entries(relation_rows):
    result = relation_accuracy(rows=relation_rows, entries_per_relation=20)
    s = result["summary"]
    assert s["n_functions"] == 75 and s["n_entries"] > 1000
    assert s["accuracy"] == 1.0 and s["exception_accuracy"] == 1.0
    assert s["out_of_domain_accuracy"] == 1.0
    # per relation: served domain, source, independent check (capped at 20 items here)
    tables = {t.key: t for t in load_relation_tables()}
    assert set(s["per_relation"]) == set(tables) and s["n_served"] == sum(len(t.entries) for t in tables.values())
    for key, r in s["per_relation"].items():
        assert r["n_served"] == len(tables[key].entries) and r["source"] == tables[key].source
        assert r["check_source"] and r["check_source"] != r["source"]
        assert 10 <= r["n_check"] <= 20 and 0.8 <= r["check_accuracy"] <= 1.0, (key, r)
        if key in ("country_capital", "city_country", "name_gender", "country_flag_color"):
            assert r["n_coverage_check"] == 20 and 0.0 <= r["coverage_miss_rate"] < 0.5, (key, r)
    for row in result["per_function"]:
        assert row["check_accuracy"] == s["per_relation"][row["relation"]]["check_accuracy"]
    assert 0.9 <= s["check_accuracy"] <= 1.0 and 0.0 < s["coverage_miss_rate"] < 0.5


def test_entities_follow_find_order(anchor):
    from findbench.find.synthetic_neurons.entity_words import ENTITY_CONCEPTS

    release = _release_rows(anchor, "neurons_entities")
    assert [normalize_text(a["concept1"]) for a in release[:140]] == [normalize_text(c) for c in ENTITY_CONCEPTS]
    assert all(a["concept2"] is None for a in release[:140]) and all(a["concept2"] for a in release[140:])


@pytest.mark.slow
def test_embedded_entity_neurons_reach_find_selectivity(tmp_path):
    """FIND appendix G (Vicuna-13B): 0.846 own vs 0.079 other. Measured: 0.834 vs 0.071 (AUC 0.979) on
    held-out member words, 0.610 vs 0.087 (AUC 0.918) on held-out loose associations (MiniLM alone:
    0.756 vs 0.075 (0.961) and 0.543 vs 0.084 (0.894))."""
    from findbench.find.config import BackboneReportConfig
    from findbench.find.synthetic_neurons import backbone_report
    from findbench.find.synthetic_neurons.features import DEFAULT_ENTITY_FEATURES

    rows = generate_entities(0)
    assert len(rows) == 200
    assert [r["subcategory"] for r in rows].count("composition") == 60
    summary = backbone_report(BackboneReportConfig(out=str(tmp_path / "report"), categories=["entities"]))
    s = summary["entities"]
    assert s["n_concepts"] == 140 and s["n_words"] > 140 * 10
    assert s["model"] == DEFAULT_ENTITY_FEATURES
    assert s["own_mean"] >= 0.8 and s["other_mean"] <= 0.09  # the calibration pins other concepts' words near 0.08
    assert s["auc_mean"] >= 0.97
    # held-out loose associations (never seen by the probes): short of issue 16's goal
    # (>= 0.85 vs <= 0.08, AUC 0.97) but well above chance
    a = summary["entity_associations"]
    assert a["held_out"] == "associations" and a["n_words"] > 140 * 8
    assert a["own_mean"] >= 0.58 and a["other_mean"] <= 0.1 and a["auc_mean"] >= 0.91
    assert {p.name for p in (tmp_path / "report").iterdir()} == {
        "summary.json",
        "entities.csv",
        "entity_associations.csv",
        "entity_matrix.csv",
        "entity_selectivity.png",
    }


def test_backbone_report_takes_its_config(tmp_path):
    from findbench.find.config import BackboneReportConfig
    from findbench.find.synthetic_neurons import backbone_report

    summary = backbone_report(BackboneReportConfig(out=str(tmp_path / "cfg"), categories="relations", limit=2,
                                                   entries_per_relation=2, seed=1))
    assert summary["seed"] == 1 and summary["relations"]["n_functions"] == 2
    assert (tmp_path / "cfg/relations.csv").is_file() and "entities" not in summary
    with pytest.raises(ValueError, match="--model: pass --backend"):
        BackboneReportConfig(out=str(tmp_path / "x"), model="embedded")
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_backbone_report_cli_small_subset(tmp_path):
    from findbench.cli import main

    out = tmp_path / "r"
    rc = main(
        [
            "backbone-report",
            "--out",
            str(out),
            "--limit",
            "3",
            "--words-per-concept",
            "2",
            "--entries-per-relation",
            "2",
        ]
    )
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["entities"]["n_concepts"] == 3 and summary["entities"]["n_words"] == 6
    assert summary["relations"]["n_functions"] == 3 and summary["relations"]["accuracy"] == 1.0
    assert (out / "entity_selectivity.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["backbone-report", "--out", str(out), "--limit", "0"]) == 2


@pytest.mark.slow
def test_lm_backbone_end_to_end_embedded(relation_rows):
    from findbench.lm import load_lm

    lm = load_lm("embedded")
    from findbench.find.synthetic_neurons.entities import CATEGORY  # noqa: F401  (module import check)

    ent_rows = generate_entities(0)
    fn = make_function(ent_rows[0], backend="lm", lm=lm)
    scores = fn(["checkmate", "banana"])
    assert len(scores) == 2 and all(0.0 <= s <= 1.0 for s in scores)
    rel = make_function(relation_rows[0], backend="lm", lm=lm)
    answers = rel(["France"])
    assert len(answers) == 1 and isinstance(answers[0], str) and answers[0] != ""
