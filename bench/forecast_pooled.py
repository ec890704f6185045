"""The shipped forecaster and a few curve families on several corpora at once, after the fact.

    python bench/forecast_pooled.py DIR [DIR ...] [--cuts 0.3 0.5 0.7] [--prior shipped|earlier]
        [--with-rows JSON ...] [--out PATH]

Each DIR is a folder in the corpus layout (index.json with `runs`, one CSV per run; e.g.
../shared/data/curves and the rebuilt held-back rounds of bench/holdout/ and bench/holdout2/).
Every run is forecast through the library (`pgrpo.dynamics.forecast`, the shipped
CORPUS_PRIOR unless `--prior earlier`, inputs as bench/forecast_real.py builds them) at each cut
by:

- `default`: level_gain on the exponential (exponential_lr where the lr varies), `forecast`'s
  default until held-back round 3 (the column keeps its name so results compare);
- `logistic`: the same forecaster with the logistic curve, for runs that sit at a floor
  before they rise (an exponential fitted to such a rise is still climbing at the cut); where
  the prefix cannot fit one, the default's forecast, counted (`logistic_failed`);
- `aic`: the logistic where its AIC beats the default's by more than 2, else the default;
- `average`: the mean of the two forecasts;
- `consensus`: `forecast(method="consensus")`, the default since 2026-12-05: the median of the
  default, the logistic, a damped local trend and a recent level (simple exponential
  smoothing) (`pgrpo.dynamics.consensus`), with its own band (`covered_consensus`);
- `consensus3`: `forecast(method="consensus3")`, the median of the first three, the default
  from held-back round 3 to 2026-12-05 (`covered_consensus3`);
- `damped_trend`, `recent_level`: those members alone (the last-window mean where one cannot
  be fitted; where the recent level cannot, `recent_level_failed`, the consensus is the median
  of the other three);
- `ensemble_mean`: `forecast(method="ensemble_mean")`, the mean of the first three members,
  with its own band (`covered_ensemble_mean`);

scored as bench/forecast_real.py scores (|predicted - observed mean after the cut| / std of the
whole run, against the mean of the last 10 points before the cut), per folder and pooled; the
JSON gives each median with its distribution-free 90% interval (`median_err_ci90`).

Nothing here is held out: these are looks at runs that have been used (the shared corpus for
the prior, rounds 1 and 2 as pre-registered checks), so a better row here is a candidate for
the next held-back round, not a result. Writes bench/results/forecast_pooled.json.

`--with-rows JSON ...` adds the stored rows of earlier results of this script (their `rows`, at
the cuts asked for) to the pooled figures, for rounds whose CSVs are no longer on the machine:
valid only while the forecast code is the one that wrote them, which the caller must check.
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
from pgrpo.dynamics.levelgain import CORPUS_PRIOR, ForecastPrior

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_entry import RESEARCH_ROLLOUTS, missing_index, n_rollouts  # noqa: E402
from forecast_real import load_corpus  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "forecast_pooled.json"
AIC_MARGIN = 2.0
METHODS = ("default", "logistic", "aic", "average", "consensus", "consensus3", "damped_trend",
           "recent_level", "ensemble_mean")  # fmt: skip
BANDS = ("default", "consensus", "consensus3", "ensemble_mean")
"""The methods whose 90% band of the mean is scored (`covered_<method>`)."""


def run_rows(run: dict, folder: str, cuts, prior: ForecastPrior = CORPUS_PRIOR) -> list[dict]:
    """One row per cut: each method's predicted mean, the observed mean, std and last-10, each
    forecast with `prior`."""
    log = run["log"]
    y = np.asarray(log.reward, dtype=float)
    kw = {k: v for k, v in run["inputs"].items() if k != "optimizer"}
    rows = []
    for cut in cuts:
        i = int(round(cut * y.size))
        lg = {"method": "level_gain", "prior": prior}
        expo = forecast(log.step, y, cut, **lg, **kw)
        try:
            logi = forecast(log.step, y, cut, model="logistic", **lg, **kw)
        except ValueError:  # a logistic the prefix cannot fit: the default stands (counted)
            logi = None
        better = logi is not None and logi.fit.aic + AIC_MARGIN < expo.fit.aic
        logi = logi or expo
        cons = forecast(log.step, y, cut, prior=prior, method="consensus", **kw)
        cons3 = forecast(log.step, y, cut, prior=prior, method="consensus3", **kw)
        ens = forecast(log.step, y, cut, prior=prior, method="ensemble_mean", **kw)
        bands = {"default": expo, "consensus": cons, "consensus3": cons3, "ensemble_mean": ens}
        pred = {
            "default": expo.predicted_mean,
            "logistic": logi.predicted_mean,
            "aic": logi.predicted_mean if better else expo.predicted_mean,
            "average": 0.5 * (expo.predicted_mean + logi.predicted_mean),
            "consensus": cons.predicted_mean,
            "consensus3": cons3.predicted_mean,
            "damped_trend": cons.metrics["member_mean/damped_trend"],
            "recent_level": cons.metrics.get(
                "member_mean/recent_level", cons.baselines["last_window_mean"]
            ),
            "ensemble_mean": ens.predicted_mean,
        }
        obs = expo.observed_mean
        rows.append({"folder": folder, "run": run["meta"]["name"], "repo": run["meta"]["repo"],
                     "n_rollouts": n_rollouts(run["meta"]),
                     "cut": cut, "observed": expo.observed_mean, "logistic_failed": logi is expo,
                     "aic_logistic_better": better, "consensus_member": cons.metrics["member"],
                     "recent_level_failed": bool(cons.metrics.get("level_failed", 0.0)),
                     **{f"covered_{k}": bool(f.mean_band[0] <= obs <= f.mean_band[1])
                        for k, f in bands.items()},
                     "std": float(np.std(y)) or 1.0, "last10": float(np.mean(y[max(i - 10, 0):i])),
                     **{f"pred_{k}": v for k, v in pred.items()}})  # fmt: skip
    return rows


def median_interval(err: np.ndarray, level: float = 0.9) -> tuple[float, float]:
    """The distribution-free `level` interval of the median of err: [r] (order statistics
    k and r + 1 - k, k the largest with P(Binomial(r, 1/2) <= k - 1) <= (1 - level) / 2); the
    whole range when r is too small for one."""
    from scipy.stats import binom

    e = np.sort(np.asarray(err, dtype=float))
    r = e.size
    k = max((j for j in range(1, r // 2 + 1) if binom.cdf(j - 1, r, 0.5) <= (1 - level) / 2),
            default=1)  # fmt: skip
    return float(e[k - 1]), float(e[r - k])


def summarise(rows: list[dict]) -> dict:
    """Per method: median |error| / std with its 90% interval, the last-10 mean's, and wins
    over it."""
    base = np.array([abs(r["last10"] - r["observed"]) / r["std"] for r in rows])
    out = {"runs": len(rows), "median_err_last10": float(np.median(base)),
           "logistic_failed": sum(r["logistic_failed"] for r in rows),
           **{f"coverage_{k}": float(np.mean([r.get(f"covered_{k}", np.nan) for r in rows]))
              for k in BANDS}}  # fmt: skip
    for m in METHODS:
        err = np.array([abs(r[f"pred_{m}"] - r["observed"]) / r["std"] for r in rows])
        out[m] = {"median_err": float(np.median(err)), "median_err_ci90": median_interval(err),
                  "wins_vs_last10": int(np.sum(err < base))}  # fmt: skip
    return out


def by_scale(rows: list[dict]) -> dict[str, list[dict]]:
    """The pooled rows split by the runs' rollouts per step: research scale (>=
    RESEARCH_ROLLOUTS), smaller, and unknown (the index gives neither N nor G and B); the
    groups that have rows."""
    known = [r for r in rows if r["n_rollouts"] is not None]
    split = {
        "scale: research": [r for r in known if r["n_rollouts"] >= RESEARCH_ROLLOUTS],
        "scale: smaller": [r for r in known if r["n_rollouts"] < RESEARCH_ROLLOUTS],
        "scale: unknown": [r for r in rows if r["n_rollouts"] is None],
    }
    return {g: rs for g, rs in split.items() if rs}


def label(folder: str) -> str:
    """A folder's name in the table: its last three path parts (corpus folders are all
    called `curves`)."""
    return "/".join(Path(folder).parts[-3:])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", type=Path, nargs="+", help="corpus folders (index.json + CSVs)")
    ap.add_argument("--cuts", type=float, nargs="+", default=[0.3, 0.5, 0.7])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--prior", choices=("shipped", "earlier"), default="shipped",
                    help="the forecast prior: levelgain.CORPUS_PRIOR, or the one learned on "
                    "the 33 shared runs alone (forecast_prior.EARLIER_PRIOR)")  # fmt: skip
    ap.add_argument("--with-rows", type=Path, nargs="+", default=[], metavar="JSON",
                    help="earlier results; their rows join the pooled ones")  # fmt: skip
    args = ap.parse_args(argv)
    from forecast_prior import EARLIER_PRIOR  # forecast_prior imports this module

    prior = EARLIER_PRIOR if args.prior == "earlier" else CORPUS_PRIOR
    if missing_index(args.folders):
        return 2
    if bad := [c for c in args.cuts if not 0.0 < c < 1.0]:
        ap.error(f"--cuts {bad}: each cut must be a fraction in (0, 1)")
    try:
        stored = [r for j in args.with_rows for r in json.loads(j.read_text())["rows"]
                  if r["cut"] in args.cuts]  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"error: --with-rows: {e}; pass results JSON files this script wrote",
              file=sys.stderr)  # fmt: skip
        return 2
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    rows = [row for d in args.folders for run in load_corpus(corpus=d)
            for row in run_rows(run, str(d), args.cuts, prior)]  # fmt: skip
    rows = stored + rows
    folders = list(dict.fromkeys(r["folder"] for r in rows))
    groups = {**{f: [r for r in rows if r["folder"] == f] for f in folders},
              "pooled": rows, **by_scale(rows)}  # fmt: skip
    result = {g: {str(c): summarise([r for r in rs if r["cut"] == c]) for c in args.cuts}
              for g, rs in groups.items()}  # fmt: skip
    print(f"{'folder':28s} {'cut':>4s} {'runs':>4s} {'last-10':>8s} "
          + " ".join(f"{m:>14s}" for m in METHODS))  # fmt: skip
    for g, per in result.items():
        for c, s in per.items():
            cells = " ".join(
                f"{s[m]['median_err']:.3f} {s[m]['wins_vs_last10']:>3d}/{s['runs']:<3d}"
                for m in METHODS
            )
            print(f"{label(g)[-28:]:28s} {c:>4s} {s['runs']:>4d} {s['median_err_last10']:8.3f} "
                  f"{cells}")  # fmt: skip
    cmd = "python bench/forecast_pooled.py " + " ".join(sys.argv[1:] if argv is None else argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"command": cmd, "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
           "prior": args.prior, "summary": result, "rows": rows}  # fmt: skip
    args.out.write_text(json.dumps(doc, indent=1, default=float))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
