"""Fit a training log end to end: the rom, the baselines, and optionally a forecast.

`fit_log(log)` is the one library call behind `pgrpo fit`; `to_dict()` gives its JSON.

A log longer than MAX_FIT_POINTS is thinned first (`thin_curve`): the reward is averaged over
consecutive equal-count bins of steps and each bin sits at its mean step. For a curve whose
timescale spans many bins this loses no information the fit can use (the bin mean of a smooth
curve is its value at the bin's mean step, up to O(width^2) curvature, and its noise variance is
sigma^2 / bin_size, the same for every bin, so ordinary least squares stays the right fit); the
fit then costs O(MAX_FIT_POINTS), not O(n). R^2, AIC, BIC and residual statistics then describe
the bin means (R^2 is higher than on single steps, whose noise the bins average out): the
result says so in `warnings` and in `metrics["bin_size"]`. The lr schedule stays at full
resolution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from pgrpo.dynamics.fit import FitResult, fit_curve
from pgrpo.dynamics.runfit import fit_run, run_inputs
from pgrpo.logs import RewardLog

if TYPE_CHECKING:  # forecast needs scipy.stats: imported only when a forecast is asked for
    from pgrpo.dynamics.forecast import Forecast

BASELINES = ("exponential", "logistic")
MAX_FIT_POINTS = 4000
"""Longer logs are fitted on bin means (see the module docstring)."""


def thin_curve(
    step: np.ndarray, reward: np.ndarray, max_points: int = MAX_FIT_POINTS
) -> tuple[np.ndarray, np.ndarray, int]:
    """Bin means of a long curve: step, reward: [n] -> (step [m], reward [m], bin_size b),
    m = ceil(n / b) <= max_points, consecutive bins of b points (the last may be shorter).
    Curves of <= max_points points come back unchanged with b = 1."""
    step, reward = np.asarray(step, dtype=float), np.asarray(reward, dtype=float)
    n = step.size
    if n <= max_points:
        return step, reward, 1
    b = int(math.ceil(n / max_points))
    edges = np.arange(0, n, b)
    counts = np.diff(np.append(edges, n))
    return np.add.reduceat(step, edges) / counts, np.add.reduceat(reward, edges) / counts, b


def thin_log(log: RewardLog, max_points: int = MAX_FIT_POINTS) -> RewardLog:
    """`log` with step and reward thinned by `thin_curve` (other columns dropped, except the
    learning rate and the optimizer step, averaged the same way); a warning and
    metrics["bin_size"] say so."""
    step, reward, b = thin_curve(log.step, log.reward, max_points)
    if b == 1:
        return log
    columns = {}
    edges = np.arange(0, log.step.size, b)
    counts = np.diff(np.append(edges, log.step.size))
    for name in ("learning_rate", "optimizer_step"):
        if name in log.columns and np.isfinite(log.columns[name]).all():
            columns[name] = np.add.reduceat(log.columns[name], edges) / counts
    note = (
        f"{len(log)} logged steps fitted as {step.size} means of {b} consecutive steps "
        "(R^2, AIC and BIC describe the means)"
    )
    return replace(
        log, step=step, reward=reward, columns=columns, warnings=(*log.warnings, note),
        metrics={**log.metrics, "bin_size": float(b), "n_logged": float(len(log))},
    )  # fmt: skip


@dataclass(frozen=True)
class LogFit:
    """rom: the reduced-order model fit on the whole log (free: m, c fitted); constrained: the
    fit with m, c fixed by the optimizer (None without lr and beta1; the AICc comparison is in
    rom.metrics); baselines: name -> FitResult; forecast: from the first `forecast_from` of the
    log (None when not asked)."""

    log: RewardLog
    rom: FitResult
    baselines: dict[str, FitResult]
    forecast: Forecast | None
    constrained: FitResult | None = None
    metrics: dict[str, float | str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (non-finite numbers become None)."""
        out: dict[str, Any] = {
            "log": self.log.source,
            "format": self.log.format,
            "reward_key": self.log.reward_key,
            "n": len(self.log),
            "n_logged": int(self.log.metrics.get("n_logged", len(self.log))),
            "bin_size": int(self.log.metrics.get("bin_size", 1)),
            "warnings": list(self.log.warnings),
            "hyperparameters": self.log.hyperparameters,
            **_fit_dict(self.rom),
            "constrained": None if self.constrained is None else _fit_dict(self.constrained),
            "baselines": {name: _fit_dict(r) for name, r in self.baselines.items()},
        }
        if self.forecast is not None:
            out["forecast"] = _forecast_dict(self.forecast)
        return _clean(out)


def _fit_dict(r: FitResult) -> dict[str, Any]:
    return {
        "model": r.model,
        "r2": r.r2,
        "sse": r.sse,
        "aic": r.aic,
        "bic": r.bic,
        "residual_std": r.residual_std,
        "residual_autocorr": r.residual_autocorr,
        "params": r.values,
        "stderr": {n: p.stderr for n, p in r.params.items() if p.vary},
        "metrics": dict(r.metrics),
    }


def _forecast_dict(fc: Forecast) -> dict[str, Any]:
    obs = fc.observed_mean
    return {
        "cut_step": fc.cut_step,
        "n_future": int(fc.future_step.size),
        "predicted_mean": fc.predicted_mean,
        "observed_mean": obs,
        "band": list(fc.mean_band),
        "level": fc.level,
        "error": abs(fc.predicted_mean - obs),
        "covered": bool(fc.mean_band[0] <= obs <= fc.mean_band[1]),
        "model": fc.fit.model,
        "method": fc.metrics.get("method"),
        "model_mean": fc.metrics.get("model_mean"),
        "weight_model": fc.metrics.get("weight_model"),
        "baselines": {
            name: {"predicted_mean": v, "error": abs(v - obs)} for name, v in fc.baselines.items()
        },
    }


def _clean(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def fit_log(
    log: RewardLog, *, forecast_from: float | None = None, loss: str = "linear", level: float = 0.9
) -> LogFit:
    """Fit the rom (with the log's lr schedule and beta1 / K when known) and the baselines;
    forecast the rest of the log from its first `forecast_from` fraction (0 < f < 1)."""
    if forecast_from is not None and not 0.0 < forecast_from < 1.0:
        raise ValueError(f"forecast_from must be a fraction in (0, 1), got {forecast_from!r}")
    log = thin_log(log)  # bin means past MAX_FIT_POINTS steps (lr and optimizer steps alike)
    kw: dict[str, Any] = {**run_inputs(log.step, log.columns, log.hyperparameters), "loss": loss}
    rom = fit_run(log.step, log.reward, **kw)
    constrained = rom.constrained  # the rom_fixed fit the free fit was compared with
    baselines = {name: fit_curve(log.step, log.reward, name, loss=loss) for name in BASELINES}
    fc = None
    if forecast_from is not None:
        from pgrpo.dynamics.forecast import forecast

        fc = forecast(log.step, log.reward, forecast_from, level=level, **kw)
    return LogFit(log, rom, baselines, fc, constrained)
