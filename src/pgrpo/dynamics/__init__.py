"""The reduced-order model of GRPO reward dynamics: predict, fit and forecast reward curves.

Public API (see docs/dynamics.md):
- model:     `rom_coefficients(lr, beta1, kappa, refresh_interval=, group_size=, batch_prompts=)`
             -> RomCoefficients (m, c, k, D; metrics zeta, tau, regime, inflection_time, ...);
             `trajectory(t, R0, R_inf, m, c, k, v0=0)`; `regime`, `damping_ratio`,
             `stationary_variance`, `inflection_time`, `rule_of_thumb_threshold`.
- recursion: `simulate_recursion(a, beta1, n_steps, refresh_interval=, x0=, v0=, noise=)`;
             `refresh_threshold(a, beta1)` -> RefreshThreshold (.K_star exact, .rule_of_thumb);
             `oscillation_onset(beta1, refresh_interval=1)`; `spectral_radius`, `monodromy`;
             `discrete_stationary_variance`.
- fitting:   `fit_curve(step, reward, model="rom", lr=, beta1=, refresh_interval=, loss=,
             clock=, optimizer=)` -> FitResult (free fit; with lr and beta1 also the
             optimizer-constrained `rom_fixed`, compared by AICc in metrics); `FIT_MODELS`
             registry; `Parameter`; `fit_joint` (shared R_inf, k). Invariant to the units of
             step and reward (internal units, `inputs`).
- optimizers: `reduce_optimizer(name, OptimizerSettings)` -> OptimizerReduction (mass, damping,
             effective a, K* or the statement that none is predicted): the one path from an
             optimizer's settings to the model (`OPTIMIZER_REDUCTIONS`: sgd_momentum, adam);
             `fit_reduction` (a fit's effective stiffness), `run_optimizer` (a log's name).
- runfit:    `run_inputs(step, columns, hyper)`, `fit_run(step, reward, **inputs)`: the one fit of
             a run's log, tau and kappa per optimizer step (online forecast, demo, fit, report,
             diagnose).
- forecast:  `forecast(step, reward, cut, method="consensus", lr=, ...)` -> Forecast
             (`FORECAST_METHODS`: consensus, the median of four, `consensus`; consensus3,
             ensemble_mean; level_gain,
             calibrated on real runs, `levelgain.CORPUS_PRIOR`; rom_blend); `evaluate_forecast`.
- predict:   `predict(lr, beta1, kappa, refresh_interval=, group_size=, ...)` -> Prediction.
- logs:      `pgrpo.dynamics.logfit.fit_log(RewardLog, forecast_from=, method=)` (behind
             `pgrpo fit`).
- synthetic: `synthetic_suite(n_per_shape, seed)`: noisy recursion curves for tests/bench.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

# Loaded on first use (PEP 562), so `pgrpo fit` imports only what a fit needs (not scipy.stats,
# or the joint fit). public name -> module that defines it
_LAZY = {
    "FIT_MODELS": "pgrpo.dynamics.curves",
    "CurveModel": "pgrpo.dynamics.curves",
    "FitContext": "pgrpo.dynamics.curves",
    "Parameter": "pgrpo.dynamics.curves",
    "FitResult": "pgrpo.dynamics.fitresult",
    "fit_curve": "pgrpo.dynamics.fit",
    "fit_model": "pgrpo.dynamics.fit",
    "make_context": "pgrpo.dynamics.fit",
    "noise_scale": "pgrpo.dynamics.fit",
    "Forecast": "pgrpo.dynamics.forecast",
    "ForecastEvaluation": "pgrpo.dynamics.forecast",
    "evaluate_forecast": "pgrpo.dynamics.forecast",
    "forecast": "pgrpo.dynamics.forecast",
    "last_window_mean": "pgrpo.dynamics.forecast",
    "JointFitResult": "pgrpo.dynamics.joint",
    "fit_joint": "pgrpo.dynamics.joint",
    "RomCoefficients": "pgrpo.dynamics.model",
    "continuum_oscillation_onset": "pgrpo.dynamics.model",
    "damping_ratio": "pgrpo.dynamics.model",
    "inflection_time": "pgrpo.dynamics.model",
    "regime": "pgrpo.dynamics.model",
    "rom_coefficients": "pgrpo.dynamics.model",
    "rule_of_thumb_threshold": "pgrpo.dynamics.model",
    "schedule_coefficients": "pgrpo.dynamics.model",
    "stationary_variance": "pgrpo.dynamics.model",
    "trajectory": "pgrpo.dynamics.model",
    "OPTIMIZER_REDUCTIONS": "pgrpo.dynamics.optimizers",
    "OptimizerReduction": "pgrpo.dynamics.optimizers",
    "OptimizerSettings": "pgrpo.dynamics.optimizers",
    "reduce_optimizer": "pgrpo.dynamics.optimizers",
    "run_optimizer": "pgrpo.dynamics.optimizers",
    "Prediction": "pgrpo.dynamics.predict",
    "predict": "pgrpo.dynamics.predict",
    "RefreshThreshold": "pgrpo.dynamics.recursion",
    "discrete_stationary_variance": "pgrpo.dynamics.recursion",
    "monodromy": "pgrpo.dynamics.recursion",
    "oscillation_onset": "pgrpo.dynamics.recursion",
    "refresh_threshold": "pgrpo.dynamics.recursion",
    "simulate_recursion": "pgrpo.dynamics.recursion",
    "spectral_radius": "pgrpo.dynamics.recursion",
    "SyntheticCurve": "pgrpo.dynamics.synthetic",
    "lr_schedule": "pgrpo.dynamics.synthetic",
    "synthetic_suite": "pgrpo.dynamics.synthetic",
}


class _Package(types.ModuleType):
    """Functions named like their module (`forecast`, `predict`) stay the functions: importing
    the submodule (which any user of the package may do first) makes the import system set the
    package attribute to the module object, and this puts the function there instead. They are
    loaded on first use like the rest (a fit that forecasts nothing does not load them).
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _NAMED_LIKE_MODULE and isinstance(value, types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


_NAMED_LIKE_MODULE = ("forecast", "predict")
sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pgrpo.dynamics' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "FIT_MODELS",
    "OPTIMIZER_REDUCTIONS",
    "OptimizerReduction",
    "OptimizerSettings",
    "reduce_optimizer",
    "run_optimizer",
    "CurveModel",
    "FitContext",
    "FitResult",
    "Forecast",
    "ForecastEvaluation",
    "JointFitResult",
    "Prediction",
    "SyntheticCurve",
    "Parameter",
    "RefreshThreshold",
    "RomCoefficients",
    "continuum_oscillation_onset",
    "damping_ratio",
    "discrete_stationary_variance",
    "evaluate_forecast",
    "fit_joint",
    "forecast",
    "last_window_mean",
    "lr_schedule",
    "predict",
    "synthetic_suite",
    "fit_curve",
    "fit_model",
    "inflection_time",
    "make_context",
    "monodromy",
    "noise_scale",
    "oscillation_onset",
    "refresh_threshold",
    "regime",
    "rom_coefficients",
    "rule_of_thumb_threshold",
    "schedule_coefficients",
    "simulate_recursion",
    "spectral_radius",
    "stationary_variance",
    "trajectory",
]
