"""`pgrpo demo`: GRPO on SmolLM2 + arithmetic on the CPU, then fit, forecast, diagnosis, plots."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from pgrpo.cli.common import command, escape, fail, json_option
from pgrpo.cli.train import _fmt, _target, check_overrides, check_run_config, run_with_progress

OPTION_KEYS = {("run", "steps"): "--steps", ("run", "output_dir"): "--output-dir"}
"""Config keys the demo sets from its own options: an override of one would silently win over
the option (`demo --steps 3 run.steps=5` ran 5 steps and said 3)."""


@command("demo")
def demo_command(
    steps: int = typer.Option(12, "--steps", help="GRPO steps (8 prompts x 4 completions each)."),
    output_dir: str = typer.Option("runs", "--output-dir", help="Parent folder of runs/demo."),
    overrides: list[str] = typer.Argument(None, help="Extra key=value config overrides."),
    as_json: bool = json_option("the run's summary"),
) -> None:
    """The README's first job: a short CPU run with a rising reward, then its fit and forecast."""
    from pgrpo.demo import analyse, demo_config

    check_overrides(list(overrides or []))  # the user's own; they override the demo's defaults
    for item in overrides or []:
        option = OPTION_KEYS.get(_target(item)[0])
        if option is not None:
            fail(f"{item} sets what {option} sets", f"pass {option} {item.partition('=')[2]}")
    cfg = check_run_config(demo_config(steps, output_dir, list(overrides or [])))
    console = Console(stderr=True)
    console.print(
        f"pgrpo demo: {escape(cfg.model.name)} on {escape(cfg.task.name)}, {steps} steps -> "
        f"{escape(cfg.run_dir)}"
    )
    result = run_with_progress(cfg, resume=False, overwrite=True, console=console)
    demo = analyse(result.run_dir, cfg, result.history)
    if as_json:
        info = {"run_dir": str(demo.run_dir), "files": {k: str(v) for k, v in demo.files.items()}}
        typer.echo(json.dumps({**info, **demo.metrics}, default=str))
        return
    table = Table(title=f"pgrpo demo: {escape(demo.run_dir)}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in demo.metrics.items():
        table.add_row(key, _fmt(value))
    out = Console()
    out.print(table)
    out.print((demo.run_dir / "diagnosis.txt").read_text(), markup=False)
    for name, path in demo.files.items():
        out.print(f"{name:>10}: {escape(path)}")
