"""Fit a training log end to end: the rom, the baselines, and optionally a forecast.

`fit_log(log)` is the one library call behind `pgrpo fit`; `to_dict()` gives its JSON.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pgrpo.dynamics.fit import FitResult, fit_curve
from pgrpo.dynamics.forecast import Forecast, forecast
from pgrpo.dynamics.runfit import fit_constrained, fit_run, run_inputs
from pgrpo.logs import RewardLog

BASELINES = ("exponential", "logistic")


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
    kw: dict[str, Any] = {**run_inputs(log.step, log.columns, log.hyperparameters), "loss": loss}
    rom = fit_run(log.step, log.reward, **kw)
    constrained = fit_constrained(log.step, log.reward, **kw)
    baselines = {name: fit_curve(log.step, log.reward, name, loss=loss) for name in BASELINES}
    fc = None
    if forecast_from is not None:
        fc = forecast(log.step, log.reward, forecast_from, level=level, **kw)
    return LogFit(log, rom, baselines, fc, constrained)
