"""How often can any forecaster beat the last-10 mean on a run that does not move?

    python bench/win_ceiling.py [--curves 20000] [--out PATH]

Issue #13's forecast bar asks for a forecast of the mean after the cut (cut 0.5) that is closer
than the mean of the last 10 points before it on at least two thirds of runs. On a flat run
(a constant level plus noise) nothing beats the best estimate of the level, so the share of
such runs on which even the best forecaster wins is a ceiling for that bar, and it depends on
the run's length: the last-10 mean's own noise is fixed, the best estimate's shrinks with the
prefix. Simulated here on flat curves of n points with stationary AR(1) noise (rho 0, 0.3, 0.6;
unit variance), scored exactly as the real-run benchmarks score (|prediction - mean after the
cut|; a tie is not a win) for:

- `prefix_mean`: the mean of all points before the cut (the best unbiased estimate of the level
  under white noise);
- `oracle`: the conditional mean of the future mean given the prefix when the level and rho
  are known: level + (y_cut - level) * mean_h(rho^h), h = 1..m (for rho = 0, the level itself):
  no forecaster that must estimate them does better on average.

Writes bench/results/win_ceiling.json (rows: n, rho, each forecaster's win share).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "win_ceiling.json"
LENGTHS = (25, 30, 40, 50, 75, 100, 150, 200, 300, 500)
RHOS = (0.0, 0.3, 0.6)
CUT = 0.5
LAST = 10


def ar1(rng: np.random.Generator, curves: int, n: int, rho: float) -> np.ndarray:
    """[curves, n] stationary AR(1) noise with unit variance."""
    e = rng.standard_normal((curves, n))
    y = np.empty_like(e)
    y[:, 0] = e[:, 0]
    s = np.sqrt(1.0 - rho * rho)
    for t in range(1, n):
        y[:, t] = rho * y[:, t - 1] + s * e[:, t]
    return y


def win_shares(y: np.ndarray, rho: float) -> dict[str, float]:
    """Share of curves ([curves, n], level 0) on which each forecaster beats the last-10 mean."""
    n = y.shape[1]
    i = int(round(CUT * n))
    m = n - i
    future = y[:, i:].mean(axis=1)
    last = np.abs(y[:, max(i - LAST, 0) : i].mean(axis=1) - future)
    reach = float(np.mean(rho ** np.arange(1, m + 1)))
    preds = {"prefix_mean": y[:, :i].mean(axis=1), "oracle": y[:, i - 1] * reach}
    return {k: float(np.mean(np.abs(p - future) < last)) for k, p in preds.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--curves", type=int, default=20000)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    rows = []
    print(f"{'n':>4} {'rho':>4} {'prefix_mean':>12} {'oracle':>8}")
    for rho in RHOS:
        for n in LENGTHS:
            s = win_shares(ar1(rng, args.curves, n, rho), rho)
            rows.append({"n": n, "rho": rho, **s})
            print(f"{n:4d} {rho:4.1f} {s['prefix_mean']:12.3f} {s['oracle']:8.3f}")
    cmd = "python bench/win_ceiling.py " + " ".join(sys.argv[1:] if argv is None else argv)
    doc = {
        "command": cmd.strip(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "curves": args.curves, "cut": CUT, "rows": rows,
    }  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
