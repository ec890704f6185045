"""One time axis for every fit of a run: the optimizer step.

A log's step may count optimizer steps (TRL's global_step) or rollout batches (pgrpo's `step`,
each followed by K = refresh_interval optimizer steps). The ROM's time is the optimizer step, so
a fit of a log must know how many optimizer steps one logged step is: the `clock`.
`run_inputs` is the one place that decides it (from a logged `optimizer_step` column when there
is one, else 1: the log step is taken as the optimizer step) and gathers the lr schedule, beta1
and K; `fit_run` is the one fit every caller uses (the trainer's online forecast, the demo,
`pgrpo fit`, `report` and `diagnose`), so tau and kappa are per optimizer step everywhere.
Fitted curve parameters stay in the log's own step units (plots need no conversion).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from pgrpo.dynamics.fit import fit_curve
from pgrpo.dynamics.fitresult import FitResult
from pgrpo.dynamics.optimizers import run_optimizer


def optimizer_clock(step: np.ndarray, optimizer_step: np.ndarray | None = None) -> float:
    """Optimizer steps per logged step: the median ratio of the increments of `optimizer_step`
    ([n], NaN where not logged) to those of `step` ([n]); 1.0 when it is not logged."""
    if optimizer_step is None:
        return 1.0
    step = np.asarray(step, dtype=float)
    opt = np.asarray(optimizer_step, dtype=float)
    ok = np.isfinite(opt) & np.isfinite(step)
    if ok.sum() < 2:
        return 1.0
    ds, do = np.diff(step[ok]), np.diff(opt[ok])
    keep = ds > 0
    ratio = float(np.median(do[keep] / ds[keep])) if keep.any() else math.nan
    if not (ratio > 0 and math.isfinite(ratio)):
        raise ValueError(
            "the log's optimizer_step column does not increase with step; drop the column or "
            "fix the log (optimizer steps must grow with the logged step)"
        )
    return ratio


def run_inputs(
    step: np.ndarray,
    columns: Mapping[str, np.ndarray],
    hyper: Mapping[str, Any],
    *,
    optimizer: str | None = None,
) -> dict[str, Any]:
    """Keyword arguments for `fit_run` / `forecast` from a log: step [n], columns (name -> [n]:
    learning_rate, optimizer_step when logged), hyper (lr, beta1, refresh_interval, optimizer,
    reward_min / reward_max).
    optimizer: an OPTIMIZER_REDUCTIONS name; None: the run's (`run_optimizer(hyper["optimizer"])`,
    AdamW when the log does not name one)."""
    step = np.asarray(step, dtype=float)
    lr = columns.get("learning_rate")
    if lr is not None and not np.isfinite(np.asarray(lr, dtype=float)).any():
        lr = None
    peak = hyper.get("lr", hyper.get("learning_rate"))
    if lr is None and peak is not None and float(peak) > 0:
        lr = np.full(step.size, float(peak))  # the config's lr, constant (no schedule logged)
    beta1 = hyper.get("beta1")
    return {
        "lr": None if lr is None else np.asarray(lr, dtype=float),
        "lr_step": None if lr is None else step,
        "beta1": None if beta1 is None else float(beta1),
        "refresh_interval": int(hyper.get("refresh_interval") or 1),
        "clock": optimizer_clock(step, columns.get("optimizer_step")),
        "optimizer": optimizer or run_optimizer(hyper.get("optimizer")),
        "reward_range": reward_range(hyper),
    }


def noise_weights(columns: Mapping[str, np.ndarray], hyper: Mapping[str, Any]) -> np.ndarray | None:
    """Per-step weights 1 / (v_n + median v) from the logged noise of the batch mean,
    v_n = reward_std_n^2 / (G B) (the within-group part; the median floor stands for the
    between-prompt part and keeps steps with reward_std = 0 from dominating): [n], or None
    when the log has no usable reward_std."""
    sd = columns.get("reward_std")
    if sd is None:
        return None
    sd = np.asarray(sd, dtype=float)
    ok = np.isfinite(sd)
    if ok.sum() < 3:
        return None
    gb = float(hyper.get("group_size") or 1) * float(hyper.get("batch_prompts") or 1)
    v = np.where(ok, sd, np.median(sd[ok])) ** 2 / max(gb, 1.0)
    floor = max(float(np.median(v)), 0.1 * float(np.mean(v)))
    return 1.0 / (v + floor) if floor > 0 else None


def reward_range(hyper: Mapping[str, Any]) -> tuple[float, float] | None:
    """The reward's known (lo, hi) from a log's hyperparameters (reward_min / reward_max: a
    pgrpo run's task.reward_range), or None."""
    lo, hi = hyper.get("reward_min"), hyper.get("reward_max")
    if lo is None or hi is None or not float(lo) < float(hi):
        return None
    return float(lo), float(hi)


def fit_run(step: np.ndarray, reward: np.ndarray, **inputs: Any) -> FitResult:
    """The ROM fit of a run (free fit, with the optimizer-constrained one compared in its
    metrics when lr and beta1 are known): step, reward: [n]; inputs: `run_inputs(...)`.
    metrics tau, kappa, kappa_constrained (with kappa_lo / kappa_hi) are per optimizer step."""
    return fit_curve(step, reward, "rom", **inputs)


def fit_constrained(step: np.ndarray, reward: np.ndarray, **inputs: Any) -> FitResult | None:
    """The optimizer-constrained fit (`rom_fixed`: m, c from beta1 and K) on the same time
    axis, or None when lr or beta1 is unknown (then the run cannot be checked against it)."""
    if inputs.get("lr") is None or inputs.get("beta1") is None:
        return None
    return fit_curve(step, reward, "rom_fixed", **inputs)
