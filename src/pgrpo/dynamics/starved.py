"""The rom with gradient starvation (`rom_starved`): the heavy-ball recursion whose force acts only
through the groups that have a reward spread.

A group of G rollouts whose 0/1 rewards are all equal gets zero advantage from GRPO's group
baseline and gives no gradient (gradient starvation, arXiv 2605.07689; docs/core.md, "Group
statistics"). At success rate u (the reward on its range's 0/1 scale) the share of groups
with a spread is, for rollouts that succeed independently, 1 - u^G - (1 - u)^G
(`core.stats.iid_degeneracy` is the rest). The rom's mean force acts through those groups
only, so our model [derived] is

    x_{n+1} - x_n = beta (x_n - x_{n-1}) - (1 - beta) a_n s(u_{s(n)}) x_{s(n)},
    s(u) = (1 - u^G - (1 - u)^G) / (1 - 2^(1 - G)),   a_n = k lr_n / max(lr)

with x = R - R_inf, u = (R - lo) / (hi - lo) clipped to [0, 1], beta = m / (1 + m), s(n) the
step whose rollouts are in use (refresh interval K, as in `recursion`), and s normalised to 1 at
u = 1/2 so that k is the rom's stiffness in the middle of the range. Where u stays in the middle
s ~ 1 and this is `rom_schedule`; at a floor (u -> 0) s ~ G u, so a run that starts with nearly
every group failing leaves the floor as a logistic curve does, slowly and then sharply: the slow
start a linear oscillator cannot follow (its own lasts ~m steps, and a floor start lasts as long
as the starvation). With prompts of different difficulty the share of starved groups is larger
than the i.i.d. figure (Jensen; docs/reproductions.md, "degeneracy"), which k absorbs.

Not linear in the levels (s reads the absolute level), so `fit_model` fits R_0 and R_inf with the
other parameters instead of profiling them out. It needs G and the reward's 0/1 scale: the
context's reward range (`FitContext.reward_range`; `fit_curve` passes (0, 1) for rewards that all
lie in [0, 1], a success rate) and `FitContext.group_size`. Its clock is the optimizer step, on
the lr schedule when one is known; runs of more than `MAX_STEPS` optimizer steps are not fitted
(a Python-float loop per evaluation). Measured on real runs: docs/dynamics.md, "Fitting".
"""

from __future__ import annotations

import math

import numpy as np

from pgrpo.dynamics.curves import (
    FIT_MODELS,
    ROM_MEANINGS,
    CurveModel,
    FitContext,
    Parameter,
    _levels,
    mass_bounds,
    rate_bounds,
)
from pgrpo.dynamics.recursion import at_times

MAX_STEPS = 20000
"""The most optimizer steps `rom_starved` integrates (about 10 ms per evaluation there)."""


def spread_share(u: float, group_size: int) -> float:
    """s(u): the share of groups of `group_size` i.i.d. 0/1 rewards at success rate u with a
    spread, 1 - u^G - (1 - u)^G (one minus `core.stats.iid_degeneracy`), over its value at
    u = 1/2; u is clipped to [0, 1]. Python floats: the recursion's inner loop calls it."""
    u = 0.0 if u < 0.0 else (1.0 if u > 1.0 else u)
    g = int(group_size)
    return (1.0 - u**g - (1.0 - u) ** g) / (1.0 - 2.0 ** (1 - g))


def starved_run(
    a: list[float],
    beta: float,
    refresh_interval: int,
    r_0: float,
    r_inf: float,
    unit: tuple[float, float],
    group_size: int,
) -> list[float]:
    """R_n on n = 0..len(a) for R_0 = r_0, v0 = 0: a [n_steps] (a_n = k lr_n / max lr); unit =
    (u0, u1) maps a level to the 0/1 scale, u = u0 + u1 R. Python floats (the fit's loop)."""
    g = 1.0 - beta
    K = int(refresh_interval)
    u0, u1 = unit
    x, v = r_0 - r_inf, 0.0
    xs = x
    share = spread_share(u0 + u1 * r_0, group_size)
    out = [r_0]
    append = out.append
    for n, an in enumerate(a):
        if n % K == 0:
            xs = x
            share = spread_share(u0 + u1 * (xs + r_inf), group_size)
        v = beta * v - g * (an * share * xs)
        x = x + v
        append(x + r_inf)
    return out


def unit_map(ctx: FitContext) -> tuple[float, float]:
    """(u0, u1) with u = u0 + u1 R on the 0/1 scale of ctx.reward_range, for levels R in the
    context's units (the fit's standardised reward: R_user = loc + scale R)."""
    if ctx.reward_range is None or ctx.group_size is None:
        raise ValueError("rom_starved needs the reward's range and the group size G")
    lo, hi = ctx.reward_range
    loc, scale = ctx.reward_units
    return (loc - lo) / (hi - lo), scale / (hi - lo)


def rom_starved_path(t: np.ndarray, p: dict[str, float], ctx: FitContext) -> np.ndarray:
    """R(t): [n] at t: [n] (optimizer steps since the first logged step)."""
    n_steps = int(math.ceil(float(np.max(t)))) if t.size else 0
    if n_steps > MAX_STEPS:
        raise ValueError(f"rom_starved integrates at most {MAX_STEPS} optimizer steps")
    a = (p["k"] * ctx.schedule(n_steps)).tolist()
    beta = p["m"] / (1.0 + p["m"])
    path = starved_run(a, beta, ctx.refresh_interval, p["R_0"], p["R_inf"], unit_map(ctx),
                       int(ctx.group_size))  # fmt: skip
    return at_times(np.asarray(path), t)


def rom_starved_guess(t: np.ndarray, y: np.ndarray, ctx: FitContext) -> list[dict[str, Parameter]]:
    """Starts on a (k, m) grid, the levels at the first and last windows' means (R_0 nudged off
    the range's floor and ceiling, where s = 0 holds it still); the three best by SSE."""
    k_lo, k_hi = rate_bounds(t)
    k_hi = min(k_hi, 1.0)  # a_n s <= 1 keeps the discrete map monotone
    m_lo, m_hi = mass_bounds(t)
    w = max(3, y.size // 10)
    u0, u1 = unit_map(ctx)
    lo, hi = sorted(((0.0 - u0) / u1, (1.0 - u0) / u1))
    nudge = 1e-3 * (hi - lo)
    r_0 = float(np.clip(np.mean(y[:w]), lo + nudge, hi - nudge))
    r_inf = float(np.mean(y[-w:]))
    scored = []
    for m in (0.0, min(10.0, m_hi), min(30.0, m_hi)):
        for k in np.geomspace(k_lo, k_hi, 12):
            fit = rom_starved_path(t, {"R_0": r_0, "R_inf": r_inf, "k": k, "m": m}, ctx)
            sse = float(np.sum((fit - y) ** 2)) if np.all(np.isfinite(fit)) else math.inf
            scored.append((sse, float(k), float(m)))
    scored.sort()
    starts = []
    for _, k, m in scored[:3]:
        params = _levels(y, r_inf, r_0)
        params["k"] = Parameter("k", k, k_lo, k_hi)
        params["m"] = Parameter("m", m, m_lo, m_hi)
        starts.append(params)
    return starts


def rom_starved_priors(t: np.ndarray, ctx: FitContext) -> dict[str, tuple[float, float]]:
    """rom_schedule's (the free fit's mass prior)."""
    from pgrpo.dynamics.schedule_models import rom_schedule_priors

    return rom_schedule_priors(t, ctx)


FIT_MODELS.add(
    "rom_starved",
    CurveModel(
        "rom_starved",
        ("R_inf", "R_0", "k", "m"),
        lambda t, p, ctx: np.full(np.shape(t), math.nan),  # no basis: the path is not linear
        rom_starved_guess,
        rom_starved_priors,
        time_power={"k": -1, "m": 1},
        physical_time=True,
        path=rom_starved_path,
        description="m x'' + x' + k x = 0 from rest, the force through the groups with a "
        "reward spread only",
        meanings=ROM_MEANINGS,
    ),
)


def starved_range(
    reward: np.ndarray, reward_range: tuple[float, float] | None
) -> tuple[float, float] | None:
    """The 0/1 scale `rom_starved` reads the reward on: the known range when the rewards lie in
    it, else (0, 1) when they all do (a success rate), else None (not applicable)."""
    from pgrpo.core.rewardrange import range_holding

    held = range_holding(reward, reward_range)
    if held is not None:
        return held
    r = np.asarray(reward, dtype=float)
    return (0.0, 1.0) if float(np.min(r)) >= 0.0 and float(np.max(r)) <= 1.0 else None
