"""`pgrpo train [--config FILE.yaml] [key=value ...] [--resume]`: GRPO on a causal LM."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from pgrpo.cli.common import check_model, check_parent_writable, check_yaml, command, escape


def _fmt(value: Any, digits: int = 3) -> str:
    if isinstance(value, float):
        return "-" if not math.isfinite(value) else f"{value:.{digits}g}"
    return "-" if value is None else str(value)


def progress_description(metrics: dict[str, Any]) -> str:
    """One line for the progress bar: reward, degeneracy and the latest forecast."""
    text = (
        f"reward {metrics['reward']:.3f}  degenerate {metrics['frac_reward_zero_std']:.2f} "
        f"(pass {metrics['degeneracy/all_pass']:.2f} / fail {metrics['degeneracy/all_fail']:.2f})"
    )
    if metrics.get("forecast/plateau") is not None:
        text += (
            f"  forecast {_fmt(metrics['forecast/plateau'])} "
            f"({metrics.get('forecast/regime', '?')})"
        )
    return text


def run_with_progress(config: Any, *, resume: bool, overwrite: bool, console: Console) -> Any:
    """Train with a rich progress bar (step, reward, degeneracy, ETA, forecast)."""
    from pgrpo.train.trainer import train

    columns = [
        TextColumn("step {task.completed}/{task.total}"),
        BarColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("{task.description}"),
    ]
    forecast: dict[str, Any] = {}
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task("loading model...", total=config.run.steps)

        def on_step(metrics: dict[str, Any]) -> None:
            forecast.update({k: v for k, v in metrics.items() if k.startswith("forecast/")})
            progress.update(
                bar,
                completed=metrics["step"],
                description=progress_description({**metrics, **forecast}),
            )

        def on_note(text: str) -> None:
            progress.console.print(f"note: {escape(text)}")

        return train(config, resume=resume, overwrite=overwrite, on_step=on_step, on_note=on_note)


def summary(history: list[dict[str, Any]]) -> dict[str, Any]:
    """First/last reward and degeneracy, and the last forecast, for the final table."""
    first, last = history[0], history[-1]
    out: dict[str, Any] = {
        "steps": last["step"],
        "reward_first": first["reward"],
        "reward_last": last["reward"],
        "frac_reward_zero_std_last": last["frac_reward_zero_std"],
        "reward_errors": sum(h.get("reward_errors", 0) for h in history),
        "reward_timeouts": sum(h.get("reward_timeouts", 0) for h in history),
    }
    for h in reversed(history):
        if h.get("forecast/plateau") is not None:
            out.update({k: v for k, v in h.items() if k.startswith("forecast/")})
            break
    return out


def load_run_config(config: Path | None, overrides: list[str]) -> Any:
    """The RunConfig of `--config FILE` + overrides, checked before any model is loaded: YAML
    syntax (file and line named), config keys and values, task.options, model path, run folder."""
    from pgrpo.tasks.base import check_task_options
    from pgrpo.train.config import load_config

    if config is not None:
        check_yaml(config, "--config")
    cfg = load_config(config, overrides)
    check_task_options(cfg.task.name, dict(cfg.task.options))
    check_model(cfg.model.name, "model.name")
    check_parent_writable(cfg.run_dir, "run.output_dir/run.name")
    return cfg


@command("train")
def train_command(
    overrides: list[str] = typer.Argument(
        None, help="key=value overrides, e.g. group_size=4 optim.lr=1e-5 temperatures=[0.5,1.0]"
    ),
    config: Path = typer.Option(None, "--config", "-c", help="YAML file with the run config."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run from its checkpoint."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing run folder."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON only."),
) -> None:
    """Train a causal LM with GRPO; writes RUN_DIR/metrics.jsonl, config.yaml, checkpoints."""
    cfg = load_run_config(config, list(overrides or []))
    from pgrpo.train.checkpoint import DiskFullError
    from pgrpo.train.interrupts import RunInterrupted
    from pgrpo.train.runlock import RunLockedError

    console = Console(stderr=True)
    try:
        result = run_with_progress(cfg, resume=resume, overwrite=overwrite, console=console)
    except RunInterrupted as exc:  # a checkpoint is written; the message names --resume
        typer.echo(f"stopped: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except DiskFullError as exc:
        typer.echo(f"error: {exc.strerror}", err=True)
        raise typer.Exit(2) from None
    except RunLockedError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    info = {"run_dir": str(result.run_dir), **summary(result.history)}
    if as_json:
        typer.echo(json.dumps(info))
        return
    table = Table(title=f"pgrpo train: {escape(result.run_dir)}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in info.items():
        table.add_row(key, _fmt(value))
    Console().print(table)
