"""Benchmark the reward-curve fits and forecasts on the synthetic suite.

    python bench/fit.py [--n-per-shape 10] [--seed 0] [--steps 1000]

Prints two tables and writes bench/results/fit.json:
1. median wall time of one fit of a `--steps`-step curve (rom with the lr schedule, rom without
   it (closed form), exponential, logistic), over the suite's curves;
2. per curve shape: R^2 of rom vs exponential (and the fraction of curves where rom >= exp),
   the median absolute error of the forecast of the second half's mean from the first half for
   rom, last-window mean (last 10% of the prefix) and exponential, and the coverage of the 90%
   band of that mean and of the per-step band.
The suite: the exact recursion with warm-up + cosine/linear lr decay, one prompt per step
(binomial noise of G = 2..6 samples, sd 0.2-0.4), shapes slow start / early plateau / still
rising / oscillating (pgrpo.dynamics.synthetic). A second table repeats (2) on curves the model
does NOT generate (logistic, power law, rise-then-decline, step), with the same noise and lr.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from pgrpo.dynamics import evaluate_forecast, fit_curve, synthetic_suite
from pgrpo.dynamics.synthetic import OUT_OF_FAMILY, SHAPES, out_of_family_suite

OUT = Path(__file__).resolve().parent / "results" / "fit.json"
# the ROM forecaster on curves the ROM generates; real runs: bench/forecast_real.py (level_gain)
METHOD = "rom_blend"


def _time(fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def timing(suite) -> dict[str, float]:
    cases = {
        "rom (lr schedule)": lambda c: fit_curve(c.step, c.reward, "rom", lr=c.lr),
        "rom (no lr, closed form)": lambda c: fit_curve(c.step, c.reward, "rom"),
        "exponential": lambda c: fit_curve(c.step, c.reward, "exponential"),
        "logistic": lambda c: fit_curve(c.step, c.reward, "logistic"),
    }
    return {
        name: 1000 * float(np.median([_time(lambda c=c, fn=fn: fn(c)) for c in suite]))
        for name, fn in cases.items()
    }


def accuracy(suite, shapes) -> dict[str, dict[str, float]]:
    rows: dict[str, list[tuple]] = {s: [] for s in shapes}
    for c in suite:
        rom = fit_curve(c.step, c.reward, "rom", lr=c.lr)
        exp = fit_curve(c.step, c.reward, "exponential")
        ev = evaluate_forecast(c.step, c.reward, 0.5, lr=c.lr, method=METHOD)
        fc = ev.forecast
        future = c.reward[-fc.future_step.size :]
        step_cov = float(np.mean((future >= fc.band_lo) & (future <= fc.band_hi)))
        rows[c.shape].append((rom.r2, exp.r2, rom.sse <= exp.sse, ev.error,
                              ev.baseline_errors["last_window_mean"],
                              ev.baseline_errors["exponential"], ev.covered, step_cov))  # fmt: skip
    out = {}
    for shape, r in [*rows.items(), ("all", [x for v in rows.values() for x in v])]:
        a = np.array(r, dtype=float)
        out[shape] = {
            "n": len(r),
            "r2_rom_median": float(np.median(a[:, 0])),
            "r2_exponential_median": float(np.median(a[:, 1])),
            "frac_rom_at_least_exponential": float(a[:, 2].mean()),
            "forecast_error_rom_median": float(np.median(a[:, 3])),
            "forecast_error_last_window_mean_median": float(np.median(a[:, 4])),
            "forecast_error_exponential_median": float(np.median(a[:, 5])),
            "frac_rom_beats_last_window_mean": float(np.mean(a[:, 3] < a[:, 4])),
            "mean_band_coverage_90": float(a[:, 6].mean()),
            "step_band_coverage_90": float(a[:, 7].mean()),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-per-shape", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=1000)
    args = ap.parse_args()
    suite = synthetic_suite(args.n_per_shape, seed=args.seed, n_steps=args.steps)
    console = Console(width=150)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    times = timing(suite)
    t = Table(title=f"median fit time, {args.steps}-step curve ({len(suite)} curves, "
                    f"best of 3; load average {load:.1f})")  # fmt: skip
    t.add_column("model")
    t.add_column("median ms", justify="right")
    for name, ms in times.items():
        t.add_row(name, f"{ms:.1f}")
    console.print(t)
    acc = accuracy(suite, SHAPES)
    ood = out_of_family_suite(args.n_per_shape, seed=args.seed, n_steps=args.steps)
    acc_ood = accuracy(ood, OUT_OF_FAMILY)
    _print_accuracy(console, acc, "model family (the exact recursion)")
    _print_accuracy(console, acc_ood, "out of family (logistic, power law, decline, step)")
    result = {
        "command": f"python bench/fit.py --n-per-shape {args.n_per_shape} --seed {args.seed} "
        f"--steps {args.steps}",  # fmt: skip
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load average {load:.1f}",
        "fit_time_ms_median": times,
        "rows": [{"suite": "family", "shape": k, **v} for k, v in acc.items()]
        + [{"suite": "out_of_family", "shape": k, **v} for k, v in acc_ood.items()],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    console.print(f"wrote {OUT}")


def _print_accuracy(console: Console, acc: dict, title: str) -> None:
    t = Table(title=f"{title}: fit quality and forecast of the second half's mean")
    cols = ["shape", "n", "R2 rom", "R2 exp", "rom>=exp", "err rom", "err last-win",
            "err exp", "rom<last-win", "cover mean 90%", "cover step 90%"]  # fmt: skip
    for c in cols:
        t.add_column(c, justify="right")
    keys = ["n", "r2_rom_median", "r2_exponential_median", "frac_rom_at_least_exponential",
            "forecast_error_rom_median", "forecast_error_last_window_mean_median",
            "forecast_error_exponential_median", "frac_rom_beats_last_window_mean",
            "mean_band_coverage_90", "step_band_coverage_90"]  # fmt: skip
    for shape, row in acc.items():
        t.add_row(shape, *[f"{row[k]:.4g}" for k in keys])
    console.print(t)


if __name__ == "__main__":
    main()
