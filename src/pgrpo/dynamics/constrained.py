"""The closed-form model with mass and damping fixed by the optimizer: `rom_fixed`.

When lr, beta1 and the refresh interval K are known, the ROM has one dynamical unknown, the
stiffness k = lr * kappa: m and c follow from `optimizers.fit_reduction(optimizer, k, beta1, K)`
(the run's optimizer reduction; under Adam k is the effective stiffness lr kappa / u, so the
fitted kappa = k / lr is the preconditioned curvature kappa / u). With a
constant lr the trajectory is the closed form of `m x'' + c x' + k x = 0` (v0 = 0); with an lr
schedule it is the exact recursion a_n = k lr_n / max(lr) with the reduction's momentum (the
continuum closed form has no schedule). Time is the optimizer step (`physical_time`).

`kappa_interval` gives kappa's profile-likelihood interval: the levels are profiled out, so the
profile is a 1-D scan over k, with the sample size shrunk for lag-1 residual autocorrelation.
`compare_constrained` compares a free rom fit with the rom_fixed one (AICc, likelihood ratio);
`compare_start` compares the rom reported with the free-start `rom_v0` the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import chdtrc, gammaincinv

from pgrpo.dynamics.binned_recursion import schedule_response
from pgrpo.dynamics.curves import (
    FIT_MODELS,
    ROM_MEANINGS,
    CurveModel,
    FitContext,
    Parameter,
    _levels,
    level_bounds,
    profile_levels,
    rate_bounds,
)
from pgrpo.dynamics.model import _unit_response
from pgrpo.dynamics.optimizers import fit_reduction, max_stable_rate

if TYPE_CHECKING:
    from pgrpo.dynamics.fitresult import FitResult


def fixed_rate_bounds(t: np.ndarray, ctx: FitContext) -> tuple[float, float]:
    """k bounds: the rom's, capped at a_n <= 1 and at positive damping for K > 1."""
    k_lo, k_hi = rate_bounds(t)
    k_hi = min(k_hi, 1.0, 0.999 * max_stable_rate(ctx.refresh_interval))
    return min(k_lo, 0.5 * k_hi), k_hi


def fixed_basis_batch(t: np.ndarray, ks: np.ndarray, ctx: FitContext) -> np.ndarray:
    """phi for each k: ks [P] -> [P, n] (the closed form, or the recursion under a schedule)."""
    if ctx.beta1 is None:
        raise ValueError("rom_fixed needs beta1 (the config's momentum; Adam's default is 0.9)")
    if ctx.lr_varies:
        n_steps = int(math.ceil(float(np.max(t)))) if t.size else 0
        # k -> 0: only the reduction's recursion momentum is read
        beta = fit_reduction(ctx.optimizer, 1e-12, ctx.beta1, ctx.refresh_interval).beta1
        sched = ctx.schedule(n_steps)
        return schedule_response(np.asarray(ks, dtype=float), sched, beta, t, ctx.refresh_interval)
    rows = []
    for k in np.asarray(ks, dtype=float):
        red = fit_reduction(ctx.optimizer, float(k), ctx.beta1, ctx.refresh_interval)
        rows.append(_unit_response(t, red.mass, red.damping, float(k), 1.0, 0.0))
    return np.stack(rows)


def rom_fixed_basis(t: np.ndarray, p: dict[str, float], ctx: FitContext) -> np.ndarray:
    return fixed_basis_batch(t, np.array([p["k"]]), ctx)[0]


def rom_fixed_guess(t: np.ndarray, y: np.ndarray, ctx: FitContext) -> list[dict[str, Parameter]]:
    """The best point of a log-spaced k grid, levels profiled out."""
    k_lo, k_hi = fixed_rate_bounds(t, ctx)
    ks = np.geomspace(k_lo, k_hi, 48)
    phi = np.where(np.isfinite(phi := fixed_basis_batch(t, ks, ctx)), phi, 1e6)
    r_inf, r_0, sse = profile_levels(phi, y, level_bounds(y))
    i = int(np.argmin(sse))
    params = _levels(y, r_inf[i], r_0[i])
    params["k"] = Parameter("k", float(ks[i]), k_lo, k_hi)
    return [params]


FIT_MODELS.add(
    "rom_fixed",
    CurveModel(
        "rom_fixed",
        ("R_inf", "R_0", "k"),
        rom_fixed_basis,
        rom_fixed_guess,
        time_power={"k": -1},
        physical_time=True,
        description="m x'' + c x' + k x = 0 from rest, m and c fixed by beta1 and K",
        meanings=ROM_MEANINGS,
    ),
)


def kappa_interval(
    t: np.ndarray,
    y: np.ndarray,
    ctx: FitContext,
    k_hat: float,
    *,
    peak_lr: float,
    level: float = 0.9,
    autocorr: float = 0.0,
) -> tuple[float, float]:
    """Profile-likelihood interval of kappa = k / peak_lr at `level`.

    t, y: [n] (optimizer steps since the first point, rewards). The profile deviance
    n_eff log(SSE(k) / SSE_min), n_eff = n (1 - rho) / (1 + rho) for lag-1 autocorrelation
    rho >= 0, is compared with chi2_1(level); an end of the scanned range that stays inside the
    interval is returned as the range's end (0 or inf: the data do not bound kappa there).
    """
    k_lo, k_hi = fixed_rate_bounds(t, ctx)
    rho = min(max(autocorr, 0.0), 0.95)
    n_eff = max(y.size * (1.0 - rho) / (1.0 + rho), 1.0)
    limit = 2.0 * gammaincinv(0.5, level)  # chi2.ppf(level, 1), without scipy.stats

    def scan(ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        phi = fixed_basis_batch(t, ks, ctx)
        _, _, sse = profile_levels(np.where(np.isfinite(phi), phi, 1e6), y, (-math.inf, math.inf))
        return ks, sse

    ks, sse = scan(np.unique(np.r_[np.geomspace(k_lo, k_hi, 96), k_hat]))
    best = float(np.min(sse))
    inside = np.flatnonzero(n_eff * np.log(np.maximum(sse, 1e-300) / max(best, 1e-300)) <= limit)
    i0, i1 = int(inside[0]), int(inside[-1])
    # refine between the last grid point outside and the first inside, on each side
    fine_lo, fine_hi = ks[max(i0 - 1, 0)], ks[min(i1 + 1, ks.size - 1)]
    fk, fsse = scan(np.unique(np.r_[np.geomspace(fine_lo, fine_hi, 200), k_hat]))
    best = min(best, float(np.min(fsse)))
    dev = n_eff * np.log(np.maximum(fsse, 1e-300) / max(best, 1e-300))
    ok = fk[dev <= limit]
    lo = 0.0 if i0 == 0 and ok[0] <= fk[0] else float(ok[0])
    hi = math.inf if i1 == ks.size - 1 and ok[-1] >= fk[-1] else float(ok[-1])
    return lo / peak_lr, hi / peak_lr


# --- the free fit against the closed form ------------------------------------------------------


def aicc(result) -> float:
    """A FitResult's small-sample AIC: AIC + 2 p (p + 1) / (n - p - 1) (inf when n <= p + 1)."""
    n, p = result.n, len(result.varying)
    return result.aic + 2 * p * (p + 1) / (n - p - 1) if n > p + 1 else math.inf


def likelihood_ratio(wide, narrow, *, rho: float | None = None) -> tuple[float, float]:
    """(statistic, p-value) of the likelihood-ratio test of the fit `narrow` against the fit
    `wide` with more free parameters: n_eff log(SSE_narrow / SSE_wide) against chi2 with
    max(p_wide - p_narrow, 1) degrees of freedom, n_eff = n (1 - rho) / (1 + rho) for rho the
    wide fit's lag-1 residual autocorrelation unless given, clipped to [0, 0.95]: noise that
    is not white carries fewer independent points than the log has, and a test that counted
    every point would prefer the wider fit on autocorrelated noise. Exact for nested Gaussian
    fits with white residuals; an approximation otherwise."""
    r = min(max(wide.residual_autocorr if rho is None else rho, 0.0), 0.95)
    n_eff = wide.n * (1.0 - r) / (1.0 + r)
    stat = max(n_eff * math.log(max(narrow.sse, 1e-300) / max(wide.sse, 1e-300)), 0.0)
    dof = max(len(wide.varying) - len(narrow.varying), 1)
    return stat, float(chdtrc(dof, stat))  # chi2.sf, without importing scipy.stats


FREE_START_AICC = 2.0
"""A free start (`rom_v0`) describes a run only when its AICc is lower than the reported rom's by
more than this (the usual 'substantially better') ..."""
FREE_START_P = 0.01
"""... and the likelihood-ratio test (`likelihood_ratio`) of the constant-lr rom from rest, the
model nested in rom_v0, rejects the start from rest at this level, with the sample size shrunk
by the residuals' AR(1) rho taken as the diagnosis' upper confidence bound
(`diagnose.nullmodel.lag1_autocorr`), not the point estimate. Set on null curves
(bench/free_start.py, `RULES`; curves from rest and pure noise, 30 to 300 points, AR(1) rho 0
to 0.8, 60 a cell, seed 1): with the residuals' point estimate and the nominal 0.05 a free start
was read on up to 25% of a cell (pure noise, 30 points, rho 0.8: a fit that follows the noise's
wander leaves residuals whose lag-1 estimate falls far below the noise's rho); with the bound
and 0.05 on up to 12% (white noise, 300 points: under pure noise the fast mode's rate is not
identified, so the statistic is not chi2 with 1 degree of freedom); with the bound and 0.01 on
at most 3%."""
U_BOUND = 2.0
"""|u| (1 / step) at which `rom_v0`'s initial velocity sits at its bound (rom_v0.rom_v0_guess): a
jump within the first step, i.e. the first point alone, which is no evidence about a start."""

START_WORDS = {
    -1: "moved towards the level the run heads for faster than a start from rest allows (a fast "
        "first rise, then a slower one)",
    1: "first moved away from the level the run heads for (a dip or a slow start before the "
       "rise), which a start from rest does not allow",
}  # fmt: skip
"""How the start differs from rest, by the sign of u (x'(0) = u x(0), x the distance to R_inf)."""


@dataclass(frozen=True)
class StartComparison:
    """`compare_start`'s result. preferred: "free" or "rest"; delta_aicc = AICc(reported rom) -
    AICc(rom_v0); lr_test_stat, lr_test_p: the constant-lr rom from rest against rom_v0 (nested);
    rho_bound: the AR(1) rho bound on rom_v0's residuals the test used; r2_rest (the reported
    rom's), r2_free (rom_v0's); u: rom_v0's x'(0) / x(0) (1 / step); rest_model: the reported
    rom's model; reason: why "rest" where the numbers alone would say "free" (u at its bound,
    a robust loss), else ""."""

    preferred: str
    delta_aicc: float
    lr_test_stat: float
    lr_test_p: float
    rho_bound: float
    r2_rest: float
    r2_free: float
    u: float
    rest_model: str
    reason: str = ""

    def to_dict(self) -> dict[str, float | str]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    def sentence(self) -> str | None:
        """One line for a run that a free start describes better than a start from rest; None
        when the start from rest stands. One wording for `pgrpo fit` and its JSON readers."""
        if self.preferred != "free":
            return None
        return (
            f"Start: the first steps {START_WORDS[1 if self.u > 0 else -1]}. With a free initial "
            f"velocity (rom_v0) R^2 {self.r2_free:.3f} against {self.r2_rest:.3f} from rest "
            f"({self.rest_model}), AICc lower by {self.delta_aicc:.1f}, likelihood-ratio p "
            f"{self.lr_test_p:.2g} (the rom and its closed-form check above start from rest)."
        )


def compare_start(rest: FitResult, free: FitResult, nested: FitResult, rho: float,
                  loss: str = "linear") -> StartComparison:  # fmt: skip
    """Whether a run is described better by the closed form with a free initial velocity
    (`free`: a `rom_v0` fit, x'(0) = u x(0), constant lr) than from rest. rest: the rom that
    `fit_log` reports (rom, rom_schedule or rom_starved); nested: the constant-lr rom from rest
    on the same points (`rest` itself when it is that rom), which rom_v0 holds at u = 0. "free"
    needs AICc(rest) - AICc(free) > FREE_START_AICC (better than what is reported) and the
    likelihood-ratio test of `nested` against `free` at p < FREE_START_P (a test between nested
    fits, so an lr schedule or starvation that the reported rom models and rom_v0 does not is
    not read as a start); and u inside its bound, and the least-squares loss (the statistic
    assumes Gaussian residuals; a robust loss gives "rest"). A free start is the same equation
    with the from-rest assumption dropped: a run whose first steps moved faster than a start
    from rest allows (u < 0: two held-back verl runs of round 13 rise within 4 steps and then
    creep), or that dipped first (u > 0). rho: the AR(1) rho the test shrinks the sample by, the
    diagnosis' upper bound on rom_v0's residuals (`logfit.fit_start` takes it from its caller:
    the bound lives in `diagnose`, a layer above)."""
    d = float(aicc(rest) - aicc(free))
    stat, p_value = likelihood_ratio(free, nested, rho=rho)
    u = float(free.values.get("u", math.nan))
    reason = ""
    if abs(u) >= U_BOUND * (1 - 1e-6):
        reason = "u at its bound: the first point alone"
    elif loss != "linear":
        reason = f"loss {loss}: the test assumes least squares"
    free_start = d > FREE_START_AICC and p_value < FREE_START_P
    return StartComparison(
        preferred="free" if free_start and not reason else "rest",
        delta_aicc=d, lr_test_stat=float(stat), lr_test_p=float(p_value), rho_bound=float(rho),
        r2_rest=float(rest.r2), r2_free=float(free.r2), u=u, rest_model=rest.model,
        reason=reason if free_start else "",
    )  # fmt: skip


NoiseRho = Callable[[np.ndarray], float]
"""residuals [n] -> an AR(1) rho to shrink a likelihood-ratio test's sample by: the diagnosis'
upper bound, `pgrpo.diagnose.nullmodel.lag1_autocorr`, which the callers above `diagnose` pass
in (`dynamics` sits below it and may not import it)."""


def residual_rho(result, noise_rho: NoiseRho) -> float:
    """noise_rho of a fit's residuals (reward - fitted), 0.95 (the most cautious) when any is
    not finite: the rho the likelihood-ratio tests of `compare_start` and `compare_constrained`
    shrink their sample by."""
    resid = np.asarray(result.reward, dtype=float) - np.asarray(result.fitted, dtype=float)
    return float(noise_rho(resid)) if np.all(np.isfinite(resid)) else 0.95


CLOSED_FORM_P = 0.05
"""`compare_constrained` calls the closed form "rejected" below this likelihood-ratio p."""


def compare_constrained(free, fixed, level: float = 0.9, noise_rho: NoiseRho | None = None) -> dict:
    """AICc of the free fit vs the optimizer-constrained one, and kappa with its interval.

    delta_aicc = AICc(constrained) - AICc(free): negative means the run follows the closed
    form with m, c from the optimizer at least as well as a free curve (per parameter spent).
    The constraint is also tested: likelihood ratio n_eff log(SSE_c / SSE_f) against chi2 with
    p_free - p_constrained degrees of freedom, n_eff = n (1 - rho) / (1 + rho);
    closed_form = "rejected" when p < CLOSED_FORM_P, else "consistent". rho: noise_rho of the
    free fit's residuals when given (`residual_rho`; `pgrpo fit` and the report pass the
    diagnosis' bound, as for the free start), else their lag-1 point estimate; clipped to
    [0, 0.95]. On curves drawn from the closed form with AR(1) noise (bench/closed_form_check.py,
    2026-12-05; 300 curves per rho, 30-300 points) the point estimate's false rejections grew with
    rho (2.7%, 4.0%, 6.7% at rho 0, 0.5, 0.8; 4.4% over all) and the bound's did not (1.7%, 2.3%,
    1.3%; 1.8%), at the price of power (a mass 10x the optimizer's: 21.9% -> 15.7%). The bound
    bounds another estimator (`lag1_estimate`) and can sit below the point estimate (2 of the 33
    shared runs; 0 below 8 points). lr_test_rho (the rho used) and lr_test_rho_source ("bound"
    or "point") say which the test used.
    """
    ctx = fixed.context
    peak = float(np.max(ctx.lr))
    t = (fixed.step - ctx.step0) * ctx.clock  # optimizer steps
    rho = fixed.residual_autocorr
    k_hat = fixed.values["k"] / ctx.clock
    lo, hi = kappa_interval(t, fixed.reward, ctx, k_hat, peak_lr=peak, level=level, autocorr=rho)
    d = aicc(fixed) - aicc(free)
    test_rho = free.residual_autocorr if noise_rho is None else residual_rho(free, noise_rho)
    test_rho = min(max(test_rho, 0.0), 0.95)  # the rho the test uses (`likelihood_ratio`)
    stat, p_value = likelihood_ratio(free, fixed, rho=test_rho)
    side = ""  # the edge of its box where the fit left k, if it did
    if "k" in fixed.at_bound:
        k = fixed.params["k"]
        side = "lower" if k.value - k.min < k.max - k.value else "upper"
    return {
        "lr_test_stat": stat,
        "lr_test_p": p_value,
        "lr_test_rho": float(test_rho),
        "lr_test_rho_source": "point" if noise_rho is None else "bound",
        "closed_form": "rejected" if p_value < CLOSED_FORM_P else "consistent",
        "aicc_free": aicc(free),
        "aicc_constrained": aicc(fixed),
        "delta_aicc": d,
        "preferred": "constrained" if d <= 0 else "free",
        "r2_constrained": fixed.r2,
        "kappa_constrained": fixed.metrics["kappa"],
        "kappa_lo": lo,
        "kappa_hi": hi,
        "kappa_level": level,
        "optimizer_reduction": str(fixed.metrics.get("optimizer_reduction", "")),
        "kappa_meaning": str(fixed.metrics.get("kappa_meaning", "")),
        "kappa_at_bound": float(bool(side)),  # 1.0: kappa is the box's edge, not an estimate
        **({"kappa_not_estimated": _kappa_at_bound(side, fixed.reward.size)} if side else {}),
    }


def _kappa_at_bound(side: str, n: int) -> str:
    """Why kappa is not estimated when the closed-form fit left k at the `side` ("lower" or
    "upper") edge of its box: what `pgrpo fit`, the report and `FitResult.report` say in
    place of an estimate with an interval (review rev41, F8: "kappa 1e+06 [0, -]" on 6 points,
    while the table marked k "(at its bound)")."""
    why = ("the points move faster than the closed form with m and c from beta1 and K can "
           "follow" if side == "upper" else "the points barely move on the closed form's time "
           "scale")  # fmt: skip
    few = f"; {n} points are few to fix it" if n < FEW_POINTS else ""
    return (f"at its {side} bound (the box's edge, not an estimate: {why}{few}; no "
            "interval)")  # fmt: skip


FEW_POINTS = 20
"""Fewer points than this are said to be few when kappa sits at a bound (`_kappa_at_bound`)."""
