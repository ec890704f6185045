"""Gradient effective rank per advantage estimator on SmolLM2-135M-Instruct (full parameters,
CountSketch D = 4096) vs 200 seeded draws each of the random, support-matched and within-group
permutation controls (since 2026-12-06, session 39; the results recorded before held one random
draw); writes bench/results/gradrank_smollm2.json.

    nice -n 10 python bench/gradrank_smollm2.py [--model smollm2] [--prompts 4] [--group-size 8]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402

from pgrpo.measure.gradrank import GradRankConfig, measure_gradrank
from pgrpo.train.config import ModelConfig

SHOWN = (
    "rank/entropy",
    "rank/participation_ratio",
    "rank/stable",
    "rank/energy_90",
    "rank/energy_95",
    "rank/energy_99",
    "rank/numerical",
    "nonzero_rows",
)
CONTROLLED = ("rank/entropy", "rank/participation_ratio", "rank/stable")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--task", default="arithmetic")
    ap.add_argument("--levels", default="", help="arithmetic levels, e.g. 1 (default: task's)")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--projection-dim", type=int, default=4096)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--out", default="bench/results/gradrank_smollm2.json")
    args = ap.parse_args()
    torch.set_num_threads(2)
    runs = []
    options = {"levels": [int(x) for x in args.levels.split(",")]} if args.levels else {}
    for seed in [int(s) for s in args.seeds.split(",")]:
        t0 = time.time()
        res = measure_gradrank(
            ModelConfig(name=args.model),
            args.task,
            task_options=options,
            n_prompts=args.prompts,
            group_size=args.group_size,
            max_new_tokens=args.max_new_tokens,
            cfg=GradRankConfig(projection_dim=args.projection_dim, seed=seed),
            seed=seed,
        )
        runs.append(
            {
                "seed": seed,
                "seconds": time.time() - t0,
                "rewards": res.rewards,
                "ranks": res.ranks,
                "controls": res.controls,
                "notes": res.notes,
                "metrics": res.metrics,
            }
        )
        print(
            f"seed {seed}: reward mean {res.metrics['reward_mean']:.3f} "
            f"({time.time() - t0:.0f} s, {int(res.metrics['n_params'])} params)"
        )
        print(f"{'advantage':<16}" + "".join(f"{k.replace('rank/', ''):>20}" for k in SHOWN))
        for name, m in res.ranks.items():
            print(f"{name:<16}" + "".join(f"{m[k]:>20.2f}" for k in SHOWN))
        for name, kinds in res.controls.items():  # mean [5%, 95%] p = share at or below
            for kind, summary in kinds.items():
                cells = [summary[k] for k in CONTROLLED]
                text = "".join(
                    f"  {c['mean']:.2f} [{c['p05']:.2f}, {c['p95']:.2f}] "
                    f"p={c['share_at_or_below']:.2f}"
                    for c in cells
                )
                print(f"{name:<12} {kind:<12}{text}")
        for note in res.notes:
            print(f"note: {note}")
    write_results(Path(args.out), "gradrank_smollm2.py", None, args=vars(args), runs=runs)


if __name__ == "__main__":
    main()
