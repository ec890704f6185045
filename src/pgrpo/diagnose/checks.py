"""Run-level checks beside the failure modes: zero-gradient steps, wasted compute, verifier
gaming, entropy floor, completions cut at the length limit, the KL's level. Each is a pure function
`fn(log, options) -> CheckResult` registered in `CHECKS` (the only dispatch path);
`run_checks(log, options)` runs them all.

A check's status is `ok`, `warn` or `not_enough_evidence` (the log lacks the column, or has too
few points); `false_alarm` states how its false alarms are controlled (a null it was measured
on, or a threshold and its reason).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pgrpo._registry import Registry
from pgrpo.diagnose.curvestats import window_mean_sd
from pgrpo.diagnose.live import noise_sd, slope_t
from pgrpo.diagnose.nullmodel import lag1_autocorr
from pgrpo.diagnose.signals import MAX_POINTS

STATUSES = ("ok", "warn", "not_enough_evidence")


@dataclass(frozen=True)
class CheckOptions:
    """What the user tells about the run: its cost, its length limit (all optional)."""

    cost_per_step: float | None = None
    """Cost of one optimizer step (any currency)."""
    cost_per_gpu_hour: float | None = None
    """Cost of one GPU-hour; needs the step time (logged, or seconds_per_step)."""
    gpus: int = 1
    """GPUs the run uses (with cost_per_gpu_hour)."""
    seconds_per_step: float | None = None
    """Wall time of one step; default: from the log's timing columns when present."""
    confidence: float = 0.9
    """Confidence level of the checks' statistics: wasted compute confirms the plateau stop
    when the later gain is below this one-sided z; the entropy floor uses this band level."""
    max_points: int = MAX_POINTS
    """Logs longer than this are checked on bin means (`pgrpo.diagnose.signals.thin_log`), as
    the diagnosis does; exact counts (zero-gradient steps) stay per step."""
    max_completion_length: int | None = None
    """The run's completion length limit in tokens (TRL `max_completion_length`, verl
    `data.max_response_length`): without a logged clipped ratio, a step whose mean completion
    length is at it had every completion cut (`truncated_completions`)."""

    def __post_init__(self) -> None:
        for name in ("cost_per_step", "cost_per_gpu_hour", "seconds_per_step"):
            v = getattr(self, name)
            if v is not None and not (v >= 0 and math.isfinite(v)):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if self.gpus < 1:
            raise ValueError(f"gpus must be >= 1, got {self.gpus}")
        if self.max_points < 20:
            raise ValueError(f"max_points must be >= 20 (the live replay's min_points), got "
                             f"{self.max_points}")  # fmt: skip
        m = self.max_completion_length
        if m is not None and (isinstance(m, bool) or not isinstance(m, numbers.Integral) or m < 1):
            raise ValueError(f"max_completion_length must be a whole number of tokens >= 1 (the "
                             f"run's TRL max_completion_length or verl data.max_response_length),"
                             f" got {m!r}")  # fmt: skip


@dataclass(frozen=True)
class CheckResult:
    """name; status (one of STATUSES); summary: one line for people; evidence: figures with
    stable names; false_alarm: how false alarms are controlled; metrics: numeric evidence."""

    name: str
    status: str
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    false_alarm: str = ""
    metrics: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        ev = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
              for k, v in self.evidence.items()}  # fmt: skip
        return {"name": self.name, "status": self.status, "summary": self.summary,
                "evidence": ev, "false_alarm": self.false_alarm}  # fmt: skip


CHECKS: Registry[Callable[..., CheckResult]] = Registry("run check")


def check_names() -> list[str]:
    """The names of every check, in registration-name order, after importing the modules that
    register them (lazily: they import the forecast; a counter built from `CHECKS.names()`
    before any `run_checks` call missed them)."""
    from pgrpo.diagnose import costs as _costs  # noqa: F401  (registers)
    from pgrpo.diagnose import entropy as _entropy  # noqa: F401
    from pgrpo.diagnose import gaming as _gaming  # noqa: F401
    from pgrpo.diagnose import kllevel as _kllevel  # noqa: F401
    from pgrpo.diagnose import truncation as _truncation  # noqa: F401

    return CHECKS.names()


def run_checks(log: Any, options: CheckOptions | None = None) -> list[CheckResult]:
    """Every registered check on a RewardLog, in registration-name order."""
    opts = options or CheckOptions()
    return [CHECKS.get(name)(log, opts) for name in check_names()]


def not_enough(name: str, why: str, false_alarm: str = "") -> CheckResult:
    return CheckResult(name, "not_enough_evidence", f"not enough evidence: {why}", {}, false_alarm)


def column(log: Any, name: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(step, values) of a column where it is finite, or None when absent."""
    col = log.columns.get(name)
    if col is None:
        return None
    ok = np.isfinite(col)
    return (log.step[ok], col[ok]) if ok.any() else None


@dataclass(frozen=True)
class Trend:
    """Change of a series from its first to its last quarter. gain: difference of the quarter
    means; se: its standard error (two AR(1) window means, `curvestats.window_mean_sd`, from
    the first-difference noise at the 90% upper bound on the lag-1 autocorrelation,
    `nullmodel.lag1_autocorr`; the point estimate fired on 9% of AR(1) null columns at rho 0.9,
    n = 30; before 2026-12-04 the differences' scale was taken for the series' own, an se
    sqrt(1 - rho) too small);
    t: gain / se; slope_t: t of the OLS slope over the whole series; t_flat: gain over the
    uninflated standard error (rho 0), what a claim that the series did NOT move reads: the
    bound on rho that guards a claim of a rise would make "flat" easy (at n = 12 the bound is
    0.9 for most white-noise curves, a t 4.4x smaller)."""

    gain: float
    se: float
    t: float
    slope_t: float
    start: float
    end: float
    t_flat: float = 0.0


def trend(step: np.ndarray, y: np.ndarray) -> Trend:
    """step, y: [n], n >= 8."""
    q = max(2, y.size // 4)
    a, b = float(np.mean(y[:q])), float(np.mean(y[-q:]))
    rho = lag1_autocorr(y)  # the reward-curve nulls' 90% upper bound (one estimate everywhere)
    noise = noise_sd(y)
    plain = noise * math.sqrt(2.0 / q)
    se = math.sqrt(2.0) * window_mean_sd(noise, q, rho)
    gain = b - a
    t, t_flat = (
        gain / d if d > 0 else (math.copysign(math.inf, gain) if gain else 0.0) for d in (se, plain)
    )
    return Trend(gain, se, t, slope_t(step, y, rho), a, b, t_flat)
