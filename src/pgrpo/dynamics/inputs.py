"""Inputs of a fit: the context (lr schedule on the optimizer-step grid, beta1, K, clock), curve
checks, the white-noise scale, and the internal units the fit works in (standardised reward,
median step spacing) with the conversion of parameters back to the user's units.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from pgrpo.core.rewardrange import checked_reward_range
from pgrpo.dynamics.curves import CurveModel, FitContext, Parameter
from pgrpo.dynamics.optimizers import DEFAULT_OPTIMIZER, OPTIMIZER_REDUCTIONS
from pgrpo.errors import check_magnitude

# --- context and checks ---------------------------------------------------------------------------


def make_context(
    step: np.ndarray,
    *,
    lr: np.ndarray | None = None,
    lr_step: np.ndarray | None = None,
    beta1: float | None = None,
    refresh_interval: int | None = 1,
    optimizer: str = DEFAULT_OPTIMIZER,
    clock: float = 1.0,
    reward_range: tuple[float, float] | None = None,
    group_size: float | None = None,
) -> FitContext:
    """Context with the lr schedule on the integer optimizer-step grid t = 0..T from the first
    step (optimizer steps = (step - step0) * clock).

    lr: [m] learning rates at lr_step ([m], default `step`); may extend past the data (the known
    future schedule, used by forecasts); NaN entries are ignored; interpolated linearly.
    clock: optimizer steps per unit of `step` (the refresh interval K when `step` counts rollout
    batches; `runfit.optimizer_clock` derives it from a log's optimizer_step column).
    group_size: G, rollouts per prompt (an integer >= 2 counts; anything else: unknown).
    """
    step = np.asarray(step, dtype=float)
    step0 = float(step[0])
    if not (clock > 0 and math.isfinite(clock)):
        raise ValueError(f"clock (optimizer steps per logged step) must be > 0, got {clock!r}")
    grid_lr = None
    if lr is not None:
        lr = np.asarray(lr, dtype=float)
        ls = step if lr_step is None else np.asarray(lr_step, dtype=float)
        if ls.shape != lr.shape:
            raise ValueError(f"lr has shape {lr.shape} but its steps have shape {ls.shape}")
        ok = np.isfinite(lr) & np.isfinite(ls)
        if ok.sum() >= 1:
            ls, lv = ls[ok], lr[ok]
            order = np.argsort(ls, kind="stable")
            ls, lv = ls[order], lv[order]
            if np.any(lv < 0):
                raise ValueError("lr must be >= 0")
            end = max(float(ls[-1]), float(step[-1]))
            t = np.arange(int(math.ceil((end - step0) * clock - 1e-9)) + 1, dtype=float)
            grid_lr = np.interp(t / clock + step0, ls, lv)
            if not np.any(grid_lr > 0):
                grid_lr = None
    if beta1 is not None and not 0.0 <= beta1 < 1.0:
        raise ValueError(f"beta1 must be in [0, 1), got {beta1!r}")
    OPTIMIZER_REDUCTIONS.get(optimizer)  # an unknown name fails here, listing the valid ones
    K = int(refresh_interval or 1)
    if K < 1:
        raise ValueError(f"refresh_interval must be >= 1, got {refresh_interval!r}")
    bounds = None if reward_range is None else checked_reward_range(reward_range)
    G = None
    if group_size is not None and math.isfinite(float(group_size)) and float(group_size) >= 2:
        G = int(group_size) if float(group_size) == int(group_size) else None
    return FitContext(step0=step0, lr=grid_lr, beta1=beta1, refresh_interval=K,
                      optimizer=optimizer, clock=clock, reward_range=bounds,
                      group_size=G)  # fmt: skip


def _check_curve(step: np.ndarray, reward: np.ndarray, min_points: int) -> tuple:
    step = np.array(step, dtype=float)  # copies: never mutate the caller's data
    reward = np.array(reward, dtype=float)
    if step.ndim != 1 or step.shape != reward.shape:
        raise ValueError(
            f"step and reward must be 1-D of equal length, got {step.shape}, {reward.shape}"
        )
    bad = ~(np.isfinite(step) & np.isfinite(reward))
    if bad.any():
        raise ValueError(
            f"{int(bad.sum())} non-finite step/reward values; drop them first "
            "(pgrpo.logs.read_log does and reports it)"
        )
    check_magnitude(reward, "reward")
    check_magnitude(step, "step")
    if step.size < min_points:
        raise ValueError(
            f"need at least {min_points} points to fit, got {step.size}: fit a log with more "
            "logged steps (`pgrpo diagnose` judges a short one as too_short)"
        )
    if np.any(np.diff(step) <= 0):
        raise ValueError(
            "steps must be strictly increasing; sort and de-duplicate them "
            "(pgrpo.logs.read_log keeps the last occurrence of a repeated step)"
        )
    return step, reward


def noise_scale(reward: np.ndarray) -> float:
    """Robust white-noise sd from first differences: MAD(diff) / 0.6745 / sqrt(2)."""
    d = np.diff(np.asarray(reward, dtype=float))
    if d.size == 0:
        return 1.0
    s = float(np.median(np.abs(d - np.median(d)))) / 0.6745 / math.sqrt(2.0)
    if s <= 0:
        s = float(np.std(d)) / math.sqrt(2.0)
    return s if s > 0 else max(float(np.std(reward)), 1e-6)


# --- internal units -------------------------------------------------------------------------------


def _reward_units(y: np.ndarray) -> tuple[float, float]:
    """(loc, scale) that standardise a reward curve: scale = +-std, signed so that the internal
    curve rises from its first to its last third (a mirrored curve fits identically); 1 for a
    constant zero curve."""
    loc = float(np.mean(y))
    scale = float(np.std(y))
    if not scale > 0:
        scale = abs(loc) if loc != 0 else 1.0
    k = max(1, y.size // 3)
    return loc, -scale if float(np.mean(y[-k:])) < float(np.mean(y[:k])) else scale


def _unit_factor(spec: CurveModel, name: str, ts: float, scale: float) -> float:
    """User units per internal unit of a parameter: the reward scale for the levels, ts^power
    for the time-dimension parameters, 1 otherwise."""
    if name in ("R_inf", "R_0"):
        return scale
    return ts ** spec.time_power.get(name, 0)


def _params_to(spec, params, ts, loc, scale, *, inverse=False) -> dict[str, Parameter]:
    """Parameters internal -> user units (inverse: user -> internal), bounds and stderr too."""

    def conv(name: str, v: float, err: bool = False) -> float:
        f = _unit_factor(spec, name, ts, scale)
        shift = 0.0 if err or name not in ("R_inf", "R_0") else loc
        return (v - shift) / f if inverse else v * f + shift

    out = {}
    for n, p in params.items():
        lo, hi = sorted((conv(n, p.min), conv(n, p.max)))
        err = None if p.stderr is None else abs(conv(n, p.stderr, err=True))
        out[n] = replace(p, value=min(max(conv(n, p.value), lo), hi), min=lo, max=hi, stderr=err)
    return out
