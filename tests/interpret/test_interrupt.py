"""Ctrl-C on ``findbench interpret``: the run stops at once (the interpreter's generation is
cancelled), prints one line saying how many episodes a rerun runs and exits 130; the rerun
resumes. Without a terminal, a line per finished episode."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

from findbench.lm.base import check_interrupt
from tests.interpret.fakes import GenerationLM

FUNCTIONS = [f"strings/f0000{i}" for i in range(4)]


class StallingLM(GenerationLM):
    """Calls the function once, then answers; with ``stall`` (a marker file) its third request
    (the second episode's first) writes the marker and waits, as a long generation does, until
    Ctrl-C cancels it."""

    name = "stalling-lm"

    def __init__(self, stall=None):
        self.stall, self.calls = stall, 0

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        self.calls += 1
        if self.stall and self.calls == 3:
            open(self.stall, "w").close()
            for _ in range(6000):  # at most 5 min
                check_interrupt()
                time.sleep(0.05)
        return ["PYTHON(function.py abc)" if len(c) == 2 else "[DESCRIPTION]: a guess" for c in conversations]


def _terminal_sigint() -> None:
    """The child takes Ctrl-C as a terminal's foreground command does, even where the suite itself runs
    with SIGINT ignored (a background job: the child would inherit the ignore, and ``findbench`` rightly
    leaves an ignored SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

def start(data_dir, out, stall=None) -> subprocess.Popen:
    """``findbench interpret`` on :data:`FUNCTIONS` with the interpreter ``stalling`` (a
    :class:`StallingLM`), in a child process without a terminal."""
    script = textwrap.dedent(f"""
        import sys
        import findbench.lm
        from findbench.cli import main
        from findbench.models import register
        from tests.interpret.test_interrupt import StallingLM

        register("stalling", lambda: "unused")
        findbench.lm.load_lm = lambda spec, **kw: StallingLM({None if stall is None else str(stall)!r})
        sys.exit(main(["interpret", "--interpreter", "stalling", "--data", {str(data_dir)!r}, "--functions",
                       {",".join(FUNCTIONS)!r}, "--max-connections", "1", "--out", {str(out)!r}]))
    """)
    return subprocess.Popen([sys.executable, "-c", script], cwd=os.getcwd(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            preexec_fn=_terminal_sigint)


def test_ctrl_c_stops_with_one_line_and_the_rerun_resumes(data_dir, tmp_path):
    out, stall = tmp_path / "run", tmp_path / "stalled"
    proc = start(data_dir, out, stall)
    for _ in range(1200):  # the child imports Inspect and runs the first episode
        if stall.exists() or proc.poll() is not None:
            break
        time.sleep(0.1)
    assert stall.exists(), proc.communicate()[1][-3000:]
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)  # the stalled generation is cancelled, not waited for
    assert proc.returncode == 130, stderr[-3000:]
    said = [line for line in stderr.splitlines() if "interrupt" in line.lower()]
    assert said == ["interrupted: rerun the same command to resume (3 episodes left)"], stderr[-3000:]
    assert "Traceback" not in stderr + stdout and "successfully" not in stdout
    assert re.search(r"episode 1/4 done: strings/f0000\d \(aia\)", stderr)

    rerun = start(data_dir, out)
    stdout, stderr = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, stderr[-3000:]
    assert sorted(f"strings/{p.name}" for p in out.glob("strings/aia/f*")) == FUNCTIONS
    assert "strings/aia: 4 episodes, 4 answered" in stdout and "4 episodes, 1 already done, 3 to run" in stderr
    # the episode done before Ctrl-C is not run again; one line per episode that ran
    assert len(re.findall(r"episode \d/3 done: strings/f0000\d \(aia\)", stderr)) == 3, stderr[-3000:]
