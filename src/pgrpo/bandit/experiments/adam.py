"""The refresh interval under Adam vs SGD momentum on the exact-reduction bandit.

Setting: the `threshold` experiment's exact reduction (one prompt, two arms, Dr. GRPO, KL in the
reward, a small k3 KL in the loss, no importance ratio, G = 8, B = 8). kappa and the gradient's
noise RMS at the fixed point come from the exact outcome sum (`pgrpo.bandit.kappa`); no
trajectory is fitted.

Three sweeps, every prediction from `pgrpo.dynamics.optimizers` (registry entries
`sgd_momentum` and `adam`):
- `sgd`: EMA momentum on a contiguous K grid 1..sgd_k_max shared by all settings (not centred on
  any prediction). Each K is flagged divergent by the `threshold` test (run-mean envelope grows
  over the windows in >= 95% of bootstrap resamples); the measured threshold is stated as "first
  unstable K in [lo, hi]" with lo = the last stable grid value below it + 1, hi = the first
  unstable grid value (resolution 1 on this grid), and any stable K above it is listed.
- `adam`: Adam on a contiguous grid 1..adam_k_max plus a sparse tail far past the noise-only
  linear threshold K_lin. Runs start one noise scale s = sigma / kappa from d*; per K: the RMS
  over runs of x_s = d - d* at the window starts in the last third of the steps, against the
  model's self-consistent RMS, and whether it is still growing (log RMS of the last third minus
  the middle third, 5% bootstrap quantile > log 1.25).
- `group`: Adam at one lr for G in group_sizes: the model predicts the noise-only stiffness
  a0 = lr kappa / sigma to move with G (sigma falls with G) and the large-K RMS ~ lr K to not.
- `far_field`: Adam from far above d* (kappa |x| >> sigma): speed ~ eta per step, time to halve
  ~ x0 / (2 eta), the same at every G.

Units: d moves by 2 lr m / sqrt(v) per step (both logits move; their gradients are opposite), so
the model's lr is 2 lr, its gradient 2 g0 (noise RMS 2 sigma0) and kappa = -dF/dd.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from pgrpo.bandit.experiments.base import ExperimentResult, check_seeds, config_dict
from pgrpo.bandit.experiments.threshold import (
    ThresholdConfig,
    _bandit,
    diverges,
    force_model,
)
from pgrpo.bandit.kappa import Curvature, curvature
from pgrpo.bandit.policy import logits_from_success
from pgrpo.bandit.simulate import BanditConfig, simulate
from pgrpo.dynamics.optimizers import OptimizerSettings, reduce_optimizer, window_maps


@dataclass(frozen=True)
class AdamBanditConfig:
    """Defaults: the documented run of `bench/adam_bandit.py`."""

    sgd_settings: tuple[tuple[float, float], ...] = ((0.1, 0.0), (0.2, 0.5), (0.2, 0.8), (0.1, 0.9))
    """(a = lr kappa, beta1) for EMA momentum (the `threshold` experiment's four settings)."""
    sgd_k_max: int = 60
    """The SGD grid is every K in 1..sgd_k_max."""
    sgd_windows: int = 12
    sgd_displacement: float = 0.02
    adam_settings: tuple[tuple[float, float, float], ...] = (
        (0.1, 0.0, 0.999),
        (0.1, 0.9, 0.999),
        (0.1, 0.0, 0.99),
        (0.1, 0.9, 0.99),
        (0.2, 0.0, 0.999),
        (0.2, 0.9, 0.999),
    )
    """(a0 = lr kappa / sigma, beta1, beta2) for Adam; lr follows from the measured scales."""
    adam_k_max: int = 40
    """The Adam grid is every K in 1..adam_k_max, then `adam_k_tail`."""
    adam_k_tail: tuple[int, ...] = (48, 64, 96, 128)
    adam_windows: int = 16
    adam_min_steps: int = 600
    """Each Adam call runs max(adam_windows x its largest K, adam_min_steps) steps."""
    group_sizes: tuple[int, ...] = (4, 8, 16)
    group_k: tuple[int, ...] = (1, 4, 16, 64)
    group_a0: float = 0.1
    """The group sweep's lr is the one giving a0 = group_a0 at G = 8, beta1 = 0.9, beta2 = 0.999."""
    far_lr: float = 1e-3
    """Far-field sweep: Adam (beta1 0, K = 1) from far above d*, where kappa |x| >> sigma."""
    far_starts: tuple[float, ...] = (1.0, 2.0)
    """Initial displacements x0 = d - d* of the far-field runs."""
    far_group_sizes: tuple[int, ...] = (4, 16)
    far_beta2: tuple[float, ...] = (0.9, 0.999)
    far_steps: int = 1500
    seeds: int = 16
    """Independent runs per (setting, K)."""
    seed: int = 0


def _model_cfg(cfg: AdamBanditConfig, group_size: int = 8) -> ThresholdConfig:
    return ThresholdConfig(group_size=group_size, seed=cfg.seed)


def first_unstable_bracket(ks: list[int], flags: list[bool]) -> dict:
    """The measured threshold on a sorted grid: first flagged K (hi), the grid value after the last
    stable K below it (lo), the grid spacing there, and the stable K above hi ("inversions").
    No flagged K: hi = None and the statement says "none up to max(ks)"."""
    first = next((i for i, f in enumerate(flags) if f), None)
    if first is None:
        return {
            "lo": None,
            "hi": None,
            "resolution": None,
            "inversions": [],
            "statement": f"none up to {ks[-1]}",
        }
    hi = ks[first]
    lo = ks[first - 1] + 1 if first > 0 else 1
    inversions = [k for k, f in zip(ks[first:], flags[first:], strict=True) if not f]
    text = f"first unstable K in [{lo}, {hi}]" if first > 0 else f"unstable at every K <= {hi}"
    if inversions:
        text += f" (stable again at K = {', '.join(map(str, inversions))})"
    return {
        "lo": lo,
        "hi": hi,
        "resolution": hi - ks[first - 1] if first > 0 else None,
        "inversions": inversions,
        "statement": text,
    }


def sgd_diverged(
    dev: np.ndarray, k: int, windows: int, displacement: float, rng: np.random.Generator
) -> tuple[bool, float]:
    """Divergence of the run-mean deviation dev [S + 1, runs]: the `threshold` test (envelope grows
    from windows 1-2 to the last two in >= 95% of bootstrap resamples), or the last two windows'
    envelope above 5x the starting displacement in >= 95% of resamples (a divergence fast enough
    to saturate the sigmoid within the first windows no longer grows after them). Returns
    (diverged, growth from windows 1-2)."""
    div, growth, _ = diverges(dev, k, windows, rng)
    idx = rng.integers(0, dev.shape[1], size=(200, dev.shape[1]))
    env = np.abs(dev[: windows * k][..., idx].mean(-1)).reshape(windows, k, -1).max(axis=1)
    far = np.quantile(env[-2:].mean(0), 0.05) > 5.0 * displacement
    return bool(div or far), growth


def run_sgd_sweep(cfg: AdamBanditConfig) -> list[dict]:
    """EMA momentum, every K in 1..sgd_k_max for each (a, beta1): one simulate() call."""
    mc = _model_cfg(cfg)
    model = force_model(mc, False)
    curv = curvature(model, batch_prompts=mc.batch_prompts)
    ks = list(range(1, cfg.sgd_k_max + 1))
    lrs, b1s, kk = [], [], []
    for a, beta1 in cfg.sgd_settings:
        for k in ks:
            lrs += [a / curv.kappa] * cfg.seeds
            b1s += [beta1] * cfg.seeds
            kk += [k] * cfg.seeds
    bc = _bandit(
        mc,
        model,
        "ema",
        num_runs=len(lrs),
        steps=cfg.sgd_windows * cfg.sgd_k_max,
        lr=lrs,
        beta1=b1s,
        refresh_interval=kk,
        initial_logit_gap=curv.d_star + cfg.sgd_displacement,
    )
    gap = simulate(bc).gap
    rng = np.random.default_rng(cfg.seed)
    rows = []
    for i, (a, beta1) in enumerate(cfg.sgd_settings):
        flags, growth = [], []
        for j, k in enumerate(ks):
            block = (i * len(ks) + j) * cfg.seeds
            dev = gap[:, block : block + cfg.seeds] - curv.d_star
            div, g = sgd_diverged(dev, k, cfg.sgd_windows, cfg.sgd_displacement, rng)
            flags.append(div)
            growth.append(g)
        frac = curv.kappa_now / curv.kappa
        red = reduce_optimizer(
            "sgd_momentum",
            OptimizerSettings(
                lr=a / curv.kappa,
                kappa=curv.kappa,
                beta1=beta1,
                current_fraction=frac,
            ),
        )
        bracket = first_unstable_bracket(ks, flags)
        rows.append(
            {
                "optimizer": "sgd_momentum",
                "a": a,
                "beta1": beta1,
                "lr": a / curv.kappa,
                "kappa": curv.kappa,
                "predicted_K": red.K_star,
                "predicted_K_stale_force": red.metrics["stale_force_threshold"],
                "current_fraction": curv.kappa_now / curv.kappa,
                "measured": bracket["statement"],
                "measured_lo": bracket["lo"],
                "measured_hi": bracket["hi"],
                "resolution": bracket["resolution"],
                "inversions": bracket["inversions"],
                "within_one_step": bracket["hi"] is not None
                and red.K_star is not None
                and bracket["lo"] - 1 <= red.K_star <= bracket["hi"] + 1,
                "stale_within_one_step": bracket["hi"] is not None
                and bracket["lo"] - 1 <= red.metrics["stale_force_threshold"] <= bracket["hi"] + 1,
                "sweep_K": ks,
                "diverged": flags,
                "growth": growth,
                # predicted log growth of the run-mean envelope over the same window span
                "predicted_growth": [
                    (cfg.sgd_windows - 3) * math.log(max(_radius(a, beta1, k, frac), 1e-300))
                    for k in ks
                ],
            }
        )
    return rows


def _radius(a: float, beta1: float, k: int, current_fraction: float) -> float:
    return float(np.max(np.abs(np.linalg.eigvals(window_maps(a, beta1, k, current_fraction)[0]))))


def _adam_scales(curv: Curvature) -> tuple[float, float]:
    """(sigma, s) in the model's units: gradient 2 g0, so sigma = 2 grad_rms, s = sigma/kappa."""
    sigma = 2.0 * curv.grad_rms
    return sigma, sigma / curv.kappa


def _window_starts(steps: int, k: int, lo_frac: float, hi_frac: float) -> np.ndarray:
    idx = np.arange(0, steps + 1, k)
    return idx[(idx >= lo_frac * steps) & (idx <= hi_frac * steps)]


def _adam_block(x: np.ndarray, k: int, steps: int, rng: np.random.Generator) -> dict:
    """Statistics of x [S + 1, runs] (deviation from d*) at window starts: late RMS, growth of the
    RMS from the middle third to the last third, its 5% bootstrap quantile."""
    late = x[_window_starts(steps, k, 2 / 3, 1.0)]
    mid = x[_window_starts(steps, k, 1 / 3, 2 / 3)]

    def growth(cols: np.ndarray) -> np.ndarray:
        return 0.5 * (
            np.log((late[:, cols] ** 2).mean((0, -1))) - np.log((mid[:, cols] ** 2).mean((0, -1)))
        )

    runs = x.shape[1]
    boots = growth(rng.integers(0, runs, size=(200, runs)))
    return {
        "rms": float(np.sqrt((late**2).mean())),
        "growth": float(growth(np.arange(runs))),
        "growth_low": float(np.quantile(boots, 0.05)),
        "max_abs": float(np.abs(x).max()),
    }


def _adam_prediction(curv: Curvature, lr: float, beta1: float, beta2: float, k: int, eps: float):
    sigma, _ = _adam_scales(curv)
    settings = OptimizerSettings(
        lr=2.0 * lr,
        kappa=curv.kappa,
        beta1=beta1,
        refresh_interval=k,
        beta2=beta2,
        eps=2.0 * eps,
        grad_rms=sigma,
        current_fraction=curv.kappa_now / curv.kappa,
    )
    return reduce_optimizer("adam", settings)


def _adam_runs(
    cfg: AdamBanditConfig,
    group_size: int,
    plan: list[tuple[float, float, float, int]],
    rng: np.random.Generator,
) -> list[dict]:
    """One simulate() call for every (lr, beta1, beta2, K) of `plan` at one G (beta2 is a config
    field, so one call per beta2). Returns one dict per plan entry with the measured statistics
    and the model's prediction."""
    mc = _model_cfg(cfg, group_size)
    model = force_model(mc, False)
    curv = curvature(model, batch_prompts=mc.batch_prompts)
    sigma, s = _adam_scales(curv)
    out: dict[int, dict] = {}
    for beta2 in sorted({p[2] for p in plan}):
        idx = [i for i, p in enumerate(plan) if p[2] == beta2]
        steps = max(cfg.adam_windows * max(plan[i][3] for i in idx), cfg.adam_min_steps)
        bc = _bandit(
            mc,
            model,
            "adam",
            num_runs=len(idx) * cfg.seeds,
            steps=steps,
            lr=[plan[i][0] for i in idx for _ in range(cfg.seeds)],
            beta1=[plan[i][1] for i in idx for _ in range(cfg.seeds)],
            refresh_interval=[plan[i][3] for i in idx for _ in range(cfg.seeds)],
            beta2=beta2,
            initial_logit_gap=curv.d_star + s,
        )
        gap = simulate(bc).gap - curv.d_star
        for j, i in enumerate(idx):
            lr, beta1, _, k = plan[i]
            stats = _adam_block(gap[:, j * cfg.seeds : (j + 1) * cfg.seeds], k, steps, rng)
            red = _adam_prediction(curv, lr, beta1, beta2, k, bc.adam_eps)
            out[i] = {
                "group_size": group_size,
                "lr": lr,
                "beta1": beta1,
                "beta2": beta2,
                "K": k,
                "steps": steps,
                "noise_only_a": red.metrics["noise_only_a"],
                "K_lin": red.metrics["linear_threshold"],
                "measured_rms_over_s": stats["rms"] / s,
                "predicted_rms_over_s": red.metrics["rms_over_noise_scale"],
                "rms_ratio": stats["rms"] / red.metrics["rms_deviation"],
                "measured_rms": stats["rms"],
                "lr_K": 2.0 * lr * k,
                "still_growing": stats["growth_low"] > math.log(1.25),
                "growth": stats["growth"],
                "max_abs_over_s": stats["max_abs"] / s,
                "noise_scale_s": s,
                "sigma": sigma,
            }
    return [out[i] for i in range(len(plan))]


def run_adam_sweep(cfg: AdamBanditConfig, rng: np.random.Generator) -> list[dict]:
    """Adam at every (a0, beta1, beta2) of the config over K = 1..adam_k_max + the tail."""
    curv = curvature(force_model(_model_cfg(cfg), False), batch_prompts=8)
    sigma, _ = _adam_scales(curv)
    ks = list(range(1, cfg.adam_k_max + 1)) + list(cfg.adam_k_tail)
    plan = []
    for a0, beta1, beta2 in cfg.adam_settings:
        lr = a0 * sigma / (2.0 * curv.kappa)  # model lr = 2 lr: a0 = 2 lr kappa / sigma
        plan += [(lr, beta1, beta2, k) for k in ks]
    short = [p for p in plan if p[3] <= cfg.adam_k_max]
    tail = [p for p in plan if p[3] > cfg.adam_k_max]
    rows = _adam_runs(cfg, 8, short, rng) + _adam_runs(cfg, 8, tail, rng)
    return with_long_reruns(cfg, 8, rows, rng)


def with_long_reruns(
    cfg: AdamBanditConfig, group_size: int, rows: list[dict], rng: np.random.Generator
) -> list[dict]:
    """Re-run every cell still growing at the end with 4x the steps (v's memory is
    1 / (1 - beta2) steps, so a slow transient and a divergence look alike in a short run);
    the result goes in the row's `long_rerun`."""
    flagged = [i for i, r in enumerate(rows) if r["still_growing"]]
    if not flagged:
        return rows
    long_cfg = replace(
        cfg, adam_windows=4 * cfg.adam_windows, adam_min_steps=4 * cfg.adam_min_steps
    )
    plan = [(rows[i]["lr"], rows[i]["beta1"], rows[i]["beta2"], rows[i]["K"]) for i in flagged]
    keep = ("steps", "measured_rms_over_s", "rms_ratio", "still_growing", "growth")
    out = [dict(r) for r in rows]
    for i, rerun in zip(flagged, _adam_runs(long_cfg, group_size, plan, rng), strict=True):
        out[i]["long_rerun"] = {key: rerun[key] for key in keep}
    return out


def run_group_sweep(cfg: AdamBanditConfig, rng: np.random.Generator) -> list[dict]:
    """Adam at one lr (a0 = group_a0 at G = 8), beta1 0.9, beta2 0.999, for each G."""
    curv8 = curvature(force_model(_model_cfg(cfg), False), batch_prompts=8)
    lr = cfg.group_a0 * _adam_scales(curv8)[0] / (2.0 * curv8.kappa)
    rows = []
    for g in cfg.group_sizes:
        cells = _adam_runs(cfg, g, [(lr, 0.9, 0.999, k) for k in cfg.group_k], rng)
        rows += with_long_reruns(cfg, g, cells, rng)
    return rows


def run_far_field(cfg: AdamBanditConfig) -> list[dict]:
    """Adam far from the fixed point: the step is ~ eta = 2 lr per step in d whatever kappa and
    sigma (so G) are, and the time to halve x0 is ~ x0 / (2 eta), not the noise-only 1 / a0."""
    rows = []
    for g in cfg.far_group_sizes:
        mc = _model_cfg(cfg, g)
        model = force_model(mc, False)
        curv = curvature(model, batch_prompts=mc.batch_prompts)
        sigma, _ = _adam_scales(curv)
        for beta2 in cfg.far_beta2:
            starts = [x0 for x0 in cfg.far_starts for _ in range(cfg.seeds)]
            bc = _bandit(
                mc,
                model,
                "adam",
                num_runs=len(starts),
                steps=cfg.far_steps,
                lr=cfg.far_lr,
                beta1=0.0,
                beta2=beta2,
                initial_logit_gap=curv.d_star,
            )
            z0 = _shifted_start(bc, starts)
            gap = simulate(bc, logits=z0).gap - curv.d_star
            for i, x0 in enumerate(cfg.far_starts):
                x = gap[:, i * cfg.seeds : (i + 1) * cfg.seeds].mean(1)
                eta = 2.0 * cfg.far_lr
                rows.append(
                    {
                        "group_size": g,
                        "beta2": beta2,
                        "x0": x0,
                        "x0_over_s": x0 * curv.kappa / sigma,
                        "speed_over_eta_first_50": float((x[0] - x[50]) / 50 / eta),
                        "t_half": int(np.argmax(x <= x0 / 2)) if (x <= x0 / 2).any() else None,
                        "t_10pct": int(np.argmax(x <= x0 / 10)) if (x <= x0 / 10).any() else None,
                        "t_half_constant_speed": x0 / 2 / eta,
                        "noise_only_timescale": sigma / (eta * curv.kappa),
                    }
                )
    return rows


def _shifted_start(bc: BanditConfig, starts: list[float]) -> torch.Tensor:
    """Initial logits [R, 1, 2] at d = d* + starts[r] (d* from bc.initial_logit_gap)."""
    d = torch.tensor([bc.initial_logit_gap + x for x in starts], dtype=torch.float64)
    return logits_from_success(torch.sigmoid(d)[:, None], bc.num_arms)


def summarise_adam(rows: list[dict]) -> list[dict]:
    """One line per Adam setting: K_lin, the K range, how many K still grow, and the RMS ratio
    (measured / predicted) median and range."""
    keys = sorted({(r["group_size"], r["lr"], r["beta1"], r["beta2"]) for r in rows})
    out = []
    for g, lr, b1, b2 in keys:
        sel = [
            r for r in rows if (r["group_size"], r["lr"], r["beta1"], r["beta2"]) == (g, lr, b1, b2)
        ]
        ratio = np.array([r["rms_ratio"] for r in sel])
        growing = [r["K"] for r in sel if r["still_growing"]]
        growing_long = [r["K"] for r in sel if r.get("long_rerun", {}).get("still_growing")]
        out.append(
            {
                "group_size": g,
                "a0": sel[0]["noise_only_a"],
                "beta1": b1,
                "beta2": b2,
                "lr": lr,
                "K_lin": sel[0]["K_lin"],
                "K_grid": f"{sel[0]['K']}..{sel[-1]['K']} ({len(sel)} values)",
                "K_still_growing": growing,
                "K_still_growing_after_4x_steps": growing_long,
                "rms_ratio_median": float(np.median(ratio)),
                "rms_ratio_min": float(ratio.min()),
                "rms_ratio_max": float(ratio.max()),
                "max_abs_over_s": max(r["max_abs_over_s"] for r in sel),
            }
        )
    return out


def run_adam_bandit(cfg: AdamBanditConfig) -> ExperimentResult:
    """All three sweeps; rows = the SGD thresholds and the Adam per-setting summaries."""
    check_seeds(cfg.seeds)
    rng = np.random.default_rng(cfg.seed)
    sgd = run_sgd_sweep(cfg)
    adam = run_adam_sweep(cfg, rng)
    group = run_group_sweep(cfg, rng)
    far = run_far_field(cfg)
    within = sum(bool(r["within_one_step"]) for r in sgd)
    adam_growing = sum(bool(r["still_growing"]) for r in adam)
    return ExperimentResult(
        name="adam-bandit",
        columns=("optimizer", "a", "beta1", "predicted_K_stale_force", "predicted_K", "measured"),
        rows=sgd,
        series={
            "adam": adam,
            "adam_summary": summarise_adam(adam),
            "group": group,
            "group_summary": summarise_adam(group),
            "far_field": far,
        },
        metrics={
            "sgd_rows_within_one_grid_step": within,
            "sgd_rows": len(sgd),
            "adam_cells": len(adam),
            "adam_cells_still_growing": adam_growing,
            "adam_rms_ratio_median": float(np.median([r["rms_ratio"] for r in adam])),
        },
        config=config_dict(cfg),
    )


__all__ = [
    "AdamBanditConfig",
    "first_unstable_bracket",
    "run_adam_bandit",
    "run_adam_sweep",
    "run_group_sweep",
    "run_sgd_sweep",
    "run_far_field",
    "summarise_adam",
]
