"""What the `advantage_degeneracy` rule (`pgrpo.diagnose.rules`) reads beside the zero-spread
share: all-pass vs all-fail (`zero_spread_split`), the standard error of a mean of
autocorrelated per-step shares (`mean_se`), the lower bounds it was given (`lower_bounds`) and
the action (`degeneracy_action`)."""

from __future__ import annotations

import math

import numpy as np

from pgrpo.diagnose.signals import Signals


def zero_spread_split(
    s: Signals, deg: np.ndarray | None, live: np.ndarray, reward: np.ndarray
) -> dict:
    """all_fail / all_pass shares where the log allows: logged columns, else the reward of the
    zero-spread steps against the bottom and top of its scale: reward is on the 0/1 scale of
    its known range, or a reward in [0, 1]. On an unknown scale nothing is split: the run's own
    lowest and highest rewards are no pass and fail (a run stuck at 0 with negative penalties
    read "too easy: all-correct"; review, 2026-12-05)."""
    ev: dict[str, float] = {}
    for part in ("all_fail", "all_pass"):
        if s.has(f"degeneracy/{part}"):
            ev[part] = float(np.nanmean(s.get(f"degeneracy/{part}")[live]))
    if ev or deg is None or not np.isfinite(reward).any():
        return ev
    r = reward[np.isfinite(reward)]
    if s.reward_range() is None and (r.min() < 0 or r.max() > 1):
        return ev
    zero = live & (deg >= 0.999) & np.isfinite(reward)
    if zero.sum() >= 2:  # at the bottom (0) or the top (1) of the 0/1 scale, up to rounding
        tol = 1e-6
        ev["zero_spread_steps_at_min"] = float(np.mean(reward[zero] <= tol))
        ev["zero_spread_steps_at_max"] = float(np.mean(reward[zero] >= 1.0 - tol))
    return ev


def lower_bounds(ev: dict) -> str:
    parts = []
    if "degeneracy" in ev:
        parts.append(f"{ev['degeneracy']:.2f} from steps with reward_std == 0")
    if "iid_prediction" in ev:
        parts.append(f"{float(ev['iid_prediction']):.2f} by the i.i.d. prediction")
    return ", ".join(parts) or "none"


def mean_se(vals: np.ndarray) -> float:
    """Standard error of a mean of autocorrelated per-step values (lag-1 inflation)."""
    if vals.size < 3 or np.ptp(vals) == 0:
        return 0.0
    c = vals - vals.mean()
    rho = float(np.clip((c[1:] @ c[:-1]) / (c @ c), 0.0, 0.95))
    return float(np.std(vals) * math.sqrt((1 + rho) / (1 - rho) / vals.size))


def degeneracy_action(ev: dict, reward: np.ndarray, unit_mean: float) -> str:
    """reward: [S] on the 0/1 scale of its range when known; unit_mean: its mean there."""
    fail = ev.get("all_fail", ev.get("zero_spread_steps_at_min"))
    pas = ev.get("all_pass", ev.get("zero_spread_steps_at_max"))
    r = reward[np.isfinite(reward)]
    if fail is None and r.size and r.min() >= 0 and r.max() <= 1:
        fail, pas = 1 - unit_mean, unit_mean  # a 0/1 reward: its mean says
    hard = (
        "too hard: most groups are all-wrong: raise group_size, switch to advantage='sign' "
        "(pass@G failure descent) or 'dual_anchor', or filter prompts the model never solves"
    )
    easy = (
        "too easy: most groups are all-correct: drop solved prompts or raise difficulty; "
        "'dual_anchor' keeps a signal on homogeneous groups"
    )
    if fail is None or pas is None or fail == pas:
        action = (
            "most groups score all-equal (the log does not say whether all-pass or all-fail; "
            "--reward-range lets it tell): check the reward varies at all (truncation, a "
            "constant score); if " + hard + "; if " + easy
        )
    else:
        action = hard if fail > pas else easy
    if isinstance(ev.get("jensen_gap"), float) and ev["jensen_gap"] > 0.2:
        action += "; the rate far exceeds the i.i.d. prediction: difficulty is bimodal, filter it"
    return action
