"""Forecasting a reward curve: fit a prefix, predict the rest with an honest band, and score the
forecast against the naive baselines (last-window mean; the single exponential).

Band = model variance (delta method: J Sigma J^T with the fit's parameter covariance) plus the
observed residual noise, both inflated by (1 + rho) / (1 - rho) for lag-1 residual
autocorrelation rho > 0 (correlated residuals carry less information than white ones), plus a
structural term for model misspecification measured by a backtest inside the prefix (fit its
first 60%, forecast the rest, keep the squared error the band did not explain). On the synthetic
suite the 90% band of the mean covers ~0.9; on curves outside the model family (logistic, power
law, decline, step) the structural term lifts coverage from 0.63 to 0.85 (docs/dynamics.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import norm

from pgrpo.dynamics.fit import FitResult, fit_curve


@dataclass(frozen=True)
class Forecast:
    """A forecast from the first part of a curve.

    future_step, predicted, band_lo, band_hi: [m] (per-step band for one new observation);
    predicted_mean / mean_band: the mean over the future steps and its band; observed_mean: the
    data's mean after the cut (nan when the log ends at the cut); baselines: name -> predicted
    mean (last_window_mean, exponential).
    """

    cut_step: float
    future_step: np.ndarray
    predicted: np.ndarray
    band_lo: np.ndarray
    band_hi: np.ndarray
    predicted_mean: float
    mean_band: tuple[float, float]
    observed_mean: float
    level: float
    fit: FitResult
    baselines: dict[str, float]
    metrics: dict[str, float] = field(default_factory=dict)


def _cut_index(step: np.ndarray, cut: float) -> int:
    """cut in (0, 1): a fraction of the points; otherwise a step (points with step <= cut)."""
    if 0.0 < cut < 1.0:
        return int(round(cut * step.size))
    return int(np.searchsorted(step, cut, side="right"))


def last_window_mean(reward: np.ndarray, window_fraction: float = 0.1, min_window: int = 5):
    """Mean of the last max(min_window, window_fraction * n) points: the naive forecast."""
    w = max(min_window, int(round(window_fraction * reward.size)))
    return float(np.mean(reward[-w:]))


def forecast(
    step: np.ndarray,
    reward: np.ndarray,
    cut: float = 0.5,
    *,
    model: str = "rom",
    horizon: np.ndarray | None = None,
    lr: np.ndarray | None = None,
    lr_step: np.ndarray | None = None,
    beta1: float | None = None,
    refresh_interval: int | None = 1,
    level: float = 0.9,
    loss: str = "linear",
) -> Forecast:
    """Fit `model` on the points up to `cut` and predict the rest.

    step, reward: [n] (the whole log; only the prefix is used for fitting). cut: a fraction of
    the points in (0, 1), or a step. horizon: the future steps ([m], default: the log's steps
    after the cut). lr / lr_step: the lr schedule, which may cover the future (the run's config
    knows it); beyond it the last lr is held.
    """
    step = np.array(step, dtype=float)
    reward = np.array(reward, dtype=float)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    i = _cut_index(step, cut)
    if i < 6:
        raise ValueError(f"the cut leaves {i} points to fit; move it later (need >= 6)")
    future = np.array(horizon, dtype=float) if horizon is not None else step[i:]
    if future.size == 0:
        raise ValueError("nothing to forecast: the cut is at the end of the log; pass horizon")
    if lr is not None and lr_step is None:
        lr_step = step
    kw = dict(lr=lr, lr_step=lr_step, beta1=beta1, refresh_interval=refresh_interval, loss=loss)
    fit = fit_curve(step[:i], reward[:i], model, **kw)
    struct, bt_metrics = _backtest(step[:i], reward[:i], model, kw, future)
    pred, lo, hi, mean_lo, mean_hi, var_parts = _band(fit, future, level, struct)
    var_parts.update(bt_metrics)
    observed = reward[i:]
    exp = fit_curve(step[:i], reward[:i], "exponential", loss=loss)
    baselines = {
        "last_window_mean": last_window_mean(reward[:i]),
        "exponential": float(np.mean(exp.predict(future))),
    }
    return Forecast(
        cut_step=float(step[i - 1]),
        future_step=future,
        predicted=pred,
        band_lo=lo,
        band_hi=hi,
        predicted_mean=float(np.mean(pred)),
        mean_band=(mean_lo, mean_hi),
        observed_mean=float(np.mean(observed)) if horizon is None else math.nan,
        level=level,
        fit=fit,
        baselines=baselines,
        metrics=var_parts,
    )


def _backtest(step: np.ndarray, reward: np.ndarray, model: str, kw: dict, future: np.ndarray):
    """Structural (misspecification) variance of the forecast mean, from a backtest inside the
    prefix: fit its first 60%, forecast the mean of the rest, and keep the squared error in excess
    of what the band already explains; scaled linearly to the real horizon. 0 when too short."""
    n = step.size
    j = int(round(BACKTEST_FRACTION * n))
    if j < 8 or n - j < 4:
        return 0.0, {}
    try:
        bt = fit_curve(step[:j], reward[:j], model, **kw)
    except ValueError:
        return 0.0, {}
    fut = step[j:]
    pred, *_, parts = _band(bt, fut, 0.9, 0.0)
    err = float(np.mean(pred) - np.mean(reward[j:]))
    explained = parts["var_mean_model"] + parts["var_mean_noise"]
    excess = max(err * err - explained, 0.0) if math.isfinite(explained) else 0.0
    span_bt = max(float(fut[-1] - step[j - 1]), 1.0)
    span = max(float(future[-1] - step[-1]), 1.0)
    metrics = {
        "backtest/error": err,
        "backtest/error_last_window_mean": last_window_mean(reward[:j])
        - float(np.mean(reward[j:])),
        "backtest/explained_var": explained,
    }
    return excess * span / span_bt, metrics


BACKTEST_FRACTION = 0.6


def _band(fit: FitResult, future: np.ndarray, level: float, struct: float = 0.0):
    pred = fit.predict(future)
    z = float(norm.ppf(0.5 + level / 2.0))
    rho = max(fit.residual_autocorr, 0.0)
    infl = (1.0 + rho) / (1.0 - rho) if rho < 0.99 else 100.0
    s2 = fit.residual_std**2
    if fit.covariance is not None and fit.varying:
        J = fit.prediction_jacobian(future)
        var_model = np.einsum("ij,jk,ik->i", J, fit.covariance, J) * infl
        g = J.mean(axis=0)
        var_mean_model = float(g @ fit.covariance @ g) * infl
    else:
        var_model = np.full(future.size, math.inf)
        var_mean_model = math.inf
    var_model = np.clip(var_model, 0.0, None)
    sd = np.sqrt(var_model + s2 + struct)
    var_mean = max(var_mean_model, 0.0) + s2 * infl / future.size + struct
    half = z * math.sqrt(var_mean)
    m = float(np.mean(pred))
    parts = {
        "var_mean_structural": struct,
        "var_mean_model": var_mean_model,
        "var_mean_noise": s2 * infl / future.size,
        "autocorr_inflation": infl,
    }
    return pred, pred - z * sd, pred + z * sd, m - half, m + half, parts


@dataclass(frozen=True)
class ForecastEvaluation:
    """Absolute errors of the predicted mean after the cut: model vs the naive baselines."""

    error: float
    baseline_errors: dict[str, float]
    covered: bool
    forecast: Forecast
    metrics: dict[str, float] = field(default_factory=dict)


def evaluate_forecast(step: np.ndarray, reward: np.ndarray, cut: float = 0.5, **kwargs):
    """Forecast the mean after `cut` and score it against last-window mean and exponential."""
    fc = forecast(step, reward, cut, **kwargs)
    obs = fc.observed_mean
    errs = {name: abs(v - obs) for name, v in fc.baselines.items()}
    err = abs(fc.predicted_mean - obs)
    covered = fc.mean_band[0] <= obs <= fc.mean_band[1]
    metrics = {"error": err, **{f"error/{k}": v for k, v in errs.items()}}
    return ForecastEvaluation(err, errs, bool(covered), fc, metrics)
