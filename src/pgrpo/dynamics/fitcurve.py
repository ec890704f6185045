"""The public entry point of curve fitting, `fit_curve`, and the rom family's choice of variant
(split from `fit`, which re-exports `fit_curve`; `fit_model` fits one registered model).

`fit_curve(step, reward, model="rom")` fits the single-exponential law as well and starts the rom
from its solution (m = 0 is exactly the exponential), keeping the best point seen, so the rom's
SSE is never above the exponential's. With a varying logged lr it also fits `rom_schedule` (the
exact recursion driven by that lr), and with G and a 0/1 reward scale `rom_starved` (the force
through the groups with a reward spread only), and returns the variant with the lowest AIC whose
SSE is not worse than the exponential's.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from pgrpo.dynamics.constrained import compare_constrained
from pgrpo.dynamics.curves import FitContext, Parameter, level_bounds, mass_bounds, rate_bounds
from pgrpo.dynamics.fit import FitResult, fit_model
from pgrpo.dynamics.inputs import _check_curve, make_context
from pgrpo.dynamics.optimizers import DEFAULT_OPTIMIZER
from pgrpo.dynamics.starved import MAX_STEPS, starved_range


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
    return replace(best, metrics={**best.metrics, **compare_constrained(linear, fixed)},
                   constrained=fixed)  # fmt: skip


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
