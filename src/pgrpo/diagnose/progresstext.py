"""The progress verdict (`pgrpo.diagnose.progress`) in words: the summary that leads a diagnosis
and its action, from the verdict's evidence, with the numbers that support it."""

from __future__ import annotations

import math
from typing import Any

from pgrpo.diagnose import nullmodel as nm

POSSIBLE_P = 0.05
"""A `flat` verdict whose end window lies above its start window at this one-sided level (the
gain test; the verdict asks for `progress.ALPHA`) says "a possible rise" (one whose 95% interval
of the straight-line change leaves out 0 says "a possible slow rise")."""


def possible_drift(ev: dict[str, Any]) -> str | None:
    """A `flat` verdict's drift short of the verdict's level: "rise" when its end window lies
    above its start window at `POSSIBLE_P` (the gain test) or the 95% interval of the
    straight-line change lies above 0, "fall" when that interval lies below 0, else None. The
    one reading for the flat words and the live flat alert (`live._decide`: a possible rise
    withholds the flat stop)."""
    lo, hi = ev.get("trend_change_lo", math.nan), ev.get("trend_change_hi", math.nan)
    if hi < 0:
        return "fall"
    if lo > 0 or ev.get("gain_p", 1.0) < POSSIBLE_P:
        return "rise"
    return None


def rise_start(ev: dict[str, Any]) -> float:
    """Where a rise started: its head (`head_rise`) if there, else the start window."""
    return float(ev.get("head_level", ev["start_level"]))


def gain_unidentified(ev: dict[str, Any]) -> bool:
    """The exponential fit of the evidence does not bend within the data (`fitevidence`:
    fit_gain_identified 0): no saturation, so the gain is not identified. The one reading for
    the learning verdict's words and `fitwords.band_caveat`."""
    return ev.get("fit_gain_identified") == 0.0


def _g(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v:.3g}"


def _share(part: float, whole: float) -> str:
    """'40% of', or 'more than' when the whole is not positive."""
    return f"{nm.fmt_share(part / whole)} of" if whole > 0 else "more than"


def _start(ev: dict[str, Any]) -> str:
    """The rise's start in words: every level is a window mean (`progress._windows`), and the
    words say which (a review, 2026-12-06: "rose from 0.371" where the log began at 0.067)."""
    k = ev.get("head_points")
    if k:
        return f"{_g(rise_start(ev))} (its first {k} logged points, less the lowest)"
    return f"{_g(rise_start(ev))} (its mean up to step {ev['start_to']:g})"


def _steps(n: float, more: str = "") -> str:
    """A count of steps ("40 steps", with `more`: "40 more steps"); under half a step, in the
    step column's own units, said to be such (a step column of epoch fractions read "about 0
    more steps": review rev41, L2; `assemble` warns of a step column that is not whole)."""
    if n >= 0.5:
        return f"{n:.0f} {more}steps"
    return f"{n:.2g} {more}in the step column's units (less than one step)"


def _best(ev: dict[str, Any]) -> str:
    """The best window's level and where it lies."""
    return f"{_g(ev['best_level'])} (its best window, steps {ev['best_from']:g}-{ev['best_to']:g})"


def checkpoint_words(ev: dict[str, Any]) -> str:
    """Where to go back to: a window's resolution, not a step's (`findings` narrows it where
    the entropy says which of the window's checkpoints to keep)."""
    lo, hi = ev["best_from"], ev["best_to"]
    return (
        f"a checkpoint within steps {lo:g}-{hi:g} (the best window; the earliest of them if the "
        "fall began inside it)"
    )


def words(label: str, ev: dict[str, Any], alpha: float, head_share: float) -> tuple[str, str]:
    """(summary, action) of a progress verdict in words, from its evidence (`progress`); alpha:
    the verdict's level (`progress.ALPHA`), head_share: the head test's share of it."""
    a, b = ev["start_level"], ev["end_level"]
    p = ev["trend_p"]
    pr = min(p, ev["gain_p"], ev["head_p"] / head_share)  # the rise's p, at the verdict's level
    if label == "learning":  # the rise's p: the trend's, or the gain's or head's (below it)
        rise = f"trend {nm.fmt_p(p)}" if p <= pr else nm.fmt_p(pr)
        rem, t90 = ev.get("remaining_gain", math.nan), ev.get("steps_to_90pct", math.nan)
        more = (
            f"; the fit runs into the reward's bound {ev['reward_bound']:g}: {rem:+.3g} more to "
            f"it, 90% of that within ~{_steps(t90)} if the approach stays exponential"
            if ev.get("fit_gain_at_bound") == 1.0
            else f"; the fit expects {rem:+.3g} more, 90% of it within ~{_steps(t90)}"
            if math.isfinite(t90)
            else "; no saturation within the data: the gain is not identified"
            if gain_unidentified(ev)
            else "; the fit cannot yet tell how much more to expect"
        )
        return (
            f"Still learning: reward went from {_start(ev)} to {_g(b)} ({rise}) and "
            f"is still rising over the second half ({nm.fmt_p(ev['recent_p_up'])}){more}.",
            "keep training"
            + (f": about {_steps(t90, 'more ')} should bring 90% of the rest"
               if math.isfinite(t90)
               else " and check again later"),
        )  # fmt: skip
    if label == "plateau":
        rose = f"reward rose from {_start(ev)} to {_g(b)} ({nm.fmt_p(pr)})"
        hi, gain = ev["recent_rise_hi"], b - rise_start(ev)
        rejected = f"rises of more than {hi:+.3g} over it are rejected at the 5% level"
        if ev.get("plateau_below_best"):
            fall, gained = min(ev["drop_p"], ev["late_drop_p"]), ev["best_level"] - rise_start(ev)
            return (
                f"Plateaued below its best: reward rose from {_start(ev)} to {_best(ev)} "
                f"({nm.fmt_p(pr)}), fell to {_g(b)} (fall {nm.fmt_p(fall)}) and held: over "
                f"the second half it changed by {ev['recent_rise']:+.3g} (falls of more than "
                f"{max(-ev['recent_rise_lo'], 0.0):.3g} are rejected at the 5% level); it kept "
                f"{nm.fmt_share((b - rise_start(ev)) / gained)} of the rise to its best.",
                f"more steps at this setting are unlikely to help; the best checkpoints are "
                f"within steps {ev['best_from']:g}-{ev['best_to']:g}: keep one, or "
                "change something (a lower learning rate, harder prompts, a larger group)",
            )
        if ev["plateau_creeping"]:
            return (
                f"Plateaued, still creeping: {rose}, and over the second half it rose only "
                f"{ev['recent_rise']:+.3g} ({nm.fmt_p(ev['recent_p_up'])}), "
                f"{_share(ev['recent_rise'], gain)} that gain: most of the rise is behind it.",
                "more steps bring little at this rate: stop when the creep is not worth the "
                "compute, or change something (harder prompts, a larger group, the learning "
                "rate)",
            )
        if ev["plateau_stopped"] and hi < 0:
            return (
                f"Plateaued: {rose} and has turned down: over the second half it changed by "
                f"{ev['recent_rise']:+.3g} ({rejected}; a fall at the 95% level, not at the "
                f"{1 - alpha:.1%} a declining verdict asks for).",
                "more steps at this setting are unlikely to help and may lose some of the gain: "
                "stop here, or change something (harder prompts, a larger group, the learning "
                "rate)",
            )
        if ev["plateau_stopped"]:
            return (
                f"Plateaued: {rose} and has stopped: over the second half it changed by "
                f"{ev['recent_rise']:+.3g}, and {rejected}, at most a quarter of that gain.",
                "more steps at this setting are unlikely to help: stop here, or change "
                "something (harder prompts, a larger group, the learning rate)",
            )
        if 0 < hi <= gain:
            return (
                f"Probably plateaued: {rose} and has not risen significantly over the second "
                f"half ({nm.fmt_p(ev['recent_p_up'])}), but only {rejected} ("
                f"{_share(hi, gain)} the gain so far).",
                "not yet clear that it has stopped: train on and diagnose again (more steps "
                "narrow the bound), or stop if the gain so far is enough",
            )
        return (
            f"Rose, then no significant rise: {rose}, and not significantly over the second "
            f"half ({nm.fmt_p(ev['recent_p_up'])}); too noisy to tell whether it has stopped: "
            f"only {rejected} ({_share(hi, gain)} the gain so far).",
            "cannot tell yet whether it has stopped: train on and diagnose again, or log more "
            "rollouts per step to lower the noise",
        )
    if label == "flat" and ev["noise_sd"] == 0 and ev["floor_level"] == ev["best_level"]:
        return (
            f"Flat: the reward never changed ({_g(a)} at all {ev['n']} logged steps).",
            "nothing is being learned: a reward that never moves is usually a constant score "
            "(truncated completions, a broken verifier, a reward that ignores the answer): "
            "check that it varies within groups",
        )
    if label == "flat":
        lo, hi = ev["trend_change_lo"], ev["trend_change_hi"]
        figures = (
            f"start {_g(a)}, end {_g(b)}, trend {nm.fmt_p(p)}, noise sd {_g(ev['noise_sd'])} per "
            f"logged point; null: {ev['null_model']}"
        )
        gain_p = ev.get("gain_p", 1.0)
        way = possible_drift(ev)
        if way is None:
            return (
                f"Flat: no change beyond batch noise ({figures}); the change over the run is "
                f"{lo:+.3g} to {hi:+.3g} (95%).",
                "nothing is being learned: check that rewards vary within groups (advantage "
                "degeneracy), that the learning rate is not too small, and that the reward "
                "scores what you intend",
            )
        # the 95% interval leaves out 0, or the end window is above the start at 5%: a drift
        # the verdict's level does not confirm, so the words must not say "no change" or
        # "nothing is being learned" (a review, 2026-12-06: "Flat: no change" beside p=0.0095
        # and +0.025 to +0.162; session 35: beside a gain p of 0.0095 on a held-back run)
        if lo <= 0 <= hi:
            what = (
                f"its end window is above its start window ({nm.fmt_p(gain_p)}), a rise at "
                f"the 95% level, not at the {1 - alpha:.1%} this verdict asks for; the "
                f"straight-line change over the run is {lo:+.3g} to {hi:+.3g} (95%)"
            )
        else:
            what = (
                f"the change over the run is {lo:+.3g} to {hi:+.3g} (95%), a {way} at the 95% "
                f"level, not at the {1 - alpha:.1%} this verdict asks for"
            )
        kind = way if lo <= 0 <= hi else f"slow {way}"  # a window's rise may be a late step
        return (
            f"Flat at the verdict's level, with a possible {kind}: {what} ({figures}).",
            f"not yet a clear {way}: log more steps or more rollouts per step to tell it from "
            "noise"
            + ("; if learning should be faster, check the learning rate and that rewards vary "
               "within groups (advantage degeneracy)" if way == "rise"
               else "; watch for a decline: diagnose again after more steps"),
        )  # fmt: skip
    if label == "declining":
        # a run that rose over the whole log and fell back from its best at the end: its trend
        # p is a rise's, not evidence of the decline (round 6: "trend p<0.001" on 0.1 -> 0.87)
        if ev["_trend_t"] <= 0:
            trend = f"trend {nm.fmt_p(p)}"
        elif p < alpha:
            trend = f"after a rise from {_g(a)} over the run, trend {nm.fmt_p(p)} upward"
        else:
            trend = f"no trend over the whole run, {nm.fmt_p(p)}"
        return (
            f"Declining: reward fell from {_best(ev)} to {_g(b)} (its mean from step "
            f"{ev['end_from']:g}; fall "
            f"{nm.fmt_p(min(ev['drop_p'], ev['late_drop_p']))}, {trend}).",
            f"roll back to {checkpoint_words(ev)}; lower the learning rate, add a KL penalty or "
            "use fewer inner updates (num_iterations)",
        )
    if label == "collapsed":
        fall = min(ev["drop_p"], ev["late_drop_p"])
        how = (
            f" (fall {nm.fmt_p(fall)})"
            if fall < alpha
            else f", and stays at its floor with no spread within groups on "
            f"{ev.get('zero_spread_end', math.nan):.0%} of the last steps "
            f"({nm.fmt_p(ev.get('stuck_p', math.nan))} for so long a stay at its rate)"
        )
        return (
            f"Collapsed: reward fell from {_best(ev)} to {_g(b)} (its mean from step "
            f"{ev['end_from']:g}), at or below its mean up to step "
            f"{ev['start_to']:g} ({_g(a)}){how}.",
            f"restart from {checkpoint_words(ev)} with a lower learning rate, fewer off-policy "
            "epochs (num_iterations) or a KL penalty",
        )
    share = ev.get("zero_spread_end", math.nan)
    return (
        f"Saturated: reward sits at its ceiling ({_g(b)})"
        + (f" with no spread within groups on {share:.0%} of the last steps." if
           math.isfinite(share) else "."),
        "the task is solved at this difficulty and no gradient is left: stop, or move to "
        "harder prompts",
    )  # fmt: skip
