"""`pgrpo fit LOG [--forecast-from F] [--forecast-method M] [--out DIR] [--json]`: fit the
reduced-order model and the baselines to a training log (pgrpo, TRL, verl, W&B CSV, generic
CSV), optionally forecast."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from pgrpo.cli import _runopts
from pgrpo.cli.common import (
    command,
    emit,
    escape,
    existing,
    fmt,
    json_option,
    out_dir,
    print_hanging,
    print_warnings,
    removed_if_failed,
)


@command("fit")
def fit_cmd(
    log: Path = typer.Argument(..., help="Training log file or run directory."),
    forecast_from: float | None = typer.Option(
        None, "--forecast-from", help="Fit the first FRACTION of the log and forecast the rest."
    ),
    forecast_method: str | None = typer.Option(
        None,
        "--forecast-method",
        help="How --forecast-from forecasts: consensus (default: the median of level_gain, "
        "level_gain with a logistic curve, a damped trend and a recent level), consensus3 "
        "(the median of the first three), ensemble_mean (their mean), level_gain, rom_blend.",
    ),
    out: Path = typer.Option(Path("."), "--out", help="Directory for fit.png."),
    as_json: bool = json_option("the fits, forecast and settings"),
    log_format: str | None = _runopts.format_option(),
    reward_column: str | None = _runopts.reward_column_option(),
    step_column: str | None = _runopts.step_column_option(),
    loss: str = typer.Option("linear", "--loss", help="linear, soft_l1, huber, cauchy, arctan."),
    plot: bool = typer.Option(
        True, "--plot/--no-plot", help="Write OUT/fit.png (--no-plot: skip matplotlib, ~0.3 s)."
    ),
    lr: float | None = _runopts.lr_option(),
    beta1: float | None = _runopts.beta1_option(),
    refresh_interval: int | None = _runopts.refresh_interval_option(),
    group_size: int | None = _runopts.group_size_option(),
    batch_prompts: int | None = _runopts.batch_prompts_option(),
    optimizer: str | None = _runopts.optimizer_option(),
    reward_range: str | None = _runopts.reward_range_option(),
) -> None:
    """Fit rom / exponential / logistic to the reward curve; write OUT/fit.png. With lr and
    beta1 (from the log, or given: the command line overrides the log) also the closed form
    with m, c from the optimizer, compared by AICc; the output says where each setting came
    from and what was assumed."""
    from pgrpo.dynamics.logfit import FIT_COLUMNS, fit_log
    from pgrpo.dynamics.settings import resolve_settings
    from pgrpo.logs import read_log

    existing(log, "log", "a log file or a run directory")
    method = _runopts.forecast_method(forecast_method, forecast_from)
    given = _runopts.given_settings(
        lr=lr, beta1=beta1, refresh_interval=refresh_interval, group_size=group_size,
        batch_prompts=batch_prompts, optimizer=optimizer, reward_range=reward_range,
    )  # fmt: skip
    opts = _runopts.read_options(reward_column, step_column)
    with removed_if_failed(out):  # a log that cannot be read or fitted leaves no --out folder
        if plot:  # --no-plot writes nothing there: no empty folder (a docs audit, session 37)
            out_dir(out)
        from pgrpo.diagnose.fitwords import PROGRESS_COLUMNS, fit_caveats

        columns = (*FIT_COLUMNS, *PROGRESS_COLUMNS)  # and the progress verdict's, for caveats
        reward_log = read_log(log, format=log_format, columns=columns, **opts)
        reward_log, settings = resolve_settings(reward_log, given)
        from pgrpo.diagnose.nullmodel import lag1_autocorr  # the free start's noise bound

        result = fit_log(reward_log, forecast_from=forecast_from, loss=loss, method=method,
                         noise_rho=lag1_autocorr)  # fmt: skip
        fc = result.forecast
        cut, how = (None, None) if fc is None else (fc.cut_step, fc.metrics.get("method"))
        caveats = fit_caveats(reward_log, result.rom.model, result.rom.values["R_inf"], cut, how)
    data = {**result.to_dict(), "settings": settings.to_dict(), "png": None, "caveats": caveats}
    if plot:
        from pgrpo.cli._mpl import import_quietly  # matplotlib only once the fit succeeded

        plots = import_quietly("pgrpo.dynamics.plots")
        data["png"] = str(plots.plot_log_fit(result, out / "fit.png", _figure_notes(data)))
    data["warnings"] = [*data["warnings"], *settings.warnings]
    emit(data, as_json, lambda console: _print(data, console))


def _figure_notes(data: dict) -> list[str]:
    """What the text says beside the figure that the figure alone does not show: the caveats on
    the fitted level and the band, why the forecast drawn is not informative, why none was made."""
    fc = data.get("forecast") or {}
    why = fc.get("not_informative_because")
    return [n for n in (
        data["caveats"].get("level"),
        data["caveats"].get("band"),
        f"The forecast is not informative: {why}." if why else None,
        f"No forecast: {data['forecast_skipped']}" if data.get("forecast_skipped") else None,
    ) if n]  # fmt: skip


def _print(data: dict, console: Console) -> None:
    print_warnings(data["warnings"], console)
    print_hanging(console, escape(data["reward_column"]), "reward: ")
    robust = data.get("loss", "linear") != "linear"
    loss = f", loss {data['loss']}" if robust else ""
    title = f"fit of {escape(data['log'])} ({data['format']}, {data['n']} points{loss})"
    table = Table(title=title)
    for col in ("model", "R^2", "AIC", "BIC", "parameters (+- stderr)"):
        table.add_column(col, overflow="fold")
    rows = [data, *data["baselines"].values()]
    for r in rows:
        params = ", ".join(_param_text(r, k) for k in r["params"])
        r2, aic, bic = (
            "n/a" if r[k] is None else fmt(r[k], f)
            for k, f in (("r2", ".4f"), ("aic", ".1f"), ("bic", ".1f"))
        )  # None: no variance
        table.add_row(r["model"], r2, aic, bic, params)
    console.print(table)
    if robust:  # a review, session 36: nothing said which loss the table's fits minimised
        console.print(f"loss {data['loss']}: every fit minimised this robust cost; R^2, AIC and "
                      "BIC are computed from the plain residuals, so they rank fits made with "
                      "the same loss, not fits made with another one")  # fmt: skip
    from pgrpo.dynamics.fitquality import legend  # what the models and parameters shown mean

    marks = [m for r in rows for k in r["params"] if (m := _mark(r, k))]
    for line in legend([r["model"] for r in rows], marks):
        console.print(escape(line), style="dim")
    if "r2_undefined" in data["metrics"]:  # said once here, not beside every parameter
        why = "; ".join(data["metrics"].get(k, "") for k in ("r2_undefined", "params_undefined"))
        console.print(f"[yellow]R^2 n/a:[/] {escape(why.strip('; '))}")
    elif (line := _quality_words(data["fit_quality"], data["model"])) is not None:
        console.print(line)
    _runopts.print_settings(data["settings"], console)
    m = data["metrics"]
    if "preferred" in m:  # the closed form with m, c from the optimizer vs the free fit
        interval = m.get("kappa_not_estimated") or f"[{fmt(m['kappa_lo'])}, {fmt(m['kappa_hi'])}]"
        console.print(
            f"constrained (m, c from beta1, K): R^2 {fmt(m['r2_constrained'], '.4f')}, "
            f"AICc - free {fmt(m['delta_aicc'], '.2f')}: {m['preferred']} preferred, "
            f"closed form {m['closed_form']} (p {fmt(m['lr_test_p'], '.2g')}); kappa "
            f"{fmt(m['kappa_constrained'])} {escape(interval)}"
        )
    caveats = data.get("caveats") or {}
    if caveats.get("level"):  # a fall, or a rise above it: R_inf is not where it heads
        console.print(f"[yellow]fit:[/] {escape(caveats['level'])}")
    elif (line := _start_words(data.get("start"))) is not None:  # "the level it heads for"
        console.print(escape(line))
    if data.get("forecast_skipped"):
        console.print(f"[yellow]forecast:[/] {escape(data['forecast_skipped'])}")
    fc = data.get("forecast")
    if fc:
        t = Table(title=f"forecast of the mean after step {fc['cut_step']:g}")
        for col in ("predictor", "predicted mean", "observed mean", "abs error"):
            t.add_column(col)
        how = f"{fc['model']} fit"
        if fc.get("combination"):  # the consensus's members, combined
            how = f"{fc['combination']} of the members" + (
                f": {fc['member']}" if fc.get("member") else ""
            )
        t.add_row(
            f"{escape(fc['method'] or 'forecast')} ({escape(how)}; "
            f"{int(fc['level'] * 100)}% band {fmt(fc['band'][0])}..{fmt(fc['band'][1])})",
            fmt(fc["predicted_mean"]),
            fmt(fc["observed_mean"]),
            fmt(fc["error"]),
        )
        for name, b in fc["baselines"].items():
            label = f"{name} (baseline)"  # `exponential`: its fitted curve's own mean
            t.add_row(label, fmt(b["predicted_mean"]), fmt(fc["observed_mean"]), fmt(b["error"]))
        console.print(t)
        if caveats.get("band"):  # a prefix still rising with no saturation: past the band
            console.print(f"[yellow]band:[/] {escape(caveats['band'])}")
        if fc.get("measured_skill") and fc.get("informative", True):
            from pgrpo.dynamics.forecast import ForecastSkill

            console.print(escape(ForecastSkill(**fc["measured_skill"]).sentence()))
        if not fc.get("informative", True):
            console.print(
                f"[yellow]forecast:[/] {escape(fc['not_informative_because'])}: not enough "
                "evidence to forecast the rest from the points before the cut (the report does "
                "not draw it)"
            )
    if data["png"]:
        console.print(f"figure: {escape(data['png'])}")


def _mark(r: dict, name: str) -> str:
    """'at its bound' (JSON `at_bound`), 'not identified' (`unidentified`) or ''."""
    if name in r.get("at_bound", ()):
        return "at its bound"
    return "not identified" if name in r.get("unidentified", ()) else ""


def _param_text(r: dict, name: str) -> str:
    """`name=value+-stderr`; `name=value (at its bound)` for a parameter the fit left at a
    bound, `name=value (not identified)` for one the data do not fix: neither stderr means
    anything (`fitquality.MARKS`)."""
    text = f"{name}={fmt(r['params'][name])}"
    if mark := _mark(r, name):
        return f"{text} ({mark})"
    err = r["stderr"].get(name)
    return text + (f"+-{fmt(err, '.2g')}" if err is not None else "")


def _quality_words(q: dict, model: str) -> str | None:
    from pgrpo.dynamics.fitquality import quality_words  # the report's wording too

    return quality_words(q, model)


def _start_words(start: dict | None) -> str | None:
    """The `Start:` line from fit's JSON `start` (None where there is none to print)."""
    from pgrpo.dynamics.constrained import StartComparison

    if not start or start.get("preferred") != "free":
        return None
    fields = StartComparison.__dataclass_fields__
    return StartComparison(**{k: start[k] for k in fields}).sentence()
