"""`pgrpo predict --lr --beta1 --refresh-interval --group-size --kappa [--json]`: what the
reduced-order model predicts for a configuration, before running it."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from pgrpo.cli.common import command, config_option, emit, fmt, json_option, out_dir

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
    optimizer: str = typer.Option(
        "sgd_momentum",
        "--optimizer",
        help="Optimizer reduction: sgd_momentum (heavy-ball K*) or adam (kappa preconditioned: "
        "kappa / grad RMS; no divergence threshold).",
    ),
    beta2: float = config_option(OPTIMIZER, "beta2", "--beta2"),
    out: Path = typer.Option(Path("."), "--out", help="Directory for predict.png."),
    as_json: bool = json_option("the prediction"),
) -> None:
    """Regime (from the exact recursion), damping ratio, tau, exact K*, oscillation onset and
    stationary std."""
    from pgrpo.dynamics.predict import predict

    pred = predict(
        lr,
        beta1,
        kappa,
        refresh_interval=refresh_interval,
        group_size=group_size,
        batch_prompts=batch_prompts,
        n_steps=steps,
        R0=r0,
        R_inf=r_inf,
        optimizer=optimizer,
        beta2=beta2,
    )
    from pgrpo.cli._mpl import import_quietly

    out_dir(out)  # once the settings are known to be good: bad input writes nothing
    png = import_quietly("pgrpo.dynamics.plots").plot_prediction(pred, out / "predict.png")
    data = {**pred.to_dict(), "png": str(png)}
    title = (
        f"prediction ({optimizer}): lr={lr:g}, kappa={kappa:g}, beta1={beta1:g}, "
        f"K={refresh_interval}, G={group_size}, B={batch_prompts}"
    )
    emit(data, as_json, lambda console: _print(data, title, refresh_interval, console))


def _print(data: dict, title: str, k: int, console: Console) -> None:
    table = Table(title=title)
    table.add_column("quantity")
    table.add_column("value")
    for key in _SHOWN:
        table.add_row(key, fmt(data[key]))
    console.print(table)
    if not data["stable"]:
        console.print(
            f"[red]K={k} >= K*={data['refresh_threshold']}: the mean diverges; lower the "
            "refresh interval or the learning rate[/]"
        )
    console.print(fmt(data["refresh_threshold_statement"]))
    if data["inflection_time"] is None:
        console.print("no inflection_time: --r0 equals --r-inf (the mean starts on its plateau)")
    console.print(f"figure: {fmt(data['png'])}")
