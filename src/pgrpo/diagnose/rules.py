"""The four failure-mode rules of the dynamics paper (arXiv 2606.30789), on whatever a log holds.

Each rule reads `Signals`, computes its evidence figures, fires when a figure crosses a threshold
calibrated on deliberately broken bandit runs (docs/diagnostics.md, `pgrpo.diagnose.scenarios`),
and lists the signals it missed. Thresholds are module constants so that they are visible.
"""

from __future__ import annotations

import math
import re

import numpy as np

from pgrpo.diagnose.signals import Signals, finite, smooth, window_mean
from pgrpo.diagnose.verdict import DIAGNOSTIC_RULES, ModeVerdict, cannot_judge, confidence, verdict

MIN_STEPS = 8
# reward hacking
HACK_MIN_TRAIN_GAIN = 0.05  # train reward must rise at least this much for "gain without eval"
HACK_EVAL_SHARE = 0.25  # eval gain below this share of the train gain = divergence
LENGTH_BLOWUP = 2.5  # final / initial mean completion length
FORMAT_SHARE = 0.7  # share of the reward gain from format-like reward functions
# advantage degeneracy
DEGENERACY_MAX = 0.5  # fraction of groups with zero reward spread while reward < SATURATED
SATURATED = 0.85
# policy concentration
ENTROPY_COLLAPSE = 0.1  # final / initial entropy
ENTROPY_FAST = 0.2  # ... or this ratio reached within the first FAST_FRACTION of the run
FAST_FRACTION = 0.25
KL_RUNAWAY = 2.0  # KL over the last 10% / KL at mid-run, with final KL above KL_FLOOR
KL_FLOOR = 0.05
CLIP_HIGH = 0.2  # mean clipped-token fraction over the second half
# dynamical instability
OSCILLATION_GROWTH = 2.0  # late / early residual amplitude
SWING_MIN = 0.3  # reward retraced back and forth over the second half (smoothed)
DIVERGENCE_DROP = 0.5  # fall from the peak as a share of the rise to it
GRAD_BLOWUP = 10.0


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


def _reward_at(s: Signals, step: float) -> float:
    """Smoothed train reward at the logged step nearest to `step`."""
    ok = np.isfinite(s.get("reward"))
    steps, r = s.steps[ok], smooth(s.get("reward"), max(3, int(ok.sum()) // 10))
    return float(r[int(np.argmin(np.abs(steps - step)))])


# ---------------------------------------------------------------------------------------------
# reward hacking
# ---------------------------------------------------------------------------------------------


def _format_gain_share(s: Signals) -> tuple[float, float] | None:
    """(share of reward-function gain from format-like functions, gain of the others)."""
    comps = {m.group(1): s.get(k) for k in s.columns if (m := re.match(r"rewards/(.+)/mean$", k))}
    if len(comps) < 2:
        return None
    gains = {name: _rel_gain(col)[2] for name, col in comps.items() if finite(col).size >= 4}
    fmt = sum(max(g, 0.0) for n, g in gains.items() if re.search(r"format|length|style", n))
    other = sum(g for n, g in gains.items() if not re.search(r"format|length|style", n))
    total = fmt + max(other, 0.0)
    return (fmt / total if total > 0 else 0.0), other


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
        train_gain = _reward_at(s, s1) - _reward_at(s, s0)
        ev.update(train_gain=train_gain, eval_gain=e1 - e0, eval_first=e0, eval_last=e1)
        if train_gain > HACK_MIN_TRAIN_GAIN:
            gap = train_gain * (1 - HACK_EVAL_SHARE) - (e1 - e0)  # > 0: eval lags the reward
            strengths.append(confidence(gap, 0.0, 0.05))
        else:
            strengths.append(confidence(e0 - e1 - 0.05, 0.0, 0.05))  # eval falling on its own
    else:
        missing.append("eval accuracy (--eval-log with >= 2 steps, or an eval/accuracy column)")
    if s.has("completions/mean_length", 4):
        l0, l1, _ = _rel_gain(s.get("completions/mean_length"))
        ratio = l1 / l0 if l0 > 0 else math.nan
        ev["length_ratio"] = ratio
        rising = _rel_gain(s.get("reward"))[2] > HACK_MIN_TRAIN_GAIN
        # length growth alone is also how reasoning improves: weak evidence, capped at 0.7
        strengths.append(min(0.7, confidence(ratio, LENGTH_BLOWUP, 0.5)) if rising else 0.0)
    else:
        missing.append(_lack(s, "completions/mean_length", 4))
    fmt = _format_gain_share(s)
    if fmt is not None:
        ev["format_gain_share"], ev["content_reward_gain"] = fmt
        strengths.append(confidence(fmt[0], FORMAT_SHARE, 0.1) if fmt[1] < 0.02 else 0.0)
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


def _iid_degeneracy(reward: np.ndarray, g: float) -> np.ndarray:
    """f_G(p) = p^G + (1 - p)^G: i.i.d. Bernoulli chance that a group is all-equal (binary)."""
    p = np.clip(reward, 0.0, 1.0)
    return p**g + (1 - p) ** g


@DIAGNOSTIC_RULES.register("advantage_degeneracy")
def advantage_degeneracy(s: Signals) -> ModeVerdict:
    """Most groups carry no advantage (all-equal rewards) while the task is unsolved: gradient
    starvation (arXiv 2605.07689). Judged on the steps whose smoothed reward is below SATURATED."""
    name = "advantage_degeneracy"
    g = s.hyper("group_size")
    missing = [] if g is not None else ["group_size"]
    if s.has("frac_reward_zero_std", 4):
        deg = s.get("frac_reward_zero_std")
    elif s.has("degeneracy/all_pass", 4) and s.has("degeneracy/all_fail", 4):
        deg = s.get("degeneracy/all_pass") + s.get("degeneracy/all_fail")
    else:
        deg = None
        what = _lack(s, "frac_reward_zero_std", 4)
        missing.append(f"{what} (or degeneracy/all_pass + degeneracy/all_fail)")
    if deg is None and (g is None or not s.has("reward", 4)):
        return cannot_judge(
            name, missing + ["reward"] * (not s.has("reward")), "no degeneracy signal"
        )
    reward = s.get("reward") if s.has("reward") else np.full_like(s.steps, np.nan)
    sm = np.full_like(reward, np.nan)
    ok = np.isfinite(reward)
    if ok.any():
        sm[ok] = smooth(reward, max(3, int(ok.sum()) // 10))
    live = np.isfinite(sm) & (sm < SATURATED)
    if live.sum() < 3:
        live = np.arange(sm.size) < max(3, sm.size // 2)
    ev: dict[str, float] = {"unsaturated_steps": float(live.sum())}
    if g is not None and ok.any():
        iid = (
            _iid_degeneracy(reward, g)
            if not s.has("degeneracy/iid_prediction")
            else (s.get("degeneracy/iid_prediction"))
        )
        ev["iid_prediction"] = float(np.nanmean(iid[live]))
    if deg is not None:
        ev["degeneracy"] = level = float(np.nanmean(deg[live]))
        for part in ("all_fail", "all_pass"):
            if s.has(f"degeneracy/{part}"):
                ev[part] = float(np.nanmean(s.get(f"degeneracy/{part}")[live]))
        if "iid_prediction" in ev:
            ev["jensen_gap"] = level - ev["iid_prediction"]
    else:  # the i.i.d. prediction is a lower bound on the true rate (Jensen)
        level = ev["iid_prediction"]
        ev["degeneracy_lower_bound"] = level
    if s.has("frac_gradient_tokens"):
        ev["frac_gradient_tokens"] = float(np.nanmean(s.get("frac_gradient_tokens")[live]))
    ev["reward_mean"] = float(np.nanmean(reward[live])) if ok.any() else math.nan
    strength = confidence(level, DEGENERACY_MAX, 0.1)
    fail_heavy = ev.get("all_fail", 1 - ev["reward_mean"] if ok.any() else 1.0) >= ev.get(
        "all_pass", ev["reward_mean"] if ok.any() else 0.0
    )
    action = (
        "most groups are all-wrong: raise group_size, switch to advantage='sign' (pass@G failure "
        "descent) or 'dual_anchor', or filter prompts the model never solves"
        if fail_heavy
        else "most groups are all-correct: drop solved prompts or raise difficulty; 'dual_anchor' "
        "keeps a signal on homogeneous groups"
    )
    if "jensen_gap" in ev and ev["jensen_gap"] > 0.2:
        action += "; the rate far exceeds the i.i.d. prediction: difficulty is bimodal, filter it"
    cov = 1.0 if deg is not None else 0.5
    return verdict(name, strength, ev, action=action, missing=missing, coverage=cov)


# ---------------------------------------------------------------------------------------------
# policy concentration
# ---------------------------------------------------------------------------------------------


def _entropy_evidence(s: Signals) -> tuple[dict[str, float], float]:
    ent = finite(s.get("entropy"))
    e0 = float(np.mean(ent[: max(1, ent.size // 50)]))  # the start: collapse can take 10 steps
    sm = smooth(ent, max(3, ent.size // 20))
    ratio = float(np.mean(ent[-max(1, ent.size // 10) :])) / e0 if e0 > 0 else math.nan
    fast = sm[: max(1, int(FAST_FRACTION * ent.size))]
    fast_ratio = float(fast.min()) / e0 if e0 > 0 else math.nan
    below = np.nonzero(sm < 0.5 * e0)[0]
    ev = {
        "entropy_first": e0,
        "entropy_ratio": ratio,
        "entropy_ratio_early": fast_ratio,
        "entropy_half_life_frac": float(below[0] / ent.size) if below.size else math.nan,
    }
    strength = max(
        confidence(ENTROPY_COLLAPSE - ratio, 0.0, 0.03),
        confidence(ENTROPY_FAST - fast_ratio, 0.0, 0.05),
    )
    return ev, strength


@DIAGNOSTIC_RULES.register("policy_concentration")
def policy_concentration(s: Signals) -> ModeVerdict:
    """The policy sharpens too fast: entropy collapse (overall or early), KL to the reference
    running away, or a large share of clipped tokens (steps too large for the trust region)."""
    name = "policy_concentration"
    ev: dict[str, float] = {}
    missing: list[str] = []
    strengths = []
    if s.has("entropy", MIN_STEPS):
        e_ev, e_strength = _entropy_evidence(s)
        ev.update(e_ev)
        strengths.append(e_strength)
    else:
        missing.append(_lack(s, "entropy", MIN_STEPS))
    if s.has("kl", MIN_STEPS):
        # KL to the initial policy starts at 0 by construction: judge whether it still grows
        # over the second half instead of growth from the start. Weak alone (capped at 0.65).
        kl = s.get("kl")
        mid, late = window_mean(kl, 0.45, 0.55), window_mean(kl, 0.9, 1.0)
        growth = late / mid if mid > 0 else math.nan
        ev.update(kl_mid=mid, kl_last=late, kl_late_growth=growth)
        cap = 0.5 if s.has("entropy", MIN_STEPS) else 0.65  # with entropy, KL only corroborates
        strengths.append(min(cap, confidence(growth, KL_RUNAWAY, 0.5)) if late > KL_FLOOR else 0.0)
    else:
        missing.append(_lack(s, "kl", MIN_STEPS))
    if s.has("clip_ratio/region_mean", 4):
        ev["clip_ratio"] = clip = window_mean(s.get("clip_ratio/region_mean"), 0.5, 1.0)
        strengths.append(confidence(clip, CLIP_HIGH, 0.05))
    else:
        missing.append(_lack(s, "clip_ratio/region_mean", 4))
    if not strengths:
        return cannot_judge(name, missing, "no entropy, KL or clip-ratio column")
    action = (
        "the policy is collapsing: lower the learning rate, add or raise the KL penalty "
        "(kl_coef / beta), use a higher sampling temperature or an entropy bonus, and watch pass@k"
    )
    return verdict(
        name, max(strengths), ev, action=action, missing=missing, coverage=len(strengths) / 3
    )


# ---------------------------------------------------------------------------------------------
# dynamical instability
# ---------------------------------------------------------------------------------------------


def _nonfinite_evidence(s: Signals) -> dict[str, float]:
    """Steps where reward / loss / grad_norm / kl went NaN or inf after having been finite."""
    ev = {}
    for col in ("reward", "loss", "grad_norm", "kl"):
        if col in s.columns:
            x = s.get(col)
            seen = np.nonzero(np.isfinite(x))[0]
            bad = np.isinf(x) | (
                np.isnan(x) & (np.arange(x.size) > (seen[0] if seen.size else x.size))
            )
            # a NaN after the column's last finite value, or an inf anywhere
            tail_nan = seen.size and seen[-1] < x.size - 1 and np.isnan(x[seen[-1] + 1 :]).all()
            if np.isinf(x).any() or tail_nan:
                ev[f"nonfinite_{col}_step"] = float(s.steps[int(np.argmax(bad))])
    return ev


def _oscillation_evidence(s: Signals) -> tuple[dict[str, float], float]:
    """Growth of fast residuals, back-and-forth swings of the smoothed curve in the second half
    (total variation minus net change: zero for a monotone curve), and a fall after the peak."""
    r = finite(s.get("reward"))
    width = max(5, r.size // 20)
    sm = smooth(r, width)
    resid = r - sm
    third = max(3, r.size // 3)
    early, late = float(np.std(resid[:third])), float(np.std(resid[-third:]))
    g, b = s.hyper("group_size"), s.hyper("batch_prompts")
    p = float(np.clip(np.mean(r), 0.02, 0.98))
    floor = math.sqrt(p * (1 - p) / (g * b)) if g and b else early
    growth = late / max(early, 0.5 * floor, 1e-9)
    half = sm[sm.size // 2 :]
    retrace = float(np.abs(np.diff(half)).sum() - abs(half[-1] - half[0])) / 2
    swing_floor = max(SWING_MIN, 10 * floor / math.sqrt(width))
    peak = int(np.argmax(sm))
    rise = sm[peak] - sm[0]
    drop = (sm[peak] - sm[-1]) / rise if rise > 0.05 else 0.0
    ev = {
        "oscillation_growth": growth,
        "residual_late": late,
        "noise_floor": floor,
        "swing_second_half": retrace,
        "peak_drop": float(drop),
    }
    strength = max(
        confidence(growth, OSCILLATION_GROWTH, 0.5) if late > 2 * floor else 0.0,
        confidence(retrace, swing_floor, 0.05),
        confidence(drop, DIVERGENCE_DROP, 0.1) if sm[peak] - sm[-1] > 0.1 else 0.0,
    )
    return ev, strength


def _k_star(a: float, beta1: float) -> float | None:
    """The exact refresh-interval threshold from pgrpo.dynamics (None when unavailable)."""
    import pgrpo.dynamics as dyn

    fn = getattr(dyn, "refresh_threshold", None)
    k_star = None if fn is None else fn(a, beta1).K_star
    return None if k_star is None else float(k_star)


def fitted_kappa(s: Signals) -> float | None:
    """kappa = k / lr from a ROM fit of the reward curve (None when the fit is poor, R^2 < 0.5,
    or the log has no learning rate)."""
    from pgrpo.dynamics import fit_curve

    lr = s.hyper("learning_rate")
    if lr is None or lr <= 0 or not s.has("reward", MIN_STEPS):
        return None
    r = s.get("reward")
    ok = np.isfinite(r)
    k_int = int(s.hyper("refresh_interval") or 1)
    from pgrpo.dynamics.logfit import thin_curve  # bin means past 4,000 steps (O(1) fit cost)

    step, reward, _ = thin_curve(s.steps[ok], r[ok])
    try:
        fit = fit_curve(step, reward, "rom", beta1=s.hyper("beta1"), refresh_interval=k_int)
    except (ValueError, RuntimeError, np.linalg.LinAlgError):
        return None
    if not fit.r2 >= 0.5 or "k" not in fit.params:
        return None
    kappa = fit.params["k"].value / lr
    return kappa if math.isfinite(kappa) and kappa > 0 else None


def _margin_evidence(s: Signals) -> tuple[dict[str, float], list[str]]:
    """K / K* from the run's hyperparameters and kappa (config, e.g. `pgrpo probe`, else a ROM
    fit of the reward curve with the logged learning rate)."""
    k_int, lr, beta1 = s.hyper("refresh_interval"), s.hyper("learning_rate"), s.hyper("beta1")
    missing = [n for n, v in (("refresh_interval", k_int), ("learning_rate", lr)) if v is None]
    if missing:
        return {}, missing
    kappa, source = s.hyper("kappa"), "config"
    if kappa is None:
        kappa, source = fitted_kappa(s), "reward fit"
    if kappa is None:
        return {}, ["kappa (probe it: `pgrpo probe`, or pass it in config.yaml)"]
    k_star = _k_star(lr * kappa, beta1 or 0.0)
    if k_star is None:
        return {}, ["K* (no unstable refresh interval found for these hyperparameters)"]
    ev = {
        "refresh_interval": k_int,
        "kappa": kappa,
        "kappa_source": source,
        "k_star": float(k_star),
        "stability_margin": k_int / k_star,
    }
    return ev, []


@DIAGNOSTIC_RULES.register("dynamical_instability")
def dynamical_instability(s: Signals) -> ModeVerdict:
    """The update is unstable: refresh interval K at or above the threshold K*, oscillations that
    grow, a collapse of reward after its peak, exploding gradient norm, or NaN/inf."""
    name = "dynamical_instability"
    ev: dict[str, float] = _nonfinite_evidence(s)
    if s.config.get("dropped_nonfinite_rewards"):
        ev["nonfinite_reward_rows"] = float(s.config["dropped_nonfinite_rewards"])
    strengths = [0.99] if ev else []
    margin_ev, missing = _margin_evidence(s)
    ev.update(margin_ev)
    if margin_ev:
        strengths.append(confidence(margin_ev["stability_margin"], 1.0, 0.1))
    if s.has("reward", MIN_STEPS):
        o_ev, o_strength = _oscillation_evidence(s)
        ev.update(o_ev)
        strengths.append(o_strength)
    else:
        missing.append(_lack(s, "reward", MIN_STEPS))
    if s.has("grad_norm", MIN_STEPS):
        gn = finite(s.get("grad_norm"))
        ev["grad_norm_growth"] = growth = float(
            np.median(gn[-max(1, gn.size // 10) :]) / max(np.median(gn[: gn.size // 2]), 1e-12)
        )
        strengths.append(confidence(growth, GRAD_BLOWUP, 3.0))
    else:
        missing.append(_lack(s, "grad_norm", MIN_STEPS))
    if not strengths:
        return cannot_judge(name, missing, "no reward, grad_norm or hyperparameters")
    if margin_ev and margin_ev["stability_margin"] >= 1.0:
        action = f"lower the refresh interval K below K*={margin_ev['k_star']:.0f} or lower lr"
    else:
        action = "lower the learning rate or the refresh interval K (num_iterations)"
    action += "; clip gradients and check sampler/learner log-prob agreement"
    return verdict(
        name, max(strengths), ev, action=action, missing=missing, coverage=len(strengths) / 3
    )
