"""Verifier-gaming checks from the columns a TRL-style log already has.

- `reward_function_divergence`: with several reward functions (`rewards/<func>/mean`), one rises
  while another stays flat: the policy learns what one verifier pays for (typically a format
  reward) without the other (typically correctness). "Rises": the first-to-last-quarter gain
  is > z_rise = 2.58 standard errors (one-sided 0.995, so that with up to a few reward functions
  the family-wise rate on noise stays near 1%) and the OLS slope is significant too; "flat": the
  other's gain is within z_flat = 1.64 standard errors (not significant at 0.9 two-sided),
  errors not inflated for autocorrelation (`Trend.t_flat`: the inflation guards a claim of a
  rise, and would make a claim of no change easy).
- `length_vs_reward`: completion length rises (same z_rise test) while the reward does not
  (its gain is not significant at 0.9): a policy padding its answers, or a length bias in the
  verifier. A run where both rise (longer reasoning that pays) does not warn.

Standard errors come from the first-difference noise, inflated for lag-1 autocorrelation at its
90% upper bound (`pgrpo.diagnose.checks.trend`, `nullmodel.lag1_autocorr`). Measured false-alarm
rates on null columns of each real log's length (bench/live_checks.py, docs/integrations.md,
2026-12-03): divergence 0.6% i.i.d. / 0.5% AR(1) 0.5 (was 0.9% / 2.0% with a point estimate);
length 0.0% / 0.5%; either check on AR(1) rho 0.9 columns of 30-300 points: 0-2.5% (was 2-14%;
bench/null_rates.py).
"""

from __future__ import annotations

import numpy as np

from pgrpo.diagnose.checks import CHECKS, CheckOptions, CheckResult, column, not_enough, trend
from pgrpo.diagnose.signals import thin_log
from pgrpo.logs.base import REWARD_PATTERN

Z_RISE = 2.58
Z_FLAT = 1.64
MIN_POINTS = 12


def _rising(tr) -> bool:  # noqa: ANN001
    return tr.t > Z_RISE and tr.slope_t > Z_RISE


@CHECKS.register("reward_function_divergence")
def reward_function_divergence(log, options: CheckOptions) -> CheckResult:  # noqa: ANN001
    name = "reward_function_divergence"
    control = (f"rise: gain > {Z_RISE} SE and slope t > {Z_RISE}; flat: |gain| < {Z_FLAT} SE "
               "(SE from first-difference noise, autocorrelation-inflated)")  # fmt: skip
    funcs = sorted(c for c in log.columns if REWARD_PATTERN.match(c))
    log = thin_log(log, options.max_points, keep=tuple(funcs))  # bin means of a long log
    if len(funcs) < 2:
        return not_enough(name, f"{len(funcs)} per-function reward column(s) "
                          "(rewards/<func>/mean); needs two or more", control)  # fmt: skip
    trends = {}
    for f in funcs:
        got = column(log, f)
        if got is not None and got[1].size >= MIN_POINTS:
            trends[f] = trend(*got)
    if len(trends) < 2:
        return not_enough(name, f"fewer than {MIN_POINTS} points per reward function", control)
    rising = [f for f, t in trends.items() if _rising(t)]
    flat = [f for f, t in trends.items() if abs(t.t_flat) < Z_FLAT]
    ev = {f"{f}/gain": t.gain for f, t in trends.items()}
    ev.update({f"{f}/t": t.t for f, t in trends.items()})
    if rising and flat:
        r, s = rising[0], flat[0]
        text = (f"{r} rose by {trends[r].gain:.3g} ({trends[r].t:.1f} SE) while {s} stayed flat "
                f"({trends[s].gain:+.3g}, {trends[s].t_flat:.1f} SE): the policy may be "
                "satisfying one verifier only; inspect completions, reweight or gate the rising "
                "reward on the flat one")  # fmt: skip
        return CheckResult(name, "warn", text, ev, control)
    return CheckResult(name, "ok", "reward functions move together", ev, control)


@CHECKS.register("length_vs_reward")
def length_vs_reward(log, options: CheckOptions) -> CheckResult:  # noqa: ANN001
    name = "length_vs_reward"
    control = (f"length rise: gain > {Z_RISE} SE and slope t > {Z_RISE}; reward not rising: "
               f"gain < {Z_FLAT} SE")  # fmt: skip
    log = thin_log(log, options.max_points, keep=("completion_length",))
    got = column(log, "completion_length")
    if got is None or got[1].size < MIN_POINTS or len(log) < MIN_POINTS:
        return not_enough(name, "no completion length column with >= 12 points", control)
    length, reward = trend(*got), trend(log.step, log.reward)
    ev = {"length_gain": length.gain, "length_t": length.t, "length_start": length.start,
          "length_end": length.end, "reward_gain": reward.gain, "reward_t": reward.t}  # fmt: skip
    if _rising(length) and reward.t_flat < Z_FLAT:
        late = got[1][got[1].size // 2 :]
        ev["length_at_max_late"] = at_max = float(np.mean(late == got[1].max()))
        cut = ""
        if at_max >= 0.5:  # pinned at its largest value: the length limit
            cut = (f"; it sits at its maximum {got[1].max():.4g} on {at_max:.0%} of the second "
                   "half's points, so completions are being cut at the length limit")  # fmt: skip
        text = (f"completion length rose {length.start:.4g} -> {length.end:.4g} ({length.t:.1f} "
                f"SE) while the reward did not ({reward.gain:+.3g}, {reward.t_flat:.1f} SE)"
                f"{cut}: check for padding / repetition and for a length bias in the verifier; cap "
                "max_completion_length or use a length-debiased loss (dr_grpo)")  # fmt: skip
        return CheckResult(name, "warn", text, ev, control)
    return CheckResult(name, "ok", "completion length does not grow against the reward", ev,
                       control)  # fmt: skip
