"""CLI options that mirror a config dataclass's field carry its default and its field docstring
(one source of defaults). Every command's click parameters are walked and every config a command
builds is found in its source; no option or command is named here."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import textwrap
from typing import Any

import click
import typer

from pgrpo.cli import _load_commands, app
from pgrpo.cli.common import REQUIRED, config_fields, config_option, field_docs
from pgrpo.measure.config import ProbeConfig

_load_commands()


def _commands() -> dict[str, click.Command]:
    return dict(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def _infos(cmd: click.Command) -> dict[str, Any]:
    """python parameter name -> the typer OptionInfo / ArgumentInfo it was declared with."""
    sig = inspect.signature(inspect.unwrap(cmd.callback))
    return {name: p.default for name, p in sig.parameters.items()}


def _class(target: str) -> type:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _field_default(cls: type, name: str) -> Any:
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    return REQUIRED if field.default is dataclasses.MISSING else field.default


def _lookup(node: ast.expr, scope: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name):
        return scope.get(node.id)
    if isinstance(node, ast.Attribute):
        return getattr(_lookup(node.value, scope), node.attr, None)
    return None


def _scope(fn: Any, tree: ast.AST) -> dict[str, Any]:
    """fn's globals plus what its body imports (`from x import y` inside the function)."""
    scope = dict(fn.__globals__)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            module = importlib.import_module(node.module)
            for alias in node.names:
                value = getattr(module, alias.name, None)
                if value is None:  # a submodule not yet imported
                    value = importlib.import_module(f"{node.module}.{alias.name}")
                scope[alias.asname or alias.name] = value
    return scope


def config_uses(fn: Any, names: dict[str, str], depth: int = 0) -> list[tuple[str, type, str]]:
    """(option, config class, field) for each of `names` (local name -> option) that fn passes
    as a bare name into a dataclass constructor, following the CLI's own helpers."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    scope = _scope(fn, tree)
    out = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        callee = _lookup(call.func, scope)
        try:
            params = list(inspect.signature(callee).parameters)
        except (TypeError, ValueError):
            continue
        passed = {
            params[i]: names[a.id]
            for i, a in enumerate(call.args)
            if isinstance(a, ast.Name) and a.id in names and i < len(params)
        }
        passed.update(
            {
                kw.arg: names[kw.value.id]
                for kw in call.keywords
                if kw.arg and isinstance(kw.value, ast.Name) and kw.value.id in names
            }
        )
        if dataclasses.is_dataclass(callee):
            out += [(option, callee, field) for field, option in passed.items()]
        elif depth < 2 and (getattr(callee, "__module__", None) or "").startswith("pgrpo.cli"):
            out += config_uses(inspect.unwrap(callee), passed, depth + 1)
    return out


def mismatches(cmd: click.Command) -> list[str]:
    """Options whose default or help differs from the config field they mirror."""
    params = {p.name: p for p in cmd.params}
    infos = _infos(cmd)
    bad = []
    for name, info in infos.items():  # declared with config_option: default and help
        target = getattr(info, "pgrpo_field", None)
        if target is None:
            continue
        cls, field = _class(target[0]), target[1]
        doc = field_docs(cls).get(field, "")
        if not doc or params[name].help != doc:
            bad.append(f"--{name}: help is not {cls.__name__}.{field}'s docstring")
        if config_fields(target[0])[0][field] != _field_default(cls, field):
            bad.append(f"{cls.__name__}.{field}: the default read from its source is wrong")
    fn = inspect.unwrap(cmd.callback)
    for option, cls, field in config_uses(fn, {n: n for n in params}):  # built into a config
        info, want = infos[option], _field_default(cls, field)
        declared = getattr(info, "pgrpo_field", None) == (f"{cls.__module__}:{cls.__name__}", field)
        if declared and info.pgrpo_override:
            continue  # a visible, declared override (config_option(..., default=...))
        got = REQUIRED if params[option].required else params[option].default
        if got != want:
            bad.append(f"--{option} defaults to {got!r}, {cls.__name__}.{field} to {want!r}")
    return bad


def test_every_option_that_mirrors_a_config_field_has_its_default_and_help():
    found, mirrored = [], 0
    for name, cmd in _commands().items():
        found += [f"{name} {problem}" for problem in mismatches(cmd)]
        mirrored += len(
            config_uses(inspect.unwrap(cmd.callback), {p.name: p.name for p in cmd.params})
        )
    assert mirrored >= 10  # the walk sees the configs the commands build
    assert not found, "\n".join(found)


def test_the_checker_finds_a_drifted_default_and_accepts_a_declared_override():
    demo = typer.Typer(add_completion=False)

    @demo.command()
    def probe_like(
        seed: int = typer.Option(1),  # ProbeConfig.seed is 0
        pairs: int = config_option("pgrpo.measure.config:ProbeConfig", "n_pairs"),
        step_lrs: float = config_option(
            "pgrpo.measure.config:ProbeConfig", "step_lrs", default=3.0
        ),
    ) -> None:
        ProbeConfig(seed=seed, n_pairs=pairs, step_lrs=step_lrs)

    cmd = typer.main.get_command(demo)
    assert mismatches(cmd) == ["--seed defaults to 1, ProbeConfig.seed to 0"]
    assert {p.name: p.default for p in cmd.params} == {"seed": 1, "pairs": 8, "step_lrs": 3.0}


def test_config_fields_reads_defaults_and_docs_without_importing():
    defaults, docs = config_fields("pgrpo.dynamics.optimizers:OptimizerSettings")
    assert defaults["lr"] is REQUIRED and defaults["beta1"] == 0.9 and defaults["grad_rms"] is None
    assert docs["lr"] == "Learning rate (peak)."


def test_field_docs_reads_the_docstring_under_each_field():
    @dataclasses.dataclass(frozen=True)
    class C:
        a: int = 1
        """The a.
        Two lines."""
        b: int = 2
        c: int = 3
        """The c."""

    assert field_docs(C) == {"a": "The a. Two lines.", "c": "The c."}


def test_probe_config_documents_every_field():
    assert set(field_docs(ProbeConfig)) == {f.name for f in dataclasses.fields(ProbeConfig)}
