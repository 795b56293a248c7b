"""`findbench main`: the whole job on embedded defaults, resumable stage by stage."""

import json
from pathlib import Path

import pytest

from findbench import pipeline
from findbench.constants import JUDGE_CATEGORIES, TRAINED_MARKER
from findbench.models import embedded_evaluator_dir


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
    assert summary["judge_functions"] == 2 and summary["judged_functions"] == dict.fromkeys(JUDGE_CATEGORIES, 2)
    assert json.loads((out / "summary.json").read_text()) == summary
    assert "| embedded |" in (out / "summary.md").read_text()

    # a second run reuses every finished stage: nothing is rebuilt or re-judged
    def _boom(*a, **k):
        raise AssertionError("stage should have been reused")

    monkeypatch.setattr("findbench.builders.find.build", _boom)
    monkeypatch.setattr(pipeline, "load_metric", _boom)
    assert pipeline.run_main(data=data, out=out, judges=("embedded",), judge_functions=2, skip_train=True) == summary


def _fake_rows(category: str, n: int) -> list[dict]:
    rows = []
    for i in range(n):
        row = {"function_id": f"{category}-{i}", "category": category, "code": f"def f(x):\n    return x + {i}\n",
               "description": f"adds {i}", "unit_tests": [{"inputs": [str(i)], "outputs": None, "correct": 1}],
               "test_inputs": [str(i)]}
        if category == "neurons_entities":
            row["concept1"] = f"concept{i}"  # one split group per function
        if category == "neurons_relations":
            row["name"] = f"relation{i}~x"
        rows.append(row)
    return rows


class _FakeMetric:
    def __init__(self, name, calls):
        self.name, self.calls = name, calls

    def compute(self, *, predictions, references, **kwargs):
        self.calls.append((self.name, kwargs.get("judge"), kwargs.get("category"), len(predictions)))
        if self.name == "find_nmse":
            return {"success_rate": 1.0, "mean_nmse": 0.0}
        if self.name == "find_exact_match":
            return {"exact_match": 1.0}
        # the accuracy encodes how many functions were judged, so a stale result is visible
        return {"unit_test_accuracy": len(predictions) / 1000}


@pytest.fixture
def fake_main(tmp_path, monkeypatch):
    """run_main with the dataset build, the dataset loading, the metrics and judge training
    replaced by recorders: the stage logic runs for real in milliseconds."""
    monkeypatch.setenv("FINDBENCH_CACHE", str(tmp_path / "cache"))
    calls: dict[str, list] = {"build": [], "metric": [], "train": []}
    sizes = {"numeric": 20, "strings": 500, "neurons_entities": 500, "neurons_relations": 500}

    def fake_build(out, *, seed, **kwargs):
        Path(out).mkdir(parents=True, exist_ok=True)
        calls["build"].append(seed)

    class _Split:
        def __init__(self, rows):
            self.rows = rows

        def to_list(self):
            return self.rows

    def fake_train():
        path = Path(embedded_evaluator_dir(must_exist=False))
        path.mkdir(parents=True, exist_ok=True)
        (path / TRAINED_MARKER).write_text(json.dumps({"run": len(calls["train"])}))
        calls["train"].append(str(path))
        return str(path)

    monkeypatch.setattr("findbench.builders.find.build", fake_build)
    monkeypatch.setattr("datasets.load_dataset", lambda path, config, split: _Split(_fake_rows(config, sizes[config])))
    monkeypatch.setattr(pipeline, "load_metric", lambda name: _FakeMetric(name, calls["metric"]))
    monkeypatch.setattr(pipeline, "_ensure_embedded_evaluator", fake_train)

    def run(**kwargs):
        for v in calls.values():
            v.clear()
        kwargs = {"data": tmp_path / "find", "out": tmp_path / "out", **kwargs}
        return pipeline.run_main(**kwargs)

    run.calls = calls
    run.out = tmp_path / "out"
    return run


def _judged(calls, judge):
    return {cat: n for name, j, cat, n in calls["metric"] if name == "find_unit_test" and j == judge}


def test_main_stage_keys_follow_the_arguments(fake_main):
    calls, out = fake_main.calls, fake_main.out
    judges = ("embedded", "embedded-evaluator")
    first = fake_main(judges=judges)  # the defaults: seed 0, 30 functions per category
    assert calls["build"] == [0] and len(calls["train"]) == 1
    assert _judged(calls, "embedded") == _judged(calls, "embedded-evaluator") == dict.fromkeys(JUDGE_CATEGORIES, 30)
    assert first["unit_test_accuracy"]["embedded"] == dict.fromkeys(JUDGE_CATEGORIES, 0.03)
    assert "(30 held-out functions per category)" in (out / "summary.md").read_text()
    saved = json.loads((out / "stages" / "judge_embedded_heldout.json").read_text())
    assert saved["key"]["judge_functions"] == 30 and saved["result"] == first["unit_test_accuracy"]["embedded"]

    # same arguments: every stage is reused
    assert fake_main(judges=judges) == first
    assert calls["build"] == [] and calls["metric"] == [] and calls["train"] == []

    # more judged functions: only the judge stages rerun, and the summary reports the new result
    second = fake_main(judges=judges, judge_functions=100)
    assert calls["build"] == [] and calls["train"] == []
    assert {name for name, *_ in calls["metric"]} == {"find_unit_test"}
    assert _judged(calls, "embedded") == _judged(calls, "embedded-evaluator") == dict.fromkeys(JUDGE_CATEGORIES, 100)
    assert second["judge_functions"] == 100
    assert second["unit_test_accuracy"]["embedded"] == dict.fromkeys(JUDGE_CATEGORIES, 0.1)
    assert second["code_metrics"] == first["code_metrics"]
    assert "(100 held-out functions per category)" in (out / "summary.md").read_text()
    # the stale file was replaced in place (same readable name), no temporary file left over
    assert sorted(p.name for p in (out / "stages").iterdir()) == [
        "build.json", "code_metrics.json", "judge_embedded-evaluator_heldout.json", "judge_embedded_heldout.json",
        "train_evaluator.json"]
    assert json.loads((out / "stages" / "judge_embedded_heldout.json").read_text())["key"]["judge_functions"] == 100
    assert fake_main(judges=judges, judge_functions=100) == second and calls["metric"] == []

    # another seed: the dataset is rebuilt and every dependent stage reruns
    fake_main(judges=judges, judge_functions=100, seed=1)
    assert calls["build"] == [1]
    assert {name for name, *_ in calls["metric"]} == {"find_nmse", "find_exact_match", "find_unit_test"}

    # a retrained judge: only its own scores are recomputed
    (Path(embedded_evaluator_dir()) / TRAINED_MARKER).write_text('{"run": "again"}')
    fake_main(judges=judges, judge_functions=100, seed=1)
    assert set(_judged(calls, "embedded-evaluator")) == set(JUDGE_CATEGORIES)
    assert _judged(calls, "embedded") == {}


def test_main_reruns_a_stage_file_of_the_old_layout(fake_main):
    """A stage file from before the keys (the bare result) is not trusted."""
    stages = fake_main.out / "stages"
    stages.mkdir(parents=True)
    (stages / "judge_embedded_heldout.json").write_text(json.dumps(dict.fromkeys(JUDGE_CATEGORIES, 0.5)))
    summary = fake_main(judges=("embedded",), judge_functions=100)
    assert summary["unit_test_accuracy"]["embedded"] == dict.fromkeys(JUDGE_CATEGORIES, 0.1)


def test_main_summary_says_how_many_functions_were_judged(fake_main):
    """Asking for more functions than a category holds out judges them all, and says so."""
    summary = fake_main(judges=("embedded",), judge_functions=500)
    held = dict.fromkeys(JUDGE_CATEGORIES, 100)  # 20% of the 500 fake functions per category
    assert summary["judged_functions"] == held and _judged(fake_main.calls, "embedded") == held
    assert "(up to 500 held-out functions per category: strings 100, " in (fake_main.out / "summary.md").read_text()


def test_main_rejects_bad_sample_size(tmp_path):
    with pytest.raises(ValueError, match="judge_functions"):
        pipeline.run_main(data=tmp_path / "d", out=tmp_path / "o", judge_functions=0)
