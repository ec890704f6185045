"""How often can any forecast beat the last-10 mean? The noise ceiling of issue #13's win bar.

    python bench/forecast_ceiling.py DIR [DIR ...] [--cut 0.5] [--out PATH]

The bar asks a forecast of the mean after the cut to be closer to it than the mean of the last 10
points before the cut on at least two thirds of real runs. On a run that stays flat, the best a
forecast can do is to estimate the level with less noise than those 10 points: the mean of the
whole prefix. Even that forecast wins only with a probability set by the lengths (m points
before the cut, h after) and the noise's autocorrelation: the ceiling `flat_win_probability`
gives exactly for Gaussian AR(1) noise. On a run that drifts after the cut, a win needs the
drift forecast as well; the ceiling is then no bound, and the real-run columns show what the
prefix mean (a flat forecast) and the default forecast (`consensus`) got.

Per run: m, h, the noise's lag-1 autocorrelation rho (of the prefix about a straight line,
clipped to [0, 0.95]); the ceiling at rho 0 (white noise: the most a longer window can gain) and
at that rho; and, on the real curve, whether the prefix mean and the default forecast beat the
last-10 mean (|error| strictly smaller, as bench/forecast_pooled.py counts a win). Per folder
and over all: the expected wins at each ceiling (the sum of the probabilities) and the wins
counted. Writes bench/results/forecast_ceiling.json.
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import numpy as np

from pgrpo.dynamics import forecast

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402
from forecast_real import load_corpus  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "bench" / "results" / "forecast_ceiling.json"
LAST = 10
RHO_MAX = 0.95


def ar1_covariance(n: int, rho: float) -> np.ndarray:
    """Covariance of n steps of unit-variance AR(1) noise: [n, n], rho^|i - j|."""
    i = np.arange(n)
    return rho ** np.abs(i[:, None] - i[None, :]) if rho > 0 else np.eye(n)


def flat_win_probability(m: int, h: int, rho: float = 0.0, last: int = LAST) -> float:
    """P(|prefix mean - mean after| < |last-`last` mean - mean after|) on a flat run of Gaussian
    AR(1) noise (m points before the cut, h after; rho in [0, 1)). X = a.e and Y = b.e are the two
    errors (a, b: [m + h] weights); with U = Y - X and V = Y + X jointly Gaussian,
    P(X^2 < Y^2) = P(U V > 0) = 1/2 + arcsin(corr(U, V)) / pi. 0 where the prefix holds no
    more than `last` points (the two forecasts are then the same and a tie is no win)."""
    if m <= last or h < 1:
        return 0.0
    n = m + h
    a = np.zeros(n)
    a[:m] = 1.0 / m
    a[m:] = -1.0 / h
    b = np.zeros(n)
    b[m - last : m] = 1.0 / last
    b[m:] = -1.0 / h
    s = ar1_covariance(n, rho)
    u, v = b - a, b + a
    cuv, uu, vv = u @ s @ v, u @ s @ u, v @ s @ v
    if uu <= 0 or vv <= 0:
        return 0.0
    r = float(np.clip(cuv / math.sqrt(uu * vv), -1.0, 1.0))
    return 0.5 + math.asin(r) / math.pi


def prefix_rho(p: np.ndarray) -> float:
    """Lag-1 autocorrelation of a prefix [m] about its least-squares line, in [0, RHO_MAX]."""
    t = np.arange(p.size)
    r = p - np.polyval(np.polyfit(t, p, 1), t)
    den = float(r @ r)
    rho = float(r[1:] @ r[:-1]) / den if den > 0 else 0.0
    return min(max(rho, 0.0), RHO_MAX)


def run_row(run: dict, folder: str, cut: float) -> dict:
    """One run: its lengths, rho, the two ceilings, and the real wins of the prefix mean and of
    the default forecast against the last-10 mean."""
    log, meta = run["log"], run["meta"]
    y = np.asarray(log.reward, dtype=float)
    m = int(round(cut * y.size))
    p, after = y[:m], y[m:]
    obs, sd = float(np.mean(after)), float(np.std(y)) or 1.0
    kw = {k: v for k, v in run["inputs"].items() if k != "optimizer"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = forecast(log.step, y, cut, method="consensus", **kw)
    last10 = float(np.mean(p[-LAST:]))
    base = abs(last10 - obs) / sd
    rho = prefix_rho(p)
    return {
        "folder": folder,
        "run": meta["name"],
        "repo": meta["repo"],
        "m": m,
        "h": int(after.size),
        "rho": rho,
        "ceiling_white": flat_win_probability(m, after.size, 0.0),
        "ceiling_rho": flat_win_probability(m, after.size, rho),
        "prefix_mean_wins": bool(abs(float(np.mean(p)) - obs) / sd < base),
        "consensus_wins": bool(abs(float(fc.predicted_mean) - obs) / sd < base),
    }


def summarise(rows: list[dict]) -> dict:
    n = len(rows)
    return {
        "runs": n,
        "expected_wins_white": float(sum(r["ceiling_white"] for r in rows)),
        "expected_wins_rho": float(sum(r["ceiling_rho"] for r in rows)),
        "prefix_mean_wins": int(sum(r["prefix_mean_wins"] for r in rows)),
        "consensus_wins": int(sum(r["consensus_wins"] for r in rows)),
        "bar_wins": math.ceil(2 * n / 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", type=Path, nargs="+", help="corpus folders (index.json + CSVs)")
    ap.add_argument("--cut", type=float, default=0.5)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    for d in args.folders:
        if not (d / "index.json").is_file():
            print(f"error: {d} has no index.json; pass folders in the corpus layout "
                  "(index.json with `runs`, one CSV per run)", file=sys.stderr)  # fmt: skip
            return 2
    if not 0.0 < args.cut < 1.0:
        ap.error(f"--cut {args.cut}: the cut must be a fraction in (0, 1)")
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    rows = [run_row(run, str(d), args.cut) for d in args.folders for run in load_corpus(corpus=d)]
    groups = {**{str(d): [r for r in rows if r["folder"] == str(d)] for d in args.folders},
              "all": rows}  # fmt: skip
    result = {g: summarise(rs) for g, rs in groups.items()}
    print(f"cut {args.cut}: expected wins of the prefix mean on flat runs (the ceiling) and wins "
          "counted on the real curves, against the last-10 mean")  # fmt: skip
    print("| folder | runs | ceiling, white noise | ceiling, the runs' rho | prefix mean, real | "
          "consensus, real | the bar (2/3) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for g, s in result.items():
        n = s["runs"]
        print(f"| {g} | {n} | {s['expected_wins_white']:.1f} ({s['expected_wins_white'] / n:.0%})"
              f" | {s['expected_wins_rho']:.1f} ({s['expected_wins_rho'] / n:.0%}) | "
              f"{s['prefix_mean_wins']} | {s['consensus_wins']} | {s['bar_wins']} |")  # fmt: skip
    write_results(args.out, "forecast_ceiling.py", argv, cut=args.cut, summary=result, rows=rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
