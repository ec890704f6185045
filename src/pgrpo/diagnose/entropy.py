"""When the policy's entropy reaches its floor: a forecast from the logged entropy column.

The entropy curve is fitted with the exponential saturation law H(t) = H_inf + (H_0 - H_inf)
exp(-t / tau) (`pgrpo.dynamics.fit.fit_curve`, the code `pgrpo fit` uses) and forecast with
`pgrpo.dynamics.forecast.forecast` (same band: parameter covariance, autocorrelated noise, a
backtest for misspecification, blended with the last-window mean). The floor is the forecast
mean three spans ahead; "reached" is 90% of the drop from H_0 to the floor, at step
t_0 + tau ln 10. It warns when the floor's band lies below `COLLAPSE_SHARE` (10%) of the
entropy at the start (the mean of the first logged values; the fit's H_0 before 2026-12-04):
a policy heading for near-determinism, where GRPO's groups stop differing and
exploration ends (arXiv 2505.22617's entropy-collapse regime). Backtest on the real logs:
docs/integrations.md.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from pgrpo.diagnose.checks import CHECKS, CheckOptions, CheckResult, column, not_enough
from pgrpo.diagnose.instability import BLOWUP, entropy_rise, entropy_start
from pgrpo.diagnose.signals import thin_log
from pgrpo.dynamics.forecast import forecast
from pgrpo.dynamics.levelgain import CORPUS_PRIOR

COLLAPSE_SHARE = 0.1
MIN_POINTS = 12


def entropy_floor_forecast(step: np.ndarray, entropy: np.ndarray, level: float = 0.9) -> dict:
    """step, entropy: [n] -> floor and its band (at least 0: an entropy is never negative),
    start (the mean of the first max(3, n / 20) logged values), initial (the fit's H_0, which a
    fast first move can put far from them: -0.71 on a run logged from 0.92), tau, step the
    floor is reached (90% of the drop), steps from the last point to it (0 when already
    there)."""
    span = max(float(step[-1] - step[0]), 1.0)
    horizon = float(step[-1]) + 3.0 * span + np.linspace(0.0, span, step.size)
    # no timescale prior: its centre (tau ~ 0.23 of the run) was learned from reward curves
    prior = replace(CORPUS_PRIOR, log_tau_ratio=None)
    # level_gain: the floor and tau are read from its exponential (a consensus member need not
    # be one), and the consensus was judged on reward curves, not entropies
    fc = forecast(step, entropy, float(step[-1]), method="level_gain", model="exponential",
                  horizon=horizon, level=level, prior=prior)  # fmt: skip
    tau = float(fc.fit.values["tau"])
    reached = float(step[0]) + tau * math.log(10.0)
    return {
        "floor": max(fc.predicted_mean, 0.0),
        "floor_lo": max(fc.mean_band[0], 0.0),
        "floor_hi": max(fc.mean_band[1], 0.0),
        "start": entropy_start(entropy),
        "initial": float(fc.fit.values["R_0"]),
        "tau": tau,
        "floor_step": reached,
        "steps_to_floor": max(0.0, reached - float(step[-1])),
    }


@CHECKS.register("entropy_floor")
def entropy_floor(log, options: CheckOptions) -> CheckResult:  # noqa: ANN001
    name = "entropy_floor"
    control = (f"warn only when the whole {options.confidence:.0%} band of the floor is below "
               f"{COLLAPSE_SHARE:.0%} of the entropy at the start")  # fmt: skip
    got = column(thin_log(log, options.max_points, keep=("entropy",)), "entropy")
    if got is None or got[1].size < MIN_POINTS:
        return not_enough(name, f"no entropy column with >= {MIN_POINTS} points", control)
    try:
        ev = entropy_floor_forecast(*got, level=options.confidence)
    except ValueError as exc:
        return not_enough(name, f"entropy not fittable ({exc})", control)
    falling = ev["floor"] < ev["start"]
    ahead = ev["steps_to_floor"]
    when = (
        "not falling" if not (falling and math.isfinite(ev["floor_step"]))
        else f"reached at step ~{ev['floor_step']:.0f} ({ahead:.0f} steps from now)" if ahead > 0
        else f"reached near step ~{ev['floor_step']:.0f}, before the last logged step"
    )  # fmt: skip
    text = (f"entropy floor {ev['floor']:.3g} [{ev['floor_lo']:.3g}, {ev['floor_hi']:.3g}] from "
            f"{ev['start']:.3g} at the start, {when}")  # fmt: skip
    if not falling and ev["start"] > 0 and ev["floor"] >= BLOWUP * ev["start"]:
        # not a floor: the entropy rose (a review, 2026-12-06: "entropy floor 5.35 ... not
        # falling" beside an entropy that rose x7 while the reward collapsed)
        # the last tenth as the finding beside the verdict reads it (`entropy_rise`), so the
        # two multipliers say what each compares (a review, 2026-12-06: x11.3 here, x6.9 there)
        now = entropy_rise(*got).get("entropy_end", math.nan)
        text = (f"entropy rose: {now / ev['start']:.1f} times its {ev['start']:.3g} at the start "
                f"over its last tenth ({now:.3g}), and its fitted curve heads for "
                f"{ev['floor']:.3g} [{ev['floor_lo']:.3g}, {ev['floor_hi']:.3g}], "
                f"{ev['floor'] / ev['start']:.1f} times the start, so there is no floor to "
                "reach: a policy spreading out, not concentrating (see the progress verdict "
                "and the completion lengths)")  # fmt: skip
    if falling and ev["start"] > 0 and ev["floor_hi"] < COLLAPSE_SHARE * ev["start"]:
        when = "ahead" if ahead > 0 else "already"
        text += (f"; below 10% of the start: entropy collapse {when} (raise temperature, add an "
                 "entropy bonus or clip-higher, or lower the lr)")  # fmt: skip
        return CheckResult(name, "warn", text, ev, control)
    return CheckResult(name, "ok", text, ev, control)
