"""forecast(method="consensus"): the median of four forecasts (level_gain, level_gain with a
logistic curve, a damped local trend, a recent level), the two middle members' mean path drawn;
method="consensus3": the median of the first three, the median member's path drawn; the band
widened by the members' disagreement; the damped trend's and the recent level's own behaviour
and their stand-ins."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pgrpo.dynamics import forecast
from pgrpo.dynamics.consensus import (
    COMBINATIONS,
    MEMBER_SETS,
    MEMBERS,
    MIN_TREND_POINTS,
    consensus,
    damped_trend,
    recent_level,
)
from pgrpo.dynamics.forecast import last_window_mean


def _rise(n: int, seed: int, tau: float = 30.0, noise: float = 0.05) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=float)
    return 0.2 + 0.6 * (1.0 - np.exp(-t / tau)) + noise * rng.standard_normal(n)


RISES = {"n": st.integers(24, 160), "seed": st.integers(0, 10_000),
         "cut": st.sampled_from([0.3, 0.5, 0.7]), "tau": st.floats(5.0, 200.0),
         "noise": st.floats(0.0, 0.2)}  # fmt: skip
"""The noisy saturating rises (`_rise`) the property tests draw, with a cut."""


def _member_paths(step, y, cut):
    """Each member's own path, computed apart from the consensus (stand-ins included)."""
    i = int(round(cut * step.size))
    future, window = step[i:], np.full(step.size - i, last_window_mean(y[:i]))
    lg = forecast(step, y, cut, method="level_gain").predicted
    try:
        lo = forecast(step, y, cut, method="level_gain", model="logistic").predicted
    except ValueError:
        lo = lg
    fits = i >= MIN_TREND_POINTS
    tr = damped_trend(step[:i], y[:i], future)[0] if fits else window
    paths = {"level_gain": lg, "logistic": lo, "damped_trend": tr}
    return {**paths, "recent_level": recent_level(step[:i], y[:i], future)} if fits else paths


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**RISES)
def test_the_median_of_four_is_forecast_and_drawn(n, seed, cut, tau, noise):
    step = np.arange(1, n + 1, dtype=float)
    y = _rise(n, seed, tau, noise)
    fc = forecast(step, y, cut, method="consensus")
    paths = _member_paths(step, y, cut)  # three where the prefix is too short for the level
    means = [fc.metrics[f"member_mean/{k}"] for k in paths]
    assert fc.metrics["members"] == "four" and fc.metrics["combination"] == "median"
    assert fc.predicted_mean == pytest.approx(float(np.median(means)), abs=1e-12)
    assert fc.predicted_mean == pytest.approx(float(np.mean(fc.predicted)), abs=1e-12)
    for k in paths:
        assert fc.metrics[f"member_mean/{k}"] == pytest.approx(float(np.mean(paths[k])),
                                                               abs=1e-12)  # fmt: skip
    if len(paths) == 3:
        np.testing.assert_allclose(fc.predicted, paths[fc.metrics["member"]], rtol=0, atol=1e-12)
        return
    pair = fc.metrics["member"].split("+")  # the two middle members, drawn as their mean path
    assert len(pair) == 2 and set(pair) <= set(MEMBERS)
    np.testing.assert_allclose(fc.predicted, 0.5 * (paths[pair[0]] + paths[pair[1]]), rtol=0,
                               atol=1e-12)  # fmt: skip
    lo, hi = fc.mean_band
    assert lo <= fc.predicted_mean <= hi
    base = forecast(step, y, cut, method="level_gain")  # the consensus band is never narrower
    assert hi - lo >= (base.mean_band[1] - base.mean_band[0]) * (1 - 1e-9)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**RISES)
def test_consensus3_is_the_median_member_of_three_and_draws_its_path(n, seed, cut, tau, noise):
    step = np.arange(1, n + 1, dtype=float)
    y = _rise(n, seed, tau, noise)
    fc = forecast(step, y, cut, method="consensus3")
    names = MEMBERS[:3]
    means = [fc.metrics[f"member_mean/{k}"] for k in names]
    assert fc.metrics["members"] == "three" and "member_mean/recent_level" not in fc.metrics
    assert fc.metrics["member"] in names
    assert fc.predicted_mean == pytest.approx(float(np.median(means)), abs=1e-12)
    paths = _member_paths(step, y, cut)
    np.testing.assert_allclose(fc.predicted, paths[fc.metrics["member"]], rtol=0, atol=1e-12)
    four = forecast(step, y, cut, method="consensus")
    assert means == [four.metrics[f"member_mean/{k}"] for k in names]  # the same three


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**RISES)
def test_ensemble_mean_draws_and_reports_the_mean_of_the_three_members(n, seed, cut, tau, noise):
    step = np.arange(1, n + 1, dtype=float)
    y = _rise(n, seed, tau, noise)
    fc = forecast(step, y, cut, method="ensemble_mean")
    med = forecast(step, y, cut, method="consensus3")
    names = MEMBERS[:3]
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
    with pytest.raises(KeyError, match="four"):
        consensus(step[:20], _rise(40, 1)[:20], step[20:], {}, members="five")
    assert set(MEMBER_SETS.names()) == {"four", "three"}


def test_the_median_of_an_even_number_is_the_two_middle_members_mean_path():
    median = COMBINATIONS.get("median")
    paths = {k: np.full(3, v) for k, v in zip(MEMBERS, (0.4, 0.1, 0.9, 0.3), strict=True)}
    means = {k: float(v[0]) for k, v in paths.items()}
    pick, path = median(paths, means)
    assert pick == "level_gain+recent_level"  # 0.3 and 0.4, named in the members' order
    np.testing.assert_allclose(path, 0.35)
    tied = {k: np.full(2, 0.5) for k in MEMBERS}  # all equal: the first two, the same level
    pick, path = median(tied, {k: 0.5 for k in MEMBERS})
    assert pick == "level_gain+logistic" and np.allclose(path, 0.5)
    odd = {k: paths[k] for k in MEMBERS[:3]}
    assert median(odd, {k: means[k] for k in odd})[0] == "level_gain"  # 0.1, 0.4, 0.9


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), scale=st.sampled_from([1e-4, 1e-2, 7.0, 3e3]),
       shift=st.floats(-50.0, 50.0))  # fmt: skip
@example(seed=823, scale=3000.0, shift=3.5771877606204185)
def test_the_reward_units_do_not_change_the_consensus(seed, scale, shift):
    step = np.arange(1, 121, dtype=float)
    y = _rise(120, seed, tau=25.0, noise=0.08)
    fc = forecast(step, y, 0.5, method="consensus")
    fz = forecast(step, scale * y + shift, 0.5, method="consensus")
    assert fz.metrics["member"] == fc.metrics["member"]
    # the optimisers stop within ~1e-5 of their optimum, in the standardised data that both
    # fits see up to rounding (seed 152 at scale 0.01: 5.6e-6 on the damped trend; seed 823 at
    # scale 3000, shift 3.58: 3.0e-5, the logistic member's midpoint sitting in a flat valley at
    # the first steps, found by a developer's random run on 2026-12-05; 480 other random cases:
    # at most 1.2e-6). A units bug moves the forecast by far more than 1e-4 of the scale.
    assert fz.predicted_mean == pytest.approx(scale * fc.predicted_mean + shift, rel=1e-4,
                                              abs=1e-4 * scale)  # fmt: skip


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
    means = [fc.metrics[f"member_mean/{k}"] for k in MEMBERS]
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


def test_a_short_prefix_has_the_last_window_mean_stand_in_for_the_trend_and_the_level():
    step = np.arange(1, 21, dtype=float)
    y = _rise(20, 5)
    cut = (MIN_TREND_POINTS - 1) / 20  # the prefix has one point too few for either
    fc = forecast(step, y, cut, method="consensus")
    assert fc.metrics["trend_failed"] == 1.0 and fc.metrics["level_failed"] == 1.0
    i = MIN_TREND_POINTS - 1
    assert fc.metrics["member_mean/damped_trend"] == pytest.approx(float(np.mean(y[:i][-5:])))
    # the recent level drops out (no second vote for the same stand-in): the median of three
    assert "member_mean/recent_level" not in fc.metrics and "+" not in fc.metrics["member"]
    three = forecast(step, y, cut, method="consensus3")
    assert fc.predicted_mean == pytest.approx(three.predicted_mean, abs=1e-12)
    with pytest.raises(ValueError, match="needs >= 10 points"):
        damped_trend(step[:i], y[:i], step[i:])
    with pytest.raises(ValueError, match="needs >= 10 points"):
        recent_level(step[:i], y[:i], step[i:])
    with pytest.raises(ValueError, match="finite"):
        recent_level(step, np.r_[y[:-1], np.nan], step[:3])


def test_the_recent_level_is_statsmodels_smoothed_level_mapped_back():
    from statsmodels.tsa.holtwinters import SimpleExpSmoothing

    rng = np.random.default_rng(4)
    y = np.r_[np.full(40, 0.3), np.full(40, 0.6)] + 0.05 * rng.standard_normal(80)  # a step
    level = recent_level(np.arange(80.0), y, np.arange(80.0, 90.0))
    z = (y - y.mean()) / y.std()
    own = SimpleExpSmoothing(z, initialization_method="estimated").fit()
    expect = y.mean() + y.std() * own.forecast(1)[0]  # SES: one flat level ahead
    np.testing.assert_allclose(level, np.full(10, expect), rtol=1e-9, atol=1e-12)
    assert 0.5 < expect < 0.65  # it follows the step, where the prefix mean (0.45) does not
    flat = recent_level(np.arange(30.0), np.full(30, 0.7), np.arange(30.0, 35.0))
    np.testing.assert_allclose(flat, 0.7)


def test_a_known_reward_range_clips_the_consensus_forecast():
    step = np.arange(1, 101, dtype=float)
    y = np.clip(_rise(100, 8, tau=20.0, noise=0.02) + 0.19, None, 1.0)
    fc = forecast(step, y, 0.5, method="consensus", reward_range=(0.0, 1.0))
    assert np.all(fc.predicted <= 1.0) and fc.mean_band[1] <= 1.0
    free = forecast(step, y, 0.5, method="consensus")  # the same without the range
    assert free.mean_band[1] > 1.0  # so the clip above is the range's doing
