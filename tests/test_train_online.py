"""Online forecast: the trainer's use of the dynamics fit on a synthetic reward curve."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from pgrpo.train.config import load_config
from pgrpo.train.online import OnlineForecaster, forecast_metrics


def _curve(n, tau=6.0, r0=0.2, r_inf=0.8, noise=0.01, seed=0):
    t = np.arange(1, n + 1, dtype=float)
    rng = np.random.default_rng(seed)
    return list(r_inf - (r_inf - r0) * np.exp(-(t - 1) / tau) + rng.normal(0, noise, n))


def test_forecast_recovers_plateau_and_time_to_90_percent():
    cfg = load_config(None, ["steps=40", "forecast_every=5"])
    out = forecast_metrics(_curve(30), [1e-6] * 30, cfg)
    assert out["forecast/plateau"] == pytest.approx(0.8, abs=0.03)
    assert out["forecast/steps_to_90"] == pytest.approx(1 + 6.0 * math.log(10), abs=2.0)
    assert out["forecast/regime"] in ("overdamped", "critical", "underdamped")
    assert out["forecast/r2"] > 0.9


def test_forecaster_fits_every_n_steps_only():
    cfg = load_config(None, ["steps=40", "forecast_every=5"])
    f = OnlineForecaster(cfg, [])
    fitted = [
        s
        for s, r in enumerate(_curve(12), 1)
        if f.update({"step": s, "reward": r, "learning_rate": 1e-6})
    ]
    assert fitted == [10]  # step 5 has too few points (< 6)
    off = OnlineForecaster(load_config(None, ["forecast_every=0"]), [])
    steps = range(1, 20)
    assert all(not off.update({"step": s, "reward": 0.5, "learning_rate": 1e-6}) for s in steps)


def test_warns_when_refresh_interval_reaches_k_star():
    # a fast curve (tau = 2 optimizer steps) with K = 40: far beyond the stability threshold
    cfg = load_config(
        None, ["steps=40", "forecast_every=8", "refresh_interval=40", "optim.name=sgd_momentum"]
    )
    f = OnlineForecaster(cfg, [])
    rewards = _curve(8, tau=2.0 / 40)  # per log step = 40 optimizer steps
    with pytest.warns(RuntimeWarning, match="refresh_interval"):
        for s, r in enumerate(rewards, 1):
            out = f.update({"step": s, "reward": r, "learning_rate": 1e-6})
    assert out["forecast/k_star"] is not None and out["forecast/k_star"] <= 40


def test_adamw_run_gets_no_k_star_and_no_warning():
    # the same curve under AdamW: its reduction predicts no divergence threshold, so the trainer
    # reports the noise-only linear threshold and says nothing about K*
    cfg = load_config(None, ["steps=40", "forecast_every=8", "refresh_interval=40"])
    f = OnlineForecaster(cfg, [])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for s, r in enumerate(_curve(8, tau=2.0 / 40), 1):
            out = f.update({"step": s, "reward": r, "learning_rate": 1e-6})
    assert out["forecast/k_star"] is None
    assert out["forecast/k_linear"] is not None and out["forecast/k_linear"] <= 40
