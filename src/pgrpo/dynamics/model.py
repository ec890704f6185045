"""The reduced-order model (ROM) of GRPO reward dynamics: coefficients and closed forms.

Writes x = R - R_inf. Heavy-ball momentum with the force evaluated at the rollouts' (stale) state
gives, in the continuum limit (time t = optimizer step n, mean lag l = (K - 1) / 2):

    m x'' + c x' + k x = xi(t),      <xi(t) xi(t')> = 2 D delta(t - t')
    m = beta1 / (1 - beta1) + k l^2 / 2,   c = 1 - k l,   k = eta * kappa,
    D = eta^2 * noise_var / (2 B G)

Source: "Predictable GRPO: A Closed-Form Model of Training Dynamics" (arXiv 2606.30789); the
coefficients are our derivation (docs/dynamics.md, "The model"): divide the
recursion x_{n+1} - x_n = beta1 (x_n - x_{n-1}) - (1 - beta1) a x_{n-l} by (1 - beta1) and Taylor-
expand the lagged force to second order. `noise_var` is V_F, the per-sample variance of the
force per unit learning rate (in the units of kappa x reward); the default kappa^2 p(1-p) at
p = 0.5 says one sample's force error equals the force of a reward displacement of sd 0.5, so
the stationary std is sqrt(a p (1 - p) / (2 c B G)) with a = eta kappa.

All functions are pure and vectorise over numpy arrays of the time argument.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pgrpo.dynamics.optimizers import fit_reduction

REGIMES = ("overdamped", "critical", "underdamped", "unstable")


@dataclass(frozen=True)
class RomCoefficients:
    """Mass, damping, stiffness and noise temperature of the continuum model (per optimizer step).

    `metrics` holds the derived quantities under stable names: zeta, tau, regime, lag, ...
    """

    m: float
    c: float
    k: float
    D: float
    lr: float
    beta1: float
    refresh_interval: int
    kappa: float
    metrics: dict[str, float | str] = field(default_factory=dict)

    @property
    def zeta(self) -> float:
        return damping_ratio(self.m, self.c, self.k)

    @property
    def tau(self) -> float:
        """Timescale of the overdamped limit, c / k (steps); = 1 / k without lag."""
        return self.c / self.k if self.k > 0 else math.inf

    @property
    def regime(self) -> str:
        return regime(self.m, self.c, self.k)


def rom_coefficients(
    lr: float,
    beta1: float,
    kappa: float,
    *,
    refresh_interval: int = 1,
    group_size: int = 1,
    batch_prompts: int = 1,
    noise_var: float | None = None,
    force_ratio: float = 1.0,
    optimizer: str = "sgd_momentum",
) -> RomCoefficients:
    """Map hyperparameters to (m, c, k, D) of `m x'' + c x' + k x = xi`.

    lr: learning rate eta (> 0); beta1: momentum in [0, 1); kappa: curvature scale (> 0);
    refresh_interval K >= 1; group_size G >= 1; batch_prompts B >= 1. force_ratio: the exact
    finite-G force relative to G -> infinity (`pgrpo.bandit.force.finite_group_force(p, G)
    .ratio`), which scales the stiffness: k = eta kappa force_ratio (1.0: the leading-order,
    G-invariant model).
    optimizer: the `optimizers.OPTIMIZER_REDUCTIONS` name that maps (k, beta1, K) to (m, c);
    kappa is then the effective curvature of that optimizer (under adam kappa / u: use
    `predict(optimizer="adam")` to solve u from the noise).
    """
    _check_hyper(lr, beta1, kappa, refresh_interval, group_size, batch_prompts)
    if not 0.0 < force_ratio <= 2.0:
        raise ValueError(f"force_ratio must be in (0, 2], got {force_ratio!r}")
    k = lr * kappa * force_ratio
    lag = (refresh_interval - 1) / 2.0
    red = fit_reduction(optimizer, k, beta1, refresh_interval)  # the one path to (m, c)
    m, c = red.mass, red.damping
    if noise_var is None:
        noise_var = 0.25 * kappa**2
    if noise_var < 0:
        raise ValueError(f"noise_var must be >= 0, got {noise_var!r}")
    D = lr**2 * noise_var / (2.0 * batch_prompts * group_size)
    zeta = damping_ratio(m, c, k)
    metrics: dict[str, float | str] = {
        "zeta": zeta,
        "tau": c / k,
        "lag": lag,
        "regime": regime(m, c, k),
        "a": k,
        "inflection_time": inflection_time(m, c, k),
    }
    if c > 0:
        metrics["stationary_variance"] = stationary_variance(m, c, k, D)
    return RomCoefficients(m, c, k, D, lr, beta1, refresh_interval, kappa, metrics)


@dataclass(frozen=True)
class ScheduleCoefficients:
    """Per-step coefficients for an lr schedule: m, c, k, D, zeta: [n]."""

    m: np.ndarray
    c: np.ndarray
    k: np.ndarray
    D: np.ndarray
    zeta: np.ndarray


def schedule_coefficients(
    lr: np.ndarray,
    beta1: float,
    kappa: float,
    *,
    refresh_interval: int = 1,
    group_size: int = 1,
    batch_prompts: int = 1,
    noise_var: float | None = None,
    force_ratio: float = 1.0,
) -> ScheduleCoefficients:
    """`rom_coefficients` along an lr schedule: lr [n] (> 0) -> coefficients [n] (the frozen-
    coefficient view; the exact dynamics under a schedule is `simulate_recursion`)."""
    lr = np.asarray(lr, dtype=float)
    if lr.ndim != 1 or lr.size == 0 or np.any(~(lr > 0)):
        raise ValueError("lr must be a non-empty 1-D array of positive learning rates")
    rows = [
        rom_coefficients(float(e), beta1, kappa, refresh_interval=refresh_interval,
                         group_size=group_size, batch_prompts=batch_prompts,
                         noise_var=noise_var, force_ratio=force_ratio)
        for e in lr
    ]  # fmt: skip
    get = lambda name: np.array([getattr(r, name) for r in rows])  # noqa: E731
    return ScheduleCoefficients(get("m"), get("c"), get("k"), get("D"), get("zeta"))


def _check_hyper(lr, beta1, kappa, refresh_interval, group_size, batch_prompts) -> None:
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr!r}")
    if not 0.0 <= beta1 < 1.0:
        raise ValueError(f"beta1 must be in [0, 1), got {beta1!r} (Adam's default is 0.9)")
    if not kappa > 0:
        raise ValueError(f"kappa must be > 0, got {kappa!r}; measure it (docs/dynamics.md)")
    for name, v in (("refresh_interval", refresh_interval), ("group_size", group_size)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    if int(batch_prompts) != batch_prompts or batch_prompts < 1:
        raise ValueError(f"batch_prompts must be an integer >= 1, got {batch_prompts!r}")


def damping_ratio(m: float, c: float, k: float) -> float:
    """zeta = c / (2 sqrt(m) sqrt(k)); inf when m = 0 (first-order system) or k = 0, and when
    sqrt(m) sqrt(k) underflows to 0 (m k itself underflows already for m = 5e-324, the smallest
    float, the mass of beta1 = 5e-324: a ZeroDivisionError found by hypothesis, 2026-12-04)."""
    root = math.sqrt(m) * math.sqrt(k) if m > 0 and k > 0 else 0.0
    if root == 0.0:
        return math.inf if c > 0 else -math.inf
    return c / (2.0 * root)


def regime(m: float, c: float, k: float, *, rtol: float = 1e-9) -> str:
    """'unstable' (c <= 0 or k < 0), 'underdamped', 'critical' (|zeta - 1| <= rtol) or
    'overdamped'."""
    if c <= 0 or k < 0:
        return "unstable"
    z = damping_ratio(m, c, k)
    if abs(z - 1.0) <= rtol:
        return "critical"
    return "underdamped" if z < 1 else "overdamped"


def trajectory(
    t: np.ndarray, R0: float, R_inf: float, m: float, c: float, k: float, v0: float = 0.0
) -> np.ndarray:
    """Closed-form mean trajectory R(t) of `m x'' + c x' + k x = 0`, x = R - R_inf.

    t: [T] (steps since the start); x(0) = R0 - R_inf, x'(0) = v0. One expression covers all
    regimes and is continuous across zeta = 1 and as m -> 0 (where it is exactly the single
    exponential R_inf - (R_inf - R0) exp(-k t / c)): no division by m or by (r+ - r-) occurs.
    """
    t = np.asarray(t, dtype=float)
    return R_inf + _unit_response(t, m, c, k, R0 - R_inf, v0)


def _unit_response(t: np.ndarray, m: float, c: float, k: float, x0: float, v0: float) -> np.ndarray:
    if m < 0:
        raise ValueError(f"mass m must be >= 0, got {m!r}")
    if m == 0.0:
        if c == 0:
            raise ValueError("m = 0 and c = 0: the model is degenerate (no dynamics)")
        return x0 * np.exp(-k * t / c)
    half_c = c / 2.0
    disc = half_c * half_c - m * k  # m^2 (gamma^2 - w0^2)
    if disc >= 0.0:  # overdamped or critical: q = m h
        q = math.sqrt(disc)
        denom = half_c + q
        r_plus = 0.0 if k == 0 else -k / denom  # = -gamma + h, without cancellation
        # e^{-gamma t} sinh(h t) / h = e^{r+ t} (1 - e^{-2 h t}) / (2 h), with h = q / m
        with np.errstate(over="ignore"):  # q t / m -> inf as m -> 0: e^{-inf} = 0 is right
            ht2 = 2.0 * q * t / m
        s_over_m = -np.expm1(-ht2) / (2.0 * q) if q > 0 else t / m
        ch = 0.5 * (1.0 + np.exp(-ht2))
        return np.exp(r_plus * t) * (x0 * ch + (v0 * m + half_c * x0) * s_over_m)
    p = math.sqrt(-disc)  # m * omega_d
    gamma = half_c / m
    wd = p / m
    s = t * np.sinc(wd * t / np.pi)  # sin(wd t) / wd, exact as wd -> 0
    return np.exp(-gamma * t) * (x0 * np.cos(wd * t) + (v0 + gamma * x0) * s)


def inflection_time(m: float, c: float, k: float) -> float:
    """Time of the steepest rise of the v0 = 0 trajectory (the end of the slow start), steps.

    overdamped: atanh(h / gamma) / h = ln(r-/r+) / (r+ - r-); critical: 1 / gamma;
    underdamped: atan(wd / gamma) / wd. Continuous across zeta = 1; 0 when m = 0.
    """
    if m <= 0:
        return 0.0
    if c <= 0 or k <= 0:
        return math.nan
    half_c = c / 2.0
    disc = half_c * half_c - m * k
    gamma = half_c / m
    if disc > 0:
        q = math.sqrt(disc)
        ratio = q / half_c  # h / gamma
        return m * math.atanh(ratio) / q if ratio < 1 else 0.0
    if disc == 0:
        return 1.0 / gamma
    p = math.sqrt(-disc)
    return m * math.atan2(p, half_c) / p


def stationary_variance(m: float, c: float, k: float, D: float) -> float:
    """Var(R) around the plateau of `m x'' + c x' + k x = xi`, <xi xi'> = 2 D delta: D / (c k).

    Independent of m. The observed batch-mean reward adds white measurement noise on top.
    """
    if c <= 0 or k <= 0:
        return math.inf
    return D / (c * k)


def continuum_oscillation_onset(beta1: float) -> float:
    """Continuum (K = 1) onset of oscillation, a = (1 - beta1) / (4 beta1) (zeta = 1)."""
    if beta1 <= 0:
        return math.inf
    return (1.0 - beta1) / (4.0 * beta1)


def rule_of_thumb_threshold(a: float, beta1: float) -> float:
    """Rule of thumb for the refresh threshold: K* ~ 2 / a + 2 beta1 / (1 - beta1).

    A rule of thumb only (fails for k m >~ 1.8); use `refresh_threshold` for the exact value.
    """
    return 2.0 / a + 2.0 * beta1 / (1.0 - beta1)
