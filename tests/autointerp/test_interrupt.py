"""Ctrl-C on ``findbench autointerp``: one line saying how many latents a rerun still explains,
exit code 130, no traceback; the rerun finishes from the saved evidence and the LM cache."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from findbench.lm.base import check_interrupt
from tests.autointerp.test_run import ScriptedLM


class StallingLM(ScriptedLM):
    """A :class:`ScriptedLM` answering one conversation a call; with ``stall`` (a marker file) its
    third explanation request writes the marker and waits, as a long generation does, until Ctrl-C."""

    def __init__(self, stall=None):
        super().__init__()
        self.stall = stall

    def generate(self, conversations, **kw):
        if self.stall and self.calls == 2:
            open(self.stall, "w").close()
            for _ in range(6000):  # at most 5 min
                check_interrupt()
                time.sleep(0.05)
        return super().generate(conversations, **kw)


def _terminal_sigint() -> None:
    """The child takes Ctrl-C as a terminal's foreground command does, even where the suite itself runs
    with SIGINT ignored (a background job: the child would inherit the ignore, and ``findbench`` rightly
    leaves an ignored SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

def start(corpus, out, stall=None) -> subprocess.Popen:
    """``findbench autointerp`` on 4 latents of the synthetic SAE, the explainer a
    :class:`StallingLM` behind the run's request cache (chunks of one request), without a terminal."""
    script = textwrap.dedent(f"""
        import sys
        import findbench.lm
        from findbench.cli import main
        from findbench.lm.cache import CachedLM
        from tests.autointerp.test_interrupt import StallingLM

        findbench.lm.load_lm = lambda spec, cache=None, **kw: CachedLM(StallingLM({stall!r}), cache, chunk_size=1)
        sys.exit(main(["autointerp", "--model", "minilm", "--sae", "synthetic", "--dataset", {str(corpus)!r},
                       "--out", {str(out)!r}, "--context-size", "32", "--total-tokens", "1920", "--buffer", "4",
                       "--n-top-ex", "4", "--n-top-ex-for-generation", "3", "--n-iw-sampled-ex", "2",
                       "--n-iw-sampled-ex-for-generation", "1", "--n-random-ex", "4", "--latents", "0,1,2,3",
                       "--dead-latent-threshold", "5", "--scorers", "detection", "--llm-batch-size", "1"]))
    """)
    return subprocess.Popen([sys.executable, "-c", script], cwd=os.getcwd(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, preexec_fn=_terminal_sigint,
                            env={**os.environ, "FINDBENCH_CACHE": str(out.parent / "cache")})


def test_ctrl_c_says_how_many_latents_are_left_and_the_rerun_finishes(corpus, tmp_path):
    out, stall = tmp_path / "out", tmp_path / "stalled"
    proc = start(corpus, out, str(stall))
    for _ in range(6000):  # up to 10 min: the child loads torch and the encoder first, slow on a loaded machine
        if stall.exists() or proc.poll() is not None:
            break
        time.sleep(0.1)
    assert stall.exists(), proc.communicate()[1][-3000:]
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr[-3000:]
    said = [line for line in stderr.splitlines() if "interrupt" in line.lower()]
    assert said == ["interrupted: rerun the same command to resume (2 of 4 latents left to explain, then to score: "
                    "detection)"], stderr[-3000:]
    assert "Traceback" not in stderr + stdout

    rerun = start(corpus, out)
    stdout, stderr = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, stderr[-3000:]
    assert "resumed from" in stdout and "2 of" in stdout.split("resumed from", 1)[1].splitlines()[0]
    results = json.loads((out / "synthetic_eval_results.json").read_text())
    assert sorted(results["eval_result_unstructured"], key=int) == ["0", "1", "2", "3"]
