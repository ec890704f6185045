"""The typer application every subcommand module registers on.

Usage errors (an unknown option or command, a value of the wrong type or out of range, a missing
argument) end with one line on stderr, `error: <problem>; run '<command> --help' for the
options`, and exit code 2, like every other input error of the CLI (docs/cli.md). typer's help
(`--help`, and `pgrpo` alone) is unchanged.
"""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer.core import TyperGroup

from pgrpo import __version__

# click's exception classes as this typer uses them (typer >= 0.29 vendors click as typer._click;
# older ones use click): BadParameter derives from UsageError, UsageError from ClickException
_USAGE_ERROR: type[Exception] = typer.BadParameter.__bases__[0]
_CLICK_ERROR: type[Exception] = _USAGE_ERROR.__bases__[0]
_NO_ARGS_IS_HELP = getattr(sys.modules[_USAGE_ERROR.__module__], "NoArgsIsHelpError", ())


class OneLineErrors(TyperGroup):
    """typer's group, with click's usage errors printed as one `error:` line (the rich box
    typer draws spans 5 lines and hides the fix): the errors of the group's own arguments
    (`make_context`) and those of a subcommand's (raised inside `invoke`) alike."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except _CLICK_ERROR as exc:
            _one_line(exc)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _CLICK_ERROR as exc:
            _one_line(exc, f"{ctx.command_path} {ctx.invoked_subcommand or ''}".strip())


def _one_line(exc: Any, where: str = "") -> Any:
    """Print click's exception `exc` as one line and exit with its code; `pgrpo` with no
    arguments (click's NoArgsIsHelpError, which prints the help) is left to click."""
    if isinstance(exc, _NO_ARGS_IS_HELP):
        raise exc
    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else where or "pgrpo"
    message = " ".join(exc.format_message().split())
    if isinstance(exc, _USAGE_ERROR):
        message = f"{message.rstrip('.')}; run '{where} --help' for the options"
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(exc.exit_code)


app = typer.Typer(
    name="pgrpo",
    cls=OneLineErrors,
    help="Predictable GRPO: train, fit, forecast and diagnose GRPO runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"pgrpo {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Predictable GRPO: train, fit, forecast and diagnose GRPO runs."""
