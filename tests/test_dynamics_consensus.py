"""forecast(method="consensus"): the median of three forecasts (level_gain, level_gain with a
logistic curve, a damped local trend), the median member's path drawn, the band widened by the
members' disagreement; the damped trend's own behaviour and its stand-ins."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("statsmodels")

from pgrpo.dynamics import forecast  # noqa: E402
from pgrpo.dynamics.consensus import MIN_TREND_POINTS, damped_trend  # noqa: E402


def _rise(n: int, seed: int, tau: float = 30.0, noise: float = 0.05) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=float)
    return 0.2 + 0.6 * (1.0 - np.exp(-t / tau)) + noise * rng.standard_normal(n)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(24, 160), seed=st.integers(0, 10_000), cut=st.sampled_from([0.3, 0.5, 0.7]),
       tau=st.floats(5.0, 200.0), noise=st.floats(0.0, 0.2))  # fmt: skip
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
    base = forecast(step, y, cut)  # level_gain: the consensus band is never the narrower one
    assert hi - lo >= (base.mean_band[1] - base.mean_band[0]) * (1 - 1e-9)
    assert fc.metrics["base/gain_fraction"] == base.metrics["gain_fraction"]


def test_disagreement_widens_the_band_by_the_members_variance():
    step = np.arange(1, 81, dtype=float)
    y = np.where(step < 30, 0.1, 0.1 + 0.02 * (step - 30))  # a floor, then a late rise
    y = y + 0.01 * np.random.default_rng(3).standard_normal(step.size)
    fc = forecast(step, y, 0.5, method="consensus")
    base = forecast(step, y, 0.5)
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
    path = damped_trend(step, y, np.arange(61, 101, dtype=float))
    assert path.shape == (40,)
    assert np.all(np.diff(path) >= -1e-12)  # keeps going up (damped), never falls back
    assert path[0] > 0.4 and path.max() <= y.max() + 1e-12  # clipped at the prefix's max
    flat = damped_trend(step, np.full(60, 0.3), np.arange(61, 71, dtype=float))
    assert np.allclose(flat, 0.3)


def test_the_damped_trend_uses_the_step_spacing_as_its_clock():
    y = np.r_[np.full(30, 0.0), np.linspace(0.0, 1.0, 30)] + 0.3
    every_1 = damped_trend(np.arange(60.0), y, np.array([61.0]))
    every_10 = damped_trend(np.arange(60.0) * 10, y, np.array([610.0]))
    assert every_10 == pytest.approx(every_1)  # one logged interval ahead in both


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
