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
