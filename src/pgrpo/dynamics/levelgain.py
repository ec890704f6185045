"""The corpus-calibrated forecaster (`forecast(method="level_gain")`, the default).

Measured on real GRPO logs (docs/dynamics.md, bench/forecast_real.py), the model-extrapolated
gain after a cut is unreliable, while a fitted level at the cut is a much less noisy "recent
level" than a last-window mean. So the forecast is

    R(t) = L + gamma * (f(t) - L),     L = f(cut)

where f is a robust (soft_l1) fit of the exponential law with the lr schedule as its clock
(`exponential_lr`; the plain exponential when the lr is constant or unknown), and gamma, the
share of the fitted further gain that real runs deliver, is a prior learned from the corpus
(validated leave-one-repository-out). The band of the future mean is band_scale * S, S^2 =
s^2 infl / w + (f_mean - L)^2: the noise of the level (residual variance s^2 inflated for lag-1
autocorrelation, over a window of w = max(5, n / 10) points) plus the size of the extrapolated
gain; band_scale is the corpus' split-conformal 90% quantile of |error| / S (held-out
repositories' coverage is measured, not assumed). Optional: a prior on the curve's timescale
(`ForecastPrior.log_tau_ratio`, centred by `timescale_centre`) and per-step noise weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.stats import norm

from pgrpo.dynamics.curves import lr_time
from pgrpo.dynamics.fit import FitResult, fit_model, make_context


@dataclass(frozen=True)
class ForecastPrior:
    """gain_fraction: gamma in [0, 1]; band_scale: multiplier of S for a 90% band of the mean;
    loss: the fit's least_squares loss; log_tau_ratio: centre of the timescale prior,
    log(tau / clock time of the whole run) (None: no timescale prior), tau_spread: its relative
    sd. metrics: how it was derived (runs, repos, command)."""

    gain_fraction: float
    band_scale: float
    loss: str = "soft_l1"
    log_tau_ratio: float | None = None
    tau_spread: float = 1.0
    metrics: dict[str, float | str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 <= self.gain_fraction <= 1.0:
            raise ValueError(f"gain_fraction must be in [0, 1], got {self.gain_fraction!r}")
        if not self.band_scale > 0:
            raise ValueError(f"band_scale must be > 0, got {self.band_scale!r}")
        if not self.tau_spread > 0:
            raise ValueError(f"tau_spread must be > 0, got {self.tau_spread!r}")


# Derived from all 33 runs / 13 repositories of the real-curve corpus at cut 0.5 by
#   python bench/forecast_real.py --derive-prior        (2026-12-01: 0.2, 3.554)
# (docs/dynamics.md gives the leave-one-repository-out figures; the data are not copied here).
CORPUS_PRIOR = ForecastPrior(
    gain_fraction=0.2,
    band_scale=3.55,
    metrics={"source": "bench/forecast_real.py --derive-prior", "runs": 33, "repos": 13},
)


def level_gain(
    step: np.ndarray,
    reward: np.ndarray,
    future: np.ndarray,
    fit_kw: dict,
    *,
    model: str | None = None,
    prior: ForecastPrior = CORPUS_PRIOR,
):
    """Forecast from the prefix step, reward: [n] at future: [m]; fit_kw: `fit_curve` keywords
    (lr, lr_step, clock, ...). model: the curve (default: exponential_lr when the lr varies,
    else exponential). Returns (fit, predicted [m], var_step [m], var_mean, metrics); var_mean
    is that of a normal whose 90% interval is the calibrated band.
    """
    name = model or _curve(fit_kw)
    ctx = _context(step, fit_kw)
    if prior.log_tau_ratio is not None:
        span = float(step[-1] - step[0])
        ratio = float(future[-1] - step[0]) / span if span > 0 else 1.0
        ctx = replace(ctx, metrics={**ctx.metrics, "tau_prior_log_ratio": prior.log_tau_ratio,
                                    "tau_prior_spread": prior.tau_spread,
                                    "horizon_ratio": max(ratio, 1.0)})  # fmt: skip
    fit = fit_model(name, step, reward, ctx, loss=prior.loss, weights=fit_kw.get("weights"))
    path = fit.predict(future)
    lvl = float(fit.fitted[-1])
    gain = float(np.mean(path)) - lvl
    rho = min(max(fit.residual_autocorr, 0.0), 0.99)
    infl = (1.0 + rho) / (1.0 - rho)
    w = max(5, int(round(0.1 * reward.size)))
    s2 = fit.residual_std**2 * infl
    scale = math.sqrt(s2 / w + gain * gain)
    g = prior.gain_fraction
    pred = lvl + g * (path - lvl)
    half90 = prior.band_scale * scale
    sd_mean = half90 / float(norm.ppf(0.95))
    var_mean = sd_mean * sd_mean
    var_step = np.full(future.size, var_mean + fit.residual_std**2)
    metrics = {
        "level_at_cut": lvl,
        "gain_model": gain,
        "gain_fraction": g,
        "band_scale": prior.band_scale,
        "band_unit": scale,
        "model_mean": float(np.mean(path)),
        "weight_model": g,
        "autocorr_inflation": infl,
    }
    return fit, pred, var_step, var_mean, metrics


def _curve(fit_kw: dict) -> str:
    """exponential_lr when the lr varies (the schedule is the clock), else exponential."""
    lr = fit_kw.get("lr")
    ok = None if lr is None else np.asarray(lr, dtype=float)
    ok = None if ok is None else ok[np.isfinite(ok)]
    varies = ok is not None and ok.size > 1 and bool(np.ptp(ok) > 1e-6 * np.max(np.abs(ok)))
    return "exponential_lr" if varies else "exponential"


def _context(step: np.ndarray, fit_kw: dict):
    keys = ("lr", "lr_step", "beta1", "refresh_interval", "optimizer", "clock")
    return make_context(step, **{k: fit_kw[k] for k in keys if k in fit_kw})


def log_tau_ratio(step: np.ndarray, reward: np.ndarray, fit_kw: dict) -> float:
    """log(tau / clock time of the run) of the forecaster's curve fitted to a whole run (no
    timescale prior): the quantity whose corpus median centres the timescale prior. step,
    reward: [n]; fit_kw: as for `level_gain`."""
    name = _curve(fit_kw)
    ctx = _context(step, fit_kw)
    fit: FitResult = fit_model(name, step, reward, ctx, loss=CORPUS_PRIOR.loss)
    total = float(step[-1] - step[0]) * ctx.clock  # optimizer steps
    clock = total if name == "exponential" else float(lr_time(np.array([total]), ctx)[0])
    return math.log(max(float(fit.metrics["tau"]), 1e-12) / max(clock, 1e-12))


GAIN_GRID = np.round(np.linspace(0.0, 1.0, 21), 2)


def derive_prior(
    level: np.ndarray,
    model_mean: np.ndarray,
    band_unit: np.ndarray,
    observed: np.ndarray,
    std: np.ndarray,
    *,
    coverage: float = 0.9,
    cap: float = 2.0,
    loss: str = "soft_l1",
    log_tau_ratio: float | None = None,
) -> ForecastPrior:
    """The prior from forecasts of real runs (one entry per run: [r] arrays of the fitted
    level at the cut, the fitted curve's future mean, S, the observed future mean and the run's
    reward std). gain_fraction minimises the mean of min(|error| / std, cap) over GAIN_GRID
    (capped so that one wild run does not decide it); band_scale is the split-conformal
    quantile of |error| / S at that gain fraction: the ceil((r + 1) coverage) / r empirical
    quantile, so a new run is covered with probability >= coverage if runs are exchangeable.
    log_tau_ratio: the timescale prior's centre the forecasts were made with (kept in the prior;
    `timescale_centre` derives it)."""
    level, model_mean, observed = (np.asarray(a, float) for a in (level, model_mean, observed))
    band_unit, std = np.asarray(band_unit, float), np.asarray(std, float)
    if level.size < 3:
        raise ValueError(f"need at least 3 runs to derive a forecast prior, got {level.size}")
    std = np.where(std > 0, std, 1.0)

    def err(g: float) -> np.ndarray:
        return np.abs(level + g * (model_mean - level) - observed)

    obj = [float(np.mean(np.minimum(err(g) / std, cap))) for g in GAIN_GRID]
    g = float(GAIN_GRID[int(np.argmin(obj))])
    ok = band_unit > 0
    ratio = err(g)[ok] / band_unit[ok]
    rank = min(1.0, math.ceil((ratio.size + 1) * coverage) / max(ratio.size, 1))
    q = float(np.quantile(ratio, rank, method="higher")) if ratio.size else 1.0
    return ForecastPrior(g, max(q, 1e-6), loss, log_tau_ratio,
                         metrics={"runs": int(level.size), "objective": min(obj)})  # fmt: skip


def timescale_centre(log_ratios: np.ndarray) -> float:
    """Centre of the timescale prior: the median of whole-run `log_tau_ratio`s ([r])."""
    r = np.asarray(log_ratios, dtype=float)
    r = r[np.isfinite(r)]
    if r.size < 3:
        raise ValueError(f"need at least 3 runs to centre the timescale prior, got {r.size}")
    return float(np.median(r))
