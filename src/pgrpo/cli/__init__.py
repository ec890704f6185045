"""The `pgrpo` command. A thin layer: each subcommand parses its options into a config and calls one
library function. Subcommands live one per module in this package (`pgrpo/cli/<name>.py`, the
command named like its module), each registering itself on `app` from `pgrpo.cli.app`; `main`
imports the one module the command line names (start-up is part of every answer), or all of
them when it names none (`pgrpo`, `pgrpo --help`, `pgrpo --version`, a misspelt command).
"""

from __future__ import annotations

import atexit
import importlib
import os
import pkgutil
import sys
import threading
from collections.abc import Sequence
from typing import Any, NoReturn

from pgrpo.cli.app import app

_SKIP = {"app", "common"}
QUICK_EXIT = frozenset({"fit", "predict", "diagnose", "report"})
"""Commands that `run` ends without the interpreter's teardown (see `_exit_now`): they read a
log or options, print, write their files inside `with` blocks (or matplotlib's / pathlib's
writers, which close them) and start no thread."""


def _command_names() -> list[str]:
    """The subcommand modules of this package (each registers the command of its name)."""
    names = (info.name for info in pkgutil.iter_modules(__path__))
    return sorted(n for n in names if n not in _SKIP and not n.startswith("_"))


def _load_commands(names: Sequence[str] | None = None) -> None:
    for name in _command_names() if names is None else names:
        importlib.import_module(f"{__name__}.{name}")


def _named_command(argv: Sequence[str]) -> str | None:
    """The subcommand argv names (its first argument, when it is one of ours), else None."""
    if not argv or argv[0].startswith("-"):
        return None
    return argv[0] if argv[0] in _command_names() else None


def main() -> None:
    """Run the command line in sys.argv; ends with SystemExit (typer's standalone mode)."""
    name = _named_command(sys.argv[1:])
    _load_commands(None if name is None else [name])
    app()


def run() -> NoReturn:
    """The `pgrpo` executable (and `python -m pgrpo.cli`): `main`, then, for the QUICK_EXIT
    commands, `_exit_now` with the exit code instead of the interpreter's teardown; these
    commands run with pyarrow kept out (`_keep_pyarrow_out`)."""
    if _named_command(sys.argv[1:]) in QUICK_EXIT:
        _keep_pyarrow_out()
    try:
        main()
    except SystemExit as exc:
        code: Any = exc.code
    else:
        code = 0
    if _named_command(sys.argv[1:]) in QUICK_EXIT:
        _exit_now(code)
    sys.exit(code)


def _keep_pyarrow_out() -> None:
    """Have `import pyarrow` fail in this process (a None entry in sys.modules: Python's import
    system then raises ImportError), unless pandas or pyarrow is loaded already. pandas, which
    statsmodels imports for the default forecast's smoothing members (`pgrpo.dynamics.consensus`:
    `report`, `fit --forecast-from`), loads pyarrow whenever it is installed (the `tasks` and
    `trl` extras install it) and reads ImportError as "not installed": 30 MB of `pgrpo report`'s
    resident memory (its budget: 300 MB, bench/cli_speed.py), for Arrow-backed strings the
    smoothing never makes, and its fits are the same (tests/test_cli_instant.py). Only for the
    commands `run` ends with the process (QUICK_EXIT): a library user's pandas keeps pyarrow."""
    if "pyarrow" not in sys.modules and "pandas" not in sys.modules:
        sys.modules["pyarrow"] = None  # type: ignore[assignment]


def _exit_now(code: Any) -> NoReturn:
    """End the process as `sys.exit(code)` would, but without the interpreter's teardown, which
    frees every object and module one by one (~0.1 s CPU once scipy and matplotlib are loaded,
    measured 2026-12-02; the OS reclaims the memory at once): the atexit handlers run (weakref
    finalizers, logging's flush), then stdout and stderr are flushed, then `os._exit`. A
    non-integer code, or a thread still running, takes the normal way out."""
    if not (code is None or isinstance(code, int)) or threading.active_count() > 1:
        sys.exit(code)
    atexit._run_exitfuncs()
    status = code or 0
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: Python's own exit status for it
            status = status or 120
    os._exit(status)


__all__ = ["app", "main", "run"]
