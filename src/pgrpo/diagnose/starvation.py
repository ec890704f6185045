"""What the `advantage_degeneracy` rule (`pgrpo.diagnose.rules`) reads: the zero-spread share
(`zero_spread_share`, which the live degeneracy stop rule reads too), the i.i.d. prediction
(`iid_prediction`, which `pgrpo report` draws too), all-pass vs all-fail
(`zero_spread_split`), the standard error of a mean of autocorrelated per-step shares
(`mean_se`), the lower bounds it was given (`lower_bounds`) and the action
(`degeneracy_action`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from pgrpo.core.stats import iid_degeneracy
from pgrpo.diagnose import nullmodel as nm
from pgrpo.diagnose.lengthstats import TRUNCATION_ACTION
from pgrpo.diagnose.signals import Signals, finite

ZERO_STD_SOURCE = "steps with reward_std == 0 (lower bound)"
"""`zero_spread_share`'s source when it reads reward_std alone: a lower bound on the share."""
ROUNDING_GAP = 20.0
"""A reward_std column rounded to steps of 10^-d (`rounding_step`) whose smallest nonzero value
is below this many steps gives no lower bound: a console that prints 3 decimals logs a spread
of 0.0004 as 0.000 (review, 2026-12-05). A spread of 0/1 rewards is never that small, so
their zeros stay real however the column was rounded (the shared corpus's 4-decimal CSVs)."""
ROUNDING_MIN_VALUES = 5
"""The distinct nonzero reward_std values needed to call a column rounded: a few values (a
constant 0.5, the population std of groups of two 0/1 rewards) say nothing of a rounding."""


def rounding_step(values: np.ndarray, max_decimals: int = 6) -> float | None:
    """10^-d for the fewest decimals d <= max_decimals that every finite value of `values` has
    (to 1e-6 of a step), or None: a column printed or stored rounded."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    for d in range(max_decimals + 1):
        scaled = v * 10.0**d
        if np.all(np.abs(scaled - np.round(scaled)) < 1e-6):
            return 10.0**-d
    return None


def zero_spread_share(
    columns: Mapping[str, np.ndarray], min_points: int = 1
) -> tuple[np.ndarray | None, str]:
    """The per-step share of groups whose rewards had no spread ([S], NaN where not logged) and
    its source: the logged `frac_reward_zero_std`; `degeneracy/all_pass` + `degeneracy/all_fail`;
    or, from `reward_std` alone, 1 where it is 0 and 0 elsewhere (a step whose reward std is 0
    had no spread in any group, so this is a lower bound on the share: `ZERO_STD_SOURCE`;
    not where the column is rounded so coarsely that a small spread reads 0, `ROUNDING_GAP`).
    (None, why) when the columns hold none of these with `min_points` finite values (why: ''
    or the rounding). The one reading of `pgrpo diagnose`'s advantage_degeneracy (min_points 4)
    and of the live degeneracy stop rule (1)."""

    def has(name: str) -> bool:
        col = columns.get(name)
        return col is not None and int(np.isfinite(col).sum()) >= min_points

    if has("frac_reward_zero_std"):
        return np.asarray(columns["frac_reward_zero_std"], dtype=float), "frac_reward_zero_std"
    if has("degeneracy/all_pass") and has("degeneracy/all_fail"):
        share = np.asarray(columns["degeneracy/all_pass"]) + columns["degeneracy/all_fail"]
        return share.astype(float), "all_pass + all_fail"
    if has("reward_std"):
        sd = np.asarray(columns["reward_std"], dtype=float)
        nonzero = np.abs(sd[np.isfinite(sd) & (sd != 0)])
        step = rounding_step(nonzero) if np.unique(nonzero).size >= ROUNDING_MIN_VALUES else None
        if step is not None and nonzero.min() < ROUNDING_GAP * step:
            why = f"its reward_std is rounded to steps of {step:g} and takes values as small as"
            return None, f"{why} a few of them, so a logged 0 may be a small spread"
        return np.where(np.isfinite(sd), (np.abs(sd) <= 1e-12).astype(float), np.nan), (
            ZERO_STD_SOURCE
        )
    return None, ""


def rollouts_per_point(hyper: Callable[[str], float | None]) -> float | None:
    """Rollouts behind each logged reward, from a run's settings (hyper: name -> number or
    None): N = group_size x batch_prompts (or completions_per_step) when known, times
    steps_per_logged_point where a trainer logs the mean since its last log (TRL's logging_steps,
    `hyperparameters_from_config`). The one reading of N for the diagnosis and the live path."""
    g, b = hyper("group_size"), hyper("batch_prompts")
    n = hyper("completions_per_step") or (g * b if g and b else None)
    return None if n is None else float(n) * float(hyper("steps_per_logged_point") or 1.0)


def n_rollouts(s: Signals) -> float | None:
    """`rollouts_per_point` of a diagnosis's Signals (its config, or a constant logged column)."""
    return rollouts_per_point(s.hyper)


@dataclass(frozen=True)
class IidPrediction:
    """The i.i.d. share of zero-spread groups p^G + (1-p)^G as `advantage_degeneracy` reads it
    (`iid_prediction`); `pgrpo report` draws the same one, so the page and the verdict agree."""

    values: np.ndarray | None
    """[S] per step: the logged degeneracy/iid_prediction, else f_G of the reward on its 0/1
    scale; None when G is unknown or the reward cannot be a mean of 0/1 rewards."""
    alone: bool
    """The reward is known to be a mean of N = B x G 0/1 rewards (`nullmodel.is_binary_mean`):
    the prediction may judge the run without a logged zero-spread share."""
    reason: str
    """Why `values` is None, or (values given) why it cannot judge alone; '' when alone."""


def iid_prediction(s: Signals) -> IidPrediction:
    """The one decision of whether the reward is read as a mean of 0/1 rewards for the i.i.d.
    degeneracy prediction (docs/diagnostics.md, advantage degeneracy): it needs G and a reward
    that can be such a mean on its 0/1 scale (`nullmodel.maybe_binary_mean`: in [0, 1], and
    multiples of 1/N when N = B x G is known), and it stands alone only for a known one
    (`nullmodel.is_binary_mean`). A stated range [0, 1] says where the reward lies, not that
    each rollout's reward is 0 or 1."""
    g = s.hyper("group_size")
    reward = s.unit_reward() if s.has("reward") else None
    ok = np.isfinite(reward) if reward is not None else None
    if g is None or reward is None or not ok.any():
        return IidPrediction(None, False, "no group_size" if g is None else "no reward")
    if g < 2:  # p + (1 - p) = 1: a group of one has no spread by construction
        return IidPrediction(None, False, "group_size 1: a group of one never has a spread")
    n = n_rollouts(s)
    if not nm.maybe_binary_mean(reward, n):
        return IidPrediction(None, False, _not_binary_mean(s, reward[ok], n))
    iid = (
        s.get("degeneracy/iid_prediction")
        if s.has("degeneracy/iid_prediction")
        else iid_degeneracy(reward, g, strict=False)
    )
    if not np.isfinite(iid).any():
        return IidPrediction(None, False, "the logged degeneracy/iid_prediction is never finite")
    if nm.is_binary_mean(reward[ok], n):
        return IidPrediction(iid, True, "")
    why = (
        "N = group_size x batch_prompts is unknown (no batch_prompts), so a reward in [0, 1] "
        "may be a score, not a mean of 0/1 rewards"
    )
    return IidPrediction(iid, False, why)


def _not_binary_mean(s: Signals, unit: np.ndarray, n: float | None) -> str:
    """Why the reward (finite, on its 0/1 scale) cannot be a mean of 0/1 rewards."""
    if unit.min() < 0.0 or unit.max() > 1.0:
        raw = finite(s.get("reward"))
        where = (
            "and no reward range (--reward-range) puts it on a 0/1 scale"
            if s.reward_range() is None
            else "and leaves its stated range too"
        )
        return f"the reward leaves [0, 1] ({raw.min():.4g} to {raw.max():.4g}) {where}"
    why = (
        f"the reward is not known to be a mean of N = {n:g} 0/1 rewards (the rollouts per "
        f"step): its values are not multiples of 1/{n:g}"
    )
    step = rounding_step(finite(s.get("reward")))
    if step is not None and step * n > 1.0:  # 3 decimals at N = 5,120: no lattice to see
        return f"{why}, and logged to steps of {step:g} they cannot show it"
    return f"{why} (a score in [0, 1])"


MIN_LATE_POINTS = 3
"""Logged zero-spread values the second half of the judged steps must hold for a source to
judge the run (the rule is about the run now): a reward_std logged on the first 6 of 120 steps
read "100% of groups have no reward spread" at confidence 1.00 (2026-12-05, session 27)."""
SOURCE_COLUMNS = {
    "frac_reward_zero_std": ("frac_reward_zero_std",),
    "all_pass + all_fail": ("degeneracy/all_pass", "degeneracy/all_fail"),
    ZERO_STD_SOURCE: ("reward_std",),
}
"""The columns each source of `zero_spread_share` reads."""


def second_half(judged: np.ndarray) -> np.ndarray:
    """[S] bool: the later half, by position, of the judged steps ([S] bool)."""
    idx = np.flatnonzero(judged)
    late = np.zeros(judged.shape, dtype=bool)
    late[idx[idx.size // 2 :]] = True
    return late


def zero_spread_now(
    columns: Mapping[str, np.ndarray], judged: np.ndarray, steps: np.ndarray, min_points: int = 4
) -> tuple[np.ndarray | None, str, list[str]]:
    """`zero_spread_share`'s first source that is logged on at least MIN_LATE_POINTS of the
    judged steps ([S] bool; steps [S]) of the run's second half: (share, source, passed over),
    passed over saying, per source logged too early only, on which steps it is. (None, why,
    passed over) when none is: why as `zero_spread_share` gives it."""
    cols, passed = dict(columns), []
    late = second_half(judged)
    while True:
        share, source = zero_spread_share(cols, min_points)
        if share is None:
            return None, source, passed
        logged = judged & np.isfinite(share)
        n_late = int((logged & late).sum())
        if n_late >= MIN_LATE_POINTS:
            return share, source, passed
        where = ""
        if logged.any():
            first, last = (float(steps[i]) for i in np.flatnonzero(logged)[[0, -1]])
            where = f" (steps {first:g}-{last:g})"
        passed.append(
            f"{' + '.join(SOURCE_COLUMNS[source])} is logged on {int(logged.sum())} of the "
            f"{int(judged.sum())} judged steps{where}, {n_late} of them in the second half"
        )
        for name in SOURCE_COLUMNS[source]:
            cols.pop(name, None)


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


def degeneracy_action(ev: dict, reward: np.ndarray, unit_mean: float, truncation: str = "") -> str:
    """reward: [S] on the 0/1 scale of its range when known; unit_mean: its mean there;
    truncation: the clause naming completions cut at the length limit
    (`lengthstats.truncation_cause`) when they are above `lengthstats.TRUNCATION_MAX`: then the
    cut is the action (too hard / too easy / bimodal difficulty would send the user to the
    prompts, while every completion of a cut group scores the same whatever the prompt)."""
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
    if truncation:
        return f"{truncation}: {TRUNCATION_ACTION}, then diagnose again"
    if isinstance(ev.get("jensen_gap"), float) and ev["jensen_gap"] > 0.2:
        action += "; the rate far exceeds the i.i.d. prediction: difficulty is bimodal, filter it"
    return action
