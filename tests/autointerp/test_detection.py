"""AutoInterp detection: the explanation label, the scorer-answer parser (its rule pinned case
by case), the per-latent score and SAEBench's mean / sample standard deviation on hand-computed
values."""

from __future__ import annotations

import doctest
import json
import math
import statistics
import subprocess
import sys

import numpy as np
import pytest

from findbench.autointerp import detection
from findbench.autointerp.detection import (
    detection_floors,
    detection_score,
    parse_detection,
    parse_explanation,
    score_detections,
    score_summary,
    summarize,
)
from tests._paths import REPO


def test_doc_examples_run():
    results = doctest.testmod(detection, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert results.attempted > 0 and results.failed == 0


def test_imports_no_torch():
    """The metric imports this module; neither it nor the package's ``__init__`` may pull in torch."""
    code = "import json, sys, findbench.autointerp.detection\nprint(json.dumps('torch' in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) is False


# -------------------------------------------------------------------------- explanations

EXPLANATIONS = [
    ("This neuron activates on the word 'knows' in rhetorical questions.", "the word 'knows' in rhetorical questions"),
    ("This neuron activates on verbs related to decision-making", "verbs related to decision-making"),
    # case-insensitive, any whitespace between the words, the first occurrence
    ("It ACTIVATES  ON capitalised names.", "capitalised names"),
    ("This neuron activates on text that activates on nothing", "text that activates on nothing"),
    # surrounding quotes and a trailing period, in either order; a leading colon
    ('This neuron activates on "the substring Ent".', "the substring Ent"),
    ("This neuron activates on 'numbers in dates.'", "numbers in dates"),
    ("This neuron activates on: “legal text”", "legal text"),
    # quotes that are not a single surrounding pair stay
    ("This neuron activates on 'knows' and 'says'", "'knows' and 'says'"),
    ('This neuron activates on "the word \'knows\'"', "the word 'knows'"),
    # the rest of the phrase's line; the next non-empty line when nothing follows on it
    ("This neuron activates on dates.\nI am fairly confident.", "dates"),
    ("This neuron activates on:\n\n  years in citations.\nMore text", "years in citations"),
    # no phrase: the first non-empty line
    ("\n  Verbs of motion.  \nsecond line", "Verbs of motion"),
    ('"Python keywords"', "Python keywords"),
    ("", ""),
    ("   \n\n ", ""),
    ("This neuron activates on", ""),
]


@pytest.mark.parametrize(("text", "label"), EXPLANATIONS)
def test_parse_explanation(text, label):
    assert parse_explanation(text) == label


def test_parse_explanation_needs_text():
    with pytest.raises(TypeError, match="text"):
        parse_explanation(None)


# ------------------------------------------------------------------------- scorer answers

PARSED = [
    ("1, 3, 5", [1, 3, 5]),
    ("1,3", [1, 3]),
    (" 2 ,4 ", [2, 4]),
    ("5, 1, 3", [1, 3, 5]),          # sorted
    ("3, 1, 3", [1, 3]),             # duplicates once
    ("1, 3, 5.", [1, 3, 5]),         # one trailing period
    ("1,\n3", [1, 3]),               # whitespace of any kind around the numbers
    ("14", [14]),                    # the last window
    ("01", [1]),
    ("None", []),
    ("none.", []),
    ("  NONE  ", []),
]

UNPARSEABLE = [
    "",
    "   ",
    ".",
    "1 and 3",
    "I think 2",
    "2 (the others look random)",
    "[1, 3]",
    "1; 3",
    "1 3",
    "1,,3",
    "1, 3,",
    ",1",
    "0",
    "15",                            # with 14 windows
    "1, 15",
    "-1",
    "+1",
    "1.5",
    "None, 1",
    "None.None",
    "none of them",
    "1, 3..",
    "²",                             # a digit, but not an ASCII one
]


@pytest.mark.parametrize(("text", "indices"), PARSED)
def test_parse_detection_reads_lists_and_none(text, indices):
    assert parse_detection(text, 14) == indices


@pytest.mark.parametrize("text", UNPARSEABLE)
def test_parse_detection_refuses_anything_else(text):
    assert parse_detection(text, 14) is None


def test_parse_detection_range_follows_n_examples():
    assert parse_detection("4", 4) == [4]
    assert parse_detection("5", 4) is None
    assert parse_detection("1", 1) == [1]


@pytest.mark.parametrize("n", [0, -3, 2.0, True, "14", None])
def test_parse_detection_checks_n_examples(n):
    with pytest.raises(ValueError, match="n_examples"):
        parse_detection("1", n)


def test_parse_detection_needs_text():
    with pytest.raises(TypeError, match="text"):
        parse_detection(None, 14)


# ------------------------------------------------------------------------------ scoring


def _oracle(predicted, active, n):
    """SAEBench's formula, written out window by window."""
    right = 0
    for window in range(1, n + 1):
        right += (window in predicted) == (window in active)
    return right / n


def test_detection_score_hand_computed():
    # 14 windows, 1 2 3 4 active; predicted 1 2 5: right on 1 2 and on 6..14 (9): 11/14
    assert detection_score([1, 2, 5], [1, 2, 3, 4], 14) == pytest.approx(11 / 14)
    assert detection_score([1, 2, 3, 4], [1, 2, 3, 4], 14) == 1.0
    assert detection_score([], [1, 2, 3, 4], 14) == pytest.approx(10 / 14)   # "None" everywhere
    assert detection_score(list(range(1, 15)), [1, 2, 3, 4], 14) == pytest.approx(4 / 14)
    assert detection_score([], [], 3) == 1.0
    assert detection_score([2, 2, 2], [2], 2) == 1.0                        # repeats count once


def test_detection_score_unparseable_is_wrong():
    assert detection_score(None, [1, 2, 3, 4], 14) == 0.0
    assert detection_score(None, [], 14) == 0.0


def test_detection_score_matches_the_formula_on_random_cases():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 20))
        predicted = [int(i) for i in rng.choice(np.arange(1, n + 1), size=int(rng.integers(0, n + 1)), replace=False)]
        active = [int(i) for i in rng.choice(np.arange(1, n + 1), size=int(rng.integers(0, n + 1)), replace=False)]
        assert detection_score(predicted, active, n) == pytest.approx(_oracle(predicted, active, n))


def test_detection_score_takes_numpy_ints_and_tuples():
    assert detection_score(np.array([1, 3]), (np.int64(1),), np.int64(4)) == 0.75
    assert isinstance(detection_score(np.array([1, 3]), [1], 4), float)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (([5], [1], 4), r"predicted\[0\]: expected a window number in 1..4, got 5"),
        (([1, 0], [1], 4), r"predicted\[1\]"),
        (([1], [9], 4), r"active\[0\]"),
        (([1], [1, -1], 4), r"active\[1\]"),
        (([1.0], [1], 4), r"predicted\[0\]: expected a window number"),
        (([True], [1], 4), r"predicted\[0\]"),
        (([1], ["1"], 4), r"active\[0\]"),
        (("1, 3", [1], 4), "predicted: expected a list"),
        (([1], None, 4), "active: expected a list"),
        (([1], 3, 4), "active: expected a list"),
        (([1], [1], 0), "n_examples"),
        (([1], [1], 4.0), "n_examples"),
        ((None, [7], 4), r"active\[0\]"),        # the reference is checked even for an unparseable answer
    ],
)
def test_detection_score_errors_name_the_argument(args, field):
    with pytest.raises(ValueError, match=field):
        detection_score(*args)


# ------------------------------------------------------------------------------ summary


def test_summarize_hand_computed_sample_std():
    # mean 0.75; squared deviations 0.0625 + 0.0625 + 0 = 0.125; / (n - 1) = 0.0625; sqrt = 0.25
    mean, std = summarize([1.0, 0.5, 0.75])
    assert (mean, std) == (0.75, 0.25)
    # two scores: |a - b| / sqrt(2)
    assert summarize([0.0, 1.0]) == pytest.approx((0.5, 1 / math.sqrt(2)))
    assert summarize([0.5, 0.5, 0.5, 0.5]) == (0.5, 0.0)


def test_summarize_is_the_sample_not_the_population_std():
    scores = [10 / 14, 11 / 14, 1.0, 0.0, 13 / 14]
    mean, std = summarize(scores)
    assert mean == pytest.approx(statistics.mean(scores))
    assert std == pytest.approx(statistics.stdev(scores))
    assert std != pytest.approx(statistics.pstdev(scores))


def test_summarize_matches_torch_std_as_saebench_calls_it():
    """SAEBench: ``torch.tensor(all_scores).mean().item()`` and ``.std().item()`` (torch's
    default correction of 1)."""
    torch = pytest.importorskip("torch")
    scores = [10 / 14, 11 / 14, 1.0, 0.0, 13 / 14, 12 / 14]
    tensor = torch.tensor(scores, dtype=torch.float64)
    assert summarize(scores) == pytest.approx((tensor.mean().item(), tensor.std().item()))


def test_summarize_one_score_has_no_std():
    mean, std = summarize([0.5])
    assert mean == 0.5 and math.isnan(std)


@pytest.mark.parametrize(
    ("scores", "field"),
    [([], "at least one"), ([0.5, math.nan], r"scores\[1\]"), ([0.5, math.inf], r"scores\[1\]"),
     ([0.5, "1"], r"scores\[1\]"), ([None], r"scores\[0\]"), (0.5, "scores: expected a list")],
)
def test_summarize_refuses_bad_scores(scores, field):
    with pytest.raises(ValueError, match=field):
        summarize(scores)


# ------------------------------------------------------------------------- many latents


def test_score_detections_hand_computed():
    out = score_detections([[1, 3], None, []], [[1, 2], [1], []], 4)
    ci = out.pop("ci")
    assert out == {"autointerp_score": 0.5, "autointerp_std_dev": 0.5, "scores": [0.5, 0.0, 1.0], "n_unparsed": 1,
                   "n": 3, "floors": {"none": 0.75, "all": 0.25}, "best_floor": "none", "margin": -0.25}
    assert 0.0 <= ci[0] <= 0.5 <= ci[1] <= 1.0


# ------------------------------------------------------------------ floors and intervals

SAEBENCH_ACTIVE = [[2, 5, 9, 13], [1, 3, 4, 14], [6, 7, 8, 10]]  # 2 top + 2 importance-weighted of 14


def test_floors_in_saebenchs_setting():
    floors = detection_floors(SAEBENCH_ACTIVE, 14)
    assert floors == pytest.approx({"none": 10 / 14, "all": 4 / 14})
    assert round(floors["none"], 3) == 0.714 and round(floors["all"], 3) == 0.286


def test_constant_answers_score_exactly_their_floor():
    none = score_detections([parse_detection("None", 14)] * 3, SAEBENCH_ACTIVE, 14)
    every = score_detections([parse_detection(", ".join(map(str, range(1, 15))), 14)] * 3, SAEBENCH_ACTIVE, 14)
    assert none["autointerp_score"] == pytest.approx(none["floors"]["none"])
    assert every["autointerp_score"] == pytest.approx(every["floors"]["all"])
    assert none["margin"] == pytest.approx(0.0) and none["best_floor"] == "none"
    assert none["ci"] == pytest.approx([10 / 14, 10 / 14])  # equal scores: a zero-width interval


def test_floors_follow_the_windows_actually_shown():
    # a latent with 3 of 5 windows active and one with 1 of 10: "None" scores 2/5 and 9/10
    floors = detection_floors([[1, 2, 3], [4]], [5, 10])
    assert floors == pytest.approx({"none": (2 / 5 + 9 / 10) / 2, "all": (3 / 5 + 1 / 10) / 2})
    with pytest.raises(ValueError, match="differ in length"):
        detection_floors([[1]], [5, 10])
    with pytest.raises(ValueError, match=r"references\[0\]"):
        detection_floors([[6]], 5)


def test_score_summary_interval_and_margin():
    scores = [0.5, 0.9, 0.7, 0.8, 0.6, 1.0, 0.4]
    s = score_summary(scores, {"chance": 0.5})
    assert s["n"] == 7 and s["mean"] == pytest.approx(0.7) and s["margin"] == pytest.approx(0.2)
    assert s["ci"][0] < 0.7 < s["ci"][1] and s["best_floor"] == "chance"
    assert score_summary(scores, {"chance": 0.5}) == s  # seeded: the same interval again
    assert score_summary(scores, {"none": 0.75, "all": 0.25})["margin"] == pytest.approx(-0.05)
    with pytest.raises(ValueError, match="floors"):
        score_summary(scores, {})
    with pytest.raises(ValueError, match=r"scores\[0\]"):
        score_summary([math.nan], {"chance": 0.5})


def test_score_detections_n_examples_per_latent():
    out = score_detections([[2], [1, 2]], [[2], [1]], [14, 2])
    assert out["scores"] == [1.0, 0.5]
    assert out["n_unparsed"] == 0


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (([[1]], [[1], [2]], 4), r"predictions \(1\) and references \(2\)"),
        (([], [], 4), "predictions: at least one"),
        (([[1], [2]], [[1], [2]], [4]), r"n_examples \(1\) and predictions \(2\)"),
        (([[1], [2]], [[1], [1]], [4, 1]), r"predictions\[1\]\[0\]: expected a window number in 1..1, got 2"),
        (([[1], [2]], [[1], [5]], 4), r"references\[1\]\[0\]"),
        (([[1], [1, None]], [[1], [2]], 4), r"predictions\[1\]\[1\]"),
        (([[1], [2]], [[1], None], 4), r"references\[1\]: expected a list"),
        (([[1], [2]], [[1], [2]], [4, 0]), r"n_examples\[1\]"),
        (([[1]], [[1]], "4"), "n_examples: expected a positive int"),
        (([[1]], [[1]], None), "n_examples: expected a positive int"),
    ],
)
def test_score_detections_errors_name_the_field(args, field):
    with pytest.raises(ValueError, match=field):
        score_detections(*args)
