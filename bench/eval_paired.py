"""False significance and coverage of `pgrpo eval --baseline`'s paired comparison, before (the
percentile paired bootstrap over problems, until 2026-12-06) and after (Student's paired t on
the per-problem differences, dof = P - 1: `pgrpo.core.stats.paired_t`), and of the
search-compression verdict before (a 2-standard-error rule) and after (the t interval's
half-width), on simulated evaluations.

    python bench/eval_paired.py [--reps 2000] [--n-boot 1000]

Each cell: P problems (2, 3, 5, 10, 20, 50) with solve rates p ~ Beta(1, 1), 8 samples per
problem for each system. "no change": both systems solve at p (the difference of the mean
accuracies over the problem population is 0); "a gain": the trained system solves at
logistic(logit(p) + 0.5) (the population gain by quadrature, `true_gain`: 0.083). Per cell:
the share of comparisons called significant at 0.05, the share whose 95% interval covers the
true gain, and the share where the paired t is undefined (every problem's accuracy changed by
the same amount: not significant, no interval); "verdict" is the share of no-change comparisons
that
`search_compression` calls a gain ("search compression" or "capacity expansion", 8 samples:
pass@1 and pass@8; since 2026-12-06 a gain with no spread is "not judged", not a gain). Both
methods see the same simulated counts. Writes bench/results/eval_paired.json with the command
and date (about a minute of one CPU).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import integrate, special

from pgrpo.core.stats import paired_t, pass_at_k
from pgrpo.evaluate.metrics import EvalRun, search_compression

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "bench" / "results" / "eval_paired.json"
PROBLEMS = (2, 3, 5, 10, 20, 50)
SAMPLES = 8
SHIFT = 0.5
"""The gain's shift of each problem's solve rate on the logit scale."""


def trained_rate(p: np.ndarray) -> np.ndarray:
    return special.expit(special.logit(np.clip(p, 1e-12, 1 - 1e-12)) + SHIFT)


def true_gain() -> float:
    """E[logistic(logit(p) + SHIFT) - p] over p ~ Beta(1, 1) (uniform), by quadrature."""
    value, _ = integrate.quad(lambda p: float(trained_rate(np.array([p]))[0]) - p, 0.0, 1.0)
    return value


def bootstrap_before(d: np.ndarray, n_boot: int, seed: int) -> tuple[float, float, float]:
    """(low, high, p): the percentile paired bootstrap `compare` used until 2026-12-06
    (`pgrpo.core.stats.paired_bootstrap`, 10,000 resamples there): problems resampled with
    replacement, the 2.5/97.5% quantiles of the resampled mean difference, and p = (1 +
    #{|d* - d| >= |d|}) / (n_boot + 1) from the distribution shifted to the null."""
    means = d[np.random.default_rng(seed).integers(0, d.size, (n_boot, d.size))].mean(1)
    obs = float(d.mean())
    lo, hi = np.quantile(means, [0.025, 0.975])
    p = (1 + int(np.sum(np.abs(means - obs) >= abs(obs)))) / (n_boot + 1)
    return float(lo), float(hi), p


def verdict_before(base: np.ndarray, trained: np.ndarray) -> str:
    """The search-compression verdict with the 2-standard-error tolerance of until 2026-12-06
    (base, trained: [P] correct counts of SAMPLES)."""
    n = np.full(base.size, SAMPLES)

    def gain_and_tol(k: int) -> tuple[float, float]:
        d = pass_at_k(n, trained, k) - pass_at_k(n, base, k)
        return float(d.mean()), 2 * float(d.std(ddof=1) / math.sqrt(d.size))

    (g1, t1), (gk, tk) = gain_and_tol(1), gain_and_tol(SAMPLES)
    return "capacity expansion" if gk > tk else "search compression" if g1 > t1 else "no gain"


GAINS = ("capacity expansion", "search compression")


def cell(problems: int, reps: int, n_boot: int, gain: float, rng) -> dict:
    """One problem count: no change and a gain, before and after."""
    row: dict = {"problems": problems}
    ids = [str(i) for i in range(problems)]
    for label, truth in (("null", 0.0), ("gain", gain)):
        sig_a = cov_a = undef = sig_b = cov_b = verdict_a = verdict_b = 0
        for r in range(reps):
            p = rng.beta(1.0, 1.0, problems)
            base = rng.binomial(SAMPLES, p)
            trained = rng.binomial(SAMPLES, trained_rate(p) if truth else p)
            d = (trained - base) / SAMPLES
            res = paired_t(trained / SAMPLES, base / SAMPLES)
            if math.isnan(res.p_value):
                undef += 1
            else:
                sig_a += res.p_value < 0.05
                cov_a += res.low <= truth <= res.high
            lo, hi, pb = bootstrap_before(d, n_boot, seed=r)
            sig_b += pb < 0.05
            cov_b += lo <= truth <= hi
            if not truth:
                runs = [EvalRun(s, ids, [SAMPLES] * problems, c.tolist())
                        for s, c in (("base", base), ("trained", trained))]  # fmt: skip
                verdict_a += search_compression(runs[:1], runs[1:])["verdict"] in GAINS
                verdict_b += verdict_before(base, trained) in GAINS
        defined = reps - undef
        row[label] = {
            "truth": truth,
            "after_significant": sig_a / reps,
            "after_coverage": cov_a / defined if defined else None,
            "after_undefined": undef / reps,
            "before_significant": sig_b / reps,
            "before_coverage": cov_b / reps,
        }
        if not truth:
            row[label] |= {"after_verdict_gain": verdict_a / reps,
                           "before_verdict_gain": verdict_b / reps}  # fmt: skip
    return row


def table(rows: list[dict]) -> list[str]:
    """Markdown: per problem count, before and after."""
    out = [
        "| problems | no change: significant at 0.05, before / after | no change: 95% CI "
        "covers 0, before / after (where defined) | t undefined | no change: a gain verdict, "
        "before / after | gain: significant, before / after | gain: CI covers it, before / "
        "after (where defined) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        n, g = r["null"], r["gain"]
        cov = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
        out.append(
            f"| {r['problems']} | {n['before_significant']:.3f} / {n['after_significant']:.3f} "
            f"| {n['before_coverage']:.3f} / {cov(n['after_coverage'])} "
            f"| {n['after_undefined']:.3f} "
            f"| {n['before_verdict_gain']:.3f} / {n['after_verdict_gain']:.3f} "
            f"| {g['before_significant']:.3f} / {g['after_significant']:.3f} "
            f"| {g['before_coverage']:.3f} / {cov(g['after_coverage'])} |"
        )
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000, help="simulated comparisons per cell")
    ap.add_argument("--n-boot", type=int, default=1000, help="the bootstrap's resamples")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    t0 = time.time()
    gain = true_gain()
    rows = []
    for i, problems in enumerate(PROBLEMS):
        rows.append(cell(problems, args.reps, args.n_boot, gain, np.random.default_rng(i)))
        print(f"P={problems} done ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    lines = table(rows)
    print("\n".join(lines))
    write_results(args.out, "eval_paired.py", argv, seconds=round(time.time() - t0, 1),
                  reps=args.reps, n_boot=args.n_boot, samples=SAMPLES, logit_shift=SHIFT,
                  true_gain=gain, table=lines, rows=rows)  # fmt: skip


if __name__ == "__main__":
    main()
