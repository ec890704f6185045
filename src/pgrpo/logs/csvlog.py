"""The CSV readers: a W&B history / chart-panel export (`wandb`) and any CSV/TSV with a header
(`csv`), split from `pgrpo.logs.readers` (the registry and the line-based helpers they share).

A header's names and the cells are read with the spaces around them stripped (`step, reward`
named a column " reward"). A last row cut mid-write (no newline, fewer fields than the header)
is skipped with the JSONL readers' warning for a malformed line.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pgrpo.logs.base import LogFormatError, LogNotReadyError, LogReader, RewardLog, assemble
from pgrpo.logs.columns import store_of
from pgrpo.logs.readers import (
    LOG_READERS,
    _bad_lines,
    _ends_line,
    _head,
    cannot_read,
    complete_lines,
)


def _csv_rows(path: Path, live: bool, bad: list[int]) -> tuple[list[str], Iterator[dict[str, Any]]]:
    """(header, rows): the rows are read from the open file as they are consumed; live:
    without a last line that has no newline yet (`complete_lines`). bad: collects the line
    number of a last row cut mid-write (no newline and fewer fields than the header), which is
    skipped (a finished log's: a live one leaves it for the next read)."""
    try:
        fh = path.open(encoding="utf-8-sig", errors="replace", newline="")
    except OSError as exc:
        raise cannot_read(path, exc) from None
    sample = fh.read(4096)
    fh.seek(0)
    if not sample.strip():
        fh.close()
        raise LogNotReadyError(f"{path}: empty file")
    header_line = sample.splitlines()[0] if sample.splitlines() else sample
    delim = max((",", "\t", ";"), key=header_line.count)  # European Excel writes ';'
    last = [""]  # the last line read: a cut last row has no newline

    def lines() -> Iterator[str]:
        for line in complete_lines(fh) if live else fh:
            last[0] = line
            yield line

    reader = csv.DictReader(lines(), delimiter=delim)
    try:  # `step, reward`: the names without the spaces around them (review rev41, F9)
        reader.fieldnames = [h.strip() for h in reader.fieldnames or []]
    except csv.Error as exc:
        fh.close()
        raise LogFormatError(f"{path}: malformed CSV header ({exc})") from None
    header = [h for h in reader.fieldnames if h]
    if not header:
        fh.close()
        raise LogNotReadyError(f"{path}: no CSV header row")
    if twice := sorted({h for h in header if header.count(h) > 1}):
        fh.close()  # DictReader keeps the last of the same name: a silent choice of column
        raise LogFormatError(
            f"{path}: column {twice[0]!r} appears {header.count(twice[0])} times in the CSV "
            "header: rename the copies so that each column has its own name"
        )

    def rows() -> Iterator[dict[str, Any]]:
        held = None  # each row is handed on once the next is read: the last may be cut
        with fh:
            try:
                at = reader.line_num
                for row in reader:
                    short = None in row.values()  # fewer fields than the header
                    row = {k: v for k, v in row.items() if k}
                    if reader.line_num > at + 1:  # a row over several lines: a quoted field
                        _check_swallowed(path, row, delim, len(header), reader.line_num)
                    at = reader.line_num
                    if held is not None:
                        yield held
                    held = _decimal_points(row) if delim == ";" else row
            except csv.Error as exc:
                raise LogFormatError(
                    f"{path}: malformed CSV at line {reader.line_num} ({exc})"
                ) from None
        if held is not None and short and not _ends_line(last[0]):
            bad.append(at)  # cut mid-write: `4,0` of `4,0.55,120` (review rev41, F5)
        elif held is not None:
            yield held

    return header, rows()


_DECIMAL_COMMA = re.compile(r"[-+]?\d*,\d+(?:[eE][-+]?\d+)?")


def _decimal_points(row: dict[str, Any]) -> dict[str, Any]:
    """A `;`-delimited row with its decimal commas read as points (European Excel writes 0,925;
    every value was refused as text; review, 2026-12-05)."""
    return {k: v.replace(",", ".") if isinstance(v, str) and _DECIMAL_COMMA.fullmatch(v.strip())
            else v for k, v in row.items()}  # fmt: skip


def _check_swallowed(path: Path, row: dict[str, Any], delim: str, width: int, end: int) -> None:
    """A quote that is never closed makes the csv module read the rest of the file as one field:
    the rows below vanished with a warning for one row (review, 2026-12-05). A field holding a
    line shaped like a row of this file (width - 1 delimiters) is taken as that, and refused.
    end: the file line the row ends at."""
    for key, value in row.items():
        if isinstance(value, str) and "\n" in value:
            inner = value.splitlines()[1:]
            if any(part.count(delim) == width - 1 for part in inner if width > 1):
                raise LogFormatError(
                    f"{path}: the {key!r} field of the row at line {end - len(inner)} holds "
                    f"{len(inner)} more line(s) shaped like rows: a quote opened there is never "
                    "closed; remove or close the quote"
                )


def detect_wandb(path: Path) -> bool:
    if not detect_csv(path):
        return False
    try:
        with path.open(encoding="utf-8-sig", errors="replace") as fh:
            header = fh.readline()
    except OSError:
        return False
    # a history export (`_step`, `train/...`), or a chart-panel export (`<run> - <key>` columns
    # with their `__MIN` / `__MAX` envelopes), e.g. a verl run's `<run> - critic/score/mean`
    return "_step" in header or "train/" in header or ("__MIN" in header and " - " in header)


def read_wandb(path: Path, **options: Any) -> RewardLog:
    """W&B history export (`_step`, `train/reward`, ...) or a chart-panel export (`Step`,
    `<run> - train/reward`, `<run> - train/reward__MIN`, ...): the run prefix and the
    __MIN/__MAX envelope columns are dropped; with several runs the first one is read."""
    bad: list[int] = []
    header, rows = _csv_rows(path, options.get("live", False), bad)
    warns: list[str] = []
    runs = list(dict.fromkeys(h.rsplit(" - ", 1)[0] for h in header if " - " in h))
    if runs:
        keep = runs[0]
        if len(runs) > 1:
            warns.append(f"{len(runs)} runs in the export; read {keep!r} (export one run to "
                         "read another)")  # fmt: skip
        rename = {}
        for h in header:
            if h.endswith(("__MIN", "__MAX")):
                continue
            if " - " not in h:
                rename[h] = h
            elif h.rsplit(" - ", 1)[0] == keep:
                rename[h] = h.rsplit(" - ", 1)[1]
        rows = ({rename[k]: v for k, v in r.items() if k in rename} for r in rows)
    store = store_of(rows)
    warns += _bad_lines(bad)
    return assemble(store, fmt="wandb", source=str(path), warnings=warns, **options)


def detect_csv(path: Path) -> bool:
    return path.is_file() and path.suffix in (".csv", ".tsv") and b"\x00" not in _head(path)


def read_csv(path: Path, **options: Any) -> RewardLog:
    bad: list[int] = []
    store = store_of(_csv_rows(path, options.get("live", False), bad)[1])
    return assemble(store, fmt="csv", source=str(path), warnings=_bad_lines(bad), **options)


for _reader in (
    LogReader("wandb", detect_wandb, read_wandb, "W&B history CSV export"),
    LogReader("csv", detect_csv, read_csv, "generic CSV/TSV (reward_key=, step_key=)"),
):
    LOG_READERS.add(_reader.name, _reader)
