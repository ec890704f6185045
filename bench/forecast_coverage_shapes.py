"""Coverage of the forecast's 90% band of the mean after the cut, by the shape of the run, on
simulated runs with a known truth.

    python bench/forecast_coverage_shapes.py [--runs 200] [--seed 11] [--out PATH]

The band is calibrated on real runs as a whole (`ForecastPrior.band_scale_by_cut`, learned on
the corpus): its coverage is marginal over that mix. A review (2026-12-05) measured it by shape;
this is that measurement, kept. Each run: n in [150, 300) batch means of N in {32, 64, 128} 0/1
rewards whose success rate p(t) is

- `exponential`: 0.1 -> 0.8, tau uniform in [0.1, 0.6] n (the step clock);
- `cosine`: the same rise on the clock of a warm-up (10%) + cosine lr schedule, the lr passed;
- `takeoff`: a floor of 0.02, then a logistic rise of 0.7 centred in [0.2, 0.6] n;
- `decline`: 0.7, falling linearly from mid-run by 0.12-0.4 (cut 0.5 sees none of it);

forecast by the default (`consensus`, reward_range (0, 1)) at cuts 0.3, 0.5 and 0.8, and, on
`exponential`, by `rom_blend` (its model family) with and without the blend. Reported per cell:
the share of bands holding the observed mean after the cut and the true one (the mean of p),
and the median band width. Writes bench/results/forecast_coverage_shapes.json.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from pgrpo.dynamics import forecast

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "forecast_coverage_shapes.json"
SHAPES = ("exponential", "cosine", "takeoff", "decline")
CUTS = (0.3, 0.5, 0.8)


def run(shape: str, rng: np.random.Generator):
    """(step [n], reward [n], p [n], lr [n] or None) of one simulated run."""
    n = int(rng.integers(150, 300))
    t = np.arange(1, n + 1, dtype=float)
    nb = int(rng.choice([32, 64, 128]))
    lr = None
    if shape in ("exponential", "cosine"):
        clock = t
        if shape == "cosine":
            warm = int(0.1 * n)
            lr = 1e-6 * np.where(t <= warm, t / warm,
                                 0.5 * (1 + np.cos(np.pi * (t - warm) / (n - warm))))  # fmt: skip
            clock = np.cumsum(lr) / lr.max()
        p = 0.1 + 0.7 * (1 - np.exp(-clock / (rng.uniform(0.1, 0.6) * n)))
    elif shape == "takeoff":
        mid, width = rng.uniform(0.2, 0.6) * n, rng.uniform(0.03, 0.1) * n
        p = 0.02 + 0.7 / (1 + np.exp(-(t - mid) / width))
    else:
        p = 0.7 - 0.4 * np.clip((t - 0.5 * n) / (0.5 * n), 0, 1) * rng.uniform(0.3, 1)
    return t, rng.binomial(nb, p) / nb, p, lr


def cell(rows: list[tuple[bool, bool, float]]) -> dict[str, float]:
    a = np.array(rows, dtype=float)
    return {"runs": len(rows), "covers_observed": float(a[:, 0].mean()),
            "covers_true": float(a[:, 1].mean()),
            "median_width": float(np.median(a[:, 2]))}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200, help="runs per shape and cut")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be >= 1")
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    rng = np.random.default_rng(args.seed)
    t0 = time.time()
    out: list[dict] = []
    methods = [("consensus", s, {}) for s in SHAPES] + [
        ("rom_blend (blend)", "exponential", {"method": "rom_blend", "combine": True}),
        ("rom_blend (no blend)", "exponential", {"method": "rom_blend", "combine": False}),
    ]
    print(f"{'forecast':22s} {'shape':12s} {'cut':>4s} {'covers obs':>10s} {'covers true':>11s} "
          f"{'width':>6s}")  # fmt: skip
    for name, shape, kw in methods:
        for c in CUTS:
            rows = []
            for _ in range(args.runs):
                t, y, p, lr = run(shape, rng)
                fc = forecast(t, y, c, lr=lr, reward_range=(0.0, 1.0), **kw)
                lo, hi = fc.mean_band
                truth = float(np.mean(p[t > fc.cut_step]))
                rows.append((lo <= fc.observed_mean <= hi, lo <= truth <= hi, hi - lo))
            res = {"forecast": name, "shape": shape, "cut": c, **cell(rows)}
            out.append(res)
            print(f"{name:22s} {shape:12s} {c:4.1f} {res['covers_observed']:10.2f} "
                  f"{res['covers_true']:11.2f} {res['median_width']:6.3f}", flush=True)  # fmt: skip
    write_results(args.out, "forecast_coverage_shapes.py", argv, seconds=round(time.time() - t0, 1),
                  level=0.9, rows=out)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
