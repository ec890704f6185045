"""`pgrpo eval` intervals take the problem as the unit (cluster bootstrap), for accuracy and
pass@k: checked against a brute-force BCa bootstrap and by coverage on clustered problems."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from pgrpo.core.stats import accuracy_ci, pass_at_k
from pgrpo.evaluate.metrics import EvalRun, aggregate, problem_ci


def _brute_bca(x: np.ndarray, level: float, n_boot: int, seed: int) -> tuple[float, float]:
    """Efron's BCa interval of the mean, one resample at a time (Efron & Tibshirani 1993, 14.3)."""
    rng = np.random.default_rng(seed)
    theta = x.mean()
    boots = np.array([x[rng.integers(0, x.size, x.size)].mean() for _ in range(n_boot)])
    z0 = norm.ppf((np.sum(boots < theta) + np.sum(boots <= theta)) / (2 * n_boot))
    jack = np.array([np.delete(x, i).mean() for i in range(x.size)])
    d = jack.mean() - jack
    acc = np.sum(d**3) / (6 * np.sum(d**2) ** 1.5)
    out = []
    for q in ((1 - level) / 2, (1 + level) / 2):
        zq = norm.ppf(q)
        out.append(np.percentile(boots, 100 * norm.cdf(z0 + (z0 + zq) / (1 - acc * (z0 + zq)))))
    return float(out[0]), float(out[1])


def _clustered_run(rng: np.random.Generator, problems: int = 50, samples: int = 8) -> EvalRun:
    """Problems of very different difficulty (Beta(0.3, 0.3): mostly all-fail or all-pass)."""
    p = rng.beta(0.3, 0.3, problems)
    c = rng.binomial(samples, p)
    return EvalRun("x", [str(i) for i in range(problems)], [samples] * problems, c.tolist())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_problem_ci_matches_a_brute_force_bootstrap(seed):
    rng = np.random.default_rng(seed)
    run = _clustered_run(rng)
    values = run.per_problem_accuracy()
    lo, hi, method = problem_ci(values, seed=seed)
    blo, bhi = _brute_bca(values, 0.95, 20_000, seed + 100)
    assert method == "cluster_bootstrap_bca"
    assert abs(lo - blo) < 0.012 and abs(hi - bhi) < 0.012, (lo, hi, blo, bhi)
    # pass@k gets the same treatment: its interval is the bootstrap of per-problem pass@k
    per4 = pass_at_k(np.asarray(run.n), np.asarray(run.c), 4)
    klo, khi = run.summary()["pass_at_k_ci"]["4"]
    blo, bhi = _brute_bca(per4, 0.95, 20_000, seed + 200)
    assert abs(klo - blo) < 0.012 and abs(khi - bhi) < 0.012


def test_coverage_with_problems_as_the_unit():
    """95% intervals cover the population mean about 95% of the time; treating 50 x 8 samples
    as 400 independent trials (the old Wilson interval) covers far less often."""
    rng = np.random.default_rng(7)
    truth = 0.5  # mean of Beta(0.3, 0.3)
    hits = naive_hits = 0
    trials = 200
    for _ in range(trials):
        run = _clustered_run(rng)
        lo, hi = run.summary()["accuracy_ci"]
        hits += lo <= truth <= hi
        w = accuracy_ci(sum(run.c), sum(run.n))
        naive_hits += w.low <= truth <= w.high
    assert hits / trials >= 0.90, hits / trials
    assert naive_hits / trials <= 0.70, naive_hits / trials


def test_all_fail_is_not_overconfident():
    """0 of 50 problems solved (8 samples each): the bound is Wilson on 50 problems, not on 400
    samples."""
    run = EvalRun("z", [str(i) for i in range(50)], [8] * 50, [0] * 50)
    s = run.summary()
    assert s["ci_method"] == "wilson_problems" and s["accuracy_ci"][0] == 0.0
    assert s["accuracy_ci"][1] == pytest.approx(accuracy_ci(0, 50).high)
    assert s["accuracy_ci"][1] > 5 * accuracy_ci(0, 400).high


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 8), st.integers(0, 8)), min_size=1, max_size=40),
    st.integers(0, 2**16),
)
def test_intervals_hold_the_estimate_and_stay_in_unit_range(counts, seed):
    n = [a for a, _ in counts]
    c = [min(a, b) for a, b in counts]
    run = EvalRun("h", [str(i) for i in range(len(n))], n, c)
    s = run.summary(seed=seed)
    lo, hi = s["accuracy_ci"]
    assert 0.0 <= lo <= s["accuracy"] <= hi <= 1.0
    for k, (klo, khi) in s["pass_at_k_ci"].items():
        assert (
            0.0 <= klo <= s["pass_at_k"][k] + 1e-12
            and s["pass_at_k"][k] <= khi + 1e-12 <= 1.0 + 1e-12
        )


def test_aggregate_pools_seeds_per_problem():
    rng = np.random.default_rng(3)
    p = rng.beta(0.3, 0.3, 40)
    runs = [
        EvalRun("s", [str(i) for i in range(40)], [8] * 40, rng.binomial(8, p).tolist(), seed=s)
        for s in range(3)
    ]
    agg = aggregate(runs)
    pooled = np.mean([r.per_problem_accuracy() for r in runs], axis=0)
    assert agg["accuracy_ci"] == pytest.approx(list(problem_ci(pooled)[:2]))
    assert agg["ci_unit"] == "problem" and agg["seed_ci"] is not None
    assert set(agg["pass_at_k_ci"]) == set(agg["pass_at_k"])
    # the seed-to-seed interval holds the problems fixed: narrower than the problem interval
    assert agg["seed_ci"][1] - agg["seed_ci"][0] < agg["accuracy_ci"][1] - agg["accuracy_ci"][0]
