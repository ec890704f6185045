"""Closed forms of the reduced-order model vs numerical integration and the exact recursion."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

from pgrpo.dynamics import (
    discrete_stationary_variance,
    inflection_time,
    regime,
    rom_coefficients,
    simulate_recursion,
    stationary_variance,
    trajectory,
)

T = np.linspace(0.0, 120.0, 61)


def _integrate(m, c, k, x0, v0):
    sol = solve_ivp(
        lambda _t, z: [z[1], (-c * z[1] - k * z[0]) / m],
        (0.0, T[-1]),
        [x0, v0],
        t_eval=T,
        method="DOP853",
        rtol=1e-12,
        atol=1e-14,
    )
    return sol.y[0]


@pytest.mark.parametrize(
    "m,c,k,v0",
    [
        (9.0, 1.0, 0.01, 0.0),  # overdamped
        (9.0, 1.0, 1.0 / 36.0, 0.0),  # critical
        (9.0, 1.0, 0.2, 0.0),  # underdamped
        (4.0, 0.6, 0.05, 0.01),  # lagged damping, nonzero v0
        (19.0, 1.0, 0.1, -0.02),
    ],
)
def test_closed_form_matches_numerical_integration(m, c, k, v0):
    x0 = 0.2 - 0.8
    numeric = 0.8 + _integrate(m, c, k, x0, v0)
    closed = trajectory(T, 0.2, 0.8, m, c, k, v0=v0)
    np.testing.assert_allclose(closed, numeric, atol=1e-8, rtol=0)


def test_continuous_across_critical_damping_and_massless_limit():
    k_crit = 1.0 / 36.0
    lo = trajectory(T, 0.2, 0.8, 9.0, 1.0, k_crit * (1 - 1e-9))
    hi = trajectory(T, 0.2, 0.8, 9.0, 1.0, k_crit * (1 + 1e-9))
    assert np.max(np.abs(lo - hi)) < 1e-8
    exp = 0.8 - 0.6 * np.exp(-0.05 * T)
    np.testing.assert_allclose(trajectory(T, 0.2, 0.8, 0.0, 1.0, 0.05), exp, atol=1e-15, rtol=0)
    np.testing.assert_allclose(trajectory(T, 0.2, 0.8, 1e-10, 1.0, 0.05), exp, atol=1e-9)


def test_closed_form_tracks_the_recursion_at_small_a():
    """The continuum is the a -> 0 limit of the recursion (K = 1, beta1 = 0.9)."""
    a, beta1, n = 0.002, 0.9, 3000
    coef = rom_coefficients(1.0, beta1, a)
    x = simulate_recursion(a, beta1, n)[0]
    closed = trajectory(np.arange(n + 1.0), 1.0, 0.0, coef.m, coef.c, coef.k)
    assert np.max(np.abs(x - closed)) < 0.01


def test_rom_coefficients_mapping_and_regimes():
    coef = rom_coefficients(1e-6, 0.9, 2e4, refresh_interval=5, group_size=8, batch_prompts=2)
    k, lag = 0.02, 2.0
    assert coef.k == pytest.approx(k)
    assert coef.m == pytest.approx(9.0 + k * lag**2 / 2)
    assert coef.c == pytest.approx(1.0 - k * lag)
    assert coef.zeta == pytest.approx(coef.c / (2 * math.sqrt(coef.m * coef.k)))
    assert coef.metrics["regime"] == regime(coef.m, coef.c, coef.k) == "overdamped"
    assert regime(9.0, 1.0, 0.2) == "underdamped"
    assert regime(9.0, 1.0, 1 / 36) == "critical"
    assert regime(9.0, -0.1, 0.2) == "unstable"
    # noise temperature ~ 1/G: stationary variance halves when G doubles
    v8 = rom_coefficients(1e-6, 0.9, 2e4, group_size=8).metrics["stationary_variance"]
    v16 = rom_coefficients(1e-6, 0.9, 2e4, group_size=16).metrics["stationary_variance"]
    assert v8 / v16 == pytest.approx(2.0)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"lr": 0.0}, "lr"),
        ({"beta1": 1.0}, "beta1"),
        ({"kappa": -1.0}, "kappa"),
        ({"refresh_interval": 0}, "refresh_interval"),
        ({"group_size": 2.5}, "group_size"),
    ],
)
def test_rom_coefficients_rejects_bad_hyperparameters(kwargs, match):
    args = {"lr": 1e-6, "beta1": 0.9, "kappa": 2e4, **kwargs}
    with pytest.raises(ValueError, match=match):
        rom_coefficients(args.pop("lr"), args.pop("beta1"), args.pop("kappa"), **args)


@pytest.mark.parametrize("m,c,k", [(9.0, 1.0, 0.01), (9.0, 1.0, 1 / 36), (9.0, 1.0, 0.2)])
def test_inflection_time_is_the_steepest_point(m, c, k):
    t = np.linspace(0, 60, 600001)
    x = trajectory(t, 0.0, 1.0, m, c, k)
    slope = np.gradient(x, t)
    t_num = t[np.argmax(slope)]
    assert inflection_time(m, c, k) == pytest.approx(t_num, abs=2e-4)


def test_inflection_time_continuous_across_critical():
    kc = 1 / 36
    assert inflection_time(9, 1, kc * (1 + 1e-9)) == pytest.approx(inflection_time(9, 1, kc), 1e-6)
    assert inflection_time(9, 1, kc * (1 - 1e-9)) == pytest.approx(inflection_time(9, 1, kc), 1e-6)
    assert inflection_time(0.0, 1.0, 0.1) == 0.0


def test_stationary_variance_continuum_discrete_and_simulation():
    a, beta1, s2 = 0.01, 0.9, 1e-4
    exact = discrete_stationary_variance(a, beta1, s2)
    # continuum: noise -a_n... with <xi xi> = 2D, 2D = s2 per step (force noise e_n, var s2)
    D = s2 / 2.0
    cont = stationary_variance(beta1 / (1 - beta1), 1.0, a, D)
    assert exact == pytest.approx(cont, rel=0.05)
    rng = np.random.default_rng(0)
    runs, n = 400, 4000
    noise = rng.normal(0.0, math.sqrt(s2), size=(runs, n))
    x = simulate_recursion(a, beta1, n, x0=np.zeros(runs), noise=noise)
    sim = float(np.var(x[:, -1]))
    assert sim == pytest.approx(exact, rel=0.2)  # 400 samples: ~7% sd


@settings(max_examples=40, deadline=None)
@given(
    m=st.floats(0.0, 50.0),
    k=st.floats(1e-4, 0.5),
    c=st.floats(0.2, 1.0),
)
def test_trajectory_is_finite_and_starts_at_R0(m, c, k):
    y = trajectory(np.linspace(0, 500, 101), 0.1, 0.9, m, c, k)
    assert np.all(np.isfinite(y))
    assert y[0] == pytest.approx(0.1, abs=1e-12)


def test_schedule_coefficients_and_finite_group_force_ratio():
    from pgrpo.bandit.force import finite_group_force
    from pgrpo.dynamics import schedule_coefficients

    lr = np.array([1e-7, 5e-7, 1e-6])
    sc = schedule_coefficients(lr, 0.9, 2e4, refresh_interval=3)
    for i, eta in enumerate(lr):
        one = rom_coefficients(float(eta), 0.9, 2e4, refresh_interval=3)
        assert (sc.m[i], sc.c[i], sc.k[i], sc.zeta[i]) == pytest.approx(
            (one.m, one.c, one.k, one.zeta)
        )
    ratio = float(finite_group_force(0.5, 4).ratio[0])
    slow = rom_coefficients(1e-6, 0.9, 2e4, group_size=4, force_ratio=ratio)
    assert slow.k == pytest.approx(0.02 * ratio) and slow.tau > 50.0
    with pytest.raises(ValueError, match="positive"):
        schedule_coefficients(np.array([1e-6, 0.0]), 0.9, 2e4)
    with pytest.raises(ValueError, match="force_ratio"):
        rom_coefficients(1e-6, 0.9, 2e4, force_ratio=0.0)
