"""How often can any forecast beat the last-10 mean? Issue #13's win bar on flat runs, exactly.

    python bench/forecast_ceiling.py DIR [DIR ...] [--cut 0.5] [--out PATH]

The bar asks a forecast of the mean after the cut to be closer to it than the mean of the last 10
points before the cut (L) on at least two thirds of real runs. A win is a matter of direction: a
forecast f beats L exactly when the mean after the cut falls on f's side of (f + L) / 2. On a run
that stays flat (Gaussian AR(1) noise about a level no one knows), two exact figures
(`flat_win_probability`, `flat_win_ceiling`):

- the prefix mean (a flat forecast from every point before the cut) wins with probability
  1/2 + arcsin(corr(U, V)) / pi, U and V the difference and the sum of the two errors;
- no forecast wins more often than 1/2 + arctan(sd(D) / s) / pi, D the best linear unbiased
  prediction of the mean after the cut (ordinary kriging: the GLS level and the AR(1) carry-over)
  less L, s the sd of that prediction's error: given the prefix, a forecast wins at most with the
  probability that the mean after the cut lies on D's side of L, which a forecast a hair from L
  towards the prediction reaches. That bound is the ceiling; a forecast that only nudges L the
  right way reaches it without being any more accurate, so the win count rewards direction and
  the median error is the bar that measures accuracy.

On a run that drifts after the cut neither figure bounds anything; the real-run columns count,
against L: the prefix mean's wins, the default forecast's (`consensus`), and how often the
default's direction from L was right (what L nudged towards it would win).

Per run: m, h, the prefix's lag-1 autocorrelation rho about a straight line (0 for a constant
prefix, clipped to [0, RHO_MAX]); both figures at rho 0 and at that rho. Per folder and over all:
the expected wins (sums of the probabilities) and the wins counted. A run too short for the
default forecast is kept, with its real-run columns empty. Writes
bench/results/forecast_ceiling.json.
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
from corpus_entry import missing_index  # noqa: E402
from forecast_real import load_corpus  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "bench" / "results" / "forecast_ceiling.json"
LAST = 10
RHO_MAX = 0.95


def ar1_covariance(n: int, rho: float) -> np.ndarray:
    """Covariance of n steps of unit-variance AR(1) noise: [n, n], rho^|i - j|."""
    i = np.arange(n)
    return rho ** np.abs(i[:, None] - i[None, :]) if rho > 0 else np.eye(n)


def _weights(m: int, h: int, last: int) -> tuple[np.ndarray, np.ndarray]:
    """The prefix mean's and L's weights on the m + h steps, each less the mean after the cut:
    their errors are a.e and b.e (a, b: [m + h])."""
    n = m + h
    a, b = np.zeros(n), np.zeros(n)
    a[:m] = 1.0 / m
    b[m - last : m] = 1.0 / last
    a[m:] = b[m:] = -1.0 / h
    return a, b


def flat_win_probability(m: int, h: int, rho: float = 0.0, last: int = LAST) -> float:
    """P(|prefix mean - mean after| < |L - mean after|) on a flat run of Gaussian AR(1) noise
    (m points before the cut, h after; rho in [0, 1)): with X = a.e and Y = b.e the two errors,
    U = Y - X and V = Y + X, P(X^2 < Y^2) = P(U V > 0) = 1/2 + arcsin(corr(U, V)) / pi. 0 where
    the prefix holds no more than `last` points (the two forecasts are the same, and a tie is no
    win)."""
    if m <= last or h < 1:
        return 0.0
    a, b = _weights(m, h, last)
    s = ar1_covariance(m + h, rho)
    u, v = b - a, b + a
    cuv, uu, vv = u @ s @ v, u @ s @ u, v @ s @ v
    if uu <= 0 or vv <= 0:
        return 0.0
    r = float(np.clip(cuv / math.sqrt(uu * vv), -1.0, 1.0))
    return 0.5 + math.asin(r) / math.pi


def blup_weights(m: int, h: int, rho: float = 0.0) -> np.ndarray:
    """Weights w [m] (summing to 1) of the best linear unbiased prediction of the mean of the h
    steps after the cut from the m before it, under AR(1) noise about an unknown level (ordinary
    kriging): w = S^-1 (c + lam 1), lam = (1 - 1' S^-1 c) / (1' S^-1 1), S the prefix's
    covariance, c its covariance with the mean after. At rho 0, the prefix mean."""
    full = ar1_covariance(m + h, rho)
    s, c, one = full[:m, :m], full[:m, m:].mean(1), np.ones(m)
    si_c, si_1 = np.linalg.solve(s, c), np.linalg.solve(s, one)
    lam = (1.0 - one @ si_c) / (one @ si_1)
    return si_c + lam * si_1


def flat_win_ceiling(m: int, h: int, rho: float = 0.0, last: int = LAST) -> float:
    """The most any forecast from the prefix wins against L on a flat run of Gaussian AR(1)
    noise about an unknown level (any forecast that moves with the run when the run is shifted,
    as one that does not know the level must): 1/2 + arctan(sd(D) / s) / pi, D = w.x - L (w:
    `blup_weights`) and s the sd of the mean after less w.x, which is independent of D (a
    contrast of the prefix). Given the prefix, a forecast f wins when the mean after lies beyond
    (f + L) / 2 on f's side: at most P(sign(mean after - L) = sign(D) | prefix) = Phi(|D| / s),
    approached by f = L + eps sign(D); its expectation over D ~ N(0, sd(D)^2) is the arctan form.
    0 where the prediction and L coincide (a prefix of at most `last` points on white noise)."""
    if h < 1 or m < 2:
        return 0.0
    lw = min(last, m)
    w = blup_weights(m, h, rho)
    full = ar1_covariance(m + h, rho)
    s, c, vo = full[:m, :m], full[:m, m:].mean(1), full[m:, m:].mean()
    b = np.zeros(m)
    b[m - lw :] = 1.0 / lw
    d = w - b
    var_d, var_err = float(d @ s @ d), float(vo - 2.0 * w @ c + w @ s @ w)
    if var_d <= 1e-15 or var_err <= 0:
        return 0.0
    return 0.5 + math.atan(math.sqrt(var_d / var_err)) / math.pi


def prefix_rho(p: np.ndarray) -> float:
    """Lag-1 autocorrelation of a prefix [m] about its least-squares line, in [0, RHO_MAX]; 0
    where the residuals are rounding (a constant prefix)."""
    t = np.arange(p.size)
    r = p - np.polyval(np.polyfit(t, p, 1), t)
    if np.ptp(r) <= 1e-9 * max(1.0, float(np.max(np.abs(p)))):
        return 0.0
    rho = float(r[1:] @ r[:-1]) / float(r @ r)
    return min(max(rho, 0.0), RHO_MAX)


def run_row(run: dict, folder: str, cut: float) -> dict:
    """One run: its lengths, rho, both figures at rho 0 and at rho, and the real-run wins
    against L of the prefix mean and of the default forecast, and whether the default's
    direction from L was right (None where the default cannot forecast the run)."""
    log, meta = run["log"], run["meta"]
    y = np.asarray(log.reward, dtype=float)
    m = int(round(cut * y.size))
    p, after = y[:m], y[m:]
    obs, sd = float(np.mean(after)), float(np.std(y)) or 1.0
    last10 = float(np.mean(p[-LAST:]))
    base = abs(last10 - obs) / sd
    rho = prefix_rho(p) if m >= 3 else 0.0
    row = {
        "folder": folder,
        "run": meta["name"],
        "repo": meta["repo"],
        "m": m,
        "h": int(after.size),
        "rho": rho,
        "prefix_mean_p_white": flat_win_probability(m, after.size, 0.0),
        "prefix_mean_p_rho": flat_win_probability(m, after.size, rho),
        "ceiling_white": flat_win_ceiling(m, after.size, 0.0),
        "ceiling_rho": flat_win_ceiling(m, after.size, rho),
        "prefix_mean_wins": bool(abs(float(np.mean(p)) - obs) / sd < base),
        "consensus_wins": None,
        "consensus_direction_right": None,
    }
    kw = {k: v for k, v in run["inputs"].items() if k != "optimizer"}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pred = float(forecast(log.step, y, cut, method="consensus", **kw).predicted_mean)
    except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
        return {**row, "forecast_error": f"{type(exc).__name__}: {exc}"}
    row["consensus_wins"] = bool(abs(pred - obs) / sd < base)
    row["consensus_direction_right"] = bool(np.sign(pred - last10) * np.sign(obs - last10) > 0)
    return row


def summarise(rows: list[dict]) -> dict:
    n = len(rows)
    counted = [r for r in rows if r["consensus_wins"] is not None]
    return {
        "runs": n,
        "prefix_mean_expected_white": float(sum(r["prefix_mean_p_white"] for r in rows)),
        "prefix_mean_expected_rho": float(sum(r["prefix_mean_p_rho"] for r in rows)),
        "ceiling_expected_white": float(sum(r["ceiling_white"] for r in rows)),
        "ceiling_expected_rho": float(sum(r["ceiling_rho"] for r in rows)),
        "prefix_mean_wins": int(sum(r["prefix_mean_wins"] for r in rows)),
        "consensus_runs": len(counted),
        "consensus_wins": int(sum(r["consensus_wins"] for r in counted)),
        "consensus_direction_right": int(sum(r["consensus_direction_right"] for r in counted)),
        "bar_wins": math.ceil(2 * n / 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", type=Path, nargs="+", help="corpus folders (index.json + CSVs)")
    ap.add_argument("--cut", type=float, default=0.5)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if missing_index(args.folders):
        return 2
    if not 0.0 < args.cut < 1.0:
        ap.error(f"--cut {args.cut}: the cut must be a fraction in (0, 1)")
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    rows = [run_row(run, str(d), args.cut) for d in args.folders for run in load_corpus(corpus=d)]
    groups = {**{str(d): [r for r in rows if r["folder"] == str(d)] for d in args.folders},
              "all": rows}  # fmt: skip
    result = {g: summarise(rs) for g, rs in groups.items()}
    print(f"cut {args.cut}: on flat runs, the expected wins against the last-10 mean of the prefix "
          "mean and of the best any forecast can do (white noise / the prefix's rho); on the real "
          "curves, the wins counted")  # fmt: skip
    print("| folder | runs | prefix mean, flat | ceiling, flat | prefix mean, real | "
          "consensus, real | consensus direction right | the bar (2/3) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for g, s in result.items():
        n = s["runs"]
        pm, ce = s["prefix_mean_expected_white"], s["ceiling_expected_white"]
        print(f"| {g} | {n} | {pm:.1f} / {s['prefix_mean_expected_rho']:.1f} ({pm / n:.0%}) | "
              f"{ce:.1f} / {s['ceiling_expected_rho']:.1f} ({ce / n:.0%}) | "
              f"{s['prefix_mean_wins']} | {s['consensus_wins']}/{s['consensus_runs']} | "
              f"{s['consensus_direction_right']} | {s['bar_wins']} |")  # fmt: skip
    write_results(args.out, "forecast_ceiling.py", argv, cut=args.cut, summary=result, rows=rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
