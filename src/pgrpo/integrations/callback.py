"""`PgrpoCallback`: live forecasts, verdicts, alerts and early stop for any `transformers`
Trainer that logs a reward (TRL's GRPOTrainer, a subclass, Unsloth's patched trainer).

Needs only transformers (no TRL private API); `pgrpo.integrations.trl` re-exports it.
"""

from __future__ import annotations

import json
import math
import os
import sys
import warnings
import weakref
from dataclasses import fields
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import CallbackHandler, DefaultFlowCallback

BATCH_WIDE = (
    "TRL's frac_reward_zero_std is 1 only when the whole batch has one reward under "
    "scale_rewards='batch' or multi_objective_aggregation='normalize_then_sum', not a share of "
    "groups: pgrpo/degeneracy is not given and the degeneracy rule reads steps with "
    "reward_std == 0 instead (a lower bound: it acts only when no group has any spread); for "
    "the per-group share use scale_rewards='group' or PgrpoGRPOTrainer"
)
"""Said once a train() when the args make TRL's zero-std column batch-wide (review 41, F1)."""
DROPPED = "frac_reward_zero_std"


def batch_wide_zero_std(args: Any) -> bool:
    """Whether TRL (1.16) computes `frac_reward_zero_std` from the batch-wide reward std, so
    that it is 0 or 1 for the whole batch, not a share of groups (`_calculate_rewards`)."""
    return getattr(args, "scale_rewards", None) == "batch" or (
        getattr(args, "multi_objective_aggregation", None) == "normalize_then_sum"
    )


def _has_reward(entry: dict[str, Any]) -> bool:
    """A training log entry with a reward (not an eval or a summary entry)."""
    from pgrpo.logs.base import REWARD_KEYS, REWARD_PATTERN, _canon

    return any(_canon(k) in REWARD_KEYS or REWARD_PATTERN.match(_canon(k)) for k in entry)


class PgrpoCallback(TrainerCallback):
    """Live forecasts and stop rules for any `transformers.Trainer` that logs a reward: TRL's
    GRPOTrainer, a subclass of it, Unsloth's patched trainer; no subclassing.

        trainer = GRPOTrainer(..., callbacks=[PgrpoCallback(every=5, stop_on=("plateau",))])

    Every `every` logged rewards it runs `pgrpo.diagnose.live.assess_live` (the progress verdict
    of `pgrpo diagnose` and the forecast of `pgrpo fit`, with lr, G = num_generations and
    K = num_iterations x steps_per_generation / gradient_accumulation_steps read from the
    trainer's args) and adds the `pgrpo/*` keys to that
    log entry: W&B, TensorBoard, the console and `trainer_state.json` get them. On the first event
    it moves itself right after transformers' DefaultFlowCallback so the reporting callbacks see
    the keys in the same entry. `stop_on` (plateau, flat, collapse, degeneracy; default none) sets
    `control.should_training_stop` once a rule has held for its patience (`plateau_patience` for
    plateau and flat, `patience` for collapse and degeneracy) in assessments. At each
    checkpoint and at train end it writes `output_dir/pgrpo_live_report.json` (atomically; a
    resume reads its earlier assessments back). Under TRL's batch-wide `scale_rewards="batch"`
    it does not read `frac_reward_zero_std` as a share of groups; a `pgrpo/steps_to_90` past
    `max_steps` is `pgrpo/to90_past_end` 1 instead (review 41). What an assessment cannot do
    as configured (`LiveStatus.warnings`: a degeneracy rule the log cannot trigger, a reward
    outside `reward_range`) is a RuntimeWarning once per kind and the report's `warnings`.

    Options: every (assess every N logged rewards), report (path or None for the default), and
    the `pgrpo.diagnose.live.LiveConfig` fields (confidence, min_points, patience,
    plateau_patience, plateau_confirmed, degeneracy_threshold, degeneracy_patience, stop_on,
    reward_range: the reward's (lo, hi), which TRL's args do not record, e.g.
    `reward_range=(0, 1)` for 0/1 rewards: the forecast stays inside it and an end at the top
    is saturated).
    """

    def __init__(self, every: int = 5, report: str | None = None, **config: Any) -> None:
        from pgrpo.diagnose.live import LiveConfig

        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be >= 1 logged rewards, an integer; got {every!r}")
        if report is not None and not isinstance(report, str | os.PathLike):
            raise TypeError(f"report must be a path or None, got {report!r}")
        known = [f.name for f in fields(LiveConfig)]
        unknown = sorted(set(config) - set(known))
        if unknown:
            raise TypeError(
                f"PgrpoCallback got unknown option(s) {', '.join(map(repr, unknown))}; options: "
                f"every, report, {', '.join(known)}"
            )
        self.config = LiveConfig(**config)  # checks every field; stop_on=None: never stop
        self.every = every
        self.report_path = report
        self.records: list[dict[str, Any]] = []
        self.history: tuple[Any, ...] = ()
        self.hyperparameters: dict[str, float] = {}
        self.stopped: str = ""
        self.errors: list[str] = []
        self.notes: list[str] = []  # the assessments' warnings, each kind once (`live.unsaid`)
        self._error_said = False  # a failed assessment warned this train() (`on_train_begin`)
        self.warned: dict[str, str] = {}  # warning kind -> text (`live.unsaid`)
        self._ordered: Any = None  # a weak reference to the CallbackHandler it was moved in
        self.share_per_group = False  # set by PgrpoGRPOTrainer, whose zero-std share is per group
        self.max_steps = 0  # state.max_steps: a steps_to_90 past it is said (review 41, F5)
        self.earlier: list[dict[str, Any]] = []  # a resumed run's assessments not recomputed
        self._write_said = False  # a report that could not be written warned once
        self._past_said = False  # a steps_to_90 past max_steps said once (`_past_end`)

    def _move_first(self) -> None:
        """Put this callback right after DefaultFlowCallback in the caller's CallbackHandler, so
        W&B / TensorBoard callbacks (which come before user callbacks) log the pgrpo keys. Per
        handler: one callback object given to a second trainer (a sweep that reuses its
        `callbacks=[...]` list) was left after them there, and they got no pgrpo key (review,
        2026-12-05)."""
        frame = sys._getframe(2)  # CallbackHandler.call_event -> on_* -> here
        handler = frame.f_locals.get("self")
        if not isinstance(handler, CallbackHandler) or self not in handler.callbacks:
            return
        if self._ordered is not None and self._ordered() is handler:
            return
        self._ordered = weakref.ref(handler)
        rest = [c for c in handler.callbacks if c is not self]
        i = next((j + 1 for j, c in enumerate(rest) if isinstance(c, DefaultFlowCallback)), 0)
        handler.callbacks = [*rest[:i], self, *rest[i:]]  # a new list: the loop running is safe

    def on_init_end(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201
        self.share_per_group = False  # a new trainer; PgrpoGRPOTrainer sets it after this
        self._move_first()

    def on_train_begin(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201
        from pgrpo.logs.runconfig import hyperparameters_from_config

        self._move_first()
        # world_size is a property, not in to_dict(): B needs it
        cfg = {**args.to_dict(), "world_size": getattr(args, "world_size", None)}
        if isinstance(every := cfg.get("logging_steps"), int | float) and 0 < every < 1:
            cfg["logging_steps"] = getattr(state, "logging_steps", None)  # a share, resolved
        self.hyperparameters = hyperparameters_from_config(cfg)
        self.max_steps = int(getattr(state, "max_steps", 0) or 0)
        # TRL's zero-std column is batch-wide in these modes: not read as a share (review 41)
        self._drop_share = batch_wide_zero_std(args) and not self.share_per_group
        if self._drop_share and BATCH_WIDE not in self.notes:
            self.notes.append(BATCH_WIDE)
            warnings.warn(f"PgrpoCallback: {BATCH_WIDE}", RuntimeWarning, stacklevel=2)
        self._error_said = False  # the first failed assessment of this train() is warned
        # a resumed run (or a second train() call) starts from the history the trainer holds,
        # and replays the last assessments so the stop rules' patience counts go on as in an
        # uninterrupted run (they restarted from 0, and the report listed the new ones only)
        self.records = [self._record(e) for e in state.log_history if _has_reward(e)]
        self.history, self.stopped = (), ""
        c = self.config
        keep = max(c.patience, c.plateau_patience) + 1
        ends = list(range(self.every, len(self.records) + 1, self.every))
        for end in ends[-keep:]:
            self._assess(self.records[:end])
        skipped = [self.records[end - 1]["step"] for end in ends[:-keep]]
        self.earlier = self._earlier(args, skipped) if skipped else []

    def _record(self, entry: dict[str, Any]) -> dict[str, Any]:
        """A log entry as the assessment reads it (none as NaN; no batch-wide zero-std column)."""
        from pgrpo.logs.trl_state import none_as_nan

        out = none_as_nan(entry)
        return {k: v for k, v in out.items() if not (self._drop_share and k == DROPPED)}

    def _earlier(self, args: Any, steps: list[Any]) -> list[dict[str, Any]]:
        """A resumed run's assessments at `steps` (not replayed: only the last ones are, for the
        stop rules' patience), read back from the report the earlier run left at the same path
        with the same config; where it holds no such list, the report says they are missing
        (review 41, F6: 11 of 40 assessments were dropped silently)."""
        path = self._path(args)
        try:
            old = json.loads(path.read_text())
            same = old.get("config") == json.loads(json.dumps(self._config_dict()))
            kept = [a for a in old.get("assessments", []) if a.get("step", math.inf) <= steps[-1]]
            if same and [a["step"] for a in kept] == steps:
                return kept
        except Exception:  # noqa: BLE001 - a missing or foreign report only loses the history
            pass
        self.notes.append(
            f"the {len(steps)} assessment(s) before the resume (steps {steps[0]:g} to "
            f"{steps[-1]:g}) were not recomputed and {path} held no matching earlier report; "
            "the list starts after them"
        )
        return []

    def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001, ANN201
        logs = logs if logs is not None else {}
        if not _has_reward(logs):
            return control  # an eval or a summary entry
        self.records.append({**self._record(logs), "step": state.global_step})
        if len(self.records) % self.every:
            return control
        status = self._assess(self.records)
        if status is None:
            return control
        logs.update(status.metrics)
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(status.metrics)  # trainer_state.json
        if status.stop and not self.stopped:
            self.stopped = f"step {state.global_step}: {status.reason}"
            control.should_training_stop = True
        return control

    def _assess(self, records: list[dict[str, Any]]) -> Any:
        from pgrpo.diagnose.live import assess_live, unsaid
        from pgrpo.logs.base import assemble

        try:
            log = assemble(records, fmt="trl", source="live",
                           hyperparameters=self.hyperparameters)  # fmt: skip
            status = assess_live(log, self.config, self.history)
        except (ValueError, ArithmeticError, RuntimeError) as exc:  # never break the user's run
            self.errors.append(f"{type(exc).__name__}: {exc}")
            if not self._error_said:  # said once a train(): it was silent (a hostile user's review,
                # session 35), so a user never knew no stop rule was watching the run
                warnings.warn(f"PgrpoCallback: the assessment at step {records[-1].get('step')} "
                              f"failed ({self.errors[-1]}); no stop rule acts until one "
                              "succeeds, and the report lists the errors",
                              RuntimeWarning, stacklevel=2)  # fmt: skip
                self._error_said = True
            return None
        past = self._past_end(status)
        if past and not self._past_said:  # once: it comes and goes as the fit moves
            self._past_said = True
            self.notes.append(past)
            warnings.warn(f"PgrpoCallback: {past}", RuntimeWarning, stacklevel=2)
        for text in unsaid(status.warnings, self.warned):  # each kind once (its numbers
            self.notes.append(text)  # change as the log grows), withdrawn once it no longer holds
            warnings.warn(f"PgrpoCallback: {text}", RuntimeWarning, stacklevel=2)
        self.history = (*self.history, status)
        return status

    def _past_end(self, status: Any) -> str:
        """`pgrpo/steps_to_90` where it lands after `max_steps`: not given (a number implies the
        run gets there), `pgrpo/to90_past_end` 1 and a note instead (review 41, F5: under TRL's
        linear decay it pointed 15-69 steps past the end of a run that never got there)."""
        to90 = status.metrics.get("pgrpo/steps_to_90")
        if to90 is None or self.max_steps <= 0:
            return ""
        at = status.step + to90
        status.metrics["pgrpo/to90_past_end"] = float(at > self.max_steps)
        if at <= self.max_steps:
            return ""
        del status.metrics["pgrpo/steps_to_90"]
        return (f"90% of the forecast gain is not reached within the run (first at step "
                f"{status.step:g}: it lands at step {at:.0f}, past max_steps {self.max_steps}; "
                "the forecast holds the last lr, so a decaying schedule gets there later "
                "still): pgrpo/to90_past_end is 1 where so, and pgrpo/steps_to_90 is not "
                "given")  # fmt: skip

    def _path(self, args: Any) -> Path:
        return Path(self.report_path or Path(args.output_dir) / "pgrpo_live_report.json")

    def _write(self, args: Any, state: Any) -> None:
        """Write the report atomically (a temporary file, then os.replace): at each checkpoint
        and at train end, so an interrupted run keeps the one of its last save (review 41)."""
        if not state.is_world_process_zero:
            return
        path = self._path(args)
        try:  # the report is a by-product: it never breaks the run nor the code after it
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(json.dumps(self.report(), indent=2, allow_nan=False) + "\n")
            os.replace(tmp, path)
        except Exception as exc:  # noqa: BLE001
            self.errors.append(f"report not written to {path}: {type(exc).__name__}: {exc}")
            if not self._write_said:  # once, not at every checkpoint
                warnings.warn(f"PgrpoCallback: {self.errors[-1]}", RuntimeWarning, stacklevel=2)
                self._write_said = True

    def on_save(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201
        self._write(args, state)
        return control

    def on_train_end(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201
        self._write(args, state)
        return control

    def _config_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {**asdict(self.config), "every": self.every}

    def report(self) -> dict[str, Any]:
        """The final report: config, stop reason, the last assessment, every assessment's keys."""
        last = self.history[-1] if self.history else None
        clean = lambda d: {k: v for k, v in d.items() if math.isfinite(v)}  # noqa: E731
        return {
            "config": self._config_dict(),
            "hyperparameters": clean(self.hyperparameters),
            "logged_steps": len(self.records),
            "stopped": self.stopped or None,
            "verdict": last.verdict if last else "too_short",
            "alerts": list(last.alerts) if last else [],
            "last": {"step": last.step, **clean(last.metrics)} if last else None,
            "assessments": [
                *self.earlier,
                *(
                    {
                        "step": h.step,
                        "verdict": h.verdict,
                        "alerts": list(h.alerts),
                        **clean(h.metrics),
                    }
                    for h in self.history
                ),
            ],  # fmt: skip
            "errors": self.errors[-5:],
            "warnings": self.notes,
        }
