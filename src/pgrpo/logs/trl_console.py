"""The console output of a TRL / Unsloth run: the `{'loss': ..., 'reward': ..., 'epoch': ...}`
dicts `Trainer.log` prints each logging step (with tqdm bars, eval dicts and the final summary
around them). What a user has when the run kept no trainer_state.json and no W&B: it was read by
no reader, and the error sent them through --format values that could not read it (review,
2026-12-05).

The dicts carry no step: the step is their order (1, 2, ...), in logging calls, and the reader
says so (`--step-column` cannot help; multiply by `logging_steps` for optimizer steps). An eval
dict (`eval_*` keys) is put at the step of the training dict before it, under `eval/<name>`
(`logs.repairs.eval_rows` reads it there); the summary dict (`train_runtime`) is left out.
Values are parsed as Python literals (`ast.literal_eval`, nothing executed), numpy and torch
scalar reprs (`np.float64(0.25)`, `tensor(0.25)`) and bare `nan` / `inf` included."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pgrpo.logs.base import LogNotReadyError, LogReader, RewardLog, assemble
from pgrpo.logs.columns import store_of
from pgrpo.logs.readers import LOG_READERS, cannot_read, complete_lines

SUFFIXES = (".log", ".txt", ".out", "")
SCAN_BYTES = 4 << 20
"""Bytes `detect` reads looking for a printed training dict (model loading can run long)."""
_DICT = re.compile(r"\{'[^{}]*\}")
_SCALAR = re.compile(
    r"\b(?:np\.)?(?:float|int)\d*\(\s*([^()]*?)\s*\)|\btensor\(\s*([^(),]*)[^()]*\)"
)
_BARE = re.compile(r":\s*(-?nan|-?inf)\b")
_TRAIN_KEYS = ("reward", "rewards/", "train/reward")


def _literal(text: str) -> dict[str, Any] | None:
    """One printed dict, or None when it is not a dict of scalars."""
    text = _SCALAR.sub(lambda m: m.group(1) or m.group(2), text)
    text = _BARE.sub(lambda m: f": '{m.group(1)}'", text)
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _is_train(rec: dict[str, Any]) -> bool:
    return any(str(k).startswith(_TRAIN_KEYS) for k in rec)


def detect_trl_console(path: Path) -> bool:
    if not path.is_file() or path.suffix not in SUFFIXES:
        return False
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            head = fh.read(SCAN_BYTES)
    except OSError:
        return False
    return any(
        (rec := _literal(m.group(0))) is not None and _is_train(rec) for m in _DICT.finditer(head)
    )


def _records(path: Path, live: bool = False) -> Iterator[dict[str, Any]]:
    """A record per printed training dict (step = its order) and per eval dict (at the step of
    the training dict before it, keys as eval/<name>)."""
    try:
        fh = path.open(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise cannot_read(path, exc) from None
    step = 0
    with fh:
        for line in complete_lines(fh) if live else fh:
            for m in _DICT.finditer(line):
                rec = _literal(m.group(0))
                if rec is None or "train_runtime" in rec:  # the end-of-training summary
                    continue
                if _is_train(rec):
                    step += 1
                    yield {"step": step, **rec}
                elif step and any(str(k).startswith("eval_") for k in rec):
                    yield {"step": step, **{f"eval/{str(k)[5:]}": v for k, v in rec.items()
                                            if str(k).startswith("eval_")}}  # fmt: skip


def read_trl_console(path: Path, **options: Any) -> RewardLog:
    if not path.is_file():
        raise LogNotReadyError(f"{path}: not a file", "give the console log of the run")
    warns = ["a TRL console log: its dicts carry no step, so the step is their order (logging "
             "calls); multiply by logging_steps for optimizer steps"]  # fmt: skip
    records = store_of(_records(path, options.get("live", False)))
    return assemble(records, fmt="trl_console", source=str(path), warnings=warns, **options)


LOG_READERS.add(
    "trl_console",
    LogReader(
        "trl_console",
        detect_trl_console,
        read_trl_console,
        "TRL / Unsloth console output ({'loss': ..., 'reward': ...} dicts)",
    ),  # fmt: skip
)
