"""``findbench evaluate`` reads a run from its Inspect logs, the one record, as untrusted input:
exported folders are not read, damaged or planted logs are named, tampered records are caught.

Runs use the ``oracle`` and ``constant`` reference interpreters on numeric functions (no LM, no judge)."""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai.log import read_eval_log, write_eval_log  # noqa: E402

from findbench.constants import UsageError  # noqa: E402
from findbench.interpret import logs as run_logs  # noqa: E402
from findbench.interpret.agent import STORE_KEY  # noqa: E402
from findbench.interpret.evaluate import evaluate_run  # noqa: E402
from findbench.interpret.run import episode_dir, run_interpretations  # noqa: E402

WRONG_NUMERIC = "def function(x):\n    return 3.0 * x + 40.0\n"


def _run(data_dir: Path, out: Path, interpreter: str = "oracle", limit: int = 2) -> Path:
    return run_interpretations(data_dir, interpreter, configs="numeric", limit=limit, out=out, display="none")


def _score(run: Path, tmp_path: Path, name: str = "scores", **settings) -> dict:
    return evaluate_run(run, out=tmp_path / name, progress=False, **settings)


def _cell(result: dict) -> tuple[float, int]:
    cell = result["scores"]["numeric"]["aia"]
    return cell["nmse_success"], cell["nmse_success_n"]


def _log(run: Path) -> Path:
    (path,) = sorted((run / "logs").glob("*.eval"))
    return path


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory, data_dir) -> Path:
    return _run(data_dir, tmp_path_factory.mktemp("logs") / "oracle")


def _copy(run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run, copy, symlinks=True)
    return copy


def test_the_exported_folders_are_not_the_record(oracle_run, data_dir, tmp_path):
    run = _copy(oracle_run, tmp_path)
    assert _cell(_score(run, tmp_path, "before")) == (1.0, 2)
    # a wrong answer written into an exported folder changes nothing: the log holds the answer
    (episode_dir(run, "numeric/f00000", "aia") / "code.py").write_text(WRONG_NUMERIC)
    # an exported folder no log records is named and not scored
    planted = episode_dir(run, "numeric/f00002", "aia")
    shutil.copytree(episode_dir(run, "numeric/f00001", "aia"), planted)
    result = _score(run, tmp_path, "after")
    assert _cell(result) == (1.0, 2)
    assert "numeric/f00002 (aia)" in result["table"] and "episodes from its logs/" in result["table"]
    # the logs alone, as `inspect eval findbench/find_interpret --log-dir <run>/logs` leaves them
    for folder in (run / "numeric", run / "run.json"):
        shutil.rmtree(folder) if folder.is_dir() else folder.unlink()
    assert _cell(_score(run, tmp_path, "logs-only", data=data_dir)) == (1.0, 2)


def test_damaged_and_planted_logs_are_named_and_the_others_read(oracle_run, tmp_path, caplog):
    run = _copy(oracle_run, tmp_path)
    (run / "logs" / "zz-not-a-log.eval").write_bytes(b"PK\x03\x04 truncated")
    os.symlink(_log(oracle_run), run / "logs" / "zzz-linked.eval")
    result = _score(run, tmp_path)
    assert _cell(result) == (1.0, 2)
    assert (
        "Unreadable logs: 1, not scored: log " in result["table"]
        and "zz-not-a-log.eval is not an Inspect" in result["table"]
    )
    assert "zzz-linked.eval is not a regular file; skipped" in caplog.text


@pytest.mark.parametrize(
    ("cap", "value", "why"),
    [
        ("LOG_MAX_BYTES", 1000, "-byte cap"),
        ("LOG_MAX_UNPACKED_BYTES", 1000, "unpacks to"),
        ("LOG_MAX_MEMBERS", 2, "members, over the cap"),
    ],
)
def test_a_log_over_a_cap_is_not_unpacked(oracle_run, tmp_path, monkeypatch, cap, value, why):
    monkeypatch.setattr(run_logs, cap, value)
    found = run_logs.read_run_logs(oracle_run)
    assert found.episodes == {} and len(found.problems) == 1
    assert found.problems[0].startswith(f"log {_log(oracle_run)} ") and why in found.problems[0]
    with pytest.raises(ValueError, match=f"nothing to score.*no readable log records an episode \\(log .*{why}"):
        _score(oracle_run, tmp_path)


def _tamper(run: Path, change) -> None:
    path = _log(run)
    log = read_eval_log(str(path))
    change({s.id: s.store[STORE_KEY] for s in log.samples})
    write_eval_log(log, str(path), format="eval")


def test_a_record_of_another_episode_is_damaged(oracle_run, tmp_path):
    run = _copy(oracle_run, tmp_path)

    def swap(records):
        records["numeric/f00001"]["function_id"] = "numeric/f00000"

    _tamper(run, swap)
    result = _score(run, tmp_path)
    assert _cell(result) == (0.5, 2)  # scored as if the answer were missing
    with open(tmp_path / "scores" / "per_function.csv", newline="") as fh:
        damage = {r["function_id"]: r["damage"] for r in csv.DictReader(fh)}
    assert damage["numeric/f00000"] == ""
    assert damage["numeric/f00001"].startswith("episode numeric/f00001 (aia) in ")
    assert damage["numeric/f00001"].endswith("the record is that of another episode ('numeric/f00000')")


def test_a_forged_row_in_a_log_is_refused_against_the_data(oracle_run, tmp_path):
    run = _copy(oracle_run, tmp_path)

    def forge(records):
        records["numeric/f00000"]["row"]["description"] = "forged"

    _tamper(run, forge)
    with pytest.raises(UsageError, match="numeric/f00000"):
        _score(run, tmp_path)


def test_the_newest_log_holding_an_episode_wins(oracle_run, data_dir, tmp_path):
    constant = _run(data_dir, tmp_path / "constant-run", interpreter="constant")
    assert _cell(_score(constant, tmp_path, "constant-scores")) == (0.0, 2)
    shutil.copy(_log(oracle_run), constant / "logs" / "0000-older.eval")
    assert _cell(_score(constant, tmp_path, "older")) == (0.0, 2)
    (constant / "logs" / "0000-older.eval").rename(constant / "logs" / "9999-newer.eval")
    assert _cell(_score(constant, tmp_path, "newer")) == (1.0, 2)
