"""findbench._io: atomic writes leave files others can read, as the umask says."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest
from safetensors.numpy import save_file

from findbench._io import atomic_dir, atomic_write_json, umask


@pytest.mark.parametrize("mask, file_mode, dir_mode", [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700)])
def test_atomic_writes_honour_the_umask(tmp_path, mask, file_mode, dir_mode):
    old = os.umask(mask)
    try:
        assert umask() == mask
        path = atomic_write_json(tmp_path / "out" / "scores.json", {"a": 1})
        with atomic_dir(tmp_path / "run") as folder:
            (folder / "x.txt").write_text("x")
            # safetensors writes through a temporary file of its own (0600), as train-judge's adapter is written
            (folder / "sub").mkdir(mode=0o700)
            save_file({"w": np.zeros(2, dtype=np.float32)}, str(folder / "sub" / "adapter_model.safetensors"))
            (folder / "run.sh").write_text("#!/bin/sh\n")
            (folder / "run.sh").chmod(0o700)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == file_mode
    assert stat.S_IMODE((tmp_path / "run").stat().st_mode) == dir_mode
    assert stat.S_IMODE((tmp_path / "run" / "sub").stat().st_mode) == dir_mode
    assert stat.S_IMODE((tmp_path / "run" / "sub" / "adapter_model.safetensors").stat().st_mode) == file_mode
    assert stat.S_IMODE((tmp_path / "run" / "run.sh").stat().st_mode) == dir_mode  # executables stay executable
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_failed_atomic_dir_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError), atomic_dir(tmp_path / "run") as folder:
        (folder / "x.txt").write_text("x")
        raise RuntimeError("crash")
    assert list(tmp_path.iterdir()) == []


def test_read_json_object_names_the_file_in_one_line(tmp_path):
    from findbench._io import read_json_object

    good, truncated, listed = tmp_path / "good.json", tmp_path / "truncated.json", tmp_path / "list.json"
    good.write_text('{"a": 1}')
    truncated.write_text('{"a": ')
    listed.write_text("[1]")
    assert read_json_object(good, "run.json:") == {"a": 1}
    for path, why in ((truncated, "is unreadable (JSONDecodeError"), (listed, "must hold a JSON object, got list"),
                      (tmp_path / "missing.json", "is unreadable (FileNotFoundError")):
        with pytest.raises(ValueError) as info:
            read_json_object(path, "run.json:")
        assert str(info.value).startswith(f"run.json: {path} {why}") and "\n" not in str(info.value)


def test_a_process_waiting_on_a_cache_lock_says_whose_it_is_and_for_how_long(tmp_path, monkeypatch, caplog):
    import logging
    import re
    import socket
    import subprocess
    import sys
    import textwrap
    import time

    from findbench import _io

    entry, ready, release = tmp_path / "entry", tmp_path / "ready", tmp_path / "release"
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import pathlib, time
        from findbench._io import cache_lock
        with cache_lock({str(entry)!r}, "generating strings (seed 0)"):
            pathlib.Path({str(ready)!r}).touch()
            while not pathlib.Path({str(release)!r}).exists():
                time.sleep(0.05)
    """)], env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        for _ in range(600):
            if ready.exists() or child.poll() is not None:
                break
            time.sleep(0.05)
        assert ready.exists()
        monkeypatch.setattr(_io, "LOCK_REPORT_S", 0.2)

        def report(*args, **kwargs):
            if len([r for r in caplog.records if "still waiting" in r.getMessage()]) == 2:
                release.touch()  # the holder finishes after two reports
        caplog.set_level(logging.INFO, logger="findbench._io")
        with caplog.at_level(logging.INFO):
            handler = logging.Handler()
            handler.emit = report
            logging.getLogger("findbench._io").addHandler(handler)
            try:
                with _io.cache_lock(entry, "generating strings (seed 0)"):
                    assert child.poll() == 0 or child.wait(timeout=30) == 0
                    assert (tmp_path / "entry.lock.owner").is_file()
            finally:
                logging.getLogger("findbench._io").removeHandler(handler)
    finally:
        release.touch()
        child.wait(timeout=30)
    said = [r.getMessage() for r in caplog.records]
    held = f"held by pid {child.pid} on {socket.gethostname()} since "
    assert said[0].startswith(f"waiting for another process generating strings (seed 0) (lock {entry}.lock, {held}")
    assert said[1].startswith(f"still waiting for lock {entry}.lock ({held}{said[0].split(' since ')[1]}: ")
    assert all(re.search(r"\): \d+ min \d\d s so far$", line) for line in said[1:3])
    assert not (tmp_path / "entry.lock.owner").exists()  # the holder's record leaves with the lock
