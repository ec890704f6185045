"""What `pgrpo fit` and the report say about a fit: its R^2 read against what the noise allows
(the noise ceiling, the R^2 of a perfect mean curve under each point's batch noise, from first
differences; the R^2 on block means, the smoothed curve a paper plots, and their ceiling; the
one line about them, `quality_words`), and the legend of the models and parameters shown
(`legend`, from the model registry). Split from `logfit` and `curves` (2026-12-06); `logfit`
calls `fit_quality` for every fit it reports; docs/dynamics.md, "R^2 against the noise".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pgrpo.dynamics.curves import FIT_MODELS
from pgrpo.dynamics.fitresult import FitResult

BLOCK = 10
"""Points per block of `block_r2` (the smoothed curve a paper plots)."""
MIN_BLOCKS = 8
"""Fewer block means than this give no `block_r2` (an R^2 over 4 or 5 means is mostly noise)."""
CEILING_SLACK = 0.05
"""How far the adjusted R^2 may pass the noise ceiling (an estimate) before the ceiling is
taken to be wrong for the log (`fit_quality`'s noise_ceiling_holds)."""
AT_CEILING = 0.02
"""An R^2 this close below the noise ceiling is at it: what is left is noise (`quality_words`)."""


def noise_ceiling(reward: np.ndarray, block: int = 1) -> float:
    """About the R^2 a perfect mean curve would reach under the log's batch noise: 1 - sigma^2 /
    var(reward), sigma^2 = var(first differences) / 2 (unbiased for white noise on a curve that
    moves little from step to step; the MAD of differences, used before, is quantised on
    means of few 0/1 rewards and read 0 on 7 of the corpus' 33 runs), floored at 0; reward:
    [n]. block > 1: the same on means of `block` consecutive points (`block_r2`'s), whose noise
    variance is sigma^2 / block for white noise; nan with fewer than MIN_BLOCKS blocks. An
    estimate: a fit can land a little above it (sampling error, noise that is not white). nan
    for a reward without variance or fewer than 3 points."""
    reward = np.asarray(reward, dtype=float)
    nb = reward.size // block
    if reward.size < 3 or (block > 1 and nb < MIN_BLOCKS):
        return math.nan
    var = float(np.var(reward[: nb * block].reshape(nb, block).mean(1)))
    if not var > 0:
        return math.nan
    return max(0.0, 1.0 - float(np.var(np.diff(reward))) / 2.0 / block / var)


def block_r2(reward: np.ndarray, fitted: np.ndarray, block: int = BLOCK) -> float:
    """R^2 of a fit against means of `block` consecutive points (reward, fitted: [n]; the last
    n mod block points dropped): the fit judged against the smoothed curve, whose batch noise
    is averaged down by `block`. nan with fewer than MIN_BLOCKS blocks or no variance between
    them."""
    reward, fitted = np.asarray(reward, dtype=float), np.asarray(fitted, dtype=float)
    nb = reward.size // block
    if nb < MIN_BLOCKS:
        return math.nan
    yb = reward[: nb * block].reshape(nb, block).mean(1)
    fb = fitted[: nb * block].reshape(nb, block).mean(1)
    sst = float(((yb - yb.mean()) ** 2).sum())
    return 1.0 - float(((yb - fb) ** 2).sum()) / sst if sst > 0 else math.nan


def fit_quality(
    fit: FitResult,
    block: int = BLOCK,
    constrained: FitResult | None = None,
    bin_size: int = 1,
) -> dict[str, float]:
    """R^2 read against what the noise allows: {r2, r2_adjusted, parameters, noise_ceiling,
    noise_ceiling_holds, r2_block_means, noise_ceiling_block_means,
    noise_ceiling_block_means_holds, block, blocks, bin_size} (and
    r2_linear, group_size for the rom_starved variant) of `fit` on
    its own points (nan where undefined; bin_size: logged steps per point, > 1 for a thinned
    log, whose points are bin means), and r2_block_means_constrained of the closed-form fit to
    the same points when one is given. r2_adjusted: 1 - (1 - R^2)(n - 1)/(n - k) for the fit's k
    free parameters (an in-sample R^2 takes up about k/n of pure noise; the ceiling is a
    population figure). noise_ceiling_holds: 0 when the adjusted R^2 exceeds the ceiling by more
    than CEILING_SLACK: first differences then overstate the noise (noise that alternates, or a
    mean that moves between consecutive points) and the ceiling is no guide (20 of the corpus'
    33 runs had R^2 above it, 8 still with the adjusted R^2 beyond the slack; review,
    2026-12-04); except where the ceiling is below 0.05 and the adjusted R^2 below 0.1: the
    noise is then about all of the variance either way (`quality_words` says so).
    noise_ceiling_block_means_holds: the same for the means of `block` points (`blocks` of
    them): 0 when their R^2 exceeds their ceiling by more than CEILING_SLACK, except where that
    ceiling is below NOISE_ONLY_CEILING (their noise is then about all of their variance)."""
    n, k = int(fit.reward.size), len(fit.varying)
    adjusted = 1.0 - (1.0 - fit.r2) * (n - 1) / (n - k) if n > k + 1 else math.nan
    ceiling = noise_ceiling(fit.reward)
    r2_blocks = block_r2(fit.reward, fit.fitted, block)
    ceiling_blocks = noise_ceiling(fit.reward, block)
    out = {
        "r2": fit.r2,
        "r2_adjusted": adjusted,
        "parameters": float(k),
        "noise_ceiling": ceiling,
        "noise_ceiling_holds": float(_ceiling_holds(adjusted, ceiling)),
        "r2_block_means": r2_blocks,
        "noise_ceiling_block_means": ceiling_blocks,
        "noise_ceiling_block_means_holds": float(_block_ceiling_holds(r2_blocks, ceiling_blocks)),
        "block": float(block),
        "blocks": float(n // block),
        "bin_size": float(bin_size),
    }
    if constrained is not None:
        out["r2_block_means_constrained"] = block_r2(constrained.reward, constrained.fitted, block)
    if "r2_linear" in fit.metrics:  # the rom_starved variant: what the linear rom read
        out["r2_linear"] = float(fit.metrics["r2_linear"])
        out["group_size"] = float(fit.metrics["group_size"])
    return out


NOISE_ONLY_CEILING = 0.05
NOISE_ONLY_R2 = 0.1
"""Below these (ceiling; adjusted R^2) a log's batch noise is about all of its variance."""


def _noise_only(adjusted: float | None, ceiling: float | None) -> bool:
    """The batch noise is about all of the variance (an unknown adjusted R^2 counts as small)."""
    small = adjusted is None or not adjusted >= NOISE_ONLY_R2
    return ceiling is not None and ceiling < NOISE_ONLY_CEILING and small


def _ceiling_holds(adjusted: float, ceiling: float) -> bool:
    return _noise_only(adjusted, ceiling) or not adjusted > ceiling + CEILING_SLACK


def _block_ceiling_holds(r2: float, ceiling: float) -> bool:
    """`_ceiling_holds` for the block means: any R^2 counts as noise-only below the noise-only
    ceiling (the R^2 of k parameters on a few means of pure noise is about (k - 1) / (means -
    1), 0.43 for 4 on 8)."""
    return ceiling < NOISE_ONLY_CEILING or not r2 > ceiling + CEILING_SLACK


def quality_words(q: dict, model: str) -> str | None:
    """One line reading the fit's R^2 against the noise: the noise ceiling (about the R^2 of a
    perfect mean curve) and the R^2 on block means (the smoothed curve); None when neither is
    defined. A thinned log's points are bin means: the line says so. q: `fit_quality`'s dict,
    or its JSON form (None for NaN). One wording for `pgrpo fit` and the report."""
    q = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in q.items()}
    if q.get("r2") is None:  # a reward that never changed: no R^2 to read
        return None
    b = int(q.get("bin_size") or 1)
    unit = "point" if b == 1 else f"mean of {b} logged points"
    parts = []
    ceiling = q.get("noise_ceiling")
    r2 = f"{model} R^2 {q['r2']:.3f}"
    if q.get("r2_adjusted") is not None:
        r2 += f" ({q['r2_adjusted']:.3f} adjusted for its {int(q['parameters'])} parameters)"
    adjusted = q.get("r2_adjusted")
    if _noise_only(adjusted, ceiling):
        parts.append(
            f"{r2}: the batch noise is about all of the reward's variance (noise ceiling "
            f"{ceiling:.3f}), so no curve explains much of it per {unit}"
        )
    elif ceiling is not None and not q.get("noise_ceiling_holds", 1.0):
        parts.append(
            f"{r2}, above the noise ceiling first differences give ({ceiling:.3f}): "
            "they overstate the noise here (noise that alternates from point to point, or a "
            "mean that moves between consecutive points), so that ceiling is no guide"
        )
    elif ceiling is not None:
        at = q["r2"] if adjusted is None else adjusted
        near = ": at the ceiling, what is left is noise" if at >= ceiling - AT_CEILING else ""
        parts.append(
            f"{r2} against a noise ceiling of about {ceiling:.3f} (the R^2 of a "
            f"perfect mean curve under the noise of each {unit}, from first differences)"
            f"{near}"
        )
    if q.get("r2_block_means") is not None:
        parts.append(_block_words(q, b))
    if q.get("r2_linear") is not None:
        parts.append(
            f"{model}: the rom with its force through the groups that have a reward spread "
            f"(G {int(q['group_size'])}; the linear rom reads R^2 {q['r2_linear']:.3f})"
        )
    return "; ".join(parts) + "." if parts else None


def _block_words(q: dict, bin_size: int) -> str:
    """The block-means part of `quality_words` (q: its dict, None for NaN): their R^2 beside
    their noise ceiling where that ceiling is a guide; in words where it is not: too few or too
    flat means to estimate it, their noise about all of their variance (nothing for a curve to
    explain), or an R^2 above it by more than CEILING_SLACK."""
    closed = q.get("r2_block_means_constrained")
    extra = f", closed form {closed:.3f}" if closed is not None else ""
    steps = f" ({int(q['block']) * bin_size} logged points)" if bin_size > 1 else ""
    head = f"on means of {int(q['block'])} points{steps} R^2 {q['r2_block_means']:.3f}{extra}"
    top = q.get("noise_ceiling_block_means")
    if top is None:
        return f"{head} (their noise ceiling cannot be estimated)"
    if top < NOISE_ONLY_CEILING:
        fitted = ""
        if q.get("blocks") is not None and q.get("parameters") is not None:
            fitted = (
                f", and {int(q['parameters'])} parameters on {int(q['blocks'])} means fit noise too"
            )
        return (
            f"{head}, but their noise is about all of their variance (noise ceiling about 0, "
            f"from first differences): the noise leaves nothing for a curve to explain{fitted}"
        )
    if not q.get("noise_ceiling_block_means_holds", 1.0):
        return (
            f"{head}, above the noise ceiling first differences give for them ({top:.3f}), "
            "so that ceiling is no guide there"
        )
    return f"{head} (their noise ceiling about {top:.3f})"


MARKS = {
    "at its bound": "the data would take it past its box, so its value is the box's and it has "
    "no stderr",
    "not identified": "the data do not fix it (its stderr is 0, or a parameter it needs sits at "
    "its bound: rom_v0's start velocity u drops out where the inertia m is 0)",
}
"""What a parameter's mark in `pgrpo fit`'s table and the report means (`legend`'s marks)."""


def legend(models: Sequence[str], marks: Sequence[str] = ()) -> tuple[str, ...]:
    """Two lines saying what the named FIT_MODELS are and what their parameters mean, grouped
    by unit, from the registry (`CurveModel.description`, `meanings`, `unit`): `pgrpo fit`'s
    legend under its table. A parameter is described once, by the first model that has it.
    marks: the MARKS shown beside a parameter; a third line says what they mean."""
    specs = [FIT_MODELS.get(name) for name in dict.fromkeys(models)]
    shown = "; ".join(f"{s.name}: {s.description}" for s in specs)
    by_unit: dict[str, dict[str, str]] = {}
    for s in specs:
        for name in s.param_names:
            if not any(name in group for group in by_unit.values()):
                by_unit.setdefault(s.unit(name), {})[name] = f"{name} {s.meanings.get(name, '')}"
    units = "; ".join(f"{unit}: {', '.join(group.values())}" for unit, group in by_unit.items())
    lines = (
        f"models (x = R - R_inf, t in steps since the first logged one): {shown}.",
        f"parameters, {units} (a step: one unit of the log's step axis).",
    )
    shown_marks = [f"({m}): {MARKS[m]}" for m in MARKS if m in marks]
    return (*lines, "; ".join(shown_marks) + ".") if shown_marks else lines
