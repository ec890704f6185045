"""Starting or resuming a run folder safely (the caller holds the run's lock).

`plan_start` decides what a `train` call does with the folder: start afresh, resume from the
latest checkpoint, or nothing (a finished run asked for the steps it already has); it refuses a
shortened run, and any change of a training setting (`check_same_run`: a moved, renamed or
copied folder, or new logging settings, are resumed), and states what an extension changes.
`restore_log` makes metrics.jsonl hold
exactly the checkpoint's steps: lines logged after the checkpoint are dropped (they are recomputed
identically), a log that lost or changed lines is restored from the checkpoint's own copy (the
damaged file kept beside it), and when neither works the resume is refused with the fix. The log
is never extended with NUL bytes and never gets a step twice.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from pgrpo.core.schedules import decays
from pgrpo.train import checkpoint as ckpt
from pgrpo.train import yamlvalues
from pgrpo.train.config import RunConfig, load_config
from pgrpo.train.log import CONFIG_FILE, METRICS_FILE, MetricsLog

RESUMABLE_CHANGES = tuple(
    [("run", k) for k in ("name", "output_dir", "checkpoint_every", "forecast_every", "report_to")]
    + [("grpo", k) for k in ("activation_checkpointing", "lean_layers", "release_memory")]
)
"""The settings a resume may change besides run.steps: where the run folder is and how the run
logs, and how the update spends memory (the same values and gradients bit for bit:
tests/test_train_checkpointing.py, test_train_lean.py; release_memory is the allocator's), not
what it trains, so a resumed run stays bit-identical to the uninterrupted one (a run that ran
out of memory resumes with activation_checkpointing=true). torch_threads and micro_batch_size
are not among them: they sum floats in another order."""


@dataclass(frozen=True)
class Start:
    """checkpoint: resume from it (None: start at step 1); done: the run already has all its
    steps; notes: what the user should be told, one line each; resumed: what the resume changes,
    to be told once the checkpoint has loaded (not before a damaged one is refused)."""

    checkpoint: Path | None
    done: bool = False
    notes: tuple[str, ...] = ()
    resumed: tuple[str, ...] = ()


def step_of(path: Path) -> int:
    """The step of a checkpoint folder (`step-<n>`)."""
    return int(path.name.split("-", 1)[1])


def _reason(exc: Exception) -> str:
    mark = getattr(exc, "problem_mark", None)
    text = getattr(exc, "problem", None) or str(exc)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return " ".join(f"{text}{where}".split())[:200]


def written_config(path: Path) -> RunConfig:
    """The RunConfig of a config.yaml the trainer wrote, with a setting added since the file
    was written read as the code that wrote it ran: a file without loss.kl_temperature (before
    2026-12-06, session 40) took the KL at the ratio's temperatures, so a run with a KL term,
    generation.score_temperature=sampled and a temperature other than 1 reads 'sampled' (where
    the new default, 'one', changes nothing, the default stands); a resume then refuses the new
    default rather than change the run's objective half-way."""
    config = load_config(path)
    data = yamlvalues.read_file(path)
    loss = data.get("loss") if isinstance(data, dict) else None
    written_before = not (isinstance(loss, dict) and "kl_temperature" in loss)
    gen = config.generation
    tempered = gen.score_temperature == "sampled" and any(
        t != 1 for t in gen.temperatures or (gen.temperature,)
    )
    if written_before and config.loss.uses_reference and tempered:
        loss_config = dataclasses.replace(config.loss, kl_temperature="sampled")
        config = dataclasses.replace(config, loss=loss_config)
    return config


def saved_config(run_dir: Path) -> RunConfig:
    """The RunConfig in `run_dir`'s config.yaml (`written_config`); ValueError naming the file
    when it is not one."""
    path = run_dir / CONFIG_FILE
    try:
        return written_config(path)
    except (yaml.YAMLError, ValueError, TypeError, KeyError) as exc:
        problem = getattr(exc, "problem", None)  # UserError's own, when it names the file
        if not (isinstance(problem, str) and str(path) in problem):
            problem = f"{path} is not a valid run config ({_reason(exc)})"
        raise ValueError(
            f"cannot resume {run_dir}: {problem}: restore it from a backup (or write the settings "
            "the run was started with), or start afresh with --overwrite"
        ) from None


def check_same_run(config: RunConfig, saved: RunConfig, run_dir: Path) -> list[str]:
    """ValueError naming each training setting of `config` that differs from the run's `saved`
    config; returns the `RESUMABLE_CHANGES` (and nothing for run.steps, `plan_start`'s) as
    `run.<key> old -> new` texts."""
    fixed, moved = config_changes(config, saved)
    if fixed:
        may = ", ".join(f"{s}.{k}" for s, k in RESUMABLE_CHANGES)
        raise ValueError(
            f"cannot resume {run_dir}: the config differs from the run's config.yaml "
            f"({'; '.join(fixed)}); resume with the same settings (only run.steps and {may} may "
            "change)"
        )
    return moved


def config_changes(config: RunConfig, saved: RunConfig) -> tuple[list[str], list[str]]:
    """(training settings that differ, `RESUMABLE_CHANGES` that differ) from `saved` to
    `config`, as 'section.key old -> new' texts; run.steps is not compared."""
    was, now = saved.to_dict(), config.to_dict()
    was["run"].pop("steps"), now["run"].pop("steps")
    if now["task"].get("reward_range") is None:  # unset: the task's own, resolved at the start
        now["task"]["reward_range"] = was["task"].get("reward_range")
    changed = [(s, k) for s in now for k in now[s] if was[s].get(k) != now[s][k]]
    fixed = [f"{s}.{k}: {was[s].get(k)!r} -> {now[s][k]!r}" for s, k in changed
             if (s, k) not in RESUMABLE_CHANGES]  # fmt: skip
    moved = [f"{s}.{k} {was[s][k]!r} -> {now[s][k]!r}" for s, k in changed
             if (s, k) in RESUMABLE_CHANGES]  # fmt: skip
    return fixed, moved


def check_checkpoint_config(saved: RunConfig, latest: Path, run_dir: Path) -> None:
    """ValueError when the run's config.yaml (`saved`) was edited since checkpoint `latest` was
    written (its copy of config.yaml): an edited model.lora_rank crashed the resume, an edited
    optim.lr was taken silently while the optimizer kept the old one. Checkpoints written before
    2026-12-04 hold no copy and are not checked."""
    copy = latest / ckpt.CONFIG_COPY
    if not copy.is_file():
        return
    try:
        at_checkpoint = written_config(copy)
    except (yaml.YAMLError, ValueError, TypeError, KeyError):
        return  # an unreadable copy: the checkpoint's own checks still apply
    fixed, _ = config_changes(saved, at_checkpoint)
    if fixed:
        raise ValueError(
            f"cannot resume {run_dir}: its config.yaml was edited since checkpoint {latest.name} "
            f"was written ({'; '.join(fixed)}): restore it (the checkpoint keeps a copy: {copy}), "
            "or start afresh with --overwrite"
        )


def _schedule_steps(latest: Path, saved: RunConfig) -> int:
    """The run.steps the lr schedule of checkpoint `latest` was built for: its copy of
    config.yaml's (a run ended early and resumed to its first plan follows its first schedule,
    bit for bit), else the run's config.yaml's."""
    try:
        return load_config(latest / ckpt.CONFIG_COPY).run.steps
    except (OSError, yaml.YAMLError, ValueError, TypeError, KeyError):
        return saved.run.steps


def plan_start(cfg: RunConfig, run_dir: Path, *, resume: bool, overwrite: bool) -> Start:
    if resume and overwrite:
        raise ValueError(
            "resume and overwrite contradict each other (resume continues the run in its folder, "
            "overwrite deletes it and starts afresh): pass one of them"
        )
    notes = []
    removed = ckpt.remove_partial(run_dir)
    if removed:
        notes.append(f"removed partial checkpoint files a killed run left: {', '.join(removed)}")
    if not resume:
        exists = (run_dir / ckpt.CHECKPOINT_DIR).exists() or (run_dir / METRICS_FILE).exists()
        if exists and not overwrite:
            raise FileExistsError(
                f"{run_dir} already holds a run: continue it with --resume, or choose another "
                "run.name (or pass --overwrite) to start afresh"
            )
        if overwrite:  # a fresh run must never resume the old run's checkpoint, nor leave
            # the old run's final model beside its own log (when it does not finish)
            shutil.rmtree(run_dir / ckpt.CHECKPOINT_DIR, ignore_errors=True)
            shutil.rmtree(run_dir / "final", ignore_errors=True)
        return Start(None, notes=tuple(notes))
    if not (run_dir / CONFIG_FILE).is_file():
        raise FileNotFoundError(
            f"nothing to resume in {run_dir} (no config.yaml): start the run without --resume"
        )
    saved_cfg = saved_config(run_dir)
    moved = check_same_run(cfg, saved_cfg, run_dir)
    resumed = []
    if moved:
        resumed.append(
            f"resuming {run_dir} with {', '.join(moved)} (where the run is, how it logs and how "
            "it spends memory, not what it trains); config.yaml is updated"
        )
    latest = ckpt.latest_checkpoint(run_dir)
    if latest is None:
        notes.append(f"{run_dir} has no checkpoint yet: the run starts again at step 1")
        return Start(None, notes=tuple(notes + resumed))
    check_checkpoint_config(saved_cfg, latest, run_dir)
    done, saved = step_of(latest), saved_cfg.run.steps
    wanted = cfg.run.steps
    if wanted < done:
        raise ValueError(
            f"run.steps={wanted} is below the checkpoint of {run_dir} at step {done}: a run "
            f"cannot be shortened; pass run.steps >= {done} (the log has steps 1..{done})"
        )
    if wanted == done and saved > done:  # an unfinished run ended at its checkpoint: said
        # (a hostile user, session 37: "nothing to do" while config.yaml went 40 -> 4 and
        # final/ was written, so the run's own resume line no longer trained steps 5..40)
        resumed.append(
            f"run.steps {saved} -> {wanted}: the run ends at its checkpoint at step {done} "
            f"(steps {done + 1}..{saved} are not trained); final/ is written from it and "
            f"config.yaml is updated (resume with run.steps={saved} to train them after all)"
        )
        return Start(latest, done=True, notes=tuple(notes), resumed=tuple(resumed))
    if wanted == done:
        notes.append(
            f"{run_dir} already has its {done} steps: nothing to do (pass run.steps=N > {done} "
            "to train further)"
        )
        return Start(latest, done=True, notes=tuple(notes))
    if wanted != saved:
        text = (
            f"run.steps {saved} -> {wanted}: training steps {done + 1}..{wanted}; config.yaml "
            "is updated"
        )
        if decays(cfg.optim.schedule) and wanted != _schedule_steps(latest, saved_cfg):
            text += (
                f"; optim.schedule={cfg.optim.schedule} spans run.steps, so the learning rate "
                f"from step {done + 1} on follows the {wanted}-step schedule (not the same run "
                f"as one started with run.steps={wanted})"
            )
        if (run_dir / "final").is_dir():  # the finished run's model until this one ends
            at = ckpt.final_step(run_dir)
            held = f"the model at step {at}" if at is not None else "an earlier model"
            text += (f"; final/ holds {held} until the run reaches step {wanted} and writes "
                     "it again")  # fmt: skip
        resumed.append(text)
    return Start(latest, notes=tuple(notes), resumed=tuple(resumed))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def restore_log(
    run_dir: Path, state: ckpt.Checkpoint, ends: bool = False
) -> tuple[MetricsLog, list[str]]:
    """metrics.jsonl cut or restored to exactly the checkpoint's steps; returns the log opened
    for appending and the notes on what was changed (ends: the run ends at the checkpoint, so
    the lines dropped are not trained again)."""
    log, copy = run_dir / METRICS_FILE, state.path / ckpt.LOG_COPY
    off, name = state.metrics_offset, state.path.name
    data = log.read_bytes() if log.exists() else b""
    if len(data) >= off and _sha256(data[:off]) == state.metrics_sha256:
        dropped = data[off:].count(b"\n") + (0 if data.endswith(b"\n") or len(data) == off else 1)
        notes = []
        if dropped:
            again = "the run ends at it" if ends else "those steps are trained again"
            notes.append(
                f"dropped {dropped} line(s) of metrics.jsonl logged after checkpoint {name}; "
                f"{again}"
            )
        return MetricsLog(run_dir, truncate_at=off), notes
    if not log.exists():
        why = "is missing"
    elif len(data) < off:
        why = f"has {len(data)} bytes, fewer than the checkpoint's {off}"
    else:
        why = "differs from the checkpoint's copy before its offset"
    saved = copy.read_bytes() if copy.is_file() else None
    if saved is None or len(saved) != off or _sha256(saved) != state.metrics_sha256:
        raise ValueError(
            f"cannot resume {run_dir}: metrics.jsonl {why} and the copy in checkpoint {name} "
            "is missing or damaged: restore "
            "metrics.jsonl from a backup, or start afresh with --overwrite"
        )
    backup = None
    if log.exists():
        backup = run_dir / f"{METRICS_FILE}.damaged-{name}"
        os.replace(log, backup)
    tmp = run_dir / f".{METRICS_FILE}.tmp-{os.getpid()}"
    tmp.write_bytes(saved)
    os.replace(tmp, log)
    kept = f"; the old file is kept as {backup.name}" if backup else ""
    note = f"metrics.jsonl {why}: restored its steps from checkpoint {name}{kept}"
    return MetricsLog(run_dir, truncate_at=off), [note]
