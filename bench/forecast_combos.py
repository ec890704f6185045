"""Would another way of combining the consensus's members have done better on runs it had not seen?
A look at stored forecasts, not a change.

    python bench/forecast_combos.py [--cut 0.5] [--out PATH]

Every forecast_pooled results file keeps, per run, each member's predicted mean after the cut
(`pred_default` = level_gain, `pred_logistic`, `pred_damped_trend`, `pred_recent_level`), the
last-10 mean and the observed mean. From these, without refitting anything, this scores every
mean of two or more of the five (the four members and the last-10 mean) and every median of
three or more (the median of two is their mean): 42 rules, by the bar's two figures, the
median |error| / std and the wins over the last-10 mean, on the runs pgrpo had seen when the
fourth member was chosen (`forecast_seen210.json`: the 33 shared runs and held-back rounds 1-7)
and on the runs held back after it (rounds 8-11: 40 runs that no choice had seen). A rule
picked on the first set by either figure is then read on the second, with the default (the
median of the four) beside it. Writes bench/results/forecast_combos.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
SEEN = "forecast_seen210.json"
LATER = ("forecast_holdout8.json", "forecast_holdout9.json", "forecast_holdout10.json",
         "forecast_holdout11.json")  # fmt: skip
PARTS = ("default", "logistic", "damped_trend", "recent_level", "last10")
DEFAULT = ("median", ("default", "logistic", "damped_trend", "recent_level"))
COMBINE = {"median": np.median, "mean": np.mean}


def rows_at(files: tuple[str, ...], cut: float) -> list[dict]:
    out = []
    for name in files:
        out += [r for r in json.loads((RESULTS / name).read_text())["rows"] if r["cut"] == cut]
    return out


def value(row: dict, part: str) -> float:
    return row["last10"] if part == "last10" else row[f"pred_{part}"]


def score(rows: list[dict], rule: tuple[str, tuple[str, ...]]) -> dict:
    """The rule's median |error| / std, its wins over the last-10 mean (ties not wins), and the
    runs whose observed mean after the cut is above its forecast (a bias: half if none)."""
    how, parts = rule
    err, base, above = [], [], 0
    for r in rows:
        pred = float(COMBINE[how]([value(r, p) for p in parts]))
        err.append(abs(pred - r["observed"]) / r["std"])
        base.append(abs(r["last10"] - r["observed"]) / r["std"])
        above += r["observed"] > pred
    err_a, base_a = np.asarray(err), np.asarray(base)
    return {"median_err": float(np.median(err_a)), "wins": int(np.sum(err_a < base_a)),
            "runs": len(rows), "observed_above": int(above)}  # fmt: skip


def name(rule: tuple[str, tuple[str, ...]]) -> str:
    return f"{rule[0]}({', '.join(rule[1])})"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cut", type=float, default=0.5)
    ap.add_argument("--out", type=Path, default=RESULTS / "forecast_combos.json")
    args = ap.parse_args(argv)
    seen, later = rows_at((SEEN,), args.cut), rows_at(LATER, args.cut)
    # the median of two is their mean: one rule
    rules = [(how, parts) for k in range(2, len(PARTS) + 1)
             for parts in itertools.combinations(PARTS, k) for how in COMBINE
             if k > 2 or how == "mean"]  # fmt: skip
    table = [{"rule": name(r), "seen": score(seen, r), "later": score(later, r)} for r in rules]
    picks = {
        "default": name(DEFAULT),
        "most wins on the seen runs": max(table, key=lambda t: (t["seen"]["wins"],
                                                                -t["seen"]["median_err"]))["rule"],
        "lowest median on the seen runs": min(table, key=lambda t: t["seen"]["median_err"])["rule"],
        "most wins on the later runs (after the fact)": max(
            table, key=lambda t: (t["later"]["wins"], -t["later"]["median_err"]))["rule"],
    }  # fmt: skip
    by_name = {t["rule"]: t for t in table}
    print(f"cut {args.cut}: {len(seen)} seen runs, {len(later)} later runs")
    print(f"{'pick':46s} {'rule':62s} {'seen':>14s} {'later':>14s}")
    for why, rule in picks.items():
        s, lt = by_name[rule]["seen"], by_name[rule]["later"]
        print(f"{why:46s} {rule:62s} {s['median_err']:.3f} {s['wins']:3d}/{s['runs']:<3d} "
              f"{lt['median_err']:.3f} {lt['wins']:3d}/{lt['runs']:<3d}")  # fmt: skip
    ranks = sorted(table, key=lambda t: (-t["seen"]["wins"], t["seen"]["median_err"]))
    place = [t["rule"] for t in ranks].index(name(DEFAULT)) + 1
    print(f"the default ranks {place} of {len(table)} rules by wins on the seen runs")
    d = by_name[name(DEFAULT)]
    print(f"the observed mean after the cut is above the default's forecast on "
          f"{d['seen']['observed_above']}/{len(seen)} seen and "
          f"{d['later']['observed_above']}/{len(later)} later runs")  # fmt: skip
    write_results(args.out, "forecast_combos.py", argv, cut=args.cut, seen_runs=len(seen),
                  later_runs=len(later), picks=picks, default_rank_by_seen_wins=place,
                  table=table)  # fmt: skip


if __name__ == "__main__":
    main()
