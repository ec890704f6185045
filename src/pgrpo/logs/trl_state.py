"""TRL's log: `trainer_state.json` (`log_history`), or a TRL output folder holding it at the top
(written when training ends) or in its checkpoint-N/ folders (written at each checkpoint)."""

from __future__ import annotations

import json
import math
import re
import stat
from pathlib import Path
from typing import Any

from pgrpo.logs.base import LogFormatError, LogNotReadyError, LogReader, RewardLog, assemble
from pgrpo.logs.readers import LOG_READERS, _config_hyper, _load_config, _read_text
from pgrpo.logs.runconfig import hyperparameters_from_config


def _trl_files(path: Path) -> list[Path]:
    """The trainer_state.json files of a TRL output folder, newest last: the top-level one (TRL
    writes it when training ends) and the latest checkpoint-*/ one: the most recently written,
    the highest-numbered among equal times. A top-level file older than the latest checkpoint
    is from an earlier run into the same folder, and so is a higher-numbered checkpoint older
    than another (a reused output_dir read the old run's checkpoint-1000 over the new run's
    checkpoint-200; review, 2026-12-05)."""
    if path.is_file():
        return [path]
    direct = path / "trainer_state.json"
    times = {f: t for f in path.glob("checkpoint-*/trainer_state.json")
             if (t := _mtime(f)) is not None}  # fmt: skip
    ckpts = sorted(times, key=lambda p: (times[p], int(re.sub(r"\D", "", p.parent.name) or 0)))
    found = {f: t for f in (direct, *ckpts[-1:]) if (t := _mtime(f)) is not None}
    # equal times (a folder copied without them) keep the top-level file, as before
    return sorted(found, key=lambda f: (found[f], f == direct))


def _mtime(path: Path) -> float | None:
    """A file's modification time; None when it is not a file (or was removed as we looked: a
    trainer deleting old checkpoints, save_total_limit)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime if stat.S_ISREG(st.st_mode) else None


def _trl_file(path: Path) -> Path | None:
    files = _trl_files(path)
    return files[-1] if files else None


def detect_trl(path: Path) -> bool:
    f = _trl_file(path)
    if f is None or f.suffix != ".json":
        return False
    if f.name == "trainer_state.json":
        return True
    try:
        with f.open(encoding="utf-8-sig", errors="replace") as fh:
            return '"log_history"' in fh.read(1 << 20)
    except OSError:
        return False


def read_trl(path: Path, **options: Any) -> RewardLog:
    f = _trl_file(path)
    if f is None:
        raise LogNotReadyError(f"{path}: no trainer_state.json here or in checkpoint-*/")
    text = _read_text(f)
    try:
        state = json.loads(text)
    except json.JSONDecodeError as exc:
        # cut short (caught mid-write: the next read has it whole) or not JSON at all
        cut = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        raise (LogNotReadyError if cut else LogFormatError)(
            f"{f}: not valid JSON ({exc.msg} at line {exc.lineno}): a truncated file, or not a "
            "TRL trainer_state.json; for another kind of log pass its --format (one of "
            f"{', '.join(LOG_READERS.names())}) or none to detect it"
        ) from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise LogFormatError(f"{f}: no 'log_history' list; is this a TRL trainer_state.json?")
    warns: list[str] = []
    stale = [o for o in _trl_files(path) if o != f and o.parent == path]
    if stale:  # the top-level file is older than the latest checkpoint's
        warns.append(
            f"read {f.parent.name}/{f.name}: the top-level {f.name} is older than it (left by "
            "an earlier run into this folder?)"
        )
    records = [none_as_nan(r) for r in history if isinstance(r, dict)]
    if len(records) < len(history):
        warns.append(f"{len(history) - len(records)} non-object log_history entries skipped")
    if options.get("reward_key") is None and records and not any(map(_train_entry, records)):
        raise LogNotReadyError(  # eval_on_start, or logging_steps > eval_steps: train rows come
            f"{f}: log_history holds only eval or summary entries so far (no training step "
            "logged yet); to read an eval metric as the reward, name it with --reward-column"
        )
    names = ("training_args.json", "args.json", "config.yaml", "config.json")
    cands = [d / n for d in (f.parent, f.parent.parent) for n in names]
    hyper = _config_hyper(cands, warns)
    every = state.get("logging_steps")  # the trainer's own (an int: a ratio resolved)
    if isinstance(every, int | float) and "steps_per_logged_point" not in hyper:
        # the config's num_iterations, steps_per_generation, ... with the trainer's logging_steps:
        # refresh_interval K = num_iterations x spg / ga is not num_iterations (a review,
        # session 41: ga 1, spg 4 read a quarter of the steps per point)
        cfg = next((c for c in map(_load_config, cands) if isinstance(c, dict)), {})
        per_point = hyperparameters_from_config({**cfg, "logging_steps": every}).get(
            "steps_per_logged_point"
        )
        if per_point is not None:  # a review: only the callback read it before
            hyper = {**hyper, "steps_per_logged_point": per_point}
    return assemble(
        records, fmt="trl", source=str(f), warnings=warns, hyperparameters=hyper, **options
    )


def none_as_nan(record: dict) -> dict:
    """A TRL log entry with its `None` values as NaN: TRL's `GRPOTrainer.log` writes a metric
    that is NaN on every process as None (JSON null; `'reward': None` on the console), so a
    run whose reward turned NaN logged nulls, which read as a missing reward, and its NaN tail
    never read `collapsed` (review, 2026-12-05)."""
    return {k: math.nan if v is None else v for k, v in record.items()}


_BOOKKEEPING = frozenset({"step", "epoch", "total_flos"})


def _train_entry(record: dict) -> bool:
    """Whether a log_history entry holds a training metric: a key other than TRL's eval_*
    metrics, the run summary's train_* figures and the step / epoch bookkeeping."""
    return any(not (k in _BOOKKEEPING or k.startswith(("eval_", "train_"))) for k in record)


LOG_READERS.add("trl", LogReader("trl", detect_trl, read_trl, "TRL trainer_state.json log_history"))
