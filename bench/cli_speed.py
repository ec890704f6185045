"""How fast the log-analysis CLI answers (issue #14.4): start-up included, each command in a fresh
process, wall time, CPU time (user + sys of the child: the honest figure on a shared machine)
and peak RSS from `os.wait4`.

    nice -n 10 python bench/cli_speed.py               # writes bench/results/cli_speed.json
    python bench/cli_speed.py --repeats 3 --steps 200000

Rows: `pgrpo --version`; `pgrpo fit` of a 1,000-step log, with fit.png and with `--no-plot`,
against the time Python needs to `import numpy, scipy.optimize, scipy.stats` (target <= 1.5x);
`pgrpo diagnose` of the same log (no target: the cold cost of its null curves);
`fit` (<= 2 s), `diagnose` (<= 3 s) and `report` (<= 5 s) of a generated 200,000-step pgrpo
log, each < 300 MB peak RSS.
The logs are generated here (seeded): a damped-oscillation reward with batch noise and the
~30 keys the trainer logs per step (docs/trainer.md), warm-up + cosine learning rate.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "bench" / "results" / "cli_speed.json"
BASELINE = "import numpy, scipy.optimize, scipy.stats"
TARGETS = {
    f"{cmd}_200k{kind}": (secs, 300.0)
    for cmd, secs in (("fit", 2.0), ("diagnose", 3.0), ("report", 5.0))
    for kind in ("", "_const_lr")
}
RATIO_TARGET = 1.5


def write_log(path: Path, n: int, seed: int = 0, schedule: bool = True) -> Path:
    """A pgrpo metrics.jsonl of n steps (+ config.yaml), as the trainer writes it; schedule:
    warm-up + cosine lr (the fit then also runs the lr-schedule recursion, bin to bin on a
    long log: `dynamics.binned_recursion.schedule_response`), else constant."""
    rng = np.random.default_rng(seed)
    t = np.arange(1, n + 1, dtype=float)
    mean = 0.8 - 0.6 * np.exp(-t / (0.15 * n)) * np.cos(t / (0.05 * n))
    reward = np.clip(mean + rng.normal(0, 0.08, n), 0, 1)
    warm = max(1, n // 100)
    lr = 1e-6 * np.minimum(1.0, t / warm) * 0.5 * (1 + np.cos(np.pi * t / n))
    lr = lr if schedule else np.full(n, 1e-6)
    noise = rng.random((n, 6))
    path.mkdir(parents=True, exist_ok=True)
    with (path / "metrics.jsonl").open("w") as fh:
        for i in range(n):
            r = float(round(reward[i], 4))
            rec = {
                "step": i + 1, "reward": r, "reward_std": 0.3, "frac_reward_zero_std": 0.2,
                "degeneracy/all_pass": 0.1, "degeneracy/all_fail": 0.1,
                "degeneracy/iid_prediction": 0.2, "reward_within_group_std": 0.25,
                "loss": float(noise[i, 0] - 0.5) * 0.02, "grad_norm": 1 + float(noise[i, 1]),
                "learning_rate": float(lr[i]), "refresh_lag": 0.0, "entropy": 0.9,
                "kl": 0.001, "clip_ratio/region_mean": 0.0, "completions/mean_length": 120.0,
                "completions/clipped_ratio": 0.0, "completions/empty": 0, "group_size": 8,
                "batch_prompts": 8, "refresh_interval": 1, "beta1": 0.9, "optimizer_step": i + 1,
                "reward_errors": 0, "reward_timeouts": 0, "time/generate_s": 1 + float(noise[i, 2]),
                "time/score_s": 0.01, "time/update_s": 2 + float(noise[i, 3]),
                "tokens_per_second": 300 + 10 * float(noise[i, 4]),
            }  # fmt: skip
            fh.write(json.dumps(rec) + "\n")
    (path / "config.yaml").write_text("optim:\n  beta1: 0.9\ngrpo:\n  refresh_interval: 1\n")
    return path


def run_once(argv: list[str]) -> dict[str, float]:
    """One fresh process: wall s, cpu s (user + sys) and peak RSS MB of the child."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MPLBACKEND": "Agg"}
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-400:]
            raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {tail}")
    cpu = usage.ru_utime + usage.ru_stime
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": usage.ru_maxrss / 1024}


def measure(name: str, argv: list[str], repeats: int, tmp: str) -> dict[str, float | str]:
    runs = [run_once(argv) for _ in range(repeats)]
    shown = "python " + " ".join(argv[1:]).replace(tmp, "$TMP")
    row: dict[str, float | str] = {"name": name, "command": shown, "repeats": repeats}
    for key in ("wall_s", "cpu_s", "peak_rss_mb"):
        row[key] = statistics.median(r[key] for r in runs)
    row["cpu_s_min"] = min(r["cpu_s"] for r in runs)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="fresh processes per row (median)")
    ap.add_argument("--steps", type=int, default=200_000, help="length of the long log")
    ap.add_argument("--out", type=Path, default=RESULT)
    args = ap.parse_args()
    py, cli = sys.executable, [sys.executable, "-m", "pgrpo.cli"]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        short, long = write_log(tmp_path / "run1k", 1000), write_log(tmp_path / "long", args.steps)
        const = write_log(tmp_path / "const", args.steps, schedule=False)
        out = str(tmp_path / "out")
        long_runs = max(1, min(args.repeats, 3))
        rows = [
            measure("baseline_import", [py, "-c", BASELINE], args.repeats, tmp),
            measure("version", [*cli, "--version"], args.repeats, tmp),
            measure("fit_1k", [*cli, "fit", str(short), "--out", out], args.repeats, tmp),
            measure(
                "fit_1k_no_plot",
                [*cli, "fit", str(short), "--out", out, "--no-plot"],
                args.repeats,
                tmp,
            ),
            measure("diagnose_1k", [*cli, "diagnose", str(short)], args.repeats, tmp),
            measure("fit_200k", [*cli, "fit", str(long), "--out", out], long_runs, tmp),
            measure("diagnose_200k", [*cli, "diagnose", str(long)], long_runs, tmp),
            measure("report_200k", [*cli, "report", str(long), "--out", out], long_runs, tmp),
            measure("fit_200k_const_lr", [*cli, "fit", str(const), "--out", out], long_runs, tmp),
            measure("diagnose_200k_const_lr", [*cli, "diagnose", str(const)], long_runs, tmp),
            measure(
                "report_200k_const_lr", [*cli, "report", str(const), "--out", out], long_runs, tmp
            ),
        ]
        size_mb = (long / "metrics.jsonl").stat().st_size / 2**20
    by = {r["name"]: r for r in rows}
    base = by["baseline_import"]
    ratios = {
        f"{name}_vs_import_{k}": float(by[name][k]) / float(base[k])
        for name in ("fit_1k", "fit_1k_no_plot")
        for k in ("wall_s", "cpu_s")
    }
    checks = {
        f"{name}_vs_import_cpu_s": ratios[f"{name}_vs_import_cpu_s"] <= RATIO_TARGET
        for name in ("fit_1k", "fit_1k_no_plot")
    }
    for name, (secs, mb) in TARGETS.items():
        checks[f"{name}_cpu"] = float(by[name]["cpu_s"]) <= secs
        checks[f"{name}_wall"] = float(by[name]["wall_s"]) <= secs
        checks[f"{name}_rss"] = float(by[name]["peak_rss_mb"]) < mb
    result = {
        "command": "python bench/cli_speed.py " + " ".join(sys.argv[1:]),
        "date": dt.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load average "
        f"{load_before[0]:.1f} before / {os.getloadavg()[0]:.1f} after",
        "long_log": {
            "steps": args.steps,
            "mb": round(size_mb, 1),
            "keys": 29,
            "lr": "warm-up + cosine (rows *_200k), constant (rows *_const_lr)",
        },
        "targets": {
            "fit_1k_vs_import": RATIO_TARGET,
            **{k: v[0] for k, v in TARGETS.items()},
            "peak_rss_mb": 300,
        },  # fmt: skip
        "rows": rows,
        "ratios": ratios,
        "checks": checks,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(f"{'row':<24}{'wall s':>9}{'cpu s':>9}{'peak MB':>9}  command")
    for r in rows:
        print(f"{r['name']:<24}{r['wall_s']:>9.2f}{r['cpu_s']:>9.2f}{r['peak_rss_mb']:>9.0f}  "
              f"{r['command'][:70]}")  # fmt: skip
    for k, v in ratios.items():
        print(f"{k}: {v:.2f} (target <= {RATIO_TARGET})")
    print(", ".join(f"{k}={'ok' if v else 'MISSED'}" for k, v in checks.items()))
    print(f"wrote {args.out} ({result['machine']})")
    if not math.isfinite(sum(ratios.values())):
        sys.exit(1)


if __name__ == "__main__":
    main()
