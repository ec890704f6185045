"""`pgrpo diagnose`'s run checks (costs, gaming, entropy floor, truncation, KL level) and its CI
gate (`--fail-on`), kept out of cli/diagnose.py so that file stays a thin layer.

Gate levels: `fail` = a failure mode is detected with confidence >= FIRM_CONFIDENCE and its rule
does not call it the expected end of the run (evidence `expected_end`: a concentrated policy
beside a reward at or near its ceiling); `warn` = a failure mode is detected at any confidence,
or a run check warns. `--fail-on fail` exits
EXIT_GATE on fail; `--fail-on warn` exits EXIT_GATE on warn or fail; otherwise exit 0.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console

from pgrpo.cli.common import escape, print_rows
from pgrpo.diagnose.verdict import FIRM_CONFIDENCE

FAIL_ON = ("warn", "fail")
EXIT_GATE = 1


def check_options(cost_per_step, cost_per_gpu_hour, gpus, seconds_per_step,  # noqa: ANN001
                  max_points: int = 2000,
                  max_completion_length: int | None = None) -> Any:  # fmt: skip
    from pgrpo.diagnose.checks import CheckOptions

    try:
        return CheckOptions(cost_per_step=cost_per_step, cost_per_gpu_hour=cost_per_gpu_hour,
                            gpus=gpus, seconds_per_step=seconds_per_step,
                            max_points=max_points,
                            max_completion_length=max_completion_length)  # fmt: skip
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def validate_fail_on(value: str | None) -> str | None:
    if value is not None and value not in FAIL_ON:
        raise typer.BadParameter(f"--fail-on must be one of {', '.join(FAIL_ON)}, got {value!r}")
    return value


def print_checks(checks: list[Any], console: Console) -> None:
    colour = {"warn": "[yellow]warn[/yellow]", "ok": "[green]ok[/green]"}
    rows = [[escape(c.name), colour.get(c.status, "n/a"), escape(c.summary)] for c in checks]
    print_rows(console, "run checks", ["check", "status", "finding / missing"], rows, short=2)


def gate_level(diagnosis: Any, checks: list[Any]) -> str:
    """'fail', 'warn' or 'ok' (see the module docstring)."""
    modes = [v for v in diagnosis.modes if v is not diagnosis.healthy and v.detected]
    if any(v.confidence >= FIRM_CONFIDENCE and not v.evidence.get("expected_end") for v in modes):
        return "fail"
    if modes or any(c.status == "warn" for c in checks):
        return "warn"
    return "ok"


def apply_gate(level: str, fail_on: str | None) -> None:
    if fail_on is None or level == "ok" or (fail_on == "fail" and level != "fail"):
        return
    typer.echo(f"gate: {level} (--fail-on {fail_on}): exit {EXIT_GATE}", err=True)
    raise typer.Exit(EXIT_GATE)
