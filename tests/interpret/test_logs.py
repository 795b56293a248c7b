"""``findbench evaluate`` reads a run from its Inspect logs, the one record, as untrusted input:
exported folders are not read, damaged or planted logs are named, tampered records are caught,
members are inflated within their declared sizes, and logs of another run are named and not scored.

Runs use the ``oracle`` and ``constant`` reference interpreters on numeric functions (no LM, no judge)."""

from __future__ import annotations

import csv
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
import zstandard

pytest.importorskip("inspect_ai")

from inspect_ai.log import read_eval_log, write_eval_log  # noqa: E402

from findbench.constants import UsageError  # noqa: E402
from findbench.interpret import logs as run_logs  # noqa: E402
from findbench.interpret.config import EvaluateConfig  # noqa: E402
from findbench.interpret.evaluate import evaluate_run  # noqa: E402
from findbench.interpret.run import episode_dir  # noqa: E402
from findbench.interpret.solver import STORE_KEY  # noqa: E402
from tests.interpret.fakes import interpret  # noqa: E402

WRONG_NUMERIC = "def function(x):\n    return 3.0 * x + 40.0\n"


def _run(data_dir: Path, out: Path, interpreter: str = "oracle", limit: int = 2) -> Path:
    return interpret(data_dir, interpreter, configs="numeric", limit=limit, out=out, display="none")


def _score(run: Path, tmp_path: Path, name: str = "scores", **settings) -> dict:
    return evaluate_run(EvaluateConfig(run, out=tmp_path / name, **settings), progress=False)


def _cell(result: dict) -> tuple[float, int]:
    cell = result["scores"]["numeric"]["aia"]
    return cell["nmse_success"], cell["nmse_success_n"]


def _log(run: Path) -> Path:
    (path,) = sorted((run / "logs").glob("*.eval"))
    return path


def _source_logs(scores: Path) -> dict[str, str]:
    with open(scores / "per_function.csv", newline="") as fh:
        return {r["function_id"]: r["source_log"] for r in csv.DictReader(fh)}


def _rewrite(source: Path, dest: Path, change) -> Path:
    """``source`` written to ``dest`` after ``change(log)``, as Inspect writes logs."""
    log = read_eval_log(str(source))
    change(log)
    write_eval_log(log, str(dest), format="eval")
    return dest


def _wrong_code(log, function_id: str = "numeric/f00000") -> None:
    for sample in log.samples:
        if sample.id == function_id:
            sample.store[STORE_KEY]["answer"]["code"] = WRONG_NUMERIC


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
    assert "Logs not scored: 1: log " in result["table"] and "zz-not-a-log.eval is not an Inspect" in result["table"]
    assert "zzz-linked.eval is not a regular file; skipped" in caplog.text


@pytest.mark.parametrize(
    ("cap", "value", "why"),
    [
        ("LOG_MAX_BYTES", 1000, "-byte cap"),
        ("LOG_MAX_UNPACKED_BYTES", 1000, "unpacks to"),
        ("LOG_MAX_RATIO", 1, "unpacks to"),
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


def test_the_newest_log_holding_an_episode_wins(oracle_run, tmp_path):
    run = _copy(oracle_run, tmp_path)
    first = _log(run).name
    _rewrite(_log(run), run / "logs" / "0000-older.eval", _wrong_code)
    assert _cell(_score(run, tmp_path, "older")) == (1.0, 2)
    assert set(_source_logs(tmp_path / "older").values()) == {f"logs/{first}"}
    (run / "logs" / "0000-older.eval").rename(run / "logs" / "9999-newer.eval")
    result = _score(run, tmp_path, "newer")
    assert _cell(result) == (0.5, 2) and "Logs not scored" not in result["table"]
    assert set(_source_logs(tmp_path / "newer").values()) == {"logs/9999-newer.eval"}


def test_a_log_of_another_interpreter_never_scores_under_the_runs_name(oracle_run, data_dir, tmp_path):
    """An oracle log copied into a constant run: run.json names the run's interpreter."""
    constant = _run(data_dir, tmp_path / "constant-run", interpreter="constant")
    own = _log(constant).name
    shutil.copy(_log(oracle_run), constant / "logs" / "9999-oracle.eval")
    result = _score(constant, tmp_path, "copied")
    assert _cell(result) == (0.0, 2) and result["interpreter"] == "constant"
    assert "9999-oracle.eval records interpreter 'oracle', the run's (run.json) is 'constant'" in result["table"]
    assert set(_source_logs(tmp_path / "copied").values()) == {f"logs/{own}"}
    # without run.json the logs disagree with each other: the run is the newest log's, under its own name
    (constant / "run.json").unlink()
    shutil.rmtree(constant / "numeric")
    result = _score(constant, tmp_path, "logs-only", data=data_dir)
    assert _cell(result) == (1.0, 2) and result["interpreter"] == "oracle"
    assert f"{own} disagrees with the run's other logs on model, interpreter" in result["table"]  # none/<name>


def _other_model(log) -> None:
    log.eval.model = "mockllm/model"


def _other_rounds(log) -> None:
    log.plan.steps[0].params["rounds"] = 5


@pytest.mark.parametrize(("change", "differs"), [(_other_model, "model"), (_other_rounds, "task arguments")])
def test_a_log_that_disagrees_with_the_others_is_named_and_not_scored(oracle_run, data_dir, tmp_path, change,
                                                                      differs):
    run = _copy(oracle_run, tmp_path)
    for path in (run / "run.json", run / "numeric"):
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    _rewrite(_log(run), run / "logs" / "0000-same.eval", lambda log: None)
    odd = _rewrite(run / "logs" / "0000-same.eval", run / "logs" / "9999-odd.eval",
                   lambda log: (change(log), _wrong_code(log)))
    result = _score(run, tmp_path, data=data_dir)
    assert _cell(result) == (1.0, 2)  # the odd log is the newest, and would win
    assert f"Logs not scored: 1: log {odd} disagrees with the run's other logs on {differs} (" in result["table"]
    assert "9999-odd.eval" not in set(_source_logs(tmp_path / "scores").values())


def test_a_log_that_disagrees_with_run_json_is_named_and_not_scored(oracle_run, tmp_path):
    run = _copy(oracle_run, tmp_path)
    odd = _rewrite(_log(run), run / "logs" / "9999-odd.eval", lambda log: (_other_rounds(log), _wrong_code(log)))
    result = _score(run, tmp_path)
    assert _cell(result) == (1.0, 2)
    assert f"log {odd} records rounds 5, the run's (run.json) is 20; its episodes are not scored" in result["table"]


def test_a_log_of_two_epochs_is_refused(oracle_run, tmp_path):
    """findbench scores one answer per function and method: a second epoch is never silently dropped."""
    run = _copy(oracle_run, tmp_path)

    def two_epochs(log):
        log.eval.config.epochs = 2
        second = [s.model_copy(deep=True, update={"epoch": 2}) for s in log.samples]
        log.samples = log.samples + second
        _wrong_code(log)  # epoch 1's answer wrong, epoch 2's right: neither is kept

    odd = _rewrite(_log(run), run / "logs" / "9999-epochs.eval", two_epochs)
    found = run_logs.read_run_logs(run)
    assert found.problems == [
        f"log {odd} holds 2 epochs; findbench scores one epoch per episode (run with epochs=1); its episodes are "
        "not scored"
    ]
    assert {e.log for e in found.episodes.values()} == {str(_log(oracle_run)).replace(str(oracle_run), str(run))}
    (run / "logs" / _log(oracle_run).name).unlink()
    with pytest.raises(ValueError, match="nothing to score.*9999-epochs.eval holds 2 epochs"):
        _score(run, tmp_path)


def _zip(members) -> bytes:
    """A zip archive of ``(name, payload, method, declared size, crc)`` members, each payload as given."""
    body, central = b"", b""
    for name, payload, method, size, crc in members:
        n = name.encode()
        central += struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 20, 20, 0, method, 0, 33, crc, len(payload), size,
                               len(n), 0, 0, 0, 0, 0, len(body)) + n
        body += struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, method, 0, 33, crc, len(payload), size, len(n), 0)
        body += n + payload
    return body + central + struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, len(members), len(members),
                                        len(central), len(body), 0)


def _zstd_zeros(n: int, *, declare: bool = False, window_log: int = 0) -> bytes:
    """A zstd frame of ``n`` zero bytes (its content size declared or not), written a MiB at a time."""
    params = zstandard.ZstdCompressionParameters.from_level(1, window_log=window_log, write_content_size=declare)
    obj = zstandard.ZstdCompressor(compression_params=params).compressobj(size=n if declare else -1)
    chunks = [obj.compress(b"\0" * min(2**20, n - i)) for i in range(0, n, 2**20)]
    return b"".join(chunks) + obj.flush()


#: Runs ``argv[1]`` (a script) on ``argv[2]`` in a child and prints the child's peak RSS (KiB). Measured from a
#: fresh process: a child forked by pytest itself would start its peak at pytest's own size.
_PEAK_RSS = """import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
_, status, usage = os.wait4(child.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""
_READ_LOG = """import sys
from findbench.interpret.logs import read_log
try:
    read_log(sys.argv[1])
except ValueError as exc:
    print(exc)
"""


def test_a_zstd_member_is_inflated_no_further_than_declared(tmp_path):
    """A member declaring 1,000 bytes whose frame (no content size, as Inspect writes them) holds a GiB:
    refused once the 1,001st byte comes out; the reading process's peak memory stays far below it."""
    import findbench

    bomb = tmp_path / "bomb.eval"
    bomb.write_bytes(_zip([("header.json", _zstd_zeros(2**30), 93, 1000, zlib.crc32(bytes(1000)))]))
    assert bomb.stat().st_size < 64 * 1024
    src = str(Path(findbench.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))}
    said = subprocess.run([sys.executable, "-c", _PEAK_RSS, _READ_LOG, str(bomb)], capture_output=True, text=True,
                          env=env, check=True).stdout.strip().splitlines()
    assert said[0] == f"log {bomb}: member 'header.json' inflates past its declared 1,000 bytes"
    rc, peak_kib = map(int, said[-1].split())
    assert rc == 0 and peak_kib < 256 * 1024  # under a quarter of what the member holds


@pytest.mark.parametrize(
    ("payload", "method", "size", "crc", "why"),
    [
        (zlib.compress(bytes(5000))[2:-4], 8, 1000, zlib.crc32(bytes(1000)), "inflates past its declared 1,000 bytes"),
        (bytes(500), 0, 1000, zlib.crc32(bytes(1000)), "inflates short of its declared 1,000 bytes"),
        (_zstd_zeros(5000, declare=True), 93, 1000, 0, "is a zstd frame declaring 5,000 bytes, the archive 1,000"),
        (_zstd_zeros(1000, window_log=27), 93, 1000, zlib.crc32(bytes(1000)), "cannot be inflated (zstd"),
        (_zstd_zeros(1000), 93, 1000, 1, "does not match its CRC-32"),
        (bytes(1000), 12, 1000, zlib.crc32(bytes(1000)), "is compressed with method 12 (stored, deflate or zstd)"),
    ],
    ids=["deflate-past", "stored-short", "zstd-declares-more", "zstd-window", "crc", "bzip2"],
)
def test_a_member_is_refused_before_inspect_reads_it(tmp_path, payload, method, size, crc, why):
    path = tmp_path / "crafted.eval"
    path.write_bytes(_zip([("header.json", payload, method, size, crc)]))
    with pytest.raises(ValueError, match="^" + re.escape(f"log {path}: member 'header.json' ") + ".*" + re.escape(why)):
        run_logs.read_log(path)
