"""The AutoInterp results file typed (findbench.autointerp.results): SAEBench's keys, read back equal,
the same file text, and a file that does not fit refused naming the key."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from findbench._io import atomic_write_json
from findbench.autointerp.results import METRIC_KEYS, AutoInterpResults, EvalMetrics, ScorerMetrics, Shard

PATH = Path(__file__).parent / "data" / "synthetic_eval_results.json"


def test_a_file_written_before_the_types_reads_back_to_the_same_text(tmp_path):
    results = AutoInterpResults.from_json(json.loads(PATH.read_text(encoding="utf-8")))
    results.write(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_text(encoding="utf-8") == PATH.read_text(encoding="utf-8")
    assert AutoInterpResults.from_json(results.to_json()) == results
    detection = results.eval_result_metrics["autointerp"]
    assert detection.score == pytest.approx(0.5833333333333334) and detection.n_unparsed == 0
    assert detection.ci is not None and len(detection.ci) == 2 and detection.best_floor in detection.floors
    assert results.eval_result_metrics["fuzz"].n_unparsed is None  # detection only
    assert results.scorers == ["detection", "fuzz", "embedding"]
    assert results.shard is None and results.merged_from is None


def test_a_block_is_written_under_saebench_keys():
    m = ScorerMetrics(score=0.5, std_dev=0.1, n_degenerate=0, n_explanation_truncated=1, n_unparsed=2)
    assert m.block("autointerp") == {"autointerp_score": 0.5, "autointerp_std_dev": 0.1, "n_unparsed": 2,
                                     "n_degenerate": 0, "n_explanation_truncated": 1}
    assert EvalMetrics.from_json({"autointerp": m.block("autointerp")}, "m") == EvalMetrics({"autointerp": m})
    with pytest.raises(ValueError, match=r"^m\.fuzz: unknown key 'score'$"):
        EvalMetrics.from_json({"fuzz": {**m.block("fuzz"), "score": 1.0}}, "m")
    with pytest.raises(ValueError, match=r"^m\.fuzz: missing key 'fuzz_score'$"):  # the block of another scorer
        EvalMetrics.from_json({"fuzz": m.block("autointerp")}, "m")
    assert METRIC_KEYS == {"detection": "autointerp", "fuzz": "fuzz", "embedding": "embedding",
                           "likelihood": "likelihood"}


def test_a_merged_or_sharded_file_round_trips(tmp_path):
    results = AutoInterpResults.from_json(json.loads(PATH.read_text(encoding="utf-8")))
    for variant in (dataclasses.replace(results, shard=Shard(1, 4)),
                    dataclasses.replace(results, merged_from=["a", "b"])):
        atomic_write_json(tmp_path / "r.json", variant.to_json())
        obj = json.loads((tmp_path / "r.json").read_text())
        assert AutoInterpResults.from_json(obj) == variant
    assert obj["merged_from"] == ["a", "b"] and "merged_from" not in results.to_json()


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d.update(eval_type_id="core"), r"eval_type_id: expected 'autointerp', got str"),
    (lambda d: d["eval_result_metrics"].update(sparse_probing={}),
     r"eval_result_metrics: unknown key 'sparse_probing'"),
    (lambda d: d["eval_result_metrics"]["fuzz"].pop("n_degenerate"),
     r"eval_result_metrics\.fuzz: missing key 'n_degenerate'"),
    (lambda d: d["eval_result_metrics"]["fuzz"].update(ci=[0.1]),
     r"eval_result_metrics\.fuzz\.ci: missing item 1"),
    (lambda d: d.update(shard={"index": 0}), r"shard: missing key 'count'"),
    (lambda d: d.pop("latents_file"), r"missing key 'latents_file'"),
    # the latents file is named by the run id, beside the results: never a path
    (lambda d: d.update(latents_file="../elsewhere/latents.json"),
     r"latents_file: expected 'latents.json' \(beside the results file\), got '../elsewhere/latents.json'"),
    (lambda d: d.update(run_id="b", latents_file="latents.json"), r"latents_file: expected 'latents_b.json'"),
    (lambda d: d.update(run_id="../b", latents_file="latents_../b.json"), r"run_id: expected letters, digits"),
])
def test_a_file_that_does_not_fit_is_refused_naming_the_key(edit, message):
    obj = json.loads(PATH.read_text(encoding="utf-8"))
    edit(obj)
    with pytest.raises(ValueError, match=message):
        AutoInterpResults.from_json(obj)
