"""Should the forecast follow the progress verdict of the points it sees? A look, not a change.

    python bench/forecast_gate.py DIR [DIR ...] [--out PATH]

On held-back runs the default forecast (`consensus`) tied the last-10 mean on runs whose note
says flat (10 of 22 wins, rounds 6-11). For each run of each corpus folder, at cut 0.5, this
reads the progress verdict of the prefix (`assess_progress`, with the run's stated rollouts per
step) and scores, per verdict and overall, against the observed mean after the cut (|error| /
std of the whole run, as bench/forecast_pooled.py): the consensus; the prefix's mean; the mean
of the prefix's second half; the verdict's end window; and two gated forecasts, `gated` (the
prefix mean where the prefix reads `flat`, else the consensus) and `gated2` (also the second
half's mean where it reads `plateau`). Writes bench/results/forecast_gate.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import warnings
from pathlib import Path

import numpy as np

from pgrpo.diagnose import assess_progress
from pgrpo.dynamics import forecast

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402
from corpus_entry import n_rollouts  # noqa: E402
from forecast_real import load_corpus  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "bench" / "results" / "forecast_gate.json"
PREDICTIONS = ("consensus", "prefix_mean", "prefix_second_half", "end_window", "gated", "gated2")


def run_row(run: dict, folder: str, cut: float = 0.5) -> dict:
    log = run["log"]
    y, step = np.asarray(log.reward, dtype=float), np.asarray(log.step, dtype=float)
    i = int(round(cut * y.size))
    kw = {k: v for k, v in run["inputs"].items() if k != "optimizer"}
    fc = forecast(log.step, y, cut, method="consensus", **kw)
    verdict = assess_progress(step[:i], y[:i], n_rollouts=n_rollouts(run["meta"]), fit=False)
    pred = {
        "consensus": float(fc.predicted_mean),
        "prefix_mean": float(np.mean(y[:i])),
        "prefix_second_half": float(np.mean(y[i // 2 : i])),
        "end_window": float(verdict.evidence["end_level"]),
    }
    flat, plateau = verdict.label == "flat", verdict.label == "plateau"
    pred["gated"] = pred["prefix_mean"] if flat else pred["consensus"]
    pred["gated2"] = pred["prefix_second_half"] if plateau else pred["gated"]
    return {"folder": folder, "run": run["meta"]["name"], "prefix_label": verdict.label,
            "observed": float(fc.observed_mean), "std": float(np.std(y)) or 1.0,
            "last10": float(np.mean(y[max(i - 10, 0) : i])),
            **{f"pred_{k}": v for k, v in pred.items()}}  # fmt: skip


def score(rows: list[dict], key: str) -> dict:
    err = [abs(r[f"pred_{key}"] - r["observed"]) / r["std"] for r in rows]
    wins = sum(abs(r[f"pred_{key}"] - r["observed"]) < abs(r["last10"] - r["observed"])
               for r in rows)  # fmt: skip
    return {"median_err": statistics.median(err), "wins_vs_last10": wins, "runs": len(rows)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    rows = [run_row(run, str(f)) for f in args.folders for run in load_corpus(corpus=f)]
    groups = {"all": rows}
    for label in sorted({r["prefix_label"] for r in rows}):
        groups[f"prefix {label}"] = [r for r in rows if r["prefix_label"] == label]
    for f in args.folders:
        groups[str(f)] = [r for r in rows if r["folder"] == str(f)]
    summary = {g: {k: score(rs, k) for k in PREDICTIONS} for g, rs in groups.items() if rs}
    print("| rows | runs | " + " | ".join(PREDICTIONS) + " |")
    print("|---|---|" + "---|" * len(PREDICTIONS))
    for g, s in summary.items():
        cells = [f"{s[k]['median_err']:.3f}, {s[k]['wins_vs_last10']}" for k in PREDICTIONS]
        print(f"| {g} | {s['consensus']['runs']} | " + " | ".join(cells) + " |")
    write_results(args.out, "forecast_gate.py", argv, summary=summary, rows=rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
