"""The refresh interval under SGD momentum and Adam on the exact-reduction softmax bandit.

Runs `pgrpo.bandit.experiments.adam.run_adam_bandit` with its defaults (seed 0, 16 runs per
cell): SGD momentum on every K in 1..60 for four (a, beta1); Adam on every K in 1..40 plus
48, 64, 96, 128 for six (a0, beta1, beta2); Adam at G = 4, 8, 16; Adam far from the
fixed point at G = 4, 16. Prints the tables of
docs/reproductions.md ("adam-bandit") and writes bench/results/adam_bandit.json with the
command, the date, the wall and CPU time, and every cell.

    python bench/adam_bandit.py [--seeds N] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

from pgrpo.bandit.experiments.adam import AdamBanditConfig, run_adam_bandit
from pgrpo.bandit.experiments.base import single_thread


def _fmt(x, digits=4):
    return f"{x:.{digits}g}" if isinstance(x, float) else str(x)


def print_tables(res) -> None:
    print("\n| a = lr kappa | beta1 | predicted K* (stale force) | predicted K* (split force) |"
          " measured (grid 1..60, step 1) |")  # fmt: skip
    print("|---|---|---|---|---|")
    for r in res.rows:
        print(
            f"| {r['a']} | {r['beta1']} | {r['predicted_K_stale_force']} | {r['predicted_K']} | "
            f"{r['measured']} |"
        )
    for key in ("adam_summary", "group_summary"):
        print(f"\n{key}:")
        print("| G | a0 | beta1 | beta2 | K_lin | K grid | still growing (then after 4x steps) |"
              " RMS measured / predicted: median [min, max] | max abs x / s |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|---|")
        for r in res.series[key]:
            print(
                f"| {r['group_size']} | {r['a0']:.3g} | {r['beta1']} | {r['beta2']} | "
                f"{r['K_lin']} | {r['K_grid']} | {r['K_still_growing'] or 'none'} "
                f"({r['K_still_growing_after_4x_steps'] or 'none'}) | "
                f"{r['rms_ratio_median']:.3f} [{r['rms_ratio_min']:.3f}, "
                f"{r['rms_ratio_max']:.3f}] | {r['max_abs_over_s']:.1f} |"
            )
    print("\ngroup cells (RMS of x_s = d - d* at window starts):")
    print("| G | K | a0 | K_lin | RMS measured | RMS predicted | 2 lr K |")
    print("|---|---|---|---|---|---|---|")
    for c in res.series["group"]:
        print(
            f"| {c['group_size']} | {c['K']} | {c['noise_only_a']:.3g} | {c['K_lin']} | "
            f"{c['measured_rms']:.3g} | {c['measured_rms'] / c['rms_ratio']:.3g} | "
            f"{c['lr_K']:.3g} |"
        )


def print_far_field(res) -> None:
    print("\nfar field (beta1 = 0, K = 1, run-mean of x = d - d*):")
    print("| G | beta2 | x0 | x0 / s | speed / eta (first 50 steps) | t_half | x0 / (2 eta) |"
          " t_10% | noise-only 1 / a0 |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for r in res.series["far_field"]:
        print(
            f"| {r['group_size']} | {r['beta2']} | {r['x0']} | {r['x0_over_s']:.0f} | "
            f"{r['speed_over_eta_first_50']:.3f} | {r['t_half']} | "
            f"{r['t_half_constant_speed']:.0f} | {r['t_10pct']} | "
            f"{r['noise_only_timescale']:.2f} |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=AdamBanditConfig.seeds)
    parser.add_argument("--out", type=Path, default=Path("bench/results/adam_bandit.json"))
    args = parser.parse_args(argv)
    cfg = AdamBanditConfig(seeds=args.seeds)
    t0, c0 = time.perf_counter(), time.process_time()
    with single_thread():
        res = run_adam_bandit(cfg)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print_tables(res)
    print_far_field(res)
    print(f"\nmetrics: {res.metrics}\nwall {wall:.0f} s, cpu {cpu:.0f} s")
    out = {
        "command": "python bench/adam_bandit.py" + "".join(f" {a}" for a in (argv or sys.argv[1:])),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        **res.to_json(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
