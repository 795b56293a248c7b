"""FIND numeric functions: families, compositions, noise, corruption, the generated mix,
determinism, code/make_function agreement and the FIND v1 import."""

from __future__ import annotations

import collections
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from findbench import schema
from findbench.find import numeric as nm
from findbench.find.find_v1 import row_from_find_v1

#: FIND v1's numeric functions, under the anchor root (reached through the ``anchor`` fixture).
NUMERIC = "find-v1/numeric"


def atomic(family, variant="clean", domain=(-100.0, 100.0), **params):
    return {
        "structure": "atomic",
        "op": None,
        "terms": [{"family": family, "params": params}],
        "domain": list(domain),
        "variant": variant,
        "noise": None,
        "corruption": None,
        "mlp": None,
    }


def composed(op, t1, t2, variant="clean"):
    return {
        "structure": "composition",
        "op": op,
        "terms": [t1, t2],
        "domain": [-100.0, 100.0],
        "variant": variant,
        "noise": None,
        "corruption": None,
        "mlp": None,
    }


def run_code(code):
    ns = {}
    exec(compile(code, "<function_code>", "exec"), ns)
    return ns["function"]


@pytest.fixture(scope="module")
def rows1000():
    """One generate(1000) for the whole module (≈45 s on a busy 2-core machine)."""
    return nm.generate(1000, seed=0, progress=False)


# ---------------------------------------------------------------------------------------
# families on hand-checked values
# ---------------------------------------------------------------------------------------

HAND_CHECKED = [
    ("linear", {"slope": 2.0, "intercept": -1.0}, [(3.0, 5.0), (-2.0, -5.0)]),
    ("polynomial", {"coeffs": [1.0, 0.0, -2.0]}, [(3.0, 7.0), (-1.0, -1.0)]),  # x^2 - 2
    ("polynomial", {"coeffs": [2.0, -1.0, 0.0, 4.0]}, [(2.0, 16.0)]),  # 2x^3 - x^2 + 4
    ("absolute", {"scale": 26.8, "bias": -8.2}, [(-2.0, 45.4), (0.0, -8.2), (1.0, 18.6)]),
    ("root", {"scale": 2.0, "bias": 1.0, "n": 2}, [(9.0, 7.0), (0.0, 1.0)]),
    ("root", {"scale": 17.4, "bias": -9.8, "n": 1}, [(10.0, 164.2)]),
    ("logarithm", {"scale": 3.0, "bias": 1.0, "base": 10.0}, [(100.0, 7.0), (1.0, 1.0)]),
    ("step", {"scale": 2.0, "bias": 1.0, "value_at_zero": 5.0}, [(-1.0, 1.0), (0.0, 11.0), (3.0, 3.0)]),
    ("relu", {"scale": -20.7, "bias": -5.2, "leak": 0.7}, [(2.0, -46.6), (-3.0, 38.27), (0.0, -5.2)]),
    (
        "tanh",
        {"amplitude": 2.0, "period": 4.0, "shift": 1.0, "offset": 3.0},
        [(1.0, 3.0), (2.0, 2 * math.tanh(math.pi / 2) + 3)],
    ),
    ("sin", {"amplitude": 2.0, "period": 4.0, "shift": 1.0, "offset": 3.0}, [(2.0, 5.0), (1.0, 3.0), (0.0, 1.0)]),
    ("cos", {"amplitude": 2.0, "period": 4.0, "shift": 1.0, "offset": 3.0}, [(1.0, 5.0), (3.0, 1.0)]),
    ("constant", {"value": 54.0}, [(-7.0, 54.0), (99.0, 54.0)]),
    ("reciprocal", {"scale": 2.0}, [(0.25, 2.0), (-5.0, -0.1)]),
    (
        "gaussian",
        {"mean": 1.0, "std": 2.0},
        [(1.0, 1 / (2 * math.sqrt(2 * math.pi))), (3.0, math.exp(-0.5) / (2 * math.sqrt(2 * math.pi)))],
    ),
    ("rational", {"numerator": [1.0, 1.0], "denominator": [0.0, 0.0, 1.0]}, [(2.0, 0.75), (-1.0, 0.0)]),  # (1+x)/x^2
    ("rectangle", {"width": 4.0}, [(2.0, 1.0), (-2.0, 1.0), (2.01, 0.0), (0.0, 1.0)]),
    ("square_wave", {"period": 4.0, "shift": 0.0}, [(1.0, 1.0), (3.0, -1.0), (-1.0, -1.0), (-3.0, 1.0), (0.0, -1.0)]),
    ("ceil", {}, [(1.2, 2.0), (-1.2, -1.0)]),
    ("floor", {}, [(1.2, 1.0), (-1.2, -2.0)]),
]


@pytest.mark.parametrize("family,params,cases", HAND_CHECKED, ids=[f"{c[0]}-{i}" for i, c in enumerate(HAND_CHECKED)])
def test_family_hand_checked(family, params, cases):
    p = atomic(family, **params)
    f = nm.make_function(p)
    g = run_code(nm.make_code(p))
    xs = np.array([x for x, _ in cases])
    expected = np.array([y for _, y in cases])
    np.testing.assert_allclose(f(xs), expected, rtol=1e-12, atol=1e-12)
    for x, y in cases:
        out = f(x)
        assert isinstance(out, float)
        assert out == pytest.approx(y, rel=1e-12, abs=1e-12)
        assert g(x) == out


def test_every_family_is_covered_by_hand_checked_values():
    assert {c[0] for c in HAND_CHECKED} == set(nm.ATOMIC_FAMILIES) | set(nm.COMPOSABLE_FAMILIES)
    assert len(nm.ATOMIC_FAMILIES) == 16


def test_family_domains():
    assert nm.family_domain("root") == (0.0, 100.0)
    assert nm.family_domain("logarithm") == (1.0, 100.0)
    assert nm.family_domain("relu") == (-100.0, 100.0)
    with pytest.raises(ValueError, match="family"):
        nm.family_domain("tan")


# ---------------------------------------------------------------------------------------
# compositions, square waves, noise, corruption
# ---------------------------------------------------------------------------------------


def test_composition_sum_and_product():
    lin = {"family": "linear", "params": {"slope": 2.0, "intercept": 1.0}}
    step = {"family": "step", "params": {"scale": 3.0, "bias": -1.0, "value_at_zero": 0.5}}
    s = nm.make_function(composed("sum", lin, step))
    m = nm.make_function(composed("product", lin, step))
    # x = 2: lin 5, step 2 ; x = -1: lin -1, step -1 ; x = 0: lin 1, step 0.5
    np.testing.assert_array_equal(s(np.array([2.0, -1.0, 0.0])), [7.0, -2.0, 1.5])
    np.testing.assert_array_equal(m(np.array([2.0, -1.0, 0.0])), [10.0, 1.0, 0.5])
    row = nm.row_from_params(composed("product", lin, step), 3)
    assert row["name"] == "linear*step" and row["subcategory"] == "composition"
    assert nm.row_from_params(composed("sum", lin, step), 3)["name"] == "linear+step"
    assert json.loads(row["params"])["structure"] == "composition"


SQUARE = {"family": "square_wave", "params": {"period": 4.0, "shift": 0.0}}
ZERO = {"family": "constant", "params": {"value": 0.0}}
# x = -3 and x = 5 are where the reference writer's bug (square_wave -> sign(x)) differs
SQ_X = np.array([-3.0, -1.0, 1.0, 5.0, 7.0])
SQ_Y = np.array([1.0, -1.0, 1.0, 1.0, -1.0])


def test_square_wave_stays_square_in_composition_noise_and_corruption():
    comp = composed("sum", SQUARE, ZERO)
    np.testing.assert_array_equal(nm.make_function(comp)(SQ_X), SQ_Y)
    np.testing.assert_array_equal(run_code(nm.make_code(comp))(SQ_X), SQ_Y)
    noisy = {
        **atomic("square_wave", period=4.0, shift=0.0),
        "variant": "noise",
        "noise": {"type": "uniform", "seed": 3},
    }
    out = nm.make_function(noisy)(SQ_X)
    assert np.all(np.abs(out - SQ_Y) < 1)
    corr = {
        **atomic("square_wave", period=4.0, shift=0.0),
        "variant": "corruption",
        "corruption": {"type": "above", "boundary": [50.0], "mean": 0.0, "std": 0.1, "seed": 1},
    }
    np.testing.assert_array_equal(nm.make_function(corr)(SQ_X), SQ_Y)
    np.testing.assert_array_equal(run_code(nm.make_code(corr))(SQ_X), SQ_Y)


def test_generated_absolute_keeps_bias(rows1000):
    found = 0
    for row in rows1000:
        p = json.loads(row["params"])
        if row["name"] == "absolute" and p["variant"] in ("clean", "corruption"):
            bias = p["terms"][0]["params"]["bias"]
            c = p["corruption"]
            if c and (c["type"] == "below" and c["boundary"][0] >= 0 or c["type"] == "above" and c["boundary"][0] <= 0
                      or c["type"] == "inside" and c["boundary"][0] < 0 < c["boundary"][1]):  # fmt: skip
                continue
            assert nm.make_function(row)(0.0) == bias
            assert run_code(row["code"])(0.0) == bias
            found += 1
    assert found >= 5


@pytest.mark.parametrize(
    "kind,mean,std", [("normal", 0.0, 1.0), ("uniform", 0.0, 1 / math.sqrt(3)), ("poisson", 1.0, 1.0)]
)
def test_noise_statistics_and_seed_reproducibility(kind, mean, std):
    p = {**atomic("constant", value=5.0), "variant": "noise", "noise": {"type": kind, "seed": 11}}
    x = np.zeros(20000)
    f = nm.make_function(p)
    noise = f(x) - 5.0
    assert abs(noise.mean() - mean) < 0.03
    assert abs(noise.std() - std) < 0.03
    if kind == "uniform":
        assert noise.min() >= -1 and noise.max() <= 1
    if kind == "poisson":
        assert np.all(noise == np.round(noise)) and noise.min() >= 0
    # same seed, same call sequence -> same outputs; later calls draw new noise
    g = nm.make_function(p)
    np.testing.assert_array_equal(g(x), noise + 5.0)
    assert not np.array_equal(g(x), noise + 5.0)
    code_f = run_code(nm.make_code(p))
    np.testing.assert_array_equal(code_f(x), noise + 5.0)
    # a different seed gives different noise
    other = nm.make_function({**p, "noise": {"type": kind, "seed": 12}})
    assert not np.array_equal(other(x), noise + 5.0)


def test_noise_key_draws_per_input_value():
    """With a noise key, an input's output does not depend on what was asked before (the
    interpreter's replies); another key or another value draws other noise."""
    p = {**atomic("linear", slope=2.0, intercept=0.0), "variant": "noise", "noise": {"type": "normal", "seed": 3}}
    row = nm.row_from_params(p, 4)
    f = nm.make_function(row, noise_key=0)
    first = f(1.5)
    assert [f(2.0), f(1.5), f(1.5)][1:] == [first, first]
    np.testing.assert_array_equal(f(np.array([2.0, 1.5])), [f(2.0), first])
    assert nm.make_function(row, noise_key=0)(1.5) == first != nm.make_function(row, noise_key=1)(1.5)


@pytest.mark.parametrize(
    "kind,boundary,replaced",
    [
        ("below", [10.0], lambda x: x <= 10.0),
        ("above", [-20.5], lambda x: x >= -20.5),
        ("inside", [3.0, 15.5], lambda x: (x > 3.0) & (x < 15.5)),
    ],
)
def test_corruption_replaces_exactly_the_stated_subdomain(kind, boundary, replaced):
    lin = atomic("linear", slope=1.0, intercept=1000.0)  # values 900..1100, far from the mean 0
    p = {
        **lin,
        "variant": "corruption",
        "corruption": {"type": kind, "boundary": boundary, "mean": 0.0, "std": 0.1, "seed": 5},
    }
    x = np.concatenate([np.linspace(-100, 100, 4001), np.array(boundary)])
    y = nm.make_function(p)(x)
    clean = x + 1000.0
    mask = replaced(x)
    assert mask.any() and (~mask).any()
    np.testing.assert_array_equal(y[~mask], clean[~mask])
    assert np.all(np.abs(y[mask]) < 1.0)
    assert abs(y[mask].std() - 0.1) < 0.02
    np.testing.assert_array_equal(run_code(nm.make_code(p))(x), nm.make_function(p)(x))
    row = nm.row_from_params(p, 7)
    assert row["subcategory"] == "corruption" and row["corruption_type"] == kind
    cp = json.loads(row["corruption_params"])
    assert cp == {"boundary": boundary, "mean": 0.0, "std": 0.1}
    for b in boundary:
        assert nm._num(b) in row["description"]


# ---------------------------------------------------------------------------------------
# the generated dataset
# ---------------------------------------------------------------------------------------


def test_generate_mix_matches_find_release(rows1000):
    rows = rows1000
    assert [r["function_id"] for r in rows] == [f"numeric/f{i:05d}" for i in range(1000)]
    for r in rows:
        schema.check_row(r)
        assert r["category"] == "numeric" and r["source"] == "procedural" and r["unit_tests"] == []
    params = [json.loads(r["params"]) for r in rows]
    assert all(r["subcategory"] == "mlp" for r in rows[:150])
    assert not any(r["subcategory"] == "mlp" for r in rows[150:])
    assert sum(p["structure"] == "atomic" for p in params) == 850
    sub = collections.Counter(r["subcategory"] for r in rows)
    assert sub["noise"] == 176 and sub["corruption"] == 191 and sub["mlp"] == 150
    assert sub["atomic"] + sub["composition"] == 483
    noise = collections.Counter(r["noise_type"] for r in rows if r["noise_type"])
    assert set(noise) == set(nm.NOISE_TYPES)
    assert (
        0.3 < noise["uniform"] / 176 < 0.6 and 0.2 < noise["normal"] / 176 < 0.5 and 0.1 < noise["poisson"] / 176 < 0.35
    )
    corr = collections.Counter(r["corruption_type"] for r in rows if r["corruption_type"])
    assert 0.38 < corr["inside"] / 191 < 0.62 and corr["below"] > 25 and corr["above"] > 25
    atomic_names = collections.Counter(p["terms"][0]["family"] for p in params if p["structure"] == "atomic")
    assert set(atomic_names) == set(nm.ATOMIC_FAMILIES)
    assert min(atomic_names.values()) > 25
    for p, r in zip(params, rows):
        if p["structure"] == "composition":
            assert p["op"] in nm.OPS and all(t["family"] in nm.COMPOSABLE_FAMILIES for t in p["terms"])
            assert r["name"].count("+") + r["name"].count("*") == 1
            assert (r["domain_low"], r["domain_high"]) == (-100.0, 100.0)
        else:
            assert (r["domain_low"], r["domain_high"]) == nm.family_domain(r["name"])
        if p["variant"] == "corruption":
            b = p["corruption"]["boundary"]
            assert -100 <= b[0] <= 100 and max(r["domain_low"], -100) <= b[0]
            if len(b) == 2:
                assert 5 <= b[1] - b[0] <= 25


def test_generated_mlps_fit_well(rows1000):
    for r in rows1000[:150]:
        p = json.loads(r["params"])
        assert len(p["mlp"]["w1"]) == 64 and p["mlp"]["train_points"] == 10_000
        x = np.linspace(r["domain_low"], r["domain_high"], 10_000)
        served = nm.make_function(r)(x)
        clean = nm.make_function({**p, "variant": "clean", "mlp": None})(x)
        mse = float(np.mean((served - clean) ** 2))
        assert mse == pytest.approx(p["mlp"]["mse"], rel=1e-4, abs=1e-12)
        assert mse <= clean.var() + 1e-12  # never worse than predicting the mean
    rel = [
        json.loads(r["params"])["mlp"]["mse"]
        / max(
            np.var(
                nm.make_function({**json.loads(r["params"]), "variant": "clean", "mlp": None})(
                    np.linspace(r["domain_low"], r["domain_high"], 10_000)
                )
            ),
            1e-300,
        )
        for r in rows1000[:150]
    ]
    assert np.median(rel) < 1e-3


def test_code_and_make_function_agree_for_every_row(rows1000):
    x = np.linspace(-110, 110, 441)
    seen = set()
    for r in rows1000:
        f = nm.make_function(r)
        g = run_code(r["code"])
        for _ in range(2):  # noisy rows: the same seeded call sequence
            np.testing.assert_array_equal(f(x), g(x), err_msg=r["function_id"])
            a, b = f(12.5), g(12.5)
            assert isinstance(a, float) and (a == b or (math.isnan(a) and math.isnan(b))), r["function_id"]
        seen.add(r["subcategory"])
    assert seen == {"atomic", "composition", "noise", "corruption", "mlp"}


def test_code_runs_alone(tmp_path, rows1000):
    picks = [
        rows1000[0],
        next(r for r in rows1000 if r["subcategory"] == "noise"),
        next(r for r in rows1000 if r["subcategory"] == "corruption"),
    ]
    for r in picks:
        path = tmp_path / "function_code.py"
        path.write_text(r["code"] + "\nprint(repr(function(3.5)))\nprint(repr(function([1.0, 2.0]).tolist()))\n")
        out = subprocess.run(
            [sys.executable, str(path)], capture_output=True, text=True, timeout=60, check=True
        ).stdout.split("\n")
        f = nm.make_function(r)
        assert float(out[0]) == f(3.5)
        assert json.loads(out[1]) == f([1.0, 2.0]).tolist()


def test_descriptions_state_parameters_noise_and_corruption(rows1000):
    for r in rows1000:
        p = json.loads(r["params"])
        d = r["description"]
        assert "f(x) =" in d and f"[{nm._num(r['domain_low'])}, {nm._num(r['domain_high'])}]" in d
        for t in p["terms"]:
            for k, v in t["params"].items():
                vals = v if isinstance(v, list) else [v]
                for val in vals:
                    if k != "n" and abs(val) not in (0, 1):  # 0 and 1 coefficients are elided
                        assert nm._num(abs(val)) in d, (r["function_id"], k, val, d)
        if r["noise_type"]:
            assert {
                "normal": "normal distribution",
                "uniform": "uniform distribution on [-1, 1]",
                "poisson": "Poisson",
            }[r["noise_type"]] in d
        if r["corruption_type"]:
            assert "corrupted subdomain" in d
        if r["subcategory"] == "mlp":
            assert "MLP" in d
        assert r["test_inputs"] and all(r["domain_low"] <= float(v) <= r["domain_high"] for v in r["test_inputs"])


def test_generate_is_deterministic_and_seed_dependent():
    a = nm.generate(30, seed=7, progress=False)
    b = nm.generate(30, seed=7, progress=False)
    assert a == b
    c = nm.generate(30, seed=8, progress=False)
    assert [r["params"] for r in a] != [r["params"] for r in c]
    assert sum(r["subcategory"] == "mlp" for r in a) == 5  # round(0.15 * 30) ~ 4.5 -> 5
    assert all(r["unit_tests_near"] == [] for r in a)  # numeric has no unit tests, near-miss or other


# ---------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------


def test_bad_input_names_the_field():
    with pytest.raises(ValueError, match="seed"):
        nm.generate(3, seed=-1, progress=False)
    with pytest.raises(ValueError, match="family"):
        nm.make_function(atomic("tan", amplitude=1.0))
    with pytest.raises(ValueError, match=r"params\.terms\[0\]\.params of relu"):
        nm.make_function(atomic("relu", scale=1.0, bias=0.0))
    with pytest.raises(ValueError, match="leak"):
        nm.make_function(atomic("relu", scale=1.0, bias=0.0, leak="x"))
    with pytest.raises(ValueError, match="period"):
        nm.make_function(atomic("sin", amplitude=1.0, period=0.0, shift=0.0, offset=0.0))
    with pytest.raises(ValueError, match="params.variant"):
        nm.make_function(atomic("linear", variant="weird", slope=1.0, intercept=0.0))
    with pytest.raises(ValueError, match="params.noise"):
        nm.make_function(atomic("linear", variant="noise", slope=1.0, intercept=0.0))
    bad_corr = {**atomic("linear", slope=1.0, intercept=0.0), "variant": "corruption",
                "corruption": {"type": "inside", "boundary": [3.0], "mean": 0.0, "std": 0.1, "seed": 1}}  # fmt: skip
    with pytest.raises(ValueError, match="params.corruption.boundary"):
        nm.make_function(bad_corr)
    with pytest.raises(ValueError, match="params.op"):
        nm.make_function(composed("minus", SQUARE, ZERO))
    with pytest.raises(ValueError, match="params is not valid JSON"):
        nm.make_function("{not json")
    with pytest.raises(TypeError, match="row_or_params"):
        nm.make_function(42)
    with pytest.raises(ValueError, match="variant"):
        row_from_find_v1(
            {"dir": "f00001", "name": "relu((1, 2, 0.5))", "params": [1, 2, 0.5], "domain": [-100, 100]}, "x.py"
        )
    with pytest.raises(ValueError, match=r"record\['name'\]"):
        row_from_find_v1(
            {"dir": "f00001", "name": "tan((1, 2))", "params": [1, 2], "domain": [-100, 100]}, "function_code.py"
        )
    with pytest.raises(ValueError, match=r"record\['params'\]"):
        row_from_find_v1(
            {"dir": "f00001", "name": "relu((1, 2))", "params": [1, 2], "domain": [-100, 100]}, "function_code.py"
        )
    with pytest.raises(ValueError, match=r"record\['dir'\]"):
        row_from_find_v1(
            {"dir": 3, "name": "relu((1, 2, 0.5))", "params": [1, 2, 0.5], "domain": [-100, 100]}, "function_code.py"
        )


# ---------------------------------------------------------------------------------------
# FIND v1 import
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def find_v1(anchor):
    """``(data.json records, func_name_dict.json, release folder)`` of the numeric anchor."""
    data = json.loads(anchor(f"{NUMERIC}/data.json").read_text())
    served = json.loads(anchor(f"{NUMERIC}/func_name_dict.json").read_text())
    return data, served, anchor(NUMERIC)


def test_row_from_find_v1_all_records(find_v1):
    import torch

    data, served, root = find_v1
    rows = []
    for rec in data:
        sd_path = root / rec["dir"] / "mlp_approx_model.pt"
        sd = torch.load(sd_path, map_location="cpu") if sd_path.exists() else None
        rows.append(row_from_find_v1(rec, served[rec["dir"]], sd))
    x = np.linspace(-100, 100, 801)
    for rec, row in zip(data, rows):
        schema.check_row(row)
        assert row["source"] == "find-v1" and row["function_id"] == f"numeric/{rec['dir']}"
        p = json.loads(row["params"])
        if p.get("mlp_weights_missing"):
            with pytest.raises(nm.MissingMLPWeightsError, match="not public"):
                nm.make_function(row)
            with pytest.raises(RuntimeError, match="not public"):
                run_code(row["code"])(1.0)
            continue
        np.testing.assert_array_equal(nm.make_function(row)(x), run_code(row["code"])(x), err_msg=row["function_id"])
    sub = collections.Counter(r["subcategory"] for r in rows)
    assert sub["mlp"] == 150 and sub["noise"] == 176 and sub["corruption"] == 191
    assert sub["atomic"] + sub["composition"] == 483
    assert sum(json.loads(r["params"]).get("mlp_weights_missing", False) for r in rows) == 145
    # the corruption boundary and "std" (the mean of f) of the release carry over
    r1 = rows[1]
    if r1["subcategory"] == "corruption":
        assert json.loads(r1["corruption_params"])["boundary"] == data[1]["corruption_params"]["boundary"]


def test_find_v1_public_mlps_reproduce_their_recorded_error(find_v1):
    """The 5 public MLPs against our family semantics reproduce data.json's approx_mse_error."""
    import torch

    data, served, root = find_v1
    for rec in data[:5]:
        sd = torch.load(root / rec["dir"] / "mlp_approx_model.pt", map_location="cpu")
        row = row_from_find_v1(rec, served[rec["dir"]], sd)
        p = json.loads(row["params"])
        x = np.linspace(*p["domain"], 10_000)
        mse = np.mean((nm.make_function(row)(x) - nm.make_function({**p, "variant": "clean", "mlp": None})(x)) ** 2)
        assert mse == pytest.approx(rec["approx_mse_error"], rel=2e-3)


def test_find_v1_release_quirks():
    rec_abs = {"dir": "f00200", "name": "absolute((26.8, -8.2))", "params": [26.8, -8.2], "domain": [-100, 100],
               "noise_type": "normal", "corruption_type": "interval_smaller",
               "corruption_params": {"std": 1.0, "boundary": [31.1]}}  # fmt: skip
    quirky = row_from_find_v1(rec_abs, "function_code.py")
    faithful = row_from_find_v1(rec_abs, "function_code.py", release_quirks=False)
    assert nm.make_function(quirky)(0.0) == 0.0 and nm.make_function(faithful)(0.0) == -8.2
    assert "bias -8.2" in quirky["description"] and "dropped" in quirky["description"]
    rec_sq = {"dir": "f00201", "name": "square_wave;constant;sum_two((4.0, 0.0), 0)", "params": [[4.0, 0.0], 0],
              "domain": [-100, 100], "noise_type": "normal", "corruption_type": "interval_smaller",
              "corruption_params": {"std": 1.0, "boundary": [31.1]}}  # fmt: skip
    q = row_from_find_v1(rec_sq, "function_code.py")
    np.testing.assert_array_equal(nm.make_function(q)(SQ_X), np.where(SQ_X > 0, 1.0, -1.0))
    ok = row_from_find_v1(rec_sq, "function_code.py", release_quirks=False)
    np.testing.assert_array_equal(nm.make_function(ok)(SQ_X), SQ_Y)
    assert q["name"] == "step+constant" and json.loads(q["params"])["find_v1"]["name"].startswith("square_wave;")
    c = row_from_find_v1(rec_abs, "corrupted_function_code.py", index=9)
    assert c["function_id"] == "numeric/f00009" and c["corruption_type"] == "below"
    assert json.loads(c["corruption_params"]) == {"boundary": [31.1], "mean": 1.0, "std": 0.1}


@pytest.mark.parametrize(
    "terms, op, why",
    [
        (
            [{"family": "tanh", "params": {"amplitude": 0.0, "period": 1.5, "shift": 4.2, "offset": -16.0}}],
            None,
            "constant on the grid",
        ),
        ([{"family": "linear", "params": {"slope": 0.0, "intercept": 3.0}}], None, "constant on the grid"),
        (
            [{"family": "cos", "params": {"amplitude": 3.0, "period": 0.3, "shift": 1.0, "offset": 0.0}}],
            None,
            "aliases",
        ),
        ([{"family": "square_wave", "params": {"period": 1.0, "shift": 0.5}}], None, "aliases"),
        (
            [
                {"family": "constant", "params": {"value": 0.0}},
                {"family": "linear", "params": {"slope": 2.0, "intercept": 1.0}},
            ],
            "product",
            "product of its terms is constant",
        ),
    ],
)
def test_degenerate_draws_are_named(terms, op, why):
    from findbench.find.numeric import degenerate

    params = {"structure": "atomic" if op is None else "composition", "op": op, "terms": terms}
    assert why in degenerate(params)


def test_honest_draws_are_not_degenerate():
    from findbench.find.numeric import degenerate

    for terms in (
        [{"family": "sin", "params": {"amplitude": 2.9, "period": 6.1, "shift": 2.0, "offset": -1.4}}],
        [{"family": "constant", "params": {"value": -16.0}}],
    ):
        assert degenerate({"structure": "atomic", "op": None, "terms": terms}) is None


def test_generated_rows_are_never_degenerate():
    """The seed-0 build had 54 such rows (46 aliasing waves, 2 zero-amplitude tanh, 6 constant
    sums or products, f00042, f00304 and f00353 among them); they are now redrawn."""
    from findbench.find.numeric import degenerate

    rows = nm.generate(400, seed=0, progress=False)
    assert all(degenerate(json.loads(r["params"])) is None for r in rows)
    f42 = nm.make_function(rows[42])
    assert len({float(v) for v in f42(np.arange(-5.5, 6.0, 1.0))}) > 1
