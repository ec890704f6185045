"""pass@k against brute-force enumeration; intervals and tests against scipy and known values."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats as sps

import pgrpo
from pgrpo.core.stats import (
    MAX_SAMPLES,
    accuracy_ci,
    checked_counts,
    mean_ci,
    paired_t,
    pass_at_k,
    t_halfwidth,
    welch_t,
)


def _brute_pass_at_k(n: int, c: int, k: int) -> float:
    """Fraction of the k-subsets of n samples (the first c correct) holding a correct one."""
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(i < c for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_pass_at_k_matches_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(_brute_pass_at_k(n, c, k), abs=1e-12)


NCK = st.integers(1, 300).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))
)


@settings(max_examples=100, deadline=None)
@given(NCK)
def test_pass_at_k_matches_exact_rational(nck):
    n, c, k = nck
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-12, abs=1e-15)


BIG_NCK = st.integers(1, 20_000).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))
)


@settings(max_examples=150, deadline=None)
@given(st.one_of(NCK, BIG_NCK))
def test_pass_at_k_is_exact_to_rounding(nck):
    """Against the exact rational 1 - C(n-c, k) / C(n, k): relative error <= 1e-12 also where
    pass@k is tiny (c, k << n), where 1 - (a ratio near 1) loses the digits."""
    n, c, k = nck
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    got = pass_at_k(n, c, k)
    assert got == pytest.approx(float(exact), rel=1e-12, abs=0.0)
    assert pass_at_k(n, c, k) == pass_at_k(np.array([n]), np.array([c]), k)[0]


@pytest.mark.parametrize(
    ("n", "c", "k"),
    [(10**8, 1, 1), (10**8, 1, 2), (10**7, 3, 5), (10**12, 2, 3), (10**15, 7, 10**9)],
)
def test_pass_at_k_of_huge_n_is_fast_and_exact(n, c, k):
    """Review 2026-12-06: pass_at_k(10**8, 1, 1) took 8.5 s (a cumulative sum over all n) and
    was off by 8e-8 relative; n = 10**12 asked for terabytes. The work is min(c, k) factors."""
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k)) if k < 50 else None
    got = pass_at_k(n, c, k)
    if exact is not None:
        assert got == pytest.approx(float(exact), rel=1e-13, abs=0.0)
    else:  # C(n - k, c) / C(n, c): c = 7 factors, checked by the symmetric product exactly
        ratio = Fraction(1)
        for j in range(c):
            ratio *= Fraction(n - k - j, n - j)
        assert got == pytest.approx(float(1 - ratio), rel=1e-12)
    assert pass_at_k(10**8, 1, 1) == 1e-8  # c / n itself


def test_checked_counts_refuses_absurd_sample_counts():
    """Review 2026-12-06: n = 10**10 went on to a 74.5 GiB allocation, n = 10**300 to a garbled
    error; both are one ValueError naming the problem, the count and the fix."""
    with pytest.raises(ValueError, match=r"run x: problem 0 has n=10000000000 samples, more than"):
        checked_counts([10**10], [3], "run x")
    with pytest.raises(ValueError, match=r"problem 1 has n=~1e300 samples.*corrupted count"):
        checked_counts([8, 10**300], [1, 3])
    with pytest.raises(ValueError, match=r"c=~1e400 correct of n=8"):
        checked_counts([8], [10**400])
    assert checked_counts([MAX_SAMPLES, 8.0], [1, 8]) == ([MAX_SAMPLES, 8], [1, 8])


def test_pass_at_k_vectorised_and_exact_edges():
    n = np.array([10, 10, 10, 200, 5])
    c = np.array([0, 10, 3, 17, 4])
    out = pass_at_k(n, c, 2)
    assert out.shape == (5,)
    assert out[0] == 0.0 and out[1] == 1.0  # exact 0 and 1
    assert out[4] == 1.0  # n - c = 1 < k: every pair holds a correct sample
    for i in range(5):
        assert out[i] == pytest.approx(pass_at_k(int(n[i]), int(c[i]), 2), abs=0)
    ks = pass_at_k(10, 3, np.array([1, 2, 5, 10]))  # array k
    np.testing.assert_allclose(ks, [_brute_pass_at_k(10, 3, k) for k in (1, 2, 5, 10)])
    assert isinstance(pass_at_k(4, 1, 1), float)
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pgrpo.pass_at_k is pass_at_k
    # large n: the naive comb ratio overflows floats, the product form does not
    big = pass_at_k(100_000, 5, 1000)
    assert big == pytest.approx(1 - (1 - 1000 / 100_000) ** 5, rel=1e-3)
    assert 0.0 < big < 1.0


@pytest.mark.parametrize(
    "args,pattern",
    [
        ((5, 2, 6), r"k=6 exceeds the n=5 samples of problem 0.*draw more samples or lower k"),
        ((5, 6, 1), r"c \(correct samples\) exceeds n \(samples\) for problem 0"),
        ((5, -1, 1), r"c must be >= 0"),
        ((-5, 0, 1), r"n must be >= 0"),
        ((5, 1, 0), r"k must be >= 1"),
        ((5, 1.5, 1), r"c must hold whole numbers"),
        (([5, 5], [1, 2], [1, 2, 3]), r"shape mismatch|broadcast"),
    ],
)
def test_pass_at_k_errors(args, pattern):
    with pytest.raises(ValueError, match=pattern):
        pass_at_k(*args)


def test_pass_at_k_rejects_non_numbers():
    with pytest.raises(TypeError, match="integer counts"):
        pass_at_k(np.array([True]), 1, 1)


def test_wilson_and_clopper_pearson_known_values():
    w = accuracy_ci(0, 10)
    assert w.low == 0.0 and w.high == pytest.approx(0.2775, abs=1e-4)  # standard table value
    w = accuracy_ci(73, 100)
    z = sps.norm.ppf(0.975)
    p, n = 0.73, 100
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert (w.low, w.high) == pytest.approx((centre - half, centre + half))
    assert w.estimate == 0.73 and w.metrics["accuracy"] == 0.73
    cp = accuracy_ci(0, 10, method="clopper_pearson")
    assert cp.high == pytest.approx(1 - 0.025 ** (1 / 10))  # exact: 0.3085
    cp = accuracy_ci(10, 10, method="clopper_pearson")
    assert cp.high == 1.0 and cp.low == pytest.approx(0.025 ** (1 / 10))
    assert accuracy_ci(5, 10, level=0.99).high > accuracy_ci(5, 10).high


def test_wilson_coverage_is_near_nominal():
    rng = np.random.default_rng(0)
    p, n = 0.3, 50
    hits = sum((ci := accuracy_ci(int(s), n)).low <= p <= ci.high for s in rng.binomial(n, p, 2000))
    assert 0.92 <= hits / 2000 <= 0.98


@pytest.mark.parametrize(
    "call,pattern",
    [
        (lambda: accuracy_ci(11, 10), r"successes must be in \[0, n=10\]"),
        (lambda: accuracy_ci(0, 0), r"n must be >= 1"),
        (lambda: accuracy_ci(1, 10, level=95), r"level must be in \(0, 1\), e.g. 0.95"),
        (lambda: accuracy_ci(1, 10, method="wald"), r"'wilson' or 'clopper_pearson'"),
        (lambda: mean_ci([0.5]), r"at least 2 values"),
        (lambda: mean_ci([0.5, np.nan]), r"NaN or inf; drop or fix"),
        (lambda: paired_t([1, 2, 3], [1, 2]), r"one score per problem.*welch_t"),
        (lambda: paired_t([1], [1]), r"a needs at least 2 values"),
        (lambda: welch_t([1.0], [1.0, 2.0]), r"a needs at least 2 values"),
    ],
)
def test_interval_and_test_errors(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


def test_mean_ci_matches_scipy():
    x = np.array([0.71, 0.74, 0.69, 0.77, 0.72, 0.70, 0.75])
    ci = mean_ci(x)
    lo, hi = sps.t.interval(0.95, x.size - 1, loc=x.mean(), scale=sps.sem(x))
    assert (ci.low, ci.high) == pytest.approx((lo, hi))


def test_welch_t_of_two_samples_equal_up_to_rounding_is_undefined():
    """3/8 - 1/4 computed along two paths differs in the last bit: t was ~1e15, p 0."""
    a = [0.1 + 0.2, 0.3, 0.3]  # 0.30000000000000004, 0.3, 0.3
    b = [0.2, 0.2, 0.2]
    res = welch_t(a, b)
    assert math.isnan(res.t) and math.isnan(res.p_value) and res.diff == pytest.approx(0.1)
    assert math.isnan(res.cohen_d) and math.isnan(res.hedges_g)  # were ~2e15
    assert math.isnan(welch_t([0.3] * 3, [0.2] * 3).cohen_d)  # np.var([0.3] * 3) is not 0


def test_welch_t_matches_scipy_and_hand_formulas():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.74, 0.02, 7), rng.normal(0.28, 0.05, 7)
    res = welch_t(a, b)
    ref = sps.ttest_ind(a, b, equal_var=False)
    assert res.t == pytest.approx(ref.statistic) and res.p_value == pytest.approx(ref.pvalue)
    va, vb = a.var(ddof=1) / 7, b.var(ddof=1) / 7
    dof = (va + vb) ** 2 / (va**2 / 6 + vb**2 / 6)
    assert res.dof == pytest.approx(dof)
    half = sps.t.ppf(0.975, dof) * math.sqrt(va + vb)
    assert (res.diff_low, res.diff_high) == pytest.approx((res.diff - half, res.diff + half))
    pooled = math.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2)
    assert res.cohen_d == pytest.approx((a.mean() - b.mean()) / pooled)
    assert res.hedges_g == pytest.approx(res.cohen_d * (1 - 3 / (4 * 14 - 9)))
    assert res.metrics["p_value"] == res.p_value
    same = welch_t([0.5, 0.5], [0.5, 0.5])  # zero variance: the test is undefined, not a crash
    assert math.isnan(same.t) and math.isnan(same.p_value) and same.diff == 0.0


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 60), st.integers(0, 2**16))
def test_paired_t_is_students_paired_t(problems, seed):
    """Interval and p against scipy's paired t (`ttest_rel`) and the textbook interval
    mean(d) +- t_{P-1} sd(d) / sqrt(P); the interval holds 0 exactly when p >= 0.05."""
    rng = np.random.default_rng(seed)
    a = rng.binomial(8, rng.random(problems)) / 8
    b = rng.binomial(8, rng.random(problems)) / 8
    res = paired_t(a, b)
    d = a - b
    if d.std() == 0:  # no spread: undefined, not a zero-width certainty
        assert math.isnan(res.p_value) and math.isnan(res.low) and res.diff == d.mean()
        return
    ref = sps.ttest_rel(a, b)
    assert res.p_value == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)
    assert res.t == pytest.approx(ref.statistic) and res.dof == problems - 1
    half = sps.t.ppf(0.975, problems - 1) * d.std(ddof=1) / math.sqrt(problems)
    assert (res.low, res.high) == pytest.approx((d.mean() - half, d.mean() + half))
    assert (res.low <= 0 <= res.high) == (res.p_value >= 0.05 - 1e-12)
    assert t_halfwidth(d) == pytest.approx(half)


def test_paired_t_with_two_problems_is_not_a_bootstrap_floor():
    """Review 2026-12-06: with 2 shared problems the percentile bootstrap's "95%" interval was
    [min d, max d] and p = 1 / (n_boot + 1) printed as p=0.0001. The t interval with 1 degree
    of freedom is 12.7 standard errors wide each side: 2 problems prove nothing."""
    res = paired_t([5 / 8, 6 / 8], [4 / 8, 4 / 8])
    assert res.diff == pytest.approx(0.1875)
    assert res.low < 0 < res.high and res.p_value > 0.1
    same = paired_t([0.5, 0.25, 1.0], [0.5, 0.25, 1.0])
    assert same.diff == 0.0 and math.isnan(same.p_value) and math.isnan(same.t)


def test_a_spread_of_rounding_is_no_spread():
    """The same difference reached along different float paths (means over seeds) differs in
    the last bits; the t of those bits (~1e16) is undefined, not p = 0."""
    a = np.array([(1 / 3 + 2 / 3) / 2, 0.7, 0.1 + 0.2])
    b = a - 0.1
    assert np.ptp(a - b) > 0  # rounding
    res = paired_t(a, b)
    assert math.isnan(res.p_value) and res.se == 0.0 and res.diff == pytest.approx(0.1)
    assert math.isnan(t_halfwidth(a - b))  # undefined, not a zero tolerance (until session 40)
    ci = mean_ci(a - b)  # was [0.1 - 6e-17, 0.1 + 6e-17]: certainty from rounding
    assert math.isnan(ci.low) and math.isnan(ci.high) and ci.metrics["sem"] == 0.0


# ------------------------------------------------- one t interval of a mean (review, session 40)


def _undefined(values) -> bool:
    """mean_ci, paired_t and t_halfwidth all say the t interval of mean(values) is undefined."""
    x = np.asarray(values, dtype=float)
    ci, pt, half = mean_ci(x), paired_t(x, np.zeros_like(x)), t_halfwidth(x)
    nans = [ci.low, ci.high, pt.low, pt.high, pt.t, pt.p_value, half]
    return all(map(math.isnan, nans)) and ci.metrics["sem"] == pt.se == 0.0


@settings(max_examples=80, deadline=None)
@given(
    st.integers(2, 40),
    st.floats(-1e6, 1e6).filter(lambda v: v == 0 or abs(v) > 1e-100),
    st.lists(st.floats(-10, 10), min_size=40, max_size=40),
)
def test_constant_samples_have_one_undefined_t_interval(size, value, factors):
    """Review (session 40): on a sample without spread mean_ci gave [mean, mean] (and a
    ~1e-17-wide interval from rounding noise), paired_t NaN, t_halfwidth 0. One interval now
    (`core.stats.t_interval`): undefined in all three, for any size and value, exactly constant
    or equal only up to rounding ((o + v) - o for offsets o of v's size)."""
    assert _undefined([value] * size)
    assert _undefined([(f * value + value) - f * value for f in factors[:size]])
    assert mean_ci([value] * size).estimate == pytest.approx(value)
    assert _undefined([0.0, 1e-207])  # a spread whose square float64 cannot hold: sd 0


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.floats(-1e3, 1e3).filter(lambda v: v == 0 or abs(v) > 1e-100), min_size=2),
    st.floats(0.5, 0.99),
)
def test_samples_with_spread_keep_the_textbook_interval_bit_for_bit(values, level):
    """Where there is spread the shared interval is the formulas the three had before, to the
    last bit: mean +- t_{S-1} sd / sqrt(S), and the paired t's t and p from the same sem."""
    x = np.asarray(values)
    assume(np.ptp(x) > 1e-9 * np.max(np.abs(x)))
    sem = float(x.std(ddof=1) / math.sqrt(x.size))
    half = float(sps.t.ppf(0.5 + level / 2, x.size - 1)) * sem
    mean = float(x.mean())
    ci = mean_ci(x, level=level)
    assert (ci.estimate, ci.low, ci.high, ci.metrics["sem"]) == (
        mean,
        mean - half,
        mean + half,
        sem,
    )
    assert t_halfwidth(x, level=level) == half
    y = np.zeros_like(x)
    d = x - y
    pt = paired_t(x, y, level=level)
    se = float(d.std(ddof=1) / math.sqrt(d.size))
    t = float(d.mean()) / se
    assert (pt.low, pt.high, pt.se, pt.t) == (mean - half, mean + half, se, t)
    assert pt.p_value == float(2 * sps.t.sf(abs(t), x.size - 1))


def test_t_halfwidth_checks_its_input_as_the_others_do():
    """Until session 40 t_halfwidth returned 0 for one value (a zero tolerance: any gain would
    pass) where mean_ci and paired_t refuse it."""
    for call in (t_halfwidth, mean_ci):
        with pytest.raises(ValueError, match="at least 2 values"):
            call([0.5])
        with pytest.raises(ValueError, match="NaN or inf"):
            call([0.5, math.nan])
