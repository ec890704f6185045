"""`pgrpo diagnose LOG [--eval-log LOG] [--json]`: which failure mode a run is in, and the fix."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from pgrpo.cli import _runopts
from pgrpo.cli.common import (
    command,
    config_option,
    emit,
    escape,
    existing,
    fail,
    json_option,
    print_hanging,
    print_rows,
    print_warnings,
    read_text,
)

CHECKS = "pgrpo.diagnose.checks:CheckOptions"


def _fmt_evidence(evidence: dict[str, Any], limit: int = 6) -> str:
    """The first `limit` figures (a `reason` first: why a mode could not be judged), and how many
    more `--json` holds (the table cut them silently before 2026-12-04)."""
    items = sorted(evidence.items(), key=lambda kv: kv[0] != "reason")
    parts = []
    for key, value in items[:limit]:
        if isinstance(value, float):
            value = "-" if not math.isfinite(value) else f"{value:.3g}"
        parts.append(f"{key}={value}")
    if len(items) > limit:
        parts.append(f"... {len(items) - limit} more in --json")
    return escape(", ".join(parts))


def load_log(path: Path, log_format: str | None, **options: str) -> Any:
    """The run's RewardLog; a pgrpo run directory means its metrics.jsonl, any other directory
    goes to read_log (a TRL output dir holds trainer_state.json). options: read_log's
    reward_key / step_key."""
    from pgrpo.logs import read_log

    existing(path, "log", "a log file or a run directory")
    if path.is_dir() and (path / "metrics.jsonl").is_file():
        path = path / "metrics.jsonl"
    return read_log(path, format=log_format, **options)


def eval_points(path: Path, option: str = "--eval-log") -> tuple[tuple[float, float, float], ...]:
    """(step, accuracy, standard error) of a `pgrpo eval` JSON or a JSONL file (the error NaN
    where a record says nothing of its size), or a UserError naming it."""
    from pgrpo.diagnose.signals import read_eval_records

    read_text(path, option)  # exists, a file, UTF-8
    try:
        points, se = read_eval_records(path)
        return tuple((s, a, e) for (s, a), e in zip(points, se, strict=True))
    except json.JSONDecodeError as exc:
        fail(
            f"{option} {path} is neither a `pgrpo eval` JSON nor JSONL ({exc.msg} at line "
            f"{exc.lineno})",
            "give the file `pgrpo eval --out` wrote",
        )
    except (TypeError, KeyError, AttributeError) as exc:
        fail(f"{option} {path}: unexpected eval records ({exc})", "give a `pgrpo eval` JSON")
    except ValueError as exc:  # e.g. counts outside 0 <= c <= n, as `pgrpo eval --from` refuses
        text = str(exc) if str(path) in str(exc) else f"{path}: {exc}"
        fail(f"{option} {text}", "give the file `pgrpo eval --out` wrote")


def found_eval_log(run_dir: Path) -> Path | None:
    """`pgrpo.diagnose.signals.found_eval_log`, its warning printed."""
    from pgrpo.diagnose.signals import found_eval_log as found

    path, why = found(run_dir)
    if why:
        typer.echo(f"warning: {why}", err=True)
    return path


@command("diagnose")
def diagnose_cmd(
    log: Path = typer.Argument(..., help="Training log (pgrpo/TRL/verl/W&B/CSV) or run directory."),
    eval_log: Path | None = typer.Option(
        None,
        "--eval-log",
        help="`pgrpo eval` JSON (or step/accuracy JSONL) of the same run; its sizes "
        "(n_problems, accuracy_ci, per-problem counts) tell an eval change from noise.",
    ),
    log_format: str | None = _runopts.format_option(),
    reward_column: str | None = _runopts.reward_column_option(),
    step_column: str | None = _runopts.step_column_option(),
    as_json: bool = json_option("the diagnosis, run checks and settings"),
    group_size: int | None = _runopts.group_size_option(),
    batch_prompts: int | None = _runopts.batch_prompts_option(),
    lr: float | None = _runopts.lr_option(),
    refresh_interval: int | None = _runopts.refresh_interval_option(),
    beta1: float | None = _runopts.beta1_option(),
    optimizer: str | None = _runopts.optimizer_option(),
    reward_range: str | None = _runopts.reward_range_option(),
    kappa: float | None = _runopts.kappa_option(),
    fail_on: str | None = typer.Option(
        None,
        "--fail-on",
        help="CI gate: exit 1 on 'fail' (a mode detected, confidence >= 0.5) "
        "or on 'warn' (also: any mode detected, any run check warning). Default: always exit 0.",
    ),
    cost_per_step: float | None = config_option(CHECKS, "cost_per_step", "--cost-per-step"),
    cost_per_gpu_hour: float | None = config_option(
        CHECKS, "cost_per_gpu_hour", "--cost-per-gpu-hour"
    ),
    gpus: int = config_option(CHECKS, "gpus", "--gpus"),
    seconds_per_step: float | None = config_option(
        CHECKS, "seconds_per_step", "--seconds-per-step"
    ),
    max_points: int = config_option(CHECKS, "max_points", "--max-points", min=20),
    max_completion_length: int | None = config_option(
        CHECKS, "max_completion_length", "--max-completion-length"
    ),
) -> None:
    """Say whether the run is learning (learning / plateau / flat / declining / saturated /
    collapsed / too_short) and detect reward hacking, advantage degeneracy, policy concentration
    and dynamical instability from whatever columns the log has; say which signal is missing
    otherwise. Run checks: zero-gradient steps, wasted compute (priced), verifier gaming,
    entropy floor, completions cut at the length limit. Exit codes: 0; 1 when --fail-on trips;
    2 bad input."""
    from pgrpo.cli import _checks
    from pgrpo.diagnose import diagnose
    from pgrpo.diagnose.checks import run_checks

    if eval_log is None:
        eval_log = found_eval_log(log)
    _checks.validate_fail_on(fail_on)
    opts = _checks.check_options(
        cost_per_step, cost_per_gpu_hour, gpus, seconds_per_step, max_points, max_completion_length
    )
    from pgrpo.dynamics.settings import with_given

    given = _runopts.given_settings(
        group_size=group_size, batch_prompts=batch_prompts, lr=lr,
        refresh_interval=refresh_interval, beta1=beta1, kappa=kappa, optimizer=optimizer,
        reward_range=reward_range,
    )  # fmt: skip
    if eval_log is not None:
        eval_points(eval_log)  # a bad file: one line naming it, exit 2
    logged = load_log(log, log_format, **_runopts.read_options(reward_column, step_column))
    run = with_given(logged, given)
    if max_completion_length is not None:  # the degeneracy rule reads it too (its action)
        hyper = {**run.hyperparameters, "max_completion_length": float(max_completion_length)}
        run = replace(run, hyperparameters=hyper)
    # the path itself: the diagnosis also pairs the first and last evals by problem
    result = diagnose(run, eval_log=eval_log, max_points=max_points)
    checks = run_checks(run, opts)
    level = _checks.gate_level(result, checks)
    data = {**result.to_dict(), "checks": [c.to_dict() for c in checks], "gate": level}
    data.update(reward_key=run.reward_key, reward_column=run.reward_read)  # which was read
    data["settings"] = _runopts.resolved_settings(logged, given)
    # what the reader repaired, and what the data contradicts in the settings given
    data["warnings"] = [*getattr(run, "warnings", ()), *data["settings"]["warnings"]]
    if (note := _binomial_hint(result, data["settings"]["values"], run)) is not None:
        data["settings"]["notes"].append(note)

    def render(console: Console) -> None:
        _print(result, checks, log, console, data["warnings"], data["reward_column"])
        _runopts.print_settings(data["settings"], console)

    emit(data, as_json, render)
    _checks.apply_gate(level, fail_on)


def _binomial_hint(result: Any, values: dict, run: Any) -> str | None:
    """A note when the reward tests fell back on AR(1) noise because the group and batch sizes
    are unknown: for a reward in [0, 1], as a mean of 0/1 rewards it would be judged against
    binomial batch means, which know more (cs336 off-policy e16 reads 'flat' without them and
    'collapsed' with them; review, 2026-12-04); for any other reward, against independent batch
    noise (`nullmodel.choose_null`; round 6's short partial-credit rises read 'flat' without)."""
    import numpy as np

    ev = result.progress.evidence if result.progress is not None else {}
    r = np.asarray(run.reward, dtype=float)
    r = r[np.isfinite(r)]
    known = values.get("group_size") and values.get("batch_prompts")
    if known or not str(ev.get("null_model", "")).startswith("AR(1)") or not r.size:
        return None
    if r.min() < 0 or r.max() > 1:  # not a 0/1 mean: stated sizes make the steps independent
        return ("the reward tests used AR(1) noise at a bound on its autocorrelation "
                "(group_size and batch_prompts unknown), which on a short run can absorb a real "
                "rise; if each step scores fresh rollouts, give --group-size and --batch-prompts: "
                "the tests then take the steps' noise as independent")  # fmt: skip
    return ("the reward tests used AR(1) noise (group_size and batch_prompts unknown); if the "
            "reward is a mean of 0/1 rewards, give --group-size and --batch-prompts: binomial "
            "batch means know more (e.g. how long a stay at 0 can last by chance)")  # fmt: skip


def _print(
    result: Any, checks: list[Any], log: Path, console: Console, warnings: list[str], reward: str
) -> None:
    console.print(f"[bold]diagnosis of[/bold] {escape(log)}")
    print_hanging(console, escape(reward), "reward: ")
    print_warnings(warnings, console)
    m = result.metrics
    if m.get("bin_steps", 1) > 1:
        console.print(
            f"{m['steps']:.0f} logged steps analysed as {m['analysed_points']:.0f} means of "
            f"{m['bin_steps']:.0f} consecutive steps (--max-points)"
        )
    for item in result.findings():
        print_hanging(console, escape(item["sentence"]), "- ")
        if item["action"]:
            print_hanging(console, escape(item["action"]), "[bold]action:[/bold] ", indent=2)
    rows = []
    for v in result.modes:
        note = v.action or ("missing: " + "; ".join(v.missing) if v.missing else "")
        mark = (
            "[red]yes[/red]"
            if v.detected and v is not result.healthy
            else ("[green]yes[/green]" if v.detected else "no")
        )
        rows.append([v.name, mark, f"{v.confidence:.2f}", _fmt_evidence(v.evidence), escape(note)])
    columns = ["mode", "detected", "conf.", "evidence", "action / missing"]
    print_rows(console, "evidence", columns, rows, short=3)
    from pgrpo.cli import _checks

    _checks.print_checks(checks, console)
