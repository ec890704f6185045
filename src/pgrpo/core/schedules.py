"""The learning-rate schedule: one function for the trainer, the bandit testbed and the
synthetic curves, with the decay shapes behind a registry.

    lr_factor("cosine", step, total, warmup) * lr    # multiplier of the base lr at `step`
    lr_horizon("cosine", lr, total, start, warmup)   # the lr at steps start .. total - 1

Linear warm-up over `warmup` steps ((step + 1) / warmup), then the decay shape of
frac = (step - warmup) / (total - warmup), clipped to [0, 1], from 1 down to `floor`.
The decay is transformers' `get_linear_schedule_with_warmup` / `get_cosine_schedule_with_warmup`
(TRL's): `floor` is reached at step `total`, one past the last optimizer step; that last step
runs at floor + (1 - floor) / (total - warmup) under `linear` (lr_factor("linear", 9, 10) = 0.1).
Warm-up differs on purpose: transformers' first step runs at lr 0 (step / warmup), ours at
1 / warmup; with no warm-up (TRL's default) the two schedules are the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pgrpo._registry import Registry

LR_SCHEDULES: Registry[Callable[[np.ndarray], np.ndarray]] = Registry("lr_schedule")
"""Decay shapes: fn(frac [S] in [0, 1]) -> [S], 1 at frac 0; 0 at frac 1 for decays."""

LR_SCHEDULES.add("constant", lambda frac: np.ones_like(frac))
LR_SCHEDULES.add("linear", lambda frac: 1.0 - frac)
LR_SCHEDULES.add("cosine", lambda frac: 0.5 * (1.0 + np.cos(math.pi * frac)))


def lr_factor(schedule: str, step: Any, total: int, warmup: int = 0, floor: float = 0.0) -> Any:
    """Multiplier of the base lr at 0-based `step` (int -> float, array [S] -> [S]).

    Warm-up: (step + 1) / warmup for step < warmup; then floor + (1 - floor) * shape(frac)
    with frac = (step - warmup) / max(total - warmup, 1) clipped to [0, 1].
    """
    shape = LR_SCHEDULES.get(schedule)
    if warmup < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup}")
    if not 0.0 <= floor <= 1.0:  # NaN fails too
        raise ValueError(f"floor must be in [0, 1] (a fraction of the base lr), got {floor!r}")
    s = np.asarray(step, dtype=np.float64)
    frac = np.clip((s - warmup) / max(total - warmup, 1), 0.0, 1.0)
    decay = floor + (1.0 - floor) * shape(frac)
    out = np.where(s < warmup, (s + 1) / max(warmup, 1), decay)
    return float(out) if out.ndim == 0 else out


def decays(schedule: str) -> bool:
    """Whether the schedule's shape changes after warm-up (so it depends on the total steps)."""
    return bool(np.any(LR_SCHEDULES.get(schedule)(np.array([0.5, 1.0])) != 1.0))


@dataclass(frozen=True)
class LRHorizon:
    """The lr of optimizer steps start .. total - 1 of a schedule of `total` steps (`lr_horizon`):
    what a prediction from step `start` of a run runs at."""

    lrs: np.ndarray
    """[total - start] the lr at each remaining optimizer step."""
    start: int
    total: int
    lr: float
    """The schedule's base (peak) lr, which its steps reach only where the factor is 1."""
    schedule: str

    @property
    def steps(self) -> int:
        return self.total - self.start

    @property
    def peak(self) -> float:
        return float(self.lrs.max())

    @property
    def varying(self) -> np.ndarray | None:
        """`lrs`, or None where every step runs at the base lr of a schedule that does not decay
        (`pgrpo.dynamics.predict`'s lr_schedule: None is a constant lr, which has a continuum
        limit beyond the horizon). A decaying schedule's horizon stays a schedule even where its
        steps share one lr (one step): read as constant it gave a continuum inflection time
        far beyond a 1-step horizon (review, session 40)."""
        constant = not decays(self.schedule) and bool(np.all(self.lrs == self.lr))
        return None if constant else self.lrs


def lr_horizon(
    schedule: str, lr: float, total: int, start: int = 0, warmup: int = 0, floor: float = 0.0
) -> LRHorizon:
    """lr x `lr_factor` at 0-based optimizer steps start .. total - 1 of a schedule of `total`
    steps: [total - start]. The trainer's scheduler runs step n at lr x lr_factor(n, total), so
    this is the lr of a run's remaining steps from `start` on (`pgrpo probe`, `pgrpo predict`).
    start >= total has no steps left and raises ValueError: nothing remains to predict."""
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite number > 0, got {lr}")
    if start < 0:
        raise ValueError(f"start must be an optimizer step >= 0, got {start}")
    if start >= total:
        raise ValueError(
            f"start {start} is not before total {total}: no optimizer steps are left after "
            "the schedule's end"
        )
    lrs = lr * np.asarray(lr_factor(schedule, np.arange(start, total), total, warmup, floor))
    return LRHorizon(lrs.astype(np.float64), int(start), int(total), float(lr), schedule)
