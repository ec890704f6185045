"""How often the live forecast and the trainer's plateau are withheld because the progress verdict
contradicts their level (`pgrpo.diagnose.fitwords.contradiction`: below a reward still rising, or
back towards the level a reward that fell came from), on the real logs and on null curves.

    python bench/forecast_withheld.py [--points 40] [--null-per-log 4] [--seed 0]

Writes bench/results/forecast_withheld.json and prints one row per real log. For each log of
../shared/data/curves (with index.json's G and prompts per step, `corpus_entry.with_metadata`):
1. live: `assess_live` at --points growing prefixes (from 20 points, as bench/live_checks.py
   replays a watcher): the prefixes with a fitted forecast, and those where it is withheld, by
   kind, with the verdict of each;
2. trainer: `pgrpo.train.online.forecast_metrics` on the same prefixes (the trainer's online
   forecast; B and G from index.json where it gives them, else the trainer's defaults, lr
   constant): the prefixes fitted (verdict neither flat nor too short) and those withheld.
Null curves (--null-per-log per log, i.i.d. Gaussian noise with the log's mean and first-
difference noise sd, as live_checks): the live assessment of the whole curve; a withheld
forecast needs a verdict of learning or a fall, each at most ~5% on noise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np

from pgrpo.diagnose.fitwords import WITHHELD
from pgrpo.diagnose.live import LiveConfig, assess_live
from pgrpo.logs import read_log
from pgrpo.train.config import load_config
from pgrpo.train.online import forecast_metrics

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402
from corpus_entry import with_metadata  # noqa: E402
from live_checks import CURVES, null_log  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "forecast_withheld.json"
MIN_POINTS = 20
KIND = {text: kind for kind, text in WITHHELD.items()}


def _prefix(log, k: int):
    return replace(log, step=log.step[:k], reward=log.reward[:k],
                   columns={c: v[:k] for c, v in log.columns.items()})  # fmt: skip


def prefixes(n: int, points: int) -> list[int]:
    """Up to `points` prefix lengths from MIN_POINTS to n, evenly spaced, n last."""
    if n < MIN_POINTS:
        return []
    return sorted({int(k) for k in np.linspace(MIN_POINTS, n, points).round()})


def live_row(log, ks: list[int]) -> dict:
    withheld, fitted, verdicts = Counter(), 0, Counter()
    for k in ks:
        status = assess_live(_prefix(log, k), LiveConfig())
        flag = status.metrics.get("pgrpo/forecast_withheld")
        if flag is None:
            continue
        fitted += 1
        if flag == 1.0:
            withheld["below" if status.verdict == "learning" else "fell"] += 1
            verdicts[status.verdict] += 1
    return {"fitted": fitted, "withheld": dict(withheld), "withheld_verdicts": dict(verdicts)}


def trainer_row(log, meta: dict, ks: list[int]) -> dict:
    pairs = (("group_size", "G"), ("batch_prompts", "prompts_per_step"))
    sizes = [f"grpo.{key}={int(meta[name])}" for key, name in pairs if meta.get(name)]
    cfg = load_config(None, [f"steps={len(log)}", *sizes])
    withheld, fitted = Counter(), 0
    for k in ks:
        reward = [float(r) for r in log.reward[:k]]
        out = forecast_metrics(reward, [1e-6] * k, cfg)
        if out["forecast/progress"] in ("flat", "too_short"):
            continue
        fitted += 1
        if out["forecast/withheld"] is not None:
            withheld[KIND[out["forecast/withheld"]]] += 1
    return {"fitted": fitted, "withheld": dict(withheld), "whole_withheld": (
        KIND.get(forecast_metrics([float(r) for r in log.reward], [1e-6] * len(log), cfg)
                 ["forecast/withheld"]))}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=40, help="prefixes per real log")
    ap.add_argument("--null-per-log", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    index = json.loads((CURVES / "index.json").read_text())["runs"]
    rows, nulls = [], Counter()
    print(f"{'run':42} {'live fitted':>11} {'withheld':>9} {'trainer fitted':>14} {'withheld':>9}"
          "  whole (trainer)")  # fmt: skip
    for run in index:
        log = with_metadata(read_log(CURVES / run["csv"]), run)
        ks = prefixes(len(log), args.points)
        row = {"run": run["name"], "note": run.get("note", ""), "prefixes": len(ks),
               "live": live_row(log, ks), "trainer": trainer_row(log, run, ks)}  # fmt: skip
        rows.append(row)
        lv, tr = row["live"], row["trainer"]
        print(f"{run['name'][:42]:42} {lv['fitted']:>11} {sum(lv['withheld'].values()):>9} "
              f"{tr['fitted']:>14} {sum(tr['withheld'].values()):>9}  "
              f"{tr['whole_withheld'] or '-'}")  # fmt: skip
        for _ in range(args.null_per_log):
            status = assess_live(null_log(log, rng), LiveConfig())
            nulls["curves"] += 1
            nulls[f"verdict_{status.verdict}"] += 1
            nulls["withheld"] += int(status.metrics.get("pgrpo/forecast_withheld") == 1.0)
    total = {
        side: {
            "fitted": sum(r[side]["fitted"] for r in rows),
            "withheld": sum(sum(r[side]["withheld"].values()) for r in rows),
            "runs_with_any": sum(bool(r[side]["withheld"]) for r in rows),
        }
        for side in ("live", "trainer")
    }
    total["trainer"]["whole_withheld"] = [r["run"] for r in rows if r["trainer"]["whole_withheld"]]
    lv, tr = total["live"], total["trainer"]
    print(f"live: {lv['withheld']} of {lv['fitted']} fitted prefixes withheld "
          f"({total['live']['runs_with_any']} runs); trainer: {total['trainer']['withheld']} of "
          f"{total['trainer']['fitted']} ({total['trainer']['runs_with_any']} runs); whole runs "
          f"(trainer): {total['trainer']['whole_withheld']}; null curves: {nulls['withheld']} of "
          f"{nulls['curves']} withheld")  # fmt: skip
    write_results(args.out, "forecast_withheld.py", None, rows=rows, totals=total,
                  nulls=dict(nulls))  # fmt: skip


if __name__ == "__main__":
    main()
