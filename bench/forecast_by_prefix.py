"""Where the default forecast wins and loses: its scores split by the progress verdict of the
points before the cut (what `pgrpo diagnose` says of the run at that moment).

    python bench/forecast_by_prefix.py DIR [DIR ...] [--cut 0.5] [--out PATH]

Each DIR is a folder in the corpus layout (index.json with `runs`, one CSV per run). For every
run it forecasts the mean after the cut with `forecast` (the default method, inputs as
bench/forecast_real.py builds them), reads the prefix's verdict (`fitwords.run_progress(log,
upto=cut step)`), and scores as bench/forecast_pooled.py does (|predicted - observed mean after
the cut| / std of the whole run, wins against the mean of the last 10 points before the cut).
Beside the forecast it scores two flat alternatives on the same runs: the mean of the whole
prefix and the mean of its last half (what a "nothing is moving" reading would forecast), and
counts the runs whose mean after the cut lies above the last-10 mean (`rose`).

Nothing here is held out: the folders are runs pgrpo has seen. It says where to look, not what
to ship. Writes bench/results/forecast_by_prefix.json (or --out) with the command and date.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

from pgrpo.diagnose.fitwords import run_progress
from pgrpo.dynamics import forecast

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402
from corpus_entry import missing_index  # noqa: E402
from forecast_real import load_corpus  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "forecast_by_prefix.json"
PREDICTORS = ("forecast", "prefix_mean", "prefix_last_half")


def run_row(run: dict, folder: str, cut: float) -> dict:
    log = run["log"]
    y = np.asarray(log.reward, dtype=float)
    kw = {k: v for k, v in run["inputs"].items() if k != "optimizer"}
    fc = forecast(log.step, y, cut, **kw)
    i = int(round(cut * y.size))
    prefix = y[:i]
    return {"folder": folder, "run": run["meta"]["name"], "repo": run["meta"]["repo"],
            "prefix_label": run_progress(log, upto=fc.cut_step).label,
            "observed": fc.observed_mean, "std": float(np.std(y)) or 1.0,
            "last10": float(np.mean(y[max(i - 10, 0):i])), "forecast": fc.predicted_mean,
            "prefix_mean": float(np.mean(prefix)),
            "prefix_last_half": float(np.mean(prefix[i // 2:]))}  # fmt: skip


def scores(rows: list[dict]) -> dict:
    base = np.array([abs(r["last10"] - r["observed"]) / r["std"] for r in rows])
    out = {"runs": len(rows), "rose": sum(r["observed"] > r["last10"] for r in rows),
           "median_err_last10": float(np.median(base))}  # fmt: skip
    for p in PREDICTORS:
        err = np.array([abs(r[p] - r["observed"]) / r["std"] for r in rows])
        out[p] = {"median_err": float(np.median(err)), "wins_vs_last10": int(np.sum(err < base))}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", type=Path, nargs="+", help="corpus folders (index.json + CSVs)")
    ap.add_argument("--cut", type=float, default=0.5)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if missing_index(args.folders):
        return 2
    if not 0.0 < args.cut < 1.0:
        ap.error(f"--cut {args.cut}: a fraction in (0, 1)")
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    rows = [run_row(run, str(d), args.cut) for d in args.folders for run in load_corpus(corpus=d)]
    labels = sorted({r["prefix_label"] for r in rows})
    groups = {"all": rows, **{lab: [r for r in rows if r["prefix_label"] == lab] for lab in labels}}
    summary = {g: scores(rs) for g, rs in groups.items()}
    cols = " ".join(f"{p + ' err/wins':>24s}" for p in PREDICTORS)
    print(f"| {'prefix verdict':14s} | {'runs':>4s} | {'rose':>4s} | {'last-10':>7s} | {cols}")
    for g, s in summary.items():
        cells = " ".join(
            f"{s[p]['median_err']:17.3f} {s[p]['wins_vs_last10']:6d}" for p in PREDICTORS
        )
        print(
            f"| {g:14s} | {s['runs']:4d} | {s['rose']:4d} | {s['median_err_last10']:7.3f} | {cells}"
        )
    write_results(args.out, "forecast_by_prefix.py", argv, cut=args.cut, summary=summary, rows=rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
