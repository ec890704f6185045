"""A reward's known range (lo, hi): one check of a given range and one rule for when it applies.

`checked_reward_range(value)` is the validation every entry point uses (`task.reward_range`,
`--reward-range`, `LiveConfig.reward_range`, `make_context`): two finite numbers, lo < hi, a
finite width; strings, bytes, mappings and sets are refused (a 2-character string is not a range).
`range_holding(reward, reward_range)` is the range when every finite reward lies inside it,
else None: a range the data leaves is wrong or meant for something else, and the fits, the
forecast and the progress verdict then all ignore it (`pgrpo fit` notes it).
`failure_reward(reward_range)` is what a completion that cannot be scored gets: the low end.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

HINT = "must be (lo, hi): two finite numbers with lo < hi, e.g. (0, 1)"


def checked_reward_range(value: Any, name: str = "reward_range") -> tuple[float, float]:
    """(lo, hi) as floats, or ValueError naming `name` and what a range must be."""
    bad = isinstance(value, str | bytes | bytearray | Mapping | set | frozenset)
    try:
        lo, hi = (float(v) for v in value) if not bad else (math.nan, math.nan)
    except (TypeError, ValueError):
        lo = hi = math.nan
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi and math.isfinite(hi - lo)):
        raise ValueError(f"{name} {HINT}; got {value!r}")
    return lo, hi


def failure_reward(reward_range: tuple[float, float] | None) -> float:
    """The reward of a completion that cannot be scored (its reward call raised, hung or gave a
    non-number, NaN or inf; or it is empty): the low end of the reward's range, so that it never
    scores above a wrong answer and is never reinforced; 0.0 where no range is declared."""
    return 0.0 if reward_range is None else float(reward_range[0])


def range_holding(
    reward: np.ndarray, reward_range: tuple[float, float] | None
) -> tuple[float, float] | None:
    """`reward_range` when every finite value of `reward` ([n]) lies inside it (the ends
    included, to float rounding: 1e-9 of the width), else None."""
    if reward_range is None:
        return None
    lo, hi = reward_range
    r = np.asarray(reward, dtype=float)
    r = r[np.isfinite(r)]
    tol = 1e-9 * (hi - lo)
    if r.size and (float(r.min()) < lo - tol or float(r.max()) > hi + tol):
        return None
    return reward_range


def range_warning(
    reward: np.ndarray, reward_range: tuple[float, float] | None, fix: str = "--reward-range"
) -> str:
    """'' when `range_holding` keeps `reward_range` for `reward` ([n]) or there is none; else the
    warning that the logged reward leaves it, so everything that used it ignores it, ending
    "check <fix>" (the option or argument that gave the range)."""
    r = np.asarray(reward, dtype=float)
    r = r[np.isfinite(r)]
    if reward_range is None or not r.size or range_holding(r, reward_range) is not None:
        return ""
    lo, hi = reward_range
    return (
        f"the logged reward ({r.min():.4g} to {r.max():.4g}) leaves the stated range "
        f"[{lo:g}, {hi:g}]: the fits, the verdict and (when its points before the cut leave it "
        f"too) the forecast ignore the range; check {fix}"
    )
