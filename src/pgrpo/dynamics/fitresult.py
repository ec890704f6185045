"""The result of fitting a curve model (`FitResult`): the parameters, the fitted values, the fit's
statistics, and its lmfit-style text report. `pgrpo.dynamics.fit` makes them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pgrpo.dynamics.curves import FIT_MODELS, FitContext, Parameter
from pgrpo.dynamics.fitstats import _jacobian


@dataclass(frozen=True)
class FitResult:
    """A fitted curve model. Arrays are copies: step, reward, fitted: [n]; covariance: [p, p]
    over `varying` (None when singular); `metrics`: tau, kappa...; `constrained`: the rom_fixed
    fit a free rom fit's metrics compare it with (or None)."""

    model: str
    params: dict[str, Parameter]
    varying: tuple[str, ...]
    step: np.ndarray
    reward: np.ndarray
    fitted: np.ndarray
    context: FitContext
    covariance: np.ndarray | None
    r2: float
    sse: float
    aic: float
    bic: float
    residual_std: float
    residual_autocorr: float
    success: bool
    message: str
    metrics: dict[str, float | str] = field(default_factory=dict)
    constrained: FitResult | None = field(default=None, repr=False, compare=False)

    @property
    def values(self) -> dict[str, float]:
        return {name: p.value for name, p in self.params.items()}

    @property
    def at_bound(self) -> tuple[str, ...]:
        """The varying parameters the fit left at a bound (`Parameter.at_bound`): their values
        are the box's, and their stderr means nothing. Empty on a reward that never changed
        (metrics["params_undefined"] says once why no parameter but the level means anything)."""
        if "params_undefined" in self.metrics:
            return ()
        return tuple(name for name, p in self.params.items() if p.at_bound)

    @property
    def unidentified(self) -> tuple[str, ...]:
        """The varying parameters off their bounds that the data do not fix: a stderr of exactly
        0 (the fit's curvature is flat along it, and the pseudo-inverse gives it no variance), or
        one `CurveModel.coupled` to a parameter at its lower bound, where it drops out of the
        model (rom_v0's u where m is 0). Empty on a reward that never changed (as `at_bound`)."""
        if "params_undefined" in self.metrics:
            return ()
        coupled = FIT_MODELS.get(self.model).coupled

        def lost(name: str) -> bool:  # coupled to a parameter at its lower (not upper) bound
            q = self.params.get(coupled.get(name, ""))
            return q is not None and q.at_bound and q.value - q.min <= q.max - q.value

        return tuple(name for name, p in self.params.items()
                     if p.vary and not p.at_bound and (p.stderr == 0.0 or lost(name)))  # fmt: skip

    @property
    def n(self) -> int:
        return int(self.reward.size)

    def format_r2(self, spec: str = ".4f") -> str:
        """R^2 with `spec`, "n/a" when undefined (a curve without variance)."""
        return format(self.r2, spec) if math.isfinite(self.r2) else "n/a"

    def predict(self, step: np.ndarray, values: dict[str, float] | None = None) -> np.ndarray:
        """Model mean at `step` ([m] -> [m]); `values` overrides parameter values."""
        t = np.asarray(step, dtype=float) - self.context.step0
        return FIT_MODELS.get(self.model).func(t, values or self.values, self.context)

    def steps_to_fraction(self, horizon: float, fraction: float = 0.9) -> float:
        """Steps after the fit's last step until the fitted curve has covered `fraction` of the
        way from R_0 to R_inf (a curve that overshoots has covered it): 0.0 where the fitted
        value at the last step already has, inf where no whole step up to `horizon` (a step,
        not a count) gets there, NaN without a gain (R_inf = R_0). The one reading of "steps to
        90%" of the trainer's `forecast/steps_to_90` and the live `pgrpo/steps_to_90`; the
        trainer logged the step at which the curve got there, a past step on a run that had
        (session 39)."""
        r0, r_inf = self.values["R_0"], self.values["R_inf"]
        gain = r_inf - r0
        if not math.isfinite(gain) or gain == 0.0:
            return math.nan
        target, sign = r0 + fraction * gain, math.copysign(1.0, gain)
        if (float(self.fitted[-1]) - target) * sign >= 0:
            return 0.0
        last = float(self.step[-1])
        grid = last + np.arange(1.0, max(math.floor(horizon - last), 0) + 1.0)
        hit = np.nonzero((self.predict(grid) - target) * sign >= 0)[0]
        return float(grid[hit[0]] - last) if hit.size else math.inf

    def prediction_jacobian(self, step: np.ndarray) -> np.ndarray:
        """d predict(step) / d theta over the varying parameters: [m, p] (central differences)."""
        return _jacobian(FIT_MODELS.get(self.model).func, self, np.asarray(step, dtype=float))

    def report(self) -> str:
        """lmfit-style text report."""
        lines = [
            f"[[Model]] {self.model}",
            "[[Fit Statistics]]",
            f"    data points = {self.n}, variables = {len(self.varying)}",
            f"    R^2 = {self.format_r2()}"
            + (f" ({self.metrics['r2_undefined']})" if "r2_undefined" in self.metrics else "")
            + f", SSE = {self.sse:.6g}",
            f"    AIC = {_fmt_ic(self.aic)}, BIC = {_fmt_ic(self.bic)}"
            + (f" ({self.metrics['aic_undefined']})" if "aic_undefined" in self.metrics else ""),
            f"    residual std = {self.residual_std:.4g}, "
            f"lag-1 autocorrelation = {self.residual_autocorr:.3f}",
            f"    success = {self.success} ({self.message})",
            "[[Variables]]"
            + (f" ({self.metrics['params_undefined']})" if "params_undefined" in self.metrics
               else ""),
        ]  # fmt: skip
        at_bound, unidentified = self.at_bound, self.unidentified
        for p in self.params.values():
            err = (
                "(fixed)" if not p.vary else "(at its bound)" if p.name in at_bound
                else "(not identified)" if p.name in unidentified else _fmt_err(p)
            )  # fmt: skip
            lines.append(f"    {p.name:<6} = {p.value:< 12.6g} {err}  [{p.min:.3g}, {p.max:.3g}]")
        derived = {k: v for k, v in self.metrics.items() if isinstance(v, float)}
        if derived:
            lines.append("[[Derived]] (time unit: optimizer step)")
            lines += [f"    {k} = {v:.6g}" for k, v in derived.items()]
        if "preferred" in self.metrics:
            m = self.metrics
            lines += [
                f"[[Constrained]] m, c from beta1 and K ({m['optimizer_reduction']} reduction)",
                f"    R^2 = {m['r2_constrained']:.4f}; AICc constrained - free = "
                f"{m['delta_aicc']:.2f} -> {m['preferred']} preferred; likelihood-ratio test "
                f"p = {m['lr_test_p']:.3g}: the closed form is {m['closed_form']}",
                f"    kappa = {m['kappa_constrained']:.4g} {m['kappa_not_estimated']}"
                if m.get("kappa_not_estimated")
                else f"    kappa = {m['kappa_constrained']:.4g}, {100 * m['kappa_level']:.0f}% "
                f"interval [{m['kappa_lo']:.4g}, {m['kappa_hi']:.4g}] ({m['kappa_meaning']})",
            ]
        return "\n".join(lines)


def _fmt_ic(v: float) -> str:
    return f"{v:.2f}" if math.isfinite(v) else "n/a"


def _fmt_err(p: Parameter) -> str:
    if p.stderr is None or not math.isfinite(p.stderr):
        return "+/- (not estimated)"
    rel = f" ({100 * abs(p.stderr / p.value):.2f}%)" if p.value else ""
    return f"+/- {p.stderr:.4g}{rel}"
