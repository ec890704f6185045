"""Coverage of the forecast's 90% band of the mean after the cut, split by what the diagnosis
reads of the points before the cut: still rising with the gain not identified (where `pgrpo fit`
and the report print `fitwords.band_caveat`, "it may rise past the band") or not.

    python bench/forecast_coverage_rising.py [--corpus DIR ...] [--runs 200] [--seed 11]
                                             [--out PATH]

Real runs: every run of each corpus folder (index.json `runs`, with the corpus's G, B, lr and K
as bench/real_runs.py adds them), cut at 0.5 as bench/real_runs.py and the report cut them, by
the default forecast (`consensus`); default folders: ../shared/data/curves and
/work/holdout15-19/all/curves where present. Simulated runs: `--runs` per shape and cut of
bench/forecast_coverage_shapes.py's shapes (a known truth), cuts 0.3, 0.5, 0.8. Per cell: runs,
the share of bands holding the observed mean after the cut, and (simulated) the true one.
Writes bench/results/forecast_coverage_rising.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from pgrpo.diagnose.fitwords import band_caveat, run_progress
from pgrpo.diagnose.progress import assess_progress
from pgrpo.dynamics import forecast
from pgrpo.dynamics.forecast import informative
from pgrpo.dynamics.logfit import fit_inputs, thin_log
from pgrpo.logs import read_log

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402
from corpus_entry import with_metadata  # noqa: E402
from forecast_coverage_shapes import CUTS, SHAPES, run  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "forecast_coverage_rising.json"
CORPORA = [ROOT.parent / "shared" / "data" / "curves"] + [
    Path(f"/work/holdout{i}/all/curves") for i in range(15, 20)
]


def real_row(path: Path, meta: dict) -> dict:
    """One real run: the forecast at cut 0.5 (as the report makes it) and whether the points
    before the cut read still rising with the gain not identified."""
    log = with_metadata(read_log(path), meta)
    seen = thin_log(log)
    fc = forecast(seen.step, seen.reward, 0.5, **fit_inputs(seen))
    lo, hi = fc.mean_band
    rising = band_caveat(run_progress(log, upto=fc.cut_step), fc.cut_step) is not None
    return {"run": meta["name"], "rising_unidentified": rising,
            "covered": bool(lo <= fc.observed_mean <= hi),
            "above": bool(fc.observed_mean > hi), "width": float(hi - lo),
            "informative": bool(informative(fc, seen.reward))}  # fmt: skip


def split(rows: list[dict]) -> dict:
    """Coverage of the rows whose prefix read rising-unidentified and of the others; and of
    those whose band is informative (narrower than the run's range: the report draws it)."""
    out = {}
    for name, flag in (("rising_unidentified", True), ("other", False)):
        part = [r for r in rows if r["rising_unidentified"] == flag]
        shown = [r for r in part if r["informative"]]
        out[name] = {"runs": len(part),
                     "covered": int(sum(r["covered"] for r in part)),
                     "above": int(sum(r["above"] for r in part)),
                     "covered_true": int(sum(r.get("covered_true", False) for r in part)),
                     "informative": len(shown),
                     "covered_informative": int(sum(r["covered"] for r in shown)),
                     "median_width": float(np.median([r["width"] for r in part])) if part
                     else None}  # fmt: skip
    return out


def simulated(runs: int, rng: np.random.Generator) -> list[dict]:
    """`runs` simulated runs per shape and cut (bench/forecast_coverage_shapes.py's), each with
    the verdict of its points before the cut."""
    out = []
    for shape in SHAPES:
        for c in CUTS:
            rows = []
            for _ in range(runs):
                t, y, p, lr = run(shape, rng)
                fc = forecast(t, y, c, lr=lr, reward_range=(0.0, 1.0))
                lo, hi = fc.mean_band
                keep = t <= fc.cut_step  # read as a log without G: an AR(1) null
                verdict = assess_progress(t[keep], y[keep], reward_range=(0.0, 1.0))
                truth = float(np.mean(p[t > fc.cut_step]))
                rows.append({"rising_unidentified": band_caveat(verdict, fc.cut_step) is not None,
                             "covered": bool(lo <= fc.observed_mean <= hi),
                             "covered_true": bool(lo <= truth <= hi),
                             "above": bool(fc.observed_mean > hi),
                             "width": float(hi - lo),
                             "informative": bool(informative(fc, y))})  # fmt: skip
            out.append({"shape": shape, "cut": c, **split(rows)})
            r, o = out[-1]["rising_unidentified"], out[-1]["other"]
            print(f"{shape:12s} {c:4.1f} rising-unidentified {r['covered']}/{r['runs']} "
                  f"(informative {r['covered_informative']}/{r['informative']}) other "
                  f"{o['covered']}/{o['runs']} (informative {o['covered_informative']}/"
                  f"{o['informative']})", flush=True)  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, action="append", help="a folder of runs (repeatable)")
    ap.add_argument("--runs", type=int, default=200, help="simulated runs per shape and cut")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    t0 = time.time()
    real = []
    for folder in args.corpus or [c for c in CORPORA if (c / "index.json").is_file()]:
        for meta in json.loads((folder / "index.json").read_text())["runs"]:
            try:
                real.append({"corpus": str(folder), **real_row(folder / meta["csv"], meta)})
            except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
                print(f"skipped {meta['name']}: {exc}", flush=True)
    real_split = split(real)
    for name, cell in real_split.items():
        print(f"real runs, {name}: band held the observed mean on {cell['covered']} of "
              f"{cell['runs']} ({cell['above']} above it); of the informative bands, "
              f"{cell['covered_informative']} of {cell['informative']}")  # fmt: skip
    sim = simulated(args.runs, np.random.default_rng(args.seed)) if args.runs > 0 else []
    write_results(args.out, "forecast_coverage_rising.py", argv,
                  seconds=round(time.time() - t0, 1), level=0.9, real=real_split,
                  real_runs=real, simulated=sim)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
