"""A diagnosis in plain words: the progress verdict first, then one sentence per detected mode,
each with the number that supports it and the action. The evidence tables stay below it in the
CLI and the HTML report."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pgrpo.diagnose.nullmodel import fmt_p, fmt_share
from pgrpo.diagnose.progresstext import checkpoint_words
from pgrpo.diagnose.starvation import ZERO_STD_SOURCE
from pgrpo.diagnose.verdict import FIRM_CONFIDENCE, NEAR_CEILING


def _f(v: Any, fmt: str = ".3g") -> str:
    if not isinstance(v, int | float) or not math.isfinite(v):
        return "-"
    return fmt_share(v) if fmt == ".0%" else format(v, fmt)


def _hacking(ev: dict) -> str:
    if "eval_gain" in ev and "train_gain" in ev:
        return (
            f"Reward hacking: train reward changed by {_f(ev['train_gain'], '+.3g')} between the "
            f"first and last eval while eval accuracy changed by {_f(ev['eval_gain'], '+.3g')}."
        )
    if isinstance(ev.get("format_gain_share"), float) and ev["format_gain_share"] > 0.5:
        return (
            f"Reward hacking: {ev['format_gain_share']:.0%} of the reward gain comes from "
            "format-like reward functions."
        )
    return (
        f"Reward hacking: completions grew x{_f(ev.get('length_ratio'), '.1f')} while the "
        "reward rose (length alone is weak evidence)."
    )


def _logged_on(ev: dict) -> str:
    """'; on the N of M judged steps that log it' where the share is logged on part of them."""
    logged, judged = ev.get("degeneracy_steps_logged"), ev.get("unsaturated_steps")
    if isinstance(logged, float) and isinstance(judged, float) and logged < judged:
        return f"; on the {logged:.0f} of {judged:.0f} judged steps that log it"
    return ""


def _degeneracy(ev: dict) -> str:
    source = str(ev.get("degeneracy_source", ""))
    if "degeneracy_lower_bound" in ev:
        level = ev["degeneracy_lower_bound"]
        how = "at least, by the i.i.d. lower bound p^G + (1-p)^G of the mean reward"
        if source:
            how += f"; {ev['degeneracy']:.0%} of steps had reward_std == 0"
    elif source == ZERO_STD_SOURCE:
        level, how = ev["degeneracy"], "at least: the share of steps with reward_std == 0"
    else:
        level, how = ev.get("degeneracy"), f"from {source or 'the log'}"
    how = f"({how}{_logged_on(ev)})"
    split = ""
    if isinstance(ev.get("all_fail"), float) and isinstance(ev.get("all_pass"), float):
        split = f"; all-fail {ev['all_fail']:.0%}, all-pass {ev['all_pass']:.0%}"
    elif isinstance(ev.get("zero_spread_steps_at_min"), float):
        split = (
            f"; of the zero-spread steps {ev['zero_spread_steps_at_min']:.0%} sit at the bottom "
            f"of the reward's scale (all fail), {ev.get('zero_spread_steps_at_max', 0.0):.0%} at "
            "its top (all pass)"
        )
    return (
        f"Advantage degeneracy: {_f(level, '.0%')} of groups have no reward spread {how}, so "
        f"they give no gradient{split}."
    )


REWARD_MEANWHILE = {
    "saturated": "while the reward reached its ceiling",
    "near_ceiling": f"while the reward came within {NEAR_CEILING:.0%} of its ceiling",
    "learning": "while the reward still rises",
    "plateau": "and the reward has levelled off",
    "flat": "and the reward has not moved beyond noise",
    "declining": "and the reward is falling",
    "collapsed": "and the reward collapsed",
}
"""What the reward did beside a concentrated policy (`concentration.policy_concentration`'s
reward_progress: the progress label), in the finding's sentence."""


def _concentration(ev: dict) -> str:
    if isinstance(ev.get("entropy_ratio"), float):
        meanwhile = REWARD_MEANWHILE.get(str(ev.get("reward_progress", "")), "")
        return (
            f"Policy concentration: entropy fell to {ev['entropy_ratio']:.0%} of its start "
            f"(lowest in the first quarter: {_f(ev.get('entropy_ratio_early'), '.0%')})"
            + (f" {meanwhile}." if meanwhile else ".")
        )
    if isinstance(ev.get("clip_ratio"), float):
        return f"Policy concentration: {ev['clip_ratio']:.0%} of tokens are clipped."
    return (
        f"Policy concentration: KL to the reference grew x{_f(ev.get('kl_late_growth'))} over "
        f"the second half ({_f(ev.get('kl_mid'))} at mid-run, {_f(ev.get('kl_last'))} over the "
        "last tenth)."
    )


def _instability(ev: dict) -> str:
    bad = [k for k in ev if k.startswith("nonfinite_") and k.endswith("_step")]
    if bad:
        col = bad[0][len("nonfinite_") : -len("_step")]
        return f"Dynamical instability: {col} went NaN/inf at step {_f(ev[bad[0]], 'g')}."
    if ev.get("nonfinite_reward_rows"):
        return f"Dynamical instability: {ev['nonfinite_reward_rows']:.0f} rewards were NaN/inf."
    if isinstance(ev.get("stability_margin"), float) and ev["stability_margin"] >= 1.0:
        from pgrpo.diagnose.instability import kappa_words

        assumed = (" (assumed: no K given, and every K is at least 1)"
                   if ev.get("refresh_interval_assumed") else "")  # fmt: skip
        return (
            f"Dynamical instability: the refresh interval K={_f(ev['refresh_interval'], 'g')}"
            f"{assumed} is at or above the threshold K*={_f(ev['k_star'], '.0f')} "
            f"(kappa from {kappa_words(ev.get('kappa_source'))})."
        )
    p = {k: ev.get(k, 1.0) for k in ("oscillation_growth_p", "spectral_peak_p", "peak_drop_p")}
    from pgrpo.diagnose.instability import growth_counts  # the rule's decision, one definition

    if not growth_counts(ev):  # not what fired (`instability`)
        p["oscillation_growth_p"] = 1.0
    if isinstance(ev.get("grad_norm_growth"), float) and min(p.values()) >= 0.01:
        return f"Dynamical instability: the gradient norm grew x{ev['grad_norm_growth']:.0f}."
    key = min(p, key=p.get)
    if key == "oscillation_growth_p":
        return (
            f"Dynamical instability: the swings of the reward grew x"
            f"{_f(ev['oscillation_growth'], '.1f')} from the first to the last third "
            f"({fmt_p(p[key])} against {ev.get('null_model', 'noise')})."
        )
    if key == "spectral_peak_p":
        return (
            f"Dynamical instability: the reward oscillates with a period of about "
            f"{_f(ev.get('spectral_peak_period_points'), '.0f')} logged points, beyond batch "
            f"noise ({fmt_p(p[key])} against {ev.get('null_model', 'noise')})."
        )
    return (
        f"Dynamical instability: the reward fell back to or below its start after rising "
        f"({fmt_p(p[key])})."
    )


def _degeneracy_ended(ev: dict) -> str:
    return (
        f"Advantage degeneracy has ended: over the run {_f(ev.get('degeneracy'), '.0%')} of "
        f"groups had no reward spread (from {ev.get('degeneracy_source', 'the log')}"
        f"{_logged_on(ev)}), in its second half {_f(ev.get('degeneracy_late'), '.0%')} "
        f"(significantly below the {_f(ev.get('degeneracy_threshold'), '.0%')} the mode needs), "
        "so the early steps gave little gradient and the later ones do not starve."
    )


ENDED_ACTION = (
    "the starvation itself needs nothing now (the progress verdict says whether the run learns); "
    "in the next run, an easier start (a curriculum or easier prompts first) or a larger group "
    "lets the first steps learn"
)
ENDED: dict[str, tuple[str, Callable[[dict], str]]] = {
    # a mode that held early and is measured not to hold now: (evidence key, sentence)
    "advantage_degeneracy": ("degeneracy_ended", _degeneracy_ended),
}

SENTENCES: dict[str, Callable[[dict], str]] = {
    "reward_hacking": _hacking,
    "advantage_degeneracy": _degeneracy,
    "policy_concentration": _concentration,
    "dynamical_instability": _instability,
}


SPREAD_LABELS = ("collapsed", "declining", "flat")
"""Progress labels beside which a rising entropy is named (not beside a rise, where an entropy
bonus or clip-higher raise it on purpose)."""


SPREAD_FLAT_ACTION = (
    "the reward did not move while the policy spread out: lower the learning rate or the "
    "refresh interval K (the updates per rollout batch: TRL num_iterations, verl ppo_epochs), "
    "clip gradients and check sampler/learner log-prob agreement; then check that rewards vary "
    "within groups"
)
"""The action beside `flat` when the entropy rose (`_entropy_spread`), in place of the flat
verdict's "nothing is being learned: check ... that the learning rate is not too small": a
policy that spread out while nothing was learned points at too large an update, not too small
(a review, 2026-12-06: the CS336 run at 16 off-policy epochs per batch, entropy x7)."""


def _entropy_spread(progress: Any, modes: list[Any]) -> tuple[str, str]:
    """Beside a reward that fell or did not move (`progress`: its verdict, SPREAD_LABELS): the
    entropy rose to at least BLOWUP x its start (`instability.entropy_rise`, in the instability
    mode's evidence, of `modes`), so the policy spread out rather than narrowed, and the
    checkpoints worth keeping come before it first did. (sentence, the steps worth keeping as
    "from step A to B"), each '' where not said."""
    from pgrpo.diagnose.instability import BLOWUP  # the rule's threshold, one definition

    inst = [v for v in modes if v.name == "dynamical_instability"]
    if progress.label not in SPREAD_LABELS or not inst:
        return "", ""
    ev = inst[0].evidence
    rise = ev.get("entropy_rise")
    if not (isinstance(rise, float) and rise >= BLOWUP):
        return "", ""
    at = ev.get("entropy_rise_step", math.nan)
    when = f", first above {BLOWUP:g}x it at step {at:g}" if math.isfinite(at) else ""
    # a checkpoint bound only where the entropy rose inside or after the best reward window:
    # one rising before it would send the user back before the learning (a review, 2026-12-06)
    pv = progress.evidence
    lo, hi = pv.get("best_from", math.nan), pv.get("best_to", math.nan)
    keep = ""
    if progress.label != "flat" and lo < at:
        end = f"{hi:g}" if hi < at else f"just before {at:g}"
        keep = f"from step {lo:g} to {end}"
    before = f": the checkpoints worth keeping are {keep}" if keep else ""
    return (
        f" Meanwhile the entropy rose x{rise:.1f} from its start ({_f(ev['entropy_start'])} to "
        f"{_f(ev['entropy_end'])} over the last tenth{when}): the policy spread out (diverged) "
        f"rather than narrowed{before}.",
        keep,
    )


def spread_progress(progress: Any, modes: list[Any]) -> Any:
    """`progress` with the action its entropy sentence calls for (`_entropy_spread`): beside a
    flat reward, SPREAD_FLAT_ACTION; beside a fall, the checkpoint narrowed to the ones worth
    keeping. `diagnose` applies it once, so the verdict's action, the `healthy` row's, the
    findings and the report agree (session 37: the findings said "from step 1 to just before
    4" beside a progress action and a healthy row that said "within steps 1-8")."""
    if progress is None:
        return None
    spread, keep = _entropy_spread(progress, modes)
    action = SPREAD_FLAT_ACTION if spread and progress.label == "flat" else progress.action
    if keep:
        action = action.replace(
            checkpoint_words(progress.evidence),
            f"a checkpoint {keep} (in the best window, before the policy spread out)",
        )
    return progress if action == progress.action else replace(progress, action=action)


def findings(diagnosis: Any) -> list[dict[str, str]]:
    """[{"about", "sentence", "action"}]: progress, each detected mode, then what is healthy
    or could not be judged."""
    out = []
    if diagnosis.progress is not None:
        pv = diagnosis.progress  # its action follows the entropy already (`diagnose`)
        spread, _ = _entropy_spread(pv, diagnosis.modes)
        out.append({"about": f"progress: {pv.label}", "sentence": pv.summary + spread,
                    "action": pv.action})  # fmt: skip
    modes = [v for v in diagnosis.modes if v.name in SENTENCES]
    for v in modes:
        if v.detected:
            weak = (
                f" Weak evidence: confidence {v.confidence:.2f}, below the {FIRM_CONFIDENCE:g} "
                "at which `--fail-on fail` fails (some of the signals this mode reads are not "
                "logged)."
                if v.confidence < FIRM_CONFIDENCE
                else ""
            )
            out.append({"about": v.name, "sentence": SENTENCES[v.name](v.evidence) + weak,
                        "action": v.action})  # fmt: skip
        elif v.name in ENDED and v.evidence.get(ENDED[v.name][0]):
            out.append({"about": f"{v.name} (ended)", "sentence": ENDED[v.name][1](v.evidence),
                        "action": ENDED_ACTION})  # fmt: skip
    judged = [v.name for v in modes if v.judged and not v.detected]
    moot = [v for v in modes if v.evidence.get("not_applicable")]  # ruled out by the settings
    unjudged = [v.name for v in modes if not v.judged and v not in moot]
    if judged and not any(v.detected for v in modes):
        healthy = diagnosis.healthy is not None and diagnosis.healthy.detected  # >= 2 judged
        out.append({
            "about": "healthy" if healthy else "no failure mode found",
            "sentence": f"No failure mode found among the {len(judged)} the log lets us judge "
            f"({', '.join(judged)}); each test is set to fire on 0.5% of noise curves, and on "
            "the noise curves measured no alarm fired on more than 3.5% of them.",
            "action": "",
        })  # fmt: skip
    for v in moot:
        out.append({"about": f"{v.name} (does not apply)",
                    "sentence": f"{v.evidence['reason'][0].upper()}{v.evidence['reason'][1:]}.",
                    "action": ""})  # fmt: skip
    if unjudged:
        out.append({
            "about": "not judged",
            "sentence": f"Not enough evidence to judge {', '.join(unjudged)}: the log lacks the "
            "signals listed under 'missing'.",
            "action": "log what 'missing' lists for each of them (entropy, KL, completion "
            "lengths, frac_reward_zero_std, per-function rewards, an eval accuracy, ...) to "
            "judge them",
        })  # fmt: skip
    return out
