"""A W&B run by path ("entity/project/run_id"), online through wandb's public API, or offline
from a recorded export (reader `wandb_export` in `LOG_READERS`).

Online (needs `pip install wandb`, `wandb login` and network):

    from pgrpo.logs.wandb_run import read_wandb_run, export_wandb_run
    log = read_wandb_run("my-team/grpo/abc123")           # RewardLog, full-resolution history
    export_wandb_run("my-team/grpo/abc123", "run.json")   # record it for an offline machine

or `python -m pgrpo.logs.wandb_run my-team/grpo/abc123 run.json`; then every command reads the
export like any log: `pgrpo fit run.json`, `pgrpo diagnose run.json`, `pgrpo watch run.json`.
The export is JSON: {"wandb_run": path, "config": run.config, "history": [row, ...]} with the rows
of `run.scan_history()` (all steps; `run.history()` would subsample to 500).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pgrpo.logs.base import LogFormatError, LogReader, RewardLog, assemble
from pgrpo.logs.readers import LOG_READERS, _first_object, _read_text
from pgrpo.logs.runconfig import hyperparameters_from_config as _hyper


def _api(api: Any) -> Any:
    if api is not None:
        return api
    try:
        import wandb
    except ImportError:
        raise LogFormatError(
            "reading a W&B run by path needs wandb: pip install wandb, then wandb login; "
            "offline, export a history CSV from the W&B UI and read that instead"
        ) from None
    return wandb.Api()


def fetch_wandb_run(run_path: str, *, api: Any = None) -> dict[str, Any]:
    """{"wandb_run", "config", "history"} of a run; api: a `wandb.Api()`-like object."""
    try:
        run = _api(api).run(run_path)
        history = [dict(row) for row in run.scan_history()]
        config = dict(run.config)
    except LogFormatError:
        raise
    except Exception as exc:  # network, auth, unknown run: wandb raises many types
        raise LogFormatError(
            f"wandb:{run_path}: cannot fetch the run ({type(exc).__name__}: {exc}); check the "
            "path is entity/project/run_id, `wandb login`, and the network"
        ) from None
    return {"wandb_run": run_path, "config": config, "history": history}


def _assemble(data: dict[str, Any], source: str, **options: Any) -> RewardLog:
    history = data.get("history")
    if not isinstance(history, list):
        raise LogFormatError(f"{source}: no 'history' list; is this a pgrpo W&B export?")
    records = [r for r in history if isinstance(r, dict)]
    hyper = _hyper(data.get("config") or {})
    return assemble(records, fmt="wandb_export", source=source, hyperparameters=hyper, **options)


def read_wandb_run(run_path: str, *, api: Any = None, **options: Any) -> RewardLog:
    """The RewardLog of a W&B run by path (online; see the module docstring)."""
    return _assemble(fetch_wandb_run(run_path, api=api), f"wandb:{run_path}", **options)


def export_wandb_run(run_path: str, out: str | Path, *, api: Any = None) -> Path:
    """Record a run to a JSON export that the `wandb_export` reader reads offline."""
    out = Path(out)
    out.write_text(json.dumps(fetch_wandb_run(run_path, api=api), default=str) + "\n")
    return out


def detect_wandb_export(path: Path) -> bool:
    if not path.is_file() or path.suffix != ".json":
        return False
    obj = _first_object(path)
    return obj is not None and "wandb_run" in obj and "history" in obj


def read_wandb_export(path: Path, **options: Any) -> RewardLog:
    try:
        data = json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise LogFormatError(f"{path}: not valid JSON ({exc.msg}); re-export the run") from None
    if not isinstance(data, dict):
        raise LogFormatError(f"{path}: not a W&B export object")
    return _assemble(data, str(path), **options)


LOG_READERS.add(
    "wandb_export",
    LogReader("wandb_export", detect_wandb_export, read_wandb_export, "W&B run export (JSON)"),
)


if __name__ == "__main__":  # python -m pgrpo.logs.wandb_run ENTITY/PROJECT/RUN OUT.json
    if len(sys.argv) != 3:
        sys.exit("usage: python -m pgrpo.logs.wandb_run ENTITY/PROJECT/RUN_ID OUT.json")
    try:
        print(export_wandb_run(sys.argv[1], sys.argv[2]))
    except LogFormatError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
