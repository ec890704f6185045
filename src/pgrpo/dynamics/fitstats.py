"""The statistics of a fitted curve model that `fit.fit_model` reports: lag-1 residual
autocorrelation, the prediction Jacobian (central differences), the parameter covariance and
the derived metrics (tau, zeta, kappa per optimizer step). Split from `fit`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from pgrpo.dynamics.curves import FIT_MODELS, FitContext, to_internal
from pgrpo.dynamics.model import damping_ratio
from pgrpo.dynamics.optimizers import fit_reduction

if TYPE_CHECKING:
    from pgrpo.dynamics.fitresult import FitResult


def _autocorr(r: np.ndarray, lag: int = 1) -> float:
    r = r - r.mean()
    den = float(r @ r)
    return float(r[:-lag] @ r[lag:]) / den if den > 0 and r.size > lag else 0.0


def _jacobian(func, result: FitResult, step: np.ndarray) -> np.ndarray:
    t = step - result.context.step0
    vals = result.values
    cols = []
    for nm in result.varying:
        p = result.params[nm]
        h = 1e-5 * max(
            abs(p.value), 1e-3 * max(p.max - p.min, 1e-12) if math.isfinite(p.max - p.min) else 1e-3
        )
        lo, hi = max(p.value - h, p.min), min(p.value + h, p.max)
        if hi <= lo:
            cols.append(np.zeros_like(t))
            continue
        f_hi = func(t, {**vals, nm: hi}, result.context)
        f_lo = func(t, {**vals, nm: lo}, result.context)
        cols.append((f_hi - f_lo) / (hi - lo))
    return np.stack(cols, axis=1) if cols else np.zeros((t.size, 0))


def _covariance(result: FitResult, priors, sigma: float, sw=None) -> np.ndarray | None:
    """s^2 (J^T W J + prior precision)^-1 with s^2 = sum w r^2 / (n - p) (pseudo-inverse;
    W = 1 unweighted)."""
    if not result.varying:
        return None
    J = result.prediction_jacobian(result.step)
    if sw is not None:
        J = J * sw[:, None]
    A = J.T @ J
    for i, nm in enumerate(result.varying):
        if nm in priors:
            A[i, i] += (sigma / priors[nm][1]) ** 2
    if not np.all(np.isfinite(A)):
        return None
    r = result.reward - result.fitted
    sse = result.sse if sw is None else float(((r * sw) ** 2).sum())
    s2 = sse / max(result.n - len(result.varying), 1)
    return s2 * np.linalg.pinv(A, rcond=1e-12)


def _derived(name: str, vals: dict[str, float], ctx: FitContext) -> dict[str, float | str]:
    out: dict[str, float | str] = {"time_unit": "optimizer step"}
    vals = to_internal(FIT_MODELS.get(name), vals, 1.0 / ctx.clock)  # per optimizer step
    if "k" in vals:
        k, m, c = vals["k"], vals.get("m", 0.0), 1.0
        if "m" not in vals and ctx.beta1 is not None and k > 0:  # rom_fixed: m, c fixed
            red = fit_reduction(ctx.optimizer, k, ctx.beta1, ctx.refresh_interval)
            m, c = red.mass, red.damping
            out.update(c=c, optimizer_reduction=red.optimizer)
            out["kappa_meaning"] = str(red.metrics["kappa_meaning"])
        out.update(k=k, m=m)
        out["tau"] = c / k if k > 0 else math.inf
        out["zeta"] = damping_ratio(m, c, k)
        out["beta1_effective"] = m / (1.0 + m)
        if ctx.lr is not None:
            out["kappa"] = k / float(np.max(ctx.lr))  # k is the stiffness at the peak lr
    if "tau" in vals:
        out["tau"] = vals["tau"]
    return out
