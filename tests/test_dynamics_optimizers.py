"""Optimizer reductions: registry, exactness of the window maps, the Adam closure against the
exact Adam update and short bandit simulations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo._registry import UnknownNameError
from pgrpo.bandit.experiments.threshold import ThresholdConfig, _bandit, force_model
from pgrpo.bandit.kappa import curvature, force
from pgrpo.bandit.simulate import simulate
from pgrpo.dynamics.optimizers import (
    OPTIMIZER_REDUCTIONS,
    OptimizerSettings,
    adam_self_consistent,
    adam_step_bound,
    reduce_optimizer,
    window_maps,
    window_noise_gain,
    window_threshold,
)
from pgrpo.dynamics.recursion import monodromy, refresh_threshold, simulate_recursion

A = st.floats(0.02, 0.5)
# beta1 = 0 or >= 1e-6: a denormal beta1 underflows m k in model.damping_ratio (not ours)
BETA = st.one_of(st.just(0.0), st.floats(1e-6, 0.95))
K = st.integers(1, 40)


def test_registry_lists_valid_names_and_refuses_duplicates() -> None:
    assert OPTIMIZER_REDUCTIONS.names() == ["adam", "sgd_momentum"]
    with pytest.raises(UnknownNameError, match="adam, sgd_momentum"):
        reduce_optimizer("adamw", OptimizerSettings(lr=1e-3, kappa=10.0))
    with pytest.raises(ValueError, match="already registered"):
        OPTIMIZER_REDUCTIONS.add("adam", lambda s: None)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("lr", 0.0, "lr"),
        ("beta1", 1.0, "beta1"),
        ("beta2", 1.0, "beta2"),
        ("grad_rms", -1.0, "grad_rms"),
    ],
)
def test_settings_validate(field, value, message) -> None:
    kwargs = {"lr": 1e-3, "kappa": 10.0, field: value}
    with pytest.raises(ValueError, match=message):
        OptimizerSettings(**kwargs)


@settings(max_examples=40, deadline=None)
@given(A, BETA, K)
def test_window_map_eigenvalues_are_the_monodromy_eigenvalues(a, beta1, k) -> None:
    A_, _ = window_maps(a, beta1, k)
    ours = np.sort_complex(np.linalg.eigvals(A_))
    full = np.linalg.eigvals(monodromy(a, beta1, k))
    full = np.sort_complex(full[np.argsort(np.abs(full))][1:])  # drop the structural zero
    np.testing.assert_allclose(ours, full, atol=1e-9 * max(1.0, np.abs(full).max()))


@settings(max_examples=30, deadline=None)
@given(st.floats(0.05, 0.5), BETA)
def test_sgd_momentum_k_star_is_the_exact_recursion_threshold(a, beta1) -> None:
    red = reduce_optimizer("sgd_momentum", OptimizerSettings(lr=a / 4.0, kappa=4.0, beta1=beta1))
    assert red.K_star == refresh_threshold(a, beta1).K_star
    assert red.a == pytest.approx(a)
    assert red.diverges(red.K_star) and not red.diverges(red.K_star - 1)
    # a tiny current-force fraction does not move it, the general scan agrees with the 3x3 one
    assert window_threshold(a, beta1, 1e-12) == red.K_star


def test_current_force_fraction_moves_k_star_as_measured_on_the_bandit() -> None:
    # a = 0.2, beta1 = 0.5 with 2.2% of kappa acting on the current logits (the bandit's k3 KL
    # in the loss): the all-stale recursion says 12, the split one 13 (measured 13)
    assert window_threshold(0.2, 0.5, 0.0) == 12
    assert window_threshold(0.2, 0.5, 0.0218) == 13


@settings(max_examples=30, deadline=None)
@given(st.floats(0.02, 0.5), st.integers(1, 30))
def test_window_noise_gain_closed_form_without_momentum(a, k) -> None:
    expected = k * k / (a * k * (2.0 - a * k)) if a * k < 2.0 - 1e-6 else math.inf
    got = window_noise_gain(a, 0.0, k)
    if math.isinf(expected):
        assert math.isinf(got)
    else:
        assert got == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(("a", "beta1", "k"), [(0.1, 0.9, 5), (0.05, 0.5, 12), (0.2, 0.0, 1)])
def test_window_noise_gain_matches_simulated_recursion(a, beta1, k) -> None:
    # one noise draw per window, held for its K steps: Var(x at window starts) -> Phi
    rng = np.random.default_rng(0)
    runs, windows = 4000, 60
    e = np.repeat(rng.normal(size=(runs, windows)), k, axis=1)
    x = simulate_recursion(a, beta1, windows * k, refresh_interval=k, x0=0.0, noise=e)
    starts = x[:, np.arange(windows // 2, windows) * k]
    assert starts.var() == pytest.approx(window_noise_gain(a, beta1, k), rel=0.06)


@settings(max_examples=25, deadline=None)
@given(st.floats(0.01, 0.4), BETA, st.integers(1, 200))
def test_adam_closure_solves_its_equation(a0, beta1, k) -> None:
    w, rms = adam_self_consistent(a0, beta1, k)
    phi = window_noise_gain(a0 / w, beta1, k)
    assert math.isfinite(phi)  # the self-consistent window map is always stable
    assert w * w == pytest.approx(1.0 + (a0 / w) ** 2 * phi, rel=1e-8)
    assert rms == pytest.approx(math.sqrt(w * w - 1.0))


def test_adam_rms_tends_to_lr_k_over_two_without_momentum() -> None:
    # large K, beta1 = 0: RMS of x_s -> lr K / 2 in the normalised coordinate, i.e. a0 K / 2 in
    # units of the noise scale sigma / kappa
    for a0, k in [(0.1, 400), (0.05, 1000)]:
        _, rms = adam_self_consistent(a0, 0.0, k)
        assert rms == pytest.approx(a0 * k / 2.0, rel=0.02)


def test_adam_states_no_threshold_and_gives_the_linear_one() -> None:
    s = OptimizerSettings(lr=1e-6, kappa=2e4, beta1=0.9, refresh_interval=500)
    red = reduce_optimizer("adam", s)
    assert red.K_star is None and not red.diverges(10**6)
    assert "no divergence threshold" in red.K_statement
    assert red.metrics["linear_threshold"] == refresh_threshold(0.02, 0.9).K_star == 118
    assert red.a < red.metrics["noise_only_a"]  # v above the noise: a smaller effective step
    assert window_noise_gain(red.a, 0.9, 500) < math.inf


def _bandit_scales():
    model = force_model(ThresholdConfig(), False)
    return model, curvature(model, batch_prompts=8)


def test_adam_linearisation_matches_finite_difference_of_the_exact_adam_update() -> None:
    # Expected Adam step of the bandit's d from the fixed point, m = 0, v frozen at its value
    # there (grad_rms^2 per logit), no bias correction: dd = 2 lr (1 - b1) E[g0] / sqrt(v).
    model, curv = _bandit_scales()
    lr, beta1, eps = 1e-4, 0.9, 1e-8

    def step(d, d_s):
        g0 = float(force(model, d, d_s)) / 2.0  # the z0 ascent gradient
        return 2.0 * lr * (1.0 - beta1) * g0 / (curv.grad_rms + eps)

    h = 1e-5
    d0 = curv.d_star
    slope_lag = (step(d0, d0 + h) - step(d0, d0 - h)) / (2 * h)
    slope_now = (step(d0 + h, d0) - step(d0 - h, d0)) / (2 * h)
    s = OptimizerSettings(
        lr=2 * lr,
        kappa=curv.kappa,
        beta1=beta1,
        eps=2 * eps,
        grad_rms=2 * curv.grad_rms,
        current_fraction=curv.kappa_now / curv.kappa,
    )
    red = reduce_optimizer("adam", s)
    a0, f = red.metrics["noise_only_a"], s.current_fraction
    assert -slope_lag == pytest.approx((1 - beta1) * a0 * (1 - f), rel=1e-5)
    assert -slope_now == pytest.approx((1 - beta1) * a0 * f, rel=1e-4)


def _run(optimizer, lr, beta1, k, steps, start, runs=16, seed=0):
    model, curv = _bandit_scales()
    cfg = ThresholdConfig(seed=seed)
    bc = _bandit(
        cfg,
        model,
        optimizer,
        num_runs=runs,
        steps=steps,
        lr=lr,
        beta1=beta1,
        refresh_interval=k,
        initial_logit_gap=curv.d_star + start,
    )
    x = simulate(bc).gap - curv.d_star
    idx = np.arange(0, steps + 1, k)
    return x[idx[idx >= 2 * steps // 3]]


def test_bandit_adam_bounded_where_sgd_at_the_same_a_diverges() -> None:
    # a0 = 0.2, beta1 = 0: noise-only K_lin = 11; at K = 36 (3.3 K_lin) SGD momentum at the same
    # a diverges, Adam stays at the closure's RMS
    model, curv = _bandit_scales()
    sigma, kappa = 2 * curv.grad_rms, curv.kappa
    s_noise = sigma / kappa
    lr_adam = 0.2 * sigma / (2 * kappa)
    k = 36
    red = reduce_optimizer(
        "adam",
        OptimizerSettings(
            lr=2 * lr_adam, kappa=kappa, beta1=0.0, refresh_interval=k, grad_rms=sigma
        ),
    )
    assert red.metrics["linear_threshold"] <= 12 and red.K_star is None
    late = _run("adam", lr_adam, 0.0, k, steps=36 * 30, start=s_noise)
    rms = float(np.sqrt((late**2).mean()))
    assert rms / red.metrics["rms_deviation"] == pytest.approx(1.0, abs=0.3)
    sgd = _run("ema", 0.2 / kappa, 0.0, k, steps=36 * 6, start=0.02)
    assert np.abs(sgd.mean(1)).max() > 10 * 0.02  # the heavy-ball mean has blown up


def test_bandit_adam_rms_at_k1_matches_closure() -> None:
    model, curv = _bandit_scales()
    sigma, kappa = 2 * curv.grad_rms, curv.kappa
    lr_adam = 0.1 * sigma / (2 * kappa)
    red = reduce_optimizer(
        "adam",
        OptimizerSettings(
            lr=2 * lr_adam, kappa=kappa, beta1=0.9, refresh_interval=1, grad_rms=sigma
        ),
    )
    late = _run("adam", lr_adam, 0.9, 1, steps=900, start=sigma / kappa, runs=32)
    rms = float(np.sqrt((late**2).mean()))
    assert rms / red.metrics["rms_deviation"] == pytest.approx(1.0, abs=0.15)


@settings(max_examples=25, deadline=None)
@given(st.floats(0.005, 0.8), st.floats(0.0, 0.99), st.integers(1, 300))
def test_adam_closure_has_one_root(a0, beta1, k) -> None:
    # w^2 - 1 - (a0/w)^2 Phi(a0/w) changes sign exactly once on w in [1, 1e4]
    ws = np.geomspace(1.0, 1e4, 300)
    vals = []
    for w in ws:
        phi = window_noise_gain(a0 / w, beta1, k)
        vals.append(w * w - 1.0 - ((a0 / w) ** 2 * phi if math.isfinite(phi) else math.inf))
    signs = np.sign(vals)
    assert int(np.sum(signs[1:] != signs[:-1])) == 1


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from([(0.0, 0.999), (0.9, 0.999), (0.9, 0.99), (0.5, 0.9)]), st.integers(0, 10**6)
)
def test_adam_step_never_exceeds_its_bound(betas, seed) -> None:
    # random heavy-tailed gradient sequences, and the worst case the bound is built on
    beta1, beta2 = betas
    bound = adam_step_bound(beta1, beta2)
    rng = np.random.default_rng(seed)
    t = int(rng.integers(1, 400))
    worst = (beta1 / beta2) ** np.arange(t - 1, -1, -1.0)
    for g in (rng.standard_cauchy(t), worst):
        m = v = 0.0
        for gn in g:
            m = beta1 * m + (1 - beta1) * gn
            v = beta2 * v + (1 - beta2) * gn * gn
        step = abs(m / (1 - beta1**t)) / math.sqrt(v / (1 - beta2**t))
        assert step <= bound * (1 + 1e-9)
    assert math.isinf(adam_step_bound(0.99, 0.9))  # b1^2 >= b2: no uniform bound


@pytest.mark.parametrize("eps_over_sigma", [0.0, 0.1, 1.0, 10.0])
def test_adam_closure_solves_at_the_stiffness_it_reports(eps_over_sigma):
    """With eps ~ grad_rms the closure solved w^2 = 1 + (a0/w)^2 Phi(a0/w) while the reduction
    reported a = lr kappa / (w sigma + eps): at sigma = eps the reported a was not self-consistent
    (residual 196) and predict's mean ran to -5191 for a reward in [0.2, 0.8] (review
    2026-12-03). The reported a must solve w^2 = 1 + a^2 Phi(a)."""
    from pgrpo.dynamics.optimizers import window_noise_gain
    from pgrpo.dynamics.predict import predict

    sigma = 1e-8
    eps = eps_over_sigma * sigma
    settings_ = OptimizerSettings(lr=1e-3, kappa=1e-6, beta1=0.0, refresh_interval=300,
                                  grad_rms=sigma, eps=eps)  # fmt: skip
    red = reduce_optimizer("adam", settings_)
    w2 = red.metrics["second_moment_ratio"]
    assert w2 - 1.0 == pytest.approx(red.a**2 * window_noise_gain(red.a, 0.0, 300), rel=1e-8)
    assert red.a == pytest.approx(1e-3 * 1e-6 / (w2**0.5 * sigma + eps))
    pred = predict(1e-3, 0.0, 1e-6, refresh_interval=300, optimizer="adam", grad_rms=sigma,
                   n_steps=3000, R0=0.2, R_inf=0.8)  # fmt: skip
    assert -0.5 < pred.metrics["final_mean"] < 1.5  # eps = 1e-8 (the default) as in the report
