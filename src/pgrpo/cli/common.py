"""What every command shares: one way to fail on bad input, to print JSON and to print tables.

- `@command("name")` registers a subcommand and turns any input error it raises into one line on
  stderr, `error: <problem>; <fix>`, with exit code 2 and no traceback (`PGRPO_DEBUG=1` shows the
  traceback). Bugs (exceptions that are not input errors) still raise.
- `fail(problem, fix)` raises the typed `pgrpo.errors.UserError`; library code raises it too.
- `escape(x)` makes a path or user string print as itself inside rich markup (`exp[lr=1e-5]`).
- `emit(data, as_json, render)` prints `data` as strict JSON or calls `render(console)`;
  `json_option(what)` is the `--json` flag of every command, `print_warnings` the reader's notes.
- `out_dir(path, option)` / `out_file(path, option)` check an output location before any work, so
  a bad `--out` costs nothing.
- `config_option("pgrpo.module:Config", "field", "--flag")` is a typer option whose default and
  help are the config dataclass field's own (one source of defaults), read without importing it.
"""

from __future__ import annotations

import ast
import contextlib
import errno
import functools
import inspect
import json
import math
import os
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape as _rich_escape

from pgrpo.cli._models import check_model  # noqa: F401 (re-exported)
from pgrpo.cli.app import PgrpoCommand, app
from pgrpo.errors import RunFailed, UserError

F = TypeVar("F", bound=Callable[..., Any])
DEBUG_ENV = "PGRPO_DEBUG"
_MAX_CHARS = 600

# RuntimeError texts that mean bad settings, not a bug: (substring, problem, fix)
_KNOWN_RUNTIME = (
    (
        "probability tensor contains",
        "sampling met NaN/inf token probabilities: the policy's weights diverged",
        "lower optim.lr (and keep optim.max_grad_norm > 0); finished steps and checkpoints stay",
    ),
    (
        "DefaultCPUAllocator: can't allocate memory",
        "out of memory",
        "lower grpo.batch_prompts, grpo.group_size, generation.max_new_tokens or micro_batch_size",
    ),
)


def fail(problem: str, fix: str = "") -> NoReturn:
    """Stop the command: `problem` says what is wrong (plain text), `fix` what to do."""
    raise UserError(problem, fix)


def escape(value: Any) -> str:
    """str(value) safe to interpolate into rich markup (`[...]` prints as itself)."""
    return _rich_escape(str(value))


def one_line(text: str) -> str:
    """Whitespace collapsed to single spaces, cut at _MAX_CHARS."""
    text = " ".join(str(text).split())
    return text if len(text) <= _MAX_CHARS else text[: _MAX_CHARS - 3] + "..."


def _os_message(exc: OSError) -> str:
    """What went wrong with a path, and the fix."""
    where = exc.filename if exc.filename is not None else ""
    if exc.filename2 is not None:
        where = f"{where} -> {exc.filename2}"
    if exc.errno is None:  # e.g. transformers' "not a valid model identifier" OSError
        return str(exc)
    if exc.errno == errno.ENOSPC:
        return f"no space left on the device holding {where}; free space or write elsewhere"
    fixes = {
        errno.ENOENT: "no such file or directory; check the path",
        errno.ENOTDIR: "a part of this path is a file, not a folder; give a folder path",
        errno.EEXIST: "exists and is a file, not a folder; give a folder path or move the file",
        errno.EISDIR: "is a folder; give a file path",
        errno.EACCES: "permission denied; choose a path you may read/write",
        errno.EROFS: "read-only file system; write elsewhere",
    }
    return f"{where}: {fixes.get(exc.errno, exc.strerror or str(exc))}"


def _yaml_message(exc: Exception) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc)
    return f"malformed YAML ({problem}{where}); fix the syntax (key: value, lists as [a, b])"


def user_error_message(exc: BaseException) -> str | None:
    """The one-line message for an exception caused by input; None for anything else (a bug)."""
    import yaml

    if isinstance(exc, UserError | yaml.YAMLError | OSError):
        if isinstance(exc, yaml.YAMLError):
            return one_line(_yaml_message(exc))
        return one_line(_os_message(exc) if isinstance(exc, OSError) else str(exc))
    if isinstance(exc, UnicodeDecodeError):
        return one_line(f"a file is not UTF-8 text ({exc.reason}); is it binary or truncated?")
    if isinstance(exc, KeyError):
        return one_line(str(exc.args[0]) if exc.args else "missing key")
    if isinstance(exc, ValueError | TypeError):
        return one_line(str(exc))
    if isinstance(exc, RecursionError):
        return "input nested too deeply; check the file is what the command expects"
    if isinstance(exc, RuntimeError):
        text = str(exc)
        for needle, problem, fix in _KNOWN_RUNTIME:
            if needle in text:
                return f"{problem}; {fix}"
    return None


def print_error(message: str) -> None:
    """`error: message` on stderr, no markup interpretation."""
    typer.echo(f"error: {message}", err=True)


def guarded(fn: F) -> F:
    """Wrap a command body: input errors -> one line on stderr and exit code 2; `RunFailed` (a
    run that diverged) -> one line and its exit code (1)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit, KeyboardInterrupt):
            raise
        except RunFailed as exc:  # not the input's fault: one line, its own exit code (1)
            print_error(one_line(str(exc)))
            raise typer.Exit(exc.exit_code) from None
        except Exception as exc:
            if isinstance(exc, typer.BadParameter):
                message: str | None = one_line(exc.format_message())
            else:
                message = user_error_message(exc)
            if message is None or os.environ.get(DEBUG_ENV):
                raise
            print_error(message)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def command(name: str, **kwargs: Any) -> Callable[[F], F]:
    """`@command("fit")`: register on the `pgrpo` app with the shared error handling."""

    def deco(fn: F) -> F:
        app.command(name, cls=PgrpoCommand, **kwargs)(guarded(fn))
        return fn

    return deco


def existing(path: Path, option: str, what: str = "a file or folder") -> Path:
    """`path` if it exists, else a UserError naming the option."""
    if not path.exists():
        fail(f"{option} {path} not found", f"give {what} that exists")
    return path


def out_dir(path: Path, option: str = "--out") -> Path:
    """Create the output folder `path` now (before any work) or fail saying why."""
    if path.exists() and not path.is_dir():
        fail(f"{option} {path} is a file, not a folder", f"give {option} a folder path")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"{option} {path}: cannot create the folder ({_os_message(exc)})")
    if not os.access(path, os.W_OK):
        fail(f"{option} {path} is not writable", f"give {option} a folder you may write")
    return path


@contextlib.contextmanager
def removed_if_failed(path: Path) -> Iterator[None]:
    """The folders of `path` that do not exist yet are removed again, if still empty, when the
    body fails: a command that creates its output folder before it reads its input (the input
    read is the work itself) leaves nothing behind on bad input."""
    new = []
    p = path
    while not p.exists() and p != p.parent:
        new.append(p)
        p = p.parent
    try:
        yield
    except BaseException:
        for d in new:  # deepest first
            with contextlib.suppress(OSError):
                d.rmdir()  # only an empty folder
        raise


def out_file(path: Path, option: str = "--out") -> Path:
    """Check that the file `path` can be written (its folder is created now)."""
    if path.is_dir():
        fail(f"{option} {path} is a folder", f"give {option} a file path such as {path}/eval.json")
    check_parent_writable(path.parent, option)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def read_text(path: Path, option: str) -> str:
    """The UTF-8 text of the file `path` given by `option`, or a UserError naming it."""
    existing(path, option, "a file")
    if not path.is_file():
        fail(f"{option} {path} is a folder", f"give {option} a file")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        fail(f"{option} {path} is not UTF-8 text (byte {exc.start})", "is it binary or truncated?")


def read_json(path: Path, option: str) -> Any:
    """The JSON document in the file `path` given by `option`, or a UserError naming it."""
    text = read_text(path, option)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        fail(
            f"{option} {path} is not valid JSON ({exc.msg} at line {exc.lineno})",
            "is the file truncated? give the file the command wrote",
        )
    except RecursionError:
        fail(f"{option} {path} is nested too deeply to be a pgrpo document")


def check_yaml(path: Path, option: str = "--config") -> None:
    """UserError naming the file and line when `path` is not readable YAML."""
    import yaml

    text = read_text(path, option)
    try:
        yaml.safe_load(text)
    except yaml.YAMLError as exc:
        fail(f"{option} {path}: {_yaml_message(exc)}")


def check_parent_writable(path: Path, option: str) -> None:
    """UserError when the folder `path` could not be created: a file on its way, or no access."""
    for parent in (path, *path.parents):
        if parent.exists():
            if not parent.is_dir():
                fail(f"{option}: {parent} is a file, not a folder", "give a path in a folder")
            if not os.access(parent, os.W_OK | os.X_OK):
                fail(f"{option} {path}: {parent} is not writable", "choose a folder you may write")
            return


def clean(x: Any) -> Any:
    """JSON-ready copy: numpy scalars to Python, non-finite floats to None, tuples to lists."""
    if isinstance(x, dict):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [clean(v) for v in x]
    if hasattr(x, "item") and callable(x.item) and getattr(x, "ndim", 1) == 0:
        x = x.item()
    if isinstance(x, Path):
        return str(x)
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def emit(data: Any, as_json: bool, render: Callable[[Console], None] | None = None) -> None:
    """Print `data` as one line of strict JSON (`--json`), else call `render(Console())`."""
    if as_json:
        typer.echo(json.dumps(clean(data), allow_nan=False, default=str))
    elif render is not None:
        render(Console())


def json_option(what: str) -> Any:
    """The `--json` flag, worded one way on every command: what it prints, and where."""
    return typer.Option(
        False, "--json", help=f"Print {what} as one line of JSON on stdout instead of text "
        "(notes and errors go to stderr)."
    )  # fmt: skip


def print_warnings(warnings: list[str] | tuple[str, ...], console: Console) -> None:
    """One `warning:` line each: what the log reader repaired (fit, diagnose and report alike;
    their --json carries the same list as "warnings")."""
    for w in warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")


def fmt(value: Any, spec: str = ".4g") -> str:
    """A table cell: numbers with `spec`, '-' for None / NaN / inf, anything else escaped."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-" if value is None else escape(value)
    return format(value, spec) if math.isfinite(value) else "-"


WIDE_TABLE = 120
"""Columns a console needs for `print_rows` to draw a table; narrower (80 when the output is
piped or a file, unless COLUMNS says otherwise) gets one block per row."""


def print_hanging(console: Console, text: str, lead: str = "", indent: int = 0) -> None:
    """`lead` then `text` (both rich markup), every wrapped line starting under the text's first
    letter: a note, a bullet or an `action:` still reads as one block at 80 columns."""
    from rich.text import Text

    head = Text(" " * indent) + Text.from_markup(lead)
    lines = Text.from_markup(text).wrap(console, max(20, console.width - head.cell_len))
    for i, line in enumerate(lines):
        line.rstrip()
        console.print((head if i == 0 else Text(" " * head.cell_len)) + line)


def print_rows(console: Console, title: str, columns: list[str], rows: list[list[str]],
               short: int = 1) -> None:  # fmt: skip
    """Rows of rich-markup cells: a table with `title` on a console at least WIDE_TABLE wide;
    otherwise the title, then per row its first `short` cells on one line and each other
    non-empty cell on a line of its own, `column: cell`, indented with a hanging indent (a
    five-column table at 80 columns folds its text a few letters per line)."""
    from rich.table import Table

    if console.width >= WIDE_TABLE:
        table = Table(title=title)
        for i, name in enumerate(columns):
            table.add_column(name, no_wrap=i < short, overflow="fold")
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return
    console.print(f"[bold]{title}[/bold]")
    for row in rows:
        console.print("  " + "  ".join(row[:short]))
        for name, cell in zip(columns[short:], row[short:], strict=True):
            if cell:
                print_hanging(console, cell, f"{name}: ", indent=6)


__all__ = [
    "DEBUG_ENV",
    "UserError",
    "check_model",
    "check_parent_writable",
    "check_yaml",
    "clean",
    "command",
    "emit",
    "escape",
    "existing",
    "fail",
    "fmt",
    "guarded",
    "json_option",
    "one_line",
    "out_dir",
    "out_file",
    "print_error",
    "print_hanging",
    "print_rows",
    "print_warnings",
    "read_json",
    "read_text",
    "user_error_message",
]


def field_docs(cls: type) -> dict[str, str]:
    """A dataclass's field docstrings (the string literal right under each field), by name."""
    node = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    return _class_fields(node, Path(inspect.getsourcefile(cls) or ""))[1]  # type: ignore[arg-type]


REQUIRED = ...
"""A field without a default: its option is required (typer's `...`)."""
_FIELD_DEFAULT = object()
_PACKAGE = Path(__file__).resolve().parents[1]


def _module_constant(module_path: Path, name: str, depth: int = 0) -> Any:
    """The literal value of module-level `name` in a pgrpo source file, following
    `from pgrpo.x import name` (a default such as `max_points: int = MAX_POINTS`), without
    importing anything."""
    tree = ast.parse(module_path.read_text())
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return ast.literal_eval(stmt.value)
        if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith("pgrpo."):
            if depth < 4 and any((a.asname or a.name) == name for a in stmt.names):
                src = _PACKAGE.joinpath(*stmt.module.split(".")[1:])  # type: ignore[union-attr]
                src = src / "__init__.py" if src.is_dir() else src.with_suffix(".py")
                return _module_constant(src, name, depth + 1)
    raise TypeError(f"{module_path}: no module-level literal {name} to read a default from")


def _literal(value: ast.expr, module_path: Path | None) -> Any:
    if isinstance(value, ast.Name) and module_path is not None:
        return _module_constant(module_path, value.id)
    return ast.literal_eval(value)


def _class_fields(
    node: ast.ClassDef, module_path: Path | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """(defaults, docstrings) of the fields of a dataclass's syntax tree; a field without a
    default maps to REQUIRED, one with `field(...)` (a factory) is left out of the defaults; a
    default that names a module constant is read from `module_path` (and what it imports)."""
    defaults: dict[str, Any] = {}
    docs: dict[str, str] = {}
    for item, nxt in zip(node.body, [*node.body[1:], None], strict=True):
        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
            continue
        name = item.target.id
        if item.value is None:
            defaults[name] = REQUIRED
        elif not isinstance(item.value, ast.Call):
            defaults[name] = _literal(item.value, module_path)
        doc = getattr(nxt, "value", None)
        if isinstance(nxt, ast.Expr) and isinstance(doc, ast.Constant):
            docs[name] = " ".join(str(doc.value).split())
    return defaults, docs


@functools.cache
def config_fields(target: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(defaults, docstrings) of the dataclass `"pgrpo.module:Class"`, read from its source file
    without importing it: every command's options are built at start-up, and the modules that
    define the configs import torch or scipy (seconds), which `pgrpo --version` must not pay."""
    module, _, name = target.partition(":")
    path = _PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
    lines = path.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"class {name}")), None)
    if start is None:
        raise TypeError(f"{target}: no class {name} in {path}")
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i][:1] not in ("", " ", "#", ")")),
        len(lines),
    )  # only the class's own lines are parsed (the whole module: 3 ms more per config)
    node = ast.parse("\n".join(lines[start:end])).body[0]
    return _class_fields(node, path)  # type: ignore[arg-type]


def config_option(
    target: str, name: str, *flags: str, default: Any = _FIELD_DEFAULT, **kwargs: Any
) -> Any:
    """typer.Option for field `name` of the config dataclass `target` ("pgrpo.module:Class"):
    the field's default and its docstring as help, so the CLI and the library share one source.
    `default=` overrides the field's default for this command (the option records it: the
    override is visible, tests/test_cli_config_options.py). The returned OptionInfo carries
    `pgrpo_field = (target, name)` and `pgrpo_override` (bool)."""
    defaults, docs = config_fields(target)
    if name not in defaults:
        raise TypeError(f"{target}.{name} has no plain default to offer as a CLI default")
    value = defaults[name] if default is _FIELD_DEFAULT else default
    info = typer.Option(value, *flags, help=docs.get(name, ""), **kwargs)
    info.pgrpo_field = (target, name)  # type: ignore[attr-defined]
    info.pgrpo_override = default is not _FIELD_DEFAULT  # type: ignore[attr-defined]
    return info
