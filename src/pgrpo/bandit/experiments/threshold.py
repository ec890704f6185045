"""`threshold` and `transition`: the refresh-interval threshold and the oscillation onset.

Setting (the exact reduction of docs/dynamics.md): one prompt, two arms, Dr. GRPO advantages,
the KL to the reference in the reward (verl's use_kl_in_reward), no importance ratio, SGD with
EMA momentum. The expected force then depends on the rollouts' state only, so the mean logit gap
follows x_{n+1} - x_n = beta1 (x_n - x_{n-1}) - (1 - beta1) a x_{s(n)} with a = lr * kappa near
the fixed point, kappa from the exact force (`pgrpo.bandit.kappa`), no trajectory involved.

Measurement. R runs start displaced from the fixed point d* by `displacement`; x_n is the mean
over runs of d_n - d* (the mean obeys the linear recursion exactly in the linear regime, the
sampling noise averages out). For each K, the envelope max|x| per window of K steps is compared
between the first and the last windows: K diverges when it grows. The measured K* is the first
K of the sweep that diverges. Oscillation (K = 1): the measured trajectory is fit by a free
second-order linear recursion x_{n+1} = u x_n + w x_{n-1} (least squares, no model input); it
oscillates when the roots are complex (u^2 + 4 w < 0). The measured onset is the first lr of the
sweep that oscillates (reported as the geometric midpoint of the bracketing pair).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pgrpo.bandit.experiments.base import ExperimentResult, check_seeds, config_dict
from pgrpo.bandit.kappa import Curvature, ForceModel, curvature
from pgrpo.bandit.simulate import BanditConfig, simulate
from pgrpo.core.losses import LossConfig
from pgrpo.dynamics.recursion import oscillation_onset, refresh_threshold


@dataclass(frozen=True)
class ThresholdConfig:
    """Defaults: the documented run of `pgrpo reproduce threshold`."""

    settings: tuple[tuple[float, float], ...] = ((0.1, 0.0), (0.2, 0.5), (0.2, 0.8), (0.1, 0.9))
    """(a = lr * kappa, beta1) pairs; lr follows from the measured kappa."""
    optimizers: tuple[str, ...] = ("ema", "adam")
    importance_ratio: tuple[bool, ...] = (False, True)
    group_size: int = 8
    batch_prompts: int = 8
    kl_reward_coef: float = 0.5
    """KL in the reward: sets the interior fixed point d* = logit(p_ref) + 1 / coef (Dr. GRPO)."""
    kl_coef: float = 0.01
    """A small KL in the loss (k3) so that the fixed point has sampling noise (Adam needs it)."""
    p_ref: float = 0.119
    k_span: tuple[float, float] = (0.7, 1.4)
    """The K sweep covers this range around the predicted K* (geometric grid)."""
    k_points: int = 11
    adam_k_span: tuple[float, float] = (0.7, 2.0)
    """Adam rows sweep wider (coarser): their K* is not expected where the EMA model puts it."""
    adam_k_points: int = 7
    windows: int = 10
    """Windows of K steps simulated for each K."""
    displacement: float = 0.02
    """Initial offset of the logit gap from d*, small enough for the linear regime (EMA rows)."""
    seeds: int = 16
    """Independent runs per (row, K)."""
    adam_displacement: float = 1.0
    """Adam rows start at this many grad_rms / kappa from d* (Adam's linear scale)."""
    seed: int = 0


def force_model(cfg: ThresholdConfig, importance_ratio: bool) -> ForceModel:
    loss = LossConfig(  # the textbook k3, uncapped (LossConfig.k3_max), as documented
        policy_loss="clipped" if importance_ratio else "reinforce",
        kl_coef=cfg.kl_coef,
        k3_max=None,
    )
    return ForceModel(
        "dr_grpo",
        cfg.group_size,
        loss,
        kl_reward_coef=cfg.kl_reward_coef,
        p_ref=cfg.p_ref,
    )


def _bandit(cfg, model: ForceModel, optimizer: str, **kw) -> BanditConfig:
    return BanditConfig(
        batch_prompts=cfg.batch_prompts,
        group_size=cfg.group_size,
        estimator=model.estimator,
        loss=model.loss,
        kl_reward_coef=model.kl_reward_coef,
        p_ref=model.p_ref,
        optimizer=optimizer,
        seed=cfg.seed,
        **kw,
    )


def window_growth(x: np.ndarray, k: int, windows: int) -> np.ndarray:
    """log(envelope of the last two windows / envelope of windows 1-2) of mean deviations
    x [S + 1, ...] (S + 1 >= windows * K); > 0: the deviation grows (divergent). Returns [...]."""
    env = np.abs(x[: windows * k]).reshape(windows, k, *x.shape[1:]).max(axis=1)
    env = np.maximum(env, 1e-300)
    return np.log(env[-2:].mean(0)) - np.log(env[1:3].mean(0))


def diverges(
    dev: np.ndarray, k: int, windows: int, rng: np.random.Generator, n_boot: int = 200
) -> tuple[bool, float, float]:
    """Whether the run-mean of the deviations dev [S + 1, runs] grows over the windows, with
    sampling noise accounted for: the growth of the mean over a bootstrap resample of runs must
    be > 0 in at least 95% of resamples. Returns (diverges, growth, 5% bootstrap quantile)."""
    growth = float(window_growth(dev.mean(1), k, windows))
    idx = rng.integers(0, dev.shape[1], size=(n_boot, dev.shape[1]))
    boots = window_growth(dev[:, idx].mean(-1), k, windows)  # [n_boot]
    low = float(np.quantile(boots, 0.05))
    return low > 0, growth, low


def _k_star(a: float, beta1: float) -> int:
    k = refresh_threshold(a, beta1).K_star
    if k is None:
        raise ValueError(f"no unstable refresh interval for a={a}, beta1={beta1}")
    return k


def k_grid(k_pred: float, span: tuple[float, float], points: int) -> list[int]:
    ks = np.unique(np.round(k_pred * np.geomspace(span[0], span[1], points)).astype(int))
    return [int(k) for k in ks if k >= 1]


def _rows_for(cfg: ThresholdConfig, optimizer: str, ratio: bool) -> list[dict]:
    """One simulate() call for all (a, beta1) settings and all K of their sweeps."""
    model = force_model(cfg, ratio)
    curv: Curvature = curvature(model, batch_prompts=cfg.batch_prompts)
    kappa = curv.kappa if optimizer == "ema" else curv.kappa_adam
    delta = cfg.displacement
    seeds = cfg.seeds
    if optimizer == "adam":
        delta = cfg.adam_displacement * curv.grad_rms / curv.kappa
    plan = []  # (setting index, K) per block of `seeds` runs
    lrs, b1s, ks = [], [], []
    for i, (a, beta1) in enumerate(cfg.settings):
        k_pred = _k_star(a, beta1)
        span, points = (cfg.k_span, cfg.k_points)
        if optimizer == "adam":
            span, points = (cfg.adam_k_span, cfg.adam_k_points)
        for k in k_grid(k_pred, span, points):
            plan.append((i, k))
            lrs += [a / kappa] * seeds
            b1s += [beta1] * seeds
            ks += [k] * seeds
    steps = cfg.windows * max(ks)
    bc = _bandit(
        cfg,
        model,
        optimizer,
        num_runs=len(lrs),
        steps=steps,
        lr=lrs,
        beta1=b1s,
        refresh_interval=ks,
        initial_logit_gap=curv.d_star + delta,
    )
    res = simulate(bc)
    rows = []
    rng = np.random.default_rng(cfg.seed)
    for i, (a, beta1) in enumerate(cfg.settings):
        sweep, rms = [], []
        for j, (si, k) in enumerate(plan):
            if si != i:
                continue
            dev = res.gap[:, j * seeds : (j + 1) * seeds] - curv.d_star
            late = dev[(cfg.windows - 2) * k : cfg.windows * k]
            rms.append(float(np.sqrt((late**2).mean())) / delta)
            sweep.append((k, *diverges(dev, k, cfg.windows, rng)))
        diverged = [k for k, div, _, _ in sweep if div]
        measured = diverged[0] if diverged else None
        k_pred = _k_star(a, beta1)
        rows.append(
            {
                "optimizer": optimizer,
                "importance_ratio": ratio,
                "lr": a / kappa,
                "beta1": beta1,
                "kappa": kappa,
                "predicted_K": k_pred,
                "measured_K": measured,
                "a": a,
                "km": a * beta1 / (1 - beta1),
                "rel_error": (measured - k_pred) / k_pred if measured is not None else None,
                "kappa_lag": curv.kappa_lag,
                "kappa_now": curv.kappa_now,
                "sweep_K": [k for k, *_ in sweep],
                "sweep_growth": [g for _, _, g, _ in sweep],
                "sweep_growth_low": [lo for *_, lo in sweep],
                "sweep_rms_late": rms,  # RMS over runs of d - d* in the last two windows / start
                "bracketed": bool(diverged) and diverged[0] != sweep[0][0],
            }
        )
    return rows


def run_threshold(cfg: ThresholdConfig) -> ExperimentResult:
    check_seeds(cfg.seeds)
    rows = [
        row
        for optimizer in cfg.optimizers
        for ratio in cfg.importance_ratio
        for row in _rows_for(cfg, optimizer, ratio)
    ]
    exact = [r for r in rows if r["optimizer"] == "ema" and not r["importance_ratio"]]
    ok = [r for r in exact if r["rel_error"] is not None and abs(r["rel_error"]) <= 0.10]
    return ExperimentResult(
        name="threshold",
        columns=(
            "optimizer",
            "importance_ratio",
            "lr",
            "beta1",
            "kappa",
            "predicted_K",
            "measured_K",
        ),
        rows=rows,
        # the EMA rows without an importance ratio (the exact-force model's), and how many of
        # them the prediction meets within 10%: "ema_rows: 4" read as all 8 EMA rows
        metrics={"ema_rows_without_ratio": len(exact), "of_which_within_10pct": len(ok)},
        config=config_dict(cfg),
    )


@dataclass(frozen=True)
class TransitionConfig:
    """Defaults: the documented run of `pgrpo reproduce transition`."""

    beta1s: tuple[float, ...] = (0.5, 0.8)
    lr_span: tuple[float, float] = (0.45, 2.0)
    """The lr sweep covers a = lr * kappa over this range times the predicted onset."""
    lr_points: int = 30
    steps: int = 60
    group_size: int = 8
    batch_prompts: int = 8
    kl_reward_coef: float = 0.5
    p_ref: float = 0.119
    displacement: float = 0.3
    seeds: int = 64
    seed: int = 0


def ar2_roots_complex(x: np.ndarray) -> tuple[bool, float, float]:
    """Fit x_{n+1} = u x_n + w x_{n-1} by least squares; return (complex roots, u, w)."""
    design = np.stack([x[1:-1], x[:-2]], axis=1)
    (u, w), *_ = np.linalg.lstsq(design, x[2:], rcond=None)
    return bool(u * u + 4 * w < 0), float(u), float(w)


def run_transition(cfg: TransitionConfig) -> ExperimentResult:
    check_seeds(cfg.seeds)
    model = ForceModel(
        "dr_grpo",
        cfg.group_size,
        LossConfig(policy_loss="reinforce"),
        kl_reward_coef=cfg.kl_reward_coef,
        p_ref=cfg.p_ref,
    )
    curv = curvature(model, batch_prompts=cfg.batch_prompts)
    grid = np.geomspace(cfg.lr_span[0], cfg.lr_span[1], cfg.lr_points)
    lrs, b1s = [], []
    for beta1 in cfg.beta1s:
        a_on = oscillation_onset(beta1)
        for f in grid:
            lrs += [f * a_on / curv.kappa] * cfg.seeds
            b1s += [beta1] * cfg.seeds
    bc = _bandit(
        cfg,
        model,
        "ema",
        num_runs=len(lrs),
        steps=cfg.steps,
        lr=lrs,
        beta1=b1s,
        initial_logit_gap=curv.d_star + cfg.displacement,
    )
    res = simulate(bc)
    rows, series = [], {}
    for i, beta1 in enumerate(cfg.beta1s):
        a_on = oscillation_onset(beta1)
        flags = []
        for j in range(len(grid)):
            block = (i * len(grid) + j) * cfg.seeds
            x = res.gap[:, block : block + cfg.seeds].mean(1) - curv.d_star
            flags.append(ar2_roots_complex(x)[0])
            if j in (0, len(grid) // 2, len(grid) - 1):
                series[f"beta1={beta1} a/a_on={grid[j]:.2f}"] = x.tolist()
        first = next((j for j, f in enumerate(flags) if f), None)
        measured = low = high = None
        if first is not None and first > 0:  # geometric midpoint of the bracketing lrs
            low, high = (float(grid[j] * a_on / curv.kappa) for j in (first - 1, first))
            measured = math.sqrt(low * high)
        predicted = a_on / curv.kappa
        rows.append(
            {
                "beta1": beta1,
                "kappa": curv.kappa,
                "predicted_onset_lr": predicted,
                "measured_onset_lr": measured,
                "rel_error": None if measured is None else measured / predicted - 1,
                "bracket_low_lr": low,
                "bracket_high_lr": high,
                "predicted_onset_a": a_on,
                "continuum_onset_a": (1 - beta1) / (4 * beta1),
                "oscillates": flags,
            }
        )
    ok = [r for r in rows if r["rel_error"] is not None and abs(r["rel_error"]) <= 0.10]
    return ExperimentResult(
        name="transition",
        columns=(
            "beta1",
            "kappa",
            "predicted_onset_lr",
            "measured_onset_lr",
            "bracket_low_lr",
            "bracket_high_lr",
            "rel_error",
            "continuum_onset_a",
        ),
        rows=rows,
        series={"grid_a_over_onset": grid.tolist(), "trajectories": series},
        metrics={"rows_within_10pct": len(ok), "rows": len(rows), "d_star": curv.d_star},
        config=config_dict(cfg),
    )


__all__ = ["ThresholdConfig", "TransitionConfig", "run_threshold", "run_transition"]
