"""The `policy_concentration` rule: the policy sharpens too fast (entropy collapse, overall or
early; KL to the reference still doubling over the second half; a large share of clipped
tokens), and its action by what the reward did meanwhile (`assess_signals`' label, and under a
known range how near the ceiling it is). Split from `rules.py` (2026-12-06), which holds the
other rules; registered like them in `DIAGNOSTIC_RULES`.
"""

from __future__ import annotations

import math

import numpy as np

from pgrpo.diagnose.progress import assess_signals
from pgrpo.diagnose.rules import MIN_STEPS, _lack
from pgrpo.diagnose.signals import Signals, finite, smooth, window_mean
from pgrpo.diagnose.verdict import (
    DIAGNOSTIC_RULES,
    NEAR_CEILING,
    ModeVerdict,
    cannot_judge,
    confidence,
    verdict,
)

ENTROPY_COLLAPSE = 0.1  # final / initial entropy
ENTROPY_FAST = 0.2  # ... or this ratio reached within the first FAST_FRACTION of the run
FAST_FRACTION = 0.25
KL_RUNAWAY = 2.0  # KL over the last 10% / KL at mid-run, with final KL above KL_FLOOR
KL_FLOOR = 0.05
CLIP_HIGH = 0.2  # mean clipped-token fraction over the second half


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
    ev: dict[str, float | str] = {}
    missing: list[str] = []
    strengths = []
    e_strength = 0.0
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
    action = CONCENTRATION_ACTION
    if e_strength > 0.5 and s.has("reward", MIN_STEPS):  # the entropy fell: what did the reward?
        label = assess_signals(s, fit=False).label
        span = s.reward_range()
        if span is not None and label in ("plateau", "learning"):
            # a known range tells a rise near its ceiling (held-back verl run: GSM8K train
            # reward 0.977 of 1 was told "the policy is collapsing"; a review, 2026-12-06) from a
            # plateau below it, where the concentration is the likely reason (the collapse advice)
            lo, hi = span
            ev["reward_headroom"] = (hi - window_mean(s.get("reward"), 0.9, 1.0)) / (hi - lo)
            label = "near_ceiling" if ev["reward_headroom"] <= NEAR_CEILING else label
        ev["reward_progress"] = label
        below_ceiling = span is not None and label == "plateau"
        action = CONCENTRATION_ACTION if below_ceiling else CONCENTRATION_ACTIONS.get(label, action)
        if label in EXPECTED_END:  # a fact about the run, not a failure: the CI gate warns
            ev["expected_end"] = 1.0
    return verdict(
        name, max(strengths), ev, action=action, missing=missing, coverage=len(strengths) / 3
    )


CONCENTRATION_ACTION = (
    "the policy is collapsing: lower the learning rate, add or raise the KL penalty (kl_coef / "
    "beta), use a higher sampling temperature or an entropy bonus, and watch pass@k"
)
"""The action where the reward has stopped rising below its ceiling, or fell, or is not logged:
the concentration is then the likely reason (entropy and reward trade off: once the entropy is
spent, the reward stops rising; Cui et al. 2025, "The Entropy Mechanism of Reinforcement
Learning for Reasoning Language Models"); and where the mode fired on the clip ratio or KL
alone."""
EXPECTED_END = ("saturated", "near_ceiling")
"""Progress beside which a concentrated policy is the expected end of a run: the mode's evidence
then carries `expected_end` 1, which `pgrpo diagnose --fail-on fail` reads as a warning, not a
failure (`cli._checks.gate_level`)."""
CONCENTRATION_ACTIONS = {
    "near_ceiling": f"the reward is within {NEAR_CEILING:.0%} of its ceiling, so a narrow policy "
    "is what solving the task looks like, not a collapse to fix: stop when the gain is enough, "
    "move to harder prompts to keep learning, and sample at a higher temperature if you need "
    "diverse answers (pass@k)",
    "saturated": "the reward is at its ceiling, so a narrow policy is the expected end of the "
    "run, not a failure: stop here; sample at a higher temperature if you need diverse answers "
    "(pass@k)",
    "learning": "the reward still rises, but with so little entropy left its gains usually stop "
    "soon: to keep exploring, lower the learning rate, raise the sampling temperature or add an "
    "entropy bonus (or clip-higher), and watch pass@k",
    "plateau": "if the plateau is below what the task allows, the concentration is the likely "
    "reason: lower the learning rate, add or raise the KL penalty (kl_coef / beta), use a higher "
    "sampling temperature or an entropy bonus, and watch pass@k; if it is the task's ceiling, "
    "stop here (give the reward's range, --reward-range, to let the verdict tell)",
}
"""`policy_concentration`'s action by the reward's progress label (`assess_signals`) where it
differs from CONCENTRATION_ACTION, when the entropy fell (not on the clip ratio or KL alone,
which say nothing of entropy left). Under a known reward range a `plateau` or `learning` run
whose last tenth is within NEAR_CEILING of the top reads `near_ceiling`, and a plateau below
that gets CONCENTRATION_ACTION; with the range unknown a plateau gets the hedged advice
(held-back runs: entropy at 6% of its start beside a reward at 0.98 was told "the policy is
collapsing: lower the learning rate", round 15; with the range given, the same at 0.977 until
2026-12-06)."""
