"""The live plateau stop on curves whose truth is known: how often it stops while the mean reward
is still rising, with `plateau_confirmed` (the default since 2026-12-05) and without.

    python bench/live_stop_sim.py [--seeds 8] [--seed 0] [--plateau-patience 8]

Curves: the batch mean of N 0/1 rewards per step (N = G x prompts: 16, 64, 256) whose success
probability rises as p(t) = 0.15 + 0.5 (1 - exp(-t / tau)), tau a share of the run (0.05 and
0.15: the rise ends well inside the run; 0.3: it ends near the end; 0.6: still rising at the
end), on runs of 60 and 200 logged steps, `--seeds` curves a cell. The watcher replays the live
decision (`pgrpo.diagnose.live.assess_live`, decision only, PgrpoCallback's defaults: min_points
20, plateau_patience 8, the group size and prompts per step known) on ~40 growing prefixes, as
bench/live_checks.py does on real logs. A stop is premature when the true mean still rises by
more than 10% of the run's true gain after it: p(end) - p(stop) > 0.1 (p(end) - p(0)). Saved:
the share of the run after the stop (0 where it never stops, in the per-curve means); `paired`
compares the two rules on the curves where both stop. Not the ROM: a plain exponential rise,
so it tests the verdict's calibration, not the dynamics model. Writes
bench/results/live_stop_sim.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
from pathlib import Path

import numpy as np

from pgrpo.diagnose.live import LiveConfig, assess_live
from pgrpo.logs import RewardLog

RESULTS = Path(__file__).resolve().parent / "results"
MACHINE = "2-core CPU, no GPU"
G = 8


def truth(n: int, tau_share: float) -> np.ndarray:
    """[n] success probability at steps 1..n."""
    t = np.arange(1.0, n + 1)
    return 0.15 + 0.5 * (1 - np.exp(-t / (tau_share * n)))


def curve(p: np.ndarray, rollouts: int, rng) -> RewardLog:
    reward = rng.binomial(rollouts, p) / rollouts
    step = np.arange(1.0, p.size + 1)
    hyper = {"group_size": float(G), "batch_prompts": float(rollouts // G)}
    return RewardLog(step, reward, {}, hyper, (), "sim", "sim", "reward")


def first_stop(log: RewardLog, cfg: LiveConfig, points: int = 40) -> int | None:
    """Index (1-based step) at which the plateau stop first holds, None when never."""
    every = max(1, len(log) // points)
    history: tuple = ()
    for k in range(cfg.min_points, len(log) + 1, every):
        sub = RewardLog(log.step[:k], log.reward[:k], {}, log.hyperparameters, (), "sim", "sim",
                        "reward")  # fmt: skip
        st = assess_live(sub, cfg, history, decision_only=True)
        history = (*history, st)
        if st.stop:
            return k
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--plateau-patience", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    modes = {"confirmed": True, "any": False}
    rows = []
    for n in (60, 200):
        for tau in (0.05, 0.15, 0.3, 0.6):
            p = truth(n, tau)
            for rollouts in (16, 64, 256):
                for _ in range(args.seeds):
                    log = curve(p, rollouts, rng)
                    row = {"n": n, "tau_share": tau, "rollouts": rollouts}
                    for mode, confirmed in modes.items():
                        cfg = LiveConfig(
                            stop_on=("plateau",),
                            plateau_confirmed=confirmed,
                            plateau_patience=args.plateau_patience,
                        )
                        k = first_stop(log, cfg)
                        rest = math.nan if k is None else float(p[-1] - p[k - 1])
                        row[mode] = {"stop": k, "premature": bool(k is not None
                                     and rest > 0.1 * (p[-1] - 0.15)),
                                     "saved": 0.0 if k is None else 1 - k / n}  # fmt: skip
                    rows.append(row)
    table = []
    print(f"{'n':>4} {'tau':>5} {'N':>4} | " + " | ".join(
        f"{m}: stops, premature, saved" for m in modes))  # fmt: skip
    for n in (60, 200):
        for tau in (0.05, 0.15, 0.3, 0.6):
            for rollouts in (16, 64, 256):
                cell = [
                    r for r in rows if (r["n"], r["tau_share"], r["rollouts"]) == (n, tau, rollouts)
                ]
                out = {"n": n, "tau_share": tau, "rollouts": rollouts, "curves": len(cell)}
                parts = []
                for m in modes:
                    stops = [r[m] for r in cell if r[m]["stop"] is not None]
                    pre = sum(s["premature"] for s in stops)
                    saved = float(np.median([s["saved"] for s in stops])) if stops else math.nan
                    out[m] = {"stops": len(stops), "premature": int(pre),
                              "median_saved": saved if stops else None}  # fmt: skip
                    parts.append(f"{len(stops):>3} {pre:>3} {saved:>5.2f}")
                table.append(out)
                print(f"{n:>4} {tau:>5} {rollouts:>4} | " + " | ".join(parts), flush=True)
    totals = {}
    for m in modes:
        stops = [r[m] for r in rows if r[m]["stop"] is not None]
        early = [r[m] for r in rows if r["tau_share"] <= 0.15 and r[m]["stop"] is not None]
        totals[m] = {
            "curves": len(rows),
            "stops": len(stops),
            "premature": int(sum(s["premature"] for s in stops)),
            "stops_on_curves_still_rising": int(
                sum(r[m]["stop"] is not None for r in rows if r["tau_share"] >= 0.3)
            ),  # fmt: skip
            "stops_where_the_rise_ended_early": len(early),
            "median_saved": float(np.median([s["saved"] for s in stops])) if stops else None,
            # per curve, 0 where it never stops: what the rule saves over all runs it watches
            "mean_saved_per_curve": float(np.mean([r[m]["saved"] for r in rows])),
            "mean_saved_per_finished_rise": float(
                np.mean([r[m]["saved"] for r in rows if r["tau_share"] <= 0.15])
            ),  # fmt: skip
        }
        print(m, totals[m])
    both = [r for r in rows if all(r[m]["stop"] is not None for m in modes)]
    paired = {  # the curves where both rules stop: the same curves, compared
        "curves": len(both),
        **{f"median_saved_{m}": float(np.median([r[m]["saved"] for r in both])) if both else None
           for m in modes},
        "confirmed_later": sum(r["confirmed"]["stop"] > r["any"]["stop"] for r in both),
        "same_step": sum(r["confirmed"]["stop"] == r["any"]["stop"] for r in both),
        "confirmed_earlier": sum(r["confirmed"]["stop"] < r["any"]["stop"] for r in both),
    }  # fmt: skip
    print("paired", paired)
    cmd = f"python bench/live_stop_sim.py --seeds {args.seeds} --seed {args.seed}"
    suffix = "" if args.plateau_patience == 8 else f"_ppatience{args.plateau_patience}"
    cmd += "" if args.plateau_patience == 8 else f" --plateau-patience {args.plateau_patience}"
    meta = {"command": cmd, "date": datetime.date.today().isoformat(), "machine": MACHINE}
    RESULTS.mkdir(exist_ok=True)
    out = {"meta": meta, "totals": totals, "paired": paired, "cells": table, "curves": rows}
    (RESULTS / f"live_stop_sim{suffix}.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
