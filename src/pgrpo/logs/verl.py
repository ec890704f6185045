"""verl's logs: the file logger's JSONL (`{"step": n, "data": {...}}` per line) and the console
logger's `step:N - key:value - ...` lines, each given as the file or as the run folder holding
it (with `.hydra/config.yaml` for the settings). In a folder the JSONL wins over console
output; two candidates of the same kind are ambiguous and fail naming them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pgrpo.logs.base import LogFormatError, LogNotReadyError, LogReader, RewardLog, assemble
from pgrpo.logs.columns import ColumnStore, store_of
from pgrpo.logs.readers import (
    LOG_READERS,
    _bad_lines,
    _config_hyper,
    _first_object,
    _keep,
    cannot_read,
    check_some_objects,
    complete_lines,
    iter_jsonl_chunks,
)

JSONL_SUFFIXES = (".jsonl", ".json", ".log")
CONSOLE_SUFFIXES = (".log", ".txt", ".out", "")


def _folder_file(path: Path, is_log: Any, kind: str) -> Path | None:
    """The one file directly in the folder `path` that `is_log` accepts (None when none); a
    LogFormatError naming them when there are several (the user must pick one)."""
    found = sorted(p for p in path.iterdir() if p.is_file() and is_log(p))
    if len(found) > 1:
        names = ", ".join(p.name for p in found[:6])
        raise LogFormatError(
            f"{path}: {len(found)} verl {kind} logs in this folder ({names})",
            "give the file of the run you mean",
        )
    return found[0] if found else None


def _cands(f: Path) -> list[Path]:
    return [f.parent / ".hydra" / "config.yaml", f.parent / "config.yaml"]


# --- file logger (JSONL) ---------------------------------------------------------------------


def _is_verl_jsonl(path: Path) -> bool:
    if not path.is_file() or path.suffix not in JSONL_SUFFIXES:
        return False
    obj = _first_object(path)
    if obj is None:
        return False
    return isinstance(obj.get("data"), dict) or any(k.startswith("critic/") for k in obj)


def _verl_file(path: Path) -> Path | None:
    return _folder_file(path, _is_verl_jsonl, "JSONL") if path.is_dir() else path


def detect_verl(path: Path) -> bool:
    f = _verl_file(path)
    return f is not None and _is_verl_jsonl(f)


def _verl_record(r: dict[str, Any]) -> dict[str, Any]:
    data = r.get("data")
    if isinstance(data, dict):
        return {**data, "step": r.get("step", data.get("step"))}
    return r


def read_verl(path: Path, **options: Any) -> RewardLog:
    f = _verl_file(path)
    if f is None:
        raise LogNotReadyError(f"{path}: no verl JSONL log in this folder", "give the log file")
    bad: list[int] = []
    records = ColumnStore(_keep(options))
    for chunk in iter_jsonl_chunks(f, bad, live=options.get("live", False)):
        records.add([_verl_record(r) for r in chunk])
    check_some_objects(records.n, bad, f, "verl")
    warns = _bad_lines(bad)
    hyper = _config_hyper(_cands(f), warns)
    return assemble(
        records, fmt="verl", source=str(f), warnings=warns, hyperparameters=hyper, **options
    )


# --- console logger ----------------------------------------------------------------------------

_CONSOLE_STEP = re.compile(r"step:(\d+)")
CONSOLE_SCAN_CHUNKS = 64
"""MiB of a file `_is_console` reads looking for a `step:N - key:value` line: 12,000 lines of
vLLM start-up (1.6 MB) hid the steps from a 1 MiB scan."""
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf|-inf")


def _is_console(path: Path) -> bool:
    if not path.is_file() or path.suffix not in CONSOLE_SUFFIXES:
        return False
    try:
        with path.open(encoding="utf-8-sig", errors="replace") as fh:
            for _ in range(CONSOLE_SCAN_CHUNKS):  # start-up output (vLLM, Ray) can run long
                head = fh.read(1 << 20)
                if not head:
                    return False
                if _CONSOLE_STEP.search(head) and " - " in head and "/" in head:
                    return True
    except OSError:
        return False
    return False


def _console_file(path: Path) -> Path | None:
    return _folder_file(path, _is_console, "console") if path.is_dir() else path


def detect_verl_console(path: Path) -> bool:
    f = _console_file(path)
    return f is not None and _is_console(f)


def read_verl_console(path: Path, **options: Any) -> RewardLog:
    """verl's console logger: `step:N - critic/score/mean:0.53 - actor/lr:1e-06 - ...` lines
    (possibly behind a Ray prefix such as `(TaskRunner pid=1)`); other lines are ignored."""
    f = _console_file(path)
    if f is None:
        raise LogNotReadyError(f"{path}: no verl console log in this folder", "give the log file")
    records = store_of(_console_records(f, options.get("live", False)))
    warns: list[str] = []
    hyper = _config_hyper(_cands(f), warns)
    return assemble(records, fmt="verl_console", source=str(f), warnings=warns,
                    hyperparameters=hyper, **options)  # fmt: skip


def _console_records(path: Path, live: bool = False) -> Iterator[dict[str, Any]]:
    """One record per `step:N - ...` line; live: not a last line without its newline yet."""
    try:
        fh = path.open(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        raise cannot_read(path, exc) from None
    with fh:
        for line in complete_lines(fh) if live else fh:
            line = _ANSI.sub("", line) if "\x1b" in line else line  # colour codes around values
            m = _CONSOLE_STEP.search(line)
            if m is None:
                continue
            rec: dict[str, Any] = {}
            for part in line[m.start() :].split(" - "):
                key, sep, value = part.strip().rpartition(":")
                if "(" in value:  # numpy 2 reprs: np.float64(0.25)
                    value = value[value.rfind("(") + 1 :].split(")")[0]
                num = _NUMBER.fullmatch(value.strip()) if sep else None
                if key and num is not None:
                    rec[key] = num.group(0)
            yield rec


LOG_READERS.add("verl", LogReader("verl", detect_verl, read_verl, "verl file-logger JSONL"))
LOG_READERS.add(
    "verl_console",
    LogReader("verl_console", detect_verl_console, read_verl_console, "verl console log"),
)
