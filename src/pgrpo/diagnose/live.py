"""Live assessment of a growing reward log: forecast, verdict, alerts and stop decisions.

`assess_live(log, config)` is the one call behind `PgrpoCallback` (TRL, Unsloth) and
`pgrpo watch` (any log). It fits and forecasts with the same code as `pgrpo fit`
(`pgrpo.dynamics.forecast.forecast` on the log's lr schedule, beta1 and K) and returns a frozen
`LiveStatus` whose `metrics` holds the stable `pgrpo/*` keys the callback logs.

All verdicts and stop decisions are taken in one small function, `_decide`, with the thresholds
stated in `LiveConfig` (the lead can switch it to `pgrpo.diagnose.progress.assess_progress`).
False-alarm control, per alarm:
- plateau: the upper end of the `confidence`-level band of the plateau forecast must lie within
  `plateau_tolerance` of the recent level (or z standard errors), the recent slope must
  not be significantly positive, on `patience` consecutive assessments, after
  `min_points` logged points (an under-identified fit has a wide band and never stops a run);
- collapse: the last window mean lies `collapse_sigmas` (default 4) standard errors of a window
  mean below the best window AND the drop is at least `collapse_fraction` of the gain made;
  measured false-alarm rate on null curves in docs/integrations.md;
- degeneracy: at least `degeneracy_threshold` of the groups have zero reward std on each of the
  last `degeneracy_patience` logged points (a transient streak is not enough).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import norm

from pgrpo.core.degeneracy import iid_degeneracy
from pgrpo.dynamics.forecast import Forecast, forecast
from pgrpo.logs import RewardLog

VERDICTS = ("too_short", "learning", "plateau", "flat", "declining", "saturated", "collapsed")
STOP_RULES = ("plateau", "collapse", "degeneracy")
RECENT_FRACTION = 0.5  # the recent level: mean of the last half (see LiveConfig.plateau_tolerance)


@dataclass(frozen=True)
class LiveConfig:
    """When to assess and when a stop condition is met (all opt-in for stopping)."""

    confidence: float = 0.9
    """Level of the forecast band a plateau stop uses (0 < c < 1)."""
    plateau_tolerance: float = 0.05
    """A plateau is reached when the band's upper end is within this fraction of the gain made so
    far above the recent level (the mean of the last half of the log: a quarter was noisier and
    stopped flat runs less reliably), or within z standard errors of a window mean (the
    last-window resolution the forecast has) if that is larger."""
    plateau_resolution: float = 1.0
    """Multiplier of that z standard errors. 1.0 favours precision (real logs: 2 of 15 plateau
    stops premature); 1.8 (= z_band sqrt(2) / z, the resolution of a difference of two window
    means) stops flat runs more reliably but 9 of 28 real stops were premature."""
    min_points: int = 12
    """Logged points before any verdict other than too_short."""
    patience: int = 3
    """Consecutive assessments a stop condition must hold before a stop is requested (3: on the
    real logs 2 of 15 plateau stops were premature, against 7 of 23 with 2 and a quarter-log
    recent level; see docs/integrations.md)."""
    collapse_sigmas: float = 4.0
    """Drop below the best window, in standard errors of a window mean, that counts as collapse."""
    collapse_fraction: float = 0.5
    """... and the drop must be at least this fraction of the gain from the start to the best."""
    degeneracy_threshold: float = 0.9
    """Share of zero-std groups that counts as degenerate at one logged point."""
    degeneracy_patience: int = 5
    """Consecutive degenerate logged points for sustained degeneracy."""
    stop_on: tuple[str, ...] = ()
    """Stop rules that request a stop: any of STOP_RULES (empty: report only, never stop)."""

    def __post_init__(self) -> None:
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), e.g. 0.9; got {self.confidence!r}")
        if not self.plateau_resolution > 0:
            raise ValueError(f"plateau_resolution must be > 0, got {self.plateau_resolution!r}")
        if self.min_points < 8:
            raise ValueError(f"min_points must be >= 8 (the forecast's backtest), got "
                             f"{self.min_points}")  # fmt: skip
        for name in ("patience", "degeneracy_patience"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        bad = [r for r in self.stop_on if r not in STOP_RULES]
        if bad:
            raise ValueError(f"unknown stop rule(s) {bad}; valid: {', '.join(STOP_RULES)}")


@dataclass(frozen=True)
class LiveStatus:
    """One assessment. verdict: one of VERDICTS; alerts: the stop rules whose condition holds
    now; stop: a rule in config.stop_on has held for `patience` assessments (reason names it);
    metrics: the `pgrpo/*` keys (floats only, so every logger accepts them)."""

    step: float
    reward: float
    verdict: str
    alerts: tuple[str, ...]
    stop: bool
    reason: str
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class _Figures:
    """What `_decide` reads; all in reward units unless stated."""

    n: int
    level_now: float  # last window mean
    level_recent: float  # mean of the last RECENT_FRACTION of the log (at least 5 points)
    level_start: float  # first window mean
    level_best: float  # best window mean
    se: float  # standard error of a window mean (first-difference noise): the forecast's resolution
    slope_t: float  # t of the OLS slope over the last half (autocorrelation-inflated)
    plateau_hi: float  # upper end of the plateau forecast band
    degenerate_run: int  # consecutive degenerate logged points at the end
    saturated: bool


def noise_sd(reward: np.ndarray) -> float:
    """Per-point noise sd from first differences (robust to a trend): std(diff) / sqrt(2)."""
    d = np.diff(reward)
    return float(np.std(d, ddof=1) / math.sqrt(2.0)) if d.size > 1 else 0.0


def slope_t(step: np.ndarray, reward: np.ndarray) -> float:
    """t statistic of the OLS slope, SE inflated by (1 + rho) / (1 - rho) for lag-1 residual
    autocorrelation rho > 0. step, reward: [n], n >= 4."""
    x = step - step.mean()
    sxx = float(x @ x)
    if sxx <= 0 or reward.size < 4:
        return 0.0
    b = float(x @ (reward - reward.mean())) / sxx
    r = reward - reward.mean() - b * x
    rho = float(np.corrcoef(r[:-1], r[1:])[0, 1]) if np.std(r) > 0 else 0.0
    rho = min(max(rho if math.isfinite(rho) else 0.0, 0.0), 0.9)
    s2 = float(r @ r) / max(reward.size - 2, 1) * (1 + rho) / (1 - rho)
    se = math.sqrt(s2 / sxx)
    return b / se if se > 0 else (math.copysign(math.inf, b) if b else 0.0)


def _plateau_forecast(log: RewardLog, level: float) -> Forecast:
    """The forecast of the reward's plateau: `forecast` on all points so far of the mean reward
    over a future span as long as the log so far, three spans from now (at the log's stride)."""
    step, hyper = log.step, log.hyperparameters
    lr = log.learning_rate
    span = max(float(step[-1] - step[0]), 1.0)
    return forecast(
        step,
        log.reward,
        float(step[-1]),
        horizon=float(step[-1]) + 3.0 * span + np.linspace(0.0, span, step.size),
        lr=lr,
        lr_step=step if lr is not None else None,
        beta1=hyper.get("beta1"),
        refresh_interval=int(hyper.get("refresh_interval", 1) or 1),
        level=level,
    )


def _degeneracy(log: RewardLog, cfg: LiveConfig) -> tuple[float, float, int]:
    """(last logged share of zero-std groups, its i.i.d. prediction, consecutive degenerate
    points at the end); NaN where the log lacks the column / G / binary rewards."""
    col = log.columns.get("frac_reward_zero_std")
    if col is None:
        a, b = log.columns.get("degeneracy/all_pass"), log.columns.get("degeneracy/all_fail")
        col = a + b if a is not None and b is not None else None
    if col is None or not np.isfinite(col).any():
        return math.nan, math.nan, 0
    fin = col[np.isfinite(col)]
    run = 0
    for v in fin[::-1]:
        if v < cfg.degeneracy_threshold:
            break
        run += 1
    g = log.hyperparameters.get("group_size")
    w = max(5, len(log) // 10)
    p = float(np.mean(log.reward[-w:]))
    iid = iid_degeneracy(p, int(g)) if g and 0.0 <= p <= 1.0 else math.nan
    return float(fin[-1]), float(iid), run


def _figures(log: RewardLog, fc: Forecast, cfg: LiveConfig, degenerate_run: int) -> _Figures:
    r = log.reward
    w = max(5, r.size // 10)
    windows = np.convolve(r, np.ones(w) / w, mode="valid")
    half = r.size // 2
    sat_col = log.columns.get("degeneracy/all_pass")
    saturated = bool(sat_col is not None and np.isfinite(sat_col[-w:]).all()
                     and np.mean(sat_col[-w:]) >= cfg.degeneracy_threshold)  # fmt: skip
    return _Figures(
        n=r.size,
        level_now=float(windows[-1]),
        level_recent=float(np.mean(r[-max(5, int(r.size * RECENT_FRACTION)) :])),
        level_start=float(windows[0]),
        level_best=float(windows.max()),
        se=noise_sd(r) / math.sqrt(w),
        slope_t=slope_t(log.step[half:], r[half:]),
        plateau_hi=float(fc.mean_band[1]),
        degenerate_run=degenerate_run,
        saturated=saturated,
    )


def _decide(f: _Figures, cfg: LiveConfig) -> tuple[str, tuple[str, ...]]:
    """The verdict and the stop rules whose condition holds now (see the module docstring for
    the thresholds). The only place a verdict or an alert is decided: the seam where
    `pgrpo.diagnose.progress.assess_progress` (issue 17's progress verdict, built elsewhere) can
    replace the verdict while the alerts keep these thresholds."""
    if f.n < cfg.min_points:
        return "too_short", ()
    z = float(norm.ppf(cfg.confidence))
    gain_best = f.level_best - f.level_start
    drop = f.level_best - f.level_now
    alerts: list[str] = []
    collapsed = (
        drop > cfg.collapse_sigmas * f.se * math.sqrt(2.0)
        and gain_best > 2.0 * f.se * math.sqrt(2.0)
        and drop >= cfg.collapse_fraction * gain_best
    )
    if collapsed:
        alerts.append("collapse")
    if f.degenerate_run >= cfg.degeneracy_patience:
        alerts.append("degeneracy")
    resolution = cfg.plateau_resolution * z * f.se  # the gain too small to wait for
    tol = max(cfg.plateau_tolerance * abs(f.level_recent - f.level_start), resolution)
    no_more_gain = f.plateau_hi - f.level_recent <= tol and f.slope_t < z
    if collapsed:
        verdict = "collapsed"
    elif f.saturated:
        verdict = "saturated"
    elif f.slope_t < -z:
        verdict = "declining"
    elif not no_more_gain:
        verdict = "learning"
    elif f.level_now - f.level_start > z * f.se * math.sqrt(2.0):
        verdict = "plateau"
    else:
        verdict = "flat"
    if verdict in ("plateau", "flat", "saturated") and no_more_gain:
        alerts.append("plateau")
    return verdict, tuple(alerts)


def assess_live(
    log: RewardLog, config: LiveConfig | None = None, history: tuple[LiveStatus, ...] = ()
) -> LiveStatus:
    """Assess the log so far. history: earlier assessments of the same run (for `patience`).

    Never raises on a short or unfittable log: the verdict is then too_short ("not enough
    evidence") and the forecast keys are absent from metrics.
    """
    cfg = config or LiveConfig()
    step, reward = float(log.step[-1]), float(log.reward[-1])
    deg, iid, run = _degeneracy(log, cfg)
    metrics: dict[str, float] = {"pgrpo/points": float(len(log))}
    if math.isfinite(deg):
        metrics["pgrpo/degeneracy"] = deg
    if math.isfinite(iid):
        metrics["pgrpo/degeneracy_iid"] = iid
    if len(log) < cfg.min_points:
        return _status(step, reward, "too_short", (), cfg, history, metrics)
    try:
        fc = _plateau_forecast(log, cfg.confidence)
    except (ValueError, FloatingPointError, np.linalg.LinAlgError):
        return _status(step, reward, "too_short", (), cfg, history, metrics)
    fig = _figures(log, fc, cfg, run)
    verdict, alerts = _decide(fig, cfg)
    metrics.update(_forecast_metrics(log, fc, fig))
    return _status(step, reward, verdict, alerts, cfg, history, metrics)


def _forecast_metrics(log: RewardLog, fc: Forecast, fig: _Figures) -> dict[str, float]:
    fit = fc.fit
    r0, rinf = fit.values["R_0"], fit.values["R_inf"]
    now = float(fit.fitted[-1])
    out = {
        "pgrpo/forecast_plateau": fc.predicted_mean,
        "pgrpo/forecast_lo": fc.mean_band[0],
        "pgrpo/forecast_hi": fc.mean_band[1],
        "pgrpo/level": fig.level_now,
        "pgrpo/slope_t": fig.slope_t,
    }
    gain = rinf - r0
    if abs(gain) > fig.se:
        out["pgrpo/progress"] = float(np.clip((now - r0) / gain, 0.0, 1.0))
        target = r0 + 0.9 * gain
        last = float(log.step[-1])
        if (now - target) * np.sign(gain) >= 0:
            out["pgrpo/steps_to_90"] = 0.0
        else:
            grid = last + np.arange(1.0, 20.0 * max(last - float(log.step[0]), 1.0) + 1.0)
            hit = np.nonzero((fit.predict(grid) - target) * np.sign(gain) >= 0)[0]
            if hit.size:
                out["pgrpo/steps_to_90"] = float(grid[hit[0]] - last)
    return {k: float(v) for k, v in out.items() if math.isfinite(v)}


def _status(step, reward, verdict, alerts, cfg, history, metrics) -> LiveStatus:
    recent = [h.alerts for h in history[-(cfg.patience - 1) :]] if cfg.patience > 1 else []
    held = [r for r in cfg.stop_on if r in alerts and all(r in a for a in recent)]
    held = held if len(recent) >= cfg.patience - 1 else []
    metrics = dict(metrics)
    metrics["pgrpo/verdict"] = float(VERDICTS.index(verdict))
    for rule in STOP_RULES:
        metrics[f"pgrpo/alert/{rule}"] = float(rule in alerts)
    metrics["pgrpo/stop"] = float(bool(held))
    reason = f"{held[0]} ({verdict}) held for {cfg.patience} assessment(s)" if held else ""
    return LiveStatus(step, reward, verdict, tuple(alerts), bool(held), reason, metrics)
