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
- force:     `finite_group_force(p, group_size, estimator="grpo")` -> FiniteGroupForce.
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
- forecast:  `forecast(step, reward, cut, method="level_gain", lr=, ...)` -> Forecast
             (`FORECAST_METHODS`: level_gain, calibrated on real runs, `levelgain.CORPUS_PRIOR`;
             rom_blend); `evaluate_forecast`.
- predict:   `predict(lr, beta1, kappa, refresh_interval=, group_size=, ...)` -> Prediction.
- logs:      `pgrpo.dynamics.logfit.fit_log(RewardLog, forecast_from=)` (behind `pgrpo fit`).
- synthetic: `synthetic_suite(n_per_shape, seed)`: noisy recursion curves for tests/bench.
"""

from pgrpo.dynamics.curves import FIT_MODELS, CurveModel, FitContext, Parameter
from pgrpo.dynamics.fit import FitResult, fit_curve, fit_model, make_context, noise_scale
from pgrpo.dynamics.force import FiniteGroupForce, finite_group_force
from pgrpo.dynamics.forecast import (
    Forecast,
    ForecastEvaluation,
    evaluate_forecast,
    forecast,
    last_window_mean,
)
from pgrpo.dynamics.joint import JointFitResult, fit_joint
from pgrpo.dynamics.model import (
    RomCoefficients,
    continuum_oscillation_onset,
    damping_ratio,
    inflection_time,
    regime,
    rom_coefficients,
    rule_of_thumb_threshold,
    schedule_coefficients,
    stationary_variance,
    trajectory,
)
from pgrpo.dynamics.optimizers import (
    OPTIMIZER_REDUCTIONS,
    OptimizerReduction,
    OptimizerSettings,
    reduce_optimizer,
    run_optimizer,
)
from pgrpo.dynamics.predict import Prediction, predict
from pgrpo.dynamics.recursion import (
    RefreshThreshold,
    discrete_stationary_variance,
    monodromy,
    oscillation_onset,
    refresh_threshold,
    simulate_recursion,
    spectral_radius,
)
from pgrpo.dynamics.synthetic import SyntheticCurve, lr_schedule, synthetic_suite

__all__ = [
    "FIT_MODELS",
    "OPTIMIZER_REDUCTIONS",
    "OptimizerReduction",
    "OptimizerSettings",
    "reduce_optimizer",
    "run_optimizer",
    "CurveModel",
    "FiniteGroupForce",
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
    "finite_group_force",
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
