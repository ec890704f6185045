"""Forecasting: beats the last-window mean on the synthetic suite, with an honest band."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgrpo.dynamics import evaluate_forecast, forecast, last_window_mean, synthetic_suite


def test_rom_blend_beats_last_window_mean_and_covers_on_its_own_synthetic_suite():
    # curves the model generates: the ROM forecaster wins there (on real runs it does not;
    # the default level_gain is judged on the corpus, test_dynamics_forecast_real.py)
    errs, base, exp, covered = [], [], [], []
    for c in synthetic_suite(3, seed=21, n_steps=600):
        ev = evaluate_forecast(c.step, c.reward, 0.5, lr=c.lr, method="rom_blend")
        errs.append(ev.error)
        base.append(ev.baseline_errors["last_window_mean"])
        exp.append(ev.baseline_errors["exponential"])
        covered.append(ev.covered)
    assert np.median(errs) < np.median(base)
    assert np.median(errs) <= np.median(exp)
    assert np.mean(covered) >= 0.75  # nominal 90%, 12 curves


def test_combination_leans_on_the_model_in_family_and_on_the_level_off_it():
    from pgrpo.dynamics.synthetic import out_of_family_curve

    c = synthetic_suite(1, seed=4, n_steps=800)[1]  # plateau_early: a well-identified model
    fc = forecast(c.step, c.reward, 0.5, lr=c.lr, method="rom_blend")
    pure = forecast(c.step, c.reward, 0.5, lr=c.lr, method="rom_blend", combine=False)
    assert pure.metrics["weight_model"] == 1.0
    assert pure.predicted_mean == pytest.approx(fc.metrics["model_mean"])
    assert 0.0 <= fc.metrics["weight_model"] <= 1.0
    lwm = fc.baselines["last_window_mean"]
    w = fc.metrics["weight_model"]
    assert fc.predicted_mean == pytest.approx(w * pure.predicted_mean + (1 - w) * lwm)
    step = out_of_family_curve("step", np.random.default_rng(1), 800)
    off = forecast(step.step, step.reward, 0.5, lr=step.lr, method="rom_blend")
    assert off.metrics["var_mean_structural"] >= 0.0
    assert abs(off.predicted_mean - step.mean[400:].mean()) < 0.1


def test_forecast_shapes_band_and_known_future_schedule():
    c = synthetic_suite(1, seed=3, n_steps=400)[0]
    fc = forecast(c.step, c.reward, 0.4, lr=c.lr)
    n_future = c.step.size - int(round(0.4 * c.step.size))
    assert fc.future_step.shape == fc.predicted.shape == fc.band_lo.shape == (n_future,)
    assert np.all(fc.band_lo < fc.predicted) and np.all(fc.predicted < fc.band_hi)
    assert fc.mean_band[0] < fc.predicted_mean < fc.mean_band[1]
    assert fc.cut_step == c.step[int(round(0.4 * c.step.size)) - 1]
    assert np.isfinite(fc.observed_mean)
    # a horizon beyond the log: no observed mean, lr held at its last value
    far = forecast(c.step, c.reward, 0.9, lr=c.lr, horizon=np.arange(401.0, 451.0))
    assert far.predicted.shape == (50,) and np.isnan(far.observed_mean)


@pytest.mark.parametrize("method", ["consensus", "level_gain"])
@pytest.mark.parametrize("horizon", [[48.0, 60.0], [49.0, 70.0], [30.0], [60.0, np.nan]])
def test_a_horizon_at_or_before_the_cut_is_refused(method, horizon):
    """The cut at 0.5 of 100 steps leaves step 49 last: a horizon step at or before it (or not
    finite) is a caller's mistake, not a forecast with a band of zero width (review s34)."""
    rng = np.random.default_rng(0)
    step, y = np.arange(100.0), 0.5 + 0.1 * rng.standard_normal(100)
    with pytest.raises(ValueError, match=r"after the cut \(step 49\)"):
        forecast(step, y, 0.5, method=method, horizon=np.array(horizon))
    ok = forecast(step, y, 0.5, method=method, horizon=np.array([49.5, 200.0]))
    assert ok.predicted.shape == (2,)


def test_forecast_errors_and_last_window_mean():
    y = np.arange(100.0)
    assert last_window_mean(y) == pytest.approx(np.mean(y[-10:]))
    with pytest.raises(ValueError, match="points to fit"):
        forecast(np.arange(10.0), np.zeros(10), 0.2)
    with pytest.raises(ValueError, match="nothing to forecast"):
        forecast(np.arange(10.0), np.zeros(10), 100.0)
    with pytest.raises(ValueError, match="level"):
        forecast(np.arange(50.0), np.zeros(50), 0.5, level=1.5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    y=st.lists(st.floats(-5.0, 5.0, allow_nan=False), min_size=20, max_size=80),
    cut=st.floats(0.3, 0.8),
    scale=st.sampled_from([1e-3, 1.0, 100.0]),
    scheduled=st.booleans(),
)
def test_the_default_forecast_is_finite_with_a_band_around_it(y, cut, scale, scheduled):
    # any curve (constant, ties, jumps, any scale), with or without an lr schedule
    reward = scale * np.asarray(y)
    step = np.arange(1.0, reward.size + 1.0)
    lr = 1e-5 * (1.0 - step / (step[-1] + 1.0)) if scheduled else None
    fc = forecast(step, reward, cut, lr=lr)
    assert np.all(np.isfinite(fc.predicted)) and math.isfinite(fc.predicted_mean)
    assert np.all(np.isfinite(fc.band_lo)) and np.all(np.isfinite(fc.band_hi))
    assert np.all(fc.band_lo <= fc.predicted) and np.all(fc.predicted <= fc.band_hi)
    assert fc.mean_band[0] <= fc.predicted_mean <= fc.mean_band[1]
