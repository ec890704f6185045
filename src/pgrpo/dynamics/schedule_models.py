"""Reward-curve models driven by the logged lr schedule (time: the optimizer step).

- `rom_schedule`: the exact recursion a_n = k lr_n / max(lr) with momentum beta = m / (1 + m)
  (m fixed from the config's beta1 when known) and refresh interval K; a long log's bins go
  through the binned recursion (`binned_recursion.schedule_response`).
- `exponential_lr`: exp(-U(t) / tau) with the lr schedule U as the clock, rom_schedule's m -> 0
  limit.

Registered in `curves.FIT_MODELS` (importing `pgrpo.dynamics.curves` registers them).
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from pgrpo.dynamics.binned_recursion import binned_path, schedule_response
from pgrpo.dynamics.curves import (
    FIT_MODELS,
    LEVEL_MEANINGS,
    ROM_MEANINGS,
    CurveModel,
    FitContext,
    Parameter,
    _levels,
    exponential_guess,
    level_bounds,
    lr_time,
    mass_bounds,
    profile_levels,
    rate_bounds,
    rom_priors,
    timescale_prior,
)
from pgrpo.dynamics.optimizers import fit_reduction
from pgrpo.dynamics.recursion import at_times as _at_times
from pgrpo.dynamics.recursion import unit_response

# --- rom_schedule (exact recursion with the logged lr) -----------------------------------------


_BASIS_CACHE: OrderedDict[tuple, np.ndarray] = OrderedDict()


def _schedule_basis(k: float, m: float, n_steps: int, ctx: FitContext) -> np.ndarray:
    """x_n / x_0 on n = 0..n_steps for a_n = k lr_n / max lr, beta = m / (1 + m); cached."""
    lr_key = None if ctx.lr is None else hash(ctx.lr.tobytes())
    key = (k, m, n_steps, ctx.refresh_interval, lr_key)
    hit = _BASIS_CACHE.get(key)
    if hit is not None:
        return hit
    a = (k * ctx.schedule(n_steps)).tolist()
    basis = np.asarray(unit_response(a, m / (1.0 + m), ctx.refresh_interval))
    _BASIS_CACHE[key] = basis
    if len(_BASIS_CACHE) > 16:
        _BASIS_CACHE.popitem(last=False)
    return basis


def rom_schedule_basis(t: np.ndarray, p: dict[str, float], ctx: FitContext) -> np.ndarray:
    n_steps = int(math.ceil(float(np.max(t)))) if t.size else 0
    if binned_path(t, n_steps, ctx.refresh_interval):  # a long log's bin means
        beta = p["m"] / (1.0 + p["m"])
        return schedule_response(np.array([p["k"]]), ctx.schedule(n_steps), beta, t)[0]
    return _at_times(_schedule_basis(p["k"], p["m"], n_steps, ctx), t)


def _config_mass(ctx: FitContext) -> float | None:
    """Mass m = beta / (1 - beta) of the reduction's recursion (None: beta1 unknown)."""
    if ctx.beta1 is None:
        return None
    # k -> 0: only the reduction's recursion momentum is read
    beta = fit_reduction(ctx.optimizer, 1e-12, ctx.beta1, ctx.refresh_interval).beta1
    return beta / (1.0 - beta)


def rom_schedule_priors(t: np.ndarray, ctx: FitContext) -> dict[str, tuple[float, float]]:
    return {} if ctx.beta1 is not None else rom_priors(t, ctx)


def rom_schedule_guess(t: np.ndarray, y: np.ndarray, ctx: FitContext) -> list[dict[str, Parameter]]:
    """Grid over (k, m) with one batched recursion, levels profiled out. m is fixed at
    beta1 / (1 - beta1) when the config gives beta1, else free with the rom's prior."""
    k_lo, k_hi = rate_bounds(t)
    k_hi = min(k_hi, 1.0)  # a_n <= 1 keeps the discrete map monotone at the peak lr
    m_lo, m_hi = mass_bounds(t)
    fixed = _config_mass(ctx)
    ms = [fixed] if fixed is not None else [0.0, min(10.0, m_hi), min(30.0, m_hi)]
    ks = np.geomspace(k_lo, k_hi, 16)
    n_steps = int(math.ceil(float(np.max(t))))
    sched = ctx.schedule(n_steps)
    grid = [(k, m) for m in ms for k in ks]
    beta = np.array([m / (1.0 + m) for _, m in grid])
    phi = schedule_response(np.array([k for k, _ in grid]), sched, beta, t, ctx.refresh_interval)
    phi = np.where(np.isfinite(phi), phi, 1e6)
    r_inf, r_0, sse = profile_levels(phi, y, level_bounds(y))
    i = int(np.argmin(sse))
    params = _levels(y, r_inf[i], r_0[i])
    params["k"] = Parameter("k", float(grid[i][0]), k_lo, k_hi)
    m0 = float(grid[i][1])
    params["m"] = Parameter("m", m0, min(m_lo, m0), max(m_hi, m0), vary=fixed is None)
    return [params]


FIT_MODELS.add(
    "rom_schedule",
    CurveModel(
        "rom_schedule",
        ("R_inf", "R_0", "k", "m"),
        rom_schedule_basis,
        rom_schedule_guess,
        rom_schedule_priors,
        time_power={"k": -1, "m": 1},
        physical_time=True,
        description="m x'' + x' + k x = 0 from rest, k scaled by the logged lr / its peak",
        meanings=ROM_MEANINGS,
    ),
)


# --- exponential on the lr clock (the overdamped limit under a schedule) ----------------------


def exponential_lr_basis(t: np.ndarray, p: dict[str, float], ctx: FitContext) -> np.ndarray:
    """exp(-U(t) / tau): the exponential law with the lr schedule as its clock, the m -> 0 limit
    of `rom_schedule` (a step at half the peak lr makes half the progress)."""
    return np.exp(-lr_time(t, ctx) / p["tau"])


def exponential_lr_guess(t, y, ctx: FitContext) -> list[dict[str, Parameter]]:
    params = exponential_guess(lr_time(t, ctx), y, ctx)[0]
    return [params]


FIT_MODELS.add(
    "exponential_lr",
    CurveModel(
        "exponential_lr",
        ("R_inf", "R_0", "tau"),
        exponential_lr_basis,
        exponential_lr_guess,
        timescale_prior,
        time_power={"tau": 1},
        physical_time=True,
        description="R_inf + (R_0 - R_inf) exp(-T / tau), T the steps weighted by lr / its peak",
        meanings={**LEVEL_MEANINGS, "tau": "time constant"},
    ),
)
