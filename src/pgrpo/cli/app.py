"""The typer application every subcommand module registers on."""

from __future__ import annotations

import typer

from pgrpo import __version__

app = typer.Typer(
    name="pgrpo",
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
