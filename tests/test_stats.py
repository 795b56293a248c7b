"""findbench.stats: the seeded percentile bootstrap, the paired comparison and the cell format."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from findbench import stats

KNOWN = [0.0, 0.1, 0.3, 0.5, 0.5, 0.6, 0.7, 0.9, 1.0, 1.0, 0.2, 0.8]


# ------------------------------------------------------------------------ bootstrap_ci


@pytest.mark.parametrize("value", [0.0, 1.0, 0.1, 1 / 3])
def test_all_equal_gives_a_zero_width_interval(value):
    low, high = stats.bootstrap_ci([value] * 7)
    assert low == high == pytest.approx(value)
    assert stats.mean_ci([value] * 7)["ci"] == [low, high]


def test_a_known_vector_gives_an_interval_around_its_mean():
    low, high = stats.bootstrap_ci(KNOWN)
    mean = float(np.mean(KNOWN))
    assert low < mean < high
    assert 0.0 <= low and high <= 1.0
    # a normal-theory interval of the mean, as a rough check of the width
    se = float(np.std(KNOWN, ddof=1) / math.sqrt(len(KNOWN)))
    assert high - low == pytest.approx(2 * 1.96 * se, rel=0.25)


def test_the_seed_fixes_the_interval():
    assert stats.bootstrap_ci(KNOWN, seed=3) == stats.bootstrap_ci(KNOWN, seed=3)
    assert stats.bootstrap_ci(KNOWN) == stats.bootstrap_ci(KNOWN, seed=stats.DEFAULT_SEED)
    # another seed draws other resamples (the interval may, and here does, move)
    assert stats.bootstrap_ci(KNOWN, seed=1) != stats.bootstrap_ci(KNOWN, seed=2)


def test_resamples_are_drawn_in_chunks_without_changing_the_result():
    """A large vector is resampled in chunks; the chunk size is fixed by n and n_resamples, so
    the interval stays reproducible."""
    values = np.random.default_rng(5).random(3000)
    first = stats.bootstrap_ci(values, n_resamples=2000)
    assert first == stats.bootstrap_ci(values, n_resamples=2000)
    assert first[0] < values.mean() < first[1]


def test_confidence_widens_the_interval():
    l90, h90 = stats.bootstrap_ci(KNOWN, confidence=0.9)
    l99, h99 = stats.bootstrap_ci(KNOWN, confidence=0.99)
    assert l99 <= l90 and h90 <= h99


def test_a_custom_statistic_sees_whole_units():
    """Units with several numbers (e.g. (fires, in denotation) per item) are resampled as rows."""
    rows = np.array([[1, 1], [0, 1], [1, 0], [1, 1], [0, 0]] * 4, dtype=float)
    seen = []

    def share_agreeing(sample):
        seen.append(sample.shape)
        return (sample[..., 0] == sample[..., 1]).mean(axis=1)

    low, high = stats.bootstrap_ci(rows, statistic=share_agreeing, n_resamples=500)
    assert low < 0.6 < high
    assert all(shape[1:] == (20, 2) for shape in seen)


def test_no_units_and_bad_input():
    assert all(math.isnan(x) for x in stats.bootstrap_ci([]))
    summary = stats.mean_ci([])
    assert summary["n"] == 0 and math.isnan(summary["mean"])
    with pytest.raises(ValueError, match=r"values\[1\] is not finite"):
        stats.bootstrap_ci([0.5, math.nan])
    with pytest.raises(ValueError, match=r"values\[0\] is not finite"):
        stats.bootstrap_ci([math.inf])
    with pytest.raises(TypeError, match="values"):
        stats.bootstrap_ci("0.5")
    with pytest.raises(ValueError, match="n_resamples"):
        stats.bootstrap_ci(KNOWN, n_resamples=0)
    with pytest.raises(ValueError, match="confidence"):
        stats.bootstrap_ci(KNOWN, confidence=95)


def test_mean_ci_is_plain_json():
    summary = stats.mean_ci([True, False, True, True])
    assert summary["mean"] == 0.75 and summary["n"] == 4
    assert json.loads(json.dumps(summary)) == summary
    assert all(type(x) is float for x in summary["ci"])


# -------------------------------------------------------------------- paired_bootstrap


def _runs(seed: int, n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    base = rng.random(n)
    return base, np.clip(base + rng.normal(0.0, 0.05, n), 0, 1)


def test_paired_bootstrap_finds_a_known_difference():
    a, _ = _runs(0)
    better = np.clip(a + 0.3, 0, 1)
    out = stats.paired_bootstrap(better, a)
    assert out.differs and out.p_value < 0.01
    assert out.diff == pytest.approx(out.mean_a - out.mean_b)
    assert out.diff_ci[0] > 0.1 and out.n == len(a)


def test_paired_bootstrap_does_not_invent_a_difference():
    a, b = _runs(1)
    out = stats.paired_bootstrap(a, b)
    assert out.diff_ci[0] < 0 < out.diff_ci[1]
    assert not out.differs and out.p_value > 0.05


def test_pairing_detects_what_unpaired_intervals_miss():
    """A small, consistent gain on very different units: the two means' own intervals overlap,
    the paired difference is established."""
    base = np.linspace(0.0, 0.8, 30)
    out = stats.paired_bootstrap(base + 0.05, base)
    la, ha = stats.bootstrap_ci(base + 0.05)
    lb, hb = stats.bootstrap_ci(base)
    assert la < hb  # overlapping
    assert out.differs and out.diff_ci[0] == pytest.approx(0.05)


def test_identical_runs():
    out = stats.paired_bootstrap(KNOWN, KNOWN)
    assert out.diff == 0 and out.diff_ci == (0.0, 0.0) and out.p_value == 1.0 and not out.differs


def test_paired_bootstrap_is_seeded_and_checks_its_input():
    a, b = _runs(2)
    assert stats.paired_bootstrap(a, b, seed=4) == stats.paired_bootstrap(a, b, seed=4)
    with pytest.raises(ValueError, match="same units"):
        stats.paired_bootstrap([1.0, 0.0], [1.0])
    assert stats.paired_bootstrap([], []).n == 0


# ------------------------------------------------------------------------- format_ci


def test_format_ci_cells():
    assert stats.format_ci(0.8333, [0.62, 0.971], 6) == "0.83 [0.62, 0.97] (n=6)†"
    assert stats.format_ci(0.8333, (0.62, 0.971), 12) == "0.83 [0.62, 0.97] (n=12)"
    assert stats.format_ci(0.5, None, 12) == "0.50 (n=12)"
    assert stats.format_ci(0.5, [math.nan, math.nan], 12) == "0.50 (n=12)"
    assert stats.format_ci(None, None, 0) == "– (n=0)†"
    assert stats.format_ci(math.nan, [0.1, 0.2], 3, mark="*") == "– (n=3)*"
    assert stats.format_ci(12.345, [10.0, 14.5], 40, digits=1) == "12.3 [10.0, 14.5] (n=40)"
    assert stats.format_ci(**stats.mean_ci([1.0] * 10)) == "1.00 [1.00, 1.00] (n=10)"
    assert stats.is_small(9) and not stats.is_small(10)
    assert stats.SMALL_N_LEGEND.startswith(stats.SMALL_N_MARK) and "n < 10" in stats.SMALL_N_LEGEND
