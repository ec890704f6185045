"""The console output of a TRL / Unsloth run: the `{'loss': ..., 'reward': ..., 'epoch': ...}`
dicts `Trainer.log` prints each logging step (with tqdm bars, eval dicts and the final summary
around them). What a user has when the run kept no trainer_state.json and no W&B: it was read by
no reader, and the error sent them through --format values that could not read it (review,
2026-12-05).

The dicts carry no step. The training progress bar does: tqdm prints `50/500 [` with the
optimizer step before each training dict, so the step is the last bar count before the dict,
where every training dict has one and the counts rise under one total (the bar of the training
loop; an eval bar comes after its training dict and has its own total), or go back where a run
resumed from a checkpoint (`assemble` drops what the resume replaced). Otherwise
(tqdm off, bars cut from the log) the step is the dicts' order (1, 2, ...), in logging calls,
and the reader says so (`--step-column` cannot help; multiply by `logging_steps` for optimizer
steps). An eval
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
from pgrpo.logs.trl_state import none_as_nan

SUFFIXES = (".log", ".txt", ".out", "")
SCAN_BYTES = 4 << 20
"""Bytes `detect` reads looking for a printed training dict (model loading can run long)."""
_DICT = re.compile(r"\{'[^{}]*\}")
_SCALAR = re.compile(
    r"\b(?:np\.)?(?:float|int)\d*\(\s*([^()]*?)\s*\)|\btensor\(\s*([^(),]*)[^()]*\)"
)
_BARE = re.compile(r":\s*(-?nan|-?inf)\b")
_BAR = re.compile(r"\b(\d+)/(\d+) \[")
"""A tqdm bar's count: `50/500 [00:10<01:30, ...`."""
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
    """A record per printed training dict and per eval dict (at the step of the training dict
    before it, keys as eval/<name>), in order; a training record's `_order` is its place among
    them (1, 2, ...) and `_bar` the last tqdm count before it, (count, total) or None."""
    try:
        fh = path.open(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise cannot_read(path, exc) from None
    order, bar = 0, None
    with fh:
        for line in complete_lines(fh) if live else fh:
            end = 0
            for m in _DICT.finditer(line):
                bars = _BAR.findall(line, end, m.start())
                bar = (int(bars[-1][0]), int(bars[-1][1])) if bars else bar
                end = m.end()
                rec = _literal(m.group(0))
                if rec is None or "train_runtime" in rec:  # the end-of-training summary
                    continue
                if _is_train(rec):
                    order += 1
                    yield {"_order": order, "_bar": bar, **none_as_nan(rec)}
                    bar = None  # each training dict needs a count of its own
                elif order and any(str(k).startswith("eval_") for k in rec):
                    yield {"_order": order, **{f"eval/{str(k)[5:]}": v for k, v in rec.items()
                                               if str(k).startswith("eval_")}}  # fmt: skip
            bars = _BAR.findall(line, end)
            bar = (int(bars[-1][0]), int(bars[-1][1])) if bars else bar


def _with_steps(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """The records with a `step`: the progress bar's count where every training record has one
    and they read as the training bar (`_bar_steps`); else the order. And the warning to give."""
    bars = [r["_bar"] for r in records if "_bar" in r]
    counted = bool(bars) and all(b is not None for b in bars)
    by_bar = counted and _bar_steps(bars)
    step_of = {}
    for r in records:
        if "_bar" in r:
            step_of[r["_order"]] = r["_bar"][0] if by_bar else r["_order"]
    out = [{"step": step_of[r["_order"]], **{k: v for k, v in r.items()
                                             if k not in ("_order", "_bar")}}
           for r in records]  # fmt: skip
    if by_bar:
        return out, ("a TRL console log: the steps are the training progress bar's counts before "
                     "each printed dict")  # fmt: skip
    if counted:
        return out, ("a TRL console log: the progress bar counts before its dicts do not read "
                     "as the training bar's (they repeat, or change total without going back), "
                     "so the step is the dicts' order (logging calls); multiply by "
                     "logging_steps for optimizer steps")  # fmt: skip
    return out, ("a TRL console log: its dicts carry no step and no training progress bar count "
                 "before each, so the step is their order (logging calls); multiply by "
                 "logging_steps for optimizer steps")  # fmt: skip


def _bar_steps(bars: list[tuple[int, int]]) -> bool:
    """Whether the bar counts before the training dicts, (count, total) each, read as the
    training bar's: they rise from dict to dict under one total, except where they go back (a
    run resumed from a checkpoint or restarted: the bar starts again at the checkpoint's step,
    its total may change there), at no more than a quarter of the dicts. `assemble` reads the
    rewind as it does a CSV's (review 41: a resumed run's counts fell back, the reader took the
    dicts' order and spliced the discarded trajectory and the resume into one curve). A count
    equal to the one before is a fall too: a resume from a checkpoint one step behind the last
    dict (each training dict, one with a reward, takes a count printed after the one before)."""
    pairs = list(zip(bars, bars[1:], strict=False))
    falls = sum(b[0] <= a[0] for a, b in pairs)
    return falls <= len(pairs) // 4 and all(
        b[0] <= a[0] or (b[0] > a[0] and b[1] == a[1]) for a, b in pairs
    )


def read_trl_console(path: Path, **options: Any) -> RewardLog:
    if not path.is_file():
        raise LogNotReadyError(f"{path}: not a file", "give the console log of the run")
    records, warning = _with_steps(list(_records(path, options.get("live", False))))
    return assemble(store_of(records), fmt="trl_console", source=str(path), warnings=[warning],
                    **options)  # fmt: skip


LOG_READERS.add(
    "trl_console",
    LogReader(
        "trl_console",
        detect_trl_console,
        read_trl_console,
        "TRL / Unsloth console output ({'loss': ..., 'reward': ...} dicts)",
    ),  # fmt: skip
)
