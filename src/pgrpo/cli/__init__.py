"""The `pgrpo` command. A thin layer: each subcommand parses its options into a config and calls one
library function. Subcommands live one per module in this package (`pgrpo/cli/<name>.py`), each
registering itself on `app` from `pgrpo.cli.app`; `main` imports them all.
"""

from __future__ import annotations

import importlib
import pkgutil

from pgrpo.cli.app import app

_SKIP = {"app", "common"}


def _load_commands() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name not in _SKIP and not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


def main() -> None:
    _load_commands()
    app()


__all__ = ["app", "main"]
