"""The YAML of run configs and overrides, and the light coercion of its values into the types of
config fields: what `pgrpo.train.config` reads files and `key=value` overrides with.

    parse("1e-5")                       # 1e-05 (YAML 1.2's numbers; 1.1 reads a string)
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
    """YAML with the YAML 1.2 core schema's numbers and booleans: `1e-5` is a number (1.1 reads a
    string), `1_000`, `1:30` (sexagesimal 90), `010` (octal 8) and `yes` / `on` / `no` are not
    read as numbers or booleans (1.1 reads them so), as `--lr 1_000` is refused on the command
    line, and `2026-12-03` stays a string (a run name); `true` / `false`, `0x1f`, `0o17`,
    `.inf` and `.nan` are read as 1.2 reads them. A key given twice in one mapping is an error
    (YAML 1.2 requires unique keys; PyYAML kept the last silently, while the same setting twice on
    the command line is refused)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue  # `<<: *base` merges are overrides by design
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                line = key_node.start_mark.line + 1
                raise yaml.constructor.ConstructorError(
                    problem=f"key {key!r} at line {line} repeats line {seen[key] + 1}; keep one"
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


_BOOL, _INT, _FLOAT, _DATE = (
    f"tag:yaml.org,2002:{t}" for t in ("bool", "int", "float", "timestamp")
)
_Loader.yaml_implicit_resolvers = {  # 1.1's, less its numbers, booleans and dates
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_BOOL, _INT, _FLOAT, _DATE)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _tag, _pattern, _first in (
    (_BOOL, r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    (_INT, r"^[-+]?[0-9]+$|^0o[0-7]+$|^0x[0-9a-fA-F]+$", "-+0123456789"),
    (
        _FLOAT,
        r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$"
        r"|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$",
        "-+0123456789.",
    ),
):  # in this order: "10" is an int, "1.0" a float
    _Loader.add_implicit_resolver(_tag, re.compile(_pattern), list(_first))


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    """1.2 integers: decimal (a leading 0 is still decimal), 0o octal, 0x hexadecimal."""
    text = loader.construct_scalar(node)
    return int(text, 0) if text[:2] in ("0o", "0x") else int(text, 10)


_Loader.add_constructor(_INT, _construct_int)


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
        try:  # a quoted number ("1e-5"); Python's float() would also take "1_000": not here
            if "_" in value:
                raise ValueError(value)
            return float(value)
        except ValueError:
            fix = " (write 1000, not 1_000)" if "_" in value else ""
            raise TypeError(f"{name}={value!r}: expected a number{fix}") from None
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if hint is bool and isinstance(value, bool):
        return value
    if hint is str and isinstance(value, str | int | float) and not isinstance(value, bool):
        return str(value)
    if hint in (float, int, bool, str):
        examples = {int: "a whole number, e.g. 8", float: "a number, e.g. 1e-6",
                    bool: "true or false", str: "a word"}  # fmt: skip
        fix = " (write 1000, not 1_000)" if isinstance(value, str) and "_" in value else ""
        raise TypeError(f"{name}={value!r}: expected {examples[hint]}{fix}")
    return value
