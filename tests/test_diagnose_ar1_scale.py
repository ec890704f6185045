"""The standard error of a window mean of an autocorrelated reward from its first-difference
noise (`curvestats.window_mean_sd`). First differences see sigma sqrt(1 - rho) of an AR(1)
series' sd sigma; `reward_hacking`'s train gain and the gaming checks' trend took that scale for
sigma and inflated it by (1 + rho) / (1 - rho) only, an error sqrt(1 - rho) too small: at rho
0.8 `reward_hacking` fired on 3.6-3.9% of flat runs with exact evals against its 0.5%
(bench/diagnose_bounds.py, cell hacking; 0.7-0.8% now). Both tests on the rules fail on the
code before 2026-12-04."""

from __future__ import annotations

import math

import numpy as np
from conftest import ar1
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.diagnose import diagnose
from pgrpo.diagnose.checks import trend
from pgrpo.diagnose.curvestats import window_mean_sd


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 80), st.floats(-0.5, 0.95), st.floats(0.01, 10.0))
def test_window_mean_sd_is_the_ar1_variance_of_a_window_mean(k, rho, noise):
    """Against the covariance matrix: sigma^2 rho^|i - j| with sigma^2 = noise^2 / (1 - rho)."""
    idx = np.arange(k)
    cov = noise**2 / (1.0 - rho) * rho ** np.abs(idx[:, None] - idx[None, :])
    assert math.isclose(window_mean_sd(noise, k, rho), math.sqrt(cov.sum()) / k, rel_tol=1e-9)


def test_the_trend_t_of_ar1_noise_is_not_overdispersed():
    """t = gain / se of a flat AR(0.8) column: sd about 1 or below (the rho bound is an upper
    bound); the differences' scale made it 1.8."""
    rng = np.random.default_rng(3)
    y = ar1(rng, (600, 100), 0.8)
    step = np.arange(100.0)
    t = np.array([trend(step, row).t for row in y])
    assert np.std(t) < 1.1, np.std(t)


def test_reward_hacking_on_a_flat_autocorrelated_reward_stays_near_its_rate():
    """400 flat runs of 200 steps, AR(1) rho 0.8 (sd 0.1), two exact evals of 1000 problems at
    the same accuracy at the run's ends: fired on ~14 before (3.6% in the bench), ~3 now."""
    rng = np.random.default_rng(11)
    rewards = 0.5 + 0.1 * ar1(rng, (400, 200), 0.8)
    se = math.sqrt(0.25 / 1000)
    fired = 0
    for r in rewards:
        acc = rng.binomial(1000, 0.5, 2) / 1000
        log = {"step": np.arange(1.0, 201.0), "reward": r}
        evals = [(1.0, acc[0], se), (200.0, acc[1], se)]
        fired += diagnose(log, eval_log=evals).mode("reward_hacking").detected
    assert fired <= 8, fired
