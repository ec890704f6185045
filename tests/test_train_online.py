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
    assert out["forecast/steps_to_90"] == 0.0  # 90% of the way at step 1 + 6 ln 10 = 14.8: past
    assert out["forecast/withheld"] is None
    early = forecast_metrics(_curve(10), [1e-6] * 10, cfg)  # steps from the latest, step 10
    assert early["forecast/steps_to_90"] == pytest.approx(1 + 6.0 * math.log(10) - 10, abs=2.0)
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


def _binomial_rise(n, tau, seed=0, n_rollouts=64):
    """Batch means of n_rollouts 0/1 rewards whose success rate rises 0.2 -> 0.8 (tau log steps)."""
    t = np.arange(1, n + 1, dtype=float)
    p = 0.8 - 0.6 * np.exp(-(t - 1) / tau)
    return list(np.random.default_rng(seed).binomial(n_rollouts, p) / n_rollouts)


def test_warns_once_when_refresh_interval_reaches_k_star():
    cfg = load_config(None, ["steps=40", "refresh_interval=40", "optim.name=sgd_momentum"])
    f = OnlineForecaster(cfg, [])
    with pytest.warns(RuntimeWarning, match="refresh_interval"):
        f._warn_refresh({"forecast/k_star": 12.0})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        f._warn_refresh({"forecast/k_star": 12.0})  # said once per run
        g = OnlineForecaster(cfg, [])
        for k_star in (None, math.inf, 41.0):  # none predicted, or above K: nothing to say
            g._warn_refresh({"forecast/k_star": k_star})


def test_a_rise_beyond_noise_gets_k_star_from_its_fit():
    cfg = load_config(None, ["steps=40", "refresh_interval=4", "optim.name=sgd_momentum"])
    out = forecast_metrics(_binomial_rise(24, tau=4.0), [1e-6] * 24, cfg)
    assert out["forecast/progress"] not in ("flat", "too_short")
    assert out["forecast/k_star"] is not None and out["forecast/k_star"] > 4  # stable: no warning
    assert out["forecast/tau"] == pytest.approx(4 * 4.0, rel=0.5)  # per optimizer step (K = 4)


def test_adamw_run_gets_no_k_star_and_no_warning():
    # the same curve under AdamW: its reduction predicts no divergence threshold, so the trainer
    # reports the noise-only linear threshold and says nothing about K*
    cfg = load_config(None, ["steps=40", "forecast_every=8", "refresh_interval=4"])
    f = OnlineForecaster(cfg, [])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        logged = [f.update({"step": s, "reward": r, "learning_rate": 1e-6})
                  for s, r in enumerate(_binomial_rise(24, tau=4.0), 1)]  # fmt: skip
    out = logged[-1]  # step 24: fitted (forecast_every 8)
    assert out["forecast/k_star"] is None
    assert out["forecast/k_linear"] is not None and math.isfinite(out["forecast/k_linear"])


@pytest.mark.parametrize("optimizer", ["sgd_momentum", "adamw"])
def test_noise_and_a_constant_reward_give_no_dynamics_and_no_warning(optimizer):
    """A reward that has not moved beyond its batch noise has no stiffness or timescale to read:
    before this rule the K* warning fired on 16 of 20 flat noise runs (k at its bound)."""
    cfg = load_config(
        None,
        ["steps=60", "forecast_every=10", "refresh_interval=4", f"optim.name={optimizer}",
         "batch_prompts=8", "group_size=4"],
    )  # fmt: skip
    rng = np.random.default_rng(0)
    runs = [list(rng.binomial(32, 0.5, 60) / 32) for _ in range(10)] + [[0.0] * 60, [0.25] * 60]
    warned = 0
    for rewards in runs:
        f = OnlineForecaster(cfg, [])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            logged = [f.update({"step": s, "reward": r, "learning_rate": 1e-3})
                      for s, r in enumerate(rewards, 1)]  # fmt: skip
        warned += any(issubclass(w.category, RuntimeWarning) for w in caught)
        out = [o for o in logged if o][-1]
        if len(set(rewards)) == 1:  # a constant: its level, nothing else
            assert out["forecast/plateau"] == rewards[0] and out["forecast/progress"] == "flat"
        if out["forecast/progress"] == "flat":
            assert out["forecast/kappa"] is None and out["forecast/k_star"] is None
            assert out["forecast/tau"] is None and out["forecast/steps_to_90"] is None
    assert warned == 0
