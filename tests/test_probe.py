"""pgrpo probe: the curvature probe agrees with the exact bandit kappa; runs on the tiny model."""

from __future__ import annotations

import json

import pytest
import torch

from pgrpo.bandit.kappa import ForceModel, curvature, force
from pgrpo.core.losses import LossConfig
from pgrpo.measure.probe import (
    ProbeConfig,
    bandit_exact_gradient,
    bandit_sampled_gradient,
    probe_curvature,
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
        ProbeConfig(epsilon=0.01, n_pairs=12, n_direction=4, seed=3),
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
        "--json",
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert len(out["samples"]) == 2 and out["stderr"] >= 0
    assert out["lr"] == 3e-3 and out["refresh_interval"] == 1
    assert out["precision"] == "fp32"  # auto probes in fp32
    assert out["metrics"]["gPg"] > 0
    assert out["noise_dominated"] == (out["stderr"] > 0.5 * abs(out["kappa"]))
    assert (out["prediction"] is None) == (out["kappa"] <= 0)
    if out["prediction"] is not None:
        assert out["prediction"]["regime"] in ("overdamped", "critical", "underdamped", "unstable")
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
