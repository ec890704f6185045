"""The exponential fit behind a progress verdict's evidence (`pgrpo.diagnose.progress`): the
fitted gain and its band, the remaining gain and the steps to 90% of it, and when neither is
known (a curve that does not bend within the data, or runs into the reward's known bound). The
label does not use it."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

Z90 = 1.6449


def fit_evidence(
    step: np.ndarray, reward: np.ndarray, reward_range: tuple[float, float] | None = None
) -> dict[str, float | str]:
    """Exponential fit R(t) = R_inf + (R_0 - R_inf) exp(-t / tau): gain and its 90% band, the
    remaining gain after the last step and the steps to 90% of it (NaN when the fit fails).
    reward_range: the reward's known (lo, hi); the levels stay inside it, and a fit that runs
    into it heads for that bound (`fit_gain_at_bound` 1.0): the remaining gain is the way to
    the bound, with no band."""
    from pgrpo.dynamics import fit_curve

    out = dict.fromkeys(
        ("fit_gain", "fit_gain_lo", "fit_gain_hi", "remaining_gain", "remaining_gain_se"),
        math.nan,
    )
    out["steps_to_90pct"] = math.nan
    try:
        fit = fit_curve(step, reward, "exponential", reward_range=reward_range)
    except (ValueError, RuntimeError, np.linalg.LinAlgError):
        return out
    v = fit.values
    names = list(fit.varying)
    cov = fit.covariance
    gain = v["R_inf"] - v["R_0"]
    se_gain = se_inf = math.nan
    if cov is not None and {"R_inf", "R_0"} <= set(names):
        i, j = names.index("R_inf"), names.index("R_0")
        se_gain = math.sqrt(max(cov[i, i] + cov[j, j] - 2 * cov[i, j], 0.0))
        se_inf = math.sqrt(max(cov[i, i], 0.0))
    remaining = v["R_inf"] - float(fit.fitted[-1])
    out.update(
        fit_gain=gain,
        fit_gain_lo=gain - Z90 * se_gain,
        fit_gain_hi=gain + Z90 * se_gain,
        remaining_gain=remaining,
        remaining_gain_se=se_inf,
        fit_tau=float(v["tau"]),
        fit_r2=float(fit.r2),
    )
    if "r2_undefined" in fit.metrics:  # a constant curve: no timescale, no R^2
        out.update(fit_tau=math.nan, fit_r2_undefined=fit.metrics["r2_undefined"])
        return out
    bound = _range_bound(fit, reward_range, reward)
    if bound is not None:  # still rising (falling) into the reward's known bound
        out.update(remaining_gain=bound - float(fit.fitted[-1]), remaining_gain_se=math.nan,
                   fit_gain_lo=math.nan, fit_gain_hi=math.nan, fit_gain_at_bound=1.0,
                   reward_bound=bound, steps_to_90pct=float(v["tau"]) * math.log(10.0))  # fmt: skip
        return out
    if _unsaturated(fit):  # the level box or the timescale bound holds the fit: no gain known
        out.update(remaining_gain=math.nan, remaining_gain_se=math.nan, fit_gain_lo=math.nan,
                   fit_gain_hi=math.nan, fit_gain_identified=0.0)  # fmt: skip
        return out
    if math.isfinite(se_inf) and abs(remaining) > Z90 * se_inf:
        out["steps_to_90pct"] = float(v["tau"]) * math.log(10.0)
    return out


def _range_bound(
    fit: Any, reward_range: tuple[float, float] | None, reward: np.ndarray
) -> float | None:
    """The bound of the reward's known range that the exponential's R_inf sits on (the curve
    would go past it) in the direction the fit moves (the top for a rise, the bottom for a
    fall), with tau off its upper bound (the curve bends within the data); else None. "Sits
    on": within 1e-6 of the data's range (reward: [n]), not of the stated range's width."""
    if reward_range is None:
        return None
    r_inf, tau, r_0 = fit.params["R_inf"], fit.params["tau"], fit.params["R_0"]
    if tau.value >= tau.max * (1 - 1e-6) or r_inf.value == r_0.value:
        return None
    span = float(np.ptp(reward)) or max(abs(float(np.mean(reward))), 1.0)
    bound, edge = (
        (reward_range[1], r_inf.max) if r_inf.value > r_0.value else (reward_range[0], r_inf.min)
    )
    tol = 1e-6 * span
    if abs(edge - bound) <= tol and abs(r_inf.value - bound) <= tol:
        return float(bound)
    return None


def _unsaturated(fit: Any) -> bool:
    """Whether the exponential's R_inf sits on its box (the data range +- 3 ranges) or tau on
    its upper bound: the curve does not bend within the data (a straight line is the limit
    R_inf, tau -> inf with their ratio fixed), so neither the gain nor its timescale is known."""
    r_inf, tau = fit.params["R_inf"], fit.params["tau"]
    tol = 1e-6 * max(r_inf.max - r_inf.min, 1e-300)
    return bool(r_inf.value >= r_inf.max - tol or r_inf.value <= r_inf.min + tol
                or tau.value >= tau.max * (1 - 1e-6))  # fmt: skip
