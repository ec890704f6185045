"""Group statistics: degeneracy split, i.i.d. prediction, Jensen estimate (notes section 1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from pgrpo.core.degeneracy import group_stats, iid_degeneracy, jensen_estimate


def _naive_stats(r: np.ndarray, ids: np.ndarray, atol: float = 1e-6) -> dict[str, float]:
    zero, allp, allf, stds, iid = [], [], [], [], []
    pbar = r.mean()
    q = np.unique(r, return_counts=True)[1] / r.size  # pooled distribution (0/1: 1 - pbar, pbar)
    for g in np.unique(ids):
        x = r[ids == g]
        sd = x.std(ddof=1) if x.size > 1 else 0.0
        stds.append(sd)
        zero.append(sd <= atol)
        allp.append(sd <= atol and abs(x.mean() - 1) <= atol)
        allf.append(sd <= atol and abs(x.mean()) <= atol)
        iid.append(float(np.sum(q**x.size)))  # all equal under i.i.d. draws from the pool
    return {
        "frac_reward_zero_std": np.mean(zero),
        "degeneracy/all_pass": np.mean(allp),
        "degeneracy/all_fail": np.mean(allf),
        "reward_within_group_std": np.mean(stds),
        "degeneracy/iid_prediction": np.mean(iid),
        "reward": pbar,
        "reward_std": r.std(ddof=1),
    }


@pytest.mark.parametrize("ragged", [False, True])
@pytest.mark.parametrize("graded", [False, True])
def test_group_stats_matches_loop(ragged, graded):
    rng = np.random.default_rng(int(ragged) * 2 + int(graded))
    if ragged:
        ids = rng.permutation(np.repeat(np.arange(40) * 3 + 11, rng.integers(1, 9, 40)))
    else:
        ids = np.repeat(np.arange(40), 4)
    p = rng.beta(0.3, 0.3, 40)  # bimodal difficulty: many degenerate groups
    r = (rng.random(ids.size) < p[np.unique(ids, return_inverse=True)[1]]).astype(float)
    if graded:
        r = np.where(rng.random(ids.size) < 0.3, 0.5, r)
    kw = {"group_ids": ids} if ragged else {"group_size": 4}
    got = group_stats(r, **kw)
    want = _naive_stats(r, ids)
    for key, value in want.items():
        assert got.metrics[key] == pytest.approx(value, abs=1e-12), key
    assert got.metrics["degeneracy/excess"] == pytest.approx(
        want["frac_reward_zero_std"] - want["degeneracy/iid_prediction"]
    )
    assert got.metrics["num_groups"] == 40.0
    assert got.zero_std.sum() == round(want["frac_reward_zero_std"] * 40)
    homogeneous_half = got.zero_std & np.isclose(got.mean, 0.5)  # zero-std at 0.5: neither
    np.testing.assert_array_equal(got.all_pass | got.all_fail, got.zero_std & ~homogeneous_half)


def test_worked_example_and_split():
    """f_4(0.25) = 0.25^4 + 0.75^4 = 0.3203125 (notes section 1)."""
    assert iid_degeneracy(0.25, 4) == pytest.approx(0.3203125, abs=1e-15)
    r = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0.8, 0.8, 0.8, 0.8])
    s = group_stats(r, group_size=4)
    assert s.metrics["frac_reward_zero_std"] == 0.75
    assert s.metrics["degeneracy/all_pass"] == 0.25
    assert s.metrics["degeneracy/all_fail"] == 0.25  # the 0.8 group is zero-std but neither
    np.testing.assert_array_equal(s.zero_std, [True, True, False, True])
    np.testing.assert_array_equal(s.sizes, [4, 4, 4, 4])
    assert s.metrics["reward_within_group_std"] == pytest.approx(0.5 / 4)


def test_float_tolerance_for_graded_rewards():
    r = np.array([0.8, 0.8 + 1e-9, 0.8 - 1e-9, 0.8, 0.1, 0.3, 0.1, 0.1], dtype=np.float64)
    assert group_stats(r, group_size=4).metrics["frac_reward_zero_std"] == 0.5
    assert group_stats(r, group_size=4, atol=0.0).metrics["frac_reward_zero_std"] == 0.0
    r32 = torch.full((8,), 0.1, dtype=torch.float32)  # float32 sums are not exact
    assert group_stats(r32, group_size=8).metrics["frac_reward_zero_std"] == 1.0


def test_iid_prediction_recovered_on_iid_bernoulli_rewards():
    """With one success probability for every prompt the zero-std rate matches f_G(p)."""
    rng = np.random.default_rng(0)
    r = (rng.random(8 * 20_000) < 0.25).astype(np.float32)
    s = group_stats(r, group_size=8).metrics
    assert s["degeneracy/iid_prediction"] == pytest.approx(iid_degeneracy(0.25, 8), abs=2e-3)
    assert abs(s["frac_reward_zero_std"] - s["degeneracy/iid_prediction"]) < 0.01


def test_nan_policy_and_errors():
    r = np.array([1.0, np.nan, 1.0, 1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="nan='mask'"):
        group_stats(r, group_size=3)
    s = group_stats(r, group_size=3, nan="mask")
    assert s.metrics["degeneracy/nonfinite_rewards"] == 1.0
    np.testing.assert_array_equal(s.sizes, [2, 3])
    assert s.metrics["degeneracy/all_pass"] == 0.5
    assert s.metrics["reward"] == pytest.approx(4 / 5)
    with pytest.raises(ValueError, match="at least one reward"):
        group_stats(np.array([]), group_size=1)
    with pytest.raises(ValueError, match="atol must be >= 0"):
        group_stats(r, group_size=3, atol=-1)
    with pytest.raises(ValueError, match="group_ids="):
        group_stats(np.ones(5), group_size=2)
    out = group_stats(np.array([2.0, 2.0, 3.0, 1.0]), group_size=2)  # any reward scale
    assert out.metrics["degeneracy/iid_prediction"] == pytest.approx(0.5**2 + 0.25**2 + 0.25**2)


@pytest.mark.parametrize(
    "call,pattern",
    [
        (lambda: iid_degeneracy(1.5, 4), r"p must be success probabilities in \[0, 1\]"),
        (lambda: iid_degeneracy(0.5, 0), r"group_size must be integers >= 1"),
        (lambda: jensen_estimate([], 4), r"success_rates is empty"),
        (lambda: jensen_estimate([0.5, 1.2], 4), r"success_rates must be in \[0, 1\]"),
        (lambda: jensen_estimate([0.5], 0), r"group_size must be an integer >= 1"),
        (lambda: jensen_estimate([0.5], 4, num_samples=2), r"num_samples must be >= group_size"),
        (lambda: jensen_estimate([0.33], 4, num_samples=8), r"counts / num_samples"),
    ],
)
def test_jensen_and_iid_errors(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30), st.integers(1, 12))
def test_jensen_gap_nonnegative(p, g):
    est = jensen_estimate(p, g)
    assert est.gap >= -1e-12
    assert est.d_true == pytest.approx(np.mean([x**g + (1 - x) ** g for x in p]))
    assert est.metrics["jensen/all_pass"] + est.metrics["jensen/all_fail"] == pytest.approx(
        est.d_true
    )


def test_jensen_gap_decomposition():
    # equal difficulty: no gap (to rounding: numpy's SIMD sums differ between AVX2 and AVX-512)
    assert jensen_estimate([0.3] * 5, 4).gap == pytest.approx(0.0, abs=1e-15)
    p = [0.1, 0.4, 0.9, 0.6]
    two = jensen_estimate(p, 2)  # f_2 is quadratic: the second-order formula is exact
    assert two.gap == pytest.approx(two.gap_approx, abs=1e-14)
    close = jensen_estimate([0.45, 0.5, 0.55], 6)  # small Var(p): the approximation is close
    assert close.gap == pytest.approx(close.gap_approx, rel=0.05)
    bimodal = jensen_estimate([0.0] * 50 + [1.0] * 50, 4)  # 0.69-style strongly bimodal
    assert bimodal.d_true == 1.0 and bimodal.d_iid == pytest.approx(0.125)


def test_jensen_unbiased_form_is_unbiased():
    """E over c ~ Binomial(n, p) of C(n-c, G)/C(n, G) is exactly (1-p)^G (and p^G for all-pass),
    whereas the plug-in (c/n)^G is biased upwards at small n."""
    n, g, p = 10, 4, 0.3
    c = np.arange(n + 1)
    pmf = sps.binom.pmf(c, n, p)
    unbiased = [jensen_estimate([ci / n], g, num_samples=n).metrics for ci in c]
    fail = sum(w * m["jensen/all_fail"] for w, m in zip(pmf, unbiased, strict=True))
    allp = sum(w * m["jensen/all_pass"] for w, m in zip(pmf, unbiased, strict=True))
    assert fail == pytest.approx((1 - p) ** g, abs=1e-12)
    assert allp == pytest.approx(p**g, abs=1e-12)
    plug = sum(w * jensen_estimate([ci / n], g).d_true for w, ci in zip(pmf, c, strict=True))
    assert plug > (1 - p) ** g + p**g + 0.01
    one = jensen_estimate([3 / 10], g, num_samples=10).metrics
    assert one["jensen/all_fail"] == pytest.approx(math.comb(7, 4) / math.comb(10, 4))


def test_iid_prediction_of_graded_rewards_is_the_pooled_distributions_and_a_lower_bound():
    """Rewards 0, 1/3, 2/3, 1 in every group of 4: f_4(pbar = 0.5) = 0.125 was the 'i.i.d.
    prediction' and the excess -0.125 broke Jensen (review 2026-12-03); i.i.d. draws from the
    pooled rewards are all equal with chance 4 (1/4)^4 = 0.0156. On graded rewards drawn i.i.d.
    per prompt the prediction is recovered, and with prompts of different difficulty it stays
    below the observed rate (Jensen for any discrete reward)."""
    levels = np.array([0.0, 1 / 3, 2 / 3, 1.0])
    m = group_stats(np.tile(levels, 50), group_size=4).metrics
    assert m["degeneracy/iid_prediction"] == pytest.approx(4 * 0.25**4)
    assert m["frac_reward_zero_std"] == 0.0 and m["degeneracy/excess"] < 0  # below, by chance
    rng = np.random.default_rng(0)
    same = group_stats(rng.choice(levels, size=(20_000, 4)).ravel(), group_size=4).metrics
    assert same["degeneracy/excess"] == pytest.approx(0.0, abs=0.005)  # i.i.d.: recovered
    probs = rng.dirichlet(np.full(4, 0.3), size=20_000)  # each prompt its own distribution
    draws = np.array([rng.choice(levels, size=4, p=p) for p in probs]).ravel()
    hetero = group_stats(draws, group_size=4).metrics
    assert hetero["degeneracy/excess"] > 0.05  # Jensen
    binary = rng.random(4000) < 0.3
    b = group_stats(binary.astype(float), group_size=8).metrics
    assert b["degeneracy/iid_prediction"] == pytest.approx(iid_degeneracy(b["reward"], 8))
