"""`pgrpo reproduce EXPERIMENT`: run a softmax-bandit reproduction, print its table, write JSON
and a PNG (docs/reproductions.md lists the experiments and their measured results)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from pgrpo.cli.common import command, escape, fail, json_option, out_dir


def _fmt(value: object) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:.4g}"
    return "-" if value is None else str(value)


@command("reproduce")
def reproduce_command(
    experiment: str = typer.Argument(
        ..., help="threshold, transition, group-size, degeneracy or sign-vs-drgrpo."
    ),
    out: Path = typer.Option(
        Path("runs/reproduce"), "--out", help="Folder for EXPERIMENT.json and EXPERIMENT.png."
    ),
    as_json: bool = json_option('the table\'s rows ({"rows": [...]})'),
    seeds: int = typer.Option(
        None, "--seeds", help="Independent runs per configuration (default: the experiment's)."
    ),
) -> None:
    """Reproduce a dynamics or starvation claim on the softmax bandit (each <= 60 s on 2 CPUs)."""
    from pgrpo.bandit.experiments import EXPERIMENTS, run_experiment
    from pgrpo.bandit.experiments.base import check_seeds

    err = Console(stderr=True)
    exp = EXPERIMENTS.get(experiment)
    if seeds is not None:  # checked before anything is printed or created
        check_seeds(seeds)
    out_dir(out)
    if not as_json:
        err.print(f"pgrpo reproduce {experiment}: {exp.description}")
    try:
        result = run_experiment(experiment, seeds=seeds)
    except (MemoryError, RuntimeError) as exc:
        if isinstance(exc, RuntimeError) and "allocate memory" not in str(exc):
            raise
        fail(f"out of memory running {experiment} with --seeds {seeds}", "lower --seeds")
    stem = out / experiment
    payload = result.to_json()
    stem.with_suffix(".json").write_text(json.dumps(payload, indent=1))
    exp.plot(result, stem.with_suffix(".png"))
    rows = [{c: row.get(c) for c in result.columns} for row in payload["rows"]]
    if as_json:
        typer.echo(json.dumps({"rows": rows}))
        return
    table = Table(title=f"pgrpo reproduce {experiment}")
    for c in result.columns:
        table.add_column(c, justify="right", overflow="fold")
    for row in rows:
        table.add_row(*(_fmt(row[c]) for c in result.columns))
    console = Console()
    console.print(table)
    for key, value in result.metrics.items():
        console.print(f"{key}: {_fmt(value)}")
    console.print(
        f"wrote {escape(stem.with_suffix('.json'))} and {escape(stem.with_suffix('.png'))}"
    )
