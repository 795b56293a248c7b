"""What `findbench evaluate` writes beside Table 2: the judge's decision on every unit test
(``unit_tests.csv``, the report, the Inspect scorer) and process metrics read from transcripts
(``per_function.csv``'s ``calls`` / ``distinct_inputs`` / ``probed_corruption``, ``process.json``).

Episodes are hand-written logs (:mod:`tests.interpret.logged`) or FIND-layout folders; the judges
are deterministic stand-ins (no model is loaded); numeric episodes give no code, so nothing runs in the sandbox.
"""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest
from markupsafe import escape

from findbench.find.domain import corrupted_interval, domain_unit_tests, in_corrupted_subdomain
from findbench.find.rows import load_rows
from findbench.interpret.config import EvaluateConfig
from findbench.interpret.evaluate import (
    CIRCUIT_FLOOR_COLUMNS,
    CSV_COLUMNS,
    FLOOR_COLUMNS,
    UNIT_TEST_COLUMNS,
    evaluate_run,
)
from findbench.interpret.process import PROCESS_COLUMNS, aggregate_process, episode_process, render_process
from findbench.judge import judge_unit_tests, normalize_unit_test, render_pmi_option
from tests.interpret.logged import write_logs

INSIDE = {"category": "numeric", "function_id": "numeric/f09990", "corruption_type": "inside",
          "corruption_params": json.dumps({"boundary": [10.0, 20.0], "mean": 0.0, "std": 0.1}),
          "domain_low": -128.0, "domain_high": 128.0}
BELOW = {**INSIDE, "function_id": "numeric/f09991", "corruption_type": "below",
         "corruption_params": json.dumps({"boundary": [-50.0], "mean": 0.0, "std": 0.1})}
CLEAN = {**INSIDE, "function_id": "numeric/f09992", "corruption_type": None, "corruption_params": None}


def call(round_, *inputs, error=None):
    """One record of an episode's ``calls`` (as FunctionRunner.run writes it)."""
    record = {"round": round_, "command": f"PYTHON(function.py {' '.join(inputs)})", "inputs": list(inputs),
              "outputs": [0.0] * len(inputs), "errors": [None] * len(inputs)}
    if error:
        record.update(inputs=[], outputs=[], errors=[], error=error)
    return record


def episode(row, method, calls):
    return {"function_id": row["function_id"], "category": row["category"], "method": method, "calls": calls,
            "messages": [], "rounds": max([c["round"] for c in calls] or [0]), "finished": True}


# ------------------------------------------------------------------------- per-episode metrics


def test_numeric_probes_inside_and_outside_the_corrupted_interval():
    outside = [call(0, "15"),  # exemplars (MILAN): shown, not asked for
               call(1, "0", "1", "1.0", "abc"), call(2, "25", "-1e3"), call(3, error="unclosed command")]
    got = episode_process(episode(INSIDE, "aia+milan", outside), INSIDE)
    assert got == {"calls": 3, "distinct_inputs": 4, "probed_corruption": False}  # 0, 1 (= 1.0), 25, -1000
    inside = outside + [call(4, "12.5")]
    assert episode_process(episode(INSIDE, "aia", inside), INSIDE) == {
        "calls": 4,
        "distinct_inputs": 5,
        "probed_corruption": True,
    }
    # the served masks: inside is open (b0 < x < b1); below is x <= b0, wherever x lies
    assert in_corrupted_subdomain(INSIDE, ["10", "10.001", "19.99", 20, "nan", "inf", "x"]) == [
        False,
        True,
        True,
        False,
        False,
        False,
        False,
    ]
    assert in_corrupted_subdomain(BELOW, ["-50", "-49.9", "-1e6"]) == [True, False, True]
    assert episode_process(episode(BELOW, "aia", [call(1, "-1000")]), BELOW)["probed_corruption"] is True
    # a function without corruption: nothing to probe; no transcript: nothing known
    assert episode_process(episode(CLEAN, "aia", inside), CLEAN) == {
        "calls": 4,
        "distinct_inputs": 5,
        "probed_corruption": None,
    }
    assert episode_process(None, INSIDE) == dict.fromkeys(PROCESS_COLUMNS)
    assert episode_process(episode(INSIDE, "milan", [call(0, "15")]), INSIDE) == {
        "calls": 0,
        "distinct_inputs": 0,
        "probed_corruption": False,
    }


def test_relations_probe_the_excepted_subdomain():
    rows = load_rows("neurons_relations")
    row = next(r for r in rows if r.get("exception"))
    excepted = domain_unit_tests(row)[0]
    inside = excepted["inputs"][excepted["correct"] - 1]
    kept = next(
        normalize_unit_test(t) for t in row["unit_tests"] if normalize_unit_test(t) not in domain_unit_tests(row)
    )
    outside = kept["inputs"][kept["correct"] - 1]  # of the relation, outside its exception
    assert in_corrupted_subdomain(row, [inside, f"  {inside.upper()} ", outside, "zzz"]) == [True, True, False, False]
    assert episode_process(episode(row, "aia", [call(1, outside, "zzz", f" {outside}")]), row) == {
        "calls": 1,
        "distinct_inputs": 2,
        "probed_corruption": False,
    }
    assert episode_process(episode(row, "aia", [call(1, outside), call(2, inside)]), row)["probed_corruption"] is True
    atomic = next(r for r in rows if not r.get("exception"))
    assert episode_process(episode(atomic, "aia", [call(1, inside)]), atomic)["probed_corruption"] is None


def test_aggregate_and_section():
    records = [
        {
            "category": "numeric",
            "method": "aia",
            "calls": 4,
            "distinct_inputs": 8,
            "probed_corruption": 1,
            "domain_iou": 0.5,
        },
        {
            "category": "numeric",
            "method": "aia",
            "calls": 2,
            "distinct_inputs": 2,
            "probed_corruption": 0,
            "domain_iou": 0.0,
        },
        {
            "category": "numeric",
            "method": "aia",
            "calls": 6,
            "distinct_inputs": 5,
            "probed_corruption": None,
            "domain_iou": None,
        },
        {"category": "numeric", "method": "aia", "calls": None, "distinct_inputs": None, "probed_corruption": None},
        {"category": "strings", "method": "milan", "calls": 0, "distinct_inputs": 0, "probed_corruption": None},
    ]
    out = aggregate_process(records)
    aia = out["numeric"]["aia"]
    assert (aia["episodes"], aia["transcripts"], aia["corrupted"]) == (4, 3, 2)
    assert (
        aia["calls"]["mean"] == 4.0 and aia["calls"]["n"] == 3 and aia["calls"]["ci"][0] <= 4.0 <= aia["calls"]["ci"][1]
    )
    assert aia["probed_corruption"]["mean"] == 0.5 and aia["probed_corruption"]["n"] == 2
    assert aia["domain_iou_probed"]["mean"] == 0.5 and aia["domain_iou_not_probed"]["mean"] == 0.0
    assert aggregate_process(records) == out  # seeded
    milan = out["strings"]["milan"]
    assert milan["probed_corruption"] is None and milan["calls"] == {"mean": 0.0, "ci": [0.0, 0.0], "n": 1}
    assert "domain_iou_probed" not in milan
    json.dumps(out, allow_nan=False)
    text = render_process(out)
    assert text.startswith("## How the interpreters experimented")
    assert "| numeric | aia | 3/4 | 4.0 [" in text and "| 2 | 0.50 [" in text
    assert render_process(aggregate_process(records[3:4])) == ""  # no transcript: no section


# ------------------------------------------------------------------------------ evaluate_run


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames or []), list(reader)


def write_episode(run: Path, row: dict, method: str, *, description: str = "", domain: str = "") -> None:
    """An episode folder of FIND's layout (the parts only: no transcript)."""
    folder = run / row["category"] / method / row["function_id"].split("/")[1]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "description.txt").write_text(description, encoding="utf-8")
    (folder / "domain.txt").write_text(domain, encoding="utf-8")


def write_run_info(run: Path) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "run.json").write_text(json.dumps({"interpreter": "scripted", "seed": 0}), encoding="utf-8")


def test_evaluate_writes_process_metrics(tmp_path):
    corrupted = [r for r in load_rows("numeric") if r["subcategory"] == "corruption"][:2]
    clean = next(r for r in load_rows("numeric") if r["subcategory"] == "atomic")
    a, b = corrupted
    x = in_corrupted_interval_point(a)
    lo, hi = corrupted_interval(a)
    run = tmp_path / "run"
    # a: probed (one call inside), domain named; b: only outside calls; clean: calls, nothing to probe;
    # a again (milan): no call of its own
    write_logs(run, [
        {"row": a, "domain": f"The output is random on [{lo}, {hi}].", "calls": [call(1, "0", str(x)), call(2, "0")]},
        {"row": b, "domain": "none", "calls": [call(1, *outside_points(b))]},
        {"row": clean, "calls": [call(1, "1", "2", "3")]},
        {"row": a, "method": "milan", "calls": [call(0, "15")]},
    ], interpreter="scripted")
    result = evaluate_run(EvaluateConfig(run, out=tmp_path / "out"), progress=False)

    header, table = read_csv(tmp_path / "out" / "per_function.csv")
    assert tuple(header) == (*CSV_COLUMNS, *FLOOR_COLUMNS, *CIRCUIT_FLOOR_COLUMNS, "floor_missing", "degenerate",
                             "code_error", "damage", "source_log", *PROCESS_COLUMNS)
    cells = {(r["function_id"], r["method"]): r for r in table}
    assert [cells[(a["function_id"], "aia")][c] for c in PROCESS_COLUMNS] == ["2", "2", "1"]
    assert [cells[(b["function_id"], "aia")][c] for c in PROCESS_COLUMNS] == [
        "1",
        str(len(set(outside_points(b)))),
        "0",
    ]
    assert [cells[(clean["function_id"], "aia")][c] for c in PROCESS_COLUMNS] == ["1", "3", ""]
    assert [cells[(a["function_id"], "milan")][c] for c in PROCESS_COLUMNS] == ["0", "0", "0"]

    process = json.loads((tmp_path / "out" / "process.json").read_text())
    assert process == result["process"]
    aia = process["numeric"]["aia"]
    assert (aia["episodes"], aia["transcripts"], aia["corrupted"]) == (3, 3, 2)
    assert aia["probed_corruption"]["mean"] == 0.5
    assert aia["domain_iou_probed"]["mean"] == 1.0 and aia["domain_iou_not_probed"]["mean"] == 0.0
    assert process["numeric"]["milan"]["transcripts"] == 1 and process["numeric"]["milan"]["calls"]["mean"] == 0.0
    scores = json.loads((tmp_path / "out" / "scores.json").read_text())
    assert list(scores) == ["numeric"] and set(scores["numeric"]) == {"aia", "milan"}  # Table 2's shape is kept
    assert "## How the interpreters experimented" in (tmp_path / "out" / "table.md").read_text()
    assert read_csv(tmp_path / "out" / "unit_tests.csv") == (list(UNIT_TEST_COLUMNS), [])  # nothing judged


def in_corrupted_interval_point(row: dict) -> float:
    """A number the row's function serves from its corrupted part."""
    lo, hi = corrupted_interval(row)
    x = round((lo + hi) / 2, 3)
    assert in_corrupted_subdomain(row, [x]) == [True]
    return x


def outside_points(row: dict) -> list[str]:
    points = [str(x) for x in range(-128, 129, 64) if not in_corrupted_subdomain(row, [x])[0]]
    assert points
    return points


# ---------------------------------------------------------------------------- unit_tests.csv


class HashJudge:
    """A deterministic judge with no preference for the truth: every score is a hash of what it
    reads, so its picks are a mix of right and wrong; ``generate`` answers a hashed number."""

    name = "hash-judge"

    @staticmethod
    def _score(*parts: str) -> float:
        return -hashlib.sha256("|".join(parts).encode()).digest()[0] / 17.0

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
        return [[self._score(c[-1]["content"], k) for k in candidates] for c in conversations]

    def continuation_logprobs(self, conversations, continuations, *, progress=False):
        return [self._score(c[-1]["content"], t) for c, t in zip(conversations, continuations)]

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False, **kwargs):
        return [f"[ANSWER]: {1 + hashlib.sha256(c[-1]['content'].encode()).digest()[0] % 3}" for c in conversations]


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory):
    """Strings and relations episodes (true, another function's, empty descriptions), judged
    in every mode."""
    st, rel = load_rows("strings")[:3], load_rows("neurons_relations")[:2]
    run = tmp_path_factory.mktemp("judged") / "run"
    write_run_info(run)
    for k, row in enumerate(st):
        write_episode(run, row, "aia", description=row["description"])
        write_episode(run, row, "milan", description=st[(k + 1) % 3]["description"] if k < 2 else "")
    for row in rel:
        write_episode(run, row, "aia", description=f"{row['description']} <b>&</b>")
    outs = {}
    for mode in ("logprob", "pmi", "generate"):
        outs[mode] = evaluate_run(
            EvaluateConfig(run, judge=HashJudge(), judge_mode=mode, out=run.parent / f"scores-{mode}"), progress=False)
    return run, {"strings": st, "neurons_relations": rel}, outs


@pytest.mark.parametrize("mode", ["logprob", "pmi", "generate"])
def test_unit_tests_csv_rows_are_the_judges_choices(judged_run, mode):
    run, rows, _ = judged_run
    header, table = read_csv(run.parent / f"scores-{mode}" / "unit_tests.csv")
    assert tuple(header) == UNIT_TEST_COLUMNS
    assert {r["tests"] for r in table} == {"find", "near"}
    table = [r for r in table if r["tests"] == "find"]  # FIND's own tests; the near-miss ones are judged the same way
    _, per_function = read_csv(run.parent / f"scores-{mode}" / "per_function.csv")
    assert len(table) == sum(len(r["unit_tests"]) for r in per_function_rows(rows, per_function))
    by_fn: dict[tuple[str, str], list[dict]] = {}
    for r in table:
        by_fn.setdefault((r["function_id"], r["method"]), []).append(r)
    for pf in per_function:
        row = find_row(rows, pf["function_id"])
        tests = [normalize_unit_test(t) for t in row["unit_tests"]]
        description = (
            run / row["category"] / pf["method"] / row["function_id"].split("/")[1] / "description.txt"
        ).read_text()
        want = judge_unit_tests(
            HashJudge(), [description], [tests], row["category"], mode=mode
        )  # the judge, asked again
        got = by_fn[(pf["function_id"], pf["method"])]
        assert [int(r["test"]) for r in got] == list(range(len(tests)))
        for r, test, d in zip(got, tests, want["decisions"][0]):
            assert [r[f"option_{c}"] for c in (1, 2, 3)] == [
                render_pmi_option(test, c, row["category"]) for c in (1, 2, 3)
            ]
            assert int(r["correct"]) == test["correct"] == d["correct"]
            assert r["chosen"] == ("" if d["chosen"] is None else str(d["chosen"]))
            assert r["right"] == str(int(d["right"])) and r["mode"] == mode
            assert r["empty"] == str(int(not description.strip())) and r["truncated"] == "0"
            if mode == "generate" or d["chosen"] is None:
                assert r["margin"] == r["score_1"] == ""
                assert r["answer"] == (d["answer"] or "")
            else:
                scores = [float(r[f"score_{c}"]) for c in (1, 2, 3)]
                assert scores == d["scores"] and float(r["margin"]) == d["margin"]
                assert float(r["margin"]) == scores[test["correct"] - 1] - max(
                    v for c, v in enumerate(scores, 1) if c != test["correct"]
                )
                assert r["answer"] == ""
        # accuracy recomputed from the csv is the function's unit_test_accuracy
        assert sum(int(r["right"]) for r in got) / len(got) == float(pf["unit_test_accuracy"])
    rights = [r["right"] for r in table]
    assert "0" in rights and "1" in rights  # the stand-in judge is a mix


def find_row(rows: dict, function_id: str) -> dict:
    return next(r for group in rows.values() for r in group if r["function_id"] == function_id)


def per_function_rows(rows: dict, per_function: list[dict]) -> list[dict]:
    return [find_row(rows, pf["function_id"]) for pf in per_function]


def test_report_shows_the_judges_decisions(judged_run):
    from findbench.interpret.config import ReportConfig
    from findbench.interpret.report import write_report

    run, rows, _ = judged_run
    scores = run.parent / "scores-pmi"
    report = ReportConfig(run_dir=str(run), scores=str(scores), out=str(run.parent / "report-pmi"))
    page = write_report(report).read_text()
    _, table = read_csv(scores / "unit_tests.csv")
    rel = rows["neurons_relations"][0]
    assert escape(f"{rel['description']} <b>&</b>") in page and "<b>&</b>" not in page  # escaped (Jinja2's autoescape)
    assert page.count('<tr class="ut-wrong">') == sum(r["right"] == "0" for r in table)
    assert page.count('class="pick-wrong"') == sum(r["right"] == "0" and r["chosen"] != "" for r in table)
    assert page.count('class="pick-right"') == sum(r["right"] == "1" for r in table)
    assert "empty description: not judged" in page
    assert page.count("ground-truth description") == len(read_csv(scores / "per_function.csv")[1])


def test_inspect_explanation_lists_the_decisions():
    from findbench.interpret.evaluate import score_interpretations
    from findbench.interpret.log_scores import judge_explanation

    row = load_rows("strings")[0]
    record = {
        "function_id": row["function_id"],
        "category": "strings",
        "method": "aia",
        "description": "reverses the string",
        "domain": "",
        "code": "",
    }
    [record] = score_interpretations([record], [row], metrics=("unit_test_accuracy",), judge=HashJudge(), mode="pmi")
    rows = record["unit_test_rows"]
    lines = judge_explanation(rows, "pmi").splitlines()
    assert lines[0].startswith(f"judge (pmi): {sum(r['right'] for r in rows)}/{len(rows)} unit tests right")
    for k, (line, r) in enumerate(zip(lines[1:], rows), 1):
        assert line.startswith(
            f"{k}. {'right' if r['right'] else 'WRONG'}: chose {r['chosen']}, correct {r['correct']}, "
            f"margin {r['margin']:+.3g}"
        )
        assert r["option_3"] in line
