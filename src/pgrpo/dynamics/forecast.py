"""Forecasting a reward curve: fit a prefix, predict the rest with an honest band, and score the
forecast against the naive baselines (last-window mean; the single exponential).

Five methods behind `FORECAST_METHODS`: `consensus` (the default; `consensus`: the median of
level_gain, level_gain with a logistic curve, a damped local trend and a recent level, since
2026-12-05), `consensus3` (the median of the first three, the default from held-back round 3
to 2026-12-05), `ensemble_mean` (the mean of those three; pre-registered against the median
for held-back round 4, bench/holdout4/README.md), `level_gain` (`levelgain`: the fitted level at
the cut plus a corpus-learned share of the fitted further gain, band calibrated on real runs;
the default before) and `rom_blend`.
rom_blend's band = model variance (delta method: J Sigma J^T with the fit's parameter
covariance) plus the observed residual noise, both inflated by (1 + rho) / (1 - rho) for lag-1
residual autocorrelation rho > 0, plus a structural term for model misspecification measured by
a backtest inside the prefix (fit its first 60%, forecast the rest, keep the squared error the
band did not explain); the forecast blends the model with the last-window mean by inverse
variance (`_combine`). Measured errors and coverage: docs/dynamics.md
(bench/forecast_real.py on real runs, bench/fit.py on synthetic ones).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtri

from pgrpo._registry import Registry
from pgrpo.core.rewardrange import range_holding
from pgrpo.dynamics.fit import fit_curve
from pgrpo.dynamics.fitresult import FitResult
from pgrpo.dynamics.levelgain import CORPUS_PRIOR, ForecastPrior, level_gain
from pgrpo.dynamics.optimizers import DEFAULT_OPTIMIZER


@dataclass(frozen=True)
class Forecast:
    """A forecast from the first part of a curve.

    future_step, predicted, band_lo, band_hi: [m] (per-step band for one new observation);
    predicted_mean / mean_band: the mean over the future steps and its band; observed_mean: the
    data's mean after the cut (nan when the log ends at the cut); baselines: name -> predicted
    mean (last_window_mean; last_10_mean, the quality bar's; exponential).
    """

    cut_step: float
    future_step: np.ndarray
    predicted: np.ndarray
    band_lo: np.ndarray
    band_hi: np.ndarray
    predicted_mean: float
    mean_band: tuple[float, float]
    observed_mean: float
    level: float
    fit: FitResult
    baselines: dict[str, float]
    metrics: dict[str, float] = field(default_factory=dict)


DEFAULT_METHOD = "consensus"
"""`forecast`'s method unless told (level_gain until held-back round 3: bench/holdout3/)."""


@dataclass(frozen=True)
class ForecastSkill:
    """How a forecast method did on real runs that no choice of it saw: `runs` from
    `repositories`, cut at `cut` of each; the median over runs of |predicted - observed mean
    after the cut| / std of the whole run (`median_error`; the last-10 mean's:
    `last10_median_error`), the runs on which it beat the last-10 mean (`wins`), and those
    whose observed mean its 90% band held (`band_covered`). `source`: the results it is read
    from (tests/test_dynamics_forecast_skill.py checks it against them)."""

    method: str
    runs: int
    repositories: int
    cut: float
    median_error: float
    last10_median_error: float
    wins: int
    band_covered: int
    source: str

    def applies(self, fc: Forecast) -> bool:
        """Measured for this forecast: its method, a cut within 0.1 of `cut` (as a share of the
        points), at least 10 points before it (the last-10 mean it was compared with)."""
        before, after = np.asarray(fc.fit.reward).size, np.asarray(fc.future_step).size
        share = before / max(before + after, 1)
        return (
            fc.metrics.get("method") == self.method
            and abs(share - self.cut) <= 0.1
            and (before >= 10)
        )

    def sentence(self) -> str:
        # two-sided sign test of the wins against half (exact binomial). Nominal: the same count
        # has been re-tested after every held-back round and crossed 5% both ways (a review,
        # session 35), so the words give the p and do not call it significant
        tail = sum(math.comb(self.runs, i) for i in range(max(self.wins, self.runs - self.wins),
                                                          self.runs + 1))  # fmt: skip
        p = min(1.0, 2.0 * tail / 2.0**self.runs)
        return (
            f"How far to trust it: on {self.runs} real runs ({self.repositories} repositories) "
            f"held back after this forecaster was chosen, cut at {self.cut:.0%} of each, its "
            f"median error was {self.median_error:.2f} of the run's reward std (the mean of the "
            f"last 10 points before the cut: {self.last10_median_error:.2f}); it beat that mean "
            f"on {self.wins} of {self.runs} ({self.wins / self.runs:.0%}; a two-sided sign test "
            f"against half: p {p:.2g}, nominal, as it is recomputed after each held-back round), "
            f"and its 90% band held the "
            f"observed mean on {self.band_covered} (docs/dynamics.md)."
        )


MEASURED_SKILL: dict[str, ForecastSkill] = {
    "consensus": ForecastSkill(
        method="consensus",
        runs=192,
        repositories=107,
        cut=0.5,
        median_error=0.274,
        last10_median_error=0.362,
        wins=111,
        band_covered=178,
        source="bench/results/forecast_holdout6_23.json: held-back rounds 8-23, the runs "
        "collected after the fourth member was chosen on 210 runs (2026-12-06; rounds 8-22, 182 "
        "runs: 0.274, 103 wins, until round 23; rounds 8-21, 170 "
        "runs: 0.260, 99 wins, until round 22; rounds 8-20, 157 "
        "runs: 0.266, 89 wins, until round 21; rounds 8-19, 145 runs: 0.266, 83 wins, until "
        "round 20; rounds 8-18, 127 runs: 0.274, 74 wins, until round 19; rounds 8-16, 108 runs: "
        "0.270, 65 wins, until round 17; rounds 8-15, 93 runs: 0.274, 55 wins, until round 16; "
        "rounds 8-14, 82 runs: 0.291, 47 wins, until round 15; rounds 8-13, 69 runs: 0.287, 40 "
        "wins, until round 14; rounds 8-12, 49 runs: 0.266, 31 wins, until round 13)",
    ),
}
"""Out-of-sample skill of the methods measured so (the default); what `pgrpo fit` and the
report say beside a forecast it `applies` to."""


def measured_skill(fc: Forecast) -> ForecastSkill | None:
    """The measured skill that applies to this forecast (`ForecastSkill.applies`), or None."""
    skill = MEASURED_SKILL.get(str(getattr(fc, "metrics", {}).get("method")))
    return skill if skill is not None and skill.applies(fc) else None


MIN_FORECAST_POINTS = 6
"""The fewest points before the cut a forecast fits (the fits' own minimum)."""


def cut_index(step: np.ndarray, cut: float) -> int:
    """The number of points up to the cut: step [n]; cut in (0, 1): a fraction of the points;
    otherwise a step (points with step <= cut)."""
    if 0.0 < cut < 1.0:
        return int(round(cut * step.size))
    return int(np.searchsorted(step, cut, side="right"))


def last_window_mean(reward: np.ndarray, window_fraction: float = 0.1, min_window: int = 5):
    """Mean of the last max(min_window, window_fraction * n) points: the naive forecast."""
    w = max(min_window, int(round(window_fraction * reward.size)))
    return float(np.mean(reward[-w:]))


def forecast(
    step: np.ndarray,
    reward: np.ndarray,
    cut: float = 0.5,
    *,
    method: str = DEFAULT_METHOD,
    model: str | None = None,
    horizon: np.ndarray | None = None,
    lr: np.ndarray | None = None,
    lr_step: np.ndarray | None = None,
    beta1: float | None = None,
    refresh_interval: int | None = 1,
    level: float = 0.9,
    loss: str = "linear",
    combine: bool = True,
    clock: float = 1.0,
    optimizer: str = DEFAULT_OPTIMIZER,
    prior: ForecastPrior = CORPUS_PRIOR,
    weights: np.ndarray | None = None,
    reward_range: tuple[float, float] | None = None,
) -> Forecast:
    """Fit the points up to `cut` and predict the rest.

    step, reward: [n] (the whole log; only the prefix is used for fitting). cut: a fraction of
    the points in (0, 1), or a step. method: a FORECAST_METHODS name: `consensus` (default; the
    median of level_gain with `model`, level_gain with the logistic curve, a damped local
    trend and a recent level, `pgrpo.dynamics.consensus`), `consensus3` (the median of the
    first three), `ensemble_mean` (the mean of those three),
    `level_gain` (the corpus-calibrated forecaster of `levelgain`, with `prior`) or `rom_blend`
    (the ROM fit of `model`, default "rom", blended with the last-window mean when `combine`;
    `loss` is its fit's loss). horizon: the future
    steps ([m], default: the log's steps after the cut; each finite and after the cut step, or
    ValueError). lr / lr_step: the lr schedule, which
    may cover the future (the run's config knows it); beyond it the last lr is held. clock:
    optimizer steps per unit of step (`fit_curve`). weights: [n] inverse noise variances of the
    points (`runfit.noise_weights` from the logged reward_std and G, B), used by level_gain's
    fit of the prefix.
    reward_range: the reward's known (lo, hi) bounds (the task's, `task.reward_range` of a
    pgrpo run): the fits keep their levels inside, and the forecast and its bands are clipped
    to it (a success rate is not forecast above 1); ignored when the points before the cut
    leave it (`rewardrange.range_holding`).
    metrics["model_mean"] is the mean over the horizon of the fitted curve's own path (level_gain,
    rom_blend), of the member the consensus took (`consensus`) or of the members' mean
    (`ensemble_mean`).
    """
    step = np.array(step, dtype=float)
    reward = np.array(reward, dtype=float)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    run = FORECAST_METHODS.get(method)
    i = cut_index(step, cut)
    if i < MIN_FORECAST_POINTS:
        raise ValueError(
            f"the cut leaves {i} points to fit; move it later (need >= {MIN_FORECAST_POINTS})"
        )
    reward_range = range_holding(reward[:i], reward_range)  # a range the prefix leaves: none
    future = np.array(horizon, dtype=float) if horizon is not None else step[i:]
    if future.size == 0:
        raise ValueError("nothing to forecast: the cut is at the end of the log; pass horizon")
    if horizon is not None and not (np.all(np.isfinite(future)) and future.min() > step[i - 1]):
        raise ValueError(
            f"horizon steps must be finite and after the cut (step {step[i - 1]:g}); got "
            f"{future.min():g}..{future.max():g}"
        )
    if lr is not None and lr_step is None:
        lr_step = step
    kw = dict(lr=lr, lr_step=lr_step, beta1=beta1, refresh_interval=refresh_interval, loss=loss,
              clock=clock, optimizer=optimizer, reward_range=reward_range)  # fmt: skip
    if weights is not None and np.shape(weights) != step.shape:
        raise ValueError(
            f"weights must have one entry per step ({step.size}), got {np.shape(weights)}"
        )
    w = None if weights is None else np.asarray(weights, dtype=float)[:i]
    opts = {"model": model, "combine": combine, "prior": prior, "weights": w}
    fit, pred, var_step, var_mean, var_parts = run(step[:i], reward[:i], future, kw, **opts)
    z = float(ndtri(0.5 + level / 2.0))  # the normal quantile (scipy.stats.norm.ppf's)
    sd, half = np.sqrt(var_step), z * math.sqrt(var_mean)
    lo, hi = reward_range if reward_range is not None else (-math.inf, math.inf)
    if np.ptp(reward[:i]) == 0:  # no spread seen before the cut: the band is unknown
        var_parts = {**var_parts, "constant_prefix": 1.0}  # (`informative` says so)
        if reward_range is not None:  # all the range allows, not the zero width of no data
            sd, half = np.full_like(sd, math.inf), math.inf
    pred = np.clip(pred, lo, hi)
    mean = float(np.mean(pred))
    observed = reward[i:]
    exp = fit_curve(step[:i], reward[:i], "exponential", loss=loss, reward_range=reward_range)
    baselines = {
        "last_window_mean": last_window_mean(reward[:i]),
        # the naive forecast of the quality bar and of MEASURED_SKILL's wins: the mean of the
        # last 10 points before the cut (the report's backtest sentence names it; a review,
        # session 36, found the fit table offering only last_window_mean, max(5, 10%) points)
        "last_10_mean": float(np.mean(reward[max(0, i - 10) : i])),
        "exponential": float(np.mean(exp.predict(future))),
    }
    return Forecast(
        cut_step=float(step[i - 1]),
        future_step=future,
        predicted=pred,
        band_lo=np.clip(pred - z * sd, lo, hi),
        band_hi=np.clip(pred + z * sd, lo, hi),
        predicted_mean=mean,
        mean_band=(max(mean - half, lo), min(mean + half, hi)),
        observed_mean=float(np.mean(observed)) if horizon is None else math.nan,
        level=level,
        fit=fit,
        baselines=baselines,
        metrics={"method": method, **var_parts},
    )


def _rom_blend(step, reward, future, kw, *, model=None, combine=True, prior=None, weights=None):
    """The ROM's own forecast with its delta-method band and a backtest's structural term,
    blended with the last-window mean by inverse variance (`_combine`) when `combine`."""
    model = model or "rom"
    fit = fit_curve(step, reward, model, **kw)
    struct, bt_metrics = _backtest(step, reward, model, kw, future)
    pred, var_step, var_mean, var_parts = _band(fit, future, struct)
    var_parts.update(bt_metrics)
    if combine:
        lwm = last_window_mean(reward)
        pred, var_step, var_mean, comb = _combine(fit, pred, var_step, var_mean, lwm, reward)
        var_parts.update(comb)
    else:
        var_parts.update({"weight_model": 1.0, "model_mean": float(np.mean(pred))})
    return fit, pred, var_step, var_mean, var_parts


def _level_gain(step, reward, future, kw, *, model=None, combine=True, prior=CORPUS_PRIOR,
                weights=None):  # fmt: skip
    return level_gain(step, reward, future, {**kw, "weights": weights}, model=model, prior=prior)


def _members(combination: str, members: str):
    """The forecast method that combines the consensus's `members` (a `consensus.MEMBER_SETS`
    name) by `combination` (a `consensus.COMBINATIONS` name)."""

    def run(step, reward, future, kw, *, model=None, combine=True, prior=CORPUS_PRIOR,
            weights=None):  # fmt: skip
        from pgrpo.dynamics.consensus import consensus  # imports this module (last_window_mean)

        return consensus(step, reward, future, {**kw, "weights": weights}, model=model,
                         prior=prior, combination=combination, members=members)  # fmt: skip

    return run


FORECAST_METHODS: Registry = Registry("forecast method")
FORECAST_METHODS.add("level_gain", _level_gain)
FORECAST_METHODS.add("rom_blend", _rom_blend)
FORECAST_METHODS.add("consensus", _members("median", "four"))
FORECAST_METHODS.add("consensus3", _members("median", "three"))
FORECAST_METHODS.add("ensemble_mean", _members("mean", "three"))


def _backtest(step: np.ndarray, reward: np.ndarray, model: str, kw: dict, future: np.ndarray):
    """Structural (misspecification) variance of the forecast mean, from a backtest inside the
    prefix: fit its first 60%, forecast the mean of the rest, and keep the squared error in excess
    of what the band already explains; scaled linearly to the real horizon. 0 when too short."""
    n = step.size
    j = int(round(BACKTEST_FRACTION * n))
    if j < 8 or n - j < 4:
        return 0.0, {}
    try:
        bt = fit_curve(step[:j], reward[:j], model, **kw)
    except ValueError:
        return 0.0, {}
    fut = step[j:]
    pred, _, _, parts = _band(bt, fut, 0.0)
    err = float(np.mean(pred) - np.mean(reward[j:]))
    explained = parts["var_mean_model"] + parts["var_mean_noise"]
    excess = max(err * err - explained, 0.0) if math.isfinite(explained) else 0.0
    span_bt = max(float(fut[-1] - step[j - 1]), 1.0)
    span = max(float(future[-1] - step[-1]), 1.0)
    metrics = {
        "backtest/error": err,
        "backtest/error_last_window_mean": last_window_mean(reward[:j])
        - float(np.mean(reward[j:])),
        "backtest/explained_var": explained,
    }
    return excess * span / span_bt, metrics


BACKTEST_FRACTION = 0.6


def _band(fit: FitResult, future: np.ndarray, struct: float = 0.0):
    """Model prediction [m], its per-step variance [m] (one new observation), the variance of
    its mean over `future`, and the parts."""
    pred = fit.predict(future)
    rho = max(fit.residual_autocorr, 0.0)
    infl = (1.0 + rho) / (1.0 - rho) if rho < 0.99 else 100.0
    s2 = fit.residual_std**2
    if fit.covariance is not None and fit.varying:
        J = fit.prediction_jacobian(future)
        var_model = np.einsum("ij,jk,ik->i", J, fit.covariance, J) * infl
        g = J.mean(axis=0)
        var_mean_model = float(g @ fit.covariance @ g) * infl
    else:
        var_model = np.full(future.size, math.inf)
        var_mean_model = math.inf
    var_model = np.clip(var_model, 0.0, None)
    var_step = var_model + s2 + struct
    var_mean = max(var_mean_model, 0.0) + s2 * infl / future.size + struct
    parts = {
        "var_mean_structural": struct,
        "var_mean_model": var_mean_model,
        "var_mean_noise": s2 * infl / future.size,
        "autocorr_inflation": infl,
    }
    return pred, var_step, var_mean, parts


def _combine(fit, pred, var_step, var_mean, lwm: float, prefix: np.ndarray):
    """Inverse-variance combination of the model's forecast with the last-window mean.

    The flat forecast (no further change) has variance v_flat = s^2 infl / w (its noise) plus a
    bias: the change the model predicts, delta. Weight w_model = v_flat / (v_model + v_flat):
    when the model is well identified and the backtest finds no misspecification, v_model is
    small and the model dominates; when a curve is outside the model family (structural
    variance large) the forecast leans on the recent level. The band is the variance of the
    two-component mixture: sum_i w_i (v_i + (mu_i - mu)^2), with v_flat + delta^2 for the flat
    forecast (conservative: it covers either forecast being the right one).
    """
    w = max(5, int(round(0.1 * prefix.size)))
    infl = (1.0 + max(fit.residual_autocorr, 0.0)) / (
        1.0 - min(max(fit.residual_autocorr, 0.0), 0.99)
    )
    s2 = fit.residual_std**2
    v_flat = s2 * infl / w
    if not math.isfinite(var_mean):
        wm = 0.0
    else:
        wm = v_flat / (var_mean + v_flat) if var_mean + v_flat > 0 else 1.0
    delta = float(np.mean(pred) - np.mean(fit.fitted[-w:]))
    flat_var = v_flat + delta**2  # the flat forecast misses the change the model predicts
    spread = wm * (1.0 - wm) * (float(np.mean(pred)) - lwm) ** 2  # disagreement of the two
    new_pred = wm * pred + (1.0 - wm) * lwm
    model_var = var_mean if math.isfinite(var_mean) else 0.0
    new_mean_var = wm * model_var + (1.0 - wm) * flat_var + spread
    step_model = np.where(np.isfinite(var_step), var_step, 0.0)
    new_step_var = wm * step_model + (1.0 - wm) * (s2 * infl + flat_var) + spread
    metrics = {"weight_model": wm, "model_mean": float(np.mean(pred)), "var_flat": v_flat,
               "delta_model": delta}  # fmt: skip
    return new_pred, new_step_var, new_mean_var, metrics


@dataclass(frozen=True)
class ForecastEvaluation:
    """Absolute errors of the predicted mean after the cut: model vs the naive baselines."""

    error: float
    baseline_errors: dict[str, float]
    covered: bool
    forecast: Forecast
    metrics: dict[str, float] = field(default_factory=dict)


def informative(fc: Forecast, reward: np.ndarray) -> bool:
    """A forecast worth drawing: its band of the mean is narrower than the run's whole range
    (or, for a reward that never changed, has no width either: "0.3, band [0.3, 0.3]" is no
    band "wider than the range"), unless the points before the cut never moved and the run did
    later: their zero spread is no evidence of the spread to come (a reward at 0 before take-off
    got the band [0, 0]; review, 2026-12-05). reward: [n], the whole run's. The report draws only
    such a forecast, and `pgrpo fit` says of any other that it is not enough evidence."""
    r = np.asarray(reward, dtype=float)
    r = r[np.isfinite(r)]
    lo, hi = fc.mean_band
    if not (r.size and math.isfinite(lo) and math.isfinite(hi)):
        return False
    if getattr(fc, "metrics", {}).get("constant_prefix") and np.ptp(r) > 0:  # no spread seen
        return False
    exact = np.ptp(r) == 0 and hi - lo <= 1e-9 * max(abs(lo), abs(hi))  # rounding only
    return bool(hi - lo < np.ptp(r) or exact)


def uninformative_reason(fc: Forecast) -> str:
    """Why `informative` is False for fc, in words `pgrpo fit` and the report print."""
    if getattr(fc, "metrics", {}).get("constant_prefix"):
        return ("the reward never moved before the cut, so nothing there says how far the rest "
                "will spread")  # fmt: skip
    return "its band is wider than the whole range of the run's reward"


def evaluate_forecast(step: np.ndarray, reward: np.ndarray, cut: float = 0.5, **kwargs):
    """Forecast the mean after `cut` and score it against last-window mean and exponential."""
    fc = forecast(step, reward, cut, **kwargs)
    obs = fc.observed_mean
    errs = {name: abs(v - obs) for name, v in fc.baselines.items()}
    err = abs(fc.predicted_mean - obs)
    covered = fc.mean_band[0] <= obs <= fc.mean_band[1]
    metrics = {"error": err, **{f"error/{k}": v for k, v in errs.items()}}
    return ForecastEvaluation(err, errs, bool(covered), fc, metrics)
