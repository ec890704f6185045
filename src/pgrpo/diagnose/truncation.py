"""`truncated_completions`: completions cut at the length limit (`max_completion_length`).

A cut completion usually scores 0 (no final answer, no EOS), so a group cut throughout scores
all-equal and gives no gradient. The check reads the share cut (`pgrpo.diagnose.lengthstats`:
a logged clipped ratio; else the mean length against `CheckOptions.max_completion_length`;
else a mean length pinned at its own maximum) over the last tenth of the run and warns above
`lengthstats.TRUNCATION_MAX` (10%). The evidence also says whether the share rose over the run
(the policy learning to write longer until it hits the wall): the first-to-last-quarter gain
of the per-step share above `gaming.Z_RISE` standard errors, slope too (`checks.trend`).
Real logs: docs/integrations.md.
"""

from __future__ import annotations

import math

import numpy as np

from pgrpo.diagnose.checks import CHECKS, CheckOptions, CheckResult, not_enough, trend
from pgrpo.diagnose.gaming import Z_RISE
from pgrpo.diagnose.lengthstats import (
    DENSE_PILEUP,
    LIMIT_TOLERANCE,
    MAX_REPEAT,
    MIN_PINNED_LENGTH,
    MIN_PINNED_STEPS,
    NEAR_LIMIT,
    NEIGHBOURS,
    PILEUP,
    TRUNCATION_ACTION,
    TRUNCATION_EFFECT,
    TRUNCATION_MAX,
    TruncationReading,
    late_share,
    truncation_cause,
    truncation_reading,
    window,
)

MIN_TREND_POINTS = 8
"""Points `checks.trend` needs (two quarters of two)."""

CONTROLS = {
    "logged": "a logged count, no test",
    "limit": (f"a step counts only when its mean length is within {LIMIT_TOLERANCE} token of the "
              "stated limit (every completion cut, up to a log's rounding: a completion that "
              "ended a token or two short among many may be counted cut), nearly a lower bound"),
    "pinned": (f"a step counts only when its mean length repeats the column's maximum exactly, "
               f"a maximum of >= {MIN_PINNED_LENGTH:.0f} tokens reached on >= {MIN_PINNED_STEPS} "
               f"steps and {PILEUP:g}x as often as the {NEIGHBOURS} values below it ("
               f"{DENSE_PILEUP:g}x where those recur more than {MAX_REPEAT:g}x: a rounded column "
               "repeats every value; a short fixed-format answer repeats its length): 0.09% of "
               "null columns read as pinned"),
}  # fmt: skip
"""How each source's false alarms are controlled (`CheckResult.false_alarm`)."""


def _control(source: str | None) -> str:
    head = (f"warn when more than {TRUNCATION_MAX:.0%} of completions are cut over the last "
            "tenth of the run")  # fmt: skip
    return f"{head}; {CONTROLS[source]}" if source else head


def truncation_evidence(share_now: float, r: TruncationReading) -> dict:
    """The figures behind the verdict: source, column, limit, points, the present window's share
    (late_share) and the first window's (early_share), steps with every completion cut (lower-bound
    sources), the rise of the share (share_gain, share_t, rising), and for a stated limit the
    upper bound and the near-limit hint over the present window."""
    n, w = r.share.size, window(r.share.size)
    ev: dict = {"source": r.source, "column": r.column, "points": n, "late_points": w,
                "late_share": share_now, "early_share": float(np.mean(r.share[:w])),
                "late_from_step": float(r.step[-w])}  # fmt: skip
    if r.lower_bound:
        ev.update(limit=r.limit, cut_steps=int(r.share.sum()))
    if n >= MIN_TREND_POINTS:
        tr = trend(r.step, r.share)
        ev.update(share_gain=tr.gain, share_t=tr.t)
        ev["rising"] = bool(tr.t > Z_RISE and tr.slope_t > Z_RISE)
    if r.upper is not None and r.near is not None:
        ev.update(late_upper=float(np.mean(r.upper[-w:])), late_near=float(np.mean(r.near[-w:])))
    if not math.isnan(r.pinned):
        ev.update(pinned_below_limit=r.pinned, pinned_steps=r.pinned_steps)
    return ev


def _rise(ev: dict) -> str:
    if not ev.get("rising"):
        return ""
    return f"; {ev['early_share']:.0%} over the first {ev['late_points']} points: rising"


def _ok_text(ev: dict, r: TruncationReading) -> str:
    """The summary of a run below the threshold: what was read, and what it cannot see."""
    w, late = ev["late_points"], ev["late_share"]
    if r.source == "logged":
        text = f"{late:.1%} of completions cut at the length limit over the last {w} points"
        text += f" ({r.column})"
    elif r.source == "limit":
        some = f"on {late:.0%} of the last {w} points" if late else f"on none of the last {w}"
        upper = f"at most {ev['late_upper']:.0%} of completions cut there (mean length / limit)"
        text = f"every completion cut at the limit {r.limit:g} {some}; {upper}"
        if ev["late_near"] > 0.5:
            text += (f"; the mean length is within {1 - NEAR_LIMIT:.0%} of the limit on "
                     f"{ev['late_near']:.0%} of them: many completions are probably cut (a hint, "
                     "not a count: log completions/clipped_ratio)")  # fmt: skip
    else:
        text = (f"the mean completion length sat at exactly its maximum {r.limit:.4g} (every "
                f"completion cut at a limit of that length) on {ev['cut_steps']} of "
                f"{ev['points']} points, {late:.0%} of the last {w}; partly cut steps are not "
                "seen: give --max-completion-length or log completions/clipped_ratio")  # fmt: skip
    if ev["early_share"] > TRUNCATION_MAX:
        text += f"; {ev['early_share']:.0%} over the first {w} points: the cut has eased"
    return text + _pinned_below(r)


def _pinned_below(r: TruncationReading) -> str:
    """A stated limit above a maximum the mean length repeats: the run's limit may be that."""
    if math.isnan(r.pinned):
        return ""
    return (f"; but the mean length sits at exactly {r.pinned:.4g} on {r.pinned_steps} points, "
            f"the mark of every completion cut: if the run's limit is {r.pinned:.4g}, give "
            f"--max-completion-length {r.pinned:.4g}")  # fmt: skip


@CHECKS.register("truncated_completions")
def truncated_completions(log, options: CheckOptions) -> CheckResult:  # noqa: ANN001
    name = "truncated_completions"
    reading, why = truncation_reading(log.columns, log.step, options.max_completion_length)
    if reading is None:
        return not_enough(name, why, _control(None))
    share = late_share(reading)
    ev = truncation_evidence(share, reading)
    control = _control(reading.source)
    note = f" (note: {why})" if why else ""  # a source set aside, e.g. a stated limit too low
    if share > TRUNCATION_MAX:
        text = f"{truncation_cause(share, reading)}{_rise(ev)}: {TRUNCATION_EFFECT}; "
        text += TRUNCATION_ACTION + _pinned_below(reading) + note
        return CheckResult(name, "warn", text, ev, control)
    return CheckResult(name, "ok", _ok_text(ev, reading) + _rise(ev) + note, ev, control)
