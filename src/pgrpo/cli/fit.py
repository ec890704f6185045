"""`pgrpo fit LOG [--forecast-from F] [--out DIR] [--json]`: fit the reduced-order model and the
baselines to a training log (pgrpo, TRL, verl, W&B CSV, generic CSV), optionally forecast."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from pgrpo.cli.app import app


def _fmt(x: float | None, spec: str = ".4g") -> str:
    return "-" if x is None or not math.isfinite(x) else format(x, spec)


@app.command("fit")
def fit_cmd(
    log: Path = typer.Argument(..., help="Training log file or run directory."),
    forecast_from: float | None = typer.Option(
        None, "--forecast-from", help="Fit the first FRACTION of the log and forecast the rest."
    ),
    out: Path = typer.Option(Path("."), "--out", help="Directory for fit.png."),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON only."),
    log_format: str | None = typer.Option(None, "--format", help="Force a log reader by name."),
    reward_column: str | None = typer.Option(None, "--reward-column", help="Reward key."),
    step_column: str | None = typer.Option(None, "--step-column", help="Step key."),
    loss: str = typer.Option("linear", "--loss", help="linear, soft_l1, huber, cauchy, arctan."),
) -> None:
    """Fit rom / exponential / logistic to the reward curve; write OUT/fit.png."""
    from pgrpo.dynamics.logfit import fit_log
    from pgrpo.dynamics.plots import plot_log_fit
    from pgrpo.logs import read_log

    opts = {k: v for k, v in (("reward_key", reward_column), ("step_key", step_column)) if v}
    try:
        reward_log = read_log(log, format=log_format, **opts)
        result = fit_log(reward_log, forecast_from=forecast_from, loss=loss)
    except (ValueError, KeyError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    png = plot_log_fit(result, out / "fit.png")
    data = {**result.to_dict(), "png": str(png)}
    if as_json:
        typer.echo(json.dumps(data, allow_nan=False))
        return
    _print(data)


def _print(data: dict) -> None:
    console = Console()
    for w in data["warnings"]:
        console.print(f"[yellow]warning:[/] {w}")
    table = Table(title=f"fit of {data['log']} ({data['format']}, {data['n']} points)")
    for col in ("model", "R^2", "AIC", "BIC", "parameters (+- stderr)"):
        table.add_column(col, overflow="fold")
    rows = [data, *data["baselines"].values()]
    for r in rows:
        params = ", ".join(
            f"{k}={_fmt(v)}" + (f"+-{_fmt(r['stderr'].get(k), '.2g')}" if k in r["stderr"] else "")
            for k, v in r["params"].items()
        )
        table.add_row(
            r["model"], _fmt(r["r2"], ".4f"), _fmt(r["aic"], ".1f"), _fmt(r["bic"], ".1f"), params
        )
    console.print(table)
    m = data["metrics"]
    if "preferred" in m:  # the closed form with m, c from the optimizer vs the free fit
        console.print(
            f"constrained (m, c from beta1, K): R^2 {_fmt(m['r2_constrained'], '.4f')}, "
            f"AICc - free {_fmt(m['delta_aicc'], '.2f')}: {m['preferred']} preferred, "
            f"closed form {m['closed_form']} (p {_fmt(m['lr_test_p'], '.2g')}); kappa "
            f"{_fmt(m['kappa_constrained'])} [{_fmt(m['kappa_lo'])}, {_fmt(m['kappa_hi'])}]"
        )
    fc = data.get("forecast")
    if fc:
        t = Table(title=f"forecast of the mean after step {_fmt(fc['cut_step'], '.0f')}")
        for col in ("predictor", "predicted mean", "observed mean", "abs error"):
            t.add_column(col)
        t.add_row(
            f"{fc['model']} ({int(fc['level'] * 100)}% band "
            f"{_fmt(fc['band'][0])}..{_fmt(fc['band'][1])})",
            _fmt(fc["predicted_mean"]),
            _fmt(fc["observed_mean"]),
            _fmt(fc["error"]),
        )
        for name, b in fc["baselines"].items():
            t.add_row(name, _fmt(b["predicted_mean"]), _fmt(fc["observed_mean"]), _fmt(b["error"]))
        console.print(t)
    console.print(f"figure: {data['png']}")
