"""The interval over problems of a mean per-problem score (accuracy c/n, or unbiased pass@k).

The problem, not the sample, is the unit: 50 problems x 8 samples are 50 draws from the problem
population whose 8 samples are correlated (a hard problem fails all 8), not 400 independent
trials. How many independent trials they are worth lies between P (every problem all-or-nothing)
and P x n (no problem harder than another); the interval is the Clopper-Pearson interval at that
*effective* number of trials (Korn & Graubard 1998, "Confidence intervals for proportions with
small expected number of positive counts estimated from survey data", Survey Methodology 24:
the survey statistician's interval for a proportion from clustered data):

    n_eff = P / d,   d = s^2 / (m (1 - m))  (the design effect: the observed variance of the
                                              per-problem scores over its largest possible
                                              value at mean m, that of all-or-nothing problems)

Near 0 and 1 the variance is estimated from a handful of problems: 1 problem solved once in 8
among 50 looks like independent samples (d = 0.125, n_eff = 400), yet the population may be
mostly unsolvable problems with a few easy ones (a 95% bootstrap interval covered the mean of
Beta(0.02, 1) problems in 86% of evaluations). So d is shrunk towards its worst case 1 with the
weight of one problem (`PRIOR_PROBLEMS`) against the k problems that carry the score,

    d~ = (k d + 1) / (k + 1),   k = min over y in {x, 1 - x} of (sum y)^2 / sum y^2

(k: the participation ratio, the effective number of problems holding the score, counted on the
scarcer side: 0 when no problem scored, 1 when one did, P when all scored alike). Every problem
scored 0 (or 1) gives d~ = 1: Clopper-Pearson with P trials.

No estimate from the P problems sees a kind of problem the draw missed: when 3% of a split's
problems are never solved and the rest almost always are, 50 drawn problems hold none of the
unsolved ones 22% of the time, and the interval above then sat wholly above the split's mean (it
covered 0.79 with 16 samples each). So the interval also reaches as far as such a missed group
could move the mean
(`far_end`): a share of the problems at the far end (0 below the mean, 1 above it) up to
pi = 1 - ((1 - level) / 2)^(1 / P), the Clopper-Pearson bound on a share seen in none of P
draws (~3.7 / P; Hanley & Lippman-Hand 1983, "If nothing goes wrong, is everything all
right?", JAMA 249: the rule of three). It is the interval itself when every problem scored 0
(or 1), and moves nothing where the problems' spread already reaches further. Coverage over a
grid of problem difficulties (Beta shapes) and two-group mixes, problem counts 10-200 and
samples 1-16, is in docs/diagnostics.md (`bench/eval_intervals.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PRIOR_PROBLEMS = 1.0
"""Weight, in problems, of the worst-case design effect (1) that the observed one is shrunk
towards. On the Beta grid of bench/eval_intervals.py (before the far-end reach): none
under-covers sparse scores; 0.5 covers >= 0.941; 1 covers >= 0.946, 7% wider than the bootstrap
it replaced at the median. It does not cover a group of problems the draw missed (`far_end`)."""

METHOD = "effective_n_clopper_pearson+far_end"


def participation(y: np.ndarray) -> float:
    """(sum y)^2 / sum y^2 of y >= 0: the effective number of non-zero entries (0 if none)."""
    sq = float(np.sum(y * y))
    return float(np.sum(y)) ** 2 / sq if sq > 0 else 0.0


def effective_trials(values: Sequence[float], max_trials: float | None = None) -> float:
    """n_eff of the module docstring for per-problem scores values: [P] in [0, 1], at most
    max_trials (the samples behind the scores: no more trials than draws)."""
    x = np.asarray(values, dtype=float).reshape(-1)
    mean = float(x.mean())
    spread = mean * (1.0 - mean)
    design = float(x.var(ddof=1)) / spread if x.size >= 2 and spread > 0 else 1.0
    k = min(participation(x), participation(1.0 - x))
    shrunk = min(1.0, (k * design + PRIOR_PROBLEMS) / (k + PRIOR_PROBLEMS))
    n_eff = x.size / shrunk
    return min(n_eff, max_trials) if max_trials else n_eff


def effective_n_ci(
    values: Sequence[float], *, level: float = 0.95, max_trials: float | None = None
) -> tuple[float, float]:
    """(low, high): Clopper-Pearson at the effective number of trials (`effective_trials`) and
    the effective successes mean x n_eff (a real number: the Beta quantiles of the exact binomial
    interval, continuous in both), for per-problem scores values: [P] in [0, 1]."""
    from pgrpo.core.stats import clopper_pearson

    x = np.asarray(values, dtype=float).reshape(-1)
    mean = float(x.mean())
    n = effective_trials(x, max_trials)
    lo, hi = clopper_pearson(mean * n, n, level)
    return min(lo, mean), max(hi, mean)


def far_end(mean: float, problems: int, level: float = 0.95) -> tuple[float, float]:
    """(low, high): the means if a share pi of the problems the draw missed sat at 0 (low) or
    at 1 (high), pi = 1 - ((1 - level) / 2)^(1 / problems), the Clopper-Pearson upper bound on
    a share of problems seen in none of the draws: low = mean (1 - pi), high = mean + (1 - mean)
    pi. mean: the mean per-problem score; problems: P."""
    pi = 1.0 - ((1.0 - level) / 2.0) ** (1.0 / problems)
    return mean * (1.0 - pi), mean + (1.0 - mean) * pi


def problem_ci(
    values: Sequence[float], *, level: float = 0.95, max_trials: float | None = None
) -> tuple[float, float, str]:
    """(low, high, method): interval for the mean over problems of per-problem scores.

    values: [P] one score per problem in [0, 1] (accuracy c/n, or unbiased pass@k); max_trials:
    the samples behind them (caps the effective trials). The Clopper-Pearson interval at the
    effective number of trials (`effective_n_ci`), widened where needed to reach the means a
    group of problems the draw missed could give (`far_end`)."""
    x = np.asarray(values, dtype=float).reshape(-1)
    if x.size == 0 or not np.all(np.isfinite(x)) or x.min() < 0 or x.max() > 1:
        raise ValueError(f"problem_ci needs >= 1 per-problem score in [0, 1], got {x!r}")
    lo, hi = effective_n_ci(x, level=level, max_trials=max_trials)
    far_lo, far_hi = far_end(float(x.mean()), x.size, level)
    return min(lo, far_lo), max(hi, far_hi), METHOD
