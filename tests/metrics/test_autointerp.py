"""The ``autointerp`` evaluate module, loaded offline by path: results equal the torch-free
scoring functions it calls, ``None`` (an unparseable answer) survives datasets' Arrow round trip,
batches add up, and errors name the field. Its doc example and evaluate's shape are checked for
every metric in ``test_metric_common.py``."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

import findbench
from findbench.autointerp.detection import parse_detection, score_detections


@pytest.fixture(scope="module")
def metric():
    import evaluate

    return evaluate.load(findbench.metric_path("autointerp"))


def test_scores_hand_computed(metric):
    # 14 windows, 1-4 active (SAEBench's usual mix); answers as a scorer LM might give them
    answers = ["1, 2, 5", "None", "I think 2", "1,2,3,4"]
    predictions = [parse_detection(a, 14) for a in answers]
    assert predictions == [[1, 2, 5], [], None, [1, 2, 3, 4]]
    out = metric.compute(predictions=predictions, references=[[1, 2, 3, 4]] * 4, n_examples=14)
    assert out["scores"] == pytest.approx([11 / 14, 10 / 14, 0.0, 1.0])
    assert out["n_unparsed"] == 1
    mean = (11 + 10 + 0 + 14) / 14 / 4
    sample_std = math.sqrt(sum((s - mean) ** 2 for s in out["scores"]) / 3)
    assert out["autointerp_score"] == pytest.approx(mean)
    assert out["autointerp_std_dev"] == pytest.approx(sample_std)


def test_equals_the_library_function(metric):
    predictions = [[1, 3], None, [], [2, 4, 6]]
    references = [[1, 2], [1], [], [6]]
    n = [4, 4, 3, 6]
    assert metric.compute(predictions=predictions, references=references, n_examples=n) == score_detections(
        predictions, references, n
    )


def test_output_is_plain_python(metric):
    out = metric.compute(predictions=[[1], None], references=[[1], [2]], n_examples=2)
    assert set(out) == {
        "autointerp_score",
        "autointerp_std_dev",
        "scores",
        "n_unparsed",
        "n",
        "ci",
        "floors",
        "best_floor",
        "margin",
    }
    assert type(out["autointerp_score"]) is float and type(out["autointerp_std_dev"]) is float
    assert all(type(s) is float for s in out["scores"]) and type(out["n_unparsed"]) is int
    assert type(out["n"]) is int and all(type(x) is float for x in out["ci"]) and type(out["margin"]) is float
    assert out["floors"] == {"none": 0.5, "all": 0.5} and all(type(v) is float for v in out["floors"].values())


def test_floors_and_interval_in_saebenchs_setting(metric):
    """Answering "None" for every latent with 4 active windows of 14 scores the "none" floor, 10/14."""
    refs = [[1, 2, 3, 4], [5, 6, 7, 8], [2, 4, 6, 8]]
    out = metric.compute(predictions=[[], [], []], references=refs, n_examples=14)
    assert out["autointerp_score"] == pytest.approx(10 / 14) == out["floors"]["none"]
    assert out["floors"]["all"] == pytest.approx(4 / 14)
    assert out["best_floor"] == "none" and out["margin"] == pytest.approx(0.0) and out["n"] == 3
    assert out["ci"] == pytest.approx([10 / 14, 10 / 14])


def test_none_survives_datasets_first_and_in_batches(metric):
    """A whole ``None`` list (the first item too) reaches ``_compute`` as ``None``: no sentinel."""
    out = metric.compute(predictions=[None, [1]], references=[[1], [1]], n_examples=2)
    assert out["scores"] == [0.0, 1.0] and out["n_unparsed"] == 1
    metric.add_batch(predictions=[[1], None], references=[[1], [2]])
    metric.add_batch(predictions=[None], references=[[3]])
    metric.add(predictions=[], references=[])  # one latent: nothing predicted, nothing active
    out = metric.compute(n_examples=3)
    assert out["scores"] == [1.0, 0.0, 0.0, 1.0] and out["n_unparsed"] == 2


def test_single_latent_std_is_nan(metric):
    out = metric.compute(predictions=[[1]], references=[[1]], n_examples=14)
    assert out["autointerp_score"] == 1.0 and math.isnan(out["autointerp_std_dev"])


def test_datasets_casts_window_numbers_with_int(metric):
    """The documented limitation: datasets encodes every value with ``int()`` before
    ``_compute`` sees it, so a float window number is truncated, not refused."""
    out = metric.compute(predictions=[[1.0], [2.7]], references=[[1], [2]], n_examples=2)
    assert out["scores"] == [1.0, 1.0]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        # checked by evaluate against the features before _compute runs
        ({"predictions": [[1], [2]], "references": [[1]]}, r"predictions \(2\) and references \(1\)"),
        ({"predictions": ["1, 3"], "references": [[1]]}, "expected a list"),
        ({"predictions": [[1], ["x"]], "references": [[1], [1]]}, "Input predictions"),
        # checked in _compute (score_detections)
        (
            {"predictions": [[1], [5]], "references": [[1], [1]]},
            r"predictions\[1\]\[0\]: expected a window number in 1..4, got 5",
        ),
        ({"predictions": [[1], [1, None]], "references": [[1], [1]]}, r"predictions\[1\]\[1\]"),
        ({"predictions": [[1], [1]], "references": [[1], [0]]}, r"references\[1\]\[0\]"),
        ({"predictions": [[1], [1]], "references": [[1], None]}, r"references\[1\]: expected a list"),
        (
            {"predictions": [[1], [1]], "references": [[1], [1]], "n_examples": None},
            "n_examples: expected a positive int",
        ),
        (
            {"predictions": [[1], [1]], "references": [[1], [1]], "n_examples": [4]},
            r"n_examples \(1\) and predictions \(2\)",
        ),
        ({"predictions": [[1], [1]], "references": [[1], [1]], "n_examples": [4, 0]}, r"n_examples\[1\]"),
        (
            {"predictions": [[1], [1]], "references": [[1], [1]], "n_examples": 4.0},
            "n_examples: expected a positive int",
        ),
        ({"predictions": [], "references": []}, "predictions: at least one"),
    ],
)
def test_errors_name_the_field(metric, kwargs, field):
    with pytest.raises(ValueError, match=field):
        metric.compute(**{"n_examples": 4, **kwargs})


def test_the_metric_reuses_the_library_functions():
    """The module scores through :mod:`findbench.autointerp.detection` and defines no scoring of
    its own (only the metric class and its ``_info`` / ``_compute``)."""
    tree = ast.parse(Path(findbench.metric_path("autointerp")).read_text(encoding="utf-8"))
    imports = [(n.module, [a.name for a in n.names]) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert ("findbench.autointerp.detection", ["score_detections"]) in imports
    functions = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    assert functions == ["_info", "_compute"]
