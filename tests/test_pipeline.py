"""`findbench main`: interpreters on FIND and their scores, resumable stage by stage."""

import json
from pathlib import Path

import pytest

from findbench import pipeline
from findbench.constants import JUDGE_CATEGORIES, TRAINED_MARKER
from findbench.models import embedded_judge_dir
from findbench.schema import CATEGORIES


@pytest.mark.slow
def test_main_job_end_to_end_and_resume(tmp_path, monkeypatch):
    """The real job on a tiny budget: the dataset, the references and the embedded LM, scored
    with the untuned embedded judge."""
    data, out = tmp_path / "find", tmp_path / "out"
    cfg = pipeline.MainConfig(dataset_out=str(data), out=str(out), functions_per_category=2, lm_functions=1, rounds=1,
                              max_tokens=24, judge="embedded", judge_mode="pmi")
    summary = pipeline.run_main(cfg)
    assert summary["rows"] == {"numeric": 1000, "strings": 1000, "neurons_entities": 200, "neurons_relations": 75,
                               "rasp": 351}
    # ground-truth code scored against itself through the sandboxed metrics is perfect
    assert summary["code_metrics"]["numeric_ground_truth"]["success_rate"] == 1.0
    assert summary["code_metrics"]["strings_ground_truth"]["exact_match"] == 1.0
    rasp_truth = summary["code_metrics"]["rasp_ground_truth"]  # reference code against the compiled models
    assert rasp_truth["exact_match"] == 1.0 and rasp_truth["position_accuracy"] == 1.0 and rasp_truth["n"] == 24
    assert "landlock" in summary["code_metrics"]["isolation"]
    oracle, rand = summary["results"]["oracle"]["scores"], summary["results"]["random"]["scores"]
    # the oracle is perfect on code and at least as good as random everywhere
    assert oracle["numeric"]["aia"]["nmse_success"] == 1.0 and oracle["strings"]["aia"]["exact_match"] == 1.0
    assert rand["strings"]["aia"]["exact_match"] < 1.0
    for category in JUDGE_CATEGORIES:
        assert oracle[category]["aia"]["unit_test_accuracy"] >= rand[category]["aia"]["unit_test_accuracy"]
    # the floors: no fixed program is right, an empty description is never judged
    const, empty = summary["results"]["constant"]["scores"], summary["results"]["empty"]["scores"]
    assert const["numeric"]["aia"]["nmse_success"] == 0.0 and const["strings"]["aia"]["exact_match"] == 0.0
    # rasp beside the others: the oracle's code matches the compiled models, the floors' does not
    assert oracle["rasp"]["aia"]["exact_match"] == 1.0 and oracle["rasp"]["aia"]["exact_match_n"] == 2
    assert oracle["rasp"]["aia"]["exact_match_margin"] > 0.0
    observed = summary["results"]["observed"]["scores"]
    assert const["rasp"]["aia"]["exact_match"] < 1.0 and observed["rasp"]["aia"]["exact_match"] < 1.0
    for category in JUDGE_CATEGORIES:
        assert empty[category]["aia"]["unit_test_accuracy"] == 0.0
    assert set(summary["results"]["embedded"]["scores"]) == {"judge", *CATEGORIES, "rasp"}
    assert summary["results"]["embedded"]["scores"]["judge"]["name"] == "embedded"  # the judge each score names
    assert set(summary["results"]["embedded"]["scores"]["neurons_entities"]) == {"aia", "milan", "aia+milan"}
    assert json.loads((out / "summary.json").read_text()) == summary
    md = (out / "summary.md").read_text()
    assert "| **oracle** |" in md and "| **embedded** |" in md and "| GPT-4 (paper) |" in md
    # cells with interval and n; the distance to the floor; the rasp columns beside the others
    assert "(n=2)†" in md and "#### Δ vs constant" in md and "rasp code (exact match)" in md
    # rasp again under each white-box access, with the attribution baseline (never black): the oracle's map is right
    access = summary["rasp_access"]
    assert list(access) == ["black", "white", "rotated", "localized"] and "attribution" not in summary["results"]
    assert all("attribution" in access[a] and access[a]["oracle"]["role_f1"] == 1.0 for a in list(access)[1:])
    assert "## rasp: access conditions" in md and "| **attribution** | — |" in md
    # a report per interpreter, next to its scores
    for name in ("oracle", "random", "embedded"):
        assert summary["reports"][name] == str(out / "scores" / name / "report.html")
        assert "<html" in Path(summary["reports"][name]).read_text()

    # a second run reuses every finished stage and episode: nothing is rebuilt, rerun or rescored
    def _boom(*a, **k):
        raise AssertionError("should have been reused")

    monkeypatch.setattr("findbench.builders.find.build", _boom)
    monkeypatch.setattr(pipeline, "load_metric", _boom)
    monkeypatch.setattr("findbench.interpret.evaluate.evaluate_run", _boom)
    monkeypatch.setattr("findbench.lm.transformers_lm.TransformersLM.generate", _boom)
    assert pipeline.run_main(cfg) == summary


def _fake_rows(category: str, n: int) -> list[dict]:
    rows = []
    for i in range(n):
        row = {"function_id": f"{category}/f{i:05d}", "category": category, "code": f"def f(x):\n    return x + {i}\n",
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
        self.calls.append(self.name)
        if self.name == "find_nmse":
            return {"success_rate": 1.0, "mean_nmse": 0.0, "isolation": "landlock+netns+uid"}
        return {"exact_match": 1.0, "position_accuracy": 1.0, "n": len(predictions)}


@pytest.fixture
def fake_main(tmp_path, monkeypatch):
    """run_main with the dataset build and loading, the metrics, the interpreters and the scoring
    replaced by recorders: the stage logic runs for real in milliseconds."""
    monkeypatch.setenv("FINDBENCH_CACHE", str(tmp_path / "cache"))
    calls: dict[str, list] = {"build": [], "metric": [], "interpret": [], "evaluate": []}
    sizes = {"numeric": 20, "strings": 50, "neurons_entities": 50, "neurons_relations": 50}

    def fake_build(cfg):
        Path(cfg.out).mkdir(parents=True, exist_ok=True)
        calls["build"].append(cfg.seed)

    class _Split:
        def __init__(self, rows):
            self.rows = rows

        def to_list(self):
            return self.rows

    def fake_interpret(cfg):
        interpreter, methods, functions, out = cfg.interpreter, cfg.method, cfg.functions, cfg.out
        calls["interpret"].append((interpreter, tuple(methods), tuple(cfg.configs), tuple(functions), cfg.max_tokens,
                                   cfg.access))
        for fid in functions:
            for method in methods:
                folder = Path(out) / fid.split("/")[0] / method / fid.split("/")[1]
                if not folder.is_dir():  # finished episodes are kept, as the real runner does
                    folder.mkdir(parents=True)
                    for name in ("description.txt", "domain.txt", "code.py"):
                        (folder / name).write_text(f"{interpreter} {fid}")
                    (folder / "episode.json").write_text("{}")
        return Path(out)

    def fake_evaluate(cfg, **kwargs):
        calls["evaluate"].append((Path(cfg.run_dir).name, cfg.judge, cfg.judge_mode))
        from findbench.interpret.scores import Cell, Estimate, Scores

        cell = Cell(unit_test_accuracy=Estimate(0.5, (0.5, 0.5), 1), exact_match=Estimate(1.0, (1.0, 1.0), 1))
        cells = {"strings": {"aia": cell}} if (Path(cfg.run_dir) / "strings").is_dir() else {}
        if (Path(cfg.run_dir) / "rasp").is_dir():  # circuit scores: oracle 1, attribution leans on the basis
            name, _, access = Path(cfg.run_dir).name.partition("-")
            f1 = {"oracle": 1.0, "attribution": 0.75 if access == "white" else 0.25}.get(name, 0.125)
            est = Estimate(f1, (f1, f1), 3)
            cells["rasp"] = {"aia": Cell(role_f1=est, node_auroc=est, unit_test_accuracy=Estimate(0.5, (0.5, 0.5), 3),
                                         exact_match_observed=Estimate(0.375, (0.25, 0.5), 3))}
        return {"scores": Scores(cells).to_json(), "counts": {}}

    monkeypatch.setattr("findbench.builders.find.build", fake_build)
    monkeypatch.setattr("datasets.load_dataset", lambda path, config, split: _Split(_fake_rows(config, sizes[config])))
    monkeypatch.setattr(pipeline, "load_metric", lambda name: _FakeMetric(name, calls["metric"]))
    monkeypatch.setattr("findbench.interpret.run.run_interpretations", fake_interpret)
    monkeypatch.setattr("findbench.interpret.evaluate.evaluate_run", fake_evaluate)
    monkeypatch.setattr("findbench.interpret.report.write_report",
                        lambda cfg: Path(cfg.scores) / "report.html")

    def run(**kwargs):
        for v in calls.values():
            v.clear()
        kwargs = {
            "dataset_out": str(tmp_path / "find"), "out": str(tmp_path / "out"), "judge": "embedded",
            "judge_mode": "pmi", **kwargs
        }
        return pipeline.run_main(pipeline.MainConfig(**kwargs))

    run.calls = calls
    run.out = tmp_path / "out"
    return run


def test_main_runs_each_interpreter_with_its_methods_and_sample(fake_main):
    summary = fake_main(functions_per_category=3, lm_functions=1, max_tokens=64)
    runs = fake_main.calls["interpret"]
    assert [r[0] for r in runs] == [
        "oracle",
        "oracle",
        "random",
        "random",
        "constant",
        "constant",
        "empty",
        "empty",
        "observed",
        "observed",
        "embedded",
        "embedded",
    ]
    oracle_aia, oracle_milan, *_, lm_aia, lm_milan = runs
    # the floors run on the whole sample, like the oracle, with no LM budget
    assert all(
        r[3] == oracle_aia[3] and r[4] is None
        for r in runs
        if r[0] in ("random", "constant", "empty", "observed") and r[1] == ("aia",)
    )
    assert oracle_aia[1] == ("aia",) and oracle_aia[2] == CATEGORIES and len(oracle_aia[3]) == 3 * len(CATEGORIES)
    assert oracle_milan[1] == ("milan", "aia+milan") and oracle_milan[2] == ("neurons_entities", "neurons_relations")
    # the LM takes the first function of each category's sample, with its token budget
    first_of_each = tuple(next(f for f in oracle_aia[3] if f.startswith(c + "/")) for c in CATEGORIES)
    assert lm_aia[3] == first_of_each and lm_aia[4] == 64 and oracle_aia[4] is None
    assert lm_milan[3] == first_of_each[2:]
    # judged categories sample from the judge data's held-out split (never seen in judge training)
    from findbench.judge.data import split_functions

    for category in JUDGE_CATEGORIES:
        splits = split_functions(_fake_rows(category, 50), seed=0, heldout_fraction=0.2)
        assert all(splits[f] == "heldout" for f in oracle_aia[3] if f.startswith(category))
    assert summary["judge"] == "embedded" and summary["judge_mode"] == "pmi"
    assert [e[0] for e in fake_main.calls["evaluate"]] == [
        "oracle",
        "random",
        "constant",
        "empty",
        "observed",
        "embedded",
    ]
    md = (fake_main.out / "summary.md").read_text()
    assert "| **embedded** |" in md and "| GPT-4 (paper) |" in md
    assert "| **constant** |" in md and "| **empty** |" in md and "#### Δ vs constant" in md


@pytest.fixture
def with_rasp(fake_main, monkeypatch):
    """fake_main on a build that writes a rasp folder (14 rows: 10 dev, 4 test)."""
    import findbench.builders.find as builders

    fake = builders.build

    def build_with_rasp(cfg):
        fake(cfg)
        (Path(cfg.out) / "rasp").mkdir(exist_ok=True)

    rasp = [{**row, "split": "dev" if i < 10 else "test", "weights_sha256": "x"}
            for i, row in enumerate(_fake_rows("rasp", 14))]
    load = __import__("datasets").load_dataset
    monkeypatch.setattr(builders, "build", build_with_rasp)
    monkeypatch.setattr("datasets.load_dataset",
                        lambda path, config, split: type(load(path, "numeric", split))(rasp) if config == "rasp"
                        else load(path, config, split))
    return fake_main


def test_main_adds_rasp_where_the_build_wrote_it(with_rasp):
    """A build with a rasp folder: the references and the LM run on it too, sampled from its test split
    (tracr's own programs, split dev, never), and the code metrics run its reference code on the models."""
    fake_main = with_rasp
    summary = fake_main(functions_per_category=3, lm_functions=1)
    oracle_aia, *_ = fake_main.calls["interpret"]
    assert oracle_aia[2] == (*CATEGORIES, "rasp") and summary["rows"]["rasp"] == 14
    picked = [f for f in oracle_aia[3] if f.startswith("rasp/")]
    assert len(picked) == 3 and all(int(f[-5:]) >= 10 for f in picked)
    lm_aia = next(r for r in fake_main.calls["interpret"] if r[0] == "embedded")
    assert [f for f in lm_aia[3] if f.startswith("rasp/")] == picked[:1]
    assert fake_main.calls["metric"].count("find_exact_match") == 2  # strings, then the rasp sample


def test_main_stage_keys_follow_the_arguments(fake_main, monkeypatch):
    calls, out = fake_main.calls, fake_main.out
    first = fake_main()
    assert calls["build"] == [0] and len(calls["evaluate"]) == len(pipeline.DEFAULT_INTERPRETERS)

    # same arguments: the build, the code metrics and the scores are reused
    assert fake_main() == first
    assert calls["build"] == [] and calls["metric"] == [] and calls["evaluate"] == []

    # a bigger sample changes the runs' contents: they are rescored, nothing is rebuilt
    fake_main(functions_per_category=5)
    assert (
        calls["build"] == [] and calls["metric"] == [] and len(calls["evaluate"]) == len(pipeline.DEFAULT_INTERPRETERS)
    )

    # another judge: every run is rescored with it
    fake_main(functions_per_category=5, judge_mode="logprob")
    assert {e[2] for e in calls["evaluate"]} == {"logprob"} and len(calls["evaluate"]) == len(
        pipeline.DEFAULT_INTERPRETERS
    )

    # another seed: the dataset is rebuilt and every dependent stage reruns
    fake_main(functions_per_category=5, seed=1)
    assert calls["build"] == [1] and set(calls["metric"]) == {"find_nmse", "find_exact_match"}

    # a deleted dataset folder is rebuilt even though its stage file says it was built
    import shutil

    shutil.rmtree(out.parent / "find")
    fake_main(functions_per_category=5, seed=1)
    assert calls["build"] == [1]

    # a findbench whose generators or data changed (another fingerprint): rebuilt
    monkeypatch.setattr("findbench.find.rows.generator_fingerprint", lambda: "other-generators")
    fake_main(functions_per_category=5, seed=1)
    assert calls["build"] == [1]
    fake_main(functions_per_category=5, seed=1)
    assert calls["build"] == []


def test_main_uses_the_trained_judge_when_present_and_never_trains(fake_main, monkeypatch):
    import findbench.models

    shipped = findbench.models.shipped_judge_dir()
    assert shipped is not None
    summary = fake_main(judge=None, judge_mode=None)  # nothing trained here: the adapter shipped with the package
    assert summary["judge"] == "embedded-evaluator" and summary["judge_mode"] is None
    assert {e[1] for e in fake_main.calls["evaluate"]} == {"embedded-evaluator"}
    monkeypatch.setattr(findbench.models, "shipped_judge_dir", lambda: None)
    summary = fake_main(judge=None, judge_mode=None)
    assert summary["judge"] == "embedded" and summary["judge_mode"] == "pmi"  # untuned fallback, no training
    monkeypatch.setattr(findbench.models, "shipped_judge_dir", lambda: shipped)
    folder = Path(embedded_judge_dir(must_exist=False))
    folder.mkdir(parents=True)
    (folder / TRAINED_MARKER).write_text('{"run": 1}')
    summary = fake_main(judge=None, judge_mode=None)  # a judge trained here wins over the shipped one: rescored
    assert summary["judge"] == "embedded-evaluator" and summary["judge_mode"] is None
    assert {e[1] for e in fake_main.calls["evaluate"]} == {"embedded-evaluator"}
    fake_main(judge=None, judge_mode=None)  # unchanged: nothing is rescored
    assert fake_main.calls["evaluate"] == []
    # a retrained judge: its scores are recomputed
    (folder / TRAINED_MARKER).write_text('{"run": 2}')
    fake_main(judge=None, judge_mode=None)
    assert len(fake_main.calls["evaluate"]) == len(pipeline.DEFAULT_INTERPRETERS)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"functions_per_category": 0}, "--functions-per-category"),
        ({"lm_functions": 0}, "--lm-functions"),
        ({"rounds": 0}, "--rounds"),
        ({"interpreters": []}, "--interpreters"),
    ],
)
def test_main_rejects_bad_arguments(tmp_path, kwargs, field):
    with pytest.raises(ValueError, match=field):
        pipeline.MainConfig(dataset_out=str(tmp_path / "d"), out=str(tmp_path / "o"), **kwargs)


def test_main_runs_rasp_under_each_access_and_prints_its_table(with_rasp):
    """Every interpreter runs rasp again under white, rotated and localized access (the LM on its first
    functions), with the attribution baseline, which never runs black; summary.json's rasp_access holds
    each run's rasp cell and summary.md the table per metric with the white − rotated gap."""
    summary = with_rasp(functions_per_category=3, lm_functions=1)
    runs, out = with_rasp.calls["interpret"], with_rasp.out
    black = [r for r in runs if r[5] == "black"]
    assert [r[0] for r in black if r[1] == ("aia",)] == list(pipeline.DEFAULT_INTERPRETERS)
    picked = [f for f in black[0][3] if f.startswith("rasp/")]
    opened = [r for r in runs if r[5] != "black"]
    assert {(r[0], r[5]) for r in opened} == {
        (i, a) for i in (*pipeline.DEFAULT_INTERPRETERS, "attribution") for a in ("white", "rotated", "localized")
    } and len(opened) == 3 * (len(pipeline.DEFAULT_INTERPRETERS) + 1)
    assert all(r[1] == ("aia",) and r[2] == ("rasp",) for r in opened)
    assert all(r[3] == tuple(picked[:1] if r[0] == "embedded" else picked) for r in opened)
    assert (out / "runs" / "attribution-rotated" / "rasp").is_dir() and not (out / "runs" / "attribution").exists()
    assert "attribution" not in summary["results"]
    assert {e[0] for e in with_rasp.calls["evaluate"]} >= {"oracle-white", "embedded-localized", "attribution-white"}

    access = summary["rasp_access"]
    assert list(access) == ["black", "white", "rotated", "localized"]
    assert set(access["black"]) == set(pipeline.DEFAULT_INTERPRETERS)
    assert set(access["white"]) == {*pipeline.DEFAULT_INTERPRETERS, "attribution"}
    assert access["white"]["attribution"]["role_f1"] == 0.75 and access["rotated"]["attribution"]["role_f1"] == 0.25
    assert access["white"]["oracle"]["node_auroc_n"] == 3
    assert json.loads((out / "summary.json").read_text())["rasp_access"] == access
    md = (out / "summary.md").read_text()
    section = md[md.index("## rasp: access conditions"):]
    assert "| interpreter | black | white | rotated | localized | white − rotated |" in section
    for heading in ("unit tests", "code exact match", "position accuracy", "role F1", "node AUROC"):
        assert f"#### {heading}" in section
    role_f1 = section[section.index("#### role F1"):section.index("#### node AUROC")]
    rows = {line.split(" | ")[0]: line.split(" | ")[1:] for line in role_f1.splitlines() if line.startswith("| **")}
    assert list(rows) == ["| **oracle**", "| **floors**", "| **observed**", "| **attribution**", "| **embedded**"]
    # the circuit metrics do not exist black; cells with interval and n; the gap per interpreter
    assert rows["| **attribution**"] == ["—", "0.75 [0.75, 0.75] (n=3)†", "0.25 [0.25, 0.25] (n=3)†",
                                         "0.25 [0.25, 0.25] (n=3)†", "+0.50 |"]
    assert rows["| **oracle**"][-1] == "+0.00 |" and rows["| **floors**"][1].endswith("(random)")
    # floors: the best of the floor references and the observed run's own floor (here its exact-match floor)
    exact = section[section.index("#### code exact match"):section.index("#### position accuracy")]
    assert "| **floors** | 0.38 [0.25, 0.50] (n=3)† (observed's floor) |" in exact
    assert "floors: per cell, the highest mean" in section
    # resumable like the others: a second run rescores nothing
    assert with_rasp(functions_per_category=3, lm_functions=1) == summary and with_rasp.calls["evaluate"] == []


def test_main_runs_attribution_alone_on_rasp_white_box(with_rasp):
    """`--interpreters attribution`: it reads weights, so main runs it on rasp's white-box access only."""
    summary = with_rasp(interpreters="attribution")
    runs = with_rasp.calls["interpret"]
    assert [(r[0], r[2], r[5]) for r in runs] == [("attribution", ("rasp",), a) for a in ("white", "rotated",
                                                                                          "localized")]
    assert summary["results"] == {} and set(summary["rasp_access"]["white"]) == {"attribution"}
    assert "| **attribution** | — | 0.75" in (with_rasp.out / "summary.md").read_text()
