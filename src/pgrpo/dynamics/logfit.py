"""Fit a training log end to end: the rom, the baselines, and optionally a forecast.

`fit_log(log)` is the one library call behind `pgrpo fit`; `to_dict()` gives its JSON.

A log longer than MAX_FIT_POINTS is thinned first (`thin_log`, the bin means of
`pgrpo.logs.thin` that `pgrpo diagnose` uses too): the reward is averaged over consecutive bins
of b steps aligned to the end of the log, the n mod b leading steps forming one shorter first
bin, and each bin sits at its mean step. For a curve whose timescale spans many bins this loses
no information the fit can use (the bin mean of a smooth curve is its value at the bin's mean
step, up to O(width^2) curvature, and its noise variance is sigma^2 / count: the same for every
full bin, so ordinary least squares stays the right fit, with the shorter head bin weighted by
count / b); the fit then costs O(MAX_FIT_POINTS) points, and under an lr schedule the recursion
jumps from bin to bin (`binned_recursion.schedule_response`). R^2, AIC, BIC and residual statistics
then describe the bin means (R^2 is higher than on single steps, whose noise the bins average
out): the result says so in `warnings` and in `metrics["bin_size"]`. The learning rate and the
optimizer step are binned the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from pgrpo.dynamics.constrained import NoiseRho, StartComparison, compare_start, residual_rho
from pgrpo.dynamics.curves import FIT_MODELS
from pgrpo.dynamics.fit import fit_curve
from pgrpo.dynamics.fitquality import fit_quality
from pgrpo.dynamics.fitresult import FitResult
from pgrpo.dynamics.runfit import fit_run, run_inputs
from pgrpo.logs import RewardLog
from pgrpo.logs.thin import bin_counts, bin_means, bin_plan

if TYPE_CHECKING:  # forecast is imported only when a forecast is asked for
    from pgrpo.dynamics.forecast import Forecast

BASELINES = ("exponential", "logistic", "rom_v0")
"""The curves `fit_log` fits beside the rom, never in its place: `pgrpo fit` prints their R^2
and AIC under the rom's. `rom_v0` (since 2026-12-05, session 29) is the oscillator with a free
initial velocity, at a constant lr (the rom reported may follow the lr schedule): where it wins
(`LogFit.start`, `constrained.compare_start`: by AICc and a likelihood-ratio test, since
session 30), the run's first steps moved otherwise than a start from rest allows (faster
towards its level, or away from it first), and `LogFit.described` is rom_v0 (two held-back
verl runs: R^2 0.963 and 0.960 against the rom's
0.843 and 0.812; docs/diagnostics.md, "Runs held back, round 13"). A baseline is fitted where
the log has 2 points more than its parameters (rom_v0: 7)."""
FIT_COLUMNS = ("learning_rate", "optimizer_step", "group_size", "refresh_interval", "beta1",
               "batch_prompts")  # fmt: skip
"""The columns `fit_log` reads (the lr schedule, the clock, the constant hyperparameter columns):
`read_log(path, columns=FIT_COLUMNS)` converts only these of a long log."""
MAX_FIT_POINTS = 4000
"""Longer logs are fitted on bin means (see the module docstring)."""


def thin_curve(
    step: np.ndarray, reward: np.ndarray, max_points: int = MAX_FIT_POINTS
) -> tuple[np.ndarray, np.ndarray, int]:
    """Bin means of a long curve (`pgrpo.logs.thin`, the head kept as a shorter first bin):
    step, reward: [n] -> (step [m], reward [m], bin_size b), m = ceil(n / b) <= max_points.
    Curves of <= max_points points come back unchanged with b = 1."""
    step, reward = np.asarray(step, dtype=float), np.asarray(reward, dtype=float)
    b, head = bin_plan(step.size, max_points)
    if b == 1:
        return step, reward, 1
    return bin_means(step, b, head, keep_head=True), bin_means(reward, b, head, True), b


def thin_log(log: RewardLog, max_points: int = MAX_FIT_POINTS) -> RewardLog:
    """`log` with step and reward thinned as `thin_curve` does (other columns dropped, except
    the learning rate and the optimizer step, binned the same way, and `bin_count`, the steps
    behind each point); a warning and metrics["bin_size"] say so."""
    n = len(log)
    b, head = bin_plan(n, max_points)
    if b == 1:
        return log
    columns = {}
    for name in ("learning_rate", "optimizer_step"):
        if name in log.columns and np.isfinite(log.columns[name]).any():
            columns[name] = bin_means(log.columns[name], b, head, keep_head=True)
    columns["bin_count"] = bin_counts(n, b, head, keep_head=True).astype(float)
    step = bin_means(log.step, b, head, keep_head=True)
    first = f", the first of {head}, weighted by its count" if head else ""
    note = (
        f"{n} logged steps fitted as {step.size} means of {b} consecutive steps{first} "
        "(R^2, AIC and BIC describe the means)"
    )
    return replace(
        log, step=step, reward=bin_means(log.reward, b, head, keep_head=True), columns=columns,
        warnings=(*log.warnings, note),
        metrics={**log.metrics, "bin_size": float(b), "n_logged": float(n)},
    )  # fmt: skip


def bin_weights(log: RewardLog) -> np.ndarray | None:
    """Inverse-variance weights of a thinned log's points (count / b: [m]), None when every
    point carries the same number of steps (an unweighted fit is then exact)."""
    counts = log.columns.get("bin_count")
    if counts is None or np.all(counts == counts[-1]):
        return None
    return counts / float(np.max(counts))


@dataclass(frozen=True)
class LogFit:
    """rom: the reduced-order model fit on the whole log (free: m, c fitted); constrained: the
    fit with m, c fixed by the optimizer (None without lr and beta1; the AICc comparison is in
    rom.metrics); baselines: name -> FitResult; forecast: from the first `forecast_from` of the
    log (None when not asked, or when the cut leaves too few points: then
    metrics["forecast_skipped"] says so, with `forecast_cut_step` and `forecast_points`)."""

    log: RewardLog
    rom: FitResult
    baselines: dict[str, FitResult]
    forecast: Forecast | None
    constrained: FitResult | None = None
    metrics: dict[str, float | str] = field(default_factory=dict)
    start: StartComparison | None = None
    """`constrained.compare_start`: whether a free initial velocity describes the run better
    than a start from rest (None where rom_v0 was not fitted)."""

    @property
    def free_start(self) -> bool:
        """Whether `start` prefers the free start."""
        return self.start is not None and self.start.preferred == "free"

    @property
    def described(self) -> FitResult:
        """The closed form that describes the run: the rom from rest, or `rom_v0` where
        `start` prefers a free start. Forecasts and `diagnose` never read it."""
        return self.baselines["rom_v0"] if self.free_start else self.rom

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (non-finite numbers become None)."""
        out: dict[str, Any] = {
            "log": self.log.source,
            "format": self.log.format,
            "reward_key": self.log.reward_key,
            "reward_column": self.log.reward_read,  # in words: summed, or chosen over others
            "n": len(self.log),
            "n_logged": int(self.log.metrics.get("n_logged", len(self.log))),
            "loss": self.metrics.get("loss", "linear"),  # every fit's (`fit_log`)
            "bin_size": int(self.log.metrics.get("bin_size", 1)),
            "warnings": list(self.log.warnings),
            "hyperparameters": self.log.hyperparameters,
            **_fit_dict(self.rom),
            "constrained": None if self.constrained is None else _fit_dict(self.constrained),
            "baselines": {name: _fit_dict(r) for name, r in self.baselines.items()},
            "fit_quality": fit_quality(
                self.rom,
                constrained=self.constrained,
                bin_size=int(self.log.metrics.get("bin_size", 1)),
            ),
        }
        if self.start is not None:
            out["start"] = {
                **self.start.to_dict(),
                "fit_quality": fit_quality(
                    self.described, bin_size=int(self.log.metrics.get("bin_size", 1))
                ),
            }
        if self.forecast is not None:
            out["forecast"] = _forecast_dict(self.forecast, self.log.reward)
        elif "forecast_skipped" in self.metrics:  # asked for, but the cut leaves too little
            out["forecast"] = None
            out["forecast_skipped"] = self.metrics["forecast_skipped"]
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
        # null for a parameter at its bound or not identified: its stderr means nothing, and
        # `pgrpo fit` does not print it (JSON gave one beside "at its bound": review, session 36)
        "stderr": {
            n: None if n in r.at_bound or n in r.unidentified else p.stderr
            for n, p in r.params.items()
            if p.vary
        },  # fmt: skip
        "at_bound": list(r.at_bound),
        "unidentified": list(r.unidentified),
        "metrics": dict(r.metrics),
    }


def _forecast_dict(fc: Forecast, reward: np.ndarray) -> dict[str, Any]:
    from dataclasses import asdict

    from pgrpo.dynamics.forecast import informative, measured_skill, uninformative_reason

    obs = fc.observed_mean
    shown = informative(fc, reward)
    skill = measured_skill(fc) if shown else None
    return {
        "informative": shown,  # band narrower than the run's range, from a prefix that moved
        "not_informative_because": None if shown else uninformative_reason(fc),
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
        "member": fc.metrics.get("member"),  # consensus: the median member taken
        "combination": fc.metrics.get("combination"),  # consensus: median; ensemble_mean: mean
        "model_mean": fc.metrics.get("model_mean"),
        "weight_model": fc.metrics.get("weight_model"),
        "baselines": {
            name: {"predicted_mean": v, "error": abs(v - obs)} for name, v in fc.baselines.items()
        },
        "measured_skill": None if skill is None else asdict(skill),  # where it was measured
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


def _enough_points(model: str, n: int) -> bool:
    """Whether n points fit a baseline: 2 more than its parameters (rom_v0's 5 need 7)."""
    return n >= len(FIT_MODELS.get(model).param_names) + 2


def fit_start(
    step: np.ndarray,
    reward: np.ndarray,
    rom: FitResult,
    noise_rho: NoiseRho,
    *,
    v0: FitResult | None = None,
    loss: str = "linear",
    weights: np.ndarray | None = None,
    reward_range: tuple[float, float] | None = None,
) -> tuple[StartComparison | None, FitResult | None]:
    """(`constrained.compare_start` of the run's rom against `rom_v0`, the rom_v0 fit) for the
    points step, reward: [n] the rom was fitted to. v0: rom_v0 already fitted (fitted here when
    None); the nested constant-lr rom from rest is `rom` itself when it is that model, else
    fitted here; noise_rho: the rho bound of rom_v0's residuals (non-finite residuals: 0.95, the
    most cautious). (None, None) when the log has fewer than rom_v0's parameters + 2 points. The
    one path for `fit_log` and the report."""
    if v0 is None:
        if not _enough_points("rom_v0", len(step)):
            return None, None
        v0 = fit_curve(step, reward, "rom_v0", loss=loss, weights=weights,
                       reward_range=reward_range)  # fmt: skip
    nested = rom if rom.model == "rom" else fit_curve(
        step, reward, "rom", loss=loss, weights=weights, reward_range=reward_range
    )  # fmt: skip  # rom_v0 holds the constant-lr rom from rest at u = 0
    return compare_start(rom, v0, nested, residual_rho(v0, noise_rho), loss=loss), v0


def fit_inputs(log: RewardLog, loss: str = "linear") -> dict[str, Any]:
    """The keyword arguments of a (thinned) log's fits and forecast: `runfit.run_inputs`, the
    loss and the bin weights (`bin_weights`)."""
    kw: dict[str, Any] = {**run_inputs(log.step, log.columns, log.hyperparameters), "loss": loss}
    kw["weights"] = bin_weights(log)
    return kw


def log_rom(log: RewardLog, kw: dict[str, Any], noise_rho: NoiseRho | None) -> FitResult:
    """The rom a (thinned) log is described by, with its closed-form comparison: `fit_run` with
    kw (`fit_inputs`) and the log's G (rom_starved). The one path for `fit_log` and the report
    (until 2026-12-05 the report left G out and showed another model than `pgrpo fit` on 11 of
    the 30 shared runs that state G: those `pgrpo fit` describes by rom_starved)."""
    group_size = log.hyperparameters.get("group_size")
    return fit_run(log.step, log.reward, group_size=group_size, noise_rho=noise_rho, **kw)


def fit_log(
    log: RewardLog,
    *,
    forecast_from: float | None = None,
    loss: str = "linear",
    level: float = 0.9,
    method: str | None = None,
    noise_rho: NoiseRho | None = None,
) -> LogFit:
    """Fit the rom (with the log's lr schedule and beta1 / K when known) and the baselines;
    forecast the rest of the log from its first `forecast_from` fraction (0 < f < 1) with the
    forecast method `method` (`forecast.FORECAST_METHODS`; default `forecast.DEFAULT_METHOD`).
    noise_rho: the rho bound `fit_start` and the closed-form test (`compare_constrained`) shrink
    their samples by (`pgrpo fit` and the report pass the diagnosis' `nullmodel.lag1_autocorr`);
    None: no free-start comparison (`start` None) and the closed-form test on the residuals'
    point estimate."""
    if forecast_from is not None and not 0.0 < forecast_from < 1.0:
        raise ValueError(f"forecast_from must be a fraction in (0, 1), got {forecast_from!r}")
    log = thin_log(log)  # bin means past MAX_FIT_POINTS steps (lr and optimizer steps alike)
    kw = fit_inputs(log, loss)
    weights = kw["weights"]
    rom = log_rom(log, kw, noise_rho)
    constrained = rom.constrained  # the rom_fixed fit the free fit was compared with
    baselines = {
        name: fit_curve(
            log.step,
            log.reward,
            name,
            loss=loss,
            weights=weights,
            reward_range=kw.get("reward_range"),
        )  # bounded as the rom is
        for name in BASELINES
        if _enough_points(name, len(log))
    }
    start = None
    if noise_rho is not None and "rom_v0" in baselines:
        start, _ = fit_start(log.step, log.reward, rom, noise_rho, v0=baselines["rom_v0"],
                             loss=loss, weights=weights,
                             reward_range=kw.get("reward_range"))  # fmt: skip
    fc, metrics = None, {}
    if forecast_from is not None:
        from pgrpo.dynamics.forecast import (
            DEFAULT_METHOD,
            MIN_FORECAST_POINTS,
            cut_index,
            forecast,
        )

        i = cut_index(log.step, forecast_from)
        cut_step = float(log.step[max(i, 1) - 1])
        if i < MIN_FORECAST_POINTS or i >= len(log):
            metrics = {"forecast_skipped": (
                f"not enough points to forecast from step {cut_step:g} (need "
                f"{MIN_FORECAST_POINTS} up to the cut and 1 after it, have {i} and "
                f"{len(log) - i}); give a later --forecast-from or a longer log"
                if i < MIN_FORECAST_POINTS else
                f"nothing to forecast after step {cut_step:g}: the cut is at the end of the "
                "log; give an earlier --forecast-from"
            ), "forecast_cut_step": cut_step, "forecast_points": float(i)}  # fmt: skip
        else:
            method = method or DEFAULT_METHOD
            fc = forecast(log.step, log.reward, forecast_from, level=level, method=method, **kw)
    return LogFit(log, rom, baselines, fc, constrained, {**metrics, "loss": loss}, start)
