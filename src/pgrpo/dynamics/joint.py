"""Joint fit of runs at different group sizes with shared (R_inf, k): the G-invariance test.

The model predicts that the mean trajectory does not depend on G (to leading order) while the
plateau fluctuation scales like 1/G. `fit_joint` fits the runs separately and jointly (shared
plateau and stiffness, own R_0 / m), compares AIC (joint lower: the data support invariance)
and reports each run's plateau variance (residual variance over the last third).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares

from pgrpo.dynamics.curves import FIT_MODELS
from pgrpo.dynamics.fit import fit_model, make_context, noise_scale
from pgrpo.dynamics.fitresult import FitResult


def _loglik_term(sses: list[float], resid: list[np.ndarray]) -> float:
    """-2 log L up to a constant, noise variance profiled per run (counted as a parameter)."""
    return float(
        sum(r.size * math.log(max(s, 1e-300) / r.size) for s, r in zip(sses, resid, strict=True))
    )


@dataclass(frozen=True)
class JointFitResult:
    """shared: name -> value; per_run: one dict of values per run; separate: the separate fits."""

    model: str
    shared: dict[str, float]
    per_run: list[dict[str, float]]
    separate: list[FitResult]
    aic_joint: float
    aic_separate: float
    plateau_variance: list[float]
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def delta_aic(self) -> float:
        """AIC(joint) - AIC(separate): negative means the shared-parameter model is preferred."""
        return self.aic_joint - self.aic_separate


def fit_joint(
    curves: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    model: str = "rom",
    shared: tuple[str, ...] = ("R_inf", "k"),
    lr: Sequence[np.ndarray | None] | None = None,
    beta1: float | None = None,
    group_sizes: Sequence[int] | None = None,
) -> JointFitResult:
    """curves: [(step [n_i], reward [n_i]), ...] (>= 2 runs); lr: per-run schedules aligned
    with each run's steps (then use model="rom_schedule"); group_sizes: G of each run (for the
    expected plateau-variance ratio G_2 / G_1)."""
    if len(curves) < 2:
        raise ValueError("fit_joint needs at least two runs")
    spec = FIT_MODELS.get(model)
    bad = [s for s in shared if s not in spec.param_names]
    if bad:
        raise ValueError(f"shared parameters {bad} not in {model}'s {spec.param_names}")
    lrs = list(lr) if lr is not None else [None] * len(curves)
    ctxs = [
        make_context(np.asarray(s, float), lr=lr_i, beta1=beta1)
        for (s, _), lr_i in zip(curves, lrs, strict=True)
    ]
    sep = [fit_model(model, s, r, c) for (s, r), c in zip(curves, ctxs, strict=True)]
    own = [n for n in spec.param_names if n not in shared and sep[0].params[n].vary]
    names = [(None, n) for n in shared] + [(i, n) for i in range(len(curves)) for n in own]
    x0 = np.array(
        [np.mean([f.values[n] for f in sep]) if i is None else sep[i].values[n] for i, n in names]
    )
    lb = np.array([sep[0 if i is None else i].params[n].min for i, n in names])
    ub = np.array([sep[0 if i is None else i].params[n].max for i, n in names])
    data = [
        (np.asarray(s, float) - c.step0, np.asarray(r, float), c)
        for (s, r), c in zip(curves, ctxs, strict=True)
    ]
    priors = [spec.priors(t, c) for t, _, c in data]
    sig = [noise_scale(y) for _, y, _ in data]

    def values(x: np.ndarray) -> list[dict[str, float]]:
        out = [dict(f.values) for f in sep]
        for (i, n), v in zip(names, x, strict=True):
            for j in [i] if i is not None else range(len(out)):
                out[j][n] = float(v)
        return out

    def residuals(x: np.ndarray) -> np.ndarray:
        parts = []
        for (t, y, c), v, pr, s in zip(data, values(x), priors, sig, strict=True):
            parts.append(spec.func(t, v, c) - y)
            parts += [np.array([s * (v[n] - m0) / sc]) for n, (m0, sc) in pr.items() if n in own]
        return np.concatenate(parts)

    res = least_squares(residuals, np.clip(x0, lb, ub), bounds=(lb, ub), x_scale="jac")
    vals = values(res.x)
    resid = [y - spec.func(t, v, c) for (t, y, c), v in zip(data, vals, strict=True)]
    # Gaussian likelihood with each run's own noise variance (runs at different G differ)
    sse_j = [float(r @ r) for r in resid]
    sse_joint, sse_sep = sum(sse_j), float(sum(f.sse for f in sep))
    p_sep = sum(len(f.varying) for f in sep)
    aic_j = _loglik_term(sse_j, resid) + 2 * (len(names) + len(resid))
    aic_s = _loglik_term([f.sse for f in sep], resid) + 2 * (p_sep + len(resid))
    pv = [float(np.var(r[-max(r.size // 3, 2) :])) for r in resid]
    metrics = {
        "sse_joint": sse_joint,
        "sse_separate": sse_sep,
        "plateau_variance_ratio": pv[0] / pv[1] if pv[1] > 0 else math.inf,
    }
    if group_sizes is not None:
        metrics["expected_variance_ratio"] = group_sizes[1] / group_sizes[0]
    shared_vals = {n: float(vals[0][n]) for n in shared}
    return JointFitResult(model, shared_vals, vals, sep, aic_j, aic_s, pv, metrics)
