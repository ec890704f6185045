"""Fitting reward curves: lmfit's vocabulary (named bounded parameters, guess, a result with
statistics and a text report) on scipy.optimize.least_squares.

`fit_curve(step, reward, model="rom")` fits the single-exponential law as well and starts the rom
from its solution (m = 0 is exactly the exponential), keeping the best point seen, so the rom's
SSE is never above the exponential's. With a varying logged lr it also fits `rom_schedule` (the
exact recursion driven by that lr), and with G and a 0/1 reward scale `rom_starved` (the force
through the groups with a reward spread only), and returns the variant with the lowest AIC whose
SSE is not worse than the exponential's. `fit_model` fits one registered model; the fit's
statistics (covariance, derived metrics) are in `fitstats`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from scipy.optimize import least_squares

from pgrpo.core.rewardrange import range_holding
from pgrpo.dynamics.constrained import (  # also registers rom_fixed
    NoiseRho,
    aicc,  # noqa: F401  (re-exported: it lived here)
    compare_constrained,
)
from pgrpo.dynamics.curves import (
    FIT_MODELS,
    FitContext,
    Parameter,
    level_bounds,
    levels_within,
    mass_bounds,
    profile_levels,
    rate_bounds,
)
from pgrpo.dynamics.fitresult import FitResult
from pgrpo.dynamics.fitstats import _autocorr, _covariance, _derived
from pgrpo.dynamics.inputs import (
    _check_curve,
    _params_to,
    _reward_units,
    _unit_factor,
    make_context,
    noise_scale,
)
from pgrpo.dynamics.optimizers import DEFAULT_OPTIMIZER
from pgrpo.dynamics.starved import MAX_STEPS, starved_range

# --- one model -----------------------------------------------------------------------------------


def fit_model(
    name: str,
    step: np.ndarray,
    reward: np.ndarray,
    context: FitContext | None = None,
    *,
    loss: str = "linear",
    starts: Sequence[dict[str, Parameter]] = (),
    refine: int = 1,
    weights: np.ndarray | None = None,
) -> FitResult:
    """Fit one registered model: score its guess() starts plus `starts`, refine the best
    `refine` of them with least_squares, keep the lowest cost seen (a start itself included, so a
    fit never ends worse than its best start). The levels R_inf, R_0 are profiled out (fitted with
    the rest for a model that gives R(t) itself, `CurveModel.path`).

    loss: least_squares' loss ('linear', 'soft_l1', 'huber', 'cauchy', 'arctan'); robust losses
    use the data's white-noise sd as f_scale. weights: [n] > 0, inverse noise variances of the
    points (relative; e.g. `noise_weights` from the logged reward_std): a weighted fit, whose
    R^2, SSE and AIC are still reported unweighted.
    """
    spec = FIT_MODELS.get(name)
    step, reward = _check_curve(step, reward, min_points=len(spec.param_names) + 2)
    user_ctx = context if context is not None else make_context(step)
    # internal units: reward standardised, steps in units of the median spacing (models whose
    # clock is the optimizer step keep it); reported back in the user's units (`_to_user`)
    ts = 1.0 / user_ctx.clock if spec.physical_time else float(np.median(np.diff(step)))
    loc, scale = _reward_units(reward)
    ctx = replace(user_ctx, step0=0.0, time_scale=1.0, clock=1.0, reward_units=(loc, scale))
    t = (step - user_ctx.step0) / ts
    y = (reward - loc) / scale
    sigma = noise_scale(y)
    sw = _sqrt_weights(weights, y.size)
    priors = spec.priors(t, ctx)
    starts = [_params_to(spec, s, ts, loc, scale, inverse=True) for s in starts]
    all_starts = list(starts) + list(spec.guess(t, y, ctx))
    bounds = range_holding(reward, user_ctx.reward_range)  # ignored when the data leaves it
    if bounds is not None:  # the task's bounds, in internal units
        a, b = sorted((v - loc) / scale for v in bounds)
        all_starts = [levels_within(s, a, b) for s in all_starts]
    template = all_starts[0]
    varying = tuple(n for n in spec.param_names if template[n].vary)

    prior_names = [n for n in priors if n in varying]
    levels = ("R_inf", "R_0")
    # variable projection: the levels enter linearly and are solved for inside the residual
    # (by ordinary least squares, so only with the linear loss)
    project = loss == "linear" and spec.path is None and all(n in varying for n in levels)
    nonlin = tuple(n for n in varying if not (project and n in levels))
    lb = np.array([template[n].min for n in nonlin])
    ub = np.array([template[n].max for n in nonlin])
    lvl_bounds = (template["R_inf"].min, template["R_inf"].max)

    def unpack(x: np.ndarray, start: dict[str, Parameter]) -> tuple[dict[str, float], np.ndarray]:
        """The parameter values at x and the curve they give: [n]."""
        vals = {n: p.value for n, p in start.items()}
        vals.update(zip(nonlin, (float(v) for v in x), strict=True))
        if spec.path is not None:  # not linear in the levels: R(t) itself
            curve = spec.path(t, vals, ctx)
            return vals, np.where(np.isfinite(curve), curve, 1e6)
        phi = spec.basis(t, vals, ctx)
        phi = np.where(np.isfinite(phi), phi, 1e6)
        if project:
            r_inf, r_0, _ = profile_levels(phi[None, :], y, lvl_bounds, weights=sw)
            vals["R_inf"], vals["R_0"] = float(r_inf[0]), float(r_0[0])
        return vals, vals["R_inf"] + (vals["R_0"] - vals["R_inf"]) * phi

    def residuals(x: np.ndarray, start: dict[str, Parameter]) -> np.ndarray:
        vals, curve = unpack(x, start)
        r = curve - y
        if sw is not None:
            r = r * sw
        if not prior_names:
            return r
        extra = np.array([sigma * (vals[n] - priors[n][0]) / priors[n][1] for n in prior_names])
        return np.concatenate((r, extra))

    scored = []
    for start in all_starts:
        x0 = np.clip(np.array([start[n].value for n in nonlin]), lb, ub)
        scored.append((_cost(residuals(x0, start), loss, sigma), x0, start))
    scored.sort(key=lambda item: item[0])
    x, start, success, message = _refine(residuals, scored[: refine if nonlin else 0],
                                         scored[0], (lb, ub), loss, sigma)  # fmt: skip
    vals, _ = unpack(x, start)
    inner = _build_result(spec.name, t, y, ctx, vals, start, varying, priors, sigma, success,
                          message, sw)  # fmt: skip
    result = _to_user(inner, spec, step, reward, replace(user_ctx, time_scale=ts), loc, scale)
    return _undefined_if_constant(result)


CONSTANT_REWARD = "the reward never changed: nothing to fit"
"""metrics["r2_undefined"] of a fit to a curve without variance (R^2 = 0 / 0 is undefined)."""
CONSTANT_AIC = (
    "the reward never changed: every model fits it exactly (zero residual variance), so AIC "
    "and BIC, and any comparison by them, are not identified"
)
"""metrics["aic_undefined"] of a fit to a curve without variance (log 0 is undefined)."""
CONSTANT_PARAMS = (
    "only the levels are identified (both are the reward): any rate, inertia, midpoint or start "
    "velocity draws the same flat line, so the other parameters are neither marked at a bound "
    "nor given a stderr"
)
"""metrics["params_undefined"] of a fit to a curve without variance: said once, not per
parameter (`FitResult.at_bound` and `unidentified` are empty there)."""


def _undefined_if_constant(result: FitResult) -> FitResult:
    """A curve without variance: R^2, AIC and BIC NaN (undefined, not 1 or the -2.8e4 of a
    log(1e-300) floor), no intervals (the covariance of an exact fit to a constant is 0 / 0
    too); metrics["r2_undefined"], metrics["aic_undefined"] and metrics["params_undefined"]
    say why."""
    if np.ptp(result.reward) > 0:
        return result
    params = {n: replace(p, stderr=None) for n, p in result.params.items()}
    metrics = {**result.metrics, "r2_undefined": CONSTANT_REWARD, "aic_undefined": CONSTANT_AIC,
               "params_undefined": CONSTANT_PARAMS}  # fmt: skip
    return replace(result, r2=math.nan, aic=math.nan, bic=math.nan, params=params,
                   covariance=None, metrics=metrics)  # fmt: skip


def _to_user(inner: FitResult, spec, step, reward, ctx: FitContext, loc, scale) -> FitResult:
    """A fit in internal units -> the same fit in the user's step and reward units."""
    ts = ctx.time_scale
    params = _params_to(spec, inner.params, ts, loc, scale)
    cov = inner.covariance
    if cov is not None:
        d = np.array([_unit_factor(spec, n, ts, scale) for n in inner.varying])
        cov = cov * np.outer(d, d)
    n, p = reward.size, len(inner.varying)
    sse = inner.sse * scale * scale
    ll = n * math.log(max(sse, 1e-300) / n)
    vals = {nm: q.value for nm, q in params.items()}
    return replace(
        inner, params=params, step=step, reward=reward, fitted=inner.fitted * scale + loc,
        context=ctx, covariance=cov, sse=sse, aic=ll + 2 * p, bic=ll + p * math.log(n),
        residual_std=inner.residual_std * abs(scale), metrics=_derived(inner.model, vals, ctx),
    )  # fmt: skip


def _refine(residuals, todo, first, bounds, loss: str, sigma: float):
    """least_squares from each (cost, x0, start) in `todo`; the lowest cost seen wins, the best
    starting point `first` included. Returns (x, start, success, message)."""
    best = (*first, True, "starting point kept")
    for _, x0, start in todo:
        try:
            res = least_squares(
                residuals,
                x0,
                bounds=bounds,
                loss=loss,
                f_scale=sigma,
                x_scale="jac",
                args=(start,),
                max_nfev=100 * (x0.size + 1),
                ftol=1e-6,
                xtol=1e-6,
            )
        except ValueError:  # e.g. a degenerate start the solver rejects: keep what we have
            continue
        cost = _cost(res.fun, loss, sigma)
        if cost < best[0]:
            best = (cost, res.x, start, bool(res.success), str(res.message))
    return best[1:]


def _cost(r: np.ndarray, loss: str, f_scale: float) -> float:
    z = (r / f_scale) ** 2
    rho = {
        "linear": z,
        "soft_l1": 2 * ((1 + z) ** 0.5 - 1),
        "huber": np.where(z <= 1, z, 2 * z**0.5 - 1),
        "cauchy": np.log1p(z),
        "arctan": np.arctan(z),
    }.get(loss)
    if rho is None:
        raise ValueError(f"unknown loss {loss!r}; use linear, soft_l1, huber, cauchy or arctan")
    return float(0.5 * f_scale**2 * np.sum(rho))


def _sqrt_weights(weights: np.ndarray | None, n: int) -> np.ndarray | None:
    """sqrt of the weights normalised to mean 1: [n] (None: unweighted)."""
    if weights is None:
        return None
    w = np.asarray(weights, dtype=float)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError(f"weights must be {n} finite positive numbers (one per point)")
    return np.sqrt(w / w.mean())


def _build_result(name, step, y, ctx, vals, start, varying, priors, sigma, success, message,
                  sw=None):  # fmt: skip
    spec = FIT_MODELS.get(name)
    t = step - ctx.step0
    fitted = spec.func(t, vals, ctx)
    resid = y - fitted
    n, p = y.size, len(varying)
    sse = float(resid @ resid)
    sst = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - sse / sst if sst > 0 else math.nan  # no variance: undefined
    ll = n * math.log(max(sse, 1e-300) / n)
    clip = {nm: float(np.clip(vals[nm], p0.min, p0.max)) for nm, p0 in start.items()}  # rounding
    params = {nm: replace(p0, value=clip[nm], stderr=None) for nm, p0 in start.items()}
    proto = FitResult(
        name,
        params,
        varying,
        step,
        y,
        fitted,
        ctx,
        None,
        r2,
        sse,
        ll + 2 * p,
        ll + p * math.log(n),
        math.sqrt(sse / max(n - p, 1)),
        _autocorr(resid),
        success,
        message,
    )
    cov = _covariance(proto, priors, sigma, sw)
    if cov is not None:
        se = np.sqrt(np.clip(np.diag(cov), 0, None))
        for nm, s in zip(varying, se, strict=True):
            params[nm] = replace(params[nm], stderr=float(s))
    return replace(proto, params=params, covariance=cov, metrics=_derived(name, vals, ctx))


# --- the public entry point ---------------------------------------------------------------


def fit_curve(
    step: np.ndarray,
    reward: np.ndarray,
    model: str = "rom",
    *,
    lr: np.ndarray | None = None,
    lr_step: np.ndarray | None = None,
    beta1: float | None = None,
    refresh_interval: int | None = 1,
    loss: str = "linear",
    optimizer: str = DEFAULT_OPTIMIZER,
    clock: float = 1.0,
    weights: np.ndarray | None = None,
    reward_range: tuple[float, float] | None = None,
    group_size: float | None = None,
    noise_rho: NoiseRho | None = None,
) -> FitResult:
    """Fit `model` (a FIT_MODELS name) to a reward curve: step, reward: [n] -> FitResult.

    params are in the units of `step` and `reward`; metrics tau, kappa, m are per optimizer step
    (`clock` optimizer steps per unit of step; a log's fits go through `runfit.fit_run`).

    For model="rom" (the free fit: mass and damping free): also fits the exponential and starts
    from its solution (so SSE_rom <= SSE_exponential); with a varying lr schedule it also fits
    the exact recursion (`rom_schedule`, m free) and keeps it when SSE <= SSE_exponential and
    its AIC is lower. With the group size G and a 0/1 scale for the reward (`reward_range`, or
    rewards that all lie in [0, 1]) it also fits `rom_starved` (the force through the groups
    with a reward spread only) and returns it when its SSE is not worse than the exponential's
    and its AIC is lower than the others'. When lr and beta1 are known it also fits `rom_fixed`
    (m, c from the optimizer, `optimizer` names the reduction) and puts its comparison with the
    free linear rom (the same force law) in metrics (`compare_constrained`). Models with an
    optimizer-step clock (rom_schedule, rom_starved, rom_fixed) need `step` in optimizer steps;
    the others are invariant to the units of step and reward.
    reward_range: the reward's known (lo, hi) bounds (a task's); R_0 and R_inf stay inside.
    group_size: G, rollouts per prompt (rom_starved; None: unknown, not fitted).
    noise_rho: the rho the closed-form test shrinks its sample by (`compare_constrained`; None:
    the free fit's residual point estimate).
    """
    step, reward = _check_curve(step, reward, min_points=6)
    ctx = make_context(step, lr=lr, lr_step=lr_step, beta1=beta1, clock=clock,
                       refresh_interval=refresh_interval, optimizer=optimizer,
                       reward_range=reward_range, group_size=group_size)  # fmt: skip
    w = {"loss": loss, "weights": weights}
    if model != "rom":
        if model == "rom_starved":  # its 0/1 scale: the stated range, or [0, 1] when it holds
            ctx = replace(ctx, reward_range=starved_range(reward, ctx.reward_range))
        return fit_model(model, step, reward, ctx, **w)
    exp = fit_model("exponential", step, reward, ctx, **w)
    linear = _fit_rom(step, reward, ctx, exp, w)
    best = _with_starved(linear, step, reward, ctx, exp, w)
    if ctx.lr is None or ctx.beta1 is None or "r2_undefined" in best.metrics:
        return best  # nothing to compare: no lr / beta1, or a reward that never changed
    fixed = fit_model("rom_fixed", step, reward, ctx, **w)
    compared = compare_constrained(linear, fixed, noise_rho=noise_rho)
    return replace(best, metrics={**best.metrics, **compared}, constrained=fixed)


def _fit_rom(step, reward, ctx: FitContext, exp: FitResult, w: dict) -> FitResult:
    t = step - ctx.step0
    ts = float(np.median(np.diff(step)))
    k_lo, k_hi = rate_bounds(t / ts)
    lo, hi = level_bounds(reward)
    from_exp = {
        "R_inf": Parameter("R_inf", float(np.clip(exp.values["R_inf"], lo, hi)), lo, hi),
        "R_0": Parameter("R_0", float(np.clip(exp.values["R_0"], lo, hi)), lo, hi),
        "k": Parameter("k", float(np.clip(ts / exp.values["tau"], k_lo, k_hi)) / ts,
                       k_lo / ts, k_hi / ts),
        "m": Parameter("m", 0.0, *(ts * b for b in mass_bounds(t / ts))),
    }  # fmt: skip
    best = fit_model("rom", step, reward, ctx, starts=[from_exp], **w)
    best = _with_variant(best, "constant_lr", exp)
    if ctx.lr_varies:  # the free fit: m free even when beta1 is known (rom_fixed uses it)
        free_ctx = replace(ctx, beta1=None)
        sched = _with_variant(
            fit_model("rom_schedule", step, reward, free_ctx, **w), "schedule", exp
        )
        if sched.sse <= exp.sse * (1 + 1e-12) and sched.aic < best.aic:
            best = replace(sched, context=replace(sched.context, beta1=ctx.beta1))
    return best


def _with_starved(linear: FitResult, step, reward, ctx: FitContext, exp: FitResult,
                  w: dict) -> FitResult:  # fmt: skip
    """`rom_starved` in place of the linear rom when G and a 0/1 scale are known, the run is
    within `starved.MAX_STEPS`, its SSE is not worse than the exponential's and its AIC is
    lower than the linear rom's (the same four parameters: a lower SSE). metrics of the linear
    fit kept beside it: r2_linear, aic_linear."""
    scale = starved_range(reward, ctx.reward_range)
    span = float(step[-1] - step[0]) * ctx.clock
    unknown = ctx.group_size is None or scale is None
    if unknown or span > MAX_STEPS or "r2_undefined" in linear.metrics:
        return linear
    sctx = replace(ctx, beta1=None, reward_range=scale)  # the free fit: m free
    fit = _with_variant(fit_model("rom_starved", step, reward, sctx, refine=3, **w),
                        "starved", exp)  # fmt: skip
    if not (fit.sse <= exp.sse * (1 + 1e-12) and fit.aic < linear.aic):
        return linear
    extra = {"r2_linear": linear.r2, "aic_linear": linear.aic, "group_size": float(ctx.group_size)}
    return replace(fit, context=replace(fit.context, beta1=ctx.beta1),
                   metrics={**fit.metrics, **extra})  # fmt: skip


def _with_variant(result: FitResult, variant: str, exp: FitResult) -> FitResult:
    metrics = {**result.metrics, "variant": variant, "sse_exponential": exp.sse}
    return replace(result, metrics=metrics)
