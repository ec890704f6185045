"""`group-size`: the mean trajectory across G, the plateau variance x G, and the residual
G-dependence from the exact finite-G force.

Setting: one prompt, two arms, std-normalised GRPO advantages, the KL to the reference in the
loss (k3: an interior plateau with sampling noise), SGD with EMA momentum, the same lr for every
G and a fixed number of prompts per step B. For each G:

- the measured mean trajectory of the expected reward R_n (mean over runs of p), compared with the
  deterministic trajectory of the exact finite-G force (`pgrpo.bandit.kappa.force` iterated with
  the same momentum; no fitting) and with the G = max trajectory: the residual G-dependence;
- the plateau: measured mean vs the exact fixed point p*(G);
- the plateau variance of the observed batch reward (what a training log shows: the dynamical
  fluctuation plus the white measurement noise p(1 - p) / (B G)) and of the policy's expected
  reward R alone, each x G; the latter against the exact stationary variance of the recursion
  with the exact per-step gradient variance
  (`pgrpo.dynamics.recursion.discrete_stationary_variance`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pgrpo.bandit.experiments.base import ExperimentResult, check_seeds, config_dict
from pgrpo.bandit.force import finite_group_force
from pgrpo.bandit.kappa import ForceModel, curvature, force, group_gradient_moments
from pgrpo.bandit.simulate import BanditConfig, simulate
from pgrpo.core.losses import LossConfig
from pgrpo.dynamics.recursion import discrete_stationary_variance


@dataclass(frozen=True)
class GroupSizeConfig:
    """Defaults: the documented run of `pgrpo reproduce group-size`."""

    group_sizes: tuple[int, ...] = (2, 4, 8, 16)
    estimators: tuple[str, ...] = ("rloo", "grpo")
    """rloo's expected force is exactly G-invariant; grpo's keeps the degenerate-group residual."""
    batch_prompts: int = 8
    kl_coef: float = 0.2
    p_ref: float = 0.2
    lr: float = 0.2
    beta1: float = 0.9
    p0: float = 0.1
    steps: int = 400
    burn_in: int = 200
    """Steps before the plateau statistics start."""
    seeds: int = 64
    seed: int = 0


def mean_field_trajectory(
    model: ForceModel, d0: float, lr: float, beta1: float, steps: int
) -> np.ndarray:
    """Logit gap d_n [steps + 1] under the exact expected force with EMA momentum (no noise)."""
    d, v = d0, 0.0
    out = np.empty(steps + 1)
    out[0] = d
    for n in range(steps):
        v = beta1 * v + (1 - beta1) * float(force(model, d))
        d = d + lr * v
        out[n + 1] = d
    return out


def _predicted_variance(model: ForceModel, cfg: GroupSizeConfig) -> tuple[float, float]:
    """(p*, exact stationary Var(R) of the linearised recursion at p*)."""
    curv = curvature(model, batch_prompts=cfg.batch_prompts)
    _, var_group = group_gradient_moments(model, curv.d_star)
    noise = cfg.lr**2 * 4.0 * var_group / cfg.batch_prompts  # per-step variance of lr * F_hat
    var_d = discrete_stationary_variance(cfg.lr * curv.kappa, cfg.beta1, noise)
    slope = curv.p_star * (1 - curv.p_star)  # dR / dd
    return curv.p_star, var_d * slope**2


def _rows_for(cfg: GroupSizeConfig, estimator: str, series: dict) -> list[dict]:
    d0 = math.log(cfg.p0 / (1 - cfg.p0))
    # the textbook k3, uncapped: at G = 16 GRPO's KL-anchored plateau (p* 0.950) lies where a
    # capped k3 (LossConfig.k3_max, verl's 10) no longer pulls, and it has no fixed point
    loss = LossConfig(policy_loss="reinforce", kl_coef=cfg.kl_coef, k3_max=None)
    rows = []
    ref_traj = None
    for g in sorted(cfg.group_sizes, reverse=True):
        model = ForceModel(estimator, g, loss, p_ref=cfg.p_ref)
        res = simulate(
            BanditConfig(
                num_runs=cfg.seeds,
                batch_prompts=cfg.batch_prompts,
                group_size=g,
                steps=cfg.steps,
                estimator=estimator,
                loss=loss,
                p_ref=cfg.p_ref,
                optimizer="ema",
                lr=cfg.lr,
                beta1=cfg.beta1,
                initial_logit_gap=d0,
                seed=cfg.seed + g,
            )
        )
        mean = res.success.mean(1)
        det = 1 / (1 + np.exp(-mean_field_trajectory(model, d0, cfg.lr, cfg.beta1, cfg.steps)))
        ref_traj = mean if ref_traj is None else ref_traj
        p_star, var_pred = _predicted_variance(model, cfg)
        tail = slice(cfg.burn_in + 1, None)
        # variance across runs at each step, averaged over the plateau (no autocorrelation bias)
        var_r = float(res.success[tail].var(axis=1, ddof=1).mean())
        var_obs = float(res.batch_reward[cfg.burn_in :].var(axis=1, ddof=1).mean())
        plateau = float(res.success[tail].mean())
        rows.append(
            {
                "estimator": estimator,
                "G": g,
                "plateau": plateau,
                "p_star": p_star,
                "max_dev_mean_field": float(np.abs(mean - det).max()),
                "max_dev_vs_largest_G": float(np.abs(mean - ref_traj).max()),
                "var_obs_x_G": var_obs * g,
                "var_obs_x_G_over_pq": var_obs * g / (plateau * (1 - plateau)),
                "var_R_x_G": var_r * g,
                "var_R_pred_x_G": var_pred * g,
                "force_ratio_p05": float(finite_group_force(0.5, g, estimator).ratio[0]),
            }
        )
        series[f"{estimator} G={g}"] = {"mean": mean.tolist(), "mean_field": det.tolist()}
    return sorted(rows, key=lambda r: r["G"])


def _spread(values: list[float]) -> float:
    """Largest relative deviation from the mean."""
    v = np.asarray(values)
    return float(np.abs(v / v.mean() - 1).max())


def run_group_size(cfg: GroupSizeConfig) -> ExperimentResult:
    check_seeds(cfg.seeds)
    series: dict = {}
    rows, metrics = [], {}
    for est in cfg.estimators:
        part = _rows_for(cfg, est, series)
        rows += part
        metrics[f"{est}/var_obs_x_G_spread"] = _spread([r["var_obs_x_G"] for r in part])
        metrics[f"{est}/var_obs_x_G_over_pq_spread"] = _spread(
            [r["var_obs_x_G_over_pq"] for r in part]
        )
        metrics[f"{est}/var_R_x_G_spread"] = _spread([r["var_R_x_G"] for r in part])
        metrics[f"{est}/max_dev_mean_field"] = max(r["max_dev_mean_field"] for r in part)
    return ExperimentResult(
        name="group-size",
        columns=(
            "estimator",
            "G",
            "plateau",
            "p_star",
            "max_dev_mean_field",
            "max_dev_vs_largest_G",
            "var_obs_x_G",
            "var_obs_x_G_over_pq",
            "var_R_x_G",
            "var_R_pred_x_G",
            "force_ratio_p05",
        ),
        rows=rows,
        series=series,
        metrics=metrics,
        config=config_dict(cfg),
    )
