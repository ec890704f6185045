"""The typer application every subcommand module registers on.

Usage errors (an unknown option or command, a value of the wrong type or out of range, a missing
argument) end with one line on stderr, `error: <problem>; run '<command> --help' for the
options`, and exit code 2, like every other input error of the CLI (docs/cli.md). Every number
option refuses `_` (`--lr 1_000`), and an option given twice is refused (`--lr 1 --lr 2`:
`PgrpoCommand`). typer's help (`--help`, and `pgrpo` alone) is
unchanged, but for flags, which show no `<bool>` value.
"""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

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

    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_without_type(super().get_params(ctx))  # `pgrpo --help`: --version, --help


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


def digit_separator(text: str) -> bool:
    """Whether a number's text holds `_`: Python's float() and int() read `1_000` as 1000 and
    `1_0` as 10 (PEP 515), a number no one means to type; every numeric option refuses it."""
    return "_" in text


_NUMBER_TYPES = frozenset({"integer", "float", "integer range", "float range"})
"""click's names of its int / float types (with or without min / max)."""


def _is_number(param: Any) -> bool:
    """Whether an option or argument takes an int or a float (typer >= 0.29 converts by the
    annotation, older ones through click's types)."""
    desc = getattr(param, "type_descriptor", None)
    if desc is not None:
        return desc.annotation in (int, float)
    return getattr(getattr(param, "type", None), "name", None) in _NUMBER_TYPES


def refuse_repeats(ctx: Any, order: list[Any]) -> None:
    """UsageError when an option that takes one value is given twice (`--lr 1 --lr 2`, `-c a -c
    b`, `--plot --no-plot`): click keeps the last without a word. `order` is click's parser's
    list of the parameters in the order met, one entry per occurrence."""
    seen = set()
    for param in order:
        if param.param_type_name != "option" or param.multiple or param.count or param.is_eager:
            continue
        if param.name in seen:
            names = "/".join([*param.opts, *param.secondary_opts])
            raise _USAGE_ERROR(f"option {names} given twice: give it once", ctx=ctx)
        seen.add(param.name)


class PgrpoCommand(TyperCommand):
    """typer's command with three rules for every option of every subcommand (`common.command`
    registers each with this class): an option given twice is refused (`refuse_repeats`), a
    number written with `_` (`--lr 1_000`) is refused (`digit_separator`) before any
    conversion, and a flag (`--json`, `--plot/--no-plot`, which
    take no value) shows no `<bool>` value type in --help."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        opts, _, order = self.make_parser(ctx).parse_args(args=list(args))  # the raw texts
        refuse_repeats(ctx, order)
        for param in self.get_params(ctx):
            if not _is_number(param):
                continue
            raw = opts.get(param.name)
            for text in raw if isinstance(raw, list | tuple) else [raw]:
                if isinstance(text, str) and digit_separator(text):
                    plain = text.replace("_", "")
                    raise typer.BadParameter(
                        f"{text!r} holds '_', which Python's number parser skips (it would "
                        f"read {plain}); write {plain} if that is the number you mean",
                        ctx=ctx,
                        param=param,
                    )
        return super().parse_args(ctx, args)

    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_without_type(super().get_params(ctx))


def _flags_without_type(params: list[Any]) -> list[Any]:
    """params, with no value type drawn for a flag: typer draws a flag's as `<bool>`, while a
    flag takes no value (the subcommands' since 2026-12-02, the group's own since session 37)."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


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
