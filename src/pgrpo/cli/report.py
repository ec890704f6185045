"""`pgrpo report RUN_DIR`: one self-contained HTML page with the run's plots and diagnosis."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from pgrpo.cli.app import app


@app.command("report")
def report_cmd(
    run_dir: Path = typer.Argument(..., help="Run directory (metrics.jsonl) or a log file."),
    out: Path | None = typer.Option(None, help="Output folder (default RUN_DIR/report)."),
    eval_log: Path | None = typer.Option(None, "--eval-log", help="`pgrpo eval` JSON."),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON only."),
) -> None:
    """Reward with fit and forecast band, degeneracy vs i.i.d. prediction, entropy, KL, lengths,
    stability margin K/K*, the diagnosis and the eval tables, in one HTML file plus PNGs."""
    from pgrpo.report import build_report

    if not run_dir.exists():
        raise typer.BadParameter(f"{run_dir} not found (give a run directory or a log file)")
    res = build_report(run_dir, out_dir=out, eval_log=eval_log)
    if as_json:
        doc = {
            "html": str(res.html_path),
            "pngs": {k: str(v) for k, v in res.pngs.items()},
            "missing": res.missing,
        }
        typer.echo(json.dumps(doc))
        return
    console = Console()
    console.print(f"report: {res.html_path}")
    for name, why in res.missing.items():
        console.print(f"  [dim]{name} not shown: {why}[/dim]")
