"""The four failure-mode rules of the dynamics paper (arXiv 2606.30789), on whatever a log holds.

Each rule reads `Signals`, computes its evidence figures, fires when a figure crosses a threshold
and lists the signals it missed. Tests on the reward curve are calibrated on null curves of the
same length (`pgrpo.diagnose.nullmodel`: binomial batch noise at the log's B x G, AR(1) noise
otherwise), so each fires on at most ALPHA_MODE of them; ratio thresholds (entropy, KL, length,
clip share) are module constants, checked on deliberately broken bandit runs
(`pgrpo.bandit.scenarios`) and on real logs (bench/real_runs.py, docs/diagnostics.md).
"""

from __future__ import annotations

import math
import re

import numpy as np
from scipy.special import ndtri

from pgrpo.core.stats import iid_degeneracy
from pgrpo.diagnose import nullmodel as nm
from pgrpo.diagnose.curvestats import window_mean_sd
from pgrpo.diagnose.lengthstats import TRUNCATION_MAX, truncation_cause
from pgrpo.diagnose.signals import (
    Signals,
    finite,
    smooth,
    truncation_per_step,
    window_bounds,
    window_mean,
)
from pgrpo.diagnose.starvation import (
    ZERO_STD_SOURCE,
    degeneracy_action,
    iid_prediction,
    lower_bounds,
    mean_se,
    n_rollouts,
    second_half,
    zero_spread_now,
    zero_spread_split,
)
from pgrpo.diagnose.verdict import (
    DIAGNOSTIC_RULES,
    ModeVerdict,
    cannot_judge,
    confidence,
    not_applicable,
    verdict,
)

MIN_STEPS = 8
# reward hacking
HACK_MIN_TRAIN_GAIN = 0.05  # train reward gain (at the eval steps) for "gain without eval"
HACK_EVAL_SHARE = 0.25  # eval gain below (1 - this) x the train gain = divergence
LENGTH_BLOWUP = 2.5  # final / initial mean completion length
FORMAT_SHARE = 0.7  # share of the reward gain from format-like reward functions
# advantage degeneracy
DEGENERACY_MAX = 0.5  # share of zero-spread groups (one-sided 5%) on unsaturated steps
Z95 = 1.645
SATURATED = 0.85  # for a reward in [0, 1]: steps with smoothed reward above it are not judged
ALPHA_MODE = 0.005  # level of each reward-curve test on null curves of the same length
Z_MODE = 2.5758  # the one-sided normal quantile at ALPHA_MODE (the eval tests of reward hacking)


def _lack(s: Signals, name: str, need: int) -> str:
    """How a signal is missing: absent, or logged at too few steps to judge."""
    if name not in s.columns:
        return name
    have = int(np.isfinite(s.columns[name]).sum())
    return f"{name} (only {have} finite values, need {need})"


def _rel_gain(x: np.ndarray) -> tuple[float, float, float]:
    """first-10% mean, last-10% mean, their difference."""
    a, b = window_mean(x, 0.0, 0.1), window_mean(x, 0.9, 1.0)
    return a, b, b - a


def _reward_width(s: Signals) -> int:
    """Points in the smoothing window of `_reward_at`."""
    return max(3, int(np.isfinite(s.get("reward")).sum()) // 10)


def _reward_at(s: Signals, step: float) -> tuple[float, int]:
    """(smoothed train reward at the logged step nearest to `step`, the points it averages:
    fewer near either end, where the centred window is cut)."""
    ok = np.isfinite(s.get("reward"))
    steps, w = s.steps[ok], _reward_width(s)
    i, n = int(np.argmin(np.abs(steps - step))), int(ok.sum())
    off = (min(w, n) - 1) // 2
    points = min(i + off, n - 1) + 1 - max(i + off - min(w, n) + 1, 0)
    return float(smooth(s.get("reward"), w)[i]), points


def _z(value: float, sd: float) -> float:
    """value / sd; with no noise at all (sd 0), +-inf by the sign of value, 0 for 0."""
    if sd > 0:
        return value / sd
    return math.copysign(math.inf, value) if value != 0 else 0.0


def _z_strength(z: float, crit: float = Z_MODE) -> float:
    """0.5 at z = crit, towards 1 a unit above; an infinite z (no noise at all) is certain."""
    return (1.0 if z > 0 else 0.0) if math.isinf(z) else confidence(z, crit, 1.0)


def _gain_se(s: Signals, points: tuple[int, int]) -> tuple[float, float]:
    """(standard error of the train gain between two `_reward_at` values of `points` points
    each, of the eval gain between the first and last eval points). The train one: the two
    window means' AR(1) standard errors (`curvestats.window_mean_sd`) at the 90% bound on the
    reward's lag-1 autocorrelation (`nullmodel.lag1_autocorr`) and its first-difference noise
    sd (without the bound a flat AR(1) reward at rho 0.5 fired on 4-11% of runs; with the bound
    but the scale of the differences taken for the series' own, 1.7-1.9% at rho 0.5 and
    3.6-3.9% at rho 0.8, against the mode's 0.5%). The eval one: paired by problem when the
    first and last evals share their problems (`eval_gain_se`), else from the points' own
    standard errors (`eval_se`: the records' sizes), else from the scatter of >= 4 eval points
    (their noise sd from first differences, times sqrt(2): conservative, a trend adds to it),
    else NaN: two points of unknown size cannot tell a change from noise."""
    train = _window_gain_se(finite(s.get("reward")), points)
    if math.isfinite(s.eval_gain_se) and math.isfinite(s.eval_gain):  # paired by problem
        return train, s.eval_gain_se
    se = s.eval_se
    if len(se) == len(s.eval_points) and math.isfinite(se[0]) and math.isfinite(se[-1]):
        return train, math.hypot(se[0], se[-1])
    acc = np.array([a for _, a in s.eval_points], dtype=float)
    if acc.size >= 4:
        return train, float(nm.noise_sd(acc[None, :])[0]) * math.sqrt(2.0)
    return train, math.nan


def _window_gain_se(x: np.ndarray, points: tuple[int, int]) -> float:
    """Standard error of the difference of two window means of `points` points of the finite
    series x: their AR(1) errors (`curvestats.window_mean_sd`) at the 90% bound on x's lag-1
    autocorrelation (`nullmodel.lag1_autocorr`), from its first-difference noise sd."""
    rho, noise = nm.lag1_autocorr(x), float(nm.noise_sd(x[None, :])[0])
    return math.hypot(*(window_mean_sd(noise, k, rho) for k in points))


def reward_rises(s: Signals) -> bool:
    """A significant positive whole-run trend of the reward (HAC t against the null curves,
    two-sided level ALPHA_MODE): "rising" in the reward's own noise units, any reward scale."""
    x = finite(s.unit_reward())  # the null on the range's 0/1 scale; t is scale-free
    if x.size < MIN_STEPS:
        return False
    t = float(nm.level_statistics(x)["trend_t"][0])
    null = nm.null_statistics(x.size, nm.choose_null(x, n_rollouts(s)))
    return t > 0 and nm.p_value(t, null["trend_t"], two_sided=True) < ALPHA_MODE


# ---------------------------------------------------------------------------------------------
# reward hacking
# ---------------------------------------------------------------------------------------------


def _format_gain_share(s: Signals) -> dict[str, float] | None:
    """format_gain_share (share of reward-function gain from format-like functions),
    content_reward_gain (gain of the others), format_gain_z (the largest first-to-last-10% gain
    of a format-like function over its standard error, `_window_gain_se`) and format_gain_z_crit
    (the one-sided normal quantile at ALPHA_MODE / the number of format-like functions). The
    share alone fired on 24-31% of runs whose every column was flat noise (a format function
    up by chance, the content one down: share 1; bench/null_rates.py `columns`, 2026-12-04)."""
    comps = {m.group(1): finite(s.get(k)) for k in s.columns
             if (m := re.match(r"rewards/(.+)/mean$", k))}  # fmt: skip
    if len(comps) < 2:
        return None
    comps = {name: x for name, x in comps.items() if x.size >= 4}
    gains = {name: _rel_gain(x)[2] for name, x in comps.items()}
    is_fmt = {name: bool(re.search(r"format|length|style", name)) for name in comps}
    fmt = sum(max(g, 0.0) for n, g in gains.items() if is_fmt[n])
    other = sum(g for n, g in gains.items() if not is_fmt[n])
    total = fmt + max(other, 0.0)
    z = [_z(gains[n], _window_gain_se(x, _end_points(x.size))) for n, x in comps.items()
         if is_fmt[n]]  # fmt: skip
    crit = float(-ndtri(ALPHA_MODE / len(z))) if z else math.inf  # scipy.stats.norm.isf's
    return {"format_gain_share": fmt / total if total > 0 else 0.0, "content_reward_gain": other,
            "format_gain_z": max(z, default=math.nan), "format_gain_z_crit": crit}  # fmt: skip


def _end_points(m: int) -> tuple[int, int]:
    """Points in `_rel_gain`'s first- and last-10% windows of m finite values."""
    (a0, a1), (b0, b1) = window_bounds(m, 0.0, 0.1), window_bounds(m, 0.9, 1.0)
    return a1 - a0, b1 - b0


@DIAGNOSTIC_RULES.register("reward_hacking")
def reward_hacking(s: Signals) -> ModeVerdict:
    """Train reward rises but the true signal does not: eval accuracy diverging from train reward,
    completion length blowing up with reward, or gains only from format-like reward functions."""
    name = "reward_hacking"
    if not s.has("reward", MIN_STEPS):
        return cannot_judge(name, [_lack(s, "reward", MIN_STEPS)], "too few reward values")
    ev: dict[str, float] = {}
    missing: list[str] = []
    strengths = []
    if len(s.eval_points) >= 2:
        (s0, e0), (s1, e1) = s.eval_points[0], s.eval_points[-1]
        (r0, k0), (r1, k1) = _reward_at(s, s0), _reward_at(s, s1)
        train_gain = r1 - r0
        se_train, se_eval = _gain_se(s, (k0, k1))
        paired = math.isfinite(s.eval_gain_se) and math.isfinite(s.eval_gain)
        # paired: the mean per-problem change, the statistic its error belongs to
        eval_gain = s.eval_gain if paired else e1 - e0
        ev.update(train_gain=train_gain, eval_gain=eval_gain, eval_first=e0, eval_last=e1,
                  train_gain_se=se_train, eval_gain_se=se_eval,
                  eval_gain_se_paired=float(paired))  # fmt: skip
        if not math.isfinite(se_eval):
            missing.append(
                "the eval's size (n_problems, accuracy_ci or per-problem counts in the eval "
                "records, or >= 4 eval points), to tell an eval change from noise"
            )
        elif train_gain > HACK_MIN_TRAIN_GAIN:
            # eval lags the reward: its gain below (1 - HACK_EVAL_SHARE) of the train gain, by
            # more than both gains' noise allows (one-sided z at ALPHA_MODE)
            gap = train_gain * (1 - HACK_EVAL_SHARE) - eval_gain
            sd = math.hypot((1 - HACK_EVAL_SHARE) * se_train, se_eval)
            ev["eval_gap_z"] = _z(gap, sd)
            strengths.append(_z_strength(ev["eval_gap_z"]))
        else:  # eval falling on its own, beyond its noise; before, any fall of 0.05 fired
            # (14-27% of flat runs with two evals of 100-500 problems)
            fall = -eval_gain
            ev["eval_fall_z"] = _z(fall, se_eval)
            strengths.append(_z_strength(ev["eval_fall_z"]))
    else:
        missing.append("eval accuracy (--eval-log with >= 2 steps, or an eval/accuracy column)")
    if s.has("completions/mean_length", 4):
        l0, l1, _ = _rel_gain(s.get("completions/mean_length"))
        ratio = l1 / l0 if l0 > 0 else math.nan
        ev["length_ratio"] = ratio
        rising = reward_rises(s)
        # length growth alone is also how reasoning improves: weak evidence, capped at 0.7
        strengths.append(min(0.7, confidence(ratio, LENGTH_BLOWUP, 0.5)) if rising else 0.0)
    else:
        missing.append(_lack(s, "completions/mean_length", 4))
    fmt = _format_gain_share(s)
    if fmt is not None:
        ev.update(fmt)
        # the share, only when a format-like function rose beyond its own noise (level ALPHA_MODE)
        share = confidence(fmt["format_gain_share"], FORMAT_SHARE, 0.1)
        rose = _z_strength(fmt["format_gain_z"], fmt["format_gain_z_crit"])
        strengths.append(min(share, rose) if fmt["content_reward_gain"] < 0.02 else 0.0)
    else:
        missing.append("per-function rewards (rewards/<name>/mean)")
    if not strengths:
        return cannot_judge(name, missing, "no eval accuracy, length or reward components")
    action = (
        "the proxy reward is being exploited: check completions by hand, make the verifier "
        "stricter (exact answer extraction, length penalty, format-only reward removed), add a "
        "KL penalty, and select checkpoints by eval accuracy, not train reward"
    )
    return verdict(
        name, max(strengths), ev, action=action, missing=missing, coverage=len(strengths) / 3
    )


# ---------------------------------------------------------------------------------------------
# advantage degeneracy
# ---------------------------------------------------------------------------------------------


def _live_steps(reward: np.ndarray) -> np.ndarray:
    """Steps judged for starvation: for a reward in [0, 1], those whose smoothed reward is
    below SATURATED (saturation is success, not starvation); every step on any other scale."""
    ok = np.isfinite(reward)
    live = ok.copy()
    r = reward[ok]
    if r.size and r.min() >= 0 and r.max() <= 1:
        sm = np.full_like(reward, np.nan)
        sm[ok] = smooth(reward, max(3, int(ok.sum()) // 10))
        live = np.isfinite(sm) & (sm < SATURATED)
    if live.sum() < 3:
        live = np.arange(reward.size) < max(3, reward.size // 2)
    return live


def _ended(late: np.ndarray, vals: np.ndarray, source: str, reward: np.ndarray,
           live: np.ndarray, binary_g: float | None) -> bool:  # fmt: skip
    """Whether a degeneracy that held over the run has ended: its share itself (not a lower
    bound) is below DEGENERACY_MAX in the second half by Z95 standard errors, the error no
    smaller than the logged shares' spread over the run / sqrt(second-half values) (3 equal
    values have a lag-1 error of 0), and, for a reward known to be a mean of 0/1 rewards, the
    i.i.d. lower bound at the second half's success rate not above DEGENERACY_MAX either (a
    share logged as 0 three times at a 2% rate, G = 8, read 'ended' against a bound of 85%;
    review, 2026-12-05). binary_g: G when the reward is known to be such a mean, else None."""
    if source == ZERO_STD_SOURCE:
        return False
    se = max(mean_se(late), float(np.std(vals)) / math.sqrt(late.size))
    if float(np.mean(late)) + Z95 * se >= DEGENERACY_MAX:
        return False
    if binary_g is None:
        return True
    rate = float(np.nanmean(reward[second_half(live)]))
    return bool(iid_degeneracy(rate, binary_g, strict=False) <= DEGENERACY_MAX)


def _truncation(s: Signals, ev: dict) -> str:
    """The clause naming completions cut at the length limit when more than TRUNCATION_MAX are
    over the run's last tenth (the `truncated_completions` check's reading, the run's
    `max_completion_length` setting when given), its share and source added to `ev`; else ''."""
    cut = truncation_per_step(s)  # read per step, before a long log was binned
    if cut is None or cut[0] <= TRUNCATION_MAX:
        return ""
    ev["truncated_share"], ev["truncated_source"] = cut[0], cut[1].source
    return truncation_cause(*cut)


GROUPS_OF_ONE = (
    "groups of one completion (group_size 1): no group-relative advantage to lose, so advantage "
    "degeneracy does not apply (a sign advantage or a critic needs no spread within a group)"
)
"""Why `advantage_degeneracy` does not apply at G = 1: a group of one never has a reward spread
(its logged zero-spread share is 1 and p^G + (1-p)^G is 1 by construction), which read "100% of
groups have no reward spread ... raise group_size, switch to advantage='sign'" on a run that
used the sign advantage (a review, session 37)."""


@DIAGNOSTIC_RULES.register("advantage_degeneracy")
def advantage_degeneracy(s: Signals) -> ModeVerdict:
    """Most groups carry no advantage (all-equal rewards): gradient starvation (arXiv
    2605.07689). Fires when the zero-spread share exceeds DEGENERACY_MAX by Z95 standard errors
    (of a mean of autocorrelated steps, one-sided 5%); the i.i.d. prediction p^G + (1-p)^G
    (a lower bound, Jensen) serves only a reward in [0, 1], and alone only a known mean of 0/1
    rewards. Nothing assumes a reward scale."""
    name = "advantage_degeneracy"
    g = s.hyper("group_size")
    if g is not None and g < 2:  # pgrpo's sign advantage, a critic's PPO: one per prompt
        return not_applicable(name, GROUPS_OF_ONE)
    missing = [] if g is not None else ["group_size"]
    # on the 0/1 scale of the reward's known range: a -1/+1 reward is a mean of 0/1 rewards
    reward = s.unit_reward() if s.has("reward") else np.full_like(s.steps, np.nan)
    ok = np.isfinite(reward)
    prediction = iid_prediction(s)  # the report draws the same one
    iid, binary = prediction.values, prediction.alone
    live = _live_steps(reward)
    deg, source, passed = zero_spread_now(s.columns, live, s.steps)
    if passed:  # logged early only: it says nothing of the run now (and a rounding kept)
        passed += [f"reward_std: {source}"] * bool(deg is None and source)
        missing.append(f"the zero-spread share in the run's second half ({'; '.join(passed)})")
    if deg is None and not passed:  # source: why a reward_std gives no bound (rounded), or ''
        missing.append(
            f"{_lack(s, 'frac_reward_zero_std', 4)} (or degeneracy/all_pass + all_fail, or "
            f"reward_std{'; ' + source if source else ''})"
        )
    if deg is None and (iid is None or not binary):
        # the i.i.d. bound alone needs a reward known to be a mean of N 0/1 rewards
        if iid is not None:
            missing.append("batch_prompts (to tell a mean of 0/1 rewards from a [0, 1] score)")
        why = (
            f"no degeneracy signal{' in the second half' * bool(passed)}, and the reward is "
            "not known to be a mean of 0/1 rewards"
        )
        return cannot_judge(name, missing + ["reward"] * (not s.has("reward")), why)
    ev: dict[str, float | str] = {"unsaturated_steps": float(live.sum())}
    if iid is not None:
        ev["iid_prediction"] = float(np.nanmean(iid[live]))
        if binary:
            # at the pooled mean: f_G is convex, so f_G at each step's noisy batch mean is
            # biased upward and its average was no lower bound (a true 40% read 57% at B = 1,
            # G = 4); f_G(pooled p) <= the mean over steps and prompts of f_G(p) (Jensen)
            pooled = float(np.nanmean(reward[live]))
            ev["iid_prediction"] = float(iid_degeneracy(pooled, g, strict=False))
    if deg is not None:
        ev["degeneracy"] = level = float(np.nanmean(deg[live]))
        ev["degeneracy_source"] = source
        ev["degeneracy_steps_logged"] = float((live & np.isfinite(deg)).sum())
        if "iid_prediction" in ev and source != ZERO_STD_SOURCE:
            ev["jensen_gap"] = level - float(ev["iid_prediction"])  # not from a lower bound
        vals = deg[live][np.isfinite(deg[live])]
        if source == ZERO_STD_SOURCE and iid is not None and level < ev["iid_prediction"]:
            # two lower bounds (zero-spread steps; Jensen for 0/1 rewards): take the larger
            if binary:
                level = ev["degeneracy_lower_bound"] = float(ev["iid_prediction"])
                vals = iid[live][np.isfinite(iid[live])]
    else:  # the i.i.d. prediction is a lower bound on the true rate (Jensen)
        level = float(ev["iid_prediction"])
        ev["degeneracy_lower_bound"] = level
        vals = iid[live][np.isfinite(iid[live])]
    ev.update(zero_spread_split(s, deg, live, reward))
    se = mean_se(vals)
    ev["degeneracy_se"] = se
    if s.has("frac_gradient_tokens"):
        ev["frac_gradient_tokens"] = float(np.nanmean(s.get("frac_gradient_tokens")[live]))
    raw = s.get("reward") if s.has("reward") else reward
    ev["reward_mean"] = float(np.nanmean(raw[live])) if ok.any() else math.nan  # its own units
    strength = confidence(level - DEGENERACY_MAX - Z95 * se, 0.0, 0.1)
    measured = deg is not None and "degeneracy_lower_bound" not in ev  # (not the i.i.d. bound,
    late = deg[second_half(live) & np.isfinite(deg)] if deg is not None else np.empty(0)
    if measured and late.size >= 3:  # read at the pooled mean; a share 0 -> 1 read "no" at 0.91:
        # the step inflated the lag-1 SE of the whole run's mean; review, 2026-12-05). The
        ev["degeneracy_late"] = late_level = float(np.mean(late))  # second half: starved now
        ev["degeneracy_late_se"] = late_se = mean_se(late)
        late_strength = confidence(late_level - DEGENERACY_MAX - Z95 * late_se, 0.0, 0.1)
        if strength > 0.5 and _ended(late, vals, source, reward, live, g if binary else None):
            # starved early, not now: the share itself (not a lower bound on it) is measured
            # below the threshold in the second half (one-sided 5%), so the alarm and its action
            # would be stale; the finding says it ended
            ev["degeneracy_ended"], ev["degeneracy_threshold"] = 1.0, DEGENERACY_MAX
        strength = late_strength if "degeneracy_ended" in ev else max(strength, late_strength)
    if (deg is None or source == ZERO_STD_SOURCE) and strength <= 0.5:
        # lower bounds only (zero-spread steps, the i.i.d. prediction): above the threshold they
        # show degeneracy, below it they rule nothing out (a "no" read confidence 1.00 on a
        # bound of 0.02 under a 0.15 i.i.d. bound; review, 2026-12-04)
        where = "below" if level < DEGENERACY_MAX else "not significantly above"
        ev["reason"] = (
            f"the log gives lower bounds on the zero-spread share only ({lower_bounds(ev)}), "
            f"{where} {DEGENERACY_MAX:.0%}: they cannot rule degeneracy out"
        )
        if not any(m.startswith("frac_reward_zero_std") for m in missing):
            missing.append("frac_reward_zero_std (the zero-spread share itself)")
        return ModeVerdict(name, False, 0.0, ev, "", missing)
    mean = float(np.nanmean(reward[live])) if ok.any() else 0.5
    action = degeneracy_action(ev, reward, mean, _truncation(s, ev))
    cov = 1.0 if deg is not None else 0.5
    return verdict(name, strength, ev, action=action, missing=missing, coverage=cov)
