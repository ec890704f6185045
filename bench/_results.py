"""The one way a bench script writes its results JSON: the command that reproduces it, the date
(UTC), then the script's own fields; it prints where it wrote. Not a benchmark (run_all skips
names that begin with "_")."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any


def write_results(out: Path, script: str, argv: list[str] | None, **payload: Any) -> dict:
    """Write {command, date, **payload} to `out` (its folder made if need be) and return it.
    script: the file name under bench/; argv: the arguments given (None: the process's)."""
    args = sys.argv[1:] if argv is None else argv
    doc = {"command": " ".join([f"python bench/{script}", *args]),
           "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), **payload}  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out}")
    return doc
