"""Is the run still learning? A progress verdict from a logged reward curve.

`assess_progress(step, reward, ...)` -> ProgressVerdict with one label of PROGRESS_LABELS:

- `too_short`: fewer than MIN_POINTS finite rewards.
- `saturated`: the reward sits at its ceiling: the end window is the best of the run and the
  groups have no spread (reward_std == 0 / frac_reward_zero_std = 1 on >= 80% of its steps, or
  a 0/1 reward at >= 0.99, or an end level within 1% of a known reward range's top that no
  longer rises there or only creeps), after a significant rise or at a known ceiling.
- `collapsed`: a significant fall from the best window, ending at or below the start level, or
  a run that ends stuck at its floor (the end window constant at the run's minimum, no spread
  within groups) below where it started.
- `declining`: a significant fall from the best window, or a significant negative trend, unless
  the fall has stopped with most of the gain kept (`_after_fall`: then `plateau`, below its best).
  "A fall" is either the best window over the end window against the whole curve's null, or
  the end window below the mean of the points before the last third against a null chosen on
  those points alone (`late_drop_p`: a collapse at the end widens the whole curve's noise and
  its rho bound, and read 'flat' on a held-back run that fell from 0.72 to 0.001).
- `learning`: a significant rise that is still going on over the second half (one-sided 5%:
  a flat second half reads "learning" 5% of the time, a stated cost of not missing a creep),
  unless that second half's rise is bounded (one-sided 5%) at a quarter of the gain or less.
- `plateau`: a significant rise that has stopped, or that only creeps on (a significant rise
  over the second half bounded at PLATEAU_SHARE of the gain: `plateau_creeping`), or a rise that
  fell from its best and held there (`plateau_below_best`).
- `flat`: none of these beyond batch noise.

"Significant" is against null curves of the same length (`pgrpo.diagnose.nullmodel`): binomial
batch means at the log's N = B x G when known, AR(1) noise with the curve's autocorrelation
otherwise; level ALPHA (two-sided for the trend). Slopes are ordinary least squares with a
Newey-West variance, so their sign is the sign of the reported slope and ties cost nothing.
The evidence also carries an exponential fit (`pgrpo.diagnose.fitevidence`): the fitted gain and
its 90% band, the expected remaining gain and the steps to 90% of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import ndtri

from pgrpo.core.rewardrange import range_holding
from pgrpo.diagnose import nullmodel as nm
from pgrpo.diagnose.curvestats import hac_slope, head_rise
from pgrpo.diagnose.fitevidence import fit_evidence
from pgrpo.diagnose.floorstats import stuck_p
from pgrpo.diagnose.progresstext import rise_start as _rise_start
from pgrpo.diagnose.progresstext import words
from pgrpo.diagnose.starvation import n_rollouts as signals_rollouts

PROGRESS_LABELS = (
    "learning",
    "plateau",
    "flat",
    "declining",
    "saturated",
    "collapsed",
    "too_short",
)
MIN_POINTS = 8
NONFINITE_TAIL = 3
"""Rewards logged as NaN or inf after the last finite one that make a run `collapsed` (it
diverged): one or two can be a last row caught mid-write or a step whose rewards all failed."""
ALPHA = 0.005
ALPHA_RECENT = 0.05
HEAD_SHARE = 0.2
"""The head test's level (`curvestats.head_rise`, a rise within the start window) is this share
of the verdict's, as it adds to the other rise tests (docs/diagnostics.md, "A rise within the
start window": AR(1) nulls made a rise 0.5-0.7% of the time at the full level, 0-0.4% here)."""
ZERO_SPREAD_SHARE = 0.8
FALL_KEPT = 0.5  # a fall has stopped (`_after_fall`) only if the end keeps this share of the rise
PLATEAU_SHARE = 0.25
"""A plateau has stopped (`plateau_stopped` 1) when the largest rise over its second half that
the one-sided 5% test does not reject is at most this share of its gain (end window - start
window); up to the whole gain it is 'probably' one; beyond, too noisy to tell. So bounded, a
significant rise over the second half is a plateau still creeping (`plateau_creeping` 1), not
`learning`."""


@dataclass(frozen=True)
class ProgressVerdict:
    """label: one of PROGRESS_LABELS; summary: one plain sentence with the number behind it;
    evidence: the figures (stable names); action: what to do; metrics: the numeric evidence."""

    label: str
    summary: str
    evidence: dict[str, Any]
    action: str
    metrics: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from pgrpo.diagnose.verdict import _jsonable

        return {
            "label": self.label,
            "summary": self.summary,
            "action": self.action,
            "evidence": {k: _jsonable(v) for k, v in self.evidence.items()},
        }


def _zero_spread(reward_std: np.ndarray | None, frac_zero: np.ndarray | None) -> np.ndarray | None:
    """Per step: 1.0 where no group had any reward spread, 0.0 where one had, NaN unknown."""
    if frac_zero is not None and np.isfinite(frac_zero).any():
        return np.where(np.isfinite(frac_zero), (frac_zero >= 0.999).astype(float), np.nan)
    if reward_std is not None and np.isfinite(reward_std).any():
        zero = (np.abs(reward_std) <= 1e-12).astype(float)
        return np.where(np.isfinite(reward_std), zero, np.nan)
    return None


def _windows(step: np.ndarray, x: np.ndarray) -> dict[str, float]:
    w = nm.window_size(x.size)
    mw = np.convolve(x, np.ones(w) / w, mode="valid")
    k = int(np.argmax(mw))
    return {
        "window": float(w),
        "start_level": float(mw[0]),
        "end_level": float(mw[-1]),
        "best_level": float(mw[k]),
        "best_step": float(step[k + w // 2]),
        "best_from": float(step[k]),
        "best_to": float(step[k + w - 1]),
        "start_to": float(step[w - 1]),
        "end_from": float(step[-w]),
        "floor_level": float(mw.min()),
    }


def _slope(step: np.ndarray, x: np.ndarray) -> float:
    return float(np.polyfit(step, x, 1)[0]) if np.ptp(step) > 0 else 0.0


def _tests(
    step: np.ndarray, x: np.ndarray, n_rollouts: float | None, unit: np.ndarray | None = None
) -> dict[str, Any]:
    """Statistics of the curve, their null p-values and the null model used. unit: x on the
    0/1 scale of its known range (`nm.unit_scale`; default x), where the null is chosen; the
    statistics tested are invariant to the scale, the slopes and noise reported are in x's
    units."""
    null = nm.choose_null(x if unit is None else unit, n_rollouts)
    st = {k: float(v[0]) for k, v in nm.level_statistics(x).items()}
    ns = nm.null_statistics(x.size, null, level_only=True)
    half = x.size // 2
    return {
        "null_model": null.describe(),
        "noise_sd": st["noise_sd"],
        "trend_slope": _slope(step, x),
        "trend_p": nm.p_value(st["trend_t"], ns["trend_t"], two_sided=True),
        "recent_slope": _slope(step[half:], x[half:]),
        "recent_p_up": nm.p_value(st["recent_t"], ns["recent_t"]),
        "recent_p_down": nm.p_value(-st["recent_t"], np.sort(-ns["recent_t"])),
        "gain_p": nm.p_value(st["gain_z"], ns["gain_z"]),
        "head_p": nm.p_value(st["head_rise_z"], ns["head_rise_z"]),
        "drop_p": nm.p_value(st["drop_z"], ns["drop_z"]),
        "late_drop_p": nm.late_drop_p(x if unit is None else unit, st["late_drop_z"], n_rollouts),
        "_trend_t": st["trend_t"],
        "_recent_t": st["recent_t"],
        **change_bounds(x, ns, st["noise_sd"]),
    }


def assess_progress(
    step: np.ndarray,
    reward: np.ndarray,
    *,
    reward_std: np.ndarray | None = None,
    frac_zero_std: np.ndarray | None = None,
    n_rollouts: float | None = None,
    alpha: float = ALPHA,
    fit: bool = True,
    reward_range: tuple[float, float] | None = None,
    nonfinite_tail: float = 0.0,
    nonfinite_from: float = math.nan,
) -> ProgressVerdict:
    """Progress verdict of a reward curve. step, reward: [n]; reward_std, frac_zero_std: [n] or
    None (NaN where not logged); n_rollouts: B x G rollouts per step when known. fit: add the
    exponential fit's evidence (the label does not use it; a replay of the label skips it).
    reward_range: the reward's known (lo, hi) (a task's `reward_range`, `--reward-range`): an
    end level within 1% of the range below hi is at the ceiling, and the fit stays inside it.
    nonfinite_tail: rewards logged as NaN or inf after the last finite one (from step
    nonfinite_from; the log reader's metrics): NONFINITE_TAIL or more is a run that diverged,
    `collapsed`, whatever the finite rewards before it say."""
    if nonfinite_tail >= NONFINITE_TAIL:
        n_bad = int(nonfinite_tail)
        return ProgressVerdict(
            "collapsed",
            f"Collapsed: the last {n_bad} logged rewards are NaN or inf (from step "
            f"{nonfinite_from:g}): the run diverged.",
            {"nonfinite_tail": n_bad, "nonfinite_from": nonfinite_from},
            "stop the run; resume from a checkpoint before that step with a lower learning "
            "rate or tighter gradient clipping, and look for an inf or NaN in the loss",
            {"nonfinite_tail": float(n_bad), "nonfinite_from": float(nonfinite_from)},
        )
    step, reward = np.asarray(step, float), np.asarray(reward, float)
    ok = np.isfinite(reward) & np.isfinite(step)
    n = int(ok.sum())
    if n < MIN_POINTS:
        return ProgressVerdict(
            "too_short",
            f"Too short to judge: {n} logged reward{'' if n == 1 else 's'}, at least "
            f"{MIN_POINTS} are needed.",
            {"n": n},
            f"log at least {MIN_POINTS} steps (and the reward at every step)",
            {"n": float(n)},
        )
    s, x = step[ok], reward[ok]
    reward_range = range_holding(x, reward_range)  # a range the data leaves says nothing
    u = nm.unit_scale(x, reward_range)  # 0/1 tests read the reward on its range's 0/1 scale
    ev: dict[str, Any] = {"n": n, **_windows(s, x), **_tests(s, x, n_rollouts, u)}
    spread = _zero_spread(
        None if reward_std is None else np.asarray(reward_std, float)[ok],
        None if frac_zero_std is None else np.asarray(frac_zero_std, float)[ok],
    )
    w = int(ev["window"])
    if spread is not None and np.isfinite(spread[-w:]).any():
        ev["zero_spread_end"] = float(np.nanmean(spread[-w:]))
        flat = spread[-w:] == 1.0
        if flat.any():  # where the groups without spread sit: all-pass (top) or all-fail
            ev["zero_spread_level"] = float(np.mean(x[-w:][flat]))
    tail = x[-w:]
    if ev.get("zero_spread_end", 0.0) >= ZERO_SPREAD_SHARE and np.ptp(tail) == 0:
        if tail[0] <= x.min():
            ev["stuck_p"] = stuck_p(u, w, n_rollouts)
    if ev["head_p"] < HEAD_SHARE * alpha:  # a rise within the start window: where it came
        _, k, head = head_rise(x[None, :], np.array([ev["noise_sd"]]))  # in its first half and
        if k[0] <= w // 2 and head[0] < ev["start_level"]:  # below the window, the rise starts
            ev["head_points"], ev["head_level"] = int(k[0]), float(head[0])  # there (not a fall)
    last = max(2, w // 10)  # the end window's last points against the rest of it (`_after_fall`)
    se_tail = ev["noise_sd"] * math.sqrt(1.0 / last + 1.0 / (w - last)) if w > last else 0.0
    if se_tail > 0:
        ev["tail_drop_z"] = float(np.mean(x[-w:-last]) - np.mean(x[-last:])) / se_tail
    if fit:
        ev.update(fit_evidence(s, x, reward_range))
    label = _label(ev, u, n_rollouts, alpha, reward_range)
    if label == "plateau":  # the second half's rise bounded to a quarter of the gain, or below 0
        gain = ev["end_level"] - _rise_start(ev)
        ev["plateau_stopped"] = float(ev["recent_rise_hi"] <= PLATEAU_SHARE * max(gain, 0.0))
        ev["plateau_creeping"] = float(ev["recent_p_up"] < ALPHA_RECENT)  # `_small_rise`
    summary, action = words(label, ev, ALPHA, HEAD_SHARE)
    metrics = {k: float(v) for k, v in ev.items() if isinstance(v, int | float)}
    evidence = {k: v for k, v in ev.items() if not k.startswith("_")}
    return ProgressVerdict(label, summary, evidence, action, metrics)


def _label(
    ev: dict[str, Any],
    unit: np.ndarray,
    n_rollouts: float | None,
    alpha: float,
    reward_range: tuple[float, float] | None = None,
) -> str:
    se_w = ev["noise_sd"] / math.sqrt(ev["window"])
    rose = (ev["_trend_t"] > 0 and ev["trend_p"] < alpha) or ev["gain_p"] < alpha
    rose = rose or ev["head_p"] < HEAD_SHARE * alpha  # a rise the start window hides
    fell = ev["_trend_t"] < 0 and ev["trend_p"] < alpha
    dropped = ev["drop_p"] < alpha or ev["late_drop_p"] < alpha
    at_top = ev["end_level"] >= ev["best_level"] - se_w
    lo, hi = reward_range or (0.0, 1.0)
    unit_end = (ev["end_level"] - lo) / (hi - lo)
    ceiling = nm.is_binary_mean(unit, n_rollouts) and unit_end >= 0.99  # unit: 0/1 scale
    if reward_range is not None:  # at the top and no longer rising there (one-sided 5%), or
        # rising by a creep (`_small_rise`): within 1% of the top, what is left is at most 1% of
        # the range (a flat second half at 0.997 of it reads a creep on 5% of curves, and read
        # 'plateau, still creeping': hypothesis found one, 2026-12-06)
        near = ev["end_level"] >= hi - 0.01 * (hi - lo)
        ceiling = ceiling or (near and (ev["recent_p_up"] >= ALPHA_RECENT or _small_rise(ev)))
    no_spread = ev.get("zero_spread_end", 0.0) >= ZERO_SPREAD_SHARE
    # saturated: the groups without spread all pass, at or above the recent level; all failing
    # below it is a run rising from 0 (p 0 -> 0.025 at G = 8 read 'saturated' in 44% of seeds)
    all_pass = ev.get("zero_spread_level", -math.inf) >= ev["end_level"] - max(se_w, 1e-12)
    if ceiling or (no_spread and all_pass and at_top and rose):
        return "saturated"
    # stuck at the floor, every group scoring the same, below the start, and too long there for
    # the run's own rate of success (`floorstats.stuck_p`; without it a short run of rare
    # successes read 'collapsed' on 9-23% of null curves)
    stuck = no_spread and ev.get("stuck_p", 1.0) < alpha
    if stuck and ev["start_level"] > ev["end_level"] + se_w:
        return "collapsed"
    if dropped or fell:
        at_floor = ev["end_level"] <= ev["floor_level"] + se_w
        # lost all it had gained: a best window clearly above the start (by noise alone, the
        # best of several windows beat a gentle decline's first and read 'collapsed' in 129 of
        # 200; two window SEs leave it to a real rise)
        gained = ev["best_level"] > ev["start_level"] + 2.0 * se_w
        lost_all = ev["end_level"] <= ev["start_level"] and gained
        if dropped and (lost_all or (no_spread and at_floor)):
            return "collapsed"
        after = "declining" if fell else _after_fall(ev, alpha, rose)
        if after is not None:
            return after
    if rose or ev["recent_p_up"] < alpha:
        # one-sided at ALPHA_RECENT: a flat second half reads "learning" 5% of the time. Not
        # overruled by the exponential fit: real runs creep on after a fast rise, which an
        # exponential cannot follow (it calls the asymptote reached). A creep, though, is a
        # plateau: a second half whose rise is bounded below PLATEAU_SHARE of the run's gain
        # (`_small_rise`; held-back research-scale runs that rose early and then crept read
        # 'learning' on significance alone, at 9-10% of their gain)
        learning = ev["recent_p_up"] < ALPHA_RECENT and not _small_rise(ev)
        return "learning" if learning else "plateau"
    return "flat"


def _after_fall(ev: dict[str, Any], alpha: float, rose: bool) -> str | None:
    """What a fall from the best window (no significant whole-run fall) reads now: `plateau`
    (`plateau_below_best`) where it has stopped with most of the gain kept, None (the rise
    tests read it: learning) where the run climbs back significantly over its second half
    (one-sided 5%) after a significant rise, else `declining`. Stopped: the end keeps at least
    FALL_KEPT of the rise to the best window, is not below the points before the last third
    (`late_drop_p`), and its last points are not below the rest of the end window
    (`tail_drop_z`, one-sided at alpha: a crash in the last 2 of 400 points moved the window by
    2%); held: besides, no fall over the second half (one-sided 5%), and any fall there bounded
    at PLATEAU_SHARE of that rise (`recent_rise_lo`, as a creep is bounded for a plateau). The
    verdict is of the run now: a held-back run that rose 0.685 -> 0.718 and held at 0.707 over
    its second half read 'declining', with the advice to roll back (round 12, 2026-12-05)."""
    start = _rise_start(ev)
    gain = ev["best_level"] - start
    stopped = (
        gain > 0
        and ev["end_level"] - start >= FALL_KEPT * gain
        and ev["late_drop_p"] >= alpha
        and ev.get("tail_drop_z", 0.0) < -ndtri(alpha)
    )
    if stopped and rose and ev["recent_p_up"] < ALPHA_RECENT:
        return None  # climbing back
    if stopped and ev["recent_p_down"] >= ALPHA_RECENT and ev["recent_p_up"] >= ALPHA_RECENT:
        if ev["recent_rise_lo"] >= -PLATEAU_SHARE * gain:
            ev["plateau_below_best"] = 1.0
            return "plateau"
    return "declining"


def _small_rise(ev: dict[str, Any]) -> bool:
    """The largest rise over the second half that the one-sided 5% test does not reject is at
    most PLATEAU_SHARE of a positive gain (end window - start window): most of the rise is
    behind the run, however significant its creep."""
    gain = ev["end_level"] - _rise_start(ev)
    return gain > 0 and ev["recent_rise_hi"] <= PLATEAU_SHARE * gain


def end_window(step: np.ndarray, reward: np.ndarray) -> dict[str, float]:
    """end_level, end_from, best_level, window and noise_sd as `assess_progress`'s evidence
    gives them for step, reward: [n] (`_windows`, `curvestats.level_statistics`), without its
    null curves (a fraction of a second at a new length): what `fitwords` reads first; {} for
    fewer than MIN_POINTS finite rewards."""
    step, reward = np.asarray(step, float), np.asarray(reward, float)
    ok = np.isfinite(reward) & np.isfinite(step)
    if int(ok.sum()) < MIN_POINTS:
        return {}
    w = _windows(step[ok], reward[ok])
    noise = float(nm.level_statistics(reward[ok])["noise_sd"][0])
    keys = ("end_level", "end_from", "best_level", "window")
    return {**{k: w[k] for k in keys}, "noise_sd": noise}


def assess_signals(signals: Any, fit: bool = True) -> ProgressVerdict:
    """`assess_progress` on a diagnosis's Signals (reward, reward_std, frac_reward_zero_std and
    the rollouts behind each logged reward (`starvation.n_rollouts`) when known, and the range from
    reward_min / reward_max). fit: as `assess_progress`'s (False: the label alone, faster)."""
    cols = signals.columns
    reward = cols.get("reward", np.full(signals.steps.shape, np.nan))
    return assess_progress(
        signals.steps,
        reward,
        reward_std=cols.get("reward_std"),
        frac_zero_std=cols.get("frac_reward_zero_std"),
        n_rollouts=signals_rollouts(signals),
        reward_range=signals.reward_range(),
        nonfinite_tail=signals.hyper("nonfinite_tail") or 0.0,
        nonfinite_from=math.nan if (at := signals.hyper("nonfinite_from")) is None else at,
        fit=fit,
    )


def change_bounds(x: np.ndarray, ns: dict[str, np.ndarray], white: float) -> dict[str, float]:
    """Bounds on the straight-line change over the logged points (a line in the point index,
    as the tests fit it; in the reward's units), found by inverting the trend tests against the
    same null (ns: sorted null statistics): the change over the run (`trend_change`, the 95%
    interval `trend_change_lo` / `_hi`) and the rise over the second half (`recent_rise`;
    `recent_rise_hi` / `_lo`, the largest rise / fall the one-sided 5% test does not reject).
    Adding a line to a curve moves its HAC slope and leaves its error as it is, so the slopes
    b not rejected are those with q_lo <= (slope - b) / se <= q_hi: exact were the fitted null
    true, conservative with the AR(1) null's upper bound on rho (up to the grid's 0.9). A stretch
    without spread (se 0: a discrete reward that did not move there) takes the error of white
    noise at the whole curve's noise sd (`white`), not a bound of zero width."""
    out = {}
    for key, seg, name in (
        ("trend_t", x, "trend_change"),
        ("recent_t", x[x.size // 2 :], "recent_rise"),
    ):
        slope, se = (float(v[0]) for v in hac_slope(seg[None, :]))
        span = seg.size - 1
        if se == 0:
            idx = np.arange(seg.size) - span / 2.0
            se = white / math.sqrt(float(idx @ idx)) if span > 0 else 0.0
        q_lo, q_hi = np.quantile(ns[key], [0.025, 0.975] if key == "trend_t" else [0.05, 0.95])
        out[name] = slope * span
        out[name + "_hi"] = (slope - q_lo * se) * span
        out[name + "_lo"] = (slope - q_hi * se) * span
    return out
