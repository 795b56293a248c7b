"""End to end with the embedded LM (SmolLM2-135M): slow, and only checks the plumbing: the
135M model is no interpreter, so what it answers is not judged."""

from __future__ import annotations

import json

import pytest

from findbench.interpret.run import EPISODE_FILES
from tests.interpret.fakes import interpret


@pytest.mark.slow
def test_embedded_lm_run(embedded_lm, data_dir, tmp_path):
    out = interpret(
        data_dir,
        embedded_lm,
        functions=["neurons_relations/f00000"],
        method="aia,milan",
        rounds=2,
        max_tokens=48,
        out=tmp_path / "run",
        progress=False,
    )
    for method in ("aia", "milan"):
        folder = out / "neurons_relations" / method / "f00000"
        assert sorted(p.name for p in folder.iterdir()) == sorted(EPISODE_FILES)
        record = json.loads((folder / "episode.json").read_text())
        assert 1 <= record["rounds"] <= 2 and record["protocol"] == "text"
    assert (out / "lm-cache.sqlite").is_file()
