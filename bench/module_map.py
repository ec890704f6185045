"""The module map of src/pgrpo: packages -> modules -> lines, and the layer of each package.

    python bench/module_map.py                          # the working tree
    python bench/module_map.py --rev 85f76cf --rev 5d770e0 --rev .   # side by side
    python bench/module_map.py --rev 5d770e0 --json     # machine-readable

A revision is read with git (`git ls-tree` / `git show`), so no checkout is needed; `.` is the
working tree. The layer order is each revision's own, read from its tests/test_layers.py (the
one place it is defined): layer 0 is the bottom, a package may import only from its layer and
below. Lines are physical lines (`wc -l`), blank and comment lines included. Prints one table per
package summary and one per module; writes bench/results/module_map.json (command, date, machine,
rows: one per package and revision, modules: one per module and revision).
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "module_map.json"
SRC = "src/pgrpo"
WORKTREE = "."
BUDGET = 500


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def read_files(rev: str) -> dict[str, str]:
    """path under src/pgrpo -> text, for every .py file of `rev` (WORKTREE: the files on disk)."""
    if rev == WORKTREE:
        base = ROOT / SRC
        return {p.relative_to(base).as_posix(): p.read_text() for p in sorted(base.rglob("*.py"))}
    names = _git("ls-tree", "-r", "--name-only", rev, SRC).split()
    return {
        n[len(SRC) + 1 :]: _git("show", f"{rev}:{n}") for n in sorted(names) if n.endswith(".py")
    }


def read_layers(rev: str) -> dict[str, int]:
    """package -> layer index (0 = bottom) from the revision's tests/test_layers.py LAYERS;
    {} for a revision without that file."""
    path = "tests/test_layers.py"
    try:
        text = (ROOT / path).read_text() if rev == WORKTREE else _git("show", f"{rev}:{path}")
    except (OSError, subprocess.CalledProcessError):
        return {}  # a revision from before the layer test: no layers ("-")
    for node in ast.parse(text).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign):
            target = node.targets[0]
        if isinstance(target, ast.Name) and target.id == "LAYERS" and node.value is not None:
            tiers = ast.literal_eval(node.value)
            return {name: i for i, tier in enumerate(tiers) for name in tier}
    raise ValueError(f"{rev}:{path} defines no LAYERS")


def package_of(path: str) -> str:
    """'dynamics/fit.py' -> 'dynamics'; '__init__.py' -> 'pgrpo'; 'demo.py' -> 'demo'."""
    if path == "__init__.py":
        return "pgrpo"
    return path.split("/")[0].removesuffix(".py")


def module_map(rev: str) -> dict:
    """{"rev", "commit", "packages": {package: {"layer", "modules": {path: lines}, "lines"}}}."""
    layers = read_layers(rev)
    packages: dict[str, dict] = {}
    for path, text in read_files(rev).items():
        pkg = packages.setdefault(
            package_of(path), {"layer": layers.get(package_of(path)), "modules": {}, "lines": 0}
        )
        pkg["modules"][path] = len(text.splitlines())
        pkg["lines"] += pkg["modules"][path]
    commit = _git("rev-parse", "--short", "HEAD" if rev == WORKTREE else rev).strip()
    label = f"working tree (on {commit})" if rev == WORKTREE else commit
    order = sorted(packages, key=lambda p: (packages[p]["layer"] is None, packages[p]["layer"], p))
    return {"rev": rev, "label": label, "packages": {p: packages[p] for p in order}}


def package_rows(maps: list[dict]) -> list[dict]:
    """One row per package (in the last map's layer order): its layer and its module and line
    counts in each map."""
    names = list(dict.fromkeys([*maps[-1]["packages"], *(p for m in maps for p in m["packages"])]))
    rows = []
    for name in names:
        row: dict = {"package": name}
        for m in maps:
            pkg = m["packages"].get(name)
            row[f"layer@{m['rev']}"] = None if pkg is None else pkg["layer"]
            row[f"modules@{m['rev']}"] = 0 if pkg is None else len(pkg["modules"])
            row[f"lines@{m['rev']}"] = 0 if pkg is None else pkg["lines"]
        rows.append(row)
    return rows


def module_rows(maps: list[dict]) -> list[dict]:
    """One row per module path (the union over the maps): its lines in each map (0: absent)."""
    paths: dict[str, str] = {}
    for m in maps:
        for pkg, info in m["packages"].items():
            paths.update(dict.fromkeys(info["modules"], pkg))
    rows = []
    for path in sorted(paths, key=lambda p: (package_of(p), p)):
        row: dict = {"package": paths[path], "module": path}
        for m in maps:
            info = m["packages"].get(package_of(path), {"modules": {}})
            row[f"lines@{m['rev']}"] = info["modules"].get(path, 0)
        rows.append(row)
    return rows


def over_budget(tree: dict) -> list[str]:
    """Modules longer than the style guide's ~BUDGET-line budget, longest first."""
    sizes = {path: n for pkg in tree["packages"].values() for path, n in pkg["modules"].items()}
    return [f"{p} ({n})" for p, n in sorted(sizes.items(), key=lambda kv: -kv[1]) if n > BUDGET]


def markdown(rows: list[dict]) -> str:
    cols = list(rows[0])
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join("-" if r[c] is None else str(r[c]) for c in cols) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", action="append", help="git revision, or '.' for the working tree")
    ap.add_argument("--json", action="store_true", help="print the results JSON only")
    args = ap.parse_args(argv)
    maps = [module_map(rev) for rev in (args.rev or [WORKTREE])]
    totals = {m["rev"]: sum(p["lines"] for p in m["packages"].values()) for m in maps}
    doc = {
        "command": "python bench/module_map.py " + " ".join(f"--rev {r}" for r in (args.rev or [])),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {platform.system()}, Python {platform.python_version()}",
        "revisions": {m["rev"]: m["label"] for m in maps},
        "total_lines": totals,
        "over_budget": {m["rev"]: over_budget(m) for m in maps},
        "rows": package_rows(maps),
        "modules": module_rows(maps),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    if args.json:
        print(json.dumps(doc))
        return 0
    print("revisions: " + "; ".join(f"{r} = {label}" for r, label in doc["revisions"].items()))
    print(markdown(doc["rows"]))
    print()
    print(markdown(doc["modules"]))
    print()
    print("total lines: " + ", ".join(f"{r}: {n}" for r, n in totals.items()))
    for rev, paths in doc["over_budget"].items():
        print(f"modules over {BUDGET} lines at {rev}: " + (", ".join(paths) or "none"))
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
