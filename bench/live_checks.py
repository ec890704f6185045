"""False-alarm rates of the live stop rules and the run checks, on real logs and on null curves.

    python bench/live_checks.py [--null-per-log 4] [--gaming-null 200] [--seed 0] [--plateau-any]

Writes bench/results/live_checks.json and prints a summary (`--checks-only`: the statuses of
the `pgrpo diagnose` run checks on every real log, bench/results/live_checks_counts.json).
For each of the real logs in ../shared/data/curves:
1. replays the live assessment (`pgrpo.diagnose.live.assess_live`, ~40 growing prefixes, the
   defaults of PgrpoCallback / `pgrpo watch`: min_points 20, patience 5, plateau_patience 8,
   plateau_confirmed)
   and records the first step each stop rule (plateau, flat, collapse, degeneracy) fires; for
   the plateau and flat stops, the reward
   gained after it (last-window mean minus the window before the stop) in standard errors:
   a premature stop is one after which the reward still rose by > 1.64 SE;
2. the entropy-floor forecast backtest (logs with an entropy column): fit the first half,
   forecast the second half's mean, and compare with the last-window mean of the first half.
Null curves: i.i.d. Gaussian noise around the log's mean with the log's noise sd
(first differences), same length: the collapse and degeneracy rules must not fire (a false
alarm), the flat rule should (a null curve is flat) and the plateau rule should not (it never
rose); `--null-rho` makes them AR(1). For the gaming checks, pairs of independent null columns
(a tenth of --gaming-null per log: 20 at the default 200): reward_function_divergence and
length_vs_reward must not warn. `--plateau-any`: the plateau stop on any plateau verdict
(`LiveConfig.plateau_confirmed` False, the default before 2026-12-05).
The real logs carry index.json's group size and prompts per step (`corpus_entry.with_metadata`),
as the TRL callback and `pgrpo watch` read them from the run's config (since 2026-12-03;
before, the replay saw no N).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from pgrpo.diagnose.checks import CheckOptions
from pgrpo.diagnose.entropy import entropy_floor_forecast
from pgrpo.diagnose.gaming import length_vs_reward, reward_function_divergence
from pgrpo.diagnose.live import STOP_RULES as RULES
from pgrpo.diagnose.live import LiveConfig, assess_live, noise_sd
from pgrpo.logs import read_log

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_entry import with_metadata  # noqa: E402

CURVES = Path(__file__).resolve().parents[2] / "shared" / "data" / "curves"
RESULTS = Path(__file__).resolve().parent / "results"
MACHINE = "2-core CPU, no GPU"


def _prefix(log, k):
    return replace(log, step=log.step[:k], reward=log.reward[:k],
                   columns={c: v[:k] for c, v in log.columns.items()})  # fmt: skip


def replay(log, points=40, min_points=20, patience=5, plateau_patience=8,
           plateau_confirmed=True) -> dict:  # fmt: skip
    """First step each stop rule fires on growing prefixes (None: never)."""
    cfg = LiveConfig(stop_on=RULES, min_points=min_points, patience=patience,
                     plateau_patience=plateau_patience,
                     plateau_confirmed=plateau_confirmed)  # fmt: skip
    first: dict[str, float | None] = {r: None for r in RULES}
    every = max(1, len(log) // points)
    history: tuple = ()
    for k in range(cfg.min_points, len(log) + 1, every):
        st = assess_live(_prefix(log, k), cfg, history)
        history = (*history, st)
        for r in st.held:  # the stop condition of each rule, as the callback decides it
            if first[r] is None:
                first[r] = float(log.step[k - 1])
    return first


def gain_after(log, at: float) -> tuple[float, float]:
    """Reward gained after step `at`: in SE (last window vs the window before `at`), and as a
    share of the gain before `at` (window before `at` vs the first window)."""
    w = max(5, len(log) // 10)
    before, after = log.reward[log.step <= at][-w:], log.reward[log.step > at]
    if after.size < 2:
        return math.nan, math.nan
    se = noise_sd(log.reward) * math.sqrt(1 / before.size + 1 / min(w, after.size))
    gain = float(np.mean(after[-w:]) - np.mean(before))
    earlier = float(np.mean(before) - np.mean(log.reward[:w]))
    share = gain / abs(earlier) if abs(earlier) > 0 else math.inf
    return (gain / se if se > 0 else math.nan), share


def noise(n: int, rng, rho: float = 0.0) -> np.ndarray:
    """[n] unit-variance noise: i.i.d. (rho = 0) or AR(1) with lag-1 correlation rho."""
    e = rng.standard_normal(n)
    if rho == 0.0:
        return e
    x = np.empty(n)
    x[0] = e[0]
    for i in range(1, n):
        x[i] = rho * x[i - 1] + np.sqrt(1 - rho * rho) * e[i]
    return x


def null_log(log, rng, rho: float = 0.0):
    sd = max(noise_sd(log.reward), 1e-3)
    r = float(np.mean(log.reward)) + sd * noise(len(log), rng, rho)
    return replace(log, reward=r, columns={})


def entropy_backtest(log) -> dict | None:
    col = log.columns.get("entropy")
    if col is None or np.isfinite(col).sum() < 24:
        return None
    ok = np.isfinite(col)
    s, e = log.step[ok], col[ok]
    h = s.size // 2
    try:
        fc = entropy_floor_forecast(s[:h], e[:h])
    except ValueError:
        return None
    # the floor forecast is the level three spans ahead; here we score the mean of the second
    # half with the same fit, against the naive last-window mean
    from pgrpo.dynamics.forecast import forecast

    f2 = forecast(s, e, float(s[h - 1]), method="level_gain", model="exponential")
    naive = float(np.mean(e[max(0, h - max(5, h // 10)) : h]))
    obs = float(np.mean(e[h:]))
    return {
        "error": abs(f2.predicted_mean - obs),
        "error_last_window": abs(naive - obs),
        "covered": bool(f2.mean_band[0] <= obs <= f2.mean_band[1]),
        "floor_first_half": fc["floor"],
        "observed_last_window": float(np.mean(e[-5:])),
    }


def gaming_null(n: int, reps: int, rng, rho: float = 0.0) -> dict[str, float]:
    from pgrpo.logs import RewardLog

    hits = {"reward_function_divergence": 0, "length_vs_reward": 0}
    opts = CheckOptions()
    for _ in range(reps):
        step = np.arange(1.0, n + 1)
        cols = {"rewards/a/mean": noise(n, rng, rho), "rewards/b/mean": noise(n, rng, rho),
                "completion_length": 100 + noise(n, rng, rho)}  # fmt: skip
        log = RewardLog(step, noise(n, rng, rho), cols, {}, (), "null", "null", "reward")
        hits["reward_function_divergence"] += reward_function_divergence(log, opts).status == "warn"
        hits["length_vs_reward"] += length_vs_reward(log, opts).status == "warn"
    return {k: v / reps for k, v in hits.items()}


def _clean(x):
    """NaN / inf -> None, recursively (strict JSON)."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def check_counts(index) -> dict:
    """Per run check: how many real logs get each status, and which logs warn."""
    from pgrpo.diagnose.checks import run_checks

    counts: dict = {}
    for run in index:
        for res in run_checks(with_metadata(read_log(CURVES / run["csv"]), run), CheckOptions()):
            c = counts.setdefault(res.name, {"ok": 0, "warn": 0, "not_enough_evidence": 0,
                                             "warn_logs": []})  # fmt: skip
            c[res.status] += 1
            if res.status == "warn":
                c["warn_logs"].append(run["name"])
    return counts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--null-per-log", type=int, default=4)
    ap.add_argument("--gaming-null", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-points", type=int, default=20)
    ap.add_argument("--patience", type=int, default=5)
    ap.add_argument("--plateau-patience", type=int, default=8)
    ap.add_argument("--null-rho", type=float, default=0.0, help="AR(1) nulls (0: i.i.d.)")
    ap.add_argument("--plateau-any", action="store_true",
                    help="stop on any plateau verdict (plateau_confirmed False)")  # fmt: skip
    ap.add_argument("--checks-only", action="store_true",
                    help="only the run checks' statuses on the real logs")  # fmt: skip
    args = ap.parse_args()
    if args.gaming_null < 10:
        ap.error("--gaming-null must be >= 10 (a tenth of it: the null pairs per log)")
    if args.checks_only:
        index = json.loads((CURVES / "index.json").read_text())["runs"]
        meta = {"date": datetime.date.today().isoformat(), "machine": MACHINE,
                "command": "python bench/live_checks.py --checks-only"}  # fmt: skip
        out = {"meta": meta, "checks": check_counts(index)}
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "live_checks_counts.json").write_text(json.dumps(out, indent=1) + "\n")
        print(json.dumps(out, indent=1))
        return
    rng = np.random.default_rng(args.seed)
    index = json.loads((CURVES / "index.json").read_text())["runs"]
    real, nulls, entropy, gaming = [], [], [], []
    for run in index:
        log = with_metadata(read_log(CURVES / run["csv"]), run)  # G, B: what a callback knows
        opts = {"min_points": args.min_points, "patience": args.patience,
                "plateau_patience": args.plateau_patience,
                "plateau_confirmed": not args.plateau_any}  # fmt: skip
        first = replay(log, **opts)
        gain, share = (gain_after(log, first["plateau"]) if first["plateau"] is not None
                       else (math.nan, math.nan))  # fmt: skip
        fgain, fshare = (gain_after(log, first["flat"]) if first["flat"] is not None
                         else (math.nan, math.nan))  # fmt: skip
        real.append({"name": run["name"], "repo": run["repo"], "n": len(log),
                     "last_step": float(log.step[-1]), **first,
                     "gain_after_plateau_se": gain, "gain_after_plateau_share": share,
                     "gain_after_flat_se": fgain, "gain_after_flat_share": fshare})  # fmt: skip
        for _ in range(args.null_per_log):
            nulls.append(
                replay(null_log(log, rng, args.null_rho), **opts)
            )  # fmt: skip
        eb = entropy_backtest(log)
        if eb is not None:
            entropy.append({"name": run["name"], **eb})
        gaming.append(gaming_null(len(log), args.gaming_null // 10, rng, args.null_rho))
        print(run["name"], first, f"gain after plateau {gain:.2f} SE, flat {fgain:.2f} SE",
              flush=True)  # fmt: skip
    stops = [r for r in real if r["plateau"] is not None]
    flat_stops = [r for r in real if r["flat"] is not None]
    summary = {
        "date": datetime.date.today().isoformat(),
        "command": "python bench/live_checks.py "
        + " ".join(
            f"--{k.replace('_', '-')} {v}"
            for k, v in vars(args).items()
            if k not in ("checks_only", "plateau_any")
        )
        + (" --plateau-any" if args.plateau_any else ""),  # fmt: skip
        "real_logs": len(real),
        "real_plateau_stops": len(stops),
        "real_premature_plateau_stops": sum(r["gain_after_plateau_se"] > 1.64 for r in stops),
        "real_premature_plateau_stops_gain_over_10pct": sum(
            r["gain_after_plateau_se"] > 1.64 and r["gain_after_plateau_share"] > 0.1 for r in stops
        ),  # fmt: skip
        "real_median_share_of_run_saved": float(
            np.median([1 - (r["plateau"] - 0) / r["last_step"] for r in stops])
        )
        if stops
        else None,
        "real_flat_stops": len(flat_stops),
        "real_premature_flat_stops": sum(r["gain_after_flat_se"] > 1.64 for r in flat_stops),
        "real_collapse_alarms": sum(r["collapse"] is not None for r in real),
        "real_degeneracy_alarms": sum(r["degeneracy"] is not None for r in real),
        "null_curves": len(nulls),
        "null_plateau_stop_rate": float(np.mean([x["plateau"] is not None for x in nulls])),
        "null_flat_stop_rate": float(np.mean([x["flat"] is not None for x in nulls])),
        "null_collapse_false_alarm_rate": float(
            np.mean([x["collapse"] is not None for x in nulls])
        ),
        "null_degeneracy_false_alarm_rate": float(
            np.mean([x["degeneracy"] is not None for x in nulls])
        ),  # fmt: skip
        "gaming_null_false_alarm_rate": {
            k: float(np.mean([g[k] for g in gaming])) for k in gaming[0]
        },  # fmt: skip
        "entropy_logs": len(entropy),
        "entropy_forecast_beats_last_window": sum(
            e["error"] < e["error_last_window"] for e in entropy
        ),  # fmt: skip
        "entropy_band_coverage": float(np.mean([e["covered"] for e in entropy]))
        if entropy
        else None,
        "entropy_median_error": float(np.median([e["error"] for e in entropy]))
        if entropy
        else None,
        "entropy_median_error_last_window": float(
            np.median([e["error_last_window"] for e in entropy])
        )
        if entropy
        else None,  # fmt: skip
    }
    RESULTS.mkdir(exist_ok=True)
    meta = {"command": summary["command"], "date": summary["date"], "machine": MACHINE}
    out = _clean({"meta": meta, "summary": summary, "real": real, "entropy": entropy})
    suffix = "" if args.min_points == 20 else f"_min{args.min_points}"
    suffix += "" if args.plateau_patience == 8 else f"_ppatience{args.plateau_patience}"
    suffix += "" if args.patience == 5 else f"_patience{args.patience}"
    suffix += "" if args.null_rho == 0.0 else f"_rho{args.null_rho:g}"
    suffix += "_plateau_any" if args.plateau_any else ""
    (RESULTS / f"live_checks{suffix}.json").write_text(
        json.dumps(out, indent=1, default=str) + "\n"
    )
    print(json.dumps(out["summary"], indent=1))


if __name__ == "__main__":
    main()
