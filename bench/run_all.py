"""Run every benchmark in bench/ and regenerate docs/benchmarks.md from their JSON results.

    nice -n 10 python bench/run_all.py                   # run each bench/*.py, then write the doc
    python bench/run_all.py --from-results               # only collect bench/results/*.json
    nice -n 10 python bench/run_all.py --only advantages,fit

Each benchmark script writes `bench/results/<name>.json`. A script is re-run with the command its
last result recorded (`command`, or `meta.command`: e.g. the verl benchmark runs in .venv-verl),
else with this interpreter; one at a time (the machine is shared), each with a timeout. A failed
run keeps the previous result and is reported, so no finished work is lost.

The renderer is tolerant of the result's shape: the run's command, date and machine come from the
top level or a `meta` block; the table is the first list of row dicts (`rows`, `results`, ...),
with one column per scalar field (nested dicts are flattened one level, lists are left out); a
top-level `ratios` dict and every row field whose name says it is a ratio to the anchor
(`speedup*`, `*vs_*`) are listed under "Ratios vs the anchor".
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
DOC = ROOT / "docs" / "benchmarks.md"
RATIO_MARKERS = ("speedup", "_vs_", "vs_")
META_KEYS = ("command", "date", "machine")


@dataclass
class RunOutcome:
    """What happened to one benchmark script in this invocation."""

    name: str
    command: list[str]
    returncode: int | None = None
    seconds: float = 0.0
    error: str = ""
    metrics: dict[str, float] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------


def discover(bench_dir: Path) -> list[Path]:
    """bench/*.py benchmark scripts: every module but this one and private ones."""
    return sorted(
        p for p in bench_dir.glob("*.py") if p.name != Path(__file__).name and p.name[0] != "_"
    )


def recorded_command(result_path: Path) -> list[str] | None:
    """The command the previous result was produced with, if it recorded one."""
    try:
        data = json.loads(result_path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    meta = _meta(data)
    cmd = meta.get("command")
    if not isinstance(cmd, str) or not cmd.strip():
        return None
    parts = shlex.split(cmd)
    if parts[:1] == ["nice"]:  # drop a recorded `nice -n 10`: run_all adds its own
        parts = parts[3:] if parts[1:2] == ["-n"] else parts[1:]
    if parts[:1] in (["python"], ["python3"]):
        parts[0] = sys.executable
    return parts or None


def command_for(script: Path, results_dir: Path) -> list[str]:
    """The recorded command when it runs this script with an interpreter that exists here."""
    cmd = recorded_command(results_dir / f"{script.stem}.json")
    if cmd and any(Path(part).name == script.name for part in cmd[1:]):
        if Path(cmd[0]).is_file() or shutil.which(cmd[0]):
            return cmd
    return [sys.executable, str(script)]


def run_script(script: Path, results_dir: Path, timeout_s: float, nice: int) -> RunOutcome:
    """Run one benchmark from the repository root; never raises for the script's failure."""
    cmd = command_for(script, results_dir)
    full = (["nice", "-n", str(nice)] if nice else []) + cmd
    outcome = RunOutcome(script.stem, full)
    start = time.perf_counter()
    try:
        proc = subprocess.run(full, cwd=ROOT, timeout=timeout_s, capture_output=True, text=True)
        outcome.returncode = proc.returncode
        if proc.returncode:
            outcome.error = (proc.stderr or proc.stdout)[-1500:]
    except subprocess.TimeoutExpired:
        outcome.error = f"timed out after {timeout_s:.0f} s (raise --timeout)"
    except OSError as exc:
        outcome.error = f"could not start: {exc}"
    outcome.seconds = time.perf_counter() - start
    return outcome


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------


def _meta(data: Any) -> dict[str, Any]:
    """command/date/machine (+ other scalars) from `meta` or the top level; where a result keeps
    them per row or per section instead, from the rows ("per row" when they differ)."""
    if isinstance(data, list):
        data = {"rows": data}
    if not isinstance(data, dict):
        return {}
    meta = dict(data.get("meta") or {}) if isinstance(data.get("meta"), dict) else {}
    for key in META_KEYS:
        if key in data and not isinstance(data[key], dict | list):
            meta.setdefault(key, data[key])
    rows = [r for v in data.values() if isinstance(v, list) for r in v if isinstance(r, dict)]
    rows += [r for v in data.values() if isinstance(v, dict) for r in v.values()]
    rows = [r for r in rows if isinstance(r, dict)]
    for key in META_KEYS:
        values = {str(r[key]) for r in rows if _is_scalar(r.get(key)) and r.get(key) is not None}
        if key not in meta and values:
            meta[key] = values.pop() if len(values) == 1 else "per row (see the table)"
    return meta


SKIP_TABLES = ("meta", "ratios", "targets")


def find_tables(data: Any) -> list[tuple[str, list[dict[str, Any]]]]:
    """Every table of a result, as (title, rows): the result itself if it is a list of dicts;
    else each top-level list of dicts, each dict of dicts (one row per key, `name` = the key) and
    each dict of numbers (rows `name`, `value`), in file order, `rows`/`results` first."""
    if isinstance(data, list):
        return [("", data)] if data and all(isinstance(r, dict) for r in data) else []
    if not isinstance(data, dict):
        return []
    found = []
    keys = [k for k in ("rows", "results") if k in data]
    keys += [k for k in data if k not in keys and k not in SKIP_TABLES]
    for key in keys:
        value = data[key]
        if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
            found.append((key, value))
        elif isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            found.append((key, [{"name": k, **v} for k, v in value.items()]))
        elif (
            isinstance(value, dict)
            and len(value) > 1
            and all(_is_number(v) for v in value.values())
        ):
            found.append((key, [{"name": k, "value": v} for k, v in value.items()]))
    return found


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def flatten(row: dict[str, Any]) -> dict[str, Any]:
    """Scalars as they are; dicts one level deep as `key/sub`; lists and deeper values dropped."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, dict):
            for sub, v in value.items():
                if _is_scalar(v):
                    out[f"{key}/{sub}"] = v
        elif _is_scalar(value):
            out[key] = value
    return out


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


TRANSPOSE_AT = 12  # more columns than this and at most 6 rows: one column per row instead
LABELS = ("variant", "name", "task", "model")


def table(rows: list[dict[str, Any]]) -> list[str]:
    flat = [flatten(r) for r in rows]
    columns: list[str] = []
    for r in flat:
        columns.extend(k for k in r if k not in columns)
    if not columns:
        return []
    if len(columns) > TRANSPOSE_AT and len(flat) <= 6:
        label = next((c for c in LABELS if c in columns), columns[0])
        heads = [fmt(r.get(label, f"row {i + 1}")) for i, r in enumerate(flat)]
        lines = ["| " + " | ".join([label, *heads]) + " |", "|" + "---|" * (len(flat) + 1)]
        lines += [
            "| " + " | ".join([c, *(fmt(r.get(c)) for r in flat)]) + " |"
            for c in columns
            if c != label
        ]
        return lines
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r.get(c)) for c in columns) + " |" for r in flat]
    return lines


def is_ratio(name: str) -> bool:
    return any(marker in name for marker in RATIO_MARKERS)


def ratio_lines(data: Any, rows: list[dict[str, Any]]) -> list[str]:
    lines = []
    if isinstance(data, dict) and isinstance(data.get("ratios"), dict):
        targets = data.get("targets") if isinstance(data.get("targets"), dict) else {}
        for key, value in data["ratios"].items():
            target = f" (target {targets[key]})" if key in targets else ""
            lines.append(f"- `{key}`: {fmt(value)}{target}")
    label = next((k for k in LABELS if rows and k in rows[0]), None)
    for i, row in enumerate(rows):
        for key, value in flatten(row).items():
            if is_ratio(key) and _is_number(value):
                who = row.get(label, f"row {i + 1}") if label else f"row {i + 1}"
                lines.append(f"- {who}: `{key}` = {fmt(value)}")
    return lines


def describe(script: Path) -> str:
    """The first paragraph of the script's docstring, or ''."""
    if not script.is_file():
        return ""
    import ast

    try:
        doc = ast.get_docstring(ast.parse(script.read_text())) or ""
    except SyntaxError:
        return ""
    return doc.split("\n\n")[0].strip()


# Commands of result files whose scripts do not record their own command (see docs/diagnostics.md).
KNOWN_COMMANDS = {
    "diagnose_calibration": "python bench/diagnose_calibration.py",
    "gradrank_smollm2_level1": "nice -n 5 python bench/gradrank_smollm2.py --levels 1 --seeds 0 "
    "--out bench/results/gradrank_smollm2_level1.json",
    "gradrank_tiny": "pgrpo gradrank --model tiny --prompts 4 --group-size 8 --max-new-tokens 16 "
    "--projection-dim 0 --seed 5 --json",
    "probe_bandit": "python bench/probe_bandit.py",
    "probe_tiny": "nice -n 10 python bench/probe_tiny.py",
}


def _file_time(path: Path) -> str:
    """When a result file without a date of its own was made: its last commit's time when git
    has it unchanged (the same in every clone; the file's mtime is the checkout's), else the
    time it was written."""
    git = ["git", "-C", str(path.parent)]
    try:
        clean = subprocess.run([*git, "diff", "--quiet", "HEAD", "--", path.name],
                               capture_output=True).returncode == 0  # fmt: skip
        when = subprocess.run([*git, "log", "-1", "--format=%ct", "--", path.name],
                              capture_output=True, text=True).stdout.strip()  # fmt: skip
    except OSError:
        clean, when = False, ""
    if clean and when:
        stamp = dt.datetime.fromtimestamp(int(when), dt.UTC).strftime("%Y-%m-%d %H:%M")
        return f"result file committed {stamp} UTC"
    stamp = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC).strftime("%Y-%m-%d %H:%M")
    return f"result file written {stamp} UTC"


def render_one(path: Path, data: Any, bench_dir: Path, outcome: RunOutcome | None) -> list[str]:
    """The section of one result file `path` (parsed: `data`)."""
    name = path.stem
    meta = _meta(data)
    lines = [f"## {name}", ""]
    desc = describe(bench_dir / f"{name}.py")
    if desc:
        lines += [desc, ""]
    command = meta.get("command", KNOWN_COMMANDS.get(name, "not recorded"))
    lines.append(f"- command: `{command}`")
    lines.append(f"- date: {meta.get('date', f'not recorded ({_file_time(path)})')}")
    machine = meta.get("machine", "2-core CPU, 24 GiB, no GPU" if name in KNOWN_COMMANDS else None)
    lines.append(f"- machine: {fmt(machine or 'not recorded')}")
    other = {k: v for k, v in meta.items() if k not in META_KEYS and _is_scalar(v)}
    if other:
        lines.append("- settings: " + ", ".join(f"{k}={fmt(v)}" for k, v in other.items()))
    if outcome is not None and outcome.error:
        reason = outcome.error.strip().splitlines()[-1] if outcome.error.strip() else "?"
        lines.append(
            f"- **the last `run_all` run of this benchmark failed** ({reason}); "
            "the table is the previous result"
        )
    tables = find_tables(data)
    if not tables:
        lines += ["", "(no table in the result)"]
    for title, rows in tables:
        heading = [f"### {title}", ""] if title not in ("", "rows", "results") else []
        lines += [""] + heading + table(rows)
    ratios = ratio_lines(data, [row for _, rows in tables for row in rows])
    if ratios:
        lines += ["", "Ratios vs the anchor:", ""] + ratios
    return lines + [""]


def render(results_dir: Path, bench_dir: Path, outcomes: dict[str, RunOutcome]) -> str:
    files = sorted(results_dir.glob("*.json"))
    scripts = {p.stem for p in discover(bench_dir)}
    lines = [
        "# Benchmarks",
        "",
        "Generated by `python bench/run_all.py` from `bench/results/*.json` "
        f"({dt.date.today().isoformat()}); do not edit by hand: rerun a benchmark, then "
        "`python bench/run_all.py --from-results`. Each section gives the command, date and "
        "machine its numbers were measured with.",
        "",
    ]
    missing = sorted(scripts - {f.stem for f in files})
    if missing:
        lines += ["Benchmarks without a result yet:", ""]
        for m in missing:
            error = outcomes[m].error.strip() if m in outcomes else ""
            note = f" (last run failed: {error.splitlines()[-1]})" if error else ""
            lines.append(f"- `bench/{m}.py`{note}")
        lines.append("")
    for f in files:
        try:
            data = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            lines += [f"## {f.stem}", "", f"(unreadable result {f.name}: {exc})", ""]
            continue
        lines += render_one(f, data, bench_dir, outcomes.get(f.stem))
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from-results", action="store_true", help="Do not run; only collect.")
    parser.add_argument("--only", default=None, help="Comma-separated benchmark names to run.")
    parser.add_argument("--timeout", type=float, default=1800.0, help="Seconds per benchmark.")
    parser.add_argument("--nice", type=int, default=10, help="nice level of the runs (0: none).")
    parser.add_argument("--bench-dir", type=Path, default=BENCH)
    parser.add_argument("--results-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=DOC)
    args = parser.parse_args(argv)
    results_dir = args.results_dir or args.bench_dir / "results"
    scripts = discover(args.bench_dir)
    if args.only:
        wanted = {n.strip() for n in args.only.split(",") if n.strip()}
        unknown = wanted - {s.stem for s in scripts}
        if unknown:
            parser.error(
                f"unknown benchmark(s) {sorted(unknown)}; available: "
                + ", ".join(s.stem for s in scripts)
            )
        scripts = [s for s in scripts if s.stem in wanted]
    outcomes: dict[str, RunOutcome] = {}
    if not args.from_results:
        for script in scripts:
            print(f"running {script.name} ...", flush=True)
            out = run_script(script, results_dir, args.timeout, args.nice)
            outcomes[out.name] = out
            status = "ok" if not out.error else "FAILED: " + out.error.strip().splitlines()[-1]
            print(f"  {' '.join(out.command)}  ({out.seconds:.0f} s) {status}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(results_dir, args.bench_dir, outcomes))
    print(f"wrote {args.out}")
    return 1 if any(o.error for o in outcomes.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
