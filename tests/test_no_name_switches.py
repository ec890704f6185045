"""Registries are the only dispatch path: no module compares a string against a registered
estimator, transform, policy-loss, aggregator or KL-estimator name outside its own definition.

The names come from the registries themselves; the source tree is read with `ast`, so a
comparison (`==`, `!=`, `in`, `not in` against a literal or a tuple/list/set of literals) is
found wherever it is written, including inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

from pgrpo.core.advantages import ADVANTAGE_ESTIMATORS, ADVANTAGE_TRANSFORMS
from pgrpo.core.losses import AGGREGATORS, KL_ESTIMATORS, POLICY_LOSSES

SRC = Path(__file__).resolve().parents[1] / "src" / "pgrpo"
# Dict literals keyed by names that are choices, not dispatch: the arms of an experiment and a
# config default (each value is data the entry is run with, never code selected by the name).
CHOICE_TABLES = {"bandit/experiments/sign.py", "measure/gradrank.py"}
REGISTRIES = {
    "core/advantages.py": [ADVANTAGE_ESTIMATORS, ADVANTAGE_TRANSFORMS],
    "core/losses.py": [POLICY_LOSSES, AGGREGATORS, KL_ESTIMATORS],
}
# LR_SCHEDULES is left out: its 'linear' is also scipy's least-squares loss name (dynamics/fit.py),
# so a literal cannot tell the two apart.


def _registered_names() -> dict[str, str]:
    """name -> the file that defines it."""
    return {name: path for path, regs in REGISTRIES.items() for reg in regs for name in reg}


def _literals(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for elt in node.elts for s in _literals(elt)]
    return []


def name_comparisons(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of each comparison of anything against a registered name literal, and of
    each dict literal keyed by one (a name table outside the registry)."""
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = [k for k in node.keys if k is not None]
            hits += [(node.lineno, s) for k in keys for s in _literals(k) if s in names]
        if not isinstance(node, ast.Compare):
            continue
        for op, right in zip(node.ops, node.comparators, strict=True):
            if not isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                continue
            for side in (node.left, right):
                hits += [(node.lineno, s) for s in _literals(side) if s in names]
    return hits


def _is_dict_key(path: Path, line: int) -> bool:
    tree = ast.parse(path.read_text())
    return any(isinstance(n, ast.Dict) and n.lineno == line for n in ast.walk(tree))


def test_the_checker_finds_a_switch():
    tree = ast.parse("if cfg.policy_loss == 'clipped': pass\nok = x in ('k1', 'other')\n")
    assert name_comparisons(tree, {"clipped", "k1"}) == [(1, "clipped"), (2, "k1")]
    assert name_comparisons(ast.parse("y = d['clipped']\n"), {"clipped"}) == []
    assert name_comparisons(ast.parse("T = {'k1': 1.0}\n"), {"k1"}) == [(1, "k1")]


def test_no_string_comparison_against_a_registered_name():
    owners = _registered_names()
    assert {"grpo", "dual_anchor", "clipped", "token_mean", "k3", "prospect"} <= set(owners)
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for line, name in name_comparisons(ast.parse(path.read_text()), set(owners)):
            if owners[name] != rel and not (rel in CHOICE_TABLES and _is_dict_key(path, line)):
                found.append(f"{rel}:{line} compares against {name!r}")
    assert not found, "dispatch through the registry metadata instead:\n" + "\n".join(found)


def _diagnosis_labels() -> set[str]:
    """The verdict labels a diagnosis carries (the four modes and `healthy`), read off a result."""
    import numpy as np

    from pgrpo.diagnose import diagnose

    result = diagnose({"step": np.arange(30.0), "reward": np.linspace(0.1, 0.9, 30)})
    return {v.name for v in result.modes}


def test_no_string_comparison_against_a_diagnosis_label_outside_diagnose():
    """A caller asks the result (`diagnosis.healthy`, `verdict.detected`), never its label."""
    labels = _diagnosis_labels()
    assert {"healthy", "dynamical_instability"} <= labels
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("diagnose/"):
            continue
        for line, name in name_comparisons(ast.parse(path.read_text()), labels):
            found.append(f"{rel}:{line} compares against {name!r}")
    assert not found, "use the result's properties instead:\n" + "\n".join(found)
