"""The level-and-drift forecaster (`pgrpo.dynamics.drift`): learn its prior, or score it beside
the default forecaster, on real runs.

    python bench/forecast_drift.py --learn DIR [DIR ...] [--out PATH]
    python bench/forecast_drift.py DIR [DIR ...] [--cuts 0.5] [--out PATH]

Each DIR is a folder in the corpus layout (index.json with `runs`, one CSV per run).

`--learn` fits the prior's (drift a, line weight b) to the runs at cuts 0.3, 0.5 and 0.7: the
mean |observed - forecast| / noise, each repository weighted equally (scipy's Powell). It
refits without each repository in turn and scores the left-out runs (leave one repository
out), and the band q is the weighted 90% quantile of those left-out residuals' size in units
of noise sqrt(horizon). It prints the prior to paste into `drift.DRIFT_PRIOR` and the
left-out scores per cut; nothing in it is held out from the prior it prints.

Without `--learn` it runs `forecast(method="level_drift")` (the shipped DRIFT_PRIOR) and
`forecast(method="consensus")` on every run at each cut and scores both as
bench/forecast_pooled.py does: |predicted - observed mean after the cut| / std of the whole
run, wins against the mean of the last 10 points before the cut, and whether the 90% band of
the mean held the observed mean; `rose` counts the runs whose mean after the cut is above that
last-10 mean (the drift the prior learns).

Writes bench/results/forecast_drift.json (or --out) with the command and date.
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import numpy as np

from pgrpo.dynamics import forecast
from pgrpo.dynamics.drift import DRIFT_PRIOR, drift_inputs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402
from corpus_entry import missing_index  # noqa: E402
from forecast_real import load_corpus  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "forecast_drift.json"
LEARN_CUTS = (0.3, 0.5, 0.7)
METHODS = ("level_drift", "consensus")


def learn_rows(folders: list[Path], cuts=LEARN_CUTS) -> list[dict]:
    """One row per run and cut with the drift inputs and what the run did after the cut; runs
    whose prefix has no noise (a constant prefix) are left out (nothing to scale by)."""
    rows = []
    for d in folders:
        for run in load_corpus(corpus=d):
            step = np.asarray(run["log"].step, dtype=float)
            y = np.asarray(run["log"].reward, dtype=float)
            for cut in cuts:
                i = int(round(cut * y.size))
                if i < 10 or y.size - i < 3:
                    continue
                x = drift_inputs(step[:i], y[:i], step[i:])
                if x.noise <= 0:
                    continue
                rows.append({"repo": run["meta"]["repo"], "run": run["meta"]["name"],
                             "cut": cut, "observed": float(np.mean(y[i:])),
                             "std": float(np.std(y)) or 1.0,
                             "last10": float(np.mean(y[max(i - 10, 0):i])),
                             "inputs": x})  # fmt: skip
    return rows


def _design(rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """X [r, 2] = (sqrt(h), (line - last) / s), y [r] = (observed - last) / s."""
    x = [r["inputs"] for r in rows]
    X = np.array([[math.sqrt(v.horizon), (v.line - v.last) / v.noise] for v in x])
    y = np.array([(r["observed"] - v.last) / v.noise for r, v in zip(rows, x, strict=True)])
    return X, y


def _weights(repos: np.ndarray) -> np.ndarray:
    """Each repository's rows share one unit of weight."""
    return np.array([1.0 / np.sum(repos == rp) for rp in repos])


def fit_prior(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """(a, b) minimising sum w |X (a, b) - y| / sum w, b kept in [0, 1]."""
    from scipy.optimize import minimize

    def loss(p):
        return float(np.sum(w * np.abs(X @ np.array([p[0], np.clip(p[1], 0, 1)]) - y)) / w.sum())

    a, b = minimize(loss, np.array([0.0, 0.5]), method="Powell").x
    return float(a), float(np.clip(b, 0.0, 1.0))


def weighted_quantile(v: np.ndarray, w: np.ndarray, q: float) -> float:
    order = np.argsort(v)
    c = np.cumsum(w[order]) / np.sum(w)
    return float(v[order][np.searchsorted(c, q)])


def learn(folders: list[Path]) -> dict:
    rows = learn_rows(folders)
    repos = np.array([r["repo"] for r in rows])
    X, y = _design(rows)
    w = _weights(repos)
    a, b = fit_prior(X, y, w)
    left_out = np.zeros(y.size)
    for rp in sorted(set(repos)):
        keep = repos != rp
        ar, br = fit_prior(X[keep], y[keep], _weights(repos[keep]))
        left_out[~keep] = X[~keep] @ np.array([ar, br])
    unit = X[:, 0]  # sqrt(h): residuals in units of s sqrt(h)
    q = weighted_quantile(np.abs(y - left_out) / np.maximum(unit, 1e-12), w, 0.9)
    per_cut = {}
    for cut in LEARN_CUTS:
        m = np.array([r["cut"] == cut for r in rows])
        noise = np.array([r["inputs"].noise for r in rows])[m]
        last = np.array([r["inputs"].last for r in rows])[m]
        obs = np.array([r["observed"] for r in rows])[m]
        sd = np.array([r["std"] for r in rows])[m]
        base = np.abs(np.array([r["last10"] for r in rows])[m] - obs) / sd
        pred = last + noise * left_out[m]
        err = np.abs(pred - obs) / sd
        inside = np.abs(obs - pred) <= q * noise * unit[m]
        per_cut[str(cut)] = {"runs": int(m.sum()), "median_err_left_out": float(np.median(err)),
                             "wins_vs_last10": int(np.sum(err < base)),
                             "median_err_last10": float(np.median(base)),
                             "band_held": int(np.sum(inside))}  # fmt: skip
    prior = {"drift": round(a, 3), "line_weight": round(b, 3), "band": round(q, 3),
             "runs": len({(r["repo"], r["run"]) for r in rows}), "repos": len(set(repos)),
             "rows": len(rows)}  # fmt: skip
    print(
        f"prior: drift {prior['drift']}, line_weight {prior['line_weight']}, band {prior['band']}"
        f" ({prior['runs']} runs, {prior['repos']} repositories, {prior['rows']} run-cuts)"
    )
    head = f"{'cut':>4s} {'runs':>5s} {'left-out err':>12s} {'last-10':>8s}"
    print(f"{head} {'wins':>5s} {'band':>5s}")
    for cut, s in per_cut.items():
        print(
            f"{cut:>4s} {s['runs']:5d} {s['median_err_left_out']:12.3f} "
            f"{s['median_err_last10']:8.3f} {s['wins_vs_last10']:5d} {s['band_held']:5d}"
        )
    return {"prior": prior, "left_out": per_cut}


def score(folders: list[Path], cuts: list[float]) -> dict:
    rows = []
    for d in folders:
        for run in load_corpus(corpus=d):
            log = run["log"]
            y = np.asarray(log.reward, dtype=float)
            kw = {k: v for k, v in run["inputs"].items() if k != "optimizer"}
            for cut in cuts:
                i = int(round(cut * y.size))
                row = {"folder": str(d), "run": run["meta"]["name"], "repo": run["meta"]["repo"],
                       "cut": cut, "std": float(np.std(y)) or 1.0,
                       "last10": float(np.mean(y[max(i - 10, 0):i]))}  # fmt: skip
                for m in METHODS:
                    fc = forecast(log.step, y, cut, method=m, **kw)
                    row["observed"] = fc.observed_mean
                    row[f"pred_{m}"] = fc.predicted_mean
                    lo, hi = fc.mean_band
                    row[f"covered_{m}"] = bool(lo <= fc.observed_mean <= hi)
                rows.append(row)
    summary = {}
    cols = " ".join(f"{m + ' err/wins/band':>28s}" for m in METHODS)
    print(f"{'cut':>4s} {'runs':>5s} {'rose':>5s} {'last-10':>8s} {cols}")
    for cut in cuts:
        rs = [r for r in rows if r["cut"] == cut]
        base = np.array([abs(r["last10"] - r["observed"]) / r["std"] for r in rs])
        rose = sum(r["observed"] > r["last10"] for r in rs)  # the drift the prior learns
        s = {"runs": len(rs), "median_err_last10": float(np.median(base)), "rose": rose}
        for m in METHODS:
            err = np.array([abs(r[f"pred_{m}"] - r["observed"]) / r["std"] for r in rs])
            s[m] = {"median_err": float(np.median(err)), "wins_vs_last10": int(np.sum(err < base)),
                    "band_held": int(sum(r[f"covered_{m}"] for r in rs))}  # fmt: skip
        summary[str(cut)] = s
        cells = " ".join(f"{s[m]['median_err']:14.3f} {s[m]['wins_vs_last10']:5d} "
                         f"{s[m]['band_held']:5d}   " for m in METHODS)  # fmt: skip
        print(f"{cut:4.1f} {len(rs):5d} {rose:5d} {s['median_err_last10']:8.3f} {cells}")
    return {"prior": {"drift": DRIFT_PRIOR.drift, "line_weight": DRIFT_PRIOR.line_weight,
                      "band": DRIFT_PRIOR.band}, "summary": summary, "rows": rows}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", type=Path, nargs="+", help="corpus folders (index.json + CSVs)")
    ap.add_argument("--learn", action="store_true", help="fit the prior and score it left out")
    ap.add_argument("--cuts", type=float, nargs="+", default=[0.5])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if missing_index(args.folders):
        return 2
    if bad := [c for c in args.cuts if not 0.0 < c < 1.0]:
        ap.error(f"--cuts {bad}: each cut must be a fraction in (0, 1)")
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    result = learn(args.folders) if args.learn else score(args.folders, args.cuts)
    write_results(args.out, "forecast_drift.py", argv, **result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
