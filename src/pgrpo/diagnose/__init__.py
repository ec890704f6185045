"""Diagnose why a GRPO run behaves as it does: the four failure modes of the dynamics paper
(reward hacking, advantage degeneracy, policy concentration, dynamical instability) plus a
`healthy` verdict, from whatever columns a training log holds.

    from pgrpo.logs import read_log
    from pgrpo.diagnose import diagnose
    d = diagnose(read_log("runs/x/metrics.jsonl"), eval_log="runs/x/eval.json")
    [(v.name, v.detected, v.action) for v in d.modes]
    d.progress.label, d.progress.summary      # learning / plateau / flat / declining / ...
    [f["sentence"] for f in d.findings()]     # the verdict in plain words, then each mode

What runs a model (effective ranks, the gradient matrix, the curvature probe) is `pgrpo.measure`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from pgrpo.diagnose import concentration as _concentration  # noqa: F401  (registers its rule)
from pgrpo.diagnose import instability as _instability  # noqa: F401  (registers its rule)
from pgrpo.diagnose import rules as _rules  # noqa: F401  (registers the rules)
from pgrpo.diagnose.findings import spread_progress
from pgrpo.diagnose.progress import (
    PROGRESS_LABELS,
    ProgressVerdict,
    assess_progress,
    assess_signals,
)
from pgrpo.diagnose.signals import (
    MAX_POINTS,
    Signals,
    eval_rows,
    paired_eval_gain,
    read_eval_records,
    signals_from_log,
    thin_signals,
)
from pgrpo.diagnose.verdict import (
    DIAGNOSTIC_RULES,
    MODES,
    Diagnosis,
    ModeVerdict,
)


def diagnose(log: Any, eval_log: Any = None, max_points: int = MAX_POINTS) -> Diagnosis:
    """Run every registered rule on `log` (a RewardLog, a mapping of columns, or Signals).

    eval_log: None, a path to a `pgrpo eval` JSON / step-accuracy JSONL, or a sequence of
    (step, accuracy) pairs or (step, accuracy, standard error) triples (the error tells an eval
    change from noise in `reward_hacking`; a path gives it from the records' sizes).
    max_points: longer logs are analysed as bin means of b consecutive
    steps (`pgrpo.diagnose.signals.thin_signals`; metrics analysed_points, bin_steps). Returns
    the four mode verdicts in MODES order, then `healthy`.
    """
    if isinstance(eval_log, str | Path):
        points, se = read_eval_records(eval_log)
    else:  # checked, and several points at one step merged, as from a file
        points, se = eval_rows(eval_log)
    signals = log if isinstance(log, Signals) else signals_from_log(log, points, se)
    if points and not signals.eval_points:  # new points: any pairing carried in is stale
        signals = replace(signals, eval_points=points, eval_se=se, eval_gain=math.nan,
                          eval_gain_se=math.nan)  # fmt: skip
    if isinstance(eval_log, str | Path) and signals.eval_points == points:
        gain, gain_se = paired_eval_gain(eval_log)
        signals = replace(signals, eval_gain=gain, eval_gain_se=gain_se)
    n_steps = float(signals.steps.size)
    signals = thin_signals(signals, max_points)
    modes = [DIAGNOSTIC_RULES.get(name)(signals) for name in MODES]
    modes += [DIAGNOSTIC_RULES.get(n)(signals) for n in DIAGNOSTIC_RULES.names() if n not in MODES]
    progress = assess_signals(signals) if "reward" in signals.columns else None
    progress = spread_progress(progress, modes)  # the action the entropy's words call for
    return Diagnosis(
        modes=[*modes, _healthy(modes, progress)],
        metrics={
            "steps": n_steps,
            "analysed_points": float(signals.steps.size),
            "bin_steps": float(signals.config.get("bin_steps", 1)),
        },
        progress=progress,
    )


def _healthy(modes: list[ModeVerdict], progress: ProgressVerdict | None = None) -> ModeVerdict:
    """Healthy = no mode detected and at least two modes could be judged; its action is the
    progress verdict's (a healthy run can still be flat or at its plateau)."""
    fired = [v.name for v in modes if v.detected]
    judged = [v for v in modes if v.judged]
    evidence: dict[str, Any] = {"detected_modes": ",".join(fired), "judged_modes": len(judged)}
    missing = sorted({m for v in modes if not v.judged for m in v.missing})
    if fired:
        conf = max(v.confidence for v in modes if v.detected)
        # a mode its rule calls the expected end of the run (`expected_end`) is not one to fix
        ends = [v.name for v in modes if v.detected and v.evidence.get("expected_end")]
        fix = [name for name in fired if name not in ends]
        action = "; ".join(
            [f"fix: {', '.join(fix)}"] * bool(fix)
            + [f"{', '.join(ends)}: the expected end of the run, nothing to fix"] * bool(ends)
        )
        return ModeVerdict("healthy", False, conf, evidence, action, missing)
    if len(judged) < 2:
        return ModeVerdict("healthy", False, 0.0, evidence, "", missing)
    conf = min(v.confidence for v in judged) * len(judged) / len(modes)
    action = (progress.action if progress is not None else "") or "no failure mode: keep training"
    return ModeVerdict("healthy", True, conf, evidence, action, missing)


__all__ = [
    "DIAGNOSTIC_RULES",
    "MAX_POINTS",
    "MODES",
    "PROGRESS_LABELS",
    "Diagnosis",
    "ModeVerdict",
    "ProgressVerdict",
    "Signals",
    "assess_progress",
    "diagnose",
]
