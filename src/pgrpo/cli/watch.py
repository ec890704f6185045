"""`pgrpo watch LOG`: follow a growing training log (pgrpo, TRL, verl, W&B CSV, TensorBoard) and
print a live line per assessment; touch `--stop-file` and exit 3 when a stop rule holds.

Exit codes: 0 the watch ended (--once, --timeout, --idle) with no stop condition; 3 a stop
condition held (plateau, collapse or degeneracy, as chosen with --stop-on); 2 bad input.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import typer

from pgrpo.cli import _runopts
from pgrpo.cli.common import command, config_option, fail, json_option

EXIT_STOP = 3
LIVE = "pgrpo.diagnose.live:LiveConfig"


def _f(metrics: dict[str, float], key: str, spec: str = ".3g") -> str:
    value = metrics.get(key)
    return "-" if value is None or not math.isfinite(value) else format(value, spec)


def status_line(status, log) -> str:  # noqa: ANN001
    """step, reward, recent level, forecast plateau [band], steps to 90% (or why the forecast is
    withheld), verdict ("plateau (not confirmed)" while its bound does not say the rise has
    stopped), alerts."""
    m = status.metrics
    shown = (
        f"forecast {_f(m, 'pgrpo/forecast_plateau')} "
        f"[{_f(m, 'pgrpo/forecast_lo')}, {_f(m, 'pgrpo/forecast_hi')}]  "
        f"to90 {_f(m, 'pgrpo/steps_to_90', '.0f')}"
    )
    if m.get("pgrpo/forecast_withheld") == 1.0:  # its level is not where the verdict says
        from pgrpo.diagnose.fitwords import WITHHELD

        shown = (
            f"forecast withheld ({WITHHELD['below' if status.verdict == 'learning' else 'fell']})"
        )
    text = (
        f"step {status.step:g}  reward {status.reward:.3g}  level {_f(m, 'pgrpo/level')}  "
        f"{shown}  verdict {status.verdict}"
    )
    if m.get("pgrpo/plateau_stopped") == 0.0:  # "probably plateaued": no plateau stop by default
        text += " (not confirmed)"
    if "pgrpo/degeneracy" in m:
        text += f"  degenerate {_f(m, 'pgrpo/degeneracy', '.2f')}"
    return text + (f"  alerts {','.join(status.alerts)}" if status.alerts else "")


def _stop_rules(value: str) -> tuple[str, ...]:
    from pgrpo.diagnose.live import STOP_RULES

    names = [r.strip() for r in value.split(",") if r.strip()]
    hint = f"use a comma list of {', '.join(STOP_RULES)}, or 'none' alone for no stop"
    if names == ["none"]:
        return ()
    bad = [r for r in names if r not in STOP_RULES]
    if bad or not names:  # '' (an unset variable in a launcher) is no rule, not 'none'
        if "none" in names:
            what = f"'none' names no rule and cannot be listed with others in {value!r}"
        else:
            what = f"unknown stop rule(s) {', '.join(bad)}" if bad else f"no stop rule in {value!r}"
        raise typer.BadParameter(f"{what}; {hint}", param_hint="--stop-on")
    return tuple(names)


def _check_stop_file(path: Path, log: Path) -> None:
    """Before watching: the stop file is not the watched log nor in the watched folder, and
    can be made (its nearest existing folder is a writable folder), so a stop condition is
    not lost to a bad path at the end."""
    stop, watched = path.resolve(), log.resolve()
    if stop == watched or watched in stop.parents:  # an earlier-marker removal deleted the log
        # itself (a hostile review, session 41); LOG may not exist yet, so a path under it is
        # taken as inside the folder it may become
        where = "is the watched log" if stop == watched else f"lies inside the watched {log}"
        fail(f"--stop-file {path} {where}",
             "give a path outside the log and its run folder, e.g. next to it")  # fmt: skip
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if path.is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK):
        fail(f"--stop-file {path} cannot be written (in {folder})",
             "give a file path in a folder you can write to")  # fmt: skip
    if folder != path.parent:  # a mistyped folder would be made silently, and a launcher
        # polling the intended path would never see the file (a hostile user's review)
        typer.echo(f"note: --stop-file's folder {path.parent} does not exist yet; it is made "
                   "when a stop rule holds", err=True)  # fmt: skip


def _remove_old_marker(path: Path) -> None:
    """An empty regular file at the stop path, the marker an earlier watch touched, is removed
    (a loop that polls it would stop now); anything else there is refused, not deleted: the
    watch writes no content, so a file with content, a link or a device is not its marker."""
    if not path.exists() and not path.is_symlink():
        return
    if path.is_symlink() or not path.is_file():
        fail(f"--stop-file {path} exists and is not a regular file",
             "give a new path, or remove it yourself if it is an old marker")  # fmt: skip
    if path.stat().st_size > 0:
        fail(f"--stop-file {path} exists and is not empty, so it is not a marker a watch left",
             "give a new path, or remove it yourself if it is an old marker")  # fmt: skip
    path.unlink()
    typer.echo(f"note: removed {path}, left by an earlier watch; it is touched again when a "
               "stop rule holds", err=True)  # fmt: skip


@command("watch")
def watch_cmd(
    log: Path = typer.Argument(..., help="Log file or run directory; may not exist yet."),
    stop_on: str = typer.Option(
        "plateau,collapse,degeneracy", "--stop-on", help="Comma list of stop rules, or 'none'."
    ),
    stop_file: Path | None = typer.Option(
        None, "--stop-file", help="File touched when a stop rule holds (for your launcher)."
    ),
    confidence: float = config_option(LIVE, "confidence", "--confidence"),
    min_points: int = config_option(LIVE, "min_points", "--min-points"),
    patience: int = config_option(LIVE, "patience", "--patience"),
    plateau_patience: int = config_option(LIVE, "plateau_patience", "--plateau-patience"),
    plateau_confirmed: bool = config_option(
        LIVE, "plateau_confirmed", "--plateau-confirmed/--plateau-any"
    ),
    every: int = typer.Option(5, "--every", help="Assess every N new logged points."),
    poll: float = typer.Option(2.0, "--poll", help="Seconds between reads of the log."),
    timeout: float | None = typer.Option(None, "--timeout", help="Stop watching after S s."),
    idle: float | None = typer.Option(None, "--idle", help="Stop when the log is idle for S s."),
    once: bool = typer.Option(False, "--once", help="Assess the log as it is now and exit."),
    log_format: str | None = _runopts.format_option(),
    reward_column: str | None = _runopts.reward_column_option(),
    step_column: str | None = _runopts.step_column_option(),
    as_json: bool = json_option("each assessment"),
    reward_range: str | None = _runopts.reward_range_option(),
    group_size: int | None = _runopts.group_size_option(),
    batch_prompts: int | None = _runopts.batch_prompts_option(),
) -> None:
    """Follow LOG, print step / reward / forecast / verdict live; exit 3 on a stop condition
    (0 when the watch ends without one, 2 on bad input). verl: point it at the file logger's
    JSONL or the console log; TRL: prefer `PgrpoCallback` (trainer_state.json is written only
    at checkpoints)."""
    from pgrpo.diagnose.live import LiveConfig, unsaid
    from pgrpo.diagnose.watch import watch_log

    bounds = None if reward_range is None else _runopts.parse_reward_range(reward_range)
    # G and B as `pgrpo diagnose` takes them: without them a mean of 0/1 rewards is tested
    # against AR(1) noise, and a watch read a collapse `flat` that diagnose, given the sizes,
    # read `collapsed` (a hostile user's review, session 35)
    given = _runopts.given_settings(group_size=group_size, batch_prompts=batch_prompts)
    try:
        config = LiveConfig(
            confidence=confidence,
            min_points=min_points,
            patience=patience,
            plateau_patience=plateau_patience,
            plateau_confirmed=plateau_confirmed,
            stop_on=_stop_rules(stop_on),
            reward_range=bounds,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    if every < 1 or poll <= 0:
        raise typer.BadParameter("--every must be >= 1 and --poll > 0")
    if log_format is not None:
        from pgrpo.logs import LOG_READERS

        try:
            LOG_READERS.get(log_format)
        except KeyError as exc:
            raise typer.BadParameter(str(exc), param_hint="--format") from None
    if stop_file is not None:
        _check_stop_file(stop_file, log)
        _remove_old_marker(stop_file)

    told: dict[str, str] = {}  # the assessment's warnings: each said once, withdrawn once
    repairs: dict[str, str] = {}  # the reader's: each kind once (`unsaid`)

    def show(status, reward_log) -> None:  # noqa: ANN001
        warned = [*reward_log.warnings, *status.warnings]  # the reader's, the assessment's
        said = unsaid(reward_log.warnings, repairs, withdraw=False) + unsaid(status.warnings, told)
        for w in said:
            typer.echo(f"warning: {w}", err=True)
        if as_json:
            typer.echo(json.dumps({"step": status.step, "reward": status.reward,
                                   "verdict": status.verdict, "summary": status.summary,
                                   "alerts": list(status.alerts), "warnings": warned,
                                   **status.metrics}, allow_nan=False))  # fmt: skip
        else:
            typer.echo(status_line(status, reward_log))

    def note(text: str) -> None:  # the log restarted, was cut back or rewritten
        if once and text.startswith("waiting"):  # --once reads once: the error line says it
            return
        typer.echo(f"note: {log}: {text}", err=True)

    opts = _runopts.read_options(reward_column, step_column)
    result = watch_log(log, config, log_format=log_format, read_options=opts, given=given,
                       every=every, poll_s=poll, timeout_s=timeout, idle_s=idle, once=once,
                       on_status=show, on_note=note)  # fmt: skip
    if result.ended == "error":
        fix = "" if ";" in str(result.error) else "; check the path and --format"
        typer.echo(f"error: {result.error}{fix}", err=True)
        raise typer.Exit(2)
    if result.ended == "stop":
        if stop_file is not None:
            stop_file.parent.mkdir(parents=True, exist_ok=True)
            stop_file.touch()
        where = f"; touched {stop_file}" if stop_file is not None else ""
        typer.echo(f"stop: {result.status.reason} at step {result.status.step:g}{where}", err=True)
        typer.echo(result.status.summary, err=True)
        raise typer.Exit(EXIT_STOP)
    typer.echo(f"watch ended ({result.ended}) after {result.points} logged rows, no stop condition",
               err=True)  # fmt: skip
    pending = [] if result.status is None else [r for r in result.status.alerts
                                                if r in config.stop_on]  # fmt: skip
    if pending:  # an alert shown beside "no stop": say why (a hostile user's review, session 35)
        from pgrpo.diagnose.live import rule_patience

        needs = ", ".join(f"{r} {rule_patience(config, r)}" for r in pending)
        typer.echo(f"note: the last assessment raised {', '.join(pending)}, but a stop needs the "
                   f"alert on consecutive assessments ({needs}; one every {every} logged rows): "
                   "not yet held long enough", err=True)  # fmt: skip
    st = result.status
    withheld = st is not None and st.verdict == "flat" and "flat" not in st.alerts
    if withheld and "flat" in config.stop_on:  # `live._decide`: a possible rise
        typer.echo("note: the verdict is flat with a possible rise (below), which does not raise "
                   "the flat stop: it waits for a flat verdict without one", err=True)  # fmt: skip
    if result.status is not None and result.status.summary:  # why not, e.g. "Probably plateaued"
        typer.echo(result.status.summary, err=True)
