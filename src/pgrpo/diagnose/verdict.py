"""Typed results of a diagnosis and the registry of per-mode rules."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pgrpo._registry import Registry

MODES = ("reward_hacking", "advantage_degeneracy", "policy_concentration", "dynamical_instability")


@dataclass(frozen=True)
class ModeVerdict:
    """One failure mode's verdict.

    detected: the rule fired. confidence: in [0, 1], how sure the verdict (either way) is; lower
    when signals are missing. evidence: the figures the rule used, stable names. action: what to
    change (empty when nothing to do). missing: signals the rule wanted but the log lacks; when
    every signal it needs is missing, detected is False and confidence 0 ("cannot judge").
    """

    name: str
    detected: bool
    confidence: float
    evidence: dict[str, Any] = field(default_factory=dict)
    action: str = ""
    missing: list[str] = field(default_factory=list)

    @property
    def judged(self) -> bool:
        return self.confidence > 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "detected": self.detected,
            "confidence": round(self.confidence, 3),
            "evidence": {k: _jsonable(v) for k, v in self.evidence.items()},
            "action": self.action,
            "missing": list(self.missing),
        }


@dataclass(frozen=True)
class Diagnosis:
    """modes: the four failure-mode verdicts then `healthy`, in MODES order; progress: the
    ProgressVerdict of the reward curve (`pgrpo.diagnose.progress`), None without a reward."""

    modes: list[ModeVerdict]
    metrics: dict[str, float] = field(default_factory=dict)
    progress: Any = None

    def mode(self, name: str) -> ModeVerdict:
        for verdict in self.modes:
            if verdict.name == name:
                return verdict
        raise KeyError(f"no mode {name!r}; modes: {', '.join(v.name for v in self.modes)}")

    @property
    def healthy(self) -> ModeVerdict:
        return self.mode("healthy")

    def findings(self) -> list[dict[str, str]]:
        """Plain-words findings, the verdict first: [{"about", "sentence", "action"}]."""
        from pgrpo.diagnose.findings import findings

        return findings(self)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.progress is not None:
            out["progress"] = self.progress.to_dict()
        out["findings"] = self.findings()
        out["modes"] = [v.to_dict() for v in self.modes]
        out["metrics"] = dict(self.metrics)
        return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, float | int) and not isinstance(value, bool):
        value = float(value)
        return round(value, 6) if math.isfinite(value) else None
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):
        return _jsonable(value.item())
    return value


# A rule: fn(signals) -> ModeVerdict. Registered under its mode name.
DIAGNOSTIC_RULES: Registry[Callable[..., ModeVerdict]] = Registry("diagnostic rule")


FIRM_CONFIDENCE = 0.5
"""A detected mode at or above this confidence is firm: `pgrpo diagnose --fail-on fail` fails
on it (`cli._checks`); below it (a mode read from few of its signals) the finding says the
evidence is weak."""


NEAR_CEILING = 0.05
"""A reward whose last tenth is within this share of its known range below the top is near its
ceiling: a narrow policy is then what solving the task looks like, not a collapse to fix
(`concentration.policy_concentration`'s action and `findings`' words). Not tuned on runs: the
share of a range below which lowering the learning rate could buy little and costs the rest of
the run."""


def confidence(value: float, threshold: float, scale: float) -> float:
    """Probability-like strength that `value` exceeds `threshold`: 0.5 at the threshold, towards
    1 (or 0) `scale` units above (below) it."""
    if not math.isfinite(value):
        return 0.5
    return 0.5 + 0.5 * math.tanh((value - threshold) / scale)


def verdict(
    name: str,
    strength: float,
    evidence: dict[str, Any],
    *,
    action: str,
    missing: list[str],
    coverage: float = 1.0,
) -> ModeVerdict:
    """Detected iff strength > 0.5; confidence = how far from 0.5, shrunk by signal coverage."""
    detected = strength > 0.5
    conf = (strength if detected else 1.0 - strength) * (0.5 + 0.5 * coverage)
    return ModeVerdict(name, detected, conf, evidence, action if detected else "", missing)


def cannot_judge(name: str, missing: list[str], why: str) -> ModeVerdict:
    return ModeVerdict(name, False, 0.0, {"reason": why}, "", missing)


def not_applicable(name: str, why: str) -> ModeVerdict:
    """A mode the run's settings rule out (not a signal the log lacks): not judged, nothing to
    log; `findings` says why it does not apply instead of asking for signals."""
    return ModeVerdict(name, False, 0.0, {"reason": why, "not_applicable": 1.0}, "", [])
