"""The forecast prior (`levelgain.CORPUS_PRIOR`) derived from every real run pgrpo has seen, and
its leave-one-repository-out (LORO) check.

    python bench/forecast_prior.py DIR [DIR ...] [--out PATH]

Each DIR is a folder in the corpus layout (index.json with `runs`, one CSV per run): the shared
corpus (../shared/data/curves) and the rebuilt held-back rounds (bench/holdout*/README.md say
how to rebuild them; their CSV files are third-party data and are not in this repository).
Runs are grouped by repository across folders (a repository in two folders is one group).

1. The prior from all runs, as bench/forecast_real.py --derive-prior derives it from one folder
   (`forecast_real.corpus_prior`: the gain fraction from the rows at every DERIVE_CUTS with
   each repository counted once, the split-conformal band scale at each cut, the timescale
   prior's centre the median whole-run log_tau_ratio). Its inputs are written to the JSON
   (`derivation`: one row per run and cut, one log_tau_ratio per run), so
   `tests/test_dynamics_forecast_prior.py` re-derives the stored prior from them without the
   third-party files, and checks the shared corpus's rows against the library where it is.
2. LORO: for each repository, the prior from the other repositories' rows (and the timescale
   centre without it), and the held-out runs forecast through the library
   (`forecast(method=..., prior=...)`) at cuts 0.3, 0.5, 0.7; beside it the shipped prior and
   EARLIER_PRIOR (the one learned on the 33 shared runs alone, shipped 2026-12-01 to
   2026-12-04), each scored on every run. Scored as bench/forecast_pooled.py scores: |predicted
   - observed mean after the cut| / std of the whole run, against the mean of the last 10
   points before the cut; coverage of the 90% band of the mean; its width / std.

The LORO rows are the out-of-sample figures of the shipped prior's recipe; the shipped prior's
own rows are in-sample on every run here. Writes bench/results/forecast_prior.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import warnings
from pathlib import Path

import numpy as np

from pgrpo.dynamics import forecast
from pgrpo.dynamics.forecast import MIN_FORECAST_POINTS
from pgrpo.dynamics.levelgain import CORPUS_PRIOR, ForecastPrior

sys.path.insert(0, str(Path(__file__).resolve().parent))
from forecast_pooled import label, median_interval  # noqa: E402
from forecast_real import centres, corpus_prior, load_corpus  # noqa: E402
from forecast_stack import candidate_rows  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "forecast_prior.json"
CUTS = (0.3, 0.5, 0.7)
METHODS = ("consensus", "level_gain")

EARLIER_PRIOR = ForecastPrior(
    gain_fraction=0.1,
    band_scale=5.8796,
    log_tau_ratio=-1.4525,
    band_scale_by_cut=(
        (0.2, 11.9983),
        (0.3, 7.4942),
        (0.4, 4.6849),
        (0.5, 5.8796),
        (0.6, 3.7099),
        (0.7, 2.4415),
        (0.8, 2.2274),
    ),  # fmt: skip
    metrics={"source": "bench/forecast_real.py --derive-prior", "runs": 33, "repos": 12},
)
"""The prior `forecast` shipped from 2026-12-01 23:50 UTC to 2026-12-04, learned on the 33
shared runs alone (kept here to compare)."""

DERIVATION_KEYS = ("run", "repo", "folder", "cut", "std", "observed")


def derivation_rows(table: list[dict]) -> list[dict]:
    """The inputs of `corpus_prior` at the centre "all", one flat row per run and cut."""
    out = []
    for r in table:
        level, model_mean, unit, _ = r["tau"]["all"]
        out.append({**{k: r[k] for k in DERIVATION_KEYS}, "level": level,
                    "model_mean": model_mean, "band_unit": unit})  # fmt: skip
    return out


def table_of(rows: list[dict]) -> list[dict]:
    """`derivation_rows` back in the candidate-table layout `corpus_prior` reads."""
    return [{**r, "tau": {"all": (r["level"], r["model_mean"], r["band_unit"], 0.0)}}
            for r in rows]  # fmt: skip


def prior_dict(p: ForecastPrior) -> dict:
    by_cut = [list(x) for x in p.band_scale_by_cut]
    return {"gain_fraction": p.gain_fraction, "band_scale": p.band_scale,
            "log_tau_ratio": p.log_tau_ratio, "band_scale_by_cut": by_cut}  # fmt: skip


def score(run: dict, cut: float, priors: dict[str, ForecastPrior]) -> dict | None:
    """One run at one cut: each method under each prior (None when the cut leaves too few
    points)."""
    log = run["log"]
    y = np.asarray(log.reward, dtype=float)
    i = int(round(cut * y.size))
    if i < MIN_FORECAST_POINTS or i >= y.size:
        return None
    obs, sd = float(np.mean(y[i:])), float(np.std(y)) or 1.0
    l10 = float(np.mean(y[max(i - 10, 0) : i]))
    kw = {k: v for k, v in run["inputs"].items() if k != "optimizer"}
    row = {"folder": run["folder"], "run": run["meta"]["name"], "repo": run["meta"]["repo"],
           "cut": cut, "n": int(y.size), "err_last10": abs(l10 - obs) / sd}  # fmt: skip
    for m in METHODS:
        for name, p in priors.items():
            fc = forecast(log.step, y, cut, method=m, prior=p, **kw)
            lo, hi = fc.mean_band
            row[f"{m}/{name}/err"] = abs(fc.predicted_mean - obs) / sd
            row[f"{m}/{name}/covered"] = bool(lo <= obs <= hi)
            row[f"{m}/{name}/width"] = (hi - lo) / sd
    return row


def summarise(rows: list[dict], names) -> dict:
    b = np.array([r["err_last10"] for r in rows])
    out = {"runs": len(rows), "median_err_last10": float(np.median(b))}
    for m in METHODS:
        for name in names:
            e = np.array([r[f"{m}/{name}/err"] for r in rows])
            out[f"{m}/{name}"] = {
                "median_err": float(np.median(e)), "median_err_ci90": median_interval(e),
                "wins_vs_last10": int((e < b).sum()),
                "covered": int(sum(r[f"{m}/{name}/covered"] for r in rows)),
                "median_width": float(np.median([r[f"{m}/{name}/width"] for r in rows])),
            }  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    runs = []
    for d in args.dirs:
        for r in load_corpus(corpus=d):
            runs.append({**r, "folder": label(str(d))})
    repos = sorted({r["meta"]["repo"] for r in runs})
    cen = centres(runs)
    table = [row | {"folder": r["folder"]} for r in runs
             for row in candidate_rows(r, {"all": cen["all"]}, rom=False)]  # fmt: skip
    prior = corpus_prior(table, cen["all"])
    print(f"prior from {len(runs)} runs, {len(repos)} repositories: {prior_dict(prior)}")
    names = ("loro", "shipped", "earlier")
    rows = []
    for repo in repos:
        held = corpus_prior([x for x in table if x["repo"] != repo], cen[repo], "all")
        priors = {"loro": held, "shipped": CORPUS_PRIOR, "earlier": EARLIER_PRIOR}
        for run in (r for r in runs if r["meta"]["repo"] == repo):
            rows += [x for cut in CUTS if (x := score(run, cut, priors)) is not None]
    summary = {}
    for cut in CUTS:
        at = [r for r in rows if r["cut"] == cut]
        summary[str(cut)] = {"pooled": summarise(at, names)}
        for folder in sorted({r["folder"] for r in at}):
            summary[str(cut)][folder] = summarise([r for r in at if r["folder"] == folder], names)
    print(f"{'cut':>4} {'prior':8} {'method':10} {'runs':>4} {'last-10':>7} {'median':>7} "
          f"{'wins':>8} {'covered':>8} {'width':>6}")  # fmt: skip
    for cut in CUTS:
        s = summary[str(cut)]["pooled"]
        for m in METHODS:
            for name in names:
                v = s[f"{m}/{name}"]
                print(f"{cut:4.1f} {name:8} {m:10} {s['runs']:4d} {s['median_err_last10']:7.3f} "
                      f"{v['median_err']:7.3f} {v['wins_vs_last10']:4d}/{s['runs']:<3d} "
                      f"{v['covered']:4d}/{s['runs']:<3d} {v['median_width']:6.2f}")  # fmt: skip
    doc = {
        "command": "python bench/forecast_prior.py "
        + " ".join(sys.argv[1:] if argv is None else argv),  # fmt: skip
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": len(runs), "repos": len(repos), "folders": sorted({r["folder"] for r in runs}),
        "prior": prior_dict(prior), "shipped": prior_dict(CORPUS_PRIOR),
        "earlier": prior_dict(EARLIER_PRIOR),
        "derivation": {"rows": derivation_rows(table),
                       "log_tau_ratio": {r["meta"]["name"]: r["log_tau_ratio"] for r in runs}},
        "summary": summary, "rows": rows,
    }  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
