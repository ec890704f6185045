"""The corpus-calibrated forecaster (`forecast(method="level_gain")`, the default).

Measured on real GRPO logs (docs/dynamics.md, bench/forecast_real.py), the model-extrapolated
gain after a cut is unreliable, while a fitted level at the cut is a much less noisy "recent
level" than a last-window mean. So the forecast is

    R(t) = L + gamma * (f(t) - L),     L = f(cut)

where f is a robust (soft_l1) fit of the exponential law with the lr schedule as its clock
(`exponential_lr`; the plain exponential when the lr is constant or unknown) under a prior on
its timescale, tau ~ N(c, c^2), c = exp(log_tau_ratio) x the clock time of the whole run
(prefix + horizon); gamma, the share of the fitted further gain that real runs deliver, and
log_tau_ratio are priors learned from the corpus (`CORPUS_PRIOR`; validated
leave-one-repository-out, nested). The band of the future mean is band_scale * S, S^2 =
s^2 infl / w + (f_mean - L)^2: the noise of the level (residual variance s^2 inflated for lag-1
autocorrelation, over a window of w = max(5, n / 10) points) plus the size of the extrapolated
gain; band_scale is the corpus' split-conformal 90% quantile of |error| / S at the share of the
run seen (held-out repositories' coverage is measured, not assumed). Also here: the
derivations (`derive_prior`, `band_scale`, `timescale_centre`, `repository_weights`) and
stacking weights of candidate forecasts (`stack_weights`; measured, not the default).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.special import ndtri

from pgrpo._registry import Registry
from pgrpo.dynamics.curves import lr_time
from pgrpo.dynamics.fit import fit_model, make_context
from pgrpo.dynamics.fitresult import FitResult


def _level_fit(reward: np.ndarray, fitted: np.ndarray) -> float:
    """No shift: the fitted curve's own level."""
    return 0.0


def _level_mean(reward: np.ndarray, fitted: np.ndarray) -> float:
    """The mean residual of the prefix's last half ([n] each): the shift that makes the
    fitted curve's recent level an unbiased estimate of the recent mean reward."""
    h = reward.size // 2
    return float(np.mean(reward[h:] - fitted[h:]))


LEVELS: Registry = Registry("forecast level")
LEVELS.add("fit", _level_fit)
LEVELS.add("mean", _level_mean)


@dataclass(frozen=True)
class ForecastPrior:
    """gain_fraction: gamma in [0, 1]; band_scale: multiplier of S for a 90% band of the mean;
    loss: the fit's least_squares loss; log_tau_ratio: centre of the timescale prior,
    log(tau / clock time of the whole run) (None: no timescale prior), tau_spread: its relative
    sd; band_scale_by_cut: ((cut fraction, band scale), ...) calibrated at each cut fraction
    (the share of the run seen, n / (n + m)); the nearest one replaces band_scale (empty: use
    band_scale). level: how L is read, a LEVELS name: "fit" (the robust fit's value at the
    cut) or "mean" (the same curve shifted by the mean residual of the prefix's last half:
    a robust loss puts the level near the mode of a skewed reward, and the forecast is of the
    mean). metrics: how it was derived (runs, repos, command)."""

    gain_fraction: float
    band_scale: float
    loss: str = "soft_l1"
    log_tau_ratio: float | None = None
    tau_spread: float = 1.0
    band_scale_by_cut: tuple[tuple[float, float], ...] = ()
    level: str = "fit"
    metrics: dict[str, float | str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        LEVELS.get(self.level)  # an unknown name raises, listing the known ones
        if not 0.0 <= self.gain_fraction <= 1.0:
            raise ValueError(f"gain_fraction must be in [0, 1], got {self.gain_fraction!r}")
        if not self.band_scale > 0:
            raise ValueError(f"band_scale must be > 0, got {self.band_scale!r}")
        if not self.tau_spread > 0:
            raise ValueError(f"tau_spread must be > 0, got {self.tau_spread!r}")
        for pair in self.band_scale_by_cut:
            if len(pair) != 2 or not 0 < pair[0] < 1 or not pair[1] > 0:
                raise ValueError(
                    f"band_scale_by_cut needs (cut fraction in (0, 1), scale > 0) pairs, "
                    f"got {pair!r}"
                )

    def band_scale_at(self, cut_fraction: float) -> float:
        """The band scale calibrated at the cut fraction nearest to `cut_fraction`."""
        if not self.band_scale_by_cut:
            return self.band_scale
        return min(self.band_scale_by_cut, key=lambda p: abs(p[0] - cut_fraction))[1]


# Derived from the 175 real runs of 78 repositories pgrpo has seen (the 33 shared runs and the
# five held-back rounds of bench/holdout*/, rebuilt as their READMEs say) at the cut fractions
# 0.2, 0.3, ..., 0.8 (gamma pooled over them with each repository counted once; the band scale
# at each cut; the timescale prior's centre from whole-run fits) by
#   python bench/forecast_prior.py SHARED DIR1 ... DIR5     (2026-12-04; docs/dynamics.md)
# which also writes the derivation's inputs (bench/results/forecast_prior.json, re-derived by
# tests/test_dynamics_forecast_prior.py) and its leave-one-repository-out check (docs/dynamics.md,
# "The prior from every run seen"). The data are not copied here. The prior learned on the 33
# shared runs alone (shipped 2026-12-01 to 2026-12-04) is bench/forecast_prior.EARLIER_PRIOR.
CORPUS_PRIOR = ForecastPrior(
    gain_fraction=0.3,
    band_scale=3.2277,
    log_tau_ratio=-1.2605,
    band_scale_by_cut=(
        (0.2, 6.6472),
        (0.3, 5.3319),
        (0.4, 3.1180),
        (0.5, 3.2277),
        (0.6, 2.4209),
        (0.7, 1.8338),
        (0.8, 2.0418),
    ),  # fmt: skip
    metrics={"source": "bench/forecast_prior.py", "runs": 175, "repos": 78},
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
    shift = LEVELS.get(prior.level)(np.asarray(reward, dtype=float), fit.fitted)
    path = fit.predict(future) + shift
    lvl = float(fit.fitted[-1]) + shift
    gain = float(np.mean(path)) - lvl
    rho = min(max(fit.residual_autocorr, 0.0), 0.99)
    infl = (1.0 + rho) / (1.0 - rho)
    w = max(5, int(round(0.1 * reward.size)))
    s2 = fit.residual_std**2 * infl
    scale = math.sqrt(s2 / w + gain * gain)
    g = prior.gain_fraction
    pred = lvl + g * (path - lvl)
    q = prior.band_scale_at(step.size / (step.size + future.size))
    half90 = q * scale
    sd_mean = half90 / float(ndtri(0.95))  # the normal 95% quantile (scipy.stats.norm.ppf's)
    var_mean = sd_mean * sd_mean
    var_step = np.full(future.size, var_mean + fit.residual_std**2)
    metrics = {
        "level_at_cut": lvl,
        "level_shift": shift,
        "gain_model": gain,
        "gain_fraction": g,
        "band_scale": q,
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
    """The fit's context. Without the reward range: `forecast` clips the forecast to it, but a
    level curve bounded by it bends too early on a steep rise and puts the level at the cut
    below the data (live forecast 0.83 under a last-5 mean of 0.95, 2026-12-02)."""
    keys = ("lr", "lr_step", "beta1", "refresh_interval", "optimizer", "clock")
    return make_context(step, **{k: fit_kw[k] for k in keys if k in fit_kw})


def log_tau_ratio(
    step: np.ndarray, reward: np.ndarray, fit_kw: dict, loss: str = CORPUS_PRIOR.loss
) -> float:
    """log(tau / clock time of the run) of the forecaster's curve fitted to a whole run (no
    timescale prior): the quantity whose corpus median centres the timescale prior. step,
    reward: [n]; fit_kw: as for `level_gain`; loss: the fit's (the prior's `loss`)."""
    name = _curve(fit_kw)
    ctx = _context(step, fit_kw)
    fit: FitResult = fit_model(name, step, reward, ctx, loss=loss)
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
    weights: np.ndarray | None = None,
    coverage: float = 0.9,
    cap: float = 2.0,
    loss: str = "soft_l1",
    log_tau_ratio: float | None = None,
    level_kind: str = "fit",
) -> ForecastPrior:
    """The prior from forecasts of real runs (one entry per forecast: [r] arrays of the fitted
    level at the cut, the fitted curve's future mean, S, the observed future mean and the run's
    reward std). gain_fraction minimises the `weights`-weighted mean of min(|error| / std, cap)
    over GAIN_GRID (capped so that one wild run does not decide it; weights: [r], default
    equal; `repository_weights` counts each repository once); band_scale is the split-conformal
    quantile of |error| / S at that gain fraction: the ceil((r + 1) coverage) / r empirical
    quantile, so a new run is covered with probability >= coverage if runs are exchangeable.
    log_tau_ratio: the timescale prior's centre the forecasts were made with (kept in the prior;
    `timescale_centre` derives it). level_kind: how `level` and `model_mean` were read (a LEVELS
    name, kept as the prior's `level`: a prior derived from mean-shifted levels must forecast
    with them)."""
    level, model_mean, observed = (np.asarray(a, float) for a in (level, model_mean, observed))
    band_unit, std = np.asarray(band_unit, float), np.asarray(std, float)
    if level.size < 3:
        raise ValueError(f"need at least 3 runs to derive a forecast prior, got {level.size}")
    std = np.where(std > 0, std, 1.0)
    a = np.ones(level.size) if weights is None else np.asarray(weights, float)
    if a.shape != level.shape or not np.all(a >= 0) or not a.sum() > 0:
        raise ValueError(f"weights must be [{level.size}] non-negative, not all 0")

    def err(g: float) -> np.ndarray:
        return np.abs(level + g * (model_mean - level) - observed)

    obj = [float(np.average(np.minimum(err(g) / std, cap), weights=a)) for g in GAIN_GRID]
    g = float(GAIN_GRID[int(np.argmin(obj))])
    q = band_scale(err(g), band_unit, coverage)
    return ForecastPrior(g, q, loss, log_tau_ratio, level=level_kind,
                         metrics={"runs": int(level.size), "objective": min(obj)})  # fmt: skip


def band_scale(error: np.ndarray, band_unit: np.ndarray, coverage: float = 0.9) -> float:
    """Split-conformal band scale: the ceil((r + 1) coverage) / r empirical quantile of
    |error| / S over the r entries with S > 0 (error, band_unit S: [r]); 1 when there are none."""
    error, band_unit = np.abs(np.asarray(error, float)), np.asarray(band_unit, float)
    ok = band_unit > 0
    ratio = error[ok] / band_unit[ok]
    rank = min(1.0, math.ceil((ratio.size + 1) * coverage) / max(ratio.size, 1))
    q = float(np.quantile(ratio, rank, method="higher")) if ratio.size else 1.0
    return max(q, 1e-6)


def repository_weights(groups) -> np.ndarray:
    """Weights [r] that count each group (repository) once: 1 / (its size x number of groups)."""
    keys = [str(g) for g in groups]
    size = {k: keys.count(k) for k in set(keys)}
    return np.array([1.0 / (size[k] * len(size)) for k in keys])


def stack_weights(
    candidates: np.ndarray, observed: np.ndarray, std: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    """Stacking (Wolpert 1992; Breiman 1996): convex weights w [k] of k candidate forecasts that
    minimise the weighted mean absolute scaled error sum_i a_i |sum_j w_j C_ij - y_i| / std_i
    over w >= 0, sum w = 1. candidates: [r, k] forecasts of the observed means y: [r]; std: [r];
    weights a: [r]. A linear programme (HiGHS), so the result is deterministic."""
    from scipy.optimize import linprog

    C, y = np.asarray(candidates, float), np.asarray(observed, float)
    s, a = np.asarray(std, float), np.asarray(weights, float)
    r, k = C.shape
    if r < 3 or y.shape != (r,) or s.shape != (r,) or a.shape != (r,):
        raise ValueError(f"need candidates [r >= 3, k], observed, std, weights [r]; got {C.shape}")
    d = (C - y[:, None]) / np.where(s > 0, s, 1.0)[:, None]  # sum w = 1: the mix's error is d w
    eye = np.eye(r)
    a_eq = np.block([[d, -eye, eye], [np.ones((1, k)), np.zeros((1, 2 * r))]])
    b_eq = np.concatenate([np.zeros(r), [1.0]])
    cost = np.concatenate([np.zeros(k), a, a])
    res = linprog(cost, A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    if not res.success:
        raise ValueError(f"stacking failed: {res.message}")
    w = np.clip(res.x[:k], 0.0, None)
    return w / w.sum()


def timescale_centre(log_ratios: np.ndarray) -> float:
    """Centre of the timescale prior: the median of whole-run `log_tau_ratio`s ([r])."""
    r = np.asarray(log_ratios, dtype=float)
    r = r[np.isfinite(r)]
    if r.size < 3:
        raise ValueError(f"need at least 3 runs to centre the timescale prior, got {r.size}")
    return float(np.median(r))
