"""`findbench compare`: a paired bootstrap of two scored runs, per Table 2 column.

The two score folders are written by hand (``per_function.csv`` as ``findbench evaluate``
writes it): they agree on every column but one, strings unit-test accuracy, where run A is
right on every function and run B on none.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from findbench import cli
from findbench.interpret.compare import (
    N_TOO_SMALL_NOTE,
    Comparison,
    compare_runs,
    read_per_function,
    render_comparison_table,
)
from findbench.interpret.config import CompareConfig
from findbench.interpret.evaluate import CSV_COLUMNS
from findbench.stats import SMALL_N_LEGEND

N = 20  # functions per column: enough for a clear verdict


def _write(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True)
    with open(folder / "per_function.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c, "") for c in CSV_COLUMNS})
    return folder


def _rows(strings_unit_test: float, *, extra_b: bool = False) -> list[dict]:
    rows = []
    for i in range(N):
        # the same values in both runs, with some spread
        rows.append({"function_id": f"numeric/f{i:05d}", "category": "numeric", "method": "aia",
                     "nmse": "0.01" if i % 3 else "inf", "domain_iou": str((i % 4) / 4)})
        rows.append({"function_id": f"strings/f{i:05d}", "category": "strings", "method": "aia",
                     "exact_match": str(float(i % 2)), "unit_test_accuracy": str(strings_unit_test)})
        rows.append({"function_id": f"neurons_relations/f{i:05d}", "category": "neurons_relations", "method": "milan",
                     "unit_test_accuracy": str((i % 5) / 10)})
    if extra_b:  # scored by B alone: left out of the pairing
        rows.append({"function_id": "strings/f00999", "category": "strings", "method": "aia", "exact_match": "1.0",
                     "unit_test_accuracy": "1.0"})
        rows.append({"function_id": "neurons_entities/f00001", "category": "neurons_entities", "method": "aia",
                     "unit_test_accuracy": "0.5"})
    return rows


@pytest.fixture
def two_runs(tmp_path) -> tuple[Path, Path]:
    _write(tmp_path / "a" / "scores", _rows(1.0))
    b = _write(tmp_path / "b", _rows(0.0, extra_b=True))
    return tmp_path / "a", b  # A as the run folder holding scores/, B as the scores folder


def test_one_column_differs_the_others_do_not(two_runs):
    a, b = two_runs
    result = compare_runs(CompareConfig(str(a), str(b), n_resamples=2000))
    by = {(c.category, c.method, c.metric): c for c in result.columns}
    assert list(by) == [  # Table 2's columns first, then the others both runs scored
        ("numeric", "aia", "nmse_success"),
        ("strings", "aia", "exact_match"),
        ("strings", "aia", "unit_test_accuracy"),
        ("neurons_relations", "milan", "unit_test_accuracy"),
        ("numeric", "aia", "domain_iou"),
    ]
    differs = by[("strings", "aia", "unit_test_accuracy")]
    assert differs.differs is True and differs.n == N
    assert differs.verdict == "differs" and differs.n_too_small is False
    assert (differs.mean_a, differs.mean_b, differs.diff) == (1.0, 0.0, 1.0)
    assert differs.diff_ci == [1.0, 1.0] and differs.p_value < 0.01
    assert differs.only_b == 1 and differs.only_a == 0  # strings/f00999: B alone
    for key, col in by.items():
        if key == ("strings", "aia", "unit_test_accuracy"):
            continue
        assert col.differs is False and col.diff == 0.0 and col.p_value == 1.0
        assert col.verdict == "no difference" and col.n_too_small is False
        assert col.diff_ci == [0.0, 0.0] and col.n == N
    success = by[("numeric", "aia", "nmse_success")]
    assert success.mean_a == pytest.approx(sum(1 for i in range(N) if i % 3) / N)  # inf NMSE: a failure
    assert result.only_one_run == ["entities AIA"]
    assert json.loads(json.dumps(result.to_json(), allow_nan=False)) == result.to_json()  # plain JSON


def test_a_noisy_difference_is_not_called(tmp_path):
    """A small difference on few functions: the interval spans 0 and n is marked."""
    a = _write(tmp_path / "a", [{"function_id": f"strings/f{i:05d}", "category": "strings", "method": "aia",
                                 "exact_match": str(float(i % 2)), "unit_test_accuracy": "0.5"} for i in range(6)])
    b = _write(
        tmp_path / "b",
        [
            {
                "function_id": f"strings/f{i:05d}",
                "category": "strings",
                "method": "aia",
                "exact_match": str(float(i in (0, 1))),
                "unit_test_accuracy": "0.5",
            }
            for i in range(6)
        ],
    )
    result = compare_runs(CompareConfig(str(a), str(b), seed=3, n_resamples=2000))
    em = result.columns[0]
    assert em.metric == "exact_match" and em.n == 6
    assert em.diff == pytest.approx(0.5 - 2 / 6) and em.diff_ci[0] < 0 < em.diff_ci[1]
    assert em.differs is None and em.verdict == "n too small" and em.n_too_small is True
    assert compare_runs(CompareConfig(str(a), str(b), seed=3, n_resamples=2000)) == result  # seeded
    text = render_comparison_table(result)
    assert "| strings code (exact match) | 6† |" in text and SMALL_N_LEGEND in text and N_TOO_SMALL_NOTE in text


def test_one_shared_function_gets_no_verdict(tmp_path, capsys):
    """n = 1: the bootstrap's interval is a point and its p-value tiny; the table and the JSON
    say `n too small` instead of a verdict."""
    row = {"function_id": "strings/f00000", "category": "strings", "method": "aia", "exact_match": "1.0"}
    a = _write(tmp_path / "a", [row])
    b = _write(tmp_path / "b", [{**row, "exact_match": "0.0"}])
    col = compare_runs(CompareConfig(str(a), str(b))).columns[0]
    assert col.n == 1 and col.diff == 1.0 and col.p_value < 0.001  # what the bootstrap alone would call
    assert (col.verdict, col.n_too_small, col.differs) == ("n too small", True, None)
    out = tmp_path / "cmp.json"
    assert cli.main(["compare", str(a), str(b), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| strings code (exact match) | 1† | 1.00 | 0.00 | +1.00 [+1.00, +1.00] | – | n too small |" in printed
    assert "**yes**" not in printed and "<0.001" not in printed
    saved = json.loads(out.read_text())["columns"][0]
    assert (saved["verdict"], saved["n_too_small"], saved["differs"]) == ("n too small", True, None)


def test_rendered_table(two_runs):
    a, b = two_runs
    # 10,000 resamples: p resolves below 0.001
    text = render_comparison_table(compare_runs(CompareConfig(str(a), str(b))))
    assert "| column | n | A | B | A − B | p | differs |" in text
    assert f"| strings unit test | {N} (+1 B only) | 1.00 | 0.00 | +1.00 [+1.00, +1.00] | <0.001 | **yes** |" in text
    assert f"| numeric code (NMSE<0.1) | {N} | 0.65 | 0.65 | +0.00 [+0.00, +0.00] | 1.000 | no |" in text
    assert "Scored by one run only (not compared): entities AIA." in text
    assert SMALL_N_LEGEND not in text and N_TOO_SMALL_NOTE not in text


def test_errors_name_the_argument(tmp_path, two_runs):
    a, _ = two_runs
    with pytest.raises(FileNotFoundError, match="run_b: .* is not a folder"):
        compare_runs(CompareConfig(str(a), str(tmp_path / "absent")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="run_a: no per_function.csv"):
        compare_runs(CompareConfig(str(tmp_path / "empty"), str(a)))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "per_function.csv").write_text("function_id,category\nx,y\n")
    with pytest.raises(ValueError, match="run_b: .* lacks the column"):
        compare_runs(CompareConfig(str(a), str(bad)))
    twice = _write(tmp_path / "twice", _rows(1.0)[:1] * 2)
    with pytest.raises(ValueError, match="a second time"):
        read_per_function(twice)


def test_cli_compare(two_runs, tmp_path, capsys):
    a, b = two_runs
    out = tmp_path / "cmp.json"
    assert cli.main(["compare", str(a), str(b), "--seed", "1", "--n-resamples", "300", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("# Paired comparison") and "**yes**" in printed and f"wrote {out}" in printed
    saved = json.loads(out.read_text())
    assert saved["seed"] == 1 and saved["n_resamples"] == 300
    assert [c["differs"] for c in saved["columns"]].count(True) == 1
    assert all(math.isfinite(c["p_value"]) for c in saved["columns"])
    assert cli.main(["compare", str(a), str(tmp_path / "absent")]) == 2
    assert "findbench compare: error: run_b" in capsys.readouterr().err


def test_cli_compare_help(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["compare", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert "run_a" in text and "--n-resamples" in text and "default 10000" in text and "(default 0)" in text


def test_margins_over_own_observations_are_compared(tmp_path):
    """Each column with a floor is followed by its margin: A's code passes where its floor does,
    B's passes where its floor fails, so B is further above its own observations."""
    columns = ("function_id", "category", "method", "nmse", "nmse_observed", "exact_match", "exact_match_margin")
    for name, floor in (("a", "0.01"), ("b", "5.0")):
        folder = tmp_path / name
        folder.mkdir()
        with open(folder / "per_function.csv", "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(columns)
            for i in range(N):
                writer.writerow([f"numeric/f{i:05d}", "numeric", "aia", "0.01", floor, "", ""])
                writer.writerow([f"strings/f{i:05d}", "strings", "aia", "", "", "1.0", "0.5" if name == "a" else "0.0"])
    result = compare_runs(CompareConfig(str(tmp_path / "a"), str(tmp_path / "b")))
    by = {c.header: c for c in result.columns}
    numeric = by["numeric code (NMSE<0.1): margin over own observations"]
    assert (numeric.mean_a, numeric.mean_b, numeric.verdict) == (0.0, 1.0, "differs")
    strings = by["strings code (exact match): margin over own observations"]
    assert (strings.mean_a, strings.mean_b) == (0.5, 0.0)
    assert by["numeric code (NMSE<0.1)"].verdict == "no difference"


def test_compare_takes_its_config(two_runs, tmp_path):
    from findbench.stats import DEFAULT_RESAMPLES, DEFAULT_SEED

    a, b = two_runs
    out = tmp_path / "cmp.json"
    result = compare_runs(CompareConfig(run_a=str(a), run_b=str(b), seed=2, n_resamples=300, out=str(out)))
    assert json.loads(out.read_text()) == result.to_json() and (result.seed, result.n_resamples) == (2, 300)
    assert Comparison.from_json(json.loads(out.read_text())) == result  # the file reads back typed
    defaults = CompareConfig(run_a="a", run_b="b")
    assert (defaults.seed, defaults.n_resamples) == (DEFAULT_SEED, DEFAULT_RESAMPLES)
    with pytest.raises(ValueError, match="--n-resamples"):
        CompareConfig(run_a=str(a), run_b=str(b), n_resamples=0)
