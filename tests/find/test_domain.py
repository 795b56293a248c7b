"""The [DOMAIN] score: parsing interpreters' intervals, the true corrupted interval of numeric
rows (checked against the served function), IoU, and the excepted-subdomain unit tests of
relation neurons."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from findbench.find import numeric
from findbench.find.domain import (
    REFERENCE_COLUMNS,
    corrupted_interval,
    domain_reference,
    domain_text,
    domain_unit_tests,
    interval_iou,
    parse_intervals,
    score_domain,
)
from findbench.find.synthetic_neurons import UNDEFINED, generate_relations

INF = math.inf

# ------------------------------------------------------------------------------ parsing

PARSED = [
    # FIND's label, with and without a colon, text before and after the interval
    ("[DOMAIN]: The function is corrupted on the interval (2, 7)", [(2.0, 7.0)]),
    ("[DOMAIN] between -3.5 and 10", [(-3.5, 10.0)]),
    ("[DOMAIN]: [-inf, -2]", [(-INF, -2.0)]),
    ("[DOMAIN]: (-∞, 4) behaves oddly", [(-INF, 4.0)]),
    ("x < 4", [(-INF, 4.0)]),
    ("x > 1e2", [(100.0, INF)]),
    ("x <= -2.5", [(-INF, -2.5)]),
    ("from 3 to 5 and from 8 to 9", [(3.0, 5.0), (8.0, 9.0)]),
    ("**[DOMAIN]**: 2 < x < 7", [(2.0, 7.0)]),
    ("[DOMAIN]: between 7 and 2 the values are random", [(2.0, 7.0)]),
    ("[DOMAIN]: the output is noise for inputs greater than 2 and less than 7", [(2.0, 7.0)]),
    ("[DOMAIN]: x > 2 and x < 7", [(2.0, 7.0)]),
    ("[DOMAIN]: corrupted for x < -50 and x > 50", [(-INF, -50.0), (50.0, INF)]),
    ("[DOMAIN]: noise outside (2, 7)", [(-INF, 2.0), (7.0, INF)]),
    ("[DOMAIN]: values of x from −3.5 to negative infinity are noisy", [(-INF, -3.5)]),
    ("[DOMAIN]: interval 20-30", [(20.0, 30.0)]),
    ("[DOMAIN]: for negative inputs the output is noise", [(-INF, 0.0)]),
    ("[DOMAIN]: 5 and above", [(5.0, INF)]),
    ("Corrupted in [1e1, 2E1)", [(10.0, 20.0)]),
    # the domain stated first, the unexpected interval after: only the latter counts
    (
        "[DESCRIPTION]: a line. [DOMAIN]: The domain of the function is all real numbers. Between 2 and 7 "
        "the function outputs random values. [CODE]: def f(x):\n    return x  # between 50 and 60",
        [(2.0, 7.0)],
    ),
    ("[DOMAIN]: The domain is [-128, 128], with unexpected behavior in (2,7)", [(2.0, 7.0)]),
    ("[DOMAIN]: (-inf, inf). Unexpected behavior in [2, 7]", [(2.0, 7.0)]),
    ("Domain: the function is defined for x > 0. For x > 40 it is noisy.", [(40.0, INF)]),
    ("The function behaves unexpectedly. It happens for x < 4.", [(-INF, 4.0)]),
    ("[DOMAIN]: The function behaves normally except between 2 and 5", [(2.0, 5.0)]),
    # explicit "no interval"
    ("no corruption", []),
    ("[DOMAIN]: none", []),
    ("[DOMAIN]: N/A", []),
    ("[DOMAIN]: the whole domain", []),
    ("[DOMAIN]: all real numbers", []),
    ("[DOMAIN]: The domain is [-128, 128].", []),
    ("[DOMAIN]: There is no unexpected behavior between -100 and 100", []),
    ("[DOMAIN]: The function has no unexpected behaviour; its domain is [-128, 128]", []),
    # nothing to read
    ("[DOMAIN]: I am not sure.", None),
    ("[DOMAIN]: something odd happens at x = 5", None),
    ("[DESCRIPTION]: a line [CODE]: def f(x): return x", None),
    ("[DOMAIN]:", None),
    ("", None),
]


@pytest.mark.parametrize(("text", "expected"), PARSED)
def test_parse_intervals(text, expected):
    assert parse_intervals(text) == expected


def test_parse_distinguishes_none_from_unparseable():
    assert parse_intervals("[DOMAIN]: no unexpected behaviour") == []
    assert parse_intervals("[DOMAIN]: unclear") is None
    with pytest.raises(TypeError, match="text must be a str"):
        parse_intervals(None)


def test_domain_text():
    full = "[DESCRIPTION]: adds one\n[DOMAIN]: x < 4, noisy there\n[CODE]: def f(x): return x + 1"
    assert domain_text(full) == "x < 4, noisy there"
    assert domain_text("  between 1 and 2 ") == "between 1 and 2"
    assert domain_text("[DESCRIPTION]: adds one [CODE]: ...") == ""
    assert domain_text("[DOMAIN] (1, 2) [DESCRIPTION] d") == "(1, 2)"


# ---------------------------------------------------------------------------------- IoU

DOM = (-100.0, 100.0)


@pytest.mark.parametrize(
    ("pred", "truth", "expected"),
    [
        ([(2.0, 7.0)], (2.0, 7.0), 1.0),
        ([(0.0, 10.0)], (5.0, 15.0), 5.0 / 15.0),
        ([(0.0, 10.0)], (20.0, 30.0), 0.0),
        ([(0.0, 4.0), (6.0, 10.0)], (0.0, 10.0), 8.0 / 10.0),
        ([(0.0, 6.0), (4.0, 10.0)], (0.0, 10.0), 1.0),  # overlaps count once
        ([(-INF, -50.0)], (-100.0, -40.0), 50.0 / 60.0),  # infinite end clipped to -100
        ([(90.0, INF)], (95.0, 125.0), 5.0 / 10.0),  # both clipped to 100
        ([(150.0, 200.0)], (0.0, 10.0), 0.0),  # outside the domain: no interval
        ([(5.0, 5.0)], (0.0, 10.0), 0.0),  # a point: no interval
        ([], None, 1.0),  # clean function said to have none
        ([(150.0, 200.0)], None, 1.0),  # nothing left inside the domain
        ([], (0.0, 10.0), 0.0),
        ([(0.0, 10.0)], None, 0.0),
        ([(-INF, INF)], None, 1.0),  # covering the whole domain restates it
        ([(-128.0, 128.0)], (0.0, 10.0), 0.0),
        ([(-INF, INF)], (-100.0, 100.0), 1.0),
    ],
)
def test_interval_iou_hand_computed(pred, truth, expected):
    assert interval_iou(pred, truth, DOM) == pytest.approx(expected, abs=1e-12)


def test_interval_iou_bad_input():
    with pytest.raises(TypeError, match="pred must be a list"):
        interval_iou(None, None, DOM)
    with pytest.raises(ValueError, match=r"pred\[0\] must have low <= high"):
        interval_iou([(3.0, 1.0)], None, DOM)
    with pytest.raises(ValueError, match=r"pred\[1\] must hold two numbers"):
        interval_iou([(1.0, 2.0), (1.0, float("nan"))], None, DOM)
    with pytest.raises(ValueError, match="domain must be finite"):
        interval_iou([], None, (-INF, 1.0))
    with pytest.raises(ValueError, match="domain must be finite"):
        interval_iou([], None, (1.0, 1.0))


# ----------------------------------------------------------------- the true interval


@pytest.fixture(scope="module")
def numeric_rows():
    return numeric.generate(40, seed=0, progress=False)


def _row(kind, boundary, domain=(-100.0, 100.0)):
    return {
        "category": "numeric",
        "domain_low": domain[0],
        "domain_high": domain[1],
        "corruption_type": kind,
        "corruption_params": None if kind is None else json.dumps({"boundary": boundary, "mean": 0.0, "std": 0.1}),
    }


def test_corrupted_interval_by_type():
    assert corrupted_interval(_row("below", [-25.4])) == (-100.0, -25.4)
    assert corrupted_interval(_row("above", [55.4])) == (55.4, 100.0)
    assert corrupted_interval(_row("inside", [2.0, 7.0])) == (2.0, 7.0)
    assert corrupted_interval(_row("inside", [89.4, 108.6])) == (89.4, 100.0)  # clipped
    assert corrupted_interval(_row("below", [0.5], domain=(1.0, 100.0))) is None  # misses the domain
    assert corrupted_interval(_row(None, None)) is None
    # corruption_params as a dict works as well as JSON text
    row = _row("above", [3.0])
    row["corruption_params"] = json.loads(row["corruption_params"])
    assert corrupted_interval(row) == (3.0, 100.0)


def _clean_function(row):
    p = json.loads(row["params"])
    p.update(variant="clean", corruption=None)
    return numeric.make_function(p)


def test_corrupted_interval_matches_the_served_function(numeric_rows):
    """Inside the interval the served function gives N(mean, 0.1) noise; outside it gives
    the clean function, bit for bit. Checked on every corrupted generated row (all three types)."""
    corrupted = [r for r in numeric_rows if r["corruption_type"]]
    assert {r["corruption_type"] for r in corrupted} == {"below", "above", "inside"}
    for row in corrupted:
        lo, hi = corrupted_interval(row)
        xs = np.linspace(row["domain_low"], row["domain_high"], 4001)
        xs = xs[(np.abs(xs - lo) > 1e-9) & (np.abs(xs - hi) > 1e-9)]  # ends: open or closed by type
        served = numeric.make_function(row)(xs)
        clean = _clean_function(row)(xs)
        inside = (xs > lo) & (xs < hi)
        assert inside.any() and (~inside).any(), row["function_id"]
        np.testing.assert_array_equal(served[~inside], clean[~inside], err_msg=row["function_id"])
        mean = json.loads(row["corruption_params"])["mean"]
        assert np.all(np.abs(served[inside] - mean) < 1.0), row["function_id"]  # 10 sd of N(mean, 0.1)
        if inside.sum() > 50:
            assert np.std(served[inside]) == pytest.approx(0.1, rel=0.3), row["function_id"]
        # the noise is not the function: it differs from the clean values on most points
        assert np.mean(served[inside] != clean[inside]) > 0.9, row["function_id"]


def test_uncorrupted_rows_have_no_interval(numeric_rows):
    for row in numeric_rows:
        if row["corruption_type"] is None:
            assert corrupted_interval(row) is None, row["function_id"]


@pytest.mark.parametrize(
    ("change", "exc", "field"),
    [
        ({"domain_low": None}, ValueError, r"row\['domain_low'\]"),
        ({"domain_high": float("inf")}, ValueError, r"row\['domain_high'\]"),
        ({"domain_low": 200.0}, ValueError, r"row\['domain_low'\] \(200.0\) must be below"),
        ({"corruption_type": "left"}, ValueError, r"row\['corruption_type'\]"),
        ({"corruption_params": "{oops"}, ValueError, r"row\['corruption_params'\] is not JSON"),
        ({"corruption_params": None}, ValueError, r"row\['corruption_params'\]"),
        (
            {"corruption_params": '{"boundary": [1.0]}'},
            ValueError,
            r"row\['corruption_params'\] boundary must be a list of 2",
        ),
        ({"corruption_params": '{"boundary": [7.0, 2.0]}'}, ValueError, "increasing"),
        ({"category": "strings"}, ValueError, r"row\['category'\] is 'strings'"),
    ],
)
def test_corrupted_interval_errors_name_the_field(change, exc, field):
    row = {**_row("inside", [2.0, 7.0]), **change}
    with pytest.raises(exc, match=field):
        corrupted_interval(row)


def test_corrupted_interval_needs_a_dict():
    with pytest.raises(TypeError, match="row must be a dict"):
        corrupted_interval("numeric/f00001")


def test_domain_reference(numeric_rows):
    ref = domain_reference(numeric_rows[6])
    assert tuple(ref) == REFERENCE_COLUMNS
    assert corrupted_interval(ref) == corrupted_interval(numeric_rows[6])
    with pytest.raises(ValueError, match="missing column"):
        domain_reference({"domain_low": 0.0})


# -------------------------------------------------------------------------- score_domain


def test_score_domain_on_generated_rows(numeric_rows):
    """A perfect interpreter (it writes the true interval, or "none") scores 1; saying "none"
    everywhere scores the share of uncorrupted rows; garbage is unparseable."""
    perfect = []
    for row in numeric_rows:
        iv = corrupted_interval(row)
        perfect.append(
            "[DOMAIN]: no unexpected behaviour" if iv is None else f"[DOMAIN]: noise between {iv[0]!r} and {iv[1]!r}"
        )
    out = score_domain(perfect, numeric_rows)
    assert out["domain_iou"] == pytest.approx(1.0)
    assert out["parse_rate"] == 1.0 and set(out["status"]) == {"ok"}

    n_clean = sum(r["corruption_type"] is None for r in numeric_rows)
    out = score_domain(["[DOMAIN]: none"] * len(numeric_rows), numeric_rows)
    assert out["domain_iou"] == pytest.approx(n_clean / len(numeric_rows))

    out = score_domain(["[DOMAIN]: ???"] * len(numeric_rows), numeric_rows)
    assert out == {
        "domain_iou": 0.0,
        "domain_iou_ci": [0.0, 0.0],
        "n": len(numeric_rows),
        "parse_rate": 0.0,
        "iou": [0.0] * len(numeric_rows),
        "status": ["unparseable"] * len(numeric_rows),
    }


def test_score_domain_hand_computed():
    rows = [_row("below", [-50.0]), _row("inside", [2.0, 7.0]), _row(None, None), _row("above", [0.0])]
    preds = ["x < -40 is random", "[DOMAIN]: unexpected on (2, 12)", "[DOMAIN]: no idea", "[DOMAIN]: none"]
    out = score_domain(preds, rows)
    assert out["iou"] == pytest.approx([50 / 60, 5 / 10, 0.0, 0.0])
    assert out["status"] == ["ok", "ok", "unparseable", "ok"]
    assert out["parse_rate"] == 0.75
    assert out["domain_iou"] == pytest.approx((50 / 60 + 0.5) / 4)


@pytest.mark.parametrize(
    ("preds", "rows", "exc", "field"),
    [
        (["a", "b"], [_row(None, None)], ValueError, r"predictions \(2\) and rows \(1\)"),
        ([], [], ValueError, "predictions is empty"),
        (["a", 3], [_row(None, None)] * 2, TypeError, r"predictions\[1\]"),
        ("a", [_row(None, None)], TypeError, "predictions must be a list"),
        (["a"], [{**_row(None, None), "category": "neurons_relations"}], ValueError, r"rows\[0\]\['category'\]"),
        (
            ["a", "b"],
            [_row(None, None), {**_row(None, None), "domain_low": None}],
            ValueError,
            r"rows\[1\]\['domain_low'\]",
        ),
        (["a"], [{**_row("below", [1.0]), "corruption_params": "[]"}], ValueError, r"rows\[0\]\['corruption_params'\]"),
        (["a"], ["numeric/f00001"], TypeError, r"rows\[0\] must be a dict"),
    ],
)
def test_score_domain_errors_name_the_field(preds, rows, exc, field):
    with pytest.raises(exc, match=field):
        score_domain(preds, rows)


def test_score_domain_names_its_argument():
    with pytest.raises(ValueError, match=r"references\[0\]\['domain_low'\]"):
        score_domain(["a"], [{**_row(None, None), "domain_low": "x"}], argument="references")


# ----------------------------------------------------------------------------- relations


@pytest.fixture(scope="module")
def relation_rows():
    rows = generate_relations(seed=0)
    # a few rows: two atomic, three corrupted (FIND's order: 25 atomic, 25 + 25 corrupted)
    return [rows[0], rows[1], rows[25], rows[30], rows[60]]


def test_domain_unit_tests_pick_the_excepted_items(relation_rows):
    for row in relation_rows:
        picked = domain_unit_tests(row)
        if row["exception"] is None:
            assert picked == []
            continue
        # procedural corrupted relations: 2 of 10 tests come from the exception, in row order
        assert len(picked) == 2, row["name"]
        for t in picked:
            assert t["outputs"][t["correct"] - 1] == UNDEFINED
            assert t in [dict(u, correct=int(u["correct"])) for u in row["unit_tests"]]
        others = [u for u in row["unit_tests"] if u["outputs"][u["correct"] - 1] != UNDEFINED]
        assert len(others) == 8


def test_domain_unit_tests_reads_undefined_loosely_and_checks_fields(relation_rows):
    row = dict(relation_rows[2])
    t = dict(row["unit_tests"][0])
    outputs = list(t["outputs"])
    outputs[t["correct"] - 1] = ' "Undefined." '
    row["unit_tests"] = [dict(t, outputs=outputs)]
    assert len(domain_unit_tests(row)) == 1
    row["unit_tests"] = [dict(t, correct=7)]
    with pytest.raises(ValueError, match=r"row\['unit_tests'\]\[0\]"):
        domain_unit_tests(row)
    with pytest.raises(ValueError, match=r"row\['category'\]"):
        domain_unit_tests({"category": "numeric", "exception": "x"})
    with pytest.raises(TypeError, match="row must be a dict"):
        domain_unit_tests(None)
