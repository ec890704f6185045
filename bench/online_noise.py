"""The trainer's online forecast on reward curves with a known truth: how often it warns that K
reaches K* on pure batch noise, and how often it fits a real rise.

    python bench/online_noise.py [--runs 100] [--steps 100] [--out PATH]

Each run feeds `pgrpo.train.online.OnlineForecaster` (sgd_momentum, beta1 0.9, K = 4,
`run.forecast_every` 10, B x G = 8 x 4) one batch mean of 32 0/1 rewards per step:

- `noise`: a constant success rate (0.5, 0.1 or 0.9): nothing to learn, so any K* warning is
  a false alarm, and any logged stiffness or timescale a reading of noise;
- `rise`: a success rate rising 0.2 -> 0.8 with tau of 5, 15 or 40 log steps: the share of
  forecasts (every 10 steps) that fit the curve (progress not `flat` / `too_short`).

Prints one table; writes bench/results/online_noise.json (command, date, rows). Run it at an
earlier commit (a git worktree on PYTHONPATH) to compare.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

from pgrpo.train.config import load_config
from pgrpo.train.online import OnlineForecaster

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "online_noise.json"
N = 32
CASES = {"noise p=0.5": ("noise", 0.5), "noise p=0.1": ("noise", 0.1),
         "noise p=0.9": ("noise", 0.9), "rise tau=5": ("rise", 5.0),
         "rise tau=15": ("rise", 15.0), "rise tau=40": ("rise", 40.0)}  # fmt: skip


def rates(kind: str, value: float, steps: int) -> np.ndarray:
    """Per-step success rate of a case: constant, or 0.2 -> 0.8 with tau = value log steps."""
    t = np.arange(steps, dtype=float)
    return np.full(steps, value) if kind == "noise" else 0.8 - 0.6 * np.exp(-t / value)


def one_run(p: np.ndarray, rng: np.random.Generator, cfg) -> tuple[bool, int, int]:
    """(warned, forecasts logged, forecasts that fitted a curve) for one simulated run."""
    f = OnlineForecaster(cfg, [])
    logged = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for s, r in enumerate(rng.binomial(N, p) / N, 1):
            logged.append(f.update({"step": s, "reward": float(r), "learning_rate": 1e-3}))
    warned = any("stability threshold" in str(w.message) for w in caught)
    out = [o for o in logged if o and "forecast/r2" in o]
    fitted = sum(o.get("forecast/progress", "fitted") not in ("flat", "too_short") for o in out)
    return warned, len(out), fitted


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=100, help="runs per case")
    ap.add_argument("--steps", type=int, default=100, help="logged steps per run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.runs < 1 or args.steps < 10:
        ap.error("--runs must be >= 1 and --steps >= 10")
    cfg = load_config(None, [f"steps={args.steps}", "forecast_every=10", "refresh_interval=4",
                             "optim.name=sgd_momentum", "optim.beta1=0.9", "batch_prompts=8",
                             "group_size=4"])  # fmt: skip
    rng = np.random.default_rng(args.seed)
    rows = []
    print(f"{'case':14s} {'runs':>5s} {'K* warning':>11s} {'forecasts fitted':>17s}")
    for name, (kind, value) in CASES.items():
        res = [one_run(rates(kind, value, args.steps), rng, cfg) for _ in range(args.runs)]
        warned = sum(r[0] for r in res)
        logged, fitted = sum(r[1] for r in res), sum(r[2] for r in res)
        rows.append({"case": name, "runs": args.runs, "warned": warned, "forecasts": logged,
                     "fitted": fitted})  # fmt: skip
        print(f"{name:14s} {args.runs:5d} {warned:5d} ({warned / args.runs:4.0%}) "
              f"{fitted:7d}/{logged:<7d}")  # fmt: skip
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, cwd=Path(sys.modules[OnlineForecaster.__module__].__file__)
                          .parent).stdout.strip()  # fmt: skip
    write_results(args.out, "online_noise.py", argv, library_commit=head, rows=rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
