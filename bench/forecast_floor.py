"""How much of the forecast's error no forecaster can remove: the noise of the observed mean.

    python bench/forecast_floor.py DIR [DIR ...] [--cut 0.5] [--out PATH]

The forecast is scored by |predicted - observed mean after the cut| / std of the whole run
(bench/forecast_pooled.py). Even a forecaster that knew the true mean curve misses the observed
mean by its batch noise: about sigma / sqrt(m) over the m points after the cut (white noise;
sigma^2 = mean(first differences^2) / 2, `curvestats.noise_sd`). Per folder this prints the
median |error| / std of such a perfect forecaster (the median over the runs of |N(0, floor)|,
simulated 4,000 times, with its 90% range), and of a perfect *level* read from the last 10
points before the cut on a run that does not move (noise sigma sqrt(1/10 + 1/m)): what the
last-10 mean would score if the runs had no drift. What either is below the measured errors
is drift after the cut. Writes bench/results/forecast_floor.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from pgrpo.diagnose.curvestats import noise_sd
from pgrpo.logs import read_log

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "bench" / "results" / "forecast_floor.json"
DRAWS = 4000


def run_floor(y: np.ndarray, cut: float) -> dict:
    """The noise-only error scales of one run, in units of its std: [n] -> dict."""
    i = int(round(cut * y.size))
    m = y.size - i
    sigma = float(noise_sd(y[None, :])[0])
    std = float(np.std(y)) or 1.0
    return {"n": int(y.size), "perfect": sigma / np.sqrt(m) / std,
            "level10": sigma * np.sqrt(1.0 / min(10, i) + 1.0 / m) / std}  # fmt: skip


def median_abs_normal(scales: np.ndarray, rng) -> tuple[float, list[float]]:
    """The median over runs of |N(0, scale)|, simulated: (its median, its 5-95% range)."""
    meds = np.median(np.abs(rng.standard_normal((DRAWS, scales.size)) * scales), axis=1)
    return float(np.median(meds)), [float(q) for q in np.quantile(meds, [0.05, 0.95])]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--cut", type=float, default=0.5)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows, summary = [], {}
    print("| folder | runs | perfect forecaster: median (90% range) | perfect level from 10 "
          "points, no drift |")  # fmt: skip
    print("|---|---|---|---|")
    for folder in args.folders:
        runs = json.loads((folder / "index.json").read_text())["runs"]
        got = [{"folder": str(folder), "run": meta["name"],
                **run_floor(np.asarray(read_log(folder / meta["csv"]).reward, float), args.cut)}
               for meta in runs]  # fmt: skip
        rows += got
        perfect = median_abs_normal(np.array([r["perfect"] for r in got]), rng)
        level10 = median_abs_normal(np.array([r["level10"] for r in got]), rng)
        summary[str(folder)] = {"runs": len(got), "perfect": perfect, "level10": level10}
        print(f"| {folder} | {len(got)} | {perfect[0]:.3f} ({perfect[1][0]:.3f}-"
              f"{perfect[1][1]:.3f}) | {level10[0]:.3f} |")  # fmt: skip
    write_results(args.out, "forecast_floor.py", argv, cut=args.cut, summary=summary, rows=rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
