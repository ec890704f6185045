"""Fits and forecasts do not depend on the units of the step axis or of the reward (#11.7): the
fit runs in internal units (standardised reward, median step spacing) and reports in the user's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.dynamics import fit_curve, forecast, trajectory


def _curve(seed: int, n: int = 120):
    t = np.arange(1.0, n + 1)
    y = trajectory(t, 0.15, 0.8, 12.0, 1.0, 0.04)
    return t, y + np.random.default_rng(seed).normal(0.0, 0.02, n)


@settings(max_examples=12, deadline=None)
@given(
    log_a=st.floats(-4, 4),
    b=st.floats(-1e4, 1e4),
    log_c=st.floats(-30, 30),
    sign=st.sampled_from([-1.0, 1.0]),
    d=st.floats(-1e3, 1e3),
    seed=st.integers(0, 50),
    model=st.sampled_from(["rom", "exponential", "logistic"]),
)
def test_affine_rescaling_of_step_and_reward_leaves_the_fit_and_forecast_unchanged(
    log_a, b, log_c, sign, d, seed, model
):
    t, y = _curve(seed)
    a, c = 10.0**log_a, sign * 10.0**log_c
    d = d * abs(c)  # a shift on the reward's own scale (else it swamps the float precision)
    ref = fit_curve(t, y, model)
    res = fit_curve(a * t + b, c * y + d, model)
    assert res.r2 == pytest.approx(ref.r2, abs=1e-6)
    np.testing.assert_allclose((res.fitted - d) / c, ref.fitted, rtol=1e-5, atol=1e-6)
    for name in ("R_inf", "R_0"):
        se, se_ref = res.params[name].stderr, ref.params[name].stderr
        assert se is not None and se_ref is not None
        assert se / abs(c) == pytest.approx(se_ref, rel=1e-3, abs=1e-9)
    fc_ref = forecast(t, y, 0.5, model=model)
    fc = forecast(a * t + b, c * y + d, 0.5, model=model)
    scale = np.std(y)
    assert (fc.predicted_mean - d) / c == pytest.approx(fc_ref.predicted_mean, abs=1e-5 * scale)
    lo, hi = sorted((np.array(fc.mean_band) - d) / c)
    assert lo == pytest.approx(fc_ref.mean_band[0], abs=1e-5 * scale)
    assert hi == pytest.approx(fc_ref.mean_band[1], abs=1e-5 * scale)


def test_the_issue_examples_step_over_1000_and_rewards_times_1e30():
    t, y = _curve(0, 300)
    ref = fit_curve(t, y)
    assert ref.r2 > 0.97
    assert fit_curve(t / 1000.0, y).r2 == pytest.approx(ref.r2, abs=1e-9)  # was -0.32
    big = fit_curve(t, y * 1e30)
    assert big.r2 == pytest.approx(ref.r2, abs=1e-9)
    assert big.params["R_inf"].stderr / 1e30 == pytest.approx(ref.params["R_inf"].stderr, rel=1e-3)
    # time parameters come back in the user's units: k per user step
    assert fit_curve(t / 1000.0, y).values["k"] / 1000.0 == pytest.approx(ref.values["k"], rel=1e-5)
