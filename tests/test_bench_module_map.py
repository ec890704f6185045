"""bench/module_map.py: its line counts are the files' own, its layers tests/test_layers.py's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from test_layers import RANK, SRC

ROOT = Path(__file__).resolve().parents[1]


def _module_map():
    spec = importlib.util.spec_from_file_location("module_map", ROOT / "bench" / "module_map.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["module_map"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_working_tree_map_counts_every_module_and_uses_the_layer_order():
    mm = _module_map()
    tree = mm.module_map(mm.WORKTREE)
    modules = {path: n for pkg in tree["packages"].values() for path, n in pkg["modules"].items()}
    on_disk = {p.relative_to(SRC).as_posix(): p for p in SRC.rglob("*.py")}
    assert set(modules) == set(on_disk)
    for path, n in modules.items():
        assert n == len(on_disk[path].read_text().splitlines()), path
    assert {name: pkg["layer"] for name, pkg in tree["packages"].items()} == {
        name: RANK[name] for name in tree["packages"]
    }
    layers = [pkg["layer"] for pkg in tree["packages"].values()]
    assert layers == sorted(layers)  # listed bottom to top
    rows = mm.package_rows([tree])
    assert sum(r["lines@."] for r in rows) == sum(modules.values())
