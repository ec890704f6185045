"""The YAML of run configs and overrides, and the light coercion of its values into the types of
config fields: what `pgrpo.train.config` reads files and `key=value` overrides with.

    parse("1e-5")                       # 1e-05 (YAML 1.2 floats; YAML 1.1 reads a string)
    read_file(Path("run/config.yaml"))  # the document; UserError naming the file when malformed
    coerce("optim.lr", float, 1)        # 1.0; TypeError naming the key otherwise
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any

import yaml

from pgrpo.errors import UserError


class _Loader(yaml.SafeLoader):
    """YAML with 1.2 floats: `1e-5` is a number, not a string."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d[\d_]*)?(?:\.\d*)?[eE][-+]?\d+$|^[-+]?\d[\d_]*\.\d*$|^[-+]?\.\d+$"),
    list("-+0123456789."),
)


def parse(text: str) -> Any:
    """One YAML document (an override's value or a whole config file)."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)


def read_file(path: Path) -> Any:
    """The YAML document in `path`; UserError naming the file, line and column when it is not
    YAML (a damaged run's config.yaml on --resume is named, not just "malformed YAML")."""
    try:
        return parse(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
        raise UserError(
            f"{path} is not valid YAML ({problem}{at})",
            "fix its syntax (key: value, lists as [a, b]); a run folder's config.yaml holds the "
            "settings the run was started with: repair it by hand or start afresh with --overwrite",
        ) from None


def coerce(name: str, hint: Any, value: Any) -> Any:
    """Light type coercion of YAML values (list -> tuple, int -> float) with a clear error."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        for a in inner:
            try:
                return coerce(name, a, value)
            except (TypeError, ValueError):
                continue
        raise TypeError(f"{name}={value!r}: expected {hint}")
    if origin is tuple:
        if isinstance(value, str | int | float):
            value = [value]
        if not isinstance(value, list | tuple):
            raise TypeError(f"{name}={value!r}: expected a list like [a, b]")
        return tuple(coerce(name, args[0], v) for v in value)
    if origin is dict:
        if not isinstance(value, dict):
            raise TypeError(f"{name}={value!r}: expected a mapping like {name}.key=value")
        return dict(value)
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if hint is float and isinstance(value, str):
        try:  # YAML 1.1 reads "1e-5" (no dot) as a string
            return float(value)
        except ValueError:
            raise TypeError(f"{name}={value!r}: expected a number") from None
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if hint is bool and isinstance(value, bool):
        return value
    if hint is str and isinstance(value, str | int | float) and not isinstance(value, bool):
        return str(value)
    if hint in (float, int, bool, str):
        raise TypeError(f"{name}={value!r}: expected {hint.__name__}")
    return value
