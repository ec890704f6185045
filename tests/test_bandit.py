"""Softmax-bandit testbed: exact force and curvature, simulator equivalences, optimizers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.bandit.force import finite_group_force
from pgrpo.bandit.kappa import ForceModel, advantage_table, curvature, force
from pgrpo.bandit.optim import Adam, EmaMomentum, lr_factor
from pgrpo.bandit.policy import (
    DifficultyConfig,
    initial_success_probs,
    logit_gap,
    logits_from_success,
    success_probs,
)
from pgrpo.bandit.simulate import (
    BanditConfig,
    draw_rollouts,
    initial_logits,
    loss_gradient,
    simulate,
)
from pgrpo.core.losses import LossConfig
from pgrpo.dynamics.recursion import simulate_recursion

REWARD_KL = ForceModel(
    "dr_grpo", 8, LossConfig(policy_loss="reinforce"), kl_reward_coef=0.5, p_ref=0.119
)
LOSS_KL = ForceModel("grpo", 4, LossConfig(policy_loss="clipped", kl_coef=0.3), p_ref=0.3)


# ---------------------------------------------------------------------------------------------
# Exact force and curvature
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("estimator", ["grpo", "dr_grpo", "rloo", "sign"])
@pytest.mark.parametrize("g", [2, 4, 8])
def test_force_matches_dynamics_finite_group_force(estimator: str, g: int) -> None:
    """Without a KL, on-policy: F(d) = 2 F_G(p) (two logits; the dynamics module has one)."""
    p = np.array([0.05, 0.3, 0.5, 0.8])
    model = ForceModel(estimator, g, LossConfig(policy_loss="reinforce"))
    ours = force(model, np.log(p / (1 - p))).numpy()
    np.testing.assert_allclose(ours, 2 * finite_group_force(p, g, estimator).force, rtol=1e-9)


@pytest.mark.parametrize("model", [REWARD_KL, LOSS_KL], ids=["kl_in_reward", "kl_in_loss"])
def test_kappa_matches_finite_difference_of_exact_force(model: ForceModel) -> None:
    curv = curvature(model)
    assert abs(float(force(model, curv.d_star))) < 1e-10
    h = 1e-5
    fd = -(float(force(model, curv.d_star + h)) - float(force(model, curv.d_star - h))) / (2 * h)
    assert curv.kappa == pytest.approx(fd, rel=1e-6)
    fd_lag = -(
        float(force(model, curv.d_star, curv.d_star + h))
        - float(force(model, curv.d_star, curv.d_star - h))
    ) / (2 * h)
    assert curv.kappa_lag == pytest.approx(fd_lag, rel=1e-5, abs=1e-9)


def test_kl_in_reward_dr_grpo_closed_form() -> None:
    """Dr. GRPO with the KL in the reward: F = 2 (G-1)/G p(1-p) (1 - c (d - d_ref)); the fixed
    point is d_ref + 1/c and the whole curvature comes from the rollouts' state (exact lag)."""
    c, p_ref, g = 0.5, 0.119, 8
    curv = curvature(REWARD_KL)
    d_ref = math.log(p_ref / (1 - p_ref))
    assert curv.d_star == pytest.approx(d_ref + 1 / c, abs=1e-9)
    p = curv.p_star
    assert curv.kappa == pytest.approx(2 * (g - 1) / g * p * (1 - p) * c, rel=1e-9)
    assert curv.kappa_now == pytest.approx(0.0, abs=1e-12)


def test_kl_in_loss_force_is_current_not_lagged() -> None:
    """Dr. GRPO anchored by a k3 KL in the loss: the lag part of the curvature cancels exactly at
    the fixed point, so the stale-force model has nothing to act on."""
    model = ForceModel("dr_grpo", 8, LossConfig(policy_loss="reinforce", kl_coef=0.5), p_ref=0.2)
    curv = curvature(model)
    assert abs(curv.kappa_lag) < 1e-9 * curv.kappa
    assert curv.kappa > 0


def test_advantage_table_zero_on_degenerate_groups() -> None:
    a_pos, a_neg = advantage_table(ForceModel("grpo", 4))
    assert float(a_pos[4]) == 0.0 and float(a_neg[0]) == 0.0  # all-pass / all-fail
    assert float(a_pos[1]) > 0 > float(a_neg[1])


def test_no_fixed_point_and_z_score_with_reward_kl_fail_clearly() -> None:
    with pytest.raises(ValueError, match="no interior fixed point"):
        curvature(ForceModel("grpo", 4))
    with pytest.raises(ValueError, match="affine"):
        curvature(ForceModel("grpo", 4, kl_reward_coef=0.5, p_ref=0.2))
    with pytest.raises(ValueError, match="batch"):
        ForceModel("batch_std", 4)


# ---------------------------------------------------------------------------------------------
# Simulator: the mean update is the exact force; batched runs equal separate runs
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "estimator,loss,kl_reward,p_ref",
    [
        ("dr_grpo", LossConfig(policy_loss="reinforce"), 0.5, 0.119),
        ("grpo", LossConfig(policy_loss="clipped", kl_coef=0.3), 0.0, 0.3),
        ("sign", LossConfig(policy_loss="reinforce"), 0.0, None),
    ],
)
def test_mean_update_equals_exact_force(estimator, loss, kl_reward, p_ref) -> None:
    d0, lr, runs = 0.4, 1e-3, 20000
    cfg = BanditConfig(
        num_runs=runs,
        batch_prompts=1,
        group_size=4,
        steps=1,
        estimator=estimator,
        loss=loss,
        kl_reward_coef=kl_reward,
        p_ref=p_ref,
        lr=lr,
        initial_logit_gap=d0,
    )
    res = simulate(cfg)
    step = (res.gap[1] - res.gap[0]) / lr
    exact = float(force(ForceModel(estimator, 4, loss, kl_reward, p_ref or 0.5), d0))
    se = step.std() / math.sqrt(runs)
    assert abs(step.mean() - exact) < 4 * se + 1e-6


def test_batched_gradient_equals_each_run_alone() -> None:
    cfg = BanditConfig(
        num_runs=3,
        num_prompts=5,
        num_arms=3,
        batch_prompts=4,
        group_size=4,
        estimator="grpo",
        loss=LossConfig(policy_loss="clipped", kl_coef=0.1),
        difficulty=DifficultyConfig("beta", mean=0.4, concentration=2.0),
        seed=3,
    )
    z, ref = initial_logits(cfg)
    ro = draw_rollouts(cfg, z, ref, torch.Generator().manual_seed(0))
    z = z + 0.1 * torch.randn(z.shape, generator=torch.Generator().manual_seed(1), dtype=z.dtype)
    grad, _ = loss_gradient(cfg, z, ro)
    single = BanditConfig(**{**cfg.__dict__, "num_runs": 1})
    for r in range(3):
        one = type(ro)(*(getattr(ro, f)[r : r + 1] for f in type(ro).__annotations__))
        g1, _ = loss_gradient(single, z[r : r + 1], one)
        torch.testing.assert_close(grad[r : r + 1], g1, rtol=1e-10, atol=1e-12)


def test_refresh_interval_keeps_rollouts_between_refreshes() -> None:
    cfg = BanditConfig(num_runs=2, steps=6, refresh_interval=[1, 3], lr=0.5, seed=1)
    res = simulate(cfg)
    # run 1 (K = 3) scores the same rollouts on steps 0-2 and 3-5
    assert res.batch_reward[0, 1] == res.batch_reward[1, 1] == res.batch_reward[2, 1]
    assert res.batch_reward[3, 1] == res.batch_reward[5, 1]


def test_simulate_is_seeded_and_learns() -> None:
    cfg = BanditConfig(num_runs=4, num_prompts=8, steps=40, lr=1.0, seed=5)
    a, b = simulate(cfg), simulate(cfg)
    np.testing.assert_array_equal(a.success, b.success)
    assert a.success[-1].mean() > a.success[0].mean() + 0.1


# ---------------------------------------------------------------------------------------------
# Optimizers, schedules, policy helpers, config validation
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 4])
def test_ema_momentum_is_the_heavy_ball_recursion(k: int) -> None:
    """With a linear stale gradient kappa (z_s - z*), the EMA update is exactly the recursion of
    the dynamics notes with a = lr kappa (checked against pgrpo.dynamics.recursion)."""
    lr = torch.tensor([0.3, 0.5], dtype=torch.float64)
    beta1 = torch.tensor([0.0, 0.9], dtype=torch.float64)
    kappa, steps = 0.4, 30
    z = torch.ones(2, 1, 1, dtype=torch.float64)
    opt = EmaMomentum(z, lr=lr, beta1=beta1)
    xs, out = z.clone(), [z.flatten().numpy().copy()]
    for n in range(steps):
        if n % k == 0:
            xs = z.clone()
        z = opt.step(z, kappa * xs, lr)
        out.append(z.flatten().numpy().copy())
    ref = simulate_recursion(
        (lr * kappa).numpy()[:, None].repeat(steps, 1), beta1.numpy(), steps, refresh_interval=k
    )
    np.testing.assert_allclose(np.array(out).T, ref, rtol=1e-12, atol=1e-12)


def test_adam_matches_torch_adam() -> None:
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(2, 3, 2, generator=gen, dtype=torch.float64)
    param = torch.nn.Parameter(z.clone())
    ref = torch.optim.Adam([param], lr=0.01, betas=(0.8, 0.99), eps=1e-8)
    ours = Adam(z, lr=None, beta1=torch.full((2,), 0.8, dtype=torch.float64), beta2=0.99, eps=1e-8)
    for _ in range(5):
        g = torch.randn(z.shape, generator=gen, dtype=torch.float64)
        param.grad = g.clone()
        ref.step()
        z = ours.step(z, g, torch.full((2,), 0.01, dtype=torch.float64))
    torch.testing.assert_close(z, param.detach(), rtol=1e-10, atol=1e-12)


def test_lr_schedules() -> None:
    assert lr_factor("constant", 5, 10) == 1.0
    assert lr_factor("cosine", 0, 10) == 1.0 and lr_factor("cosine", 5, 10) == pytest.approx(0.5)
    assert lr_factor("linear", 5, 10) == pytest.approx(0.5)
    assert lr_factor("constant", 0, 10, warmup=4) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="lr_schedule"):
        lr_factor("step", 0, 10)


def test_difficulty_distributions() -> None:
    rng = np.random.default_rng(0)
    beta = initial_success_probs(
        DifficultyConfig("beta", mean=0.3, concentration=4.0), 50, 400, rng
    ).numpy()
    assert beta.mean() == pytest.approx(0.3, abs=0.01)
    assert beta.var() == pytest.approx(0.3 * 0.7 / 5.0, rel=0.1)  # Var = m(1-m)/(c+1)
    bim = initial_success_probs(DifficultyConfig("bimodal", high_frac=0.25), 20, 400, rng).numpy()
    assert set(np.unique(bim)) == {0.05, 0.9}
    assert (bim == 0.9).mean() == pytest.approx(0.25, abs=0.02)


def test_logits_round_trip_and_gap() -> None:
    p = torch.tensor([[0.1, 0.5, 0.97]], dtype=torch.float64)
    for m in (2, 5):
        z = logits_from_success(p, m)
        torch.testing.assert_close(success_probs(z), p)
        torch.testing.assert_close(logit_gap(z), torch.log(p / (1 - p)))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"lr": [0.1, 0.2]}, "lr has 2 values"),
        ({"beta1": 1.0}, "beta1"),
        ({"refresh_interval": 0}, "refresh_interval"),
        ({"p_ref": 0.3}, "no KL"),
        ({"optimizer": "sgd"}, "valid names"),
        ({"estimator": "grpo", "group_size": 1}, "group_size"),
        ({"lr_schedule": "exp"}, "lr_schedule"),
    ],
)
def test_config_errors_say_how_to_fix(kwargs, match) -> None:
    with pytest.raises((ValueError, KeyError), match=match):
        BanditConfig(num_runs=4, **kwargs)


@settings(max_examples=40, deadline=None)
@given(p=st.floats(0.01, 0.99), g=st.integers(2, 16))
def test_sign_force_is_scaled_dr_grpo_force(p: float, g: int) -> None:
    """The expected Sign gradient is 2G/(G-1) times Dr. GRPO's, for every p: the step-size
    confound the sign-vs-drgrpo control removes (notes/advantages.md section 1)."""
    d = math.log(p / (1 - p))
    sign = float(force(ForceModel("sign", g), d))
    dr = float(force(ForceModel("dr_grpo", g), d))
    assert sign == pytest.approx(2 * g / (g - 1) * dr, rel=1e-9)


def test_warmup_scales_the_first_update() -> None:
    base = {"num_runs": 8, "steps": 1, "lr": 0.4, "initial_logit_gap": -1.0, "seed": 2}
    const = simulate(BanditConfig(**base))
    warm = simulate(BanditConfig(**base, lr_schedule="cosine", warmup_steps=4))
    np.testing.assert_allclose(
        warm.gap[1] - warm.gap[0], 0.25 * (const.gap[1] - const.gap[0]), rtol=1e-12
    )


@pytest.mark.parametrize(
    "loss,kl_reward,p_ref",
    [
        (LossConfig(policy_loss="clipped", epsilon_low=0.2), 0.0, None),
        (LossConfig(policy_loss="clipped", kl_coef=0.3), 0.0, 0.3),
        (LossConfig(policy_loss="reinforce", kl_coef=0.3, kl_estimator="k2"), 0.0, 0.3),
        (LossConfig(policy_loss="reinforce"), 0.5, 0.2),
    ],
    ids=["clip", "clip_kl", "k2", "kl_in_reward"],
)
def test_stale_rollout_gradient_equals_lagged_force(loss, kl_reward, p_ref) -> None:
    """Rollouts drawn at d_s, gradient taken at d (ratio far outside the clip range): the mean
    over many runs is the exact F(d, d_s), clipping and KL included."""
    d_s, d, runs = -0.5, 0.4, 40000
    cfg = BanditConfig(
        num_runs=runs,
        batch_prompts=1,
        group_size=4,
        estimator="dr_grpo",
        loss=loss,
        kl_reward_coef=kl_reward,
        p_ref=p_ref,
        initial_logit_gap=d_s,
    )
    z_s, ref = initial_logits(cfg)
    ro = draw_rollouts(cfg, z_s, ref, torch.Generator().manual_seed(4))
    z = logits_from_success(torch.full((runs, 1), 1 / (1 + math.exp(-d)), dtype=torch.float64))
    grad, _ = loss_gradient(cfg, z, ro)
    step = -(grad[:, 0, 0] - grad[:, 0, 1]).numpy()  # d(z0 - z1) per unit lr
    model = ForceModel("dr_grpo", 4, loss, kl_reward, p_ref or 0.5)
    exact = float(force(model, d, d_s))
    assert abs(step.mean() - exact) < 4 * step.std() / math.sqrt(runs) + 1e-9


def test_kl_in_reward_force_is_exactly_stale() -> None:
    """Zero-sum advantages, no ratio, KL in the reward: the gradient does not depend on the
    current logits, so with K = 2 (no momentum) the second step on a batch repeats the first."""
    cfg = BanditConfig(
        num_runs=16,
        steps=4,
        refresh_interval=2,
        lr=0.7,
        kl_reward_coef=0.5,
        p_ref=0.2,
        initial_logit_gap=0.3,
        seed=7,
    )
    step = np.diff(simulate(cfg).gap, axis=0)
    np.testing.assert_allclose(step[1], step[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(step[3], step[2], rtol=1e-10, atol=1e-12)
    assert np.abs(step[2] - step[1]).max() > 1e-3  # a refresh changes the batch
