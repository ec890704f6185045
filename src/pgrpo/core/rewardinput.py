"""Rewards as the advantage estimators and the group statistics take them: one [N] float tensor
in a documented dtype, and one check of their finiteness.

- `as_reward_tensor(rewards)`: numpy arrays, tensors and sequences -> ([N] tensor, "numpy"|"torch")
  in `result_dtype` (float32 and float64 stay; docs/core.md, "Dtype").
- `work_dtype(r, scale)`: the dtype to compute in (float64 for float32 rewards beyond 1e15).
- `check_finite(r, nan)`: the validity mask of `nan="mask"` or the error of `nan="error"`
  (`NonFiniteRewards`, whose fix an adapter can restate in its own config's terms), and the
  largest |finite reward|, in one `torch.aminmax` pass when every reward is finite.
- `warn_outside(who, rewards, valid, bounds, where, consequence)`: the RuntimeWarning of an
  estimator that reads rewards on a scale (sign's reward_range, dual_anchor's [0, 1]).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import torch

from pgrpo.errors import MAX_ABS_VALUE, check_magnitude


def as_reward_tensor(rewards: Any) -> tuple[torch.Tensor, str]:
    """Return (float tensor [N] in `result_dtype`, kind) for numpy arrays, tensors and sequences."""
    if isinstance(rewards, torch.Tensor):
        t, kind = rewards.detach().reshape(-1).cpu(), "torch"
    else:
        arr = np.asarray(rewards)
        if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
            raise TypeError(f"rewards must be numbers, got an array of dtype {arr.dtype}")
        t, kind = torch.from_numpy(np.ascontiguousarray(arr.reshape(-1))), "numpy"
    return t.to(result_dtype(t.dtype)), kind


def result_dtype(dtype: torch.dtype) -> torch.dtype:
    """The float dtype advantages of rewards of `dtype` are computed and returned in, for numpy
    and torch alike: numpy's `result_type(dtype, float32)`. float32 and float64 stay; bool,
    8/16-bit integers, float16 and bfloat16 give float32; 32/64-bit integers give float64 (float32
    does not hold every such integer)."""
    if dtype == torch.bfloat16:  # numpy has no bfloat16; like float16
        return torch.float32
    wide = np.result_type(torch.empty(0, dtype=dtype).numpy().dtype, np.float32)
    return torch.float64 if wide == np.float64 else torch.float32


def work_dtype(r: torch.Tensor, scale: float) -> torch.dtype:
    """The dtype to compute in: r's, or float64 for float32 rewards whose squares (a group's sum
    of squared deviations, ~4 G scale^2) could overflow float32. Float64 rewards beyond
    `MAX_ABS_VALUE` are refused (they overflow float64 the same way)."""
    if scale > MAX_ABS_VALUE:
        check_magnitude(r.numpy(), "reward")
    return torch.float64 if r.dtype == torch.float32 and scale > 1e15 else r.dtype


class NonFiniteRewards(ValueError):
    """nan="error" met NaN or infinite rewards. `setting` says how the caller passes nan="mask"
    where the call came from (an adapter re-raises `with_setting(...)`: verl's config key), `note`
    adds what that route needs said."""

    def __init__(
        self,
        count: int,
        positions: list[int],
        setting: str = "pass nan='mask'",
        note: str = (
            " (`pgrpo train`: grpo.nan_rewards=mask, its default; only a reward beyond float32's "
            "~3.4e38 gets here there, since scoring gives a reward function's NaN, inf or error "
            "the low end of the task's reward range)"
        ),
    ) -> None:
        self.count, self.positions, self._setting, self._note = count, positions, setting, note
        super().__init__(
            f"{count} reward(s) are NaN or infinite (first positions: {positions}); fix the reward "
            f"function, or {setting} to leave them out of the group statistics with advantage 0"
            f"{note}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        """Picklable (Ray sends a verl worker's exception back pickled)."""
        return (type(self), (self.count, self.positions, self._setting, self._note))

    def with_setting(self, setting: str, note: str = "") -> NonFiniteRewards:
        """The same error, naming the caller's way to pass nan="mask"."""
        return NonFiniteRewards(self.count, self.positions, setting, note)


def check_finite(r: torch.Tensor, nan: str) -> tuple[torch.Tensor | None, float]:
    """(validity mask, scale): mask None when every reward is finite, else the [N] bool mask
    (nan="mask") or NonFiniteRewards (nan="error"); scale the largest |finite reward| (0 for
    none). One min/max pass (`torch.aminmax`) usually decides both: a NaN or inf reaches the min
    or the max."""
    if nan not in ("error", "mask"):
        raise ValueError(f"nan must be 'error' or 'mask', got {nan!r}")
    if not r.numel():
        return None, 0.0
    lo, hi = (float(x) for x in torch.aminmax(r))
    if math.isfinite(lo) and math.isfinite(hi):
        return None, max(-lo, hi)
    finite = torch.isfinite(r)
    if nan == "error":
        raise NonFiniteRewards(int((~finite).sum()), (~finite).nonzero().flatten()[:10].tolist())
    kept = r[finite]
    return finite, float(kept.abs().max()) if kept.numel() else 0.0


def warn_outside(
    who: str,
    rewards: torch.Tensor,
    valid: torch.Tensor | None,
    bounds: tuple[float, float],
    where: str,
    consequence: str,
) -> None:
    """A RuntimeWarning when a valid reward of `rewards` [N] lies outside `bounds`, the range
    estimator `who` reads them on (`where` names it), saying what follows (`consequence`)."""
    seen = rewards if valid is None else rewards[valid]
    if seen.numel() and bool(((seen < bounds[0]) | (seen > bounds[1])).any()):
        lo, hi = float(seen.min()), float(seen.max())
        warnings.warn(
            f"{who}: rewards from {lo:g} to {hi:g} lie outside {where} [{bounds[0]:g}, "
            f"{bounds[1]:g}], {consequence}",
            RuntimeWarning,
            stacklevel=4,  # the caller of compute_advantages
        )
