"""False alarms of `diagnose` on null curves the earlier null models did not cover (the review of
2026-12-03 measured them; bench/null_rates.py gives the full table): strongly autocorrelated
short curves, heavy-tailed noise, sparse 0/1 means with N unknown or p under 0.01, and short
runs stuck at 0 by chance. Each test failed before its fix."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.signal import lfilter
from scipy.stats import rankdata

from pgrpo.diagnose import curvestats as cs
from pgrpo.diagnose import diagnose
from pgrpo.diagnose import nullmodel as nm
from pgrpo.logs.base import RewardLog


def _log(y: np.ndarray, cols: dict | None = None, group_size: int | None = None) -> RewardLog:
    hp = {} if group_size is None else {"group_size": float(group_size), "batch_prompts": 1.0}
    return RewardLog(
        np.arange(1, y.size + 1, dtype=float), y, cols or {}, hp, (), "t", "t", "reward"
    )


def _groups(rng: np.random.Generator, n: int, p: float) -> tuple[np.ndarray, dict]:
    """n steps of 1 prompt x G = 8 at success p, with TRL's reward_std and zero-std share."""
    draws = (rng.random((n, 8)) < p).astype(float)
    std = draws.std(axis=1, ddof=1)
    return draws.mean(axis=1), {"reward_std": std, "frac_reward_zero_std": (std == 0) * 1.0}


def test_short_strongly_autocorrelated_noise_is_flat():
    """The AR(1) null took the curve's shrunk point estimate of rho, which on 50 points of
    rho = 0.9 noise fell well below it: 39% of such curves read as not flat (and 17% as
    unstable). The null now takes a 90% upper confidence bound (`lag1_autocorr`)."""
    rng = np.random.default_rng(4)
    bad = 0
    for _ in range(60):
        y = 0.5 + 0.1 * lfilter([1.0], [1.0, -0.9], rng.standard_normal(350))[300:]
        d = diagnose(_log(y))
        bad += d.progress.label != "flat" or d.mode("dynamical_instability").detected
    assert bad <= 6  # 10%; the measured rate is 3-6% (bench/null_rates.py)


def test_heavy_tailed_noise_is_not_unstable():
    """The growth test compared residual sds (last third / first) against Gaussian nulls: on
    t(3) noise of 1,000 steps it fired on 28% of curves. It now compares the thirds by ranks."""
    rng = np.random.default_rng(5)
    fired = sum(
        diagnose(_log(0.5 + 0.1 * rng.standard_t(3, 1000))).mode("dynamical_instability").detected
        for _ in range(40)
    )
    assert fired <= 2


@pytest.mark.parametrize(
    ("p", "n", "big", "known"), [(0.02, 1000, 8, False), (0.003, 1000, 64, True)]
)
def test_sparse_successes_are_noise(p, n, big, known):
    """Means of N 0/1 rewards at a rare success. N = 8 unknown: they were tested against
    Gaussian AR(1) noise (instability on 20-33% of curves); N is now read off the values' 1/8
    steps. N = 64 known at p = 0.003: the binomial null's p was floored at 0.01 (9 of 40)."""
    rng = np.random.default_rng(6)
    bad = 0
    for _ in range(40):
        d = diagnose(_log(rng.binomial(big, p, n) / big, group_size=big if known else None))
        bad += d.progress.label != "flat" or d.mode("dynamical_instability").detected
    assert bad <= 2


def test_a_short_run_at_zero_by_chance_is_not_collapsed():
    """A run of rare successes whose last window happens to have none was 'collapsed' (stuck at
    its floor with no spread, below its start) on 9-23% of such 15-step curves; the stay at the
    floor must now be unlikely at the run's own rate of success (`floorstats.stuck_p`)."""
    rng = np.random.default_rng(7)
    labels = [diagnose(_log(*_groups(rng, 15, 0.02))).progress.label for _ in range(80)]
    assert labels.count("collapsed") <= 3


def test_a_run_that_collapses_to_zero_is_still_collapsed():
    """The same rule on a real collapse: 40 steps of 256 rollouts at 3% success, then none."""
    rng = np.random.default_rng(8)
    head = rng.binomial(256, 0.03, 30) / 256.0
    y = np.concatenate([head, np.zeros(10)])
    std = np.where(y > 0, 0.15, 0.0)
    cols = {"reward_std": std, "frac_reward_zero_std": np.where(y > 0, 0.6, 1.0)}
    hp = {"group_size": 8.0, "batch_prompts": 32.0}
    log = RewardLog(np.arange(1.0, 41.0), y, cols, hp, (), "t", "t", "reward")
    v = diagnose(log).progress
    assert v.label == "collapsed" and v.evidence["stuck_p"] < 1e-6, v.summary


def test_lattice_size_reads_n_only_off_a_lattice():
    assert nm.lattice_size(np.array([0.0, 0.125, 0.0, 0.0, 0.25])) == 8
    assert nm.lattice_size(np.r_[np.zeros(995), np.full(5, 0.125)]) == 8  # not N = 1
    assert nm.lattice_size(np.array([0.0, 1.0, 1.0, 0.0])) == 1
    assert nm.lattice_size(np.full(20, 0.5)) is None  # a constant says nothing
    assert nm.lattice_size(np.array([0.3, 0.7, 0.3])) is None  # two values, neither 0 nor 1
    rng = np.random.default_rng(0)
    assert nm.lattice_size(np.round(rng.uniform(0, 1, 200), 2)) is None  # 2 decimals: 1/100
    assert nm.lattice_size(np.array([0.0, 0.5, 1.5])) is None  # outside [0, 1]


def test_the_rho_bound_grows_with_the_estimate_and_shrinks_with_length():
    rng = np.random.default_rng(1)
    white = [nm.lag1_autocorr(rng.standard_normal(n)) for n in (20, 2000)]
    assert white[0] >= white[1]  # a short curve leaves rho less certain
    assert white[1] <= 0.1
    # an upper bound at 90%: at or above the true rho on about 90% of curves, and not far above
    bounds = [
        nm.lag1_autocorr(lfilter([1.0], [1.0, -0.6], rng.standard_normal(n + 300))[300:])
        for n in (100, 500) * 20
    ]
    assert 0.8 <= np.mean(np.array(bounds) >= 0.6) and max(bounds) <= 0.9
    assert nm.lag1_autocorr(np.arange(4.0)) == 0.0


def test_rank_growth_sees_growing_swings_and_not_a_wider_tail():
    rng = np.random.default_rng(3)
    n = 600
    grow = rng.standard_normal(n) * np.linspace(0.5, 2.0, n)
    assert nm.curve_statistics(grow)["growth_rank"][0] > 5
    z = nm.curve_statistics(rng.standard_t(3, (400, n)))["growth_rank"]  # its null: N(0, ~1)
    assert abs(float(np.mean(z))) < 0.2 and 0.85 < float(np.std(z)) < 1.2


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    rows=st.integers(1, 5),
    a=st.integers(1, 30),
    b=st.integers(1, 30),
    discrete=st.booleans(),
)
def test_late_rank_sum_equals_scipy_average_ranks(seed, rows, a, b, discrete):
    """The one-sort rank sum (ties re-ranked row by row) is scipy's average-rank sum, NaN left
    out, and its tie term is sum(t^3 - t) over the groups of equal values."""
    rng = np.random.default_rng(seed)
    both = (
        rng.integers(0, 5, (rows, a + b)).astype(float)
        if discrete
        else rng.standard_normal((rows, a + b))
    )
    both[rng.random(both.shape) < 0.2] = np.nan
    got, ties = cs._late_rank_sum(both, a)
    ranks = rankdata(both, axis=1, nan_policy="omit")
    assert np.allclose(got, np.nansum(ranks[:, a:], axis=1))
    for i in range(rows):
        _, t = np.unique(both[i][np.isfinite(both[i])], return_counts=True)
        assert ties[i] == pytest.approx(float(np.sum(t**3.0 - t)))


def test_the_stored_rho_table_is_the_simulation():
    """`rhotable` holds what `nullmodel.simulated_quantile` gives (4 decimals), is
    non-decreasing in rho (the bisection's premise) and in length (a shorter curve's quantile is
    lower: reading the longest tabulated length <= n is conservative), and is used for q = 0.1."""
    from pgrpo.diagnose import rhotable

    assert rhotable.Q == pytest.approx(1.0 - nm.RHO_CONFIDENCE)
    table = np.array(rhotable.QUANTILES)
    assert table.shape == (len(rhotable.LENGTHS), len(nm.RHO_GRID))
    assert np.all(np.diff(table, axis=1) >= 0)
    assert np.all(np.diff(table, axis=0) >= -0.01)  # sampling noise between lengths only
    for i, j in ((11, 3), (24, 5)):  # n = 54 and 512: the running max over rho up to rho_j
        n = rhotable.LENGTHS[i]
        fresh = max(nm.simulated_quantile(n, r, rhotable.Q) for r in nm.RHO_GRID[: j + 1])
        assert table[i, j] == pytest.approx(fresh, abs=6e-5)
    assert nm._estimate_quantile(60, 0.5, rhotable.Q) == table[11, 5]  # 54 <= 60 < 64


def test_the_stored_independence_quantiles_are_the_simulated_ones():
    """`rhotable.INDEPENDENT`: the 95% point of `lag1_estimate` on independent curves, at each
    tabulated length, as `simulated_quantile` gives it; `autocorrelated` reads the longest
    tabulated length <= n and compares the curve's own estimate with it."""
    from pgrpo.diagnose import rhotable

    assert rhotable.INDEPENDENT_Q == pytest.approx(1.0 - nm.INDEPENDENCE_LEVEL)
    assert len(rhotable.INDEPENDENT) == len(rhotable.LENGTHS)
    for i in (5, 24):  # n = 19 and 512
        fresh = nm.simulated_quantile(rhotable.LENGTHS[i], 0.0, rhotable.INDEPENDENT_Q)
        assert rhotable.INDEPENDENT[i] == pytest.approx(fresh, abs=6e-5)
    y = 0.5 + 0.1 * np.random.default_rng(3).standard_normal(60)
    est = float(nm.lag1_estimate(y[None, :])[0])
    assert nm.autocorrelated(y) == (est > rhotable.INDEPENDENT[11])  # 54 <= 60 < 64
    assert not nm.autocorrelated(y[:7])  # below the table's shortest length


def test_an_inferred_n_needs_a_lattice_that_fits_best_and_binomial_like_noise():
    """Review 2026-12-03: 0, 1/64, 2/64 read as N = 63 (the smallest N within tolerance);
    values within 6e-4 of 0 read as N = 1; an AR(0.8) score rounded to one decimal read as
    N = 10 and, against an independent binomial null, 'collapsed' on 31 of 80 curves."""
    assert nm.lattice_size(np.array([0.0, 1 / 64, 2 / 64])) == 64
    assert nm.lattice_size(np.array([0.0, 1 / 50])) == 50
    rng = np.random.default_rng(0)
    assert nm.rollouts(rng.uniform(0, 5e-4, 200), None) == (None, False)  # far below binomial
    score = lfilter([1.0], [1.0, -0.8], rng.standard_normal(400))[200:]
    rounded = np.round(np.clip(0.5 + 0.1 * score, 0, 1), 1)
    assert nm.lattice_size(rounded) == 10 and nm.rollouts(rounded, None) == (None, False)
    labels = []
    for _ in range(20):
        ar = lfilter([1.0], [1.0, -0.8], rng.standard_normal(400))[200:]
        labels.append(diagnose(_log(np.round(np.clip(0.5 + 0.1 * ar, 0, 1), 1))).progress.label)
    assert labels.count("collapsed") + labels.count("declining") <= 2
    assert nm.rollouts(rng.binomial(8, 0.3, 200) / 8, None) == (8.0, True)  # a real 0/1 mean


def test_an_exactly_constant_second_half_is_not_still_rising():
    """The HAC t of an exactly constant stretch was the ratio of two rounding errors (t = 3.5):
    a rise to 0.3 and then 0.3 exactly read 'still rising over the second half' on 40 of 40."""
    labels = []
    for seed in range(10):
        r = np.random.default_rng(seed)
        y = np.r_[np.linspace(0.2, 0.3, 100) + r.normal(0, 0.05, 100), np.full(100, 0.3)]
        labels.append(diagnose(_log(y)).progress.label)
    assert "learning" not in labels, labels


def test_length_vs_reward_does_not_call_a_clear_rise_flat_on_a_short_log():
    """The rho bound that guards 'rises' made 'the reward did not rise' easy: on 12 points the
    reward's t shrank 4.4x and the check warned on a reward that clearly rose."""
    from pgrpo.diagnose.checks import CheckOptions
    from pgrpo.diagnose.gaming import length_vs_reward

    rng = np.random.default_rng(4)  # the review's case: a fast rise that levels off
    n = 12
    u = np.arange(1, n + 1) / n
    reward = 0.3 + 0.3 * (1 - np.exp(-5 * u)) + rng.normal(0, 0.03, n)
    length = 200 + 300 * u + rng.normal(0, 5, n)
    log = _log(reward, {"completion_length": length})
    assert length_vs_reward(log, CheckOptions()).status == "ok"
