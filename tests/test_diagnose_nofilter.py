"""The numpy / scipy.special stand-ins that keep `pgrpo diagnose` off scipy.stats and
scipy.signal give what those would: the AR(1) null filter bit for bit, average ranks exactly,
the hypergeometric stay probability to float rounding (tests/test_cli_fast_imports.py checks
that the diagnosis imports neither)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.signal import lfilter
from scipy.stats import hypergeom, rankdata

from pgrpo.diagnose.curvestats import average_ranks
from pgrpo.diagnose.floorstats import hypergeom_none
from pgrpo.diagnose.nullmodel import LOOP_MIN_ROWS, NullModel, ar1_filter, null_curves


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(LOOP_MIN_ROWS, LOOP_MIN_ROWS + 40),
    n=st.integers(1, 200),
    rho=st.floats(-0.99, 0.99),
    seed=st.integers(0, 2**31 - 1),
)
def test_the_ar1_filter_loop_is_lfilter_bit_for_bit(rows, n, rho, seed):
    e = np.random.default_rng(seed).standard_normal((rows, n), dtype=np.float32)
    want = lfilter([1.0], [1.0, -rho], e, axis=1)
    got = ar1_filter(e, rho)
    assert got.dtype == want.dtype == np.float64
    assert np.array_equal(got, want)


def test_few_long_rows_go_to_lfilter_and_give_the_same_curves():
    """Below LOOP_MIN_ROWS rows (null curves of > 10,000 points) lfilter runs (the loop's cost
    per step is not shared there); the curves do not depend on which path ran."""
    e = np.random.default_rng(3).standard_normal((LOOP_MIN_ROWS + 1, 300), dtype=np.float32)
    both = ar1_filter(e, 0.7)
    few = ar1_filter(e[:3], 0.7)
    assert np.array_equal(few, both[:3])
    assert np.array_equal(few, lfilter([1.0], [1.0, -0.7], e[:3], axis=1))


def test_null_curves_are_the_ones_lfilter_gave():
    """The seeded AR(1) null curves are unchanged by the stand-in (every p-value with them)."""
    for rho in (0.0, 0.3, 0.9):
        null = NullModel("ar1", rho)
        got = null_curves(120, null, 150, seed=7, chunk=1)  # >= LOOP_MIN_ROWS: the loop
        key = [7, 120, round(rho * 100), null.n_rollouts, round(null.p * 10000), 1]
        e = np.random.default_rng(key).standard_normal((150, 170), dtype=np.float32)
        want = lfilter([1.0], [1.0, -rho], e, axis=1)[:, 50:].astype(np.float32)
        assert np.array_equal(got, want)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(0, 6), min_size=1, max_size=60), scale=st.integers(1, 4))
def test_average_ranks_are_rankdata(values, scale):
    x = np.asarray(values, dtype=float) / scale  # ties, as discrete rewards give
    assert np.array_equal(average_ranks(x), rankdata(x))


@pytest.mark.parametrize(
    ("total", "successes", "draws"),
    [(10240, 300, 1280), (1920, 10, 192), (400, 0, 40), (400, 390, 40), (1000, 1, 999),
     (1000, 1, 1000), (10, 3, 8), (64, 1, 1), (256 * 61, 2000, 256 * 7),
     (3_200_000, 100, 80_000), (10_000_000, 50, 300_000), (3_200_000, 1000, 80_000)],
)  # fmt: skip
def test_the_stay_probability_is_the_exact_hypergeometric_pmf_at_zero(total, successes, draws):
    """Against the exact ratio (rational arithmetic), also at the totals of a 200,000-step log x
    16 rollouts, where a log-gamma difference lost 6e-9 relative; scipy's pmf agrees to 1e-8."""
    m, a = sorted((successes, draws))
    exact = Fraction(0) if draws > total - successes else Fraction(1)
    for k in range(m if exact else 0):
        exact *= Fraction(total - k - a, total - k)
    got = hypergeom_none(total, successes, draws)
    assert got == pytest.approx(float(exact), rel=1e-12, abs=1e-300)
    assert got == pytest.approx(float(hypergeom(total, successes, draws).pmf(0)), rel=1e-8)
