"""forecast(method="consensus"): the median of three forecasts (level_gain, level_gain with a
logistic curve, a damped local trend), the median member's path drawn, the band widened by the
members' disagreement; the damped trend's own behaviour and its stand-ins."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgrpo.dynamics import forecast
from pgrpo.dynamics.consensus import COMBINATIONS, MIN_TREND_POINTS, consensus, damped_trend
from pgrpo.dynamics.forecast import last_window_mean


def _rise(n: int, seed: int, tau: float = 30.0, noise: float = 0.05) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=float)
    return 0.2 + 0.6 * (1.0 - np.exp(-t / tau)) + noise * rng.standard_normal(n)


RISES = {"n": st.integers(24, 160), "seed": st.integers(0, 10_000),
         "cut": st.sampled_from([0.3, 0.5, 0.7]), "tau": st.floats(5.0, 200.0),
         "noise": st.floats(0.0, 0.2)}  # fmt: skip
"""The noisy saturating rises (`_rise`) the property tests draw, with a cut."""


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**RISES)
def test_the_median_member_is_forecast_and_drawn(n, seed, cut, tau, noise):
    step = np.arange(1, n + 1, dtype=float)
    y = _rise(n, seed, tau, noise)
    fc = forecast(step, y, cut, method="consensus")
    means = [fc.metrics[f"member_mean/{k}"] for k in ("level_gain", "logistic", "damped_trend")]
    assert fc.metrics["member"] in ("level_gain", "logistic", "damped_trend")
    assert fc.predicted_mean == pytest.approx(float(np.median(means)), abs=1e-12)
    assert fc.predicted_mean == pytest.approx(float(np.mean(fc.predicted)), abs=1e-12)
    lo, hi = fc.mean_band
    assert lo <= fc.predicted_mean <= hi
    base = forecast(step, y, cut, method="level_gain")  # the consensus band is never narrower
    assert hi - lo >= (base.mean_band[1] - base.mean_band[0]) * (1 - 1e-9)
    assert fc.metrics["member_mean/level_gain"] == pytest.approx(base.predicted_mean, abs=1e-12)
    logi = forecast(step, y, cut, method="level_gain", model="logistic")
    assert fc.metrics["member_mean/logistic"] == pytest.approx(logi.predicted_mean, abs=1e-12)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**RISES)
def test_ensemble_mean_draws_and_reports_the_mean_of_the_three_members(n, seed, cut, tau, noise):
    step = np.arange(1, n + 1, dtype=float)
    y = _rise(n, seed, tau, noise)
    fc = forecast(step, y, cut, method="ensemble_mean")
    med = forecast(step, y, cut, method="consensus")
    names = ("level_gain", "logistic", "damped_trend")
    means = [fc.metrics[f"member_mean/{k}"] for k in names]
    assert means == [med.metrics[f"member_mean/{k}"] for k in names]  # the same three members
    assert fc.metrics["member"] is None and fc.metrics["combination"] == "mean"
    assert fc.predicted_mean == pytest.approx(float(np.mean(means)), abs=1e-12)
    assert fc.predicted_mean == pytest.approx(float(np.mean(fc.predicted)), abs=1e-12)
    i = int(round(cut * n))  # the drawn path is the members' paths averaged step by step
    lg = forecast(step, y, cut, method="level_gain").predicted
    lo = forecast(step, y, cut, method="level_gain", model="logistic").predicted
    if i >= MIN_TREND_POINTS:
        tr, _ = damped_trend(step[:i], y[:i], step[i:])
    else:  # too short for the trend: the last-window mean stands in
        tr = np.full(n - i, last_window_mean(y[:i]))
    np.testing.assert_allclose(fc.predicted, (lg + lo + tr) / 3, rtol=0, atol=1e-12)
    width = fc.mean_band[1] - fc.mean_band[0]  # the same band as the median's, recentred
    assert width == pytest.approx(med.mean_band[1] - med.mean_band[0], abs=1e-12)
    assert fc.mean_band[0] <= fc.predicted_mean <= fc.mean_band[1]


def test_an_unknown_combination_is_refused_with_the_known_ones():
    step = np.arange(1, 41, dtype=float)
    with pytest.raises(KeyError, match="median"):
        consensus(step[:20], _rise(40, 1)[:20], step[20:], {}, combination="trimmed")
    assert set(COMBINATIONS.names()) == {"median", "mean"}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), scale=st.sampled_from([1e-4, 1e-2, 7.0, 3e3]),
       shift=st.floats(-50.0, 50.0))  # fmt: skip
def test_the_reward_units_do_not_change_the_consensus(seed, scale, shift):
    step = np.arange(1, 121, dtype=float)
    y = _rise(120, seed, tau=25.0, noise=0.08)
    fc = forecast(step, y, 0.5, method="consensus")
    fz = forecast(step, scale * y + shift, 0.5, method="consensus")
    assert fz.metrics["member"] == fc.metrics["member"]
    assert fz.predicted_mean == pytest.approx(scale * fc.predicted_mean + shift, rel=1e-6,
                                              abs=1e-6 * scale)  # fmt: skip


def test_the_damped_trend_is_statsmodels_forecast_mapped_back():
    from statsmodels.tsa.holtwinters import ExponentialSmoothing

    rng = np.random.default_rng(11)
    y = 0.5 + 0.002 * np.arange(80) + 0.1 * rng.standard_normal(80)  # noise >> the slope
    path, converged = damped_trend(np.arange(80.0), y, np.arange(80.0, 100.0))
    z = (y - y.mean()) / y.std()
    own = ExponentialSmoothing(z, trend="add", damped_trend=True,
                               initialization_method="estimated").fit()  # fmt: skip
    expect = y.mean() + y.std() * own.forecast(20)  # h = 1..20: steps 80..99 after step 79
    assert converged
    assert y.min() < expect.min() and expect.max() < y.max()  # inside the range: no clip
    np.testing.assert_allclose(path, expect, rtol=1e-9, atol=1e-12)


def test_disagreement_widens_the_band_by_the_members_variance():
    step = np.arange(1, 81, dtype=float)
    y = np.where(step < 30, 0.1, 0.1 + 0.02 * (step - 30))  # a floor, then a late rise
    y = y + 0.01 * np.random.default_rng(3).standard_normal(step.size)
    fc = forecast(step, y, 0.5, method="consensus")
    base = forecast(step, y, 0.5, method="level_gain")
    means = [fc.metrics[f"member_mean/{k}"] for k in ("level_gain", "logistic", "damped_trend")]
    spread = float(np.var(means))
    assert fc.metrics["member_spread_var"] == pytest.approx(spread)
    assert spread > 0
    half = (fc.mean_band[1] - fc.mean_band[0]) / 2
    half_base = (base.mean_band[1] - base.mean_band[0]) / 2
    assert half > half_base  # wider than level_gain's calibrated band alone


def test_the_damped_trend_follows_a_recent_slope_and_stays_in_the_prefix_range():
    step = np.arange(1, 61, dtype=float)
    y = np.r_[np.full(40, 0.2), np.linspace(0.2, 0.5, 20)]  # flat, then rising at the cut
    path, _ = damped_trend(step, y, np.arange(61, 101, dtype=float))
    assert path.shape == (40,)
    assert np.all(np.diff(path) >= -1e-12)  # keeps going up (damped), never falls back
    assert path[0] > 0.4 and path.max() <= y.max() + 1e-12  # clipped at the prefix's max
    flat, _ = damped_trend(step, np.full(60, 0.3), np.arange(61, 71, dtype=float))
    assert np.allclose(flat, 0.3)


def test_the_damped_trend_uses_the_step_spacing_as_its_clock():
    y = np.r_[np.full(30, 0.0), np.linspace(0.0, 1.0, 30)] + 0.3
    every_1, _ = damped_trend(np.arange(60.0), y, np.array([61.0]))
    every_10, _ = damped_trend(np.arange(60.0) * 10, y, np.array([610.0]))
    assert every_10 == pytest.approx(every_1)  # two logged intervals ahead in both
    strided = np.r_[np.arange(30.0), 30.0 + 10.0 * np.arange(30.0)]  # the stride grew to 10
    recent, _ = damped_trend(strided, y, np.array([strided[-1] + 20.0]))
    assert recent == pytest.approx(every_1)  # read at the recent stride


def test_a_short_prefix_has_the_last_window_mean_stand_in_for_the_trend():
    step = np.arange(1, 21, dtype=float)
    y = _rise(20, 5)
    cut = (MIN_TREND_POINTS - 1) / 20  # the prefix has one point too few for the trend
    fc = forecast(step, y, cut, method="consensus")
    assert fc.metrics["trend_failed"] == 1.0
    i = MIN_TREND_POINTS - 1
    assert fc.metrics["member_mean/damped_trend"] == pytest.approx(float(np.mean(y[:i][-5:])))
    with pytest.raises(ValueError, match="needs >= 10 points"):
        damped_trend(step[:i], y[:i], step[i:])


def test_a_known_reward_range_clips_the_consensus_forecast():
    step = np.arange(1, 101, dtype=float)
    y = np.clip(_rise(100, 8, tau=20.0, noise=0.02) + 0.19, None, 1.0)
    fc = forecast(step, y, 0.5, method="consensus", reward_range=(0.0, 1.0))
    assert np.all(fc.predicted <= 1.0) and fc.mean_band[1] <= 1.0
    free = forecast(step, y, 0.5, method="consensus")  # the same without the range
    assert free.mean_band[1] > 1.0  # so the clip above is the range's doing
