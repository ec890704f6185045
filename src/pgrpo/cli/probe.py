"""`pgrpo probe [--config FILE.yaml] [key=value ...]`: measure the curvature kappa of a run's
model + task + optimizer settings at its initial policy, so `pgrpo predict` can forecast it."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from pgrpo.cli.common import command, config_option, emit, escape, existing, fail, json_option
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
    preconditioner: str = config_option(PROBE, "preconditioner", "--preconditioner"),
    seed: int = config_option(PROBE, "seed", "--seed", min=0, max=MAX_SEED),
    as_json: bool = json_option("kappa, its standard error and the prediction"),
) -> None:
    """kappa = -g^T P H P g / g^T P g along the preconditioned update direction (finite
    differences of expected gradients with common random numbers), its standard error, and
    the ROM's prediction with it (regime, tau, K*)."""
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
    emit(out, as_json, lambda console: _print(out, pairs, console))


def _print(out: dict, pairs: int, console: Console) -> None:
    console.print(f"kappa = {out['kappa']:.4g} +- {out['stderr']:.2g} (stderr over {pairs} pairs)")
    if out["noise_dominated"]:
        console.print(
            "[yellow]warning: the standard error exceeds half of kappa (noise-dominated); raise "
            "--pairs, grpo.batch_prompts or grpo.group_size before trusting the forecast[/yellow]"
        )
    pred = out.get("prediction")
    if pred:
        console.print(
            f"lr={out['lr']:g}, beta1={out['beta1']:g}, K={out['refresh_interval']}: regime "
            f"{pred['regime']}, tau={pred['tau']:.4g} steps, K*={pred['refresh_threshold']}"
        )
        console.print(
            f"forecast a run: pgrpo predict --lr {out['lr']:g} --beta1 {out['beta1']:g} "
            f"--kappa {out['kappa']:.4g} --refresh-interval {out['refresh_interval']}"
        )
    else:
        console.print(escape(out.get("note", "")))
