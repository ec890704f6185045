"""`pgrpo report RUN_DIR`: one self-contained HTML page with the run's plots and diagnosis."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from pgrpo.cli import _runopts
from pgrpo.cli.common import (
    command,
    emit,
    escape,
    existing,
    json_option,
    out_dir,
    print_hanging,
    print_warnings,
    read_json,
    removed_if_failed,
)
from pgrpo.cli.diagnose import eval_points, found_eval_log


@command("report")
def report_cmd(
    run_dir: Path = typer.Argument(..., help="Run directory (metrics.jsonl) or a log file."),
    out: Path | None = typer.Option(
        None,
        help="Output folder (default RUN_DIR/report; for a log file, report-<name> beside it).",
    ),
    eval_log: Path | None = typer.Option(None, "--eval-log", help="`pgrpo eval` JSON."),
    as_json: bool = json_option("the report's files, diagnosis, fit and forecast"),
    lr: float | None = _runopts.lr_option(),
    beta1: float | None = _runopts.beta1_option(),
    refresh_interval: int | None = _runopts.refresh_interval_option(),
    group_size: int | None = _runopts.group_size_option(),
    batch_prompts: int | None = _runopts.batch_prompts_option(),
    optimizer: str | None = _runopts.optimizer_option(),
    reward_range: str | None = _runopts.reward_range_option(),
    kappa: float | None = _runopts.kappa_option(),
    log_format: str | None = _runopts.format_option(),
    reward_column: str | None = _runopts.reward_column_option(),
    step_column: str | None = _runopts.step_column_option(),
) -> None:
    """Reward with fit and forecast band, degeneracy vs i.i.d. prediction, entropy, KL, lengths,
    stability margin K/K*, the diagnosis and the eval tables, in one HTML file plus PNGs. The
    run's settings options are fit's and diagnose's: the page says where each came from."""
    from pgrpo.logs.readers import check_log_folder
    from pgrpo.report import build_report

    existing(run_dir, "RUN_DIR", "a run directory or a log file")
    given = _runopts.given_settings(
        lr=lr, beta1=beta1, refresh_interval=refresh_interval, group_size=group_size,
        batch_prompts=batch_prompts, optimizer=optimizer, kappa=kappa, reward_range=reward_range,
    )  # fmt: skip
    check_log_folder(run_dir)  # before out_dir creates RUN_DIR/report in a folder with no log
    if out is None:
        # a log file: its own folder, so that two logs side by side (W&B exports) do not
        # overwrite each other's report (review, 2026-12-05)
        out = run_dir / "report" if run_dir.is_dir() else run_dir.parent / f"report-{run_dir.stem}"
    if eval_log is None:
        eval_log = found_eval_log(run_dir)
    if eval_log is not None:  # checked here so a bad file is named, not a JSON parser's message
        read_json(eval_log, "--eval-log")
        eval_points(eval_log)
    with removed_if_failed(out):  # an unreadable log leaves no empty report folder behind
        read = _runopts.read_options(reward_column, step_column)
        res = build_report(run_dir, out_dir=out_dir(out), eval_log=eval_log, settings=given,
                           log_format=log_format, read_options=read)  # fmt: skip
    doc = {
        "html": str(res.html_path),
        "pngs": {k: str(v) for k, v in res.pngs.items()},
        "missing": res.missing,
        **(res.diagnosis.to_dict() if res.diagnosis is not None else {}),
        "fit": _fit_doc(res.fit),
        "forecast": _forecast_doc(res.forecast, bool(res.metrics.get("forecast_drawn"))),
        "fit_notes": list(res.fit_notes),
        "caveats": dict(res.caveats),  # the fit's level, the band: what the verdict says of them
        # what the reader repaired and what the data contradicts in the settings given, as
        # fit and diagnose say
        "warnings": [*res.warnings, *(res.settings.warnings if res.settings else ())],
        "reward_column": res.reward_column,  # which column was read, in words
        "settings": res.settings.to_dict() if res.settings is not None else None,
    }
    emit(doc, as_json, lambda console: _print(res, console))


def _fit_doc(fit: Any) -> dict[str, Any] | None:
    """The whole-curve fit the page draws and states (None when it failed)."""
    if fit is None:
        return None
    m = {k: v for k, v in fit.metrics.items() if isinstance(v, int | float | str)}
    return {"model": fit.model, "r2": fit.r2, "params": fit.values, "metrics": m}


def _forecast_doc(fc: Any, drawn: bool) -> dict[str, Any] | None:
    """The backtest forecast as the page states it (None when it failed); informative: the
    page draws it (else it says "not enough evidence", with `not_informative_because`)."""
    from pgrpo.dynamics.forecast import uninformative_reason

    if fc is None:
        return None
    return {
        "informative": drawn,
        "not_informative_because": None if drawn else uninformative_reason(fc),
        "cut_step": fc.cut_step,
        "predicted_mean": fc.predicted_mean,
        "band": list(fc.mean_band),
        "level": fc.level,
        "observed_mean": fc.observed_mean,
    }


def _print(res: Any, console: Console) -> None:
    given = () if res.settings is None else res.settings.warnings  # the data against them
    print_warnings([*res.warnings, *given], console)
    console.print(f"report: {escape(res.html_path)}")
    print_hanging(console, escape(res.reward_column), "reward: ")
    if res.settings is not None:
        _runopts.print_settings(res.settings.to_dict(), console)
    for name, why in res.missing.items():
        print_hanging(console, f"[dim]{escape(name)} not shown: {escape(why)}[/dim]", indent=2)
