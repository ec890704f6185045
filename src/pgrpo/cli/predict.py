"""`pgrpo predict --lr --beta1 --refresh-interval --group-size --kappa [--json]`: what the
reduced-order model predicts for a configuration, before running it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from pgrpo.cli.common import (
    command,
    config_option,
    emit,
    escape,
    fail,
    fmt,
    json_option,
    out_dir,
)

OPTIMIZER = "pgrpo.dynamics.optimizers:OptimizerSettings"

_SHOWN = (
    "regime",
    "continuum_regime",
    "damping_ratio",
    "tau",
    "a",
    "refresh_threshold",
    "refresh_threshold_rule_of_thumb",
    "linear_threshold",
    "stable",
    "oscillation_onset_a",
    "stationary_std",
    "inflection_time",
    "final_mean",
)


@command("predict")
def predict_cmd(
    lr: float = config_option(OPTIMIZER, "lr", "--lr"),
    kappa: float = config_option(OPTIMIZER, "kappa", "--kappa"),
    beta1: float = config_option(OPTIMIZER, "beta1", "--beta1"),
    refresh_interval: int = config_option(OPTIMIZER, "refresh_interval", "--refresh-interval"),
    group_size: int = typer.Option(8, "--group-size", help="G: samples per prompt (>= 2)."),
    batch_prompts: int = typer.Option(1, "--batch-prompts", help="B: prompts per step."),
    steps: int = typer.Option(1000, "--steps", help="Steps to predict (>= 1)."),
    r0: float = typer.Option(0.2, "--r0", help="Initial expected reward."),
    r_inf: float = typer.Option(0.8, "--r-inf", help="Plateau (fixed point)."),
    noise_var: float | None = typer.Option(
        None,
        "--noise-var",
        help="V_F: per-sample force variance per unit lr (default 0.25 kappa^2, a 0/1 reward's "
        "at p = 1/2). Sets D and sgd_momentum's stationary_std; needed for those when --r0 / "
        "--r-inf leave [0, 1].",
    ),
    optimizer: str = typer.Option(
        "sgd_momentum",
        "--optimizer",
        help="Optimizer reduction: sgd_momentum (heavy-ball K*), or adam / adamw (kappa "
        "preconditioned: kappa / grad RMS; no divergence threshold).",
    ),
    beta2: float = config_option(OPTIMIZER, "beta2", "--beta2"),
    schedule: str = typer.Option(
        "constant",
        "--schedule",
        help="lr schedule after warm-up, as the trainer's optim.schedule: constant, linear or "
        "cosine decay towards 0 one step past the schedule's last step.",
    ),
    warmup_steps: int = typer.Option(
        0,
        "--warmup-steps",
        min=0,
        help="Linear lr warm-up, in optimizer steps (optim.warmup_steps).",
    ),
    schedule_start: int = typer.Option(
        0,
        "--schedule-start",
        min=0,
        help="Predict from this optimizer step of a schedule of --schedule-start + --steps steps "
        "(`pgrpo probe --run` at a checkpoint).",
    ),
    out: Path = typer.Option(Path("."), "--out", help="Directory for predict.png."),
    as_json: bool = json_option("the prediction"),
) -> None:
    """Regime (from the exact recursion), damping ratio, tau, exact K*, oscillation onset and
    stationary std."""
    import math

    from pgrpo.dynamics.optimizers import run_optimizer
    from pgrpo.dynamics.predict import predict

    try:  # adamw / AdamW / sgd as fit, diagnose and report read them (a review, session 36)
        optimizer = run_optimizer(optimizer)
    except ValueError as exc:
        fail(f"--optimizer: {exc}".split("; ")[0], "give --optimizer sgd_momentum or adam (adamw)")
    if noise_var is not None and not (math.isfinite(noise_var) and noise_var > 0):
        fail(
            f"--noise-var {noise_var!r} is not a finite number > 0",
            "give the per-sample force variance per unit lr (0.25 kappa^2 for a 0/1 reward)",
        )
    horizon = _lr_horizon(lr, schedule, warmup_steps, schedule_start, steps)
    pred = predict(
        lr if horizon is None else horizon.peak,
        beta1,
        kappa,
        refresh_interval=refresh_interval,
        group_size=group_size,
        batch_prompts=batch_prompts,
        n_steps=steps,
        R0=r0,
        R_inf=r_inf,
        noise_var=noise_var,
        optimizer=optimizer,
        beta2=beta2,
        lr_schedule=None if horizon is None else horizon.varying,
    )
    from pgrpo.cli._mpl import import_quietly

    out_dir(out)  # once the settings are known to be good: bad input writes nothing
    png = import_quietly("pgrpo.dynamics.plots").plot_prediction(pred, out / "predict.png")
    data = {
        **pred.to_dict(),
        "png": str(png),
        "notes": _notes(optimizer, beta2, noise_var, pred.metrics),
    }
    title = (
        f"prediction ({optimizer}): lr={lr:g}, kappa={kappa:g}, beta1={beta1:g}, "
        f"K={refresh_interval}, G={group_size}, B={batch_prompts}"
    )
    emit(data, as_json, lambda console: _print(data, title, refresh_interval, console))


def _lr_horizon(lr: float, schedule: str, warmup: int, start: int, steps: int) -> Any:
    """The lr of optimizer steps start .. start + steps - 1 of the trainer's schedule over start
    + steps steps (`pgrpo.core.schedules.lr_horizon`, the function `pgrpo probe` predicts with);
    None where --steps is out of range (predict() says why)."""
    import math

    from pgrpo.core.schedules import LR_SCHEDULES, lr_horizon
    from pgrpo.dynamics.predict import MAX_PREDICT_STEPS

    if schedule not in LR_SCHEDULES:
        fail(
            f"--schedule {schedule} is not a schedule",
            "give one of " + ", ".join(LR_SCHEDULES.names()),
        )
    if not 1 <= steps <= MAX_PREDICT_STEPS or not (math.isfinite(lr) and lr > 0):
        return None  # predict() says why, in its words for --steps and --lr
    return lr_horizon(schedule, lr, start + steps, start, warmup)


def _notes(optimizer: str, beta2: float, noise_var: float | None, metrics: dict) -> list[str]:
    """Settings this reduction does not use, said rather than silently ignored; why there is no
    stationary_std (levels outside [0, 1]: `predict._unscaled`)."""
    from pgrpo.dynamics.optimizers import OptimizerSettings

    unsupported = ("stationary_std is not given (null in --json): --r0 / --r-inf lie outside "
                   "[0, 1] and ")  # fmt: skip
    if optimizer == "adam":
        note = ("under adam, --group-size, --batch-prompts and --noise-var do not change "
                "stationary_std: the noise they set enters through kappa, the curvature "
                "preconditioned by the gradient's RMS (probe the run's own G and B with `pgrpo "
                "probe`); stationary_std is the second-moment closure's RMS deviation")  # fmt: skip
        if metrics.get("stationary_std_note"):
            note += ("; " + unsupported + "the closure's noise scale is a 0/1 reward's; the mean "
                     "trajectory, tau and the regime do not depend on it")  # fmt: skip
        return [note]
    if noise_var is not None:
        noise = (f"stationary_std and D use the given per-sample force variance --noise-var "
                 f"{noise_var:g}")  # fmt: skip
    elif metrics.get("stationary_std_note"):  # --r0 / --r-inf outside [0, 1]
        noise = (unsupported + "it assumes the force noise of a 0/1 reward (0.25 kappa^2 per "
                 "sample; D is null for the same reason): give --noise-var for this reward; the "
                 "mean trajectory, tau, the regime and K* do not depend on it")  # fmt: skip
    else:
        noise = ("stationary_std assumes a per-sample force variance of 0.25 kappa^2 (a 0/1 "
                 "reward at p = 1/2, the largest; --noise-var for another), whatever --r0 and "
                 "--r-inf: the spread of the reward around its mean from batch noise at G x B "
                 "rollouts a step")  # fmt: skip
    if beta2 != OptimizerSettings.beta2:
        return [f"--beta2 {beta2:g} is unused by {optimizer} (Adam's second moment only)", noise]
    return [noise]


def _print(data: dict, title: str, k: int, console: Console) -> None:
    table = Table(title=title)
    table.add_column("quantity")
    table.add_column("value")
    for key in _SHOWN:
        never = data["regime"] == "marginal" and key in ("tau", "stationary_std")
        value = "inf (never decays)" if never else fmt(data[key])
        if key == "stationary_std" and data.get("stationary_std_note"):
            value = "not supported (--r0 / --r-inf outside [0, 1]; see the note)"
        table.add_row(key, value)
    console.print(table)
    if data["regime"] == "marginal":
        console.print(
            "[yellow]marginal: the window map's spectral radius is 1, so the mean oscillates "
            "for ever around its plateau without settling; lower the learning rate or K[/]"
        )
    if not data["stable"]:
        console.print(
            f"[red]K={k} >= K*={data['refresh_threshold']}: the mean diverges; lower the "
            "refresh interval or the learning rate[/]"
        )
    console.print(fmt(data["refresh_threshold_statement"]))
    for note in data["notes"]:
        console.print(f"note: {escape(note)}")
    if data["inflection_time"] is None:
        console.print(f"no inflection_time: {escape(data['inflection_note'])}")
    console.print(f"figure: {fmt(data['png'])}")
