"""Evaluation statistics: unbiased pass@k, accuracy intervals, Welch's t, the paired t.

Pure functions over numpy arrays; every result is a frozen dataclass with a `metrics` dict.

- `pass_at_k(n, c, k)`: the unbiased estimator 1 - C(n-c, k) / C(n, k) of Chen et al. 2021
  ("Evaluating large language models trained on code"), as a product of min(c, k) factors
  summed in log space, vectorised over problems.
- `accuracy_ci(successes, n)`: Wilson score interval (Wilson 1927) or Clopper-Pearson.
- `t_interval(values)`: the Student-t interval of a mean, the one behind `mean_ci` (e.g. over
  seeds), `paired_t` and `t_halfwidth`; undefined (NaN) when the values have no spread.
- `welch_t(a, b)`: Welch's unequal-variance t test on seed means, with Cohen's d / Hedges' g.
- `paired_t(a, b)`: Student's paired t test and interval of the mean per-problem difference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# ---------------------------------------------------------------------------------------------
# pass@k
# ---------------------------------------------------------------------------------------------


def _as_counts(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"{name} must be integer counts, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating):
        bad = arr[~np.isfinite(arr) | (arr != np.round(arr))]
        if bad.size:
            raise ValueError(f"{name} must hold whole numbers (counts), got {float(bad.flat[0])!r}")
    if arr.dtype.kind in "fu" and arr.size and float(arr.max()) >= 2.0**63:  # int64 would wrap
        raise ValueError(f"{name} must be counts below 2^63, got {float(arr.max()):g}")
    out = arr.astype(np.int64)
    if np.any(out < 0):
        raise ValueError(f"{name} must be >= 0, got a negative value ({int(out.min())})")
    return out


MAX_SAMPLES = 10**6
"""Most samples per problem an eval file may count: `pgrpo eval` draws --samples (8 by default;
pass@k studies draw up to a few hundred). n = 10^10 asked pass@k for a 75 GiB array; n = 10^300
is no count at all."""


def _count_text(x: Any) -> str:
    """repr(x), or its order of magnitude when the digits would flood the message."""
    text = repr(x)
    if isinstance(x, int) and len(text) > 16:
        return f"~1e{len(text.lstrip('-')) - 1}"
    return text if len(text) <= 24 else text[:21] + "..."


def checked_counts(n: Any, c: Any, where: str = "") -> tuple[list[int], list[int]]:
    """(n, c) as lists of ints, or ValueError naming the first bad problem: the one check of
    per-problem counts (`EvalRun`, and every reader of an eval JSON's `per_problem`).
    n, c: [P] samples drawn and correct samples per problem; whole numbers (1.0 is 1, 1.5 is
    refused, not truncated; no booleans or strings), 1 <= n <= MAX_SAMPLES and 0 <= c <= n."""
    at = f"{where}: " if where else ""
    n, c = list(n), list(c)
    if len(n) != len(c):
        raise ValueError(f"{at}{len(n)} sample counts n but {len(c)} correct counts c")
    for i, (ni, ci) in enumerate(zip(n, c, strict=True)):
        whole = all(_whole(x) for x in (ni, ci))
        if not (whole and 1 <= ni and 0 <= ci <= ni):
            raise ValueError(
                f"{at}problem {i} has c={_count_text(ci)} correct of n={_count_text(ni)} "
                "samples; counts must be whole numbers with n >= 1 and 0 <= c <= n"
            )
        if ni > MAX_SAMPLES:
            raise ValueError(
                f"{at}problem {i} has n={_count_text(ni)} samples, more than the "
                f"{MAX_SAMPLES:,} per problem an evaluation draws (a corrupted count)"
            )
    return [int(x) for x in n], [int(x) for x in c]


def _whole(x: Any) -> bool:
    """x is a whole number (an int, or an integral finite float), not a boolean."""
    if isinstance(x, bool | np.bool_) or not isinstance(x, int | float | np.integer | np.floating):
        return False
    if isinstance(x, int | np.integer):
        return True
    return math.isfinite(float(x)) and float(x).is_integer()


MAX_PRODUCT_TERMS = 10**8
"""Most factors `pass_at_k` multiplies in one call (min(c, k) per problem, summed): 10^8 float64
logs are 0.8 GB; more is no evaluation's counts."""


def pass_at_k(n: Any, c: Any, k: Any) -> Any:
    """Unbiased pass@k per problem: the probability that at least one of k samples drawn without
    replacement from n samples, c of them correct, is correct (Chen et al. 2021).

        pass@k = 1 - C(n - c, k) / C(n, k) = 1 - prod_{j=0}^{m-1} (1 - M / (n - j))

    with m = min(c, k), M = max(c, k) (the ratio is symmetric in c and k), evaluated as
    -expm1(sum_j log1p(-M / (n - j))): m factors per problem, each a single rounding, so the
    work does not grow with n and a result near 0 keeps its relative precision (k = 1 is c / n
    itself). n, c: ints or arrays [P] (broadcast together); k: int or array broadcastable to
    them. Returns a float for scalar inputs, else a float64 array of the broadcast shape. Exact
    edge cases: c = 0 gives 0.0; n - c < k gives 1.0. Average the result over problems yourself.
    """
    n_arr, c_arr, k_arr = np.broadcast_arrays(
        _as_counts(n, "n"), _as_counts(c, "c"), _as_counts(k, "k")
    )
    if np.any(k_arr < 1):
        raise ValueError("k must be >= 1 (pass@k of zero samples is undefined)")
    if np.any(c_arr > n_arr):
        i = int(np.argmax(c_arr > n_arr))
        raise ValueError(
            f"c (correct samples) exceeds n (samples) for problem {i}: c={int(c_arr.flat[i])}, "
            f"n={int(n_arr.flat[i])}; check that c counts correct samples among the n drawn"
        )
    if np.any(k_arr > n_arr):
        i = int(np.argmax(k_arr > n_arr))
        raise ValueError(
            f"k={int(k_arr.flat[i])} exceeds the n={int(n_arr.flat[i])} samples of problem {i}: "
            f"pass@k needs at least k samples per problem; draw more samples or lower k"
        )
    out = np.ones(n_arr.shape, dtype=np.float64)
    out[c_arr == 0] = 0.0
    todo = (c_arr > 0) & (n_arr - c_arr >= k_arr)
    n_t, c_t, k_t = n_arr[todo], c_arr[todo], k_arr[todo]
    terms = int(np.minimum(c_t, k_t).sum()) if n_t.size else 0
    if terms > MAX_PRODUCT_TERMS:
        raise ValueError(
            f"pass@k here is a product of {terms:,} factors (min(c, k) per problem), more than "
            f"{MAX_PRODUCT_TERMS:,}: are these sample counts? lower k or check n and c"
        )
    out[todo] = -np.expm1(_log_fail_ratio(n_t, c_t, k_t))
    one = todo & (k_arr == 1)  # pass@1 = c / n, one division
    out[one] = c_arr[one] / n_arr[one]
    return float(out) if out.ndim == 0 else out


def _log_fail_ratio(n: np.ndarray, c: np.ndarray, k: np.ndarray) -> np.ndarray:
    """log(C(n-c, k) / C(n, k)) = sum_{j<m} log1p(-M / (n - j)), m = min(c, k), M = max(c, k),
    for n - c >= k >= 1 and c >= 1 (each factor in (0, 1)). n, c, k: [Q] -> [Q]. All factors
    of all problems in one flat array (`np.add.reduceat` sums each problem's run of m)."""
    if n.size == 0:
        return np.zeros(0)
    m, big = np.minimum(c, k), np.maximum(c, k).astype(np.float64)
    starts = np.concatenate(([0], np.cumsum(m)[:-1]))
    owner = np.repeat(np.arange(n.size), m)  # [T] the problem of each factor
    j = np.arange(owner.size) - starts[owner]  # [T] 0 .. m - 1 within each problem
    logs = np.log1p(-big[owner] / (n[owner] - j).astype(np.float64))
    return np.add.reduceat(logs, starts)


# ---------------------------------------------------------------------------------------------
# Intervals
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided confidence interval at `level`."""

    estimate: float
    low: float
    high: float
    level: float
    method: str
    metrics: dict[str, float] = field(default_factory=dict)


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), e.g. 0.95, got {level}")


def clopper_pearson(hits: float, trials: float, level: float = 0.95) -> tuple[float, float]:
    """The exact binomial interval's Beta quantiles, also at real-valued hits <= trials (an
    effective number of trials: `pgrpo.evaluate.intervals`)."""
    from scipy import stats as sps  # here, not at import: `pgrpo diagnose` stays off scipy.stats

    a = 1 - level
    low = 0.0 if hits <= 0 else float(sps.beta.ppf(a / 2, hits, trials - hits + 1))
    high = 1.0 if hits >= trials else float(sps.beta.ppf(1 - a / 2, hits + 1, trials - hits))
    return low, high


def accuracy_ci(successes: int, n: int, *, level: float = 0.95, method: str = "wilson") -> Interval:
    """Accuracy successes / n with a binomial confidence interval.

    method="wilson": Wilson score interval (good coverage also near 0 and 1);
    method="clopper_pearson": exact (conservative) Beta-quantile interval.
    """
    from scipy import stats as sps  # here, not at import: `pgrpo diagnose` stays off scipy.stats

    _check_level(level)
    s, m = int(_as_counts(successes, "successes")), int(_as_counts(n, "n"))  # 2.7 is no count
    if m < 1:
        raise ValueError(f"n must be >= 1 (number of graded answers), got {n}")
    if not 0 <= s <= m:
        raise ValueError(f"successes must be in [0, n={m}], got {successes}")
    p = s / m
    if method == "wilson":
        z = float(sps.norm.ppf(0.5 + level / 2))
        denom = 1 + z * z / m
        centre = (p + z * z / (2 * m)) / denom
        half = z * math.sqrt(p * (1 - p) / m + z * z / (4 * m * m)) / denom
        low, high = max(0.0, centre - half), min(1.0, centre + half)
    elif method == "clopper_pearson":
        low, high = clopper_pearson(s, m, level)
    else:
        raise ValueError(f"method must be 'wilson' or 'clopper_pearson', got {method!r}")
    return Interval(p, low, high, level, method, {"accuracy": p, "n": float(m)})


@dataclass(frozen=True)
class TInterval:
    """The Student-t interval of a mean: mean +- halfwidth, halfwidth = t_{S-1} * sem, dof =
    S - 1. With no spread sem is 0 and halfwidth NaN (undefined: `t_interval`)."""

    mean: float
    sem: float
    halfwidth: float
    dof: float


def t_interval(values: Any, *, level: float = 0.95, name: str = "values") -> TInterval:
    """The one Student-t interval of mean(x) (Student 1908), x = `values` [S]: S >= 2 finite
    values (ValueError naming `name` otherwise), level in (0, 1). sem = sd(x) / sqrt(S) (ddof
    1), halfwidth = t_{S-1, (1+level)/2} * sem. `mean_ci`, `paired_t` and `t_halfwidth` are this
    interval, and the rule for zero spread is here once: values equal up to rounding
    (`_no_spread`, or so close that their sd underflows to 0) have sem 0 and an undefined (NaN)
    halfwidth, since a sample with no spread says nothing about the spread. Until 2026-12-06
    (session 40) the three disagreed there: `mean_ci` gave [mean, mean] (and, from rounding
    noise alone, an interval 1e-17 wide), `paired_t` NaN, `t_halfwidth` 0."""
    from scipy import stats as sps  # here, not at import: `pgrpo diagnose` stays off scipy.stats

    _check_level(level)
    x = _sample(values, name)
    mean, dof = float(x.mean()), float(x.size - 1)
    sem = 0.0 if _no_spread(x) else float(x.std(ddof=1) / math.sqrt(x.size))
    if not sem > 0:  # no spread, or one too small for float64 (values ~1e-200 apart)
        return TInterval(mean, 0.0, math.nan, dof)
    return TInterval(mean, sem, float(sps.t.ppf(0.5 + level / 2, x.size - 1)) * sem, dof)


def mean_ci(values: Any, *, level: float = 0.95) -> Interval:
    """Mean of `values` [S] (e.g. one accuracy per seed) with its Student-t interval (S - 1 dof,
    `t_interval`). Values with no spread give low = high = NaN and sem 0: the sample says
    nothing about the spread, so the interval is undefined, not [mean, mean]."""
    t = t_interval(values, level=level)
    low, high = t.mean - t.halfwidth, t.mean + t.halfwidth
    return Interval(t.mean, low, high, level, "t", {"sem": t.sem, "n": t.dof + 1})


def _sample(values: Any, name: str, min_size: int = 2) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if x.size < min_size:
        raise ValueError(f"{name} needs at least {min_size} values (e.g. seeds), got {x.size}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} contains NaN or inf; drop or fix those entries first")
    return x


# ---------------------------------------------------------------------------------------------
# Two-sample tests
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WelchResult:
    """Welch's t test of mean(a) - mean(b); diff_low/diff_high: CI of the difference at `level`.
    cohen_d uses the pooled SD; hedges_g is its small-sample correction. With zero variance in
    both samples (each equal up to rounding, `_no_spread`, as `t_interval` reads it) t, dof and p
    are NaN (the test is undefined; since session 40 rounding noise no longer gives a t of 1e15)."""

    t: float
    dof: float
    p_value: float
    mean_a: float
    mean_b: float
    diff: float
    diff_low: float
    diff_high: float
    cohen_d: float
    hedges_g: float
    level: float
    metrics: dict[str, float]


def welch_t(a: Any, b: Any, *, level: float = 0.95) -> WelchResult:
    """Welch's unequal-variance t test on per-seed scores a [Sa], b [Sb] (two-sided)."""
    from scipy import stats as sps  # here, not at import: `pgrpo diagnose` stays off scipy.stats

    _check_level(level)
    x, y = _sample(a, "a"), _sample(b, "b")
    na, nb = x.size, y.size
    va, vb = x.var(ddof=1), y.var(ddof=1)
    diff = float(x.mean() - y.mean())
    se2 = 0.0 if _no_spread(x) and _no_spread(y) else va / na + vb / nb  # rounding is no spread
    if se2 > 0:
        dof = float(se2**2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1)))
        res = sps.ttest_ind(x, y, equal_var=False)
        t, p = float(res.statistic), float(res.pvalue)
        half = float(sps.t.ppf(0.5 + level / 2, dof)) * math.sqrt(se2)
    else:
        t = dof = p = half = math.nan
    pooled = math.sqrt(((na - 1) * va + (nb - 1) * vb) / (na + nb - 2))
    d = diff / pooled if se2 > 0 and pooled > 0 else math.nan  # no spread: no effect size
    g = d * (1.0 - 3.0 / (4.0 * (na + nb) - 9.0))
    metrics = {"t": t, "dof": dof, "p_value": p, "diff": diff, "cohen_d": d, "hedges_g": g}
    return WelchResult(
        t=t,
        dof=dof,
        p_value=p,
        mean_a=float(x.mean()),
        mean_b=float(y.mean()),
        diff=diff,
        diff_low=diff - half,
        diff_high=diff + half,
        cohen_d=d,
        hedges_g=g,
        level=level,
        metrics=metrics,
    )


@dataclass(frozen=True)
class PairedResult:
    """Student's paired t test of mean(a - b) over P pairs (dof = P - 1): diff, its interval
    [low, high] at `level`, t and the two-sided p. When every pair differs by the same amount
    (zero spread, up to rounding) the test is undefined: t, p, low and high are NaN, se 0."""

    diff: float
    low: float
    high: float
    t: float
    dof: float
    p_value: float
    se: float
    level: float
    metrics: dict[str, float]


def paired_t(a: Any, b: Any, *, level: float = 0.95) -> PairedResult:
    """Paired t on per-problem scores a, b [P] of two systems on the same problems (per-problem
    accuracy, averaged over seeds): the t interval and two-sided p of the mean difference d =
    a - b with P - 1 degrees of freedom (Student 1908). The unit is the problem, so the interval
    is about the problem population the P problems were drawn from. By simulation
    (bench/eval_paired.py) it keeps its level from P = 2 up, where the percentile bootstrap it
    replaced called 24% of no-change comparisons of 2 problems significant."""
    from scipy import stats as sps  # here, not at import: `pgrpo diagnose` stays off scipy.stats

    _check_level(level)
    x, y = _sample(a, "a"), _sample(b, "b")
    if x.size != y.size:
        raise ValueError(
            f"paired_t needs one score per problem for both systems, got {x.size} and "
            f"{y.size}; align a and b on the same problems (use welch_t for unpaired samples)"
        )
    ci = t_interval(x - y, level=level, name="a - b")
    diff, dof, se = ci.mean, ci.dof, ci.sem
    if se > 0:
        t = diff / se
        p = float(2 * sps.t.sf(abs(t), dof))
    else:
        t = p = math.nan
    low, high = diff - ci.halfwidth, diff + ci.halfwidth
    metrics = {"diff": diff, "t": t, "dof": dof, "p_value": p, "se": se}
    return PairedResult(diff, low, high, t, dof, p, se, level, metrics)


def t_halfwidth(d: Any, *, level: float = 0.95) -> float:
    """Half-width of the Student-t interval of mean(d) for d [P] (dof P - 1; `t_interval`): the
    tolerance of a gain judged by its own spread. NaN (undefined) when d has no spread, up to
    rounding: not 0, which would call any non-zero gain significant (the search-compression
    verdict does not judge a non-zero gain with an undefined tolerance). ValueError with fewer
    than 2 values or a NaN, as for `mean_ci` and `paired_t` (until session 40 it returned 0
    with fewer than 2 values and with no spread)."""
    return t_interval(d, level=level, name="d").halfwidth


def _no_spread(d: np.ndarray) -> bool:
    """Every value of d [P] the same up to rounding (1e-12 of the largest |d|): equal
    differences computed along different paths (3/8 - 1/4 and 5/8 - 1/2 of means over seeds)
    differ in the last bits, and a t of 1e16 from them would be no evidence of anything."""
    return float(np.ptp(d)) <= 1e-12 * float(np.max(np.abs(d)))


def iid_degeneracy(p: Any, group_size: Any, *, strict: bool = True) -> Any:
    """f_G(p) = p^G + (1 - p)^G: chance that G i.i.d. Bernoulli(p) rewards are all equal.

    p: float or array in [0, 1]; group_size: integer-valued, >= 1, or array (broadcast). Float
    for scalars. strict=False (for log columns and logged hyperparameters): nothing is checked,
    p outside [0, 1] or not finite gives NaN there.
    """
    pa = np.asarray(p, dtype=np.float64)
    ga = np.asarray(group_size)
    integral = np.issubdtype(ga.dtype, np.integer) or (
        np.issubdtype(ga.dtype, np.floating) and bool(np.all(ga == np.floor(ga)))
    )
    if strict and (not integral or np.any(ga < 1)):
        raise ValueError(f"group_size must be integers >= 1, got {group_size!r}")
    bad = ~np.isfinite(pa) | (pa < 0) | (pa > 1)
    if strict and np.any(bad):
        raise ValueError(
            "p must be success probabilities in [0, 1]; rescale graded rewards to [0, 1] first"
        )
    pa = np.where(bad, np.nan, pa)
    out = pa**ga + (1.0 - pa) ** ga
    return float(out) if out.ndim == 0 else out
