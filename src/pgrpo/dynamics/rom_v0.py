"""The rom with a free initial velocity, `rom_v0` (two free exponential weights): a fast rise and
a slow creep. Optional (not in fit_curve(model="rom")'s selection). Registered in
`curves.FIT_MODELS` (importing `pgrpo.dynamics.curves` registers it)."""

from __future__ import annotations

import numpy as np

from pgrpo.dynamics.curves import (
    FIT_MODELS,
    ROM_MEANINGS,
    CurveModel,
    FitContext,
    Parameter,
    _levels,
    level_bounds,
    mass_bounds,
    profile_levels,
    rate_bounds,
    rom_guess,
    rom_priors,
)
from pgrpo.dynamics.model import _unit_response


def rom_v0_basis(t: np.ndarray, p: dict[str, float], ctx: FitContext) -> np.ndarray:
    """Closed form with x'(0) = u x(0): u (1/step) frees the weights of the two modes, so a fast
    rise followed by a slow creep (a run resumed mid-flight, or a format reward learned first)
    is representable. u = 0 is `rom`. Optional: not part of fit_curve(model="rom")'s selection
    (on the synthetic suites it helped out-of-family forecasts only partly; docs/dynamics.md)."""
    return _unit_response(t, p["m"], 1.0, p["k"], 1.0, p["u"])


V0_GRID_SHARES = (0.2, 0.4, 0.6, 0.8)
"""The fast mode's shares of the start's distance (x(t) / x(0) = A e^(-t / tau_fast) + (1 - A)
e^(-t / tau_slow)) on `rom_v0_guess`'s grid."""


def rom_v0_guess(t: np.ndarray, y: np.ndarray, ctx: FitContext) -> list[dict[str, Parameter]]:
    """The rom's starts with u = 0, inertial starts with a fast or a slow first mode, and the
    two best points of a grid of two rising modes (a fast and a slow time constant, the fast
    one's share) with the levels profiled out, mapped to (k, m, u) by m r^2 + r + k = 0 (rates
    1/tau_fast + 1/tau_slow = 1/m, their product k/m; u = -(A / tau_fast + (1 - A) / tau_slow)):
    a fast first rise and a slow creep sit where no other start leads the local search (a
    held-back verl run with time constants 4 and 150 steps: R^2 0.842 from the other starts,
    0.962 from the grid; 2026-12-05)."""
    base = rom_guess(t, y, ctx)
    starts = [{**b, "u": Parameter("u", 0.0, -2.0, 2.0)} for b in base]
    m_lo, m_hi = mass_bounds(t)
    for m in (5.0, 20.0, 60.0):
        for u in (-0.5, 0.05):
            starts.append({**base[0], "m": Parameter("m", min(m, m_hi), m_lo, m_hi),
                           "u": Parameter("u", u, -2.0, 2.0)})  # fmt: skip
    k_lo, k_hi = rate_bounds(t)
    span = max(float(np.ptp(t)), 1.0)
    grid = []
    for fast in np.geomspace(1.0, max(span / 10, 1.5), 8):
        for slow in np.geomspace(max(span / 20, 2.0 * fast), 10.0 * span, 8):
            m = 1.0 / (1.0 / fast + 1.0 / slow)
            k = m / (fast * slow)
            if k_lo <= k <= k_hi and m <= m_hi:
                grid += [(k, m, -(a / fast + (1 - a) / slow)) for a in V0_GRID_SHARES]
    if not grid:
        return starts
    phi = np.stack([_unit_response(t, m, 1.0, k, 1.0, u) for k, m, u in grid])
    r_inf, r_0, sse = profile_levels(phi, y, level_bounds(y))
    for i in np.argsort(sse)[:2]:
        k, m, u = grid[int(i)]
        starts.append({**_levels(y, r_inf[i], r_0[i]), "k": Parameter("k", float(k), k_lo, k_hi),
                       "m": Parameter("m", float(m), m_lo, m_hi),
                       "u": Parameter("u", float(np.clip(u, -2.0, 2.0)), -2.0, 2.0)})  # fmt: skip
    return starts


FIT_MODELS.add(
    "rom_v0",
    CurveModel(
        "rom_v0",
        ("R_inf", "R_0", "k", "m", "u"),
        rom_v0_basis,
        rom_v0_guess,
        rom_priors,
        time_power={"k": -1, "m": 1, "u": -1},
        description="m x'' + x' + k x = 0 with a start velocity x'(0) = u x(0)",
        meanings={**ROM_MEANINGS, "u": "start velocity"},
        # at m = 0 the equation is first order: x' = -k x fixes the start velocity, and u (which
        # enters as m u) drops out (nancol review, 2026-12-06: "m=2.449e-11, u=0+-0")
        coupled={"u": "m"},
    ),
)
