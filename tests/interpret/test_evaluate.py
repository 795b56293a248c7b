"""`findbench evaluate`: reading run folders, scoring interpretations, Table 2 outputs.

Runs are written by hand in tmp_path from procedural rows (seed 0, cached on disk). The judge
is a scripted stand-in that answers every unit test right when it sees a function's
ground-truth description and picks option 1 otherwise, so no model is loaded (except in the
one test marked slow). The domain scorer (`findbench.find.domain`) is replaced: absent in the
main run, a fake one where its wiring is checked.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from findbench import cli
from findbench.find.rows import load_rows
from findbench.interpret.config import EvaluateConfig
from findbench.interpret.evaluate import (
    CATEGORY_METRICS,
    CIRCUIT_FLOOR_COLUMNS,
    CSV_COLUMNS,
    FLOOR_COLUMNS,
    FLOORED_SCORES,
    SCORE_METRICS,
    evaluate_run,
)
from findbench.interpret.process import PROCESS_COLUMNS
from findbench.interpret.runs import load_interpretations
from findbench.interpret.scoreboard import PAPER_TABLE2, TABLE2_COLUMNS, render_table, table2_summaries
from findbench.interpret.scores import Cell, Estimate, Scores
from findbench.schema import CATEGORIES
from tests.interpret.fakes import KnowingJudge

WRONG_NUMERIC = "def interpretation(x):\n    return 1000.0 * x + 7.0\n"
WRONG_STRING = "def interpretation(s):\n    return 'zzz' + s[::-1] + 'q'\n"
DOMAIN_MODULE = "findbench.find.domain"


# ----------------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def rows() -> dict[str, list[dict]]:
    """Three functions per category; numeric ones without noise (their code is deterministic)."""
    numeric = [r for r in load_rows("numeric") if r["subcategory"] in ("atomic", "composition")]
    return {
        "numeric": numeric[:3],
        "strings": load_rows("strings")[:3],
        "neurons_entities": load_rows("neurons_entities")[:3],
        "neurons_relations": load_rows("neurons_relations")[:3],
    }


def write_episode(root: Path, category: str, method: str | None, row: dict, *,
                  description: str | None = None, domain: str | None = None, code: str | None = None) -> Path:
    """One episode folder of FIND's layout, with a method level (a run folder's export) or, with
    ``method=None``, without. Parts left None are not written (the interpreter gave none)."""
    local = row["function_id"].split("/")[1]
    folder = root / category / local if method is None else root / category / method / local
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("description.txt", description), ("domain.txt", domain), ("code.py", code)):
        if text is not None:
            (folder / name).write_text(text, encoding="utf-8")
    return folder


def write_run_info(root: Path, **info) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "run.json").write_text(json.dumps({"interpreter": "tiny-interp", "seed": 0, **info}), encoding="utf-8")


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames or []), list(reader)


# ------------------------------------------------------------------- a run with every category


@pytest.fixture(scope="module")
def scored(rows, tmp_path_factory):
    """A findbench-interpret run: ground truth and wrong interpretations, scored once."""
    run = tmp_path_factory.mktemp("run")
    write_run_info(run)
    num, st, ent, rel = (rows[c] for c in CATEGORIES)
    for row in num:
        write_episode(
            run, "numeric", "aia", row, description=row["description"], domain="[-128, 128]", code=row["code"]
        )
    write_episode(run, "numeric", "milan", num[0], description="wrong", code=WRONG_NUMERIC)
    write_episode(run, "numeric", "milan", num[1], description="no code given")  # no code.py: NMSE inf
    for row in st:
        write_episode(run, "strings", "aia", row, description=row["description"], code=row["code"])
    for k, row in enumerate(st):  # another function's description, wrong code
        write_episode(run, "strings", "milan", row, description=st[(k + 1) % 3]["description"], code=WRONG_STRING)
    for k, row in enumerate(ent):
        write_episode(run, "neurons_entities", "aia", row, description=row["description"])
        write_episode(run, "neurons_entities", "milan", row, description=ent[(k + 1) % 3]["description"])
        write_episode(run, "neurons_entities", "aia+milan", row, description=row["description"])
    for row in rel:
        write_episode(run, "neurons_relations", "aia", row, description=row["description"])
    (run / "notes").mkdir()  # a folder without episodes is not part of the tree
    (run / "notes" / "log.txt").write_text("x")
    judge = KnowingJudge(rows)
    result = evaluate_run(EvaluateConfig(run, judge=judge, out=run / "scores"), progress=False)
    return run, result, judge


@pytest.mark.slow  # the packaged entity rows' probes read the embedded LM's features
def test_ground_truth_scores_full_marks(scored):
    _, result, judge = scored
    scores = result["scores"]
    assert scores["numeric"]["aia"]["nmse_success"] == 1.0
    assert scores["numeric"]["aia"]["mean_nmse"] == 0.0
    assert scores["strings"]["aia"]["exact_match"] == 1.0
    assert scores["strings"]["aia"]["unit_test_accuracy"] == 1.0
    assert scores["neurons_entities"]["aia"]["unit_test_accuracy"] == 1.0
    assert scores["neurons_entities"]["aia+milan"]["unit_test_accuracy"] == 1.0
    assert scores["neurons_relations"]["aia"]["unit_test_accuracy"] == 1.0
    assert judge.calls > 0
    assert result["interpreter"] == "tiny-interp" and result["layout"] == "run"
    assert result["counts"]["numeric"] == {"aia": 3, "milan": 2}


@pytest.mark.slow  # the packaged entity rows' probes read the embedded LM's features
def test_wrong_interpretations_score_lower(scored):
    _, result, _ = scored
    scores = result["scores"]
    assert scores["numeric"]["milan"]["nmse_success"] == 0.0
    assert scores["numeric"]["milan"]["mean_nmse"] > 0.1  # the wrong code's NMSE; the missing one is inf, not averaged
    assert scores["strings"]["milan"]["exact_match"] < 1.0
    assert scores["strings"]["milan"]["unit_test_accuracy"] < 1.0
    assert scores["neurons_entities"]["milan"]["unit_test_accuracy"] < 1.0


@pytest.mark.slow  # the packaged entity rows' probes read the embedded LM's features
def test_scores_json_shape_and_metric_names(scored):
    run, result, _ = scored
    on_disk = json.loads((run / "scores" / "scores.json").read_text())
    assert on_disk == result["scores"]
    assert list(on_disk) == ["judge", *CATEGORIES]  # the judge that scored the unit tests first
    assert on_disk["judge"] == {"source": "object", "name": "knowing-judge", "mode": "logprob"}
    assert set(on_disk["neurons_entities"]) == {"aia", "milan", "aia+milan"}
    assert set(on_disk["neurons_relations"]) == {"aia"}
    for category, methods in ((c, m) for c, m in on_disk.items() if c != "judge"):
        for metrics in methods.values():
            # each metric with its interval and n beside it, then its floor and margin where it has one
            expected = []
            for m in CATEGORY_METRICS[category]:
                expected += [m, f"{m}_ci", f"{m}_n"]
                if m in FLOORED_SCORES:
                    expected += [f"{m}_{kind}{end}" for kind in ("observed", "margin", "margin_plan")
                                 for end in ("", "_ci", "_n")]
            assert tuple(metrics) == (*expected, "n_degenerate", "unverified")
            assert set(CATEGORY_METRICS[category]) <= set(SCORE_METRICS)
    assert SCORE_METRICS == (
        "nmse_success",
        "mean_nmse",
        "exact_match",
        "unit_test_accuracy",
        "domain_iou",
        "unit_test_accuracy_near",
        "position_accuracy",  # rasp: the code's outputs right position by position
        "role_accuracy",  # rasp under white-box access: find_circuit on the answer's component map
        "role_f1",
        "node_precision",
        "node_recall",
        "node_auroc",
    )
    assert 0.0 <= on_disk["numeric"]["aia"]["domain_iou"] <= 1.0  # find.domain's scorer on domain.txt


@pytest.mark.slow  # the packaged entity rows' probes read the embedded LM's features
def test_per_function_csv(scored, rows):
    run, _, _ = scored
    header, table = read_csv(run / "scores" / "per_function.csv")
    assert header[:7] == [
        "function_id",
        "category",
        "method",
        "nmse",
        "exact_match",
        "unit_test_accuracy",
        "domain_iou",
    ]
    assert tuple(header) == (*CSV_COLUMNS, *FLOOR_COLUMNS, *CIRCUIT_FLOOR_COLUMNS, "floor_missing", "degenerate",
                             "code_error", "damage", "source_log", *PROCESS_COLUMNS)
    assert len(table) == 3 + 2 + 3 + 3 + 9 + 3
    cells = {(r["function_id"], r["method"]): r for r in table}
    gt_num = cells[(rows["numeric"][0]["function_id"], "aia")]
    assert float(gt_num["nmse"]) == 0.0
    assert gt_num["exact_match"] == gt_num["unit_test_accuracy"] == ""
    assert 0.0 <= float(gt_num["domain_iou"]) <= 1.0
    assert cells[(rows["numeric"][1]["function_id"], "milan")]["nmse"] == "inf"
    assert float(cells[(rows["numeric"][0]["function_id"], "milan")]["nmse"]) > 0.1
    gt_str = cells[(rows["strings"][0]["function_id"], "aia")]
    assert float(gt_str["exact_match"]) == 1.0 and float(gt_str["unit_test_accuracy"]) == 1.0
    assert gt_str["nmse"] == gt_str["domain_iou"] == ""
    for category in ("neurons_entities", "neurons_relations"):
        row = cells[(rows[category][0]["function_id"], "aia")]
        assert row["category"] == category
        assert row["nmse"] == row["exact_match"] == row["domain_iou"] == ""
        assert float(row["unit_test_accuracy"]) == 1.0


@pytest.mark.slow  # the packaged entity rows' probes read the embedded LM's features
def test_table_md_has_paper_rows_and_the_run(scored):
    run, result, _ = scored
    text = (run / "scores" / "table.md").read_text()
    assert text == result["table"]
    assert "| GPT-4 | 0.33 | 0.23 | 0.82 | 0.56 | 0.89 | 0.89 | 0.78 | 0.74 | 0.92 |" in text
    assert "| GPT-3.5 | 0.12 | 0.13 | 0.66 | 0.39 | 0.81 | 0.88 | 0.37 | 0.64 | 0.68 |" in text
    assert "| Llama-2-70b-chat | 0.01 | 0.01 | 0.33 | 0.34 | 0.61 | 0.62 | 0.47 | 0.44 | 0.46 |" in text
    header = next(line for line in text.splitlines() if line.startswith("| interpreter"))
    assert [c.strip() for c in header.strip("|").split("|")][1:] == [c.header for c in TABLE2_COLUMNS]
    run_row = next(line for line in text.splitlines() if "(this run)" in line)
    cells = [c.strip() for c in run_row.strip("|").split("|")]
    assert cells[0] == "**tiny-interp** (this run)"
    assert cells[1:4] == ["**1.00 [1.00, 1.00] (n=3)†**"] * 3
    assert cells[4] == cells[6] == cells[7] == "**1.00 [1.00, 1.00] (n=3)†**"
    assert not cells[5].startswith("**1.00")  # entities MILAN: wrong descriptions
    assert cells[8] == cells[9] == "—"  # relations MILAN / AIA+MILAN: not in the run


@pytest.mark.slow  # the packaged entity rows' probes read the embedded LM's features
def test_scores_folder_inside_the_run_is_not_read_back(scored):
    run, _, _ = scored
    records = load_interpretations(run)  # scores/ and notes/ hold no episodes: ignored
    assert len(records) == 23
    assert set(records[0]) == {"function_id", "category", "method", "description", "domain", "code", "damage"}
    missing = [r for r in records if r["method"] == "milan" and r["category"] == "numeric" and not r["code"]]
    assert len(missing) == 1 and missing[0]["domain"] == ""


# ---------------------------------------------------------------------------------- layouts


@pytest.mark.slow  # the packaged entity rows' probes read the embedded LM's features
def test_find_layout_is_detected(rows, tmp_path):
    root = tmp_path / "gpt-4-results"
    for row in rows["numeric"][:2]:
        write_episode(root, "numeric", None, row, description=row["description"], code=row["code"])
    write_episode(
        root,
        "strings",
        None,
        rows["strings"][0],
        description=rows["strings"][0]["description"],
        code=rows["strings"][0]["code"],
    )
    records = load_interpretations(root)
    assert [r["method"] for r in records] == ["aia"] * 3
    assert [r["function_id"] for r in records] == [r["function_id"] for r in rows["numeric"][:2]] + [
        rows["strings"][0]["function_id"]
    ]
    assert {r["method"] for r in load_interpretations(root, method="milan")} == {"milan"}

    result = evaluate_run(EvaluateConfig(root, judge=KnowingJudge(rows), out=tmp_path / "out"), progress=False)
    assert result["layout"] == "find"
    assert result["interpreter"] == "gpt-4-results"  # no run.json: the folder's name
    assert result["scores"]["numeric"]["aia"]["nmse_success"] == 1.0
    assert result["scores"]["strings"]["aia"]["exact_match"] == 1.0
    assert "**gpt-4-results** (this run)" in (tmp_path / "out" / "table.md").read_text()


@pytest.mark.slow  # the packaged entity rows' probes read the embedded LM's features
def test_method_filters_a_run(rows, tmp_path):
    run = tmp_path / "run"
    write_run_info(run)
    row = rows["neurons_entities"][0]
    write_episode(run, "neurons_entities", "aia", row, description=row["description"])
    write_episode(run, "neurons_entities", "milan", row, description="x")
    assert [r["method"] for r in load_interpretations(run)] == ["aia", "milan"]
    assert [r["method"] for r in load_interpretations(run, method="milan")] == ["milan"]
    with pytest.raises(ValueError, match="method 'aia\\+milan'"):
        load_interpretations(run, method="aia+milan")


@pytest.mark.slow  # the packaged entity rows' probes read the embedded LM's features
def test_data_folder_from_run_json(rows, tmp_path):
    from findbench.builders.config import BuildConfig
    from findbench.builders.find import build

    data = tmp_path / "find"
    build(BuildConfig(out=str(data), configs="neurons_relations"), progress=False)
    run = tmp_path / "run"
    write_run_info(run, data=str(data))
    row = rows["neurons_relations"][1]
    write_episode(run, "neurons_relations", "aia", row, description=row["description"])
    result = evaluate_run(EvaluateConfig(run, judge=KnowingJudge(rows), out=tmp_path / "out"), progress=False)
    expected = {
        "unit_test_accuracy": 1.0,
        "unit_test_accuracy_ci": [1.0, 1.0],
        "unit_test_accuracy_n": 1,
        "unverified": True,  # the run named its own truth: checked against it, not verified by it
    }
    assert list(result["scores"]) == ["judge", "neurons_relations"]
    assert {k: result["scores"]["neurons_relations"]["aia"].get(k) for k in expected} == expected
    assert f"truth: data folder `{data}` named by run.json (unverified" in result["table"]
    # a function the data folder does not hold
    write_episode(run, "neurons_relations", "aia", {"function_id": "neurons_relations/f00999"}, description="d")
    with pytest.raises(ValueError, match=r"function_id: neurons_relations/f00999 .* data folder"):
        evaluate_run(EvaluateConfig(run, judge=KnowingJudge(rows), out=tmp_path / "out"), progress=False)


@pytest.mark.slow  # the packaged entity rows' probes read the embedded LM's features
def test_domain_iou_with_the_real_domain_scorer(tmp_path):
    domain = pytest.importorskip(DOMAIN_MODULE)
    corrupted = [r for r in load_rows("numeric") if r["subcategory"] == "corruption"][:2]
    run = tmp_path / "run"
    write_run_info(run)
    for row in corrupted:
        low, high = domain.corrupted_interval(row)
        write_episode(run, "numeric", "aia", row, domain=f"The function behaves unexpectedly on [{low}, {high}].")
        write_episode(run, "numeric", "milan", row, domain="all real numbers")
    config = EvaluateConfig(run, out=tmp_path / "out")
    result = evaluate_run(config, progress=False)  # no code.py: nothing runs in the sandbox
    expected = {
        "nmse_success": 0.0,
        "nmse_success_ci": [0.0, 0.0],
        "nmse_success_n": 2,
        "mean_nmse": None,
        "mean_nmse_ci": None,
        "mean_nmse_n": 0,
        "domain_iou": 1.0,
        "domain_iou_ci": [1.0, 1.0],
        "domain_iou_n": 2,
    }
    assert {k: result["scores"]["numeric"]["aia"].get(k) for k in expected} == expected
    assert result["scores"]["numeric"]["milan"]["domain_iou"] == 0.0


# ----------------------------------------------------------------------------------- errors


@pytest.mark.slow  # the packaged entity rows' probes read the embedded LM's features
def test_errors_name_the_field(rows, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="run_dir: nothing to score"):
        load_interpretations(empty)
    with pytest.raises(FileNotFoundError, match="run_dir"):
        load_interpretations(tmp_path / "absent")

    row = rows["numeric"][0]
    bad_cat = tmp_path / "bad_cat"
    write_episode(bad_cat, "numerics", "aia", row, code="x")
    with pytest.raises(ValueError, match="category: unknown category folder 'numerics'"):
        load_interpretations(bad_cat)

    bad_method = tmp_path / "bad_method"
    write_episode(bad_method, "numeric", "aia", row, code="x")
    (bad_method / "numeric" / "gpt4" / "f00001").mkdir(parents=True)
    with pytest.raises(ValueError, match="method: unknown method folder"):
        load_interpretations(bad_method)

    bad_episode = tmp_path / "bad_episode"
    write_episode(bad_episode, "numeric", "aia", row, code="x")
    (bad_episode / "numeric" / "aia" / "function-1").mkdir()
    with pytest.raises(ValueError, match="fNNNNN"):
        load_interpretations(bad_episode)

    mixed = tmp_path / "mixed"
    write_episode(mixed, "numeric", "aia", row, code="x")
    write_episode(mixed, "strings", None, rows["strings"][0], code="x")
    with pytest.raises(ValueError, match="mixes layouts"):
        load_interpretations(mixed)

    with pytest.raises(ValueError, match="method must be one of"):
        load_interpretations(bad_method, method="gpt")

    run = tmp_path / "run"
    write_run_info(run)
    write_episode(run, "numeric", "aia", {"function_id": "numeric/f99999"}, code="x")
    with pytest.raises(ValueError, match=r"function_id: numeric/f99999 .*procedural, seed 0"):
        evaluate_run(EvaluateConfig(run, out=tmp_path / "o3"), progress=False)
    with pytest.raises(ValueError, match="out: .* would replace the run folder"):
        evaluate_run(EvaluateConfig(run, out=run), progress=False)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="out: .* holds other files"):
        evaluate_run(EvaluateConfig(run, out=busy), progress=False)
    assert (busy / "keep.txt").read_text() == "mine"
    with pytest.raises(ValueError, match="--judge-mode"):
        evaluate_run(EvaluateConfig(run, out=tmp_path / "o4", judge_mode="vote"), progress=False)


# ------------------------------------------------------------------------------- scoreboard


def test_scoreboard_renders_missing_values_as_dashes():
    # FIND's nine columns, then findbench's three rasp columns (the paper has no value there)
    assert len(TABLE2_COLUMNS) == 12 and all(len(v) == 12 and v[9:] == (None,) * 3 for v in PAPER_TABLE2.values())
    assert list(PAPER_TABLE2) == ["GPT-4", "GPT-3.5", "Llama-2-70b-chat"]
    scores = Scores(
        {
            "numeric": {"aia": Cell(nmse_success=Estimate(0.5, (0.0, 1.0), 2), mean_nmse=Estimate(None, None, 0))},
            "neurons_relations": {"milan": Cell(unit_test_accuracy=Estimate(math.nan, None, 1))},
        }
    )
    assert [None if s is None else s.mean for s in table2_summaries(scores)] == [0.5] + [None] * 11
    text = render_table("a|b", scores, counts={"numeric": {"aia": 2}}, notes=["hello"])
    run_row = next(line for line in text.splitlines() if "(this run)" in line)
    assert run_row.startswith("| **a\\|b** (this run) | **0.50 [0.00, 1.00] (n=2)†** | — |")
    assert "Functions scored in this run: numeric code (NMSE<0.1): 2." in text and "- hello" in text


def test_scoreboard_cells_carry_interval_n_and_the_small_n_mark():
    from findbench.stats import INTERVAL_NOTE, SMALL_N_LEGEND

    scores = Scores(
        {
            "numeric": {"aia": Cell(nmse_success=Estimate(0.5, (0.0, 1.0), 2))},
            "strings": {
                "aia": Cell(exact_match=Estimate(0.25, (0.1, 0.4), 12), unit_test_accuracy=Estimate(0.8, None, 12))
            },
        }
    )
    text = render_table("run", scores)
    run_row = next(line for line in text.splitlines() if "(this run)" in line)
    cells = [c.strip() for c in run_row.strip("|").split("|")]
    assert cells[1:4] == ["**0.50 [0.00, 1.00] (n=2)†**", "**0.25 [0.10, 0.40] (n=12)**", "**0.80 (n=12)**"]
    assert f"- {SMALL_N_LEGEND}" in text and f"- {INTERVAL_NOTE}" in text
    # no cell below n = 10: no legend for the mark
    big = Scores({"strings": {"aia": Cell(exact_match=Estimate(0.25, (0.1, 0.4), 12))}})
    assert SMALL_N_LEGEND not in render_table("run", big) and INTERVAL_NOTE in render_table("run", big)


def test_comparison_states_the_distance_to_the_constant_floor():
    from findbench.interpret.scoreboard import render_comparison

    def est(mean, n):
        return Estimate(mean, (max(0.0, mean - 0.1), min(1.0, mean + 0.1)), n)

    runs = {
        "oracle": Scores({"strings": {"aia": Cell(exact_match=est(1.0, 3), unit_test_accuracy=est(0.9, 3))}}),
        "constant": Scores({"strings": {"aia": Cell(exact_match=est(0.0, 3), unit_test_accuracy=est(0.3, 3))}}),
        "old": Scores({"strings": {"aia": Cell(exact_match=Estimate(0.5, None, 12))}}),
    }  # no interval: none printed
    text = render_comparison(runs)
    lines = text.splitlines()
    assert "| **oracle** | — | 1.00 [0.90, 1.00] (n=3)† | 0.90 [0.80, 1.00] (n=3)† | — |" in text
    assert "| **old** | — | 0.50 (n=12) | — |" in text
    delta = lines.index("#### Δ vs constant")
    below = lines[delta:]
    assert any(line.startswith("| **oracle** | — | +1.00 | +0.60 | — |") for line in below)
    assert any(line.startswith("| **old** | — | +0.50 | — |") for line in below)
    assert not any(line.startswith("| **constant** |") for line in below)
    assert "Δ vs constant" not in render_comparison({k: v for k, v in runs.items() if k != "constant"})


def test_scores_json_carries_intervals_and_n(tmp_path):
    """Every cell of scores.json has its seeded bootstrap interval and n beside the mean, and
    table.md prints them, n < 10 marked."""
    from findbench.stats import SMALL_N_LEGEND, bootstrap_ci

    st = load_rows("strings")[:12]
    num = [r for r in load_rows("numeric") if r["subcategory"] in ("atomic", "composition")][:2]
    run = tmp_path / "run"
    write_run_info(run)
    for row in st:  # 12 right: n = 12, no mark
        write_episode(run, "strings", "aia", row, description=row["description"], code=row["code"])
    for k, row in enumerate(st[:4]):  # 3 right of 4: n = 4, marked
        write_episode(
            run, "strings", "milan", row, description=row["description"], code=row["code"] if k else WRONG_STRING
        )
    write_episode(run, "numeric", "aia", num[0], code=num[0]["code"])
    write_episode(run, "numeric", "aia", num[1], code=WRONG_NUMERIC)
    config = EvaluateConfig(run, judge=KnowingJudge({"strings": st}), out=tmp_path / "out")
    result = evaluate_run(config, progress=False)
    on_disk = json.loads((tmp_path / "out" / "scores.json").read_text())
    assert on_disk == result["scores"]
    aia, milan, numeric = on_disk["strings"]["aia"], on_disk["strings"]["milan"], on_disk["numeric"]["aia"]
    assert (aia["exact_match"], aia["exact_match_ci"], aia["exact_match_n"]) == (1.0, [1.0, 1.0], 12)
    assert milan["exact_match"] == 0.75 and milan["exact_match_n"] == 4
    assert milan["exact_match_ci"] == list(bootstrap_ci([0.0, 1.0, 1.0, 1.0]))  # seed 0, reproducible
    assert milan["exact_match_ci"][0] < 0.75 < milan["exact_match_ci"][1]
    assert milan["unit_test_accuracy_n"] == 4 and milan["unit_test_accuracy_ci"] == [1.0, 1.0]
    # nmse_success: one 0/1 unit per function; mean_nmse over the finite NMSEs
    assert (numeric["nmse_success"], numeric["nmse_success_n"]) == (0.5, 2)
    assert numeric["nmse_success_ci"] == list(bootstrap_ci([1.0, 0.0]))
    assert numeric["mean_nmse_n"] == 2
    if numeric["domain_iou"] is not None:  # no domain.txt: IoU 0 per function
        assert (numeric["domain_iou"], numeric["domain_iou_ci"], numeric["domain_iou_n"]) == (0.0, [0.0, 0.0], 2)
    table = (tmp_path / "out" / "table.md").read_text()
    run_row = next(line for line in table.splitlines() if "(this run)" in line)
    cells = [c.strip() for c in run_row.strip("|").split("|")]
    assert cells[1] == "**0.50 [0.00, 1.00] (n=2)†**"
    assert cells[2] == "**1.00 [1.00, 1.00] (n=12)**" and cells[3] == "**1.00 [1.00, 1.00] (n=12)**"
    assert SMALL_N_LEGEND in table


# ------------------------------------------------------------------------------------- CLI


@pytest.mark.slow  # the packaged entity rows' probes read the embedded LM's features
def test_cli_evaluate_prints_the_table(rows, tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    write_run_info(run, interpreter="cli-interp")
    row = rows["numeric"][2]
    write_episode(run, "numeric", "aia", row, code=row["code"])
    assert cli.main(["evaluate", str(run)]) == 0  # numeric only: the default judge is never loaded
    out = capsys.readouterr().out
    assert "| **cli-interp** (this run) | **1.00 [1.00, 1.00] (n=1)†** |" in out and "| GPT-4 |" in out
    assert out == (run / "scores" / "table.md").read_text()
    assert sorted(p.name for p in (run / "scores").iterdir()) == [
        "per_function.csv",
        "process.json",
        "scores.json",
        "table.md",
        "unit_tests.csv",
    ]
    assert cli.main(["evaluate", str(run)]) == 0  # rerun replaces its own scores folder
    capsys.readouterr()


def test_cli_evaluate_arguments_and_errors(monkeypatch, tmp_path, capsys):
    import dataclasses

    import findbench.interpret.evaluate as evaluate

    seen = {}

    def fake(cfg):
        seen.update(dataclasses.asdict(cfg))
        if cfg.judge == "embedded-evaluator":
            raise FileNotFoundError("embedded-evaluator is not trained yet: run `findbench train-judge`")
        return {"table": "| table |\n"}

    monkeypatch.setattr(evaluate, "evaluate_run", fake)
    assert (
        cli.main(
            [
                "evaluate",
                "r",
                "--judge",
                "embedded",
                "--judge-mode",
                "pmi",
                "--method",
                "milan",
                "--data",
                "d",
                "--judge-cache",
                "c.sqlite",
                "--out",
                "o",
            ]
        )
        == 0
    )
    assert seen == {
        "run_dir": "r",
        "data": "d",
        "judge": "embedded",
        "judge_mode": "pmi",
        "judge_model": None,
        "method": "milan",
        "out": "o",
        "judge_cache": "c.sqlite",
        "report": False,
    }
    assert capsys.readouterr().out == "| table |\n"
    seen.clear()
    assert cli.main(["evaluate", str(tmp_path / "r")]) == 2
    assert seen["out"] == str(tmp_path / "r" / "scores") and seen["judge"] == "embedded-evaluator"
    assert "findbench evaluate: error: embedded-evaluator is not trained yet" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.parse_args(["evaluate", "r", "--method", "gpt"])


# ------------------------------------------------------------------------------ real judge


@pytest.mark.slow
def test_embedded_judge_scores_a_run(rows, tmp_path):
    run = tmp_path / "run"
    write_run_info(run)
    row = rows["neurons_entities"][0]
    write_episode(run, "neurons_entities", "aia", row, description=row["description"])
    result = evaluate_run(EvaluateConfig(run, judge="embedded", out=tmp_path / "out"), progress=False)
    value = result["scores"]["neurons_entities"]["aia"]["unit_test_accuracy"]
    assert 0.0 <= value <= 1.0
    assert "in `logprob` mode" in result["table"]


def test_strings_without_reference_code_score_from_their_unit_tests(tmp_path, monkeypatch):
    """FIND v1's release ships no string-function code: exact match comes from the unit tests'
    correct pairs (the function's own outputs), and a row with neither leaves only that column
    empty; no row stops the others."""
    import findbench.find.rows as find_rows
    from findbench.interpret.evaluate import reference_program

    st = [dict(r) for r in load_rows("strings")[:3]]
    no_code = dict(st[0], code="")
    bare = dict(st[1], code="", unit_tests=[])
    program, inputs = reference_program(no_code)
    assert "def function" in program and set(inputs) == {t["inputs"][t["correct"] - 1] for t in st[0]["unit_tests"]}
    assert reference_program(bare) is None

    monkeypatch.setattr(find_rows, "load_rows", lambda category, seed=0, data=None: [no_code, bare, st[2]])
    run = tmp_path / "run"
    write_run_info(run)
    for row in st:  # the true code and description for every function
        write_episode(run, "strings", "aia", row, description=row["description"], code=row["code"])
    write_episode(run, "strings", "milan", st[0], description="x", code=WRONG_STRING)
    config = EvaluateConfig(run, judge=KnowingJudge({"strings": st}), out=tmp_path / "out")
    result = evaluate_run(config, progress=False)
    _, per_function = read_csv(tmp_path / "out" / "per_function.csv")
    by_id = {(r["function_id"], r["method"]): r for r in per_function}
    assert float(by_id[(st[0]["function_id"], "aia")]["exact_match"]) == 1.0
    assert float(by_id[(st[0]["function_id"], "milan")]["exact_match"]) == 0.0
    assert by_id[(st[1]["function_id"], "aia")]["exact_match"] == ""  # nothing to compare with
    assert float(by_id[(st[2]["function_id"], "aia")]["exact_match"]) == 1.0
    assert result["scores"]["strings"]["aia"]["exact_match"] == 1.0
    assert result["scores"]["strings"]["aia"]["unit_test_accuracy"] == 1.0  # every column still scored


def test_a_run_on_in_memory_rows_needs_its_data(tmp_path):
    """Such a run's function ids are shared by the procedural rows: without --data it would be
    scored against other functions."""
    from findbench.constants import UsageError
    from findbench.interpret.config import ReportConfig
    from findbench.interpret.report import write_report

    row = load_rows("strings")[0]
    run = tmp_path / "run"
    write_run_info(run, source="rows", data=None)
    write_episode(run, "strings", "aia", row, description=row["description"], code=row["code"])
    with pytest.raises(UsageError, match="--data: .* in-memory rows"):
        evaluate_run(EvaluateConfig(run, judge=KnowingJudge({"strings": [row]}), out=tmp_path / "out"), progress=False)
    assert not (tmp_path / "out").exists()
    scores = tmp_path / "scores"
    scores.mkdir()
    (scores / "scores.json").write_text("{}")
    with pytest.raises(UsageError, match="--data: .* in-memory rows"):
        write_report(ReportConfig(run_dir=str(run), scores=str(scores)))
    assert [p.name for p in scores.iterdir()] == ["scores.json"]


def test_scores_name_the_judge_that_produced_them(tmp_path, monkeypatch, capsys):
    """scores.json's "judge", table.md and evaluate's output say which judge scored the unit tests: the
    adapter shipped with findbench and its version, or a judge trained here with its path, steps and date."""
    import findbench.judge
    from findbench import __version__
    from findbench.constants import EMBEDDED_JUDGE_VERSION, TRAINED_MARKER

    strings = load_rows("strings")[:2]
    run = tmp_path / "run"
    write_run_info(run)
    for row in strings:
        write_episode(run, "strings", "aia", row, description=row["description"], code=row["code"])
    monkeypatch.setenv("FINDBENCH_CACHE", str(tmp_path / "cache"))  # nothing installed here: the shipped judge
    monkeypatch.setattr(findbench.judge, "load_judge", lambda judge, **kw: KnowingJudge(strings))  # no model loads

    config = EvaluateConfig(run, judge="embedded-evaluator", judge_mode="logprob", out=tmp_path / "shipped")
    result = evaluate_run(config, progress=False)
    shipped = {"source": "shipped", "name": "embedded-evaluator", "version": EMBEDDED_JUDGE_VERSION,
               "findbench": __version__, "mode": "logprob"}
    assert result["scores"]["judge"] == shipped
    assert Scores.read(tmp_path / "shipped" / "scores.json").judge.to_json() == shipped
    assert (f"Judge: `embedded-evaluator` {EMBEDDED_JUDGE_VERSION}, the adapter shipped with findbench {__version__}, "
            "in `logprob` mode.") in (tmp_path / "shipped" / "table.md").read_text()

    local = tmp_path / "judge-20261128-120000"
    local.mkdir()
    record = {"judge_mode": "logprob", "steps": 7, "trained": "2026-11-28T12:00:00Z"}
    (local / TRAINED_MARKER).write_text(json.dumps(record))
    assert cli.main(["evaluate", str(run), "--judge", str(local), "--out", str(tmp_path / "local")]) == 0
    assert (f"Judge: the judge trained at `{local}` (7 steps, finished 2026-11-28T12:00:00Z), in `logprob` mode."
            in capsys.readouterr().out)
    assert json.loads((tmp_path / "local" / "scores.json").read_text())["judge"] == {
        "source": "local", "name": str(local), "path": str(local), "steps": 7, "trained": "2026-11-28T12:00:00Z",
        "mode": "logprob"}
