"""No module imports from a layer above it. The order is defined once, here (LAYERS); every
`import` and `from ... import` in src/pgrpo counts, lazy ones inside functions included."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "pgrpo"

# Bottom to top; packages in one tuple are one layer (they may import each other).
# `pgrpo` is the package root's `__init__` (its public re-exports).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_registry", "errors", "_memory"),
    ("core", "tasks"),
    ("pgrpo",),
    ("logs",),
    ("dynamics",),
    ("bandit",),
    ("diagnose",),
    ("train",),
    ("measure",),
    ("evaluate",),
    ("report",),
    ("demo",),
    ("integrations",),
    ("cli",),
)
RANK = {name: i for i, tier in enumerate(LAYERS) for name in tier}


def layer_of(module: str) -> str:
    """'pgrpo.dynamics.fit' -> 'dynamics'; 'pgrpo' -> 'pgrpo'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "pgrpo"


def imported_layers(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, layer) of each pgrpo import in the tree."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, layer_of(a.name)) for a in node.names if _ours(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _ours(node.module or ""):
            if node.module == "pgrpo":  # `from pgrpo import dynamics` names a subpackage
                out += [(node.lineno, a.name if a.name in RANK else "pgrpo") for a in node.names]
            else:
                out.append((node.lineno, layer_of(node.module)))
    return out


def _ours(module: str) -> bool:
    return module == "pgrpo" or module.startswith("pgrpo.")


def _module_layer(path: Path) -> str:
    rel = path.relative_to(SRC)
    return "pgrpo" if rel.as_posix() == "__init__.py" else rel.parts[0].removesuffix(".py")


def test_every_package_has_a_layer():
    tops = {_module_layer(p) for p in SRC.rglob("*.py")}
    assert tops <= set(RANK), f"add {sorted(tops - set(RANK))} to LAYERS"


def test_the_checker_sees_lazy_imports():
    tree = ast.parse("def f():\n    from pgrpo.cli.common import fail\n    import pgrpo.train\n")
    assert imported_layers(tree) == [(2, "cli"), (3, "train")]


def test_no_import_from_a_layer_above():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        mine = _module_layer(path)
        for line, theirs in imported_layers(ast.parse(path.read_text())):
            if theirs in RANK and RANK[theirs] > RANK[mine]:
                found.append(f"{path.relative_to(SRC)}:{line} ({mine}) imports {theirs}")
    assert not found, "imports from a higher layer:\n" + "\n".join(found)
