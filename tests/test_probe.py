"""pgrpo probe: the curvature probe agrees with the exact bandit kappa; runs on the tiny model."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.bandit.kappa import ForceModel, curvature, force
from pgrpo.core.losses import LossConfig
from pgrpo.errors import MAX_SEED
from pgrpo.measure.probe import (
    ProbeConfig,
    bandit_exact_gradient,
    bandit_sampled_gradient,
    probe_curvature,
    probe_seeds,
)

MODEL = ForceModel(group_size=8, loss=LossConfig(policy_loss="reinforce", kl_coef=0.2), p_ref=0.5)


def _theta(d: float) -> torch.Tensor:
    return torch.tensor([d / 2, -d / 2], dtype=torch.float64)


def _minus_force_slope(d: float) -> float:
    dd = torch.tensor(d, dtype=torch.float64, requires_grad=True)
    (slope,) = torch.autograd.grad(force(MODEL, dd), dd)
    return -float(slope)


@pytest.mark.parametrize("offset", [-1.0, -0.3, -0.02])
def test_probe_with_exact_expected_gradient_is_the_exact_curvature(offset):
    """With the exact expected gradient the probe is -dF/dd at the probe point, and tends to
    `curvature().kappa` (the fixed-point kappa of pgrpo.bandit) as the point approaches d*."""
    exact = curvature(MODEL)
    d = exact.d_star + offset
    cfg = ProbeConfig(epsilon=1e-4, preconditioner="sgd", n_pairs=2, n_direction=1)
    res = probe_curvature(bandit_exact_gradient(MODEL), _theta(d), cfg)
    assert res.kappa == pytest.approx(_minus_force_slope(d), rel=1e-3)
    if abs(offset) < 0.05:
        assert res.kappa == pytest.approx(exact.kappa, rel=0.05)


def test_sampled_probe_agrees_within_its_uncertainty():
    d = curvature(MODEL).d_star - 0.3
    cfg = ProbeConfig(epsilon=0.5, preconditioner="sgd", n_pairs=12, n_direction=4, seed=3)
    res = probe_curvature(bandit_sampled_gradient(MODEL, 1000), _theta(d), cfg)
    truth = _minus_force_slope(d)
    assert res.stderr > 0
    assert abs(res.kappa - truth) < 4 * res.stderr + 0.02 * truth
    # Adam: both logits get the same preconditioner p = 1 / rms(g0), so kappa per unit lr is
    # kappa * p (the bandit's `kappa_adam` = kappa / grad_rms)
    adam = probe_curvature(
        bandit_sampled_gradient(MODEL, 1000),
        _theta(d),
        ProbeConfig(epsilon=0.01, preconditioner="adam", n_pairs=12, n_direction=4, seed=3),
    )
    scaled = truth * adam.metrics["preconditioner_mean"]
    assert abs(adam.kappa - scaled) < 4 * adam.stderr + 0.05 * scaled


def test_probe_rejects_a_zero_gradient():
    d_star = curvature(MODEL).d_star
    with pytest.raises(ValueError, match="expected gradient is zero"):
        probe_curvature(
            lambda th, s: torch.zeros(2, dtype=torch.float64),
            _theta(d_star),
            ProbeConfig(preconditioner="sgd"),
        )
    with pytest.raises(ValueError, match="preconditioner"):
        ProbeConfig(preconditioner="lbfgs")
    with pytest.raises(ValueError, match="needs preconditioner"):  # unset: the run's, not here
        probe_curvature(bandit_exact_gradient(MODEL), _theta(d_star - 1), ProbeConfig())


@settings(max_examples=50, deadline=None)
@given(st.integers(0, MAX_SEED), st.integers(0, MAX_SEED))
def test_probe_seeds_are_independent_replicates(a, b):
    """Two probe seeds share no batch (seed + i and seed + 10000 + i made --seed 0 and 1 share 7
    of 8 pairs), no direction batch is a pair's, and more pairs keep the first ones."""
    dirs, pairs = probe_seeds(a, 4, 8)
    assert not set(dirs) & set(pairs) and len(set(pairs)) == 8
    assert all(0 <= s <= MAX_SEED for s in dirs + pairs)
    assert probe_seeds(a, 6, 12) == (probe_seeds(a, 6, 8)[0], probe_seeds(a, 6, 12)[1])
    assert probe_seeds(a, 4, 12)[1][:8] == pairs and probe_seeds(a, 6, 8)[0][:4] == dirs
    if a != b:
        assert not set(dirs + pairs) & set(sum(probe_seeds(b, 4, 8), []))


def test_probe_curvature_draws_its_batches_from_probe_seeds_and_counts_zero_pairs():
    """The direction batches, then each pair at both ends, with `probe_seeds`' seeds; a pair
    whose two gradients are equal (every group degenerate) counts in zero_pairs."""
    cfg = ProbeConfig(preconditioner="sgd", n_pairs=3, n_direction=2, seed=5, epsilon=0.1)
    dirs, pairs = probe_seeds(5, 2, 3)
    seen = []

    def grad_fn(theta: torch.Tensor, seed: int) -> torch.Tensor:
        seen.append(seed)
        flat = seed == pairs[0]  # this pair's batches: no gradient change along u
        return torch.ones(2, dtype=torch.float64) if flat else -2.0 * (theta - 1)

    res = probe_curvature(grad_fn, torch.zeros(2, dtype=torch.float64), cfg)
    assert seen == dirs + [s for s in pairs for _ in range(2)]
    assert res.zero_pairs == 1 == res.metrics["zero_pairs"]
    assert res.samples[0] == 0 and res.samples[1:] == pytest.approx((2.0, 2.0))


def test_cli_probe_tiny_model():
    """End to end on the tiny model (the warm-up cache is shared with tests/test_train.py)."""
    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()
    args = [
        "probe",
        "model.name=tiny",
        "model.tiny_hidden=32",
        "model.tiny_warmup_steps=60",
        "task.options={levels: [1], n: 200}",
        "grpo.group_size=8",
        "grpo.batch_prompts=4",
        "generation.max_new_tokens=4",
        "optim.lr=3e-3",
        "--pairs",
        "2",
        "--direction-batches",
        "2",
        "--seed",
        "1",  # seeds 0, 2, 3 and 5 draw only degenerate groups at this budget (no measurement)
        "--json",
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert len(out["samples"]) == 2
    assert out["lr"] == 3e-3 and out["refresh_interval"] == 1
    assert out["precision"] == "fp32"  # auto probes in fp32
    assert out["metrics"]["gPg"] > 0
    assert out["optimizer"] == "adam" and out["preconditioner"] == "adam"  # AdamW's
    assert 0 <= out["zero_pairs"] <= 2
    if out["kappa"] is None:  # both pairs exactly zero at this tiny budget: said, no number
        assert out["zero_pairs"] == 2 and "no measurement" in out["note"]
        return
    assert out["stderr"] >= 0 and out["noise_dominated"] == (
        out["stderr"] >= 0.5 * abs(out["kappa"])
    )
    assert (out["prediction"] is None) == (out["kappa"] <= 0)
    if out["prediction"] is not None:
        assert out["prediction"]["regime"] in ("overdamped", "critical", "underdamped", "unstable")
        assert out["prediction"]["refresh_threshold"] is None  # adam: no K*
        assert out["predict_command"].startswith("pgrpo predict --optimizer adam ")
    else:
        assert "no restoring force" in out["note"]


def test_cli_probe_early_in_a_run(tmp_path):
    """--run RUN_DIR probes at the run's latest checkpoint with the run's own config."""
    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app
    from pgrpo.train.config import load_config
    from pgrpo.train.trainer import train

    cfg = load_config(
        None,
        [
            "model.name=tiny",
            "model.tiny_hidden=32",
            "model.tiny_warmup_steps=60",
            "task.options={levels: [1], n: 200}",
            "steps=2",
            "group_size=4",
            "batch_prompts=2",
            "max_new_tokens=4",
            "lr=3e-3",
            "forecast_every=0",
            "checkpoint_every=1",
            f"run.output_dir={tmp_path}",
            "run.name=r",
        ],
    )
    train(cfg)
    _load_commands()
    missing = CliRunner().invoke(app, ["probe", "--run", str(tmp_path / "none")])
    assert missing.exit_code != 0
    res = CliRunner().invoke(
        app,
        [
            "probe",
            "--run",
            str(tmp_path / "r"),
            "--pairs",
            "2",
            "--direction-batches",
            "1",
            "--json",
        ],
    )
    if res.exit_code != 0:  # every sampled group degenerate at this tiny budget: said, not hidden
        assert res.exit_code == 2 and "expected gradient is zero" in res.output
        return
    out = json.loads(res.stdout)
    assert out["lr"] == 3e-3 and len(out["samples"]) == 2


def _noisy_quadratic(noise: float):
    """ascent gradient of a 6-d quadratic of known Hessian (eigenvalues 0.1-10) plus seeded
    noise: CRN pairs cancel the noise exactly, so only the direction carries it."""
    gen = torch.Generator().manual_seed(0)
    q, _ = torch.linalg.qr(torch.randn(6, 6, generator=gen, dtype=torch.float64))
    h = q @ torch.diag(torch.tensor([0.1, 0.5, 1, 2, 5, 10.0], dtype=torch.float64)) @ q.T
    target = torch.randn(6, generator=gen, dtype=torch.float64)

    def grad_fn(theta: torch.Tensor, seed: int) -> torch.Tensor:
        z = torch.randn(6, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        return -h @ (theta - target) + noise * z

    return grad_fn


def test_the_standard_error_includes_the_directions_noise():
    """Pairs along one noisy direction agree to round-off (the old stderr was ~1e-15 while
    kappa moved by +-0.9 between seeds); the jackknife over direction batches sees that spread."""
    theta = torch.zeros(6, dtype=torch.float64)
    kappas, errors = [], []
    for seed in range(30):
        cfg = ProbeConfig(epsilon=0.01, preconditioner="sgd", n_direction=4, n_pairs=8, seed=seed)
        res = probe_curvature(_noisy_quadratic(4.0), theta, cfg)
        assert "jackknife over direction batches" in res.stderr_kind
        kappas.append(res.kappa)
        errors.append(res.stderr)
    spread = float(np.std(kappas))
    assert 0.5 * spread < float(np.median(errors)) < 1.5 * spread
    one = probe_curvature(
        _noisy_quadratic(4.0), theta, ProbeConfig(epsilon=0.01, preconditioner="sgd", n_direction=1)
    )
    assert one.stderr_kind == "pairs only"


def test_adams_preconditioner_comes_from_the_rows_the_optimizer_sees():
    """With grpo.num_minibatches = M the trainer's Adam sees M minibatch gradients per batch, not
    their mean: v (and P) come from the rows; g is their mean."""
    rows = torch.tensor([[3.0, 1.0], [-1.0, 1.0]], dtype=torch.float64)  # mean (1, 1)

    def grad_fn(theta: torch.Tensor, seed: int) -> torch.Tensor:
        return rows - theta  # both rows move with theta: H = -I

    cfg = ProbeConfig(epsilon=1e-3, preconditioner="adam", n_direction=2, n_pairs=2)
    res = probe_curvature(grad_fn, torch.zeros(2, dtype=torch.float64), cfg)
    p = 1 / rows.pow(2).mean(0).sqrt()  # (1 / sqrt(5), 1), not 1 / |mean| = (1, 1)
    assert res.metrics["preconditioner_mean"] == pytest.approx(float(p.mean()))
    assert res.metrics["rows_per_batch"] == 2
    g = rows.mean(0)
    assert res.kappa == pytest.approx(float((p * g) @ (p * g) / (g @ (p * g))))


def test_lm_gradient_rows_are_the_trainers_minibatch_gradients(tmp_path):
    """grpo.num_minibatches = 2: the probe's batch gives the two minibatch gradients (row 0 is the
    trainer's first optimizer step's) and its mean reward; grad_fn returns those rows."""
    from train_checks import first_step_gradients

    from pgrpo.measure.probe import batch_gradients, lm_gradient
    from pgrpo.train.config import load_config
    from pgrpo.train.setup import build_run

    cfg = load_config(None, [
        "model.name=tiny", "model.tiny_hidden=32", "model.tiny_warmup_steps=60",
        "task.options={levels: [1], n: 200}", "group_size=4", "batch_prompts=4", "max_new_tokens=4",
        "grpo.num_minibatches=2", "grpo.refresh_interval=2", "optim.max_grad_norm=0",
        "torch_threads=1", f"run.output_dir={tmp_path}",
    ])  # fmt: skip
    run = build_run(cfg, resume=False)
    position = run.stream.position()
    examples = run.stream.next_batch(cfg.grpo.batch_prompts)
    run.stream.restore(position)
    for seed in range(50):  # a batch with some reward spread: a gradient that is not 0 = 0
        out = batch_gradients(run.policy, run.task, examples, cfg, seed=seed)
        if bool(out.rows.any()):
            break
    assert out.rows.shape[0] == 2 and not torch.equal(out.rows[0], out.rows[1])
    assert 0 < out.reward_mean < 1
    metrics, grads = first_step_gradients(run, seed)
    assert metrics["reward"] == pytest.approx(out.reward_mean)
    torch.testing.assert_close(-out.rows[0].float(), grads[0], atol=1e-6, rtol=1e-5)
    grad_fn, theta0 = lm_gradient(run.policy, run.task, examples, cfg)
    assert grad_fn(theta0, 3).shape == (2, theta0.numel()) and 3 in grad_fn.reward_means
