"""The run's settings a fit uses, and where each came from: the log or the command line.

`resolve_settings(log, given)` merges what the user gave (lr, beta1, refresh_interval K,
group_size G, batch_prompts B, optimizer, the reward's range reward_min / reward_max) over what
the log gives (its columns and config; the command line wins), states what is assumed (beta1 =
the optimizer's framework default when the optimizer is known but beta1 is not; K = 1 when no K
is known; one optimizer step per logged step without an `optimizer_step` column) and says why
the closed form (m, c from beta1 and K, `rom_fixed`) cannot be fitted when lr or beta1 stays
unknown. `pgrpo fit` prints it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pgrpo.core.rewardrange import range_warning
from pgrpo.dynamics.optimizers import (
    DEFAULT_OPTIMIZER,
    FRAMEWORK_BETA1,
    known_optimizers,
    run_optimizer,
)
from pgrpo.logs import RewardLog
from pgrpo.logs.base import hyperparameters_from_columns

SETTINGS = (
    "lr",
    "beta1",
    "refresh_interval",
    "group_size",
    "batch_prompts",
    "optimizer",
    "reward_min",
    "reward_max",
)
"""The settings a run's fit reads, in the order they are reported."""
ASSUMED_REFRESH_INTERVAL = 1
"""K when neither the log nor the user gives one (one optimizer step per rollout batch): the fit,
the diagnosis' stability margin, the report's K/K* panel and the live forecast take it."""
COMMAND_LINE, LOG_COLUMN, LOG_CONFIG, ASSUMED = (
    "command line",
    "log column",
    "log config",
    "assumed",
)


@dataclass(frozen=True)
class RunSettings:
    """values: setting -> value (None: unknown); sources: setting -> COMMAND_LINE / LOG_COLUMN /
    LOG_CONFIG / ASSUMED (absent when unknown); notes: one sentence per assumption or per reason
    the closed form is not fitted; metrics: `closed_form_fitted` and `optimizer_step_logged`
    (1.0 / 0.0), `reduction` (the dynamics model's name for the optimizer), and
    `closed_form_identified` 0.0 only when the reward never changed (nothing identifies it)."""

    values: dict[str, Any]
    sources: dict[str, str]
    notes: tuple[str, ...]
    metrics: dict[str, float | str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """{"values", "sources", "notes", "metrics", "warnings"}: JSON-ready. warnings: what
        the data contradicts in the settings given (a reward outside the stated range); the
        commands print them with the log's warnings, at the top."""
        return {
            "values": dict(self.values),
            "sources": dict(self.sources),
            "notes": list(self.notes),
            "metrics": dict(self.metrics),
            "warnings": list(self.warnings),
        }


def _log_source(log: RewardLog, name: str, from_columns: Mapping[str, float]) -> str:
    """LOG_COLUMN when the log's value is its column's (the lr schedule's peak, a constant
    column's median), else LOG_CONFIG (the run's config, which the readers let win)."""
    return LOG_COLUMN if from_columns.get(name) == log.hyperparameters.get(name) else LOG_CONFIG


def resolve_settings(
    log: RewardLog, given: Mapping[str, Any] | None = None
) -> tuple[RewardLog, RunSettings]:
    """(log with the merged settings as its hyperparameters, RunSettings) for `fit_log`.

    given: setting -> value from the command line (None / absent: not given; already checked,
    `pgrpo.cli._runopts.given_settings`). A given lr is the peak: a logged lr schedule keeps
    its shape, rescaled to it. `kappa` (diagnose's, not the fit's) is ignored; other unknown
    names raise (a typo must not pass silently)."""
    given = {k: v for k, v in (given or {}).items() if v is not None and k != "kappa"}
    unknown = set(given) - set(SETTINGS)
    if unknown:
        raise ValueError(f"unknown setting(s) {sorted(unknown)}; valid: {', '.join(SETTINGS)}")
    hyper = dict(log.hyperparameters)
    from_columns = hyperparameters_from_columns(log.columns)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    notes: list[str] = []
    for name in SETTINGS:
        logged = None
        if hyper.get(name) is not None:
            logged = hyper[name], _log_source(log, name, from_columns)
        if name in given:
            values[name], sources[name] = given[name], COMMAND_LINE
            _replaced(name, given[name], logged, notes)
        elif logged is not None:
            values[name], sources[name] = logged
    log = _rescaled_schedule(log, given.get("lr"), notes)
    reduction = _reduction(values, sources, notes)
    if reduction is None:  # the free fit needs no optimizer: m, c are fitted, beta1 unused
        for name in ("optimizer", "beta1"):
            hyper.pop(name, None)
    else:
        _assume_beta1(values, sources, reduction, notes)
    if "refresh_interval" not in values:
        values["refresh_interval"] = ASSUMED_REFRESH_INTERVAL
        sources["refresh_interval"] = ASSUMED
        notes.append("K = 1 assumed (one optimizer step per rollout batch); give "
                     "--refresh-interval if the run took more")  # fmt: skip
    constant = _constant_reward(log, notes)
    fitted = reduction is not None and not constant and _closed_form_notes(values, notes)
    noise = [f"{n} {given[n]:g}" for n in ("group_size", "batch_prompts") if n in given]
    if noise:
        notes.append(f"{', '.join(noise)}: recorded; they set the batch noise, not m or c; "
                     "G also sets the share of groups with a reward spread, which the "
                     "rom_starved variant reads (fitted for a reward on a 0/1 scale)")  # fmt: skip
    warnings: list[str] = []
    _range_note(log, values, warnings)
    opt_col = log.columns.get("optimizer_step")
    clock = opt_col is not None and bool(np.isfinite(opt_col).any())
    if not clock:
        notes.append("time axis: one optimizer step per logged step (no optimizer_step column); "
                     "kappa is per logged step if the log counts rollout batches")  # fmt: skip
    hyper.update({k: v for k, v in values.items() if v is not None
                  and not (reduction is None and k in ("optimizer", "beta1"))})  # fmt: skip
    if "lr" in given:
        hyper["learning_rate"] = given["lr"]
    metrics: dict[str, float | str] = {
        "closed_form_fitted": float(fitted),
        "reduction": reduction or "none",
        "optimizer_step_logged": float(clock),
    }
    if constant:
        metrics["closed_form_identified"] = 0.0
    settings = RunSettings({n: values.get(n) for n in SETTINGS}, sources, tuple(notes), metrics,
                           tuple(warnings))  # fmt: skip
    return replace(log, hyperparameters=hyper), settings


def with_given(log: RewardLog, given: Mapping[str, Any] | None = None) -> RewardLog:
    """`log` with the given settings over its hyperparameters and nothing assumed: what
    `pgrpo diagnose` and the report's diagnosis read (a given lr also as `learning_rate`, the
    diagnosis' name; `kappa` is diagnose's own setting and passes through)."""
    given = {k: v for k, v in (given or {}).items() if v is not None}
    unknown = set(given) - {*SETTINGS, "kappa"}
    if unknown:
        raise ValueError(f"unknown setting(s) {sorted(unknown)}; valid: {', '.join(SETTINGS)}, "
                         "kappa")  # fmt: skip
    if not given:
        return log
    extra = {"learning_rate": given["lr"]} if "lr" in given else {}
    return replace(log, hyperparameters={**log.hyperparameters, **given, **extra})


def _replaced(name: str, value: Any, logged: Any, notes: list[str]) -> None:
    """A note when a setting given on the command line replaces another value the log holds
    (logged: (value, source), or None) (review rev41, L1: only the lr said so, and --group-size,
    --beta1, --refresh-interval replaced the log's values with no word). Whether a logged lr
    schedule is rescaled is `_rescaled_schedule`'s to decide and to say."""
    if logged is None or logged[0] == value:
        return
    show = lambda v: f"{v:.4g}" if isinstance(v, int | float) else str(v)  # noqa: E731
    notes.append(f"{name} {show(value)} (command line) replaces the log's {show(logged[0])} "
                 f"({logged[1]})")  # fmt: skip


def _rescaled_schedule(log: RewardLog, lr: float | None, notes: list[str]) -> RewardLog:
    """A logged lr schedule rescaled so that its peak is the given lr (its shape kept), with the
    note that says so whenever it is, and only then (the final review of rev41: the note once
    followed the config's lr, the rescale the column's peak, so a config lr equal to --lr hid a
    rescale and a differing one claimed a rescale that never happened)."""
    col = log.columns.get("learning_rate")
    if lr is None or col is None or not np.isfinite(col).any():
        return log
    peak = float(np.nanmax(col))
    if peak == lr:
        return log
    if not peak > 0:
        notes.append(f"the logged learning_rate is never > 0; a constant lr {lr:g} is used")
        return replace(log, columns={k: v for k, v in log.columns.items() if k != "learning_rate"})
    notes.append(f"the logged lr schedule (peak {peak:.4g}) rescaled to the given peak {lr:.4g}, "
                 "its shape kept")  # fmt: skip
    return replace(log, columns={**log.columns, "learning_rate": col * (lr / peak)})


def _reduction(values: dict, sources: dict, notes: list[str]) -> str | None:
    """The dynamics model's name for the run's optimizer; None (with a note) when the log names
    one the model has no reduction for: the free fit then goes on without it."""
    try:
        return run_optimizer(values.get("optimizer"))
    except ValueError:
        name, source = values["optimizer"], sources["optimizer"]
        notes.append(f"optimizer {name!r} ({source}) has no reduction in the dynamics model: "
                     "the closed form (m, c from beta1 and K) is not fitted, the free fit needs "
                     f"no optimizer; give --optimizer ({known_optimizers()}) if the run used "
                     "one of these")  # fmt: skip
        return None


def _assume_beta1(values: dict, sources: dict, reduction: str, notes: list[str]) -> None:
    """beta1 = the optimizer's framework default when the optimizer is known and beta1 is not."""
    if "beta1" in values:
        return
    default = FRAMEWORK_BETA1.get(reduction)
    if "optimizer" in values and default is not None:
        values["beta1"], sources["beta1"] = default, ASSUMED
        notes.append(f"beta1 = {default:g} assumed ({values['optimizer']}'s default: the "
                     "log gives no beta1); give --beta1 if the run set another")  # fmt: skip


def _range_note(log: RewardLog, values: dict, warnings: list[str]) -> None:
    """A warning when the logged reward leaves its stated range (`rewardrange.range_warning`:
    the fits, the forecast and the verdict then ignore the range)."""
    lo, hi = values.get("reward_min"), values.get("reward_max")
    left = range_warning(log.reward, None if lo is None or hi is None else (lo, hi))
    if left:
        warnings.append(left)


def _constant_reward(log: RewardLog, notes: list[str]) -> bool:
    """Whether the logged reward never changed (with a note: then no lr or beta1 identifies
    the closed form, and the fits' AIC comparison means nothing)."""
    r = np.asarray(log.reward, dtype=float)
    r = r[np.isfinite(r)]
    if not (r.size and np.ptp(r) == 0):
        return False
    notes.append("closed form (m, c from beta1 and K) and the AIC comparison not identified: "
                 "the reward never changed, so every model fits it exactly")  # fmt: skip
    return True


def _closed_form_notes(values: dict, notes: list[str]) -> bool:
    """Whether lr and beta1 are known (the closed form is then fitted); else why not, and how."""
    missing = []
    if values.get("lr") is None:
        missing.append("no learning rate (no lr column or config; give --lr)")
    if values.get("beta1") is None:
        if "optimizer" in values:
            why = f"{values['optimizer']} has no default momentum to assume; give --beta1"
        else:
            default = FRAMEWORK_BETA1[DEFAULT_OPTIMIZER]
            why = ("the log names neither beta1 nor the optimizer; give --beta1, or "
                   f"--optimizer adamw to assume AdamW's default {default:g}")  # fmt: skip
        missing.append(f"beta1 unknown ({why})")
    if missing:
        notes.append("closed form (m, c from beta1 and K) not fitted: " + "; ".join(missing))
    return not missing
