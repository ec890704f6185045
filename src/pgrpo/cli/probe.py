"""`pgrpo probe [--config FILE.yaml] [key=value ...]`: measure the curvature kappa of a run's
model + task + optimizer settings at its initial policy (or a checkpoint), say what that is (the
local slope of the restoring force there), and what `pgrpo predict` says with it, with whether
that prediction is supported (near the run's plateau only)."""

from __future__ import annotations

import math
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
    differences of expected gradients with common random numbers): the local slope of the
    restoring force at the probed policy, its standard error (a jackknife over the direction
    batches), and the ROM's prediction with it for the run's optimizer, lr schedule and optimizer
    steps (regime, tau, K*), marked not supported unless the probed policy is near its plateau,
    with the `pgrpo predict` command that reproduces it."""
    from pgrpo.measure.probe_run import probe_run_config

    if not (step_lrs > 0 and math.isfinite(step_lrs)):
        fail(f"--step-lrs {step_lrs:g} is not a finite number > 0", "give e.g. 10 (the default)")
    if pairs < direction_batches:
        fail(
            f"--pairs {pairs} is fewer than --direction-batches {direction_batches}: each "
            "direction batch needs a pair",
            f"give --pairs {direction_batches} or more",
        )
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
    Python's shortest round-trip repr, so pasting it gives the same regime, tau and K*; --steps
    in optimizer steps, with the run's lr schedule from the probed step on)."""
    words = ["pgrpo predict --optimizer", out["optimizer"], "--lr", repr(float(out["lr"]))]
    words += ["--beta1", repr(float(out["beta1"]))]
    if out["optimizer"] == "adam":
        words += ["--beta2", repr(float(out["beta2"]))]
    words += ["--kappa", repr(float(out["kappa"])), "--refresh-interval", out["refresh_interval"]]
    words += ["--group-size", out["group_size"], "--batch-prompts", out["batch_prompts"]]
    words += ["--steps", out["steps"]]
    if out["schedule"] != "constant" or out["warmup_steps"] or out["start_step"]:
        words += ["--schedule", out["schedule"], "--warmup-steps", out["warmup_steps"]]
        words += ["--schedule-start", out["start_step"]]
    return " ".join(str(w) for w in words)


def _print(out: dict, console: Console) -> None:
    if out["kappa"] is None:
        console.print(f"[yellow]{escape(out['note'])}[/yellow]")
        return
    pairs = len(out["samples"])
    console.print(
        f"kappa = {fmt(out['kappa'])} +- {fmt(out['stderr'], '.2g')} (standard error: "
        f"{out['stderr_kind']}, {pairs} pairs; preconditioner {out['preconditioner']})"
    )
    level = "" if out["reward_mean"] is None else f", mean reward {out['reward_mean']:.3g}"
    console.print(f"measured: {escape(out['measured'])}, at the {escape(out['probed_at'])}{level}")
    print_warnings(out["warnings"], console)
    pred = out["prediction"]
    if pred is None:
        console.print(escape(out.get("note", "")))
        return
    k = out["refresh_interval"]
    tau = "-" if pred["tau"] is None else f"{fmt(pred['tau'])} optimizer steps"
    if out.get("caveat"):
        console.print(f"[yellow]caveat: {escape(out['caveat'])}[/yellow]")
    head = "prediction" if out["prediction_supported"] else "IF this were the plateau's kappa"
    warm = f" after {out['warmup_steps']} warm-up steps" if out["warmup_steps"] else ""
    console.print(
        f"{head} ({out['optimizer']}: peak lr over the remaining steps "
        f"{out['peak_lr']:g}, beta1={out['beta1']:g}, K={k}, "
        f"schedule {out['schedule']}{warm}, {out['steps']} optimizer steps from step "
        f"{out['start_step']} of run.steps x K = {out['total_steps']}): regime {pred['regime']}, "
        f"tau={tau}, K*={fmt(pred['refresh_threshold'])}"
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
