"""Progress verdicts on rises and drops done within a step, and on AR(1) noise at the rho grid's
top, with no batch size stated (the AR(1) null at the rho bound, `nullmodel.lag1_autocorr`) or,
with `--stated`, with it.

    python bench/jump_verdicts.py [--seeds 30] [--null-curves 1000] [--stated] [--out PATH]

Shapes (batch means of N 0/1 rewards, N = 8 or 32 not given to the verdict): a jump 0.2 -> 0.8
at 10%, 30% or 60% of the run, a drop 0.7 -> 0.2 at 60%, a small jump 0.4 -> 0.6 at 30%, an
exponential rise 0.2 -> 0.8 with tau 0.15 of the run, a linear rise 0.2 -> 0.6; 24, 64 and 200
points; `--seeds` curves each. Nulls: AR(1) at rho 0.6, 0.8 and 0.9 (the grid's top), 20 and 50
points, `--null-curves` each: the share not read `flat`. `--stated`: N is given to the verdict
(as a log's group size and prompts per step are; the AR(1) nulls at N = 32), and a constant
success rate of 0.5 (binomial noise alone, a null) and jumps after the first 2 or 3 points
are added to the shapes. Run it with another
`src` on PYTHONPATH (a git worktree) to compare versions. Writes
bench/results/jump_verdicts.json (`--out` for another file).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
from scipy.signal import lfilter

import pgrpo
from pgrpo.diagnose import assess_progress

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "bench" / "results" / "jump_verdicts.json"


def shapes(n: int) -> dict[str, np.ndarray]:
    """Success rate per step, [n], by shape name."""
    t = np.arange(n)
    return {
        "jump@0.1": np.where(t < 0.1 * n, 0.2, 0.8),
        "jump@0.3": np.where(t < 0.3 * n, 0.2, 0.8),
        "jump@0.6": np.where(t < 0.6 * n, 0.2, 0.8),
        "drop@0.6": np.where(t < 0.6 * n, 0.7, 0.2),
        "small jump@0.3": np.where(t < 0.3 * n, 0.4, 0.6),
        "exp tau 0.15": 0.2 + 0.6 * (1 - np.exp(-t / (0.15 * n))),
        "linear": 0.2 + 0.4 * t / n,
    }


def stated_shapes(n: int) -> dict[str, np.ndarray]:
    """With `--stated`: a null (a constant rate) and jumps 0.2 -> 0.8 after the first 2 or 3
    points (a reward learned in the first steps)."""
    t = np.arange(n)
    return {"constant 0.5": np.full(n, 0.5), "jump after 2": np.where(t < 2, 0.2, 0.8),
            "jump after 3": np.where(t < 3, 0.2, 0.8)}  # fmt: skip


def labels(curves: np.ndarray, n_rollouts: int | None = None) -> Counter:
    n = curves.shape[1]
    step = np.arange(1.0, n + 1)
    return Counter(assess_progress(step, y, n_rollouts=n_rollouts, fit=False).label for y in curves)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--null-curves", type=int, default=1000)
    ap.add_argument("--stated", action="store_true", help="give N to the verdict")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    rows = []
    print("| n | N | shape | flat | verdicts |\n|---|---|---|---|---|")
    for n in (24, 64, 200):
        for big_n in (8, 32):
            todo = shapes(n) | (stated_shapes(n) if args.stated else {})
            for name, p in todo.items():
                got = labels(rng.binomial(big_n, p, size=(args.seeds, n)) / big_n,
                             big_n if args.stated else None)  # fmt: skip
                rows.append({"kind": "shape", "n": n, "N": big_n, "shape": name,
                             "curves": args.seeds, "labels": dict(got)})  # fmt: skip
                print(f"| {n} | {big_n} | {name} | {got['flat']}/{args.seeds} | "
                      f"{dict(got.most_common())} |")  # fmt: skip
    print("\n| AR(1) rho | n | not flat | verdicts |\n|---|---|---|---|")
    for rho in (0.6, 0.8, 0.9):
        for n in (20, 50):
            e = rng.standard_normal((args.null_curves, n + 200))
            got = labels(0.5 + 0.05 * lfilter([1.0], [1.0, -rho], e, axis=1)[:, 200:],
                         32 if args.stated else None)  # fmt: skip
            share = 1.0 - got["flat"] / args.null_curves
            rows.append({"kind": "ar1", "rho": rho, "n": n, "curves": args.null_curves,
                         "not_flat": share, "labels": dict(got)})  # fmt: skip
            print(f"| {rho} | {n} | {share:.3f} | {dict(got.most_common())} |")
    where = str(Path(pgrpo.__file__).resolve().parent)
    write_results(args.out, "jump_verdicts.py", argv, pgrpo=where, stated=args.stated,
                  seconds=round(time.perf_counter() - t0, 1), rows=rows)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
