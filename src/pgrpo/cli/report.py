"""`pgrpo report RUN_DIR`: one self-contained HTML page with the run's plots and diagnosis."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from pgrpo.cli.common import command, emit, escape, existing, out_dir, read_json
from pgrpo.cli.diagnose import eval_points


@command("report")
def report_cmd(
    run_dir: Path = typer.Argument(..., help="Run directory (metrics.jsonl) or a log file."),
    out: Path | None = typer.Option(None, help="Output folder (default RUN_DIR/report)."),
    eval_log: Path | None = typer.Option(None, "--eval-log", help="`pgrpo eval` JSON."),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON only."),
) -> None:
    """Reward with fit and forecast band, degeneracy vs i.i.d. prediction, entropy, KL, lengths,
    stability margin K/K*, the diagnosis and the eval tables, in one HTML file plus PNGs."""
    from pgrpo.report import build_report

    existing(run_dir, "RUN_DIR", "a run directory or a log file")
    if out is None:
        out = (run_dir if run_dir.is_dir() else run_dir.parent) / "report"
    if eval_log is None and run_dir.is_dir() and (run_dir / "eval.json").is_file():
        eval_log = run_dir / "eval.json"
    if eval_log is not None:  # checked here so a bad file is named, not a JSON parser's message
        read_json(eval_log, "--eval-log")
        eval_points(eval_log)
    res = build_report(run_dir, out_dir=out_dir(out), eval_log=eval_log)
    doc = {
        "html": str(res.html_path),
        "pngs": {k: str(v) for k, v in res.pngs.items()},
        "missing": res.missing,
    }
    emit(doc, as_json, lambda console: _print(res, console))


def _print(res: Any, console: Console) -> None:
    console.print(f"report: {escape(res.html_path)}")
    for name, why in res.missing.items():
        console.print(f"  [dim]{escape(name)} not shown: {escape(why)}[/dim]")
