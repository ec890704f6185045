"""Coverage of `pgrpo eval`'s 95% interval over problems (`pgrpo.evaluate.intervals.problem_ci`):
the cluster bootstrap it replaced on 2026-12-04 (BCa, Wilson on P problems when degenerate),
Clopper-Pearson at the effective number of trials alone (Korn & Graubard 1998; 2026-12-04 to
2026-12-06: `intervals.effective_n_ci`), and that interval with the far-end reach of
2026-12-06 (`problem_ci`: as far as a group of problems the draw missed could move the mean,
`intervals.far_end`), on simulated evaluations.

    python bench/eval_intervals.py [--reps 2000] [--reps-before 400] [--quick]

Each cell: P problems whose solve rates p are drawn from a difficulty distribution, n samples
per problem, c ~ Binomial(n, p); the interval of the mean c/n should cover the population mean
95% of the time. The Beta grid: 14 Beta shapes (from all-or-nothing problems, Beta(0.02, 0.02),
to homogeneous ones, Beta(5, 50); mostly unsolvable ones, Beta(0.02, 1), Beta(0.1, 5), Beta(0.2,
4), as a review found under-covered), P in {10, 20, 50, 100, 200}, n in {1, 2, 4, 8, 16}. The
two-group mixes (review 2026-12-06: a share pi of the problems apart from the rest, e.g. never
solved, the rest almost always): pi in {0.005, 0.01, 0.02, 0.03, 0.05, 0.08} of problems at 0
(the rest at 0.98), at 1 (the rest at 0.02) or at 0.9 (the rest at 0.02), P in {20, 30, 50,
100, 200}, n = 16 (a mix cell also counts the misses by whether the draw held fewer or more
apart problems than expected). The interval is also checked on pass@n (truth 1 - E[(1 -
p)^n]). All methods see the same simulated counts (the bootstrap the first --reps-before of
each Beta cell's --reps; not run on the mixes). Widths are mean widths. Writes
bench/results/eval_intervals.json with the command and date (--quick: a smaller grid,
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
from pgrpo.evaluate.intervals import effective_n_ci, problem_ci

OUT = Path(__file__).resolve().parents[1] / "bench" / "results" / "eval_intervals.json"
SHAPES = [
    (0.02, 0.02), (0.3, 0.3), (0.5, 0.5), (1, 1), (2, 2), (5, 0.5), (0.05, 0.5),
    (0.5, 5), (0.2, 4), (0.1, 5), (0.05, 5), (0.02, 1), (1, 20), (5, 50),
]  # fmt: skip
PROBLEMS = (10, 20, 50, 100, 200)
PRIOR = intervals.PRIOR_PROBLEMS
SAMPLES = (1, 2, 4, 8, 16)
MIX_SHARES = (0.005, 0.01, 0.02, 0.03, 0.05, 0.08)
MIX_GROUPS = ((0.0, 0.98), (1.0, 0.02), (0.9, 0.02))
"""(solve rate of the share pi apart, solve rate of the rest)."""
MIX_PROBLEMS = (20, 30, 50, 100, 200)
MIX_SAMPLES = 16


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
    """Coverage and mean width of the intervals in one cell of the Beta grid."""
    p = rng.beta(a, b, (reps, problems))
    row = {"shape": f"Beta({a:g}, {b:g})", "mean": a / (a + b)}
    row |= measure(p, a / (a + b), pass_truth(a, b, samples), samples, reps_before, rng)
    del row["hits"]
    return row


def mix_cell(share: float, far: float, rest: float, problems: int, reps: int, rng):
    """Coverage and mean width in one two-group mix: a share of the problems at solve rate
    `far`, the rest at `rest`."""
    apart = rng.random((reps, problems)) < share
    p = np.where(apart, far, rest)
    n = MIX_SAMPLES
    truth_k = share * (1 - (1 - far) ** n) + (1 - share) * (1 - (1 - rest) ** n)
    row = {"shape": f"{share:g} at {far:g}, rest at {rest:g}",
           "mean": share * far + (1 - share) * rest}  # fmt: skip
    row |= measure(p, row["mean"], truth_k, n, 0, rng)
    drawn, missed = apart.sum(1), ~row.pop("hits")  # [reps] apart problems drawn, misses
    expected = share * problems
    return row | {  # the misses by the count of apart problems the draw held
        "after_misses_fewer_apart": int(np.sum(missed & (drawn < expected))),
        "after_misses_more_apart": int(np.sum(missed & (drawn > expected))),
    }


def measure(p: np.ndarray, truth: float, truth_k: float, samples: int, reps_before: int, rng):
    """Coverage and mean width of each interval on counts c ~ Binomial(samples, p), p: [reps,
    P] solve rates; pass@n too (n = samples > 1); `hits`: [reps] whether `problem_ci` covered."""
    reps, problems = p.shape
    c = rng.binomial(samples, p)
    n_arr = np.full(problems, samples)
    hits = np.zeros(reps, dtype=bool)
    width = hit_k = hit_e = width_e = 0.0
    bhit = bwidth = 0.0
    for r in range(reps):
        x = c[r] / samples
        lo, hi, _ = problem_ci(x, max_trials=problems * samples)
        hits[r] = lo <= truth <= hi
        width += hi - lo
        elo, ehi = effective_n_ci(x, max_trials=problems * samples)
        hit_e += elo <= truth <= ehi
        width_e += ehi - elo
        if samples > 1:
            klo, khi, _ = problem_ci(pass_at_k(n_arr, c[r], samples), max_trials=problems)
            hit_k += klo <= truth_k <= khi
        if r < reps_before:
            blo, bhi = before_ci(x, seed=r)
            bhit += blo <= truth <= bhi
            bwidth += bhi - blo
    row = {
        "problems": problems,
        "samples": samples,
        "after_coverage": float(hits.mean()),
        "after_width": width / reps,
        "after_pass_at_n_coverage": hit_k / reps if samples > 1 else None,
        "effective_n_coverage": hit_e / reps,
        "effective_n_width": width_e / reps,
    }
    if reps_before:
        row |= {"before_coverage": bhit / reps_before, "before_width": bwidth / reps_before}
    return row | {"hits": hits}


def _worst(rs: list[dict], key: str, with_n: bool = True) -> str:
    r = min(rs, key=lambda r: r[key])
    where = f"{r['problems']}, {r['samples']}" if with_n else f"{r['problems']}"
    return f"{r[key]:.3f} ({where})"


def _ratio(rs: list[dict], num: str, den: str, keep=lambda r: True) -> str:
    ratios = [r[num] / r[den] for r in rs if keep(r) and r[den] > 0]
    return f"{np.median(ratios):.2f} ({max(ratios):.2f})" if ratios else "-"


def summary_lines(rows: list[dict]) -> list[str]:
    """Markdown: per Beta shape, the worst cell of each interval and the width ratios (after /
    effective-n alone; after / bootstrap where the bootstrap covered >= 0.94)."""
    out = [
        "| problems' solve rates | mean | worst coverage: bootstrap (P, n) | effective n alone "
        "| after | after, pass@n | width after / effective n alone: median (max) | width after / "
        "bootstrap where it covered >= 0.94: median (max) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for shape in dict.fromkeys(r["shape"] for r in rows):
        rs = [r for r in rows if r["shape"] == shape]
        ks = [r["after_pass_at_n_coverage"] for r in rs if r["after_pass_at_n_coverage"]]
        boot = _worst(rs, "before_coverage") if "before_coverage" in rs[0] else "-"
        fine = lambda r: r.get("before_coverage", 0) >= 0.94  # noqa: E731
        out.append(
            f"| {shape} | {rs[0]['mean']:.3f} | {boot} | {_worst(rs, 'effective_n_coverage')} "
            f"| {_worst(rs, 'after_coverage')} | {f'{min(ks):.3f}' if ks else '-'} "
            f"| {_ratio(rs, 'after_width', 'effective_n_width')} "
            f"| {_ratio(rs, 'after_width', 'before_width', fine)} |"
        )
    return out


def mix_lines(rows: list[dict]) -> list[str]:
    """Markdown: per two-group mix, the worst cell over the problem counts (n = 16)."""
    out = [
        "| two groups of problems | mean | worst coverage: effective n alone (P) | after (P) | "
        "after, pass@16 | width after / effective n alone: median (max) |",
        "|---|---|---|---|---|---|",
    ]
    for shape in dict.fromkeys(r["shape"] for r in rows):
        rs = [r for r in rows if r["shape"] == shape]
        ks = min(r["after_pass_at_n_coverage"] for r in rs)
        out.append(
            f"| {shape} | {rs[0]['mean']:.4f} | {_worst(rs, 'effective_n_coverage', False)} "
            f"| {_worst(rs, 'after_coverage', False)} | {ks:.3f} "
            f"| {_ratio(rs, 'after_width', 'effective_n_width')} |"
        )
    return out


def width_quantiles(rows: list[dict]) -> dict[str, float]:
    """Width after / effective n alone over cells: median, 90th percentile, max."""
    r = np.array([x["after_width"] / x["effective_n_width"] for x in rows])
    return {"median": float(np.median(r)), "p90": float(np.quantile(r, 0.9)), "max": float(r.max())}


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
    shares, mix_problems = MIX_SHARES, MIX_PROBLEMS
    if args.quick:
        shapes, problems, samples = [(0.3, 0.3), (0.02, 1), (1, 20)], (10, 50), (1, 8)
        shares, mix_problems = (0.03,), (50,)
    t0 = time.time()
    rows = []
    for i, (a, b) in enumerate(shapes):
        for j, n_p in enumerate(problems):
            for k, n_s in enumerate(samples):
                rng = np.random.default_rng([i, j, k])
                rows.append(cell(a, b, n_p, n_s, args.reps, min(args.reps_before, args.reps), rng))
        print(f"{shapes[i]} done ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    mixes = []
    for i, share in enumerate(shares):
        for j, (far, rest) in enumerate(MIX_GROUPS):
            for k, n_p in enumerate(mix_problems):
                rng = np.random.default_rng([100 + i, j, k])
                mixes.append(mix_cell(share, far, rest, n_p, args.reps, rng))
        print(f"mixes at {share} done ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    lines, mlines = summary_lines(rows), mix_lines(mixes)
    print("\n".join(lines + [""] + mlines))
    worst = min(r["after_coverage"] for r in rows)
    worst_mix = min(r["after_coverage"] for r in mixes)
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
        "worst_effective_n_coverage": min(r["effective_n_coverage"] for r in rows),
        "worst_before_coverage": min(r.get("before_coverage", 1.0) for r in rows),
        "width_after_vs_effective_n": width_quantiles(rows),
        "worst_after_coverage_mixes": worst_mix,
        "worst_effective_n_coverage_mixes": min(r["effective_n_coverage"] for r in mixes),
        "width_after_vs_effective_n_mixes": width_quantiles(mixes),
        "table": lines,
        "mix_table": mlines,
        "rows": rows,
        "mixes": mixes,
    }, indent=1) + "\n")  # fmt: skip
    print(f"worst coverage after {worst:.3f} (mixes {worst_mix:.3f}); wrote {out} "
          f"({time.time() - t0:.0f} s)")  # fmt: skip


if __name__ == "__main__":
    main()
