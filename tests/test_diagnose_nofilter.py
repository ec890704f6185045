"""The numpy / scipy.special stand-ins that keep `pgrpo diagnose` off scipy.stats and
scipy.signal give what those would: the AR(1) null filter bit for bit, average ranks exactly,
the hypergeometric stay probability to float rounding (tests/test_cli_fast_imports.py checks
that the diagnosis imports neither)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.signal import lfilter
from scipy.stats import hypergeom, rankdata

from pgrpo.diagnose.curvestats import average_ranks
from pgrpo.diagnose.nullmodel import NullModel, ar1_filter, null_curves
from pgrpo.diagnose.progress import hypergeom_none


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 40),
    n=st.integers(1, 300),
    rho=st.floats(-0.99, 0.99),
    seed=st.integers(0, 2**31 - 1),
)
def test_the_ar1_filter_is_lfilter_bit_for_bit(rows, n, rho, seed):
    e = np.random.default_rng(seed).standard_normal((rows, n), dtype=np.float32)
    want = lfilter([1.0], [1.0, -rho], e, axis=1)
    got = ar1_filter(e, rho)
    assert got.dtype == want.dtype == np.float64
    assert np.array_equal(got, want)


def test_null_curves_are_the_ones_lfilter_gave():
    """The seeded AR(1) null curves are unchanged by the stand-in (every p-value with them)."""
    for rho in (0.0, 0.3, 0.9):
        null = NullModel("ar1", rho)
        got = null_curves(120, null, 50, seed=7, chunk=1)
        key = [7, 120, round(rho * 100), null.n_rollouts, round(null.p * 10000), 1]
        e = np.random.default_rng(key).standard_normal((50, 170), dtype=np.float32)
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
     (1000, 1, 1000), (10, 3, 8), (64, 1, 1), (256 * 61, 2000, 256 * 7)],
)  # fmt: skip
def test_the_stay_probability_is_the_hypergeometric_pmf_at_zero(total, successes, draws):
    want = float(hypergeom(total, successes, draws).pmf(0))
    assert hypergeom_none(total, successes, draws) == pytest.approx(want, rel=1e-9, abs=1e-300)
