"""Steps that bought nothing, and what they cost: zero-gradient steps and steps past the plateau.

- `zero_gradient_steps`: logged points where every group had zero reward std
  (`frac_reward_zero_std` = 1: every advantage is 0, so the policy-gradient term is exactly 0;
  or `reward_std` = 0, whether it is the mean of the groups' spreads, as TRL logs it, or the
  whole batch's: either is 0 only when every group is all-equal; read since 2026-12-06, when a
  review found "not enough evidence" beside 150 such steps of a one-prompt run), or where
  `frac_gradient_tokens` or `grad_norm` is exactly 0. Exact arithmetic, not a
  statistic: the only false alarm is a log that rounds (a value >= 1 - 1e-9 counts). It warns
  from `ZERO_WARN_SHARE` (5%) of the logged points: below that the compute lost is marginal.
- `wasted_compute`: the zero-gradient steps plus the steps after the point where the live
  plateau stop (`pgrpo.diagnose.live` with its defaults but `plateau_confirmed` False: the
  progress verdict of `pgrpo.diagnose.progress.assess_progress` read `plateau`, stopped or
  probably, or `saturated` on 8 (plateau_patience) consecutive assessments; a live stop waits
  for a bound that says the rise has stopped, where this check confirms the stop with the data
  after it, which a live stop cannot see) fired, priced with a cost per step or per GPU-hour.
  The replay polls the live decision as a watcher would at a fixed cadence (`replay_prefixes`:
  ~40 polls on a log of up to `CheckOptions.max_points` steps; on a longer one, every multiple
  of max_points steps, at most MAX_REPLAY_POINTS polls, each prefix assessed on exactly
  max_points bin means). It warns only when the data after that point confirm it: the reward
  gained after it is not significant (below z standard errors of the difference of the two
  window means, z at `CheckOptions.confidence`), and the wasted steps are at least
  `WASTE_WARN_SHARE` (20%) of the run.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from scipy.special import ndtri

from pgrpo.diagnose.checks import CHECKS, CheckOptions, CheckResult, column, not_enough
from pgrpo.diagnose.live import ALERT_VERDICTS, LiveConfig, assess_live, noise_sd
from pgrpo.diagnose.nullmodel import fmt_share
from pgrpo.diagnose.starvation import zero_spread_share

ZERO_EPS = 1e-9
ZERO_WARN_SHARE = 0.05
WASTE_WARN_SHARE = 0.2  # a fifth of the run's compute bought no reward
# timing columns (seconds per step) and cumulative clocks, first match wins
STEP_TIME_KEYS = ("step_time", "timing_s/step", "perf/time_per_step", "time/step")
CLOCK_KEYS = ("_runtime", "train_runtime", "time/elapsed")


def _stride(log) -> float:  # noqa: ANN001
    return float(log.metrics.get("log_every", 1.0) or 1.0)


def zero_gradient_mask(log) -> tuple[np.ndarray | None, list[str]]:  # noqa: ANN001
    """[n] bool (the logged point had no policy gradient) and the columns used; None without
    any of them."""
    used, mask = [], np.zeros(len(log), dtype=bool)
    for name, test in (
        ("frac_reward_zero_std", lambda c: c >= 1.0 - ZERO_EPS),
        ("reward_std", _no_spread),  # 0 over the batch or in every group: one reading
        ("frac_gradient_tokens", lambda c: c <= ZERO_EPS),
        ("grad_norm", lambda c: c == 0.0),
    ):
        col = log.columns.get(name)
        if col is not None and np.isfinite(col).any():
            hit = test(np.asarray(col, dtype=float))
            if hit is None:  # a reward_std rounded so coarsely that a logged 0 may be a spread
                continue
            used.append(name)
            mask |= np.where(np.isfinite(col), hit, False)
    return (mask if used else None), used


def _no_spread(reward_std: np.ndarray) -> np.ndarray | None:
    """Where a logged reward_std says no group had a spread, by the diagnosis' one reading of it
    (`starvation.zero_spread_share`, with its guard against a column rounded so coarsely that
    a small spread reads 0); None where that reading refuses the column."""
    share, _ = zero_spread_share({"reward_std": reward_std})
    return None if share is None else np.nan_to_num(share, nan=0.0) == 1.0


@CHECKS.register("zero_gradient_steps")
def zero_gradient_steps(log, options: CheckOptions) -> CheckResult:  # noqa: ANN001
    name = "zero_gradient_steps"
    control = (f"exact (every group all-equal => every advantage 0); warns from "
               f"{ZERO_WARN_SHARE:.0%} of the logged points")  # fmt: skip
    mask, used = zero_gradient_mask(log)
    if mask is None:
        return not_enough(name, "log has none of frac_reward_zero_std, reward_std, "
                          "frac_gradient_tokens, grad_norm", control)  # fmt: skip
    k = int(mask.sum())
    steps = k * _stride(log)
    share = k / max(len(log), 1)
    first = float(log.step[mask][0]) if k else math.nan
    ev = {"zero_gradient_points": k, "zero_gradient_steps": steps, "share": share,
          "first_step": first, "columns": ",".join(used)}  # fmt: skip
    cost = _price(log, steps, options)
    ev.update(cost)
    if k == 0:
        return CheckResult(name, "ok", "no zero-gradient steps", ev, control)
    text = (f"{k} logged point(s) ({share:.0%}) had no policy gradient, first at step "
            f"{first:g}{_cost_text(cost)}: raise G, filter all-pass / all-fail prompts, or "
            "use an estimator with signal on degenerate groups (pgrpo_advantage)")  # fmt: skip
    status = "warn" if share >= ZERO_WARN_SHARE else "ok"
    return CheckResult(name, status, text, ev, control, {"share": share})


def step_seconds(log, options: CheckOptions) -> float | None:  # noqa: ANN001
    """Seconds per optimizer step: the option, else a logged per-step time, else the slope of a
    logged cumulative clock."""
    if options.seconds_per_step is not None:
        return options.seconds_per_step
    for key in STEP_TIME_KEYS:
        got = column(log, key)
        if got is not None:
            return float(np.median(got[1]))
    for key in CLOCK_KEYS:
        got = column(log, key)
        if got is not None and got[0].size >= 3:
            slope = np.polyfit(got[0], got[1], 1)[0]
            if slope > 0:
                return float(slope)
    return None


def _price(log, steps: float, options: CheckOptions) -> dict[str, float]:  # noqa: ANN001
    out: dict[str, float] = {}
    if options.cost_per_step is not None:
        out["cost"] = steps * options.cost_per_step
    sec = step_seconds(log, options)
    if sec is not None:
        out["gpu_hours"] = steps * sec * options.gpus / 3600.0
        if options.cost_per_gpu_hour is not None:
            out["cost"] = out["gpu_hours"] * options.cost_per_gpu_hour
    return out


def _cost_text(cost: dict[str, float]) -> str:
    parts = []
    if "gpu_hours" in cost:
        parts.append(f"{cost['gpu_hours']:.3g} GPU-h")
    if "cost" in cost:
        parts.append(f"cost {cost['cost']:.4g}")
    return f" ({', '.join(parts)})" if parts else ""


REPLAY_POINTS = 40
"""Polls of the live replay on a log of at most max_points steps (every n // 40 steps)."""
MAX_REPLAY_POINTS = 200
"""At most this many polls on a longer log (see `replay_prefixes`)."""
DECISION_COLUMNS = ("frac_reward_zero_std", "degeneracy/all_pass", "degeneracy/all_fail",
                    "reward_std", "learning_rate")  # fmt: skip
"""What the live decision reads besides the reward (the rest is not binned for the replay)."""


def replay_prefixes(n: int, min_points: int, max_points: int) -> list[int]:
    """Prefix lengths at which the replay polls the live decision: every n // REPLAY_POINTS
    steps from min_points on a log of at most max_points steps; on a longer one, the same
    cadence up to max_points, then every c x max_points steps (c = ceil(n / (MAX_REPLAY_POINTS x
    max_points))), whose prefixes are each binned into exactly max_points means (so the polls
    share one null model), and the whole log last."""
    every = max(1, n // REPLAY_POINTS)
    if n <= max_points:
        return list(range(min_points, n + 1, every))
    c = -(-n // (MAX_REPLAY_POINTS * max_points))
    head = list(range(min_points, max_points, every))
    tail = list(range(c * max_points, n + 1, c * max_points))
    return [*head, *tail, *([n] if tail[-1:] != [n] else [])]


def plateau_step(log, max_points: int | None = None) -> float | None:  # noqa: ANN001
    """The first step at which the live plateau stop (LiveConfig defaults, but on any plateau
    verdict: `plateau_confirmed` False) would have stopped the run, replaying its decision
    (`assess_live`, decision only) at `replay_prefixes`: what a watcher polling at that cadence
    would have seen. None when it never fires.

    That stop fires at the first poll that ends `plateau_patience` consecutive polls whose
    verdict is plateau or saturated (`live._held`; each poll's verdict reads its own prefix
    alone), so the polls are searched for that run (`first_run`) rather than all assessed: the
    same step, with about one poll in `plateau_patience` assessed where no run is near (a
    profile, session 38: the replay was 80% of `diagnose` on a 200,000-step log). Each prefix
    ends where its poll does: a reward tail the reader dropped as NaN or inf after the whole
    log's last finite reward is the last poll's alone (`_prefix`)."""
    cfg = LiveConfig(stop_on=("plateau",), plateau_confirmed=False)
    if max_points is not None:
        cfg = replace(cfg, max_points=max_points)
    cols = {c: v for c, v in log.columns.items() if c in DECISION_COLUMNS}
    ks = replay_prefixes(len(log), cfg.min_points, cfg.max_points)

    def standing(i: int) -> bool:  # the alert that stops is the verdict itself only while
        # plateau_confirmed is False (else the stopping poll needs a confirmed plateau as well)
        status = assess_live(_prefix(log, cols, ks[i]), cfg, decision_only=True)
        return status.verdict in ALERT_VERDICTS["plateau"]

    at = first_run(standing, len(ks), cfg.plateau_patience)
    return None if at is None else float(log.step[ks[at] - 1])


def _prefix(log, cols: dict, k: int):  # noqa: ANN001, ANN202
    """The log's first k points as a watcher saw them then: the decision's columns, and the
    reader's non-finite tail (`nonfinite_tail`, rewards dropped after the last finite one) only
    on the whole log, the one poll it follows."""
    metrics = log.metrics
    if k < len(log) and "nonfinite_tail" in metrics:
        metrics = {m: v for m, v in metrics.items() if not m.startswith("nonfinite_")}
    return replace(log, step=log.step[:k], reward=log.reward[:k], metrics=metrics,
                   columns={c: v[:k] for c, v in cols.items()})  # fmt: skip


def first_run(hit, n: int, length: int) -> int | None:  # noqa: ANN001
    """The first index i of 0..n-1 that ends `length` consecutive indices where `hit` (a pure
    function of the index) is true, asking `hit` of as few indices as it can: each window's
    last index first, then back from it, and past the first miss (a miss at j rules out every
    run through j). None when there is none."""
    known: dict[int, bool] = {}

    def ask(j: int) -> bool:
        if j not in known:
            known[j] = bool(hit(j))
        return known[j]

    start = 0
    while start + length <= n:
        end = start + length - 1
        miss = next((j for j in range(end, start - 1, -1) if not ask(j)), None)
        if miss is None:
            return end
        start = miss + 1
    return None


def _past_text(ev: dict, z: float) -> str:
    """The steps past a confirmed plateau stop, and what the reward did after it (a fall there
    is a collapse or decline the stop would have kept the run from, not a plateau's idling)."""
    gain, se, at = ev["gain_after_plateau"], ev["gain_se"], ev["plateau_step"]
    did = (f"the reward then fell by {-gain:.3g}" if gain < -z * se
           else f"the reward gained nothing significant after it ({gain:+.3g})")  # fmt: skip
    return (f"{ev['steps_past_plateau']:g} after step {at:g}, where a replayed live plateau "
            f"stop fires; {did}")  # fmt: skip


def _why_none(ev: dict) -> str:
    """Why no step counts: the replayed plateau stop never fired, or the reward rose after it."""
    if not math.isfinite(ev["plateau_step"]):
        return "a replayed live plateau stop on any plateau verdict never fires on this log"
    if ev.get("points_after", 0) < 2:
        return (
            f"a replayed live plateau stop would fire at step {ev['plateau_step']:g}, too "
            "near the end of the log to tell whether the steps after it bought anything"
        )
    return (
        f"a replayed live plateau stop would fire at step {ev['plateau_step']:g}, but the "
        f"reward rose after it by {ev['gain_after_plateau']:+.3g} (se "
        f"{ev['gain_se']:.2g}), so the steps after it were not wasted"
    )


@CHECKS.register("wasted_compute")
def wasted_compute(log, options: CheckOptions) -> CheckResult:  # noqa: ANN001
    name = "wasted_compute"
    control = ("plateau = where the live plateau stop on any plateau verdict would have "
               "stopped (plateau / saturated on 8 assessments, plateau_confirmed=False), "
               "confirmed by the data after it: warn only if the later gain is below the "
               f"one-sided {options.confidence:.0%} z standard errors")  # fmt: skip
    if len(log) < 16:
        return not_enough(name, f"{len(log)} logged points (need 16)", control)
    at = plateau_step(log, options.max_points)
    mask, zero_cols = zero_gradient_mask(log)
    zero_steps = float(mask.sum()) * _stride(log) if mask is not None else 0.0
    ev: dict = {"plateau_step": at if at is not None else math.nan,
                "zero_gradient_steps": zero_steps}  # fmt: skip
    past = 0.0
    if at is not None:
        after = log.step > at
        past = float(log.step[-1] - at)
        w = max(5, len(log) // 10)
        before = log.reward[~after][-w:]
        later = log.reward[after]
        se = noise_sd(log.reward) * math.sqrt(1 / before.size + 1 / max(later.size, 1))
        gain = float(np.mean(later[-w:]) - np.mean(before)) if later.size else 0.0
        z = float(ndtri(options.confidence))  # the normal quantile (scipy.stats.norm.ppf's)
        ev.update({"steps_past_plateau": past, "gain_after_plateau": gain, "gain_se": se,
                   "points_after": float(later.size),
                   "confirmed": bool(later.size >= 2 and gain < z * se)})  # fmt: skip
    wasted = past if ev.get("confirmed") else 0.0
    if wasted and mask is not None:  # zero-gradient steps past the plateau are counted once
        zero_steps = float(mask[log.step <= at].sum()) * _stride(log)
        ev["zero_gradient_steps"] = zero_steps
    total = wasted + zero_steps
    ev["wasted_steps"] = total
    ev["share"] = total / max(float(log.step[-1] - log.step[0]) + _stride(log), 1.0)
    cost = _price(log, total, options)
    ev.update(cost)
    if total == 0:
        return CheckResult(name, "ok", f"no wasted steps found ({_why_none(ev)})", ev, control)
    parts = [_past_text(ev, float(ndtri(options.confidence)))] if wasted else []
    parts += [f"{zero_steps:g} without policy gradient (read from {', '.join(zero_cols)})"] * bool(
        zero_steps
    )
    advice = (
        "a live stop on any plateau verdict would have stopped at that step: "
        "PgrpoCallback(stop_on=('plateau',), plateau_confirmed=False) or `pgrpo watch "
        "--plateau-any --stop-file` (the default stop waits for a plateau whose bound says it "
        "has stopped: later, and fewer stops too early)"
        if wasted
        else "for why steps had no gradient see advantage_degeneracy and zero_gradient_steps; no "
        "plateau stop would have saved them"
    )
    text = (f"{total:g} step(s) bought no reward ({fmt_share(ev['share'])} of the run: "
            f"{'; '.join(parts)}){_cost_text(cost)}; {advice}")  # fmt: skip
    status = "warn" if ev["share"] >= WASTE_WARN_SHARE else "ok"
    return CheckResult(name, status, text, ev, control, {"share": ev["share"]})
