"""The level-and-drift forecaster (`forecast(method="level_drift")`): where the reward is now,
read with less noise than the last-window mean, plus the drift that real GRPO runs keep after
any point of their run, learned from real runs.

On the 108 real runs whose logs pgrpo holds (the shared corpus and held-back rounds 15-20), the
mean reward after the midpoint lies above the mean of the last 10 points before it on 81 runs:
runs that learn keep learning, and runs that look level drift up more often than down. A
forecast that ignores that (the last-window mean, a curve that has saturated at the cut) is
biased low on most runs. This forecaster states the bias as one number learned from the runs.

Per run, from the prefix step, reward: [n] only:

- `noise` s: the per-step noise, std(first differences) / sqrt(2) (a drift adds its square to
  the differences' mean, not their spread);
- `last`: the mean of the last `LAST_POINTS` points;
- `line`: a straight line fitted by least squares to the prefix's last half (at least 5 points),
  read at the cut: the level now, unbiased by a trend and with the noise of n / 2 points;
- `horizon` h: (mean future step - cut step) / (cut step - first step), how far ahead the
  forecast's mean lies in units of the prefix's span.

The forecast of the mean after the cut is

    last + b (line - last) + a s sqrt(h)

a flat path at that value, with (a, b) a `DriftPrior` fitted to minimise the mean |error| in
units of s over real runs at cuts 0.3, 0.5 and 0.7, each repository weighted equally
(bench/forecast_drift.py, which also reports the leave-one-repository-out errors). The band
of the mean is mean +- q s sqrt(h), q the 90% quantile of those residuals' size in the same units.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

MIN_LINE_POINTS = 5
"""The fewest points the line through the prefix's last half is fitted to."""

LAST_POINTS = 10
"""`last` is the mean of the prefix's last this many points (all of them if fewer): the naive
forecast the issue and the benches score against, which this forecaster corrects."""


@dataclass(frozen=True)
class DriftPrior:
    """drift: a, the drift in units of noise sqrt(horizon); line_weight: b in [0, 1], the
    weight of the line's level against the last-window mean; band: q > 0, the 90% quantile of
    |observed - forecast| / (noise sqrt(horizon)) on the runs it was learned from, each
    repository weighted equally; metrics: how it was derived (runs, repositories, command)."""

    drift: float
    line_weight: float
    band: float
    metrics: dict[str, float | str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 <= self.line_weight <= 1.0:
            raise ValueError(f"line_weight must be in [0, 1], got {self.line_weight!r}")
        if not self.band > 0:
            raise ValueError(f"band must be > 0, got {self.band!r}")


@dataclass(frozen=True)
class DriftInputs:
    """What the forecaster reads from a prefix: noise s, last-window mean, the line's level at
    the cut, and the horizon h (all floats; s is 0 for a constant prefix)."""

    noise: float
    last: float
    line: float
    horizon: float


def drift_inputs(step: np.ndarray, reward: np.ndarray, future: np.ndarray) -> DriftInputs:
    """DriftInputs of the prefix step, reward: [n] for the future steps future: [m]. Raises
    ValueError on fewer than `MIN_LINE_POINTS` points or non-finite values."""
    s = np.asarray(step, dtype=float)
    y = np.asarray(reward, dtype=float)
    if y.size < MIN_LINE_POINTS:
        raise ValueError(f"the level-and-drift forecast needs >= {MIN_LINE_POINTS} points")
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(s))):
        raise ValueError("the level-and-drift forecast needs finite steps and rewards")
    noise = float(np.std(np.diff(y)) / math.sqrt(2.0))
    h = max(MIN_LINE_POINTS, y.size // 2)
    xs, ys = s[-h:] - s[-1], y[-h:]
    if np.ptp(xs) > 0:
        slope, level = np.polyfit(xs, ys, 1)
    else:
        level = float(np.mean(ys))
    span = float(s[-1] - s[0])
    ahead = float(np.mean(np.asarray(future, dtype=float))) - float(s[-1])
    horizon = max(ahead, 0.0) / span if span > 0 else 1.0
    return DriftInputs(noise, float(np.mean(y[-LAST_POINTS:])), float(level), horizon)


def drift_mean(x: DriftInputs, prior: DriftPrior) -> float:
    """The forecast of the mean after the cut: last + b (line - last) + a s sqrt(h)."""
    return (
        x.last
        + prior.line_weight * (x.line - x.last)
        + prior.drift * x.noise * math.sqrt(x.horizon)
    )


DRIFT_PRIOR = DriftPrior(
    drift=0.303,
    line_weight=0.758,
    band=2.505,
    metrics={
        "runs": 108,
        "repos": 57,
        "run_cuts": 315,
        "command": "python bench/forecast_drift.py --learn ../shared/data/curves "
        "/work/holdout1{5,6,7,8,9}/all/curves /work/holdout20/all/curves",
        "date": "2026-12-06",
        "left_out_cut_0.5": "median |error|/std 0.216 (last-10 mean 0.391), 70/108 wins",
    },
)
"""Learned on the shared corpus and held-back rounds 15-20 (the runs whose logs are on the
machine that learned it; the held-back CSVs are not in the repository, bench/holdoutN/)."""


def level_drift(step, reward, future, fit_kw, *, prior: DriftPrior = DRIFT_PRIOR):
    """(fit, predicted [m], var_step [m], var_mean, metrics) for `forecast`: the flat path at
    `drift_mean`; var_mean that of a normal whose 90% interval is mean +- band s sqrt(h);
    var_step adds the per-step noise s^2; fit: the exponential fitted to the prefix (what
    `pgrpo fit` and the report draw beside it; metrics["basis"] says the forecast is not
    drawn from it)."""
    from pgrpo.dynamics.fit import fit_curve

    future = np.asarray(future, dtype=float)
    x = drift_inputs(step, reward, future)
    mean = drift_mean(x, prior)
    unit = x.noise * math.sqrt(x.horizon)
    sd_mean = unit * prior.band / 1.6448536269514722  # the normal 95% quantile
    pred = np.full(future.size, mean)
    kw = {k: v for k, v in fit_kw.items() if k in ("loss", "clock", "reward_range")}
    fit = fit_curve(np.asarray(step, dtype=float), np.asarray(reward, dtype=float),
                    "exponential", **kw)  # fmt: skip
    metrics = {
        "basis": "last-10 mean, line and drift",
        "noise": x.noise,
        "last_window_mean": x.last,
        "line_level": x.line,
        "horizon": x.horizon,
        "drift": prior.drift * unit,
        "band_unit": unit,
        "model_mean": mean,
    }
    var_mean = sd_mean * sd_mean
    return fit, pred, np.full(future.size, var_mean + x.noise**2), var_mean, metrics
