"""Coverage of `pgrpo eval`'s 95% interval over problems (`pgrpo.evaluate.intervals.problem_ci`),
before (cluster bootstrap BCa, Wilson on P problems when degenerate) and after (Clopper-Pearson
at the effective number of trials, Korn & Graubard 1998), on simulated evaluations.

    python bench/eval_intervals.py [--reps 2000] [--reps-before 400] [--quick]

Each cell: P problems whose solve rates p are drawn from Beta(a, b), n samples per problem,
c ~ Binomial(n, p); the interval of the mean c/n should cover the population mean a / (a + b)
95% of the time. Grid: 14 Beta shapes (from all-or-nothing problems, Beta(0.02, 0.02), to
homogeneous ones, Beta(5, 50); mostly unsolvable ones, Beta(0.02, 1), Beta(0.1, 5), Beta(0.2,
4), as a review found under-covered), P in {10, 20, 50, 100, 200}, n in {1, 2, 4, 8, 16}. The
after interval is also checked on pass@n (truth 1 - E[(1 - p)^n]). Both methods see the same
simulated counts (the first --reps-before of each cell's --reps). Widths are mean widths.
Writes bench/results/eval_intervals.json with the command and date (--quick: a smaller grid,
bench/results/eval_intervals_quick.json).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from pgrpo.core.stats import pass_at_k
from pgrpo.evaluate import intervals
from pgrpo.evaluate.intervals import problem_ci

OUT = Path(__file__).resolve().parents[1] / "bench" / "results" / "eval_intervals.json"
SHAPES = [
    (0.02, 0.02), (0.3, 0.3), (0.5, 0.5), (1, 1), (2, 2), (5, 0.5), (0.05, 0.5),
    (0.5, 5), (0.2, 4), (0.1, 5), (0.05, 5), (0.02, 1), (1, 20), (5, 50),
]  # fmt: skip
PROBLEMS = (10, 20, 50, 100, 200)
PRIOR = intervals.PRIOR_PROBLEMS
SAMPLES = (1, 2, 4, 8, 16)


def before_ci(x: np.ndarray, seed: int, n_resamples: int = 1000) -> tuple[float, float]:
    """The interval `problem_ci` gave until 2026-12-04: BCa cluster bootstrap
    (`scipy.stats.bootstrap`, 4,000 resamples there, 1,000 here), Wilson's interval on P
    problems when the bootstrap is degenerate (P < 2 or every score equal)."""
    from scipy.stats import bootstrap, norm

    mean = float(x.mean())
    if x.size >= 2 and np.ptp(x) > 0:
        res = bootstrap((x,), np.mean, n_resamples=n_resamples, method="BCa",
                        rng=np.random.default_rng(seed), vectorized=True)  # fmt: skip
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            return max(0.0, min(lo, mean)), min(1.0, max(hi, mean))
    z, m = float(norm.ppf(0.975)), x.size
    denom = 1 + z * z / m
    centre = (mean + z * z / (2 * m)) / denom
    half = z * math.sqrt(max(mean * (1 - mean), 0.0) / m + z * z / (4 * m * m)) / denom
    return (0.0 if mean <= 0 else max(0.0, centre - half)), (
        1.0 if mean >= 1 else min(1.0, centre + half)
    )


def pass_truth(a: float, b: float, k: int) -> float:
    """1 - E[(1 - p)^k] for p ~ Beta(a, b)."""
    return 1.0 - float(np.prod([(b + j) / (a + b + j) for j in range(k)]))


def cell(a: float, b: float, problems: int, samples: int, reps: int, reps_before: int, rng):
    """Coverage and mean width of both intervals in one cell of the grid."""
    truth, truth_k = a / (a + b), pass_truth(a, b, samples)
    p = rng.beta(a, b, (reps, problems))
    c = rng.binomial(samples, p)
    n_arr = np.full(problems, samples)
    hit = width = hit_k = 0.0
    bhit = bwidth = 0.0
    for r in range(reps):
        x = c[r] / samples
        lo, hi, _ = problem_ci(x, max_trials=problems * samples)
        hit += lo <= truth <= hi
        width += hi - lo
        if samples > 1:
            klo, khi, _ = problem_ci(pass_at_k(n_arr, c[r], samples), max_trials=problems)
            hit_k += klo <= truth_k <= khi
        if r < reps_before:
            blo, bhi = before_ci(x, seed=r)
            bhit += blo <= truth <= bhi
            bwidth += bhi - blo
    row = {
        "shape": f"Beta({a:g}, {b:g})",
        "mean": truth,
        "problems": problems,
        "samples": samples,
        "after_coverage": hit / reps,
        "after_width": width / reps,
        "after_pass_at_n_coverage": hit_k / reps if samples > 1 else None,
    }
    if reps_before:
        row |= {"before_coverage": bhit / reps_before, "before_width": bwidth / reps_before}
    return row


def summary_lines(rows: list[dict]) -> list[str]:
    """Markdown: per shape, the worst cell before and after and the width ratio where the
    bootstrap covered >= 0.94."""
    out = [
        "| problems' solve rates | mean | worst coverage before (P, n) | worst after (P, n) "
        "| worst after, pass@n | width after / before where before >= 0.94: median (max) |",
        "|---|---|---|---|---|---|",
    ]
    for shape in dict.fromkeys(r["shape"] for r in rows):
        rs = [r for r in rows if r["shape"] == shape]
        after = min(rs, key=lambda r: r["after_coverage"])
        ks = [r["after_pass_at_n_coverage"] for r in rs if r["after_pass_at_n_coverage"]]
        line = f"| {shape} | {rs[0]['mean']:.3f} | "
        if "before_coverage" in rs[0]:
            before = min(rs, key=lambda r: r["before_coverage"])
            line += (f"{before['before_coverage']:.3f} ({before['problems']}, "
                     f"{before['samples']}) | ")  # fmt: skip
        else:
            line += "- | "
        line += f"{after['after_coverage']:.3f} ({after['problems']}, {after['samples']}) | "
        line += f"{min(ks):.3f} | " if ks else "- | "
        fine = [r["after_width"] / r["before_width"] for r in rs
                if r.get("before_coverage", 0) >= 0.94 and r["before_width"] > 0]  # fmt: skip
        line += f"{np.median(fine):.2f} ({max(fine):.2f}) |" if fine else "- |"
        out.append(line)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--reps-before", type=int, default=400)
    ap.add_argument("--quick", action="store_true", help="3 shapes, P 10 and 50, n 1 and 8")
    ap.add_argument(
        "--prior",
        type=float,
        default=intervals.PRIOR_PROBLEMS,
        help="the shrinkage weight in problems (intervals.PRIOR_PROBLEMS)",
    )
    args = ap.parse_args()
    intervals.PRIOR_PROBLEMS = args.prior
    warnings.filterwarnings("ignore")  # BCa's degenerate-jackknife warnings (before)
    shapes, problems, samples = SHAPES, PROBLEMS, SAMPLES
    if args.quick:
        shapes, problems, samples = [(0.3, 0.3), (0.02, 1), (1, 20)], (10, 50), (1, 8)
    t0 = time.time()
    rows = []
    for i, (a, b) in enumerate(shapes):
        for j, n_p in enumerate(problems):
            for k, n_s in enumerate(samples):
                rng = np.random.default_rng([i, j, k])
                rows.append(cell(a, b, n_p, n_s, args.reps, min(args.reps_before, args.reps), rng))
        print(f"{shapes[i]} done ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    lines = summary_lines(rows)
    print("\n".join(lines))
    worst = min(r["after_coverage"] for r in rows)
    out = OUT.with_name("eval_intervals_quick.json") if args.quick else OUT
    if args.prior != PRIOR:  # another weight goes beside the results, not over them
        out = out.with_name(f"{out.stem}_prior{args.prior:g}.json")
    out.write_text(json.dumps({
        "command": "python " + " ".join(sys.argv),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": round(time.time() - t0, 1),
        "reps": args.reps,
        "prior_problems": args.prior,
        "reps_before": min(args.reps_before, args.reps),
        "worst_after_coverage": worst,
        "worst_before_coverage": min(r.get("before_coverage", 1.0) for r in rows),
        "table": lines,
        "rows": rows,
    }, indent=1) + "\n")  # fmt: skip
    print(f"worst coverage after {worst:.3f}; wrote {out} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
