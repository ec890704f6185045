"""The level-and-drift forecaster (`pgrpo.dynamics.drift`, `forecast(method="level_drift")`)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.dynamics.drift import (
    DRIFT_PRIOR,
    DriftInputs,
    DriftPrior,
    drift_inputs,
    drift_mean,
)
from pgrpo.dynamics.forecast import FORECAST_METHODS, forecast


def test_inputs_of_a_noisy_level():
    rng = np.random.default_rng(0)
    step = np.arange(400.0)
    y = 0.4 + 0.1 * rng.standard_normal(400)
    x = drift_inputs(step[:200], y[:200], step[200:])
    assert x.noise == pytest.approx(0.1, rel=0.15)
    assert x.line == pytest.approx(0.4, abs=0.04)  # 100 points' line at the cut
    assert x.last == pytest.approx(float(np.mean(y[190:200])))
    # the future's mean step is 299.5, 100.5 steps past the cut at 199, over a span of 199
    assert x.horizon == pytest.approx(100.5 / 199.0)


def test_line_reads_the_level_now_on_a_ramp():
    step = np.arange(100.0)
    y = 0.01 * step  # no noise: the line through the last half ends at the last point
    x = drift_inputs(step, y, step + 100)
    assert x.line == pytest.approx(0.99)
    assert x.noise == pytest.approx(0.0, abs=1e-12)


def test_mean_is_the_formula():
    x = DriftInputs(noise=0.2, last=0.5, line=0.6, horizon=0.25)
    p = DriftPrior(drift=0.3, line_weight=0.5, band=2.0)
    assert drift_mean(x, p) == pytest.approx(0.5 + 0.5 * 0.1 + 0.3 * 0.2 * 0.5)


@pytest.mark.parametrize("kw", [dict(line_weight=1.5), dict(line_weight=-0.1), dict(band=0.0)])
def test_prior_rejects_values_out_of_range(kw):
    with pytest.raises(ValueError):
        DriftPrior(**{"drift": 0.3, "line_weight": 0.5, "band": 2.0, **kw})


def test_too_few_points_and_non_finite_values_are_refused():
    with pytest.raises(ValueError, match=">= 5 points"):
        drift_inputs(np.arange(4.0), np.ones(4), np.arange(4.0, 8.0))
    with pytest.raises(ValueError, match="finite"):
        drift_inputs(np.arange(8.0), np.r_[np.ones(7), np.nan], np.arange(8.0, 9.0))


def test_forecast_method_is_registered_and_draws_what_it_reports():
    assert "level_drift" in FORECAST_METHODS.names()
    rng = np.random.default_rng(1)
    step = np.arange(120.0)
    y = 1.0 - np.exp(-step / 40.0) + 0.05 * rng.standard_normal(120)
    fc = forecast(step, y, 0.5, method="level_drift")
    assert np.allclose(fc.predicted, fc.predicted_mean)  # a flat path at the reported mean
    x = drift_inputs(step[:60], y[:60], step[60:])
    assert fc.predicted_mean == pytest.approx(drift_mean(x, DRIFT_PRIOR))
    half = DRIFT_PRIOR.band * x.noise * math.sqrt(x.horizon)
    assert fc.mean_band[0] == pytest.approx(fc.predicted_mean - half, rel=1e-9)
    assert fc.mean_band[1] == pytest.approx(fc.predicted_mean + half, rel=1e-9)


def test_a_constant_prefix_forecasts_its_level():
    step = np.arange(40.0)
    y = np.r_[np.full(20, 0.25), np.linspace(0.25, 0.8, 20)]
    fc = forecast(step, y, 0.5, method="level_drift")
    assert fc.predicted_mean == pytest.approx(0.25)
    assert fc.metrics.get("constant_prefix") == 1.0


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(12, 200),
    seed=st.integers(0, 2**31 - 1),
    shift=st.floats(-100, 100),
    scale=st.floats(0.01, 100),
)
def test_affine_equivariance(n, seed, shift, scale):
    """Moving the reward by `shift` and stretching it by `scale` > 0 moves and stretches the
    forecast and its band the same way: the forecaster has no units of its own."""
    rng = np.random.default_rng(seed)
    step = np.cumsum(rng.integers(1, 4, n)).astype(float)
    y = np.cumsum(rng.standard_normal(n)) * 0.1 + rng.standard_normal(n)
    a = forecast(step, y, 0.5, method="level_drift")
    b = forecast(step, shift + scale * y, 0.5, method="level_drift")
    tol = 1e-7 * (1 + abs(shift) + scale * (1 + np.max(np.abs(y))))
    assert b.predicted_mean == pytest.approx(shift + scale * a.predicted_mean, abs=tol)
    assert b.mean_band[1] - b.mean_band[0] == pytest.approx(
        scale * (a.mean_band[1] - a.mean_band[0]), abs=tol
    )
