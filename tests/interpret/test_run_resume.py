"""A failed or killed ``findbench interpret`` resumes through ``inspect_ai.eval_set``: the rerun
reuses the samples its log holds (no model call for them), each function gets one episode, and
the logs folder holds what eval_set keeps (one log per task, ``eval-set.json``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from inspect_ai.log import read_eval_log

from findbench.interpret.run import EPISODE_FILES
from tests.interpret.fakes import GenerationLM, interpret

FUNCTIONS = [f"strings/f0000{i}" for i in range(4)]


class CountingLM(GenerationLM):
    """Calls the function once, then answers with the call's input; ``calls`` counts the requests
    and ``stop_at`` (a request number) raises there, or kills the process with ``kill``."""

    name = "counting-lm"

    def __init__(self, stop_at=None, kill=False):
        self.stop_at, self.kill, self.calls = stop_at, kill, 0

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        self.calls += 1
        if self.calls == self.stop_at:
            if self.kill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError("connection lost")
        return ["PYTHON(function.py abc)" if len(c) == 2 else "[DESCRIPTION]: a guess" for c in conversations]


def settings(out):
    # no request cache: every request of an episode reaches the LM, so calls count the episodes run
    return dict(functions=FUNCTIONS, out=out, max_connections=1, progress=False, model_args={"cache": None})


def logs_of(out):
    return sorted((out / "logs").glob("*.eval"))


def done_in_logs(out) -> set[str]:
    return {str(s.id) for path in logs_of(out) for s in read_eval_log(str(path)).samples or [] if s.error is None}


def check_resumed(data_dir, out, done, logs_left):
    """Rerun ``out`` whose logs hold the samples ``done``: only the others reach the LM (two
    requests an episode), every function has one episode, the newest of ``logs_left`` logs is the
    task's, successful (the others: the unfinished logs it resumed)."""
    lm = CountingLM()
    interpret(data_dir, lm, **settings(out))
    assert lm.calls == 2 * (len(FUNCTIONS) - len(done))
    folders = sorted(p for p in out.glob("strings/aia/f*") if p.is_dir())
    assert [f"strings/{p.name}" for p in folders] == FUNCTIONS
    assert all(sorted(q.name for q in p.iterdir()) == sorted(EPISODE_FILES) for p in folders)
    logs = logs_of(out)
    assert len(logs) == logs_left and all(
        read_eval_log(str(p), header_only=True).status != "success" for p in logs[:-1]
    )
    log = read_eval_log(str(logs[-1]))
    assert log.status == "success" and log.eval.task == "find_interpret_aia"
    assert sorted(str(s.id) for s in log.samples) == FUNCTIONS and all(s.error is None for s in log.samples)
    eval_set = json.loads((out / "logs" / "eval-set.json").read_text())
    assert [t["name"] for t in eval_set["tasks"]] == ["find_interpret_aia"]
    assert (out / "logs" / "logs.json").is_file()
    # a finished run rerun does nothing
    again = CountingLM()
    before = (out / "run.json").stat().st_mtime_ns
    interpret(data_dir, again, **settings(out))
    assert again.calls == 0 and logs_of(out) == logs and (out / "run.json").stat().st_mtime_ns == before


def test_a_failed_run_resumes_its_log(data_dir, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(RuntimeError, match="inspect eval did not finish: .*connection lost.*rerun with the same --out"):
        interpret(data_dir, CountingLM(stop_at=6), **settings(out))
    done = done_in_logs(out)
    assert len(done) == 2  # two episodes of two requests each, then the third failed
    assert sorted(f"strings/{p.name}" for p in out.glob("strings/aia/f*")) == sorted(done)  # exported from the log
    info = (out / "run.json").read_text()
    assert json.loads(info)["structured_outputs_applied"] is False
    before = (out / "run.json").stat().st_mtime_ns
    check_resumed(data_dir, out, done, logs_left=1)  # eval_set removed the log it resumed
    assert (out / "run.json").stat().st_mtime_ns == before  # written once, before the first eval


def test_an_unreadable_log_is_named(data_dir, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(RuntimeError, match="connection lost"):
        interpret(data_dir, CountingLM(stop_at=6), **settings(out))
    bad = out / "logs" / "2099-01-01T00-00-00-00-00_find-interpret-aia_bad.eval"
    bad.write_bytes(b"not a zip")
    with pytest.raises(
        ValueError, match=f"^out: log {bad} is not an Inspect .eval archive \\(.*\\); move it out of {out / 'logs'}"
    ) as exc:
        interpret(data_dir, CountingLM(), **settings(out))
    assert "\n" not in str(exc.value)


def test_a_killed_run_resumes_its_log(data_dir, tmp_path):
    out = tmp_path / "run"
    script = textwrap.dedent(f"""
        from tests.interpret.fakes import interpret
        from tests.interpret.test_run_resume import CountingLM, settings
        from pathlib import Path
        interpret({str(data_dir)!r}, CountingLM(stop_at=6, kill=True), **settings(Path({str(out)!r})))
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=os.getcwd(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert not list(out.glob("strings/aia/f*"))  # killed before the export
    crashed = logs_of(out)
    assert [read_eval_log(str(p), header_only=True).status for p in crashed] == ["started"]
    check_resumed(
        data_dir, out, {"strings/f00000", "strings/f00001"}, logs_left=2
    )  # a crashed log is recovered, not removed


def test_a_resumed_log_and_new_functions_run_as_two_tasks(data_dir, tmp_path):
    """A rerun asking for more functions resumes the unfinished log as it was and runs the new
    function as a task of its own (another version of the same task name)."""
    out = tmp_path / "run"
    with pytest.raises(RuntimeError, match="connection lost"):
        interpret(data_dir, CountingLM(stop_at=6), **settings(out))
    lm = CountingLM()
    interpret(data_dir, lm, **{**settings(out), "functions": [*FUNCTIONS, "strings/f00004"]})
    assert lm.calls == 2 * 3
    assert sorted(f"strings/{p.name}" for p in out.glob("strings/aia/f*")) == [*FUNCTIONS, "strings/f00004"]
    logs = [read_eval_log(str(p)) for p in logs_of(out)]
    assert sorted(sorted(str(s.id) for s in log.samples) for log in logs) == [FUNCTIONS, ["strings/f00004"]]
    assert all(log.status == "success" and log.eval.task == "find_interpret_aia" for log in logs)
    assert len({log.eval.task_version for log in logs}) == 2


def test_a_lost_episode_folder_is_exported_again_from_its_log(data_dir, tmp_path):
    import shutil

    out = tmp_path / "run"
    interpret(data_dir, CountingLM(), **settings(out))
    folder = out / "strings" / "aia" / "f00002"
    record = (folder / "episode.json").read_text()
    other = (out / "strings" / "aia" / "f00001" / "episode.json").stat().st_mtime_ns
    logs = logs_of(out)
    shutil.rmtree(folder)
    lm = CountingLM()
    interpret(data_dir, lm, **settings(out))
    assert lm.calls == 0 and logs_of(out) == logs  # nothing ran: the finished log holds it
    assert (folder / "episode.json").read_text() == record
    assert (out / "strings" / "aia" / "f00001" / "episode.json").stat().st_mtime_ns == other
