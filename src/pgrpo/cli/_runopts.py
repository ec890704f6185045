"""The run's settings as command-line options, shared by `pgrpo fit` and `pgrpo diagnose`: one
definition of `--lr`, `--beta1`, `--refresh-interval`, `--group-size`, `--batch-prompts`,
`--optimizer`, `--reward-range` (and `--kappa`, diagnose's), and one check of their values. What
is given on the command line overrides the log (`pgrpo.dynamics.settings`)."""

from __future__ import annotations

import math
from typing import Any

import typer

from pgrpo.cli.app import digit_separator
from pgrpo.cli.common import escape, fail, fmt, print_hanging


def group_size_option() -> Any:
    return typer.Option(
        None,
        "--group-size",
        min=1,  # 1: one completion per prompt (a sign advantage, a critic), which a run may
        # use; the degeneracy mode then does not apply (predict, a model of GRPO, needs 2)
        help="G (>= 1), when the log does not say (overrides it); 1: one completion per prompt "
        "(advantage degeneracy does not apply).",
    )


def batch_prompts_option() -> Any:
    return typer.Option(
        None, "--batch-prompts", min=1, help="Prompts per step B, when the log does not say."
    )


def lr_option() -> Any:
    return typer.Option(
        None, "--lr", help="Learning rate (peak), when the log does not say; overrides it."
    )


def refresh_interval_option() -> Any:
    return typer.Option(
        None, "--refresh-interval", min=1, help="K: optimizer steps per rollout batch."
    )


def beta1_option() -> Any:
    return typer.Option(None, "--beta1", help="Momentum beta1, in [0, 1).")


def optimizer_option() -> Any:
    return typer.Option(
        None, "--optimizer", help="adamw (the default when the log names none) or sgd_momentum."
    )


def reward_range_option() -> Any:
    return typer.Option(
        None,
        "--reward-range",
        help="LO,HI: the reward's known bounds (e.g. 0,1 or -1,1), when the log does not say: "
        "fitted levels and forecasts stay inside, an end within 1% of HI is the ceiling, and "
        "means of LO/HI rewards get the binomial tests of 0/1 means.",
    )


def kappa_option() -> Any:
    return typer.Option(
        None, "--kappa", help="Curvature for K* (`pgrpo probe`); default: a fit of the curve."
    )


def format_option() -> Any:
    return typer.Option(None, "--format", help="Force a log reader by name.")


def reward_column_option() -> Any:
    return typer.Option(None, "--reward-column", help="Reward key, when not a standard name.")


def step_column_option() -> Any:
    return typer.Option(
        None,
        "--step-column",
        help="Step key, when not a standard name; @order reads the rows with a reward in file "
        "order as the steps (a step that starts over each epoch, with no epoch column to tell).",
    )


def read_options(reward_column: str | None, step_column: str | None) -> dict[str, str]:
    """read_log's reward_key / step_key from the two options (only those given)."""
    given = (("reward_key", reward_column), ("step_key", step_column))
    return {k: v for k, v in given if v}


def given_settings(**given: Any) -> dict[str, Any]:
    """The run's settings given on the command line (None: not given), checked before the log is
    read: lr and kappa finite and > 0, beta1 in [0, 1), a known optimizer, a reward range
    LO,HI with finite LO < HI (returned as reward_min, reward_max); numbers as floats."""
    out = {k: v for k, v in given.items() if v is not None}
    if "reward_range" in out:
        out["reward_min"], out["reward_max"] = parse_reward_range(out.pop("reward_range"))
    for name in ("lr", "kappa"):
        if name in out and not (math.isfinite(out[name]) and out[name] > 0):
            fail(f"--{name} {out[name]!r} is not a finite number > 0", f"give --{name} > 0")
    if "beta1" in out and not 0 <= out["beta1"] < 1:
        fail(f"--beta1 {out['beta1']!r} is outside [0, 1)", "give the optimizer's beta1")
    if "optimizer" in out:
        from pgrpo.dynamics.optimizers import known_optimizers, run_optimizer

        try:
            run_optimizer(out["optimizer"])
        except ValueError:
            fail(
                f"--optimizer {out['optimizer']!r} has no reduction in the dynamics model",
                f"give one of {known_optimizers()}, or leave --optimizer out: the free fit "
                "needs none",
            )
    return {k: v if k == "optimizer" else float(v) for k, v in out.items()}


def forecast_method(name: str | None, forecast_from: float | None) -> str:
    """`--forecast-method` checked before the log is read: a `forecast.FORECAST_METHODS` name,
    given only with `--forecast-from` (alone it would do nothing); not given: `forecast`'s
    default. Otherwise one line and exit 2."""
    from pgrpo.dynamics.forecast import DEFAULT_METHOD, FORECAST_METHODS

    if name is None:
        return DEFAULT_METHOD
    if name not in FORECAST_METHODS:
        fail(f"--forecast-method {name!r} is not a forecast method",
             f"give one of {', '.join(FORECAST_METHODS.names())}")  # fmt: skip
    if forecast_from is None:
        fail(f"--forecast-method {name} without --forecast-from forecasts nothing",
             "add --forecast-from FRACTION, or leave --forecast-method out")  # fmt: skip
    return name


def parse_reward_range(text: str) -> tuple[float, float]:
    """'LO,HI' -> (lo, hi) (`pgrpo.core.rewardrange.checked_reward_range`); anything else
    is one line and exit 2."""
    from pgrpo.core.rewardrange import checked_reward_range

    try:
        if digit_separator(text):  # float() takes 1_0 as 10: the rule of every number option
            raise ValueError(text)
        return checked_reward_range(text.split(","))
    except ValueError:
        fail(f"--reward-range {text!r} is not LO,HI with finite LO < HI",
             "give the reward's bounds, e.g. --reward-range 0,1")  # fmt: skip


def print_settings(settings: dict, console: Any) -> None:
    """One line: each known setting with its source; then the notes (assumptions, and why the
    closed form was not fitted)."""
    parts = [
        f"{name} {fmt(value)} ({settings['sources'][name]})"
        for name, value in settings["values"].items()
        if value is not None
    ]
    console.print("settings: " + (escape(", ".join(parts)) if parts else "none known"))
    for note in settings["notes"]:
        print_hanging(console, f"[dim]{escape(note)}[/dim]", indent=2)


def resolved_settings(run: Any, given: dict[str, Any]) -> dict[str, Any]:
    """The `settings` object `pgrpo fit` reports (`pgrpo.dynamics.settings.resolve_settings`)
    for `run` and the command line's settings: JSON-ready."""
    from pgrpo.dynamics.settings import resolve_settings

    return resolve_settings(run, given)[1].to_dict()
