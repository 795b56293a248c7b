"""`findbench main`: the whole job on embedded defaults, resumable stage by stage."""

import json

import pytest

from findbench import pipeline


@pytest.mark.slow
def test_main_job_end_to_end_and_resume(tmp_path, monkeypatch):
    data, out = tmp_path / "find", tmp_path / "out"
    summary = pipeline.run_main(data=data, out=out, judges=("embedded",), judge_functions=2, skip_train=True)
    assert summary["rows"] == {"numeric": 1000, "strings": 1000, "neurons_entities": 200, "neurons_relations": 75}
    # ground-truth code scored against itself through the sandboxed metrics is perfect
    assert summary["code_metrics"]["numeric_ground_truth"]["success_rate"] == 1.0
    assert summary["code_metrics"]["strings_ground_truth"]["exact_match"] == 1.0
    acc = summary["unit_test_accuracy"]["embedded"]
    assert set(acc) == {"strings", "neurons_entities", "neurons_relations"}
    assert all(0.0 <= v <= 1.0 for v in acc.values())
    assert json.loads((out / "summary.json").read_text()) == summary
    assert "| embedded |" in (out / "summary.md").read_text()

    # a second run reuses every finished stage: nothing is rebuilt or re-judged
    def _boom(*a, **k):
        raise AssertionError("stage should have been reused")

    monkeypatch.setattr("findbench.builders.find.build", _boom)
    monkeypatch.setattr(pipeline, "load_metric", _boom)
    assert pipeline.run_main(data=data, out=out, judges=("embedded",), judge_functions=2, skip_train=True) == summary


def test_main_rejects_bad_sample_size(tmp_path):
    with pytest.raises(ValueError, match="judge_functions"):
        pipeline.run_main(data=tmp_path / "d", out=tmp_path / "o", judge_functions=0)
