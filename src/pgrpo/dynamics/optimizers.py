"""Optimizer reductions: what each optimizer turns the mean-field GRPO dynamics into.

One registry, `OPTIMIZER_REDUCTIONS`, one signature: `reduction(settings: OptimizerSettings) ->
OptimizerReduction`. Every entry gives the exact linearised recursion near the fixed point (the
heavy-ball recursion of `pgrpo.dynamics.recursion` at an effective per-step stiffness `a`), its
continuum mass / damping / stiffness, and a statement about the refresh-interval threshold K*:
a number, or "no threshold predicted" with the reason. Derivation: docs/dynamics.md, section
"Adam and AdamW" (our own; arXiv 2606.30789 derives only the heavy-ball case).

- `sgd_momentum`: SGD with EMA momentum, v <- b1 v + (1 - b1) g, theta <- theta + lr v. The
  recursion is exact in the linear regime with a = lr kappa; K* is the exact first-unstable K of
  the one-window monodromy (`refresh_threshold`).
- `adam`: Adam / AdamW, theta <- theta + lr m_hat / (sqrt(v_hat) + eps). With v frozen at its
  mean, the recursion is the heavy-ball one at a = lr kappa / u, u = sqrt(E g^2) + eps. Near the
  fixed point E g^2 = sigma^2 + kappa^2 Var(x_s) (sigma: the gradient's noise RMS): a deviation
  raises v and lowers the step, so the mean cannot grow geometrically. The noise-only
  linearisation (u = sigma) loses stability at K_lin (the heavy-ball K* at a0 = lr kappa / sigma);
  past it the self-consistent (Gaussian-closure) v holds the deviation at a finite RMS that grows
  about linearly in K (-> lr K / 2 at beta1 = 0). So: no divergence threshold; the RMS of the
  deviation is a smooth function of K (with window-constant noise it has no visible kink at
  K_lin either, see docs/reproductions.md).

This is the only path from optimizer settings to (m, c): the ROM's coefficients
(`model.rom_coefficients`), `predict`, the constrained fit (`rom_fixed`, via `fit_reduction`),
the online forecast, the diagnosis's stability margin and the report's K / K* all call
`reduce_optimizer`. A log names its optimizer in the hyperparameter `optimizer` (pgrpo:
`optim.name`); `run_optimizer` maps it to a reduction, AdamW when the log does not say (the
default of pgrpo, TRL and verl).

What kappa means: under `sgd_momentum` it is the curvature, a = lr kappa. Under `adam` it is
the preconditioned curvature: a = lr kappa / u with u = sqrt(E g^2) + eps the second-moment
scale. A fit of the reward curve measures a (the effective stiffness per optimizer step), so its
kappa = a / lr is kappa / u under Adam (`closure=False`: u is not solved, it is absorbed).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.linalg import solve_discrete_lyapunov

from pgrpo._registry import Registry
from pgrpo.dynamics.recursion import (
    RESOLVED_GAP,
    default_max_refresh,
    first_unstable,
    refresh_threshold,
    slow_gap,
)
from pgrpo.errors import MAX_ABS_VALUE

DEFAULT_OPTIMIZER = "adam"
"""The reduction assumed when a log does not name its optimizer: AdamW is the default of pgrpo's
trainer, TRL (`optim="adamw_torch"`) and verl (`optim.optimizer="AdamW"`)."""


@dataclass(frozen=True)
class OptimizerSettings:
    """The hyperparameters and measured scales one reduction needs."""

    lr: float
    """Learning rate (peak)."""
    kappa: float
    """Curvature of the expected gradient along the update direction, per unit of the state x.
    For `adam` with grad_rms=None: the preconditioned curvature kappa / sigma (a = lr kappa)."""
    beta1: float = 0.9
    """Momentum / Adam first-moment decay, in [0, 1)."""
    refresh_interval: int = 1
    """K: optimizer steps per rollout batch."""
    beta2: float = 0.999
    """Adam second-moment decay, in (0, 1) (unused by sgd_momentum)."""
    eps: float = 1e-8
    """Adam's eps, in the gradient's units (unused by sgd_momentum)."""
    current_fraction: float = 0.0
    """Part of kappa that acts on the current state rather than the rollouts' (e.g. a KL in the
    loss: `pgrpo.bandit.kappa.Curvature.kappa_now / kappa`); 0 = the all-stale force of
    docs/dynamics.md."""
    max_refresh: int | None = None
    """Scan K up to this for the thresholds (None: 10 (2 / a + 2 / (1 - beta1)) + 10)."""
    grad_rms: float | None = None
    """sigma: RMS of the stochastic gradient at the fixed point (its noise; the mean is 0 there),
    in the units of kappa x. None: kappa is already divided by it (sigma = 1, eps ignored)."""
    closure: bool = True
    """adam only. True: solve the second-moment closure for u from the noise (a prediction).
    False: kappa is already the effective curvature at the operating point (a = lr kappa /
    (sigma + eps)), as a fit of the reward curve measures it; no closure is solved."""

    def __post_init__(self) -> None:
        fixes = {
            "lr": "give the run's (peak) learning rate, e.g. 1e-6",
            "kappa": "give the curvature per unit lr that `pgrpo probe` or `pgrpo fit` measures "
            "(kappa <= 0: no restoring force, no plateau to predict)",
        }
        for name, fix in fixes.items():
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}; {fix}")
        a = self.lr * self.kappa
        if not 0 < a <= MAX_ABS_VALUE or self.lr > MAX_ABS_VALUE:
            raise ValueError(
                f"a = lr * kappa = {a:g} (lr={self.lr:g}, kappa={self.kappa:g}) is outside "
                f"(0, {MAX_ABS_VALUE:.0e}] in float64; check the units: lr is the optimizer's "
                "step size, kappa the curvature per unit lr"
            )
        if not 0.0 <= self.beta1 < 1.0:
            raise ValueError(f"beta1 must be in [0, 1), got {self.beta1!r}; 0.9 is the usual")
        if not 0.0 < self.beta2 < 1.0:
            raise ValueError(f"beta2 must be in (0, 1), got {self.beta2!r}; 0.999 is the usual")
        if int(self.refresh_interval) != self.refresh_interval or self.refresh_interval < 1:
            raise ValueError(
                f"refresh_interval must be an integer >= 1, got {self.refresh_interval!r}; K = "
                "optimizer steps per rollout batch (1 on-policy)"
            )
        if not 0.0 <= self.current_fraction <= 1.0:
            raise ValueError(f"current_fraction must be in [0, 1], got {self.current_fraction!r}")
        if self.eps < 0:
            raise ValueError(f"eps must be >= 0, got {self.eps!r}")
        if self.grad_rms is not None and not (math.isfinite(self.grad_rms) and self.grad_rms > 0):
            raise ValueError(f"grad_rms must be > 0 or None, got {self.grad_rms!r}")
        if self.max_refresh is not None and self.max_refresh < 1:
            raise ValueError(f"max_refresh must be >= 1 or None, got {self.max_refresh!r}")


@dataclass(frozen=True)
class OptimizerReduction:
    """The linearised dynamics one optimizer gives, and what it says about K.

    a, beta1: the exact linear recursion x_{n+1} - x_n = beta1 (x_n - x_{n-1}) - (1 - beta1) a
    x_{s(n)} (`simulate_recursion(a, beta1, ...)`); a is also the continuum stiffness (per
    optimizer step), mass and damping the continuum coefficients at the settings' K; K_star:
    the first refresh interval at which the mean diverges, None when no divergence is
    predicted (`K_statement` says why; metrics `threshold_predicted` False) or none is found up
    to the scan limit; metrics: stable names
    (`linear_threshold`, `effective_a`, `threshold_predicted`, `kappa_meaning`, ...).
    """

    optimizer: str
    a: float
    beta1: float
    mass: float
    damping: float
    K_star: int | None
    K_statement: str
    metrics: dict[str, Any] = field(default_factory=dict)

    def diverges(self, refresh_interval: int) -> bool:
        """Whether the mean is predicted to diverge at this K."""
        return self.K_star is not None and refresh_interval >= self.K_star


Reduction = Callable[[OptimizerSettings], OptimizerReduction]
OPTIMIZER_REDUCTIONS: Registry[Reduction] = Registry("optimizer reduction")


def reduce_optimizer(name: str, settings: OptimizerSettings) -> OptimizerReduction:
    """The reduction registered under `name` (unknown names list the valid ones)."""
    return OPTIMIZER_REDUCTIONS.get(name)(settings)


def fit_reduction(name: str, k: float, beta1: float, refresh_interval: int) -> OptimizerReduction:
    """`reduce_optimizer` as a fit of the reward curve uses it: k (> 0) is the measured effective
    stiffness per optimizer step (lr = 1, kappa = k; under adam kappa / u, no closure), and K is
    scanned only up to the run's own K (cheap; `K_star` then says only whether K >= K*)."""
    settings = OptimizerSettings(
        lr=1.0,
        kappa=float(k),
        beta1=float(beta1),
        refresh_interval=int(refresh_interval),
        closure=False,
        max_refresh=int(refresh_interval),
    )
    return reduce_optimizer(name, settings)


FRAMEWORK_BETA1: dict[str, float] = {"adam": 0.9}
"""The beta1 a run of a reduction's optimizer has when its config sets none: torch AdamW's
betas = (0.9, 0.999), which TRL, verl and pgrpo's trainer keep. sgd_momentum has none to
assume (torch SGD's momentum defaults to 0; a config that uses momentum sets it)."""

# names a log may give its optimizer (pgrpo `optim.name`, TRL `optim`, verl `optim.optimizer`)
_LOG_PREFIXES = (("adam", "adam"), ("paged_adam", "adam"), ("sgd", "sgd_momentum"))


def known_optimizers() -> str:
    """The optimizer names `run_optimizer` accepts, in words (for messages)."""
    parts = []
    for name in OPTIMIZER_REDUCTIONS.names():
        prefixes = [p for p, r in _LOG_PREFIXES if r == name]
        parts.append(f"{name} (or any name starting with {' / '.join(prefixes)})" if prefixes
                     else name)  # fmt: skip
    return ", ".join(parts)


def run_optimizer(logged: str | None) -> str:
    """The OPTIMIZER_REDUCTIONS name for a run's logged optimizer: None -> DEFAULT_OPTIMIZER
    (AdamW, the trainers' default); a registry name -> itself; adamw / adamw_torch / AdamW /
    paged_adamw_8bit -> adam; sgd / sgd_momentum -> sgd_momentum. Others fail naming the valid
    reductions (the dynamics model has none for them)."""
    if logged is None:
        return DEFAULT_OPTIMIZER
    name = str(logged).strip().lower()
    if name in OPTIMIZER_REDUCTIONS:
        return name
    for prefix, reduction in _LOG_PREFIXES:
        if name.startswith(prefix):
            return reduction
    raise ValueError(
        f"optimizer {logged!r} has no reduction in the dynamics model; set the run's optimizer "
        f"(config.yaml optim.name) to an AdamW / SGD variant or one of "
        f"{', '.join(OPTIMIZER_REDUCTIONS.names())}, or remove it to assume AdamW"
    )


def heavy_ball_continuum(a: float, beta1: float, refresh_interval: int) -> tuple[float, float]:
    """(m, c) of `m x'' + c x' + a x = 0` for the recursion x_{n+1} - x_n = beta1 (x_n - x_{n-1})
    - (1 - beta1) a x_{n-l}, l = (K - 1) / 2 (divide by 1 - beta1, Taylor-expand the lagged force
    to second order; docs/dynamics.md, "Adam and AdamW"): m = beta1 / (1 - beta1) + a l^2 / 2,
    c = 1 - a l. Both registry entries reduce to this recursion at their effective a."""
    lag = (refresh_interval - 1) / 2.0
    return beta1 / (1.0 - beta1) + a * lag * lag / 2.0, 1.0 - a * lag


def max_stable_rate(refresh_interval: int) -> float:
    """Largest effective a (per optimizer step) with positive continuum damping c = 1 - a l:
    inf for K = 1."""
    lag = (refresh_interval - 1) / 2.0
    return math.inf if lag == 0 else 1.0 / lag


@OPTIMIZER_REDUCTIONS.register("sgd_momentum")
def sgd_momentum(s: OptimizerSettings) -> OptimizerReduction:
    """EMA momentum: a = lr kappa; K* exact from the one-window monodromy."""
    a = s.lr * s.kappa
    thr = refresh_threshold(a, s.beta1, max_refresh=s.max_refresh)
    k_star = window_threshold(a, s.beta1, s.current_fraction, max_refresh=s.max_refresh)
    m, c = heavy_ball_continuum(a, s.beta1, s.refresh_interval)
    if k_star is None and thr.rule_of_thumb > 2.0**53:
        statement = (
            f"no K* given: at a = lr kappa = {a:.3g} it lies near 2 / a + 2 beta1 / (1 - beta1) "
            f"= {thr.rule_of_thumb:.3g} refresh intervals, past float64's exact integers; no run "
            "reaches it"
        )
    elif k_star is None:
        statement = "no threshold found up to the scan limit (the window map stays stable)"
    else:
        statement = (
            f"K* = {k_star}: first refresh interval whose one-window map has spectral radius "
            f"> 1 (a = lr kappa = {a:.4g}, beta1 = {s.beta1:g}); the mean diverges for K >= K*"
        )
    return OptimizerReduction(
        "sgd_momentum",
        a,
        s.beta1,
        m,
        c,
        k_star,
        statement,
        {
            "linear_threshold": k_star,
            "stale_force_threshold": thr.K_star,
            "effective_a": a,
            "rule_of_thumb": thr.rule_of_thumb,
            "kappa_meaning": "curvature: a = lr kappa",
            "threshold_predicted": True,
        },
    )


def window_maps(
    a: float, beta1: float, refresh_interval: int, current_fraction: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """One rollout window of the recursion with a force noise e held for the window (the rollouts'
    sampling error): (x, x_prev) at the next window start = A (x, x_prev) + B e.

    Steps use force a ((1 - f) x_s + f x_n) + e (x_s = x at the window start, f =
    current_fraction); f = 0 is `recursion.monodromy` (its nonzero eigenvalues are A's).
    Returns A: [2, 2], B: [2].
    """
    g = 1.0 - beta1
    f = current_fraction
    step = np.array(
        [
            [1.0 + beta1 - g * a * f, -beta1, -g * a * (1.0 - f), -g],
            [1.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 1.0, 0.0],
            [0.0, 0.0, 0.0, 1.0],
        ]
    )
    P = np.linalg.matrix_power(step, int(refresh_interval))
    A = P[:2, :2].copy()
    A[:, 0] += P[:2, 2]  # x_s <- x at the refresh
    return A, P[:2, 3].copy()


def window_threshold(
    a: float,
    beta1: float,
    current_fraction: float = 0.0,
    *,
    max_refresh: int | None = None,
    tol: float = 1e-12,
) -> int | None:
    """First K whose window map A has spectral radius > 1 + tol (None: none up to max_refresh,
    default as `refresh_threshold`). Equal to `refresh_threshold(a, beta1).K_star` at f = 0."""
    if current_fraction == 0.0:
        return refresh_threshold(a, beta1, max_refresh=max_refresh, tol=tol).K_star
    if max_refresh is None:
        max_refresh = default_max_refresh(a, beta1)
    g, f = 1.0 - beta1, current_fraction
    step = np.array(
        [[1.0 + beta1 - g * a * f, -beta1, -g * a * (1.0 - f)], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    )

    def radius(K: int) -> float:
        P = np.linalg.matrix_power(step, K)
        A = P[:2, :2].copy()
        A[:, 0] += P[:2, 2]  # x_s <- x at the refresh
        return float(np.max(np.abs(np.linalg.eigvals(A))))

    return first_unstable(radius, max_refresh, tol)


def window_noise_gain(
    a: float, beta1: float, refresh_interval: int, current_fraction: float = 0.0
) -> float:
    """Phi: stationary Var(x_s) per unit Var(e) of the window recursion (inf when unstable).

    Exact for the linear recursion with one independent noise draw per window (discrete
    Lyapunov equation); beta1 = 0 gives K^2 / (a K (2 - a K)). Where float64 does not resolve
    the map's slow modes (`recursion.RESOLVED_GAP`: a -> 0 or beta1 -> 1), the continuum limit
    K / (2 a c), c = 1 - a (K - 1) / 2 (each window moves x by -K (a x + e)): the eigenvalue test
    called every a0 <= 1e-12 unstable and Adam's closure then found no root.
    """
    A, B = window_maps(a, beta1, refresh_interval, current_fraction)
    ev = np.linalg.eigvals(A)
    c = heavy_ball_continuum(a, beta1, refresh_interval)[1]
    if slow_gap(ev) < RESOLVED_GAP and c > 0:
        return refresh_interval / (2.0 * a * c)
    if np.max(np.abs(ev)) >= 1.0 - 1e-12:
        return math.inf
    sigma = solve_discrete_lyapunov(A, np.outer(B, B))
    return float(sigma[0, 0])


def adam_self_consistent(
    a0: float,
    beta1: float,
    refresh_interval: int,
    current_fraction: float = 0.0,
    eps_ratio: float = 0.0,
) -> tuple[float, float]:
    """Gaussian closure of Adam's second moment near the fixed point.

    a0 = lr kappa / (sigma + eps) (the noise-only stiffness); eps_ratio = eps / sigma. Unknown
    w = u / sigma, u^2 = E g^2 = sigma^2 + kappa^2 Var(x_s); the step divides by u + eps, so
    a(w) = lr kappa / (w sigma + eps) = a0 (1 + eps_ratio) / (w + eps_ratio) (a0 / w at eps = 0),
    and with the step's force a x_s + e, e of RMS lr sigma / (u + eps), Var(x_s) / s^2 =
    a^2 Phi(a) (s = sigma / kappa), so

        w^2 = 1 + a(w)^2 Phi(a(w), beta1, K).

    Solved by bisection in log w (the right side falls as w grows, the left rises: one root).
    Returns (w, rms) with rms = sqrt(w^2 - 1) = RMS of x_s in units of s. (The stiffness the
    caller reports, lr kappa / (w sigma + eps), is a(w): until 2026-12-03 the closure solved at
    a0 / w instead, which differs when eps ~ sigma, so the reported stiffness was not the one
    solved for and could be unstable.)
    """

    def excess(w: float) -> float:
        a = a0 * (1.0 + eps_ratio) / (w + eps_ratio)
        phi = window_noise_gain(a, beta1, refresh_interval, current_fraction)
        return w * w - 1.0 - (a * a * phi if math.isfinite(phi) else math.inf)

    lo, hi = 1.0, 2.0
    while excess(hi) < 0:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            raise ValueError(f"no self-consistent second moment for a0={a0!r}")
    for _ in range(80):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if excess(mid) < 0 else (lo, mid)
    w = hi
    # rms from the right side, a(w)^2 Phi: w^2 - 1 cancels to float64's 1e-16 for a0 < 1e-11
    a = a0 * (1.0 + eps_ratio) / (w + eps_ratio)
    phi = window_noise_gain(a, beta1, refresh_interval, current_fraction)
    return w, a * math.sqrt(phi) if math.isfinite(phi) else math.sqrt(max(w * w - 1.0, 0.0))


@functools.lru_cache(maxsize=64)
def adam_step_bound(beta1: float, beta2: float, *, horizon: int = 100_000) -> float:
    """Sup over steps t <= horizon of the worst-case |m_hat_t / sqrt(v_hat_t)| per coordinate
    (eps = 0), whatever the gradients: by Cauchy-Schwarz on the two bias-corrected EMAs,

        |m_hat_t| / sqrt(v_hat_t) <= (1 - b1) / (1 - b1^t) sqrt((1 - b2^t) / (1 - b2))
                                     sqrt(sum_{j < t} (b1^2 / b2)^j),

    attained by g_i proportional to (b1 / b2)^(t - i). Finite for every t when b1^2 < b2 (then it
    converges as t grows); inf when b1^2 >= b2 (no uniform bound from this argument). Kingma &
    Ba (2015, sec. 2.1) give the looser typical-case value max(1, (1 - b1) / sqrt(1 - b2)).
    """
    r = beta1 * beta1 / beta2
    if r >= 1.0:
        return math.inf
    t = np.arange(1, horizon + 1, dtype=float)
    geo = (1.0 - r**t) / (1.0 - r)
    bound = (1.0 - beta1) / (1.0 - beta1**t) * np.sqrt((1.0 - beta2**t) / (1.0 - beta2) * geo)
    return float(bound.max())


@OPTIMIZER_REDUCTIONS.register("adam")
def adam(s: OptimizerSettings) -> OptimizerReduction:
    """Adam / AdamW near the fixed point: heavy-ball at a = lr kappa / u, u self-consistent."""
    sigma = 1.0 if s.grad_rms is None else s.grad_rms
    eps = 0.0 if s.grad_rms is None else s.eps
    a0 = s.lr * s.kappa / (sigma + eps)
    K = int(s.refresh_interval)
    w, rms = (
        adam_self_consistent(a0, s.beta1, K, s.current_fraction, eps / sigma)
        if s.closure
        else (1.0, 0.0)
    )
    a_eff = s.lr * s.kappa / (w * sigma + eps)  # a(w) of the closure
    k_lin = window_threshold(a0, s.beta1, s.current_fraction, max_refresh=s.max_refresh)
    m, c = heavy_ball_continuum(a_eff, s.beta1, K)
    bound = adam_step_bound(s.beta1, s.beta2)
    where = "no K up to the scan limit" if k_lin is None else f"K_lin = {k_lin}"
    bounded = (
        f"each step is at most {bound:.3g} lr per coordinate; Cauchy-Schwarz on the two moments"
        if math.isfinite(bound)
        else f"but with beta1^2 >= beta2 ({s.beta1:g}^2 >= {s.beta2:g}) no uniform bound on the "
        "step follows from the two moments, so this rests on the closure alone"
    )
    statement = (
        "no divergence threshold predicted: Adam divides the step by sqrt(v), and v grows with "
        "the deviation (E g^2 = sigma^2 + kappa^2 Var x), so the mean cannot grow geometrically "
        f"({bounded}). The "
        f"noise-only linearisation (a0 = lr kappa / sigma = {a0:.4g}) loses stability at {where}; "
        "past it the deviation stays bounded, its RMS growing about linearly in K (-> lr K / 2 in "
        "the normalised coordinate at beta1 = 0)"
    )
    return OptimizerReduction(
        "adam",
        a_eff,
        s.beta1,
        m,
        c,
        None,
        statement,
        {
            "linear_threshold": k_lin,
            "effective_a": a_eff,
            "noise_only_a": a0,
            "second_moment_ratio": w * w,
            "rms_over_noise_scale": rms,
            "rms_deviation": rms * sigma / s.kappa,
            "noise_scale": sigma / s.kappa,
            "step_bound": bound,
            "beta2_memory": 1.0 / (1.0 - s.beta2),
            "closure": s.closure,
            "threshold_predicted": False,
            "kappa_meaning": "preconditioned curvature kappa / u (u = sqrt(E g^2) + eps, Adam's "
            "second-moment scale): a = lr kappa / u is the effective stiffness per step",
        },
    )


__all__ = [
    "DEFAULT_OPTIMIZER",
    "OPTIMIZER_REDUCTIONS",
    "OptimizerReduction",
    "OptimizerSettings",
    "adam_self_consistent",
    "adam_step_bound",
    "fit_reduction",
    "heavy_ball_continuum",
    "known_optimizers",
    "max_stable_rate",
    "reduce_optimizer",
    "run_optimizer",
    "window_maps",
    "window_noise_gain",
    "window_threshold",
]
