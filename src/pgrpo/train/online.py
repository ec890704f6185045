"""Online forecasting: every `run.forecast_every` steps, fit the dynamics model to the reward curve
so far and log its forecast (`forecast/plateau`, `forecast/steps_to_90`, `forecast/regime`), with
a warning when the refresh interval K reaches the predicted stability threshold K*.

Only a reward that has moved beyond its batch noise is fitted: while the progress verdict
(`pgrpo.diagnose.progress`, the same test `pgrpo diagnose` uses, <= 5% false alarms on noise)
reads the curve `flat` or `too_short`, a fit's stiffness, timescale and K* are whatever the
optimizer stopped at, so they are logged as None, the plateau is the recent level, and no K*
warning is raised. `forecast/steps_to_90` counts the steps from the latest one (0 once the
fitted curve has covered 90% of the way from R_0 to R_inf; before session 39 it was the step at
which it had). Where the fitted level contradicts the verdict (`fitwords.contradiction`), the
plateau and the steps to 90% are withheld (None) and `forecast/withheld` says why
(`fitwords.WITHHELD`).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from pgrpo.train.config import RunConfig

MIN_POINTS = 6
"""Points before the first forecast is logged; under the progress verdict's own minimum (8) it
is logged as `too_short`, with the level so far."""

UNMOVED = ("flat", "too_short")
"""Progress labels under which the curve has not moved beyond noise: nothing to fit."""


class OnlineForecaster:
    """Holds the reward history of a run and refits every N steps (none when N = 0)."""

    def __init__(self, config: RunConfig, history: list[dict[str, Any]]) -> None:
        self.config = config
        self.rewards = [h.get("reward") for h in history]
        self.lrs = [h.get("learning_rate") for h in history]
        self.warned = False

    def update(self, metrics: dict[str, Any]) -> dict[str, Any]:
        self.rewards.append(metrics.get("reward"))
        self.lrs.append(metrics.get("learning_rate"))
        every = self.config.run.forecast_every
        step = int(metrics["step"])
        if not every or step % every or len(self.rewards) < MIN_POINTS:
            return {}
        try:
            out = forecast_metrics(self.rewards, self.lrs, self.config)
        except ImportError:
            return {}
        except (ValueError, RuntimeError, FloatingPointError) as exc:  # a failed fit is logged
            return {"forecast/error": f"{type(exc).__name__}: {exc}"[:200]}
        self._warn_refresh(out)
        return out

    def _warn_refresh(self, out: dict[str, Any]) -> None:
        k_star = out.get("forecast/k_star")
        k = self.config.grpo.refresh_interval
        if self.warned or k_star is None or not math.isfinite(k_star) or k < k_star:
            return
        self.warned = True
        warnings.warn(
            f"refresh interval K={k} is at or above the predicted stability threshold "
            f"K*={k_star:g}: the reward curve is forecast to oscillate or diverge. Lower "
            "grpo.refresh_interval or optim.lr.",
            RuntimeWarning,
            stacklevel=2,
        )


def _level(reward: np.ndarray) -> float | None:
    """The mean of the rewards so far (None without one): a too-short run's level."""
    return float(np.mean(reward)) if reward.size else None


def forecast_metrics(rewards: list[Any], lrs: list[Any], config: RunConfig) -> dict[str, Any]:
    """Fit the reduced-order model to the per-step rewards so far and summarise its forecast.

    The model's time unit is the optimizer step (`pgrpo.dynamics.runfit`: log step s is
    optimizer step s * K): tau and kappa are per optimizer step, as in every other fit of a run.
    Reported step counts are log steps. `forecast/k_star` is the exact refresh-interval threshold
    of the run optimizer's reduction at the fitted stiffness a = k (per optimizer step) and the
    run's beta1 (None above max(10 K, 200), and None under AdamW, which predicts no threshold).
    """
    from pgrpo.diagnose.fitwords import WITHHELD, contradiction
    from pgrpo.diagnose.progress import assess_progress
    from pgrpo.dynamics import regime
    from pgrpo.dynamics.optimizers import OptimizerSettings, reduce_optimizer
    from pgrpo.dynamics.runfit import fit_run, run_inputs
    from pgrpo.train.optimizers import TRAIN_OPTIMIZERS

    k_refresh = config.grpo.refresh_interval
    reward = np.array([np.nan if r is None else r for r in rewards], dtype=float)
    lr = np.array([np.nan if v is None else v for v in lrs], dtype=float)
    keep = np.isfinite(reward) & np.isfinite(lr)
    log_step = np.arange(1, reward.size + 1, dtype=float)[keep]
    verdict = assess_progress(
        log_step,
        reward[keep],
        n_rollouts=config.grpo.batch_prompts * config.grpo.group_size,
        fit=False,
        reward_range=config.task.reward_range,
    )
    if verdict.label in UNMOVED:  # noise only: no stiffness, timescale or K* to read
        return {
            "forecast/progress": verdict.label,
            "forecast/plateau": verdict.evidence.get("end_level", _level(reward[keep])),
            "forecast/steps_to_90": None,
            "forecast/withheld": None,
            "forecast/regime": "flat",
            "forecast/tau": None,
            "forecast/kappa": None,
            "forecast/r2": None,
            "forecast/k_star": None,
            "forecast/k_linear": None,
        }
    columns = {"learning_rate": lr[keep], "optimizer_step": log_step * k_refresh}
    hyper: dict[str, Any] = {"beta1": config.optim.beta1, "refresh_interval": k_refresh}
    if config.task.reward_range is not None:  # the task's bounds: no plateau above a 0/1 max
        hyper["reward_min"], hyper["reward_max"] = config.task.reward_range
    reduction = TRAIN_OPTIMIZERS.get(config.optim.name).reduction
    inputs = run_inputs(log_step, columns, hyper, optimizer=reduction)
    fit = fit_run(log_step, reward[keep], **inputs)
    k, m = float(fit.metrics["k"]), float(fit.metrics["m"])  # per optimizer step
    r_inf = float(fit.values["R_inf"])
    withheld = WITHHELD.get(contradiction(verdict, r_inf))  # a level the verdict contradicts
    reach = fit.steps_to_fraction(100.0 * max(config.run.steps, reward.size))
    k_star = k_linear = None
    if k > 0:  # the reduction of the run's optimizer: adam predicts no K*, and then none is said
        red = reduce_optimizer(
            reduction,
            OptimizerSettings(
                lr=1.0,
                kappa=k,  # the fit's effective stiffness (under adam lr kappa / u: no closure)
                beta1=config.optim.beta1,
                refresh_interval=k_refresh,
                beta2=config.optim.beta2,
                max_refresh=max(10 * k_refresh, 200),
                closure=False,
            ),
        )
        k_star, k_linear = red.K_star, red.metrics["linear_threshold"]
    return {
        "forecast/progress": verdict.label,
        "forecast/plateau": None if withheld else r_inf,
        "forecast/steps_to_90": None if withheld else reach,
        "forecast/withheld": withheld,
        "forecast/regime": regime(m, 1.0, k) if k > 0 else "flat",
        "forecast/tau": float(fit.metrics.get("tau", math.nan)),
        "forecast/kappa": float(fit.metrics.get("kappa", math.nan)),
        "forecast/r2": float(fit.r2),
        "forecast/k_star": k_star,
        "forecast/k_linear": k_linear,
    }
