"""scores.json typed (findbench.interpret.scores): the cells evaluate writes read back equal, the
file text is the same, and a file that does not fit is refused naming the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from findbench.interpret.scores import Cell, Estimate, Scores

DATA = Path(__file__).parent / "data"


def test_a_file_written_before_the_types_reads_back_to_the_same_text():
    text = (DATA / "scores.json").read_text(encoding="utf-8")
    scores = Scores.read(DATA / "scores.json")
    assert scores.dumps() == text
    assert Scores.from_json(scores.to_json()) == scores
    cell = scores.cell("strings", "aia")
    assert cell.exact_match == Estimate(0.0, (0.0, 0.0), 1) and cell.n_degenerate == 1 and cell.unverified is False
    assert cell.mean_nmse is None and cell.estimate("unit_test_accuracy_near_margin").mean == pytest.approx(-0.2)
    assert scores.estimate("numeric", "aia", "mean_nmse") == Estimate(None, None, 0)  # written as null, null, 0
    assert scores.cell("numeric", "milan") is None and scores.estimate("strings", "milan", "exact_match") is None
    assert list(scores.cells) == ["numeric", "strings", "neurons_entities", "neurons_relations"]
    assert [(c, m) for c, m, _ in scores][:3] == [("numeric", "aia"), ("strings", "aia"), ("neurons_entities", "aia")]


def test_a_cell_writes_each_estimate_flat_in_the_order_evaluate_wrote_them():
    cell = Cell(nmse_success=Estimate(0.5, (0.0, 1.0), 2), nmse_success_observed=Estimate(0.0, (0.0, 0.0), 2),
                nmse_success_margin=Estimate(0.5, (0.0, 1.0), 2), mean_nmse=Estimate(None, None, 0),
                domain_iou=Estimate(0.25, (0.0, 0.5), 2), n_degenerate=0, unverified=True)
    obj = cell.to_json()
    assert list(obj) == ["nmse_success", "nmse_success_ci", "nmse_success_n", "nmse_success_observed",
                         "nmse_success_observed_ci", "nmse_success_observed_n", "nmse_success_margin",
                         "nmse_success_margin_ci", "nmse_success_margin_n", "mean_nmse", "mean_nmse_ci", "mean_nmse_n",
                         "domain_iou", "domain_iou_ci", "domain_iou_n", "n_degenerate", "unverified"]
    assert obj["nmse_success_ci"] == [0.0, 1.0] and obj["mean_nmse"] is None and obj["unverified"] is True
    assert Scores.from_json({"numeric": {"aia": obj}}).cell("numeric", "aia") == cell
    with pytest.raises(ValueError, match="name must be one of"):
        cell.estimate("accuracy")


def test_estimate_of_units_is_the_mean_with_its_seeded_interval():
    from findbench.stats import bootstrap_ci

    units = [1.0, 0.0, 1.0, 1.0]
    assert Estimate.of(units) == Estimate(0.75, tuple(bootstrap_ci(units)), 4)
    assert Estimate.of([]) == Estimate(None, None, 0)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d.update(numerics={}), r"scores\.json: unknown key 'numerics'"),
    (lambda d: d["strings"].update(gpt={}), r"scores\.json\.strings: unknown key 'gpt'"),
    (lambda d: d["strings"]["aia"].pop("exact_match_n"), r"strings\.aia: 'exact_match' without 'exact_match_n'"),
    (lambda d: d["strings"]["aia"].update(exact_match="1"), r"aia\.exact_match: expected a valid number, got str"),
    (lambda d: d["strings"]["aia"].update(exact_match_ci=[0.1]), r"strings\.aia\.exact_match_ci: missing item 1"),
    (lambda d: d["strings"]["aia"].pop("unverified"), r"strings\.aia: missing key 'unverified'"),
    (lambda d: d["strings"]["aia"].update(accuracy=1.0), r"strings\.aia: unknown key 'accuracy'"),
    (lambda d: d["strings"]["aia"].update(n_degenerate=-1), r"strings\.aia\.n_degenerate: expected greater than or"),
    (lambda d: d["strings"]["aia"].update(unverified=0), r"aia\.unverified: expected a valid boolean, got int"),
])
def test_a_file_that_does_not_fit_is_refused_naming_the_key(tmp_path, edit, message):
    obj = json.loads((DATA / "scores.json").read_text(encoding="utf-8"))
    edit(obj)
    path = tmp_path / "scores.json"
    path.write_text(json.dumps(obj))
    with pytest.raises(ValueError, match=message):
        Scores.read(path)
    with pytest.raises(ValueError, match=f"^{path}: "):
        Scores.read(path)


def test_the_estimates_are_the_cells_fields_in_writing_order():
    import dataclasses

    fields = [f.name for f in dataclasses.fields(Cell)]
    assert fields == [*Cell.ESTIMATES, "n_degenerate", "unverified"]
