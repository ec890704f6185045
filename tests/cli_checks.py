"""Assertions shared by the CLI tests (imported by them; not a test module)."""

from __future__ import annotations

import json
import math
from pathlib import Path


def one_line_error(res, *needles: str, after_progress: bool = False) -> str:
    """The project's rule for bad input, checked on a CliRunner result: exit code 2, no
    traceback, one line starting 'error: ' that holds every needle; returns that line.
    `after_progress`: a training progress bar ('step ...' lines) may precede it."""
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = res.output.strip().splitlines()
    if after_progress:
        assert all(line.startswith("step ") for line in lines[:-1]), res.output
        lines = lines[-1:]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert "Traceback" not in res.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def csv_log(folder: Path, columns: dict) -> Path:
    """folder/log.csv with the given columns (equal-length sequences, the first the step; a NaN
    is written as an empty cell: a value not logged at that step)."""
    names = list(columns)
    cell = lambda v: "" if math.isnan(float(v)) else repr(float(v))  # noqa: E731
    rows = [",".join(names)] + [",".join(map(cell, r)) for r in zip(*columns.values(), strict=True)]
    path = folder / "log.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def diagnose_json(runner, app, path: Path, mode: str) -> tuple[dict, dict]:
    """`pgrpo diagnose PATH --json` through the CLI: exit 0; its JSON and the named mode's entry."""
    res = runner.invoke(app, ["diagnose", str(path), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    return out, next(m for m in out["modes"] if m["name"] == mode)
