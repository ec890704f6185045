"""`pgrpo probe [--config FILE.yaml] [key=value ...]`: measure the curvature kappa of a run's
model + task + optimizer settings at its initial policy, so `pgrpo predict` can forecast it."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from pgrpo.cli.common import (
    command,
    config_option,
    emit,
    escape,
    existing,
    fail,
    fmt,
    json_option,
    print_warnings,
)
from pgrpo.cli.train import load_run_config
from pgrpo.errors import MAX_SEED
from pgrpo.measure.config import ProbeConfig

PROBE = "pgrpo.measure.config:ProbeConfig"


@command("probe")
def probe_cmd(
    overrides: list[str] | None = typer.Argument(None, help="Run-config overrides key=value."),
    config: Path | None = typer.Option(None, "--config", help="Run config YAML (as for train)."),
    run_dir: Path | None = typer.Option(
        None, "--run", help="Probe early in a run: its config.yaml and latest checkpoint."
    ),
    pairs: int = config_option(PROBE, "n_pairs", "--pairs", min=2),
    direction_batches: int = config_option(PROBE, "n_direction", "--direction-batches", min=1),
    step_lrs: float = config_option(PROBE, "step_lrs", "--step-lrs"),
    preconditioner: str | None = config_option(PROBE, "preconditioner", "--preconditioner"),
    seed: int = config_option(PROBE, "seed", "--seed", min=0, max=MAX_SEED),
    as_json: bool = json_option("kappa, its standard error and the prediction"),
) -> None:
    """kappa = -g^T P H P g / g^T P g along the preconditioned update direction (finite
    differences of expected gradients with common random numbers), its standard error, and
    the ROM's prediction with it for the run's optimizer (regime, tau, K*), with the `pgrpo
    predict` command that reproduces it."""
    from pgrpo.measure.probe import probe_run_config

    checkpoint = None
    if run_dir is not None:
        from pgrpo.train.checkpoint import latest_checkpoint

        existing(run_dir, "--run", "a run folder written by `pgrpo train`")
        checkpoint = latest_checkpoint(run_dir)
        if checkpoint is None:
            fail(f"--run {run_dir} has no checkpoint (checkpoints/latest)", "train it first")
        config = config or run_dir / "config.yaml"
    run_cfg = load_run_config(config, list(overrides or []))
    cfg = ProbeConfig(
        step_lrs=step_lrs,
        n_direction=direction_batches,
        n_pairs=pairs,
        preconditioner=preconditioner,
        seed=seed,
    )
    out = probe_run_config(run_cfg, cfg, checkpoint=checkpoint)
    if out["prediction"] is not None:
        out["predict_command"] = predict_command(out)
    emit(out, as_json, lambda console: _print(out, console))


def predict_command(out: dict) -> str:
    """The `pgrpo predict` command line that reproduces the probe's prediction (numbers as
    Python's shortest round-trip repr, so pasting it gives the same regime and tau)."""
    words = ["pgrpo predict --optimizer", out["optimizer"], "--lr", repr(float(out["lr"]))]
    words += ["--beta1", repr(float(out["beta1"]))]
    if out["optimizer"] == "adam":
        words += ["--beta2", repr(float(out["beta2"]))]
    words += ["--kappa", repr(float(out["kappa"])), "--refresh-interval", out["refresh_interval"]]
    words += ["--group-size", out["group_size"], "--batch-prompts", out["batch_prompts"]]
    return " ".join(str(w) for w in [*words, "--steps", out["steps"]])


def _print(out: dict, console: Console) -> None:
    pairs = len(out["samples"])
    if out["kappa"] is None:
        console.print(f"[yellow]{escape(out['note'])}[/yellow]")
        return
    console.print(
        f"kappa = {fmt(out['kappa'])} +- {fmt(out['stderr'], '.2g')} (stderr over {pairs} pairs, "
        f"preconditioner {out['preconditioner']})"
    )
    print_warnings(out["warnings"], console)
    pred = out["prediction"]
    if pred is None:
        console.print(escape(out.get("note", "")))
        return
    k = out["refresh_interval"]
    tau = "-" if pred["tau"] is None else f"{fmt(pred['tau'])} steps"
    console.print(
        f"{out['optimizer']}: lr={out['lr']:g}, beta1={out['beta1']:g}, K={k}: regime "
        f"{pred['regime']}, tau={tau}, K*={fmt(pred['refresh_threshold'])}"
    )
    if not pred["stable"]:
        console.print(
            f"[red]K={k} >= K*={fmt(pred['refresh_threshold'])}: the mean diverges; lower the "
            "refresh interval or the learning rate[/]"
        )
    elif pred["refresh_threshold"] is None:
        console.print("no K*: Adam predicts no divergence threshold (docs/dynamics.md)")
    # one line however narrow the console: the command is meant to be pasted
    console.print(f"forecast a run: {escape(out['predict_command'])}", soft_wrap=True)
