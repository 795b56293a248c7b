"""A run folder handed to `findbench evaluate` is hostile: carried rows are checked against the
data, links and special files are never followed, a damaged episode never sinks the others,
and every CSV cell findbench writes is safe in a spreadsheet.

Rows are the procedural strings and numeric rows of seed 0 (cached on disk); the judge is the
scripted `KnowingJudge`, so no model is loaded. Episodes that carry rows are those of a log (an
oracle run's, rewritten with the answers and carried rows a test gives); the others are folders
of FIND's layout.
"""

from __future__ import annotations

import ast
import copy
import json
import os
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log, write_eval_log

from findbench._io import csv_cell, csv_text, csv_uncell, read_csv_rows, read_untrusted_text
from findbench.constants import UsageError
from findbench.find.rows import load_rows
from findbench.interpret.config import EvaluateConfig
from findbench.interpret.episode import STORE_PREFIX
from findbench.interpret.evaluate import PER_FUNCTION_COLUMNS, UNIT_TEST_COLUMNS, evaluate_run
from tests.interpret.fakes import KnowingJudge, interpret

IDENTITY = "def function(x):\n    return x\n"
SRC = Path(__file__).resolve().parents[2] / "src" / "findbench"


@pytest.fixture(scope="module")
def rows() -> dict[str, list[dict]]:
    numeric = [r for r in load_rows("numeric") if r["subcategory"] in ("atomic", "composition")]
    return {"numeric": numeric[:3], "strings": load_rows("strings")[:3]}


def episode(root: Path, row: dict, *, method: str = "aia", description: str = "", code: str = "") -> Path:
    """An episode folder of FIND's layout (with the method level, as `findbench interpret` exports it)."""
    category, local = row["function_id"].split("/")
    folder = root / category / method / local
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "description.txt").write_text(description, encoding="utf-8")
    (folder / "domain.txt").write_text("", encoding="utf-8")
    (folder / "code.py").write_text(code, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def oracle_log(rows, tmp_path_factory) -> Path:
    """The log of an oracle run on the procedural rows of ``rows``."""
    out = tmp_path_factory.mktemp("oracle") / "run"
    ids = [r["function_id"] for c in rows for r in rows[c]]
    interpret(None, "oracle", functions=ids, out=str(out), progress=False, display="none")
    [log] = (out / "logs").glob("*.eval")
    return log


def logged_run(root: Path, template: Path, episodes: dict[str, dict]) -> None:
    """A run folder ``root`` whose one log holds the ``template`` log's samples of ``episodes``
    (function id -> ``{"description", "code", "row"}``: the answer given and the row carried, any
    other value a sample's metadata ``row`` may hold; a key left out keeps the sample's own)."""
    log = read_eval_log(str(template))
    log.samples = [s for s in log.samples if s.id in episodes]
    for sample in log.samples:
        change = episodes[sample.id]
        answer = sample.store[STORE_PREFIX + "answer"]
        answer.update({k: change[k] for k in ("description", "code") if k in change})
        if "row" in change:
            sample.metadata["row"] = change["row"]
        for key, value in change.get("store", {}).items():
            sample.store[STORE_PREFIX + key] = value
    (root / "logs").mkdir(parents=True, exist_ok=True)
    write_eval_log(log, str(root / "logs" / template.name), format="eval")


def run_info(root: Path, **info) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "run.json").write_text(json.dumps({"interpreter": "oracle", "seed": 0, "source": "procedural", **info}))


def forged(row: dict) -> dict:
    """``row`` with identity code and (strings) every unit test made the first option three times."""
    out = copy.deepcopy(row)
    out["code"] = IDENTITY
    for test in out.get("unit_tests") or []:
        test["inputs"] = [test["inputs"][0]] * 3
        test["outputs"] = [test["inputs"][0]] * 3 if test.get("outputs") else test["outputs"]
        test["correct"] = 1
    return out


def forged_run(root: Path, rows: dict[str, list[dict]], template: Path, **info) -> None:
    run_info(root, **info)
    logged_run(root, template, {row["function_id"]: {"description": "identity", "code": IDENTITY, "row": forged(row)}
                                for category in ("numeric", "strings") for row in rows[category]})


def test_forged_carried_rows_are_refused_against_the_data(rows, oracle_log, tmp_path):
    forged_run(tmp_path / "run", rows, oracle_log)
    with pytest.raises(UsageError, match=r"--data: the rows carried by 6 episode\(s\): numeric/f\d{5} \(aia\)"):
        evaluate_run(EvaluateConfig(tmp_path / "run", judge=KnowingJudge(rows), out=tmp_path / "out"), progress=False)
    assert not (tmp_path / "out").exists()


def test_true_carried_rows_are_verified(rows, oracle_log, tmp_path):
    run = tmp_path / "run"
    run_info(run)
    logged_run(run, oracle_log, {row["function_id"]: {} for row in rows["strings"]})
    result = evaluate_run(EvaluateConfig(run, judge=KnowingJudge(rows), out=tmp_path / "out"), progress=False)
    cell = result["scores"]["strings"]["aia"]
    assert (cell["exact_match"], cell["unit_test_accuracy"], cell["unverified"]) == (1.0, 1.0, False)
    assert result["verified"] and "truth: procedural, seed 0" in result["table"]


def test_in_memory_rows_are_scored_unverified(rows, oracle_log, tmp_path):
    """No data can check them: the forged rows score, and every output says so."""
    from findbench.interpret.config import ReportConfig
    from findbench.interpret.report import write_report

    run = tmp_path / "run"
    forged_run(run, rows, oracle_log, source="rows")
    result = evaluate_run(EvaluateConfig(run, judge=KnowingJudge(rows), out=tmp_path / "out"), progress=False)
    assert not result["verified"]
    cells = [cell for c, cats in result["scores"].items() if c != "judge" for cell in cats.values()]
    assert {cell["unverified"] for cell in cells} == {True}
    scores = json.loads((tmp_path / "out" / "scores.json").read_text())
    assert scores["numeric"]["aia"]["unverified"] is True
    assert "unverified" in (tmp_path / "out" / "table.md").read_text()
    page = write_report(ReportConfig(run_dir=str(run), scores=str(tmp_path / "out"))).read_text()
    assert "Scores unverified" in page
    # with --data (here: the procedural rows' own folder is not at hand, so a folder missing them)
    # the same run is checked, and refused
    with pytest.raises((UsageError, FileNotFoundError)):
        config = EvaluateConfig(run, data=tmp_path / "nodata", judge=KnowingJudge(rows), out=tmp_path / "out2")
        evaluate_run(config, progress=False)


def test_a_data_folder_named_by_the_run_is_unverified(rows, oracle_log, tmp_path):
    """The run vouches for itself: a folder beside it, named in its run.json, holding the forged rows."""
    from tests.interpret.conftest import write_data_folder

    data = write_data_folder(tmp_path / "own-data", {c: [forged(r) for r in rows[c]] for c in rows})
    run = tmp_path / "run"
    forged_run(run, rows, oracle_log, source="data", data=str(data))
    result = evaluate_run(EvaluateConfig(run, judge=KnowingJudge(rows), out=tmp_path / "out"), progress=False)
    assert result["scores"]["numeric"]["aia"]["nmse_success"] == 1.0  # scored against the run's own truth ...
    assert not result["verified"]  # ... and marked so
    assert {cell["unverified"] for c in ("numeric", "strings") for cell in result["scores"][c].values()} == {True}
    assert (f"truth: data folder `{data}` named by run.json (unverified: the run chose this truth itself; pass "
            "--data to verify)") in result["table"]
    # the same folder passed by the evaluator (--data) is the evaluator's choice
    config = EvaluateConfig(run, data=data, judge=KnowingJudge(rows), out=tmp_path / "out2")
    assert evaluate_run(config, progress=False)["verified"]


def test_run_json_may_not_name_data_inside_the_run(rows, tmp_path):
    run = tmp_path / "run"
    run_info(run, source="data", data=str(run / "find"))
    episode(run, rows["strings"][0], description="x")
    with pytest.raises(UsageError, match="inside the run folder"):
        evaluate_run(EvaluateConfig(run, judge=KnowingJudge(rows), out=tmp_path / "out"), progress=False)


def test_symlinked_and_oversized_parts_are_not_read(rows, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("API_KEY=sk-do-not-leak")
    secret.chmod(0o600)
    run = tmp_path / "run"
    run_info(run)
    a, b, c = rows["strings"]
    folder_a = episode(run, a, code=a["code"])
    (folder_a / "description.txt").unlink()
    os.symlink(secret, folder_a / "description.txt")
    folder_b = episode(run, b, description=b["description"])
    (folder_b / "code.py").write_text("x = 1\n" * 100_000)  # 600 KB, over the code cap
    folder_c = episode(run, c, description=c["description"], code=c["code"])
    os.symlink("/proc/self/environ", folder_c / "domain.txt.lnk")
    judge = KnowingJudge(rows)
    seen: list[str] = []
    real = judge._pick

    def pick(conversation):
        seen.append(conversation[-1]["content"])
        return real(conversation)

    judge._pick = pick
    result = evaluate_run(EvaluateConfig(run, judge=judge, out=tmp_path / "out"), progress=False)
    assert not any("sk-do-not-leak" in text for text in seen)
    per = {r["function_id"]: r for r in read_csv_rows(tmp_path / "out" / "per_function.csv")}
    assert "symbolic link" in per[a["function_id"]]["damage"]
    assert "over the 262,144-byte cap" in per[b["function_id"]]["damage"]
    assert per[c["function_id"]]["damage"] == ""  # an extra file is not a part
    assert float(per[c["function_id"]]["exact_match"]) == 1.0
    assert "Damaged: 2 episode(s)" in result["table"]
    assert "sk-do-not-leak" not in (tmp_path / "out" / "table.md").read_text()


def test_links_devices_and_fifos_are_refused(tmp_path):
    target = tmp_path / "t.txt"
    target.write_text("hello")
    os.symlink(target, tmp_path / "link")
    os.mkfifo(tmp_path / "fifo")
    assert read_untrusted_text(target, 10, "part") == "hello"
    with pytest.raises(ValueError, match="part .*link is a symbolic link"):
        read_untrusted_text(tmp_path / "link", 10, "part")
    with pytest.raises(ValueError, match="fifo is not a regular file"):  # does not block on the FIFO
        read_untrusted_text(tmp_path / "fifo", 10, "part")
    with pytest.raises(ValueError, match="not a regular file"):
        read_untrusted_text("/dev/zero", 10, "part")
    with pytest.raises(ValueError, match="over the 4-byte cap"):
        read_untrusted_text(target, 4, "part")


def test_symlinked_episode_folders_are_skipped(rows, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    run = tmp_path / "run"
    run_info(run)
    a, b = rows["strings"][:2]
    episode(run, a, description=a["description"], code=a["code"])
    target = episode(elsewhere, b, description=b["description"], code=b["code"])
    os.symlink(target, run / "strings" / "aia" / b["function_id"].split("/")[1])
    result = evaluate_run(EvaluateConfig(run, judge=KnowingJudge(rows), out=tmp_path / "out"), progress=False)
    assert result["counts"] == {"strings": {"aia": 1}}


@pytest.mark.parametrize(("key", "value"), [("calls", "x"), ("answer", {"description": [[[[["deep"]]]]]})])
def test_a_damaged_record_does_not_sink_the_others(rows, oracle_log, tmp_path, key, value):
    run = tmp_path / "run"
    run_info(run)
    bad, *good = rows["strings"]
    logged_run(run, oracle_log, {bad["function_id"]: {"store": {key: value}}, **{r["function_id"]: {} for r in good}})
    result = evaluate_run(EvaluateConfig(run, judge=KnowingJudge(rows), out=tmp_path / "out"), progress=False)
    assert result["scores"]["strings"]["aia"]["exact_match_n"] == 3  # the truth comes from the data: all scored
    per = {r["function_id"]: r for r in read_csv_rows(tmp_path / "out" / "per_function.csv")}
    assert "the record is no episode" in per[bad["function_id"]]["damage"]
    assert float(per[bad["function_id"]]["exact_match"]) == 0.0  # scored as if the answer were missing
    assert bad["function_id"] in result["table"]
    assert all(per[r["function_id"]]["damage"] == "" for r in good)


def test_an_unreadable_episode_of_an_unverified_run_is_left_out(rows, oracle_log, tmp_path):
    run = tmp_path / "run"
    run_info(run, source="rows")
    bad, *good = rows["strings"]
    logged_run(run, oracle_log, {bad["function_id"]: {"row": "{" * 100_000}, **{r["function_id"]: {} for r in good}})
    result = evaluate_run(EvaluateConfig(run, judge=KnowingJudge(rows), out=tmp_path / "out"), progress=False)
    assert result["scores"]["strings"]["aia"]["exact_match_n"] == 2
    assert "1 not scored" in result["table"]


def test_csv_cells_never_start_a_formula():
    for text in ("=HYPERLINK(\"http://x\")", "+A1", "-2+3", "@SUM(A1)", "\tx", "\rx", "'quoted"):
        assert csv_cell(text).startswith("'") and csv_uncell(csv_cell(text)) == text
    assert csv_cell("plain") == "plain" and csv_cell(-1.5) == -1.5 and csv_cell("-6.25") == "-6.25"
    assert csv_cell("-inf") == "-inf" and csv_cell("-1+1") == "'-1+1" and csv_cell(" -1") == " -1"
    assert csv_text(["a", "=b"], [["=1+1", 2]]) == "a,'=b\n'=1+1,2\n"


def test_every_csv_writer_goes_through_csv_text():
    """No module writes CSV but through `_io.csv_text` (so every writer neutralises formulas)."""
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.name == "_io.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("writer", "DictWriter")
                and getattr(node.value, "id", "") == "csv"
            ):
                offenders.append(str(path.relative_to(SRC)))
    assert offenders == []


def test_each_csv_writer_neutralises_a_formula(tmp_path):
    from findbench.autointerp.run import _summary_csv
    from findbench.find.synthetic_neurons.report import _csv
    from findbench.interpret.evaluate import _csv as evaluate_csv

    evil = "=cmd|' /C calc'!A0"
    rec = {
        "function_id": "strings/f00000",
        "category": "strings",
        "method": "aia",
        "damage": evil,
        "unit_test_rows": [{"function_id": "strings/f00000", "option_1": evil, "answer": "-1"}],
    }
    texts = [
        evaluate_csv(PER_FUNCTION_COLUMNS, [rec]),
        evaluate_csv(UNIT_TEST_COLUMNS, rec["unit_test_rows"]),
        _csv([{"concept": evil, "x": 0.5}], ["concept", "x"]),
        _summary_csv(
            3,
            [
                {
                    "latent": 1,
                    "explanation": evil,
                    "scores": {"detection": 0.5},
                    "degenerate_reason": None,
                    "explanation_truncated": False,
                    "skipped": None,
                }
            ],
            ["detection"],
        ),
    ]
    for text in texts:
        assert "'" + evil in text and f",{evil}" not in text and not text.startswith(evil)
