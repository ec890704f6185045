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

from pgrpo.cli.common import (
    check_model,
    check_parent_writable,
    check_yaml,
    command,
    escape,
    fail,
    json_option,
)
from pgrpo.errors import check_seed


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
    if metrics.get("forecast/withheld"):  # the fitted level is not where the verdict says
        text += "  forecast withheld"
    elif metrics.get("forecast/plateau") is not None:
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
    for h in reversed(history):  # the latest forecast, withheld or failed (an earlier one
        if any(k.startswith("forecast/") for k in h):  # describes the run as it was then)
            out.update({k: v for k, v in h.items() if k.startswith("forecast/")})
            break
    return out


def load_run_config(config: Path | None, overrides: list[str], *, resume: bool = False) -> Any:
    """The RunConfig of `--config FILE` + overrides, checked before any model is loaded: YAML
    syntax (file and line named), each key given once, config keys and values, then
    `check_run_config`. With `resume`, a run folder's own config.yaml continues that folder
    (`resumed_folder`)."""
    from pgrpo.train.config import load_config

    if config is not None:
        check_yaml(config, "--config")
    check_overrides(overrides)
    cfg = load_config(config, overrides)
    if resume and config is not None:
        cfg = resumed_folder(cfg, config, overrides)
    return check_run_config(cfg)


def _target(item: str) -> tuple[tuple[str, ...], Any]:
    """The config field `key=value` sets (`lr` -> ('optim', 'lr')) and its value (None when the
    value is not YAML: load_config names it)."""
    from pgrpo.train.config import apply_overrides

    key = item.partition("=")[0]
    node: Any = apply_overrides({}, [f"{key}="])  # {section: {field: None}}: the resolved key
    path: list[str] = []
    while isinstance(node, dict) and len(node) == 1:
        part, node = next(iter(node.items()))
        path.append(part)
    try:
        value: Any = apply_overrides({}, [item])
        for part in path:
            value = value[part]
    except Exception:  # noqa: BLE001 - a malformed value is load_config's to name
        value = None
    return tuple(path), value


def _holds(value: Any, path: tuple[str, ...]) -> bool:
    """Whether the mapping `value` has an entry at the key path `path`."""
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return False
        value = value[part]
    return True


def check_overrides(overrides: list[str]) -> None:
    """UserError when two `key=value` overrides set the same config field, so that the last
    would silently win: the same key twice (`lr=...` and `optim.lr=...` alike), a mapping after
    one of its sub-keys (`task.options.n=100 task.options={levels: [2]}` would drop n), or a
    sub-key that a mapping given before already sets. A sub-key after a mapping that lacks it
    is merged into it (`task.options={levels: [2]} task.options.n=100`: both kept)."""
    seen: list[tuple[tuple[str, ...], Any, str]] = []
    for item in overrides:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            continue  # load_config names the malformed item
        path, value = _target(item)
        for old, old_value, first in seen:
            n = min(len(old), len(path))
            if old[:n] != path[:n]:
                continue
            if len(path) < len(old):  # a mapping replacing an earlier sub-key
                fail(f"config key {'.'.join(old)} given twice ({first}, then {item}, which "
                     f"replaces all of {'.'.join(path)})", _one_by_one(path))  # fmt: skip
            if len(path) == len(old) or _holds(old_value, path[len(old) :]):
                fix = "give each key once" if len(path) == len(old) else _one_by_one(old)
                fail(f"config key {'.'.join(path)} given twice ({first}, then {item})", fix)
        seen.append((path, value, item))


def _one_by_one(path: tuple[str, ...]) -> str:
    key = ".".join(path)
    return (f"give each key once: set {key}'s keys one by one ({key}.KEY=VALUE ...) or all in "
            f"one mapping ({key}={{KEY: VALUE, ...}})")  # fmt: skip


def resumed_folder(cfg: Any, config: Path, overrides: list[str]) -> Any:
    """`cfg` set to continue the run folder that holds `config` when `config` is a run folder's
    own config.yaml (`--config RUN_DIR/config.yaml --resume`): RUN_DIR is resumed wherever the
    run was started (a copied, renamed or moved folder), not the folder its run.output_dir and
    run.name name. UserError when an override names another folder."""
    import dataclasses
    import os

    from pgrpo.train.checkpoint import CHECKPOINT_DIR
    from pgrpo.train.log import CONFIG_FILE, METRICS_FILE

    folder = Path(os.path.abspath(config)).parent
    is_run = (folder / CHECKPOINT_DIR).is_dir() or (folder / METRICS_FILE).is_file()
    if config.name != CONFIG_FILE or not is_run or folder.resolve() == cfg.run_dir.resolve():
        return cfg
    located = [i for i in overrides if _target(i)[0][:2] in {("run",), ("run", "name"),
                                                             ("run", "output_dir")}]  # fmt: skip
    if located:
        fail(f"--config {config} is the config of the run folder {folder}, which --resume "
             f"continues, but {located[0]} names {cfg.run_dir}",
             f"drop {located[0]} to continue {folder}, or pass --config "
             f"{cfg.run_dir / CONFIG_FILE}")  # fmt: skip
    run = dataclasses.replace(cfg.run, output_dir=str(folder.parent), name=folder.name)
    return dataclasses.replace(cfg, run=run)


def check_run_config(cfg: Any) -> Any:
    """`cfg` when its seed, task options, model path and run folder are usable, else UserError
    (before any model is loaded or the run folder is made)."""
    from pgrpo.tasks.base import check_task_options

    check_seed(cfg.run.seed, "run.seed")  # numpy's legacy seed (the trainer's) takes < 2^32
    check_task_options(cfg.task.name, dict(cfg.task.options))
    check_model(cfg.model.name, "model.name")
    check_parent_writable(cfg.run_dir, "run.output_dir/run.name")
    return cfg


@command("train")
def train_command(
    overrides: list[str] = typer.Argument(
        None, help="key=value overrides, e.g. group_size=4 optim.lr=1e-5 temperatures=[0.5,1.0]"
    ),
    config: Path = typer.Option(
        None,
        "--config",
        "-c",
        help="YAML file with the run config; with --resume, a run folder's own config.yaml "
        "continues that folder, wherever it was moved or copied.",
    ),
    resume: bool = typer.Option(False, "--resume", help="Continue the run from its checkpoint."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing run folder."),
    as_json: bool = json_option("the run's summary"),
) -> None:
    """Train a causal LM with GRPO; writes RUN_DIR/metrics.jsonl, config.yaml, checkpoints."""
    if resume and overwrite:
        fail("--resume and --overwrite contradict each other (--resume continues the run in its "
             "folder, --overwrite deletes it and starts afresh)", "pass one of them")  # fmt: skip
    cfg = load_run_config(config, list(overrides or []), resume=resume)
    from pgrpo.train.checkpoint import DiskFullError
    from pgrpo.train.interrupts import RunInterrupted
    from pgrpo.train.runlock import RunLockedError, check_unlocked

    console = Console(stderr=True)
    try:
        check_unlocked(cfg.run_dir)  # before the progress bar: the error is the only line
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
