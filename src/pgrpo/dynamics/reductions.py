"""Optimizer reductions: how an optimizer's settings fix the ROM's mass and damping.

The constrained fit (`rom_fixed`, docs/dynamics.md) takes m and c from the optimizer instead of
fitting them. That mapping depends on the optimizer, so it lives behind one registry,
`OPTIMIZER_REDUCTIONS`, and `reduce_optimizer` is the only function that computes it; every
fit names the reduction it assumed in its metrics (`optimizer_reduction`).

Built in: `momentum`, the heavy-ball EMA recursion of ../shared/notes/dynamics.md
(x_{n+1} - x_n = beta1 (x_n - x_{n-1}) - (1 - beta1) a_n x_{s(n)}), with the continuum
coefficients of `model.rom_coefficients`: m = beta1 / (1 - beta1) + k l^2 / 2, c = 1 - k l,
l = (K - 1) / 2. For Adam(W) this treats the preconditioner as folded into kappa (the notes'
"effective curvature"); an Adam-aware reduction registers here under its own name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from pgrpo._registry import Registry


@dataclass(frozen=True)
class Reduction:
    """(m, c) of `m x'' + c x' + k x = 0` at stiffness k (per optimizer step), and the momentum
    `beta` of the equivalent discrete recursion (used when the lr follows a schedule)."""

    name: str
    m: float
    c: float
    beta: float
    refresh_interval: int
    metrics: dict[str, float] = field(default_factory=dict)


ReductionFunc = Callable[[float, float, int], Reduction]
OPTIMIZER_REDUCTIONS: Registry[ReductionFunc] = Registry("optimizer reduction")


def _momentum(k: float, beta1: float, refresh_interval: int) -> Reduction:
    lag = (refresh_interval - 1) / 2.0
    m = beta1 / (1.0 - beta1) + k * lag * lag / 2.0
    return Reduction("momentum", m, 1.0 - k * lag, beta1, refresh_interval, {"lag": lag})


OPTIMIZER_REDUCTIONS.add("momentum", _momentum)

DEFAULT_REDUCTION = "momentum"


def reduce_optimizer(
    k: float, beta1: float, refresh_interval: int = 1, optimizer: str = DEFAULT_REDUCTION
) -> Reduction:
    """The one path from optimizer settings to (m, c): k >= 0 (stiffness per optimizer step),
    beta1 in [0, 1), refresh interval K >= 1, optimizer: an OPTIMIZER_REDUCTIONS name."""
    if not 0.0 <= beta1 < 1.0:
        raise ValueError(f"beta1 must be in [0, 1), got {beta1!r} (Adam's default is 0.9)")
    if int(refresh_interval) != refresh_interval or refresh_interval < 1:
        raise ValueError(f"refresh_interval must be an integer >= 1, got {refresh_interval!r}")
    if not (k >= 0 and math.isfinite(k)):
        raise ValueError(f"stiffness k must be finite and >= 0, got {k!r}")
    return OPTIMIZER_REDUCTIONS.get(optimizer)(float(k), float(beta1), int(refresh_interval))


def max_stable_rate(refresh_interval: int) -> float:
    """Largest k (per optimizer step) with positive damping c = 1 - k l: inf for K = 1."""
    lag = (refresh_interval - 1) / 2.0
    return math.inf if lag == 0 else 1.0 / lag
