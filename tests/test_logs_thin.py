"""One thinning of long logs (`pgrpo.logs.thin`) for `pgrpo fit` and `pgrpo diagnose`."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.diagnose import signals
from pgrpo.dynamics import logfit
from pgrpo.logs import RewardLog
from pgrpo.logs.thin import bin_counts, bin_means, bin_plan


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 5000), max_points=st.integers(1, 600), seed=st.integers(0, 2**16))
def test_bins_partition_the_series_and_keep_its_mean(n, max_points, seed):
    x = np.random.default_rng(seed).normal(size=n)
    b, head = bin_plan(n, max_points)
    kept = bin_means(x, b, head, keep_head=True)
    counts = bin_counts(n, b, head, keep_head=True)
    assert counts.sum() == n and kept.size == counts.size <= max_points
    assert np.all(counts[1:] == b) and 0 < counts[0] <= b
    assert np.isclose((kept * counts).sum() / n, x.mean())
    dropped = bin_means(x, b, head)  # the diagnosis' plan: the same full bins, the head left out
    assert dropped.size == (n - head) // b
    np.testing.assert_array_equal(kept[-dropped.size :] if dropped.size else dropped, dropped)
    if head:
        assert np.isclose(kept[0], x[:head].mean())


def test_fit_and_diagnose_bin_one_way():
    """The two layers call the one implementation (no second copy to drift): the fit's bins
    are the diagnosis' bins plus the head bin."""
    assert signals.bin_means is bin_means and signals.bin_plan is bin_plan
    rng = np.random.default_rng(3)
    step, reward = np.arange(1.0, 9_126.0), rng.random(9_125)
    s, r, b = logfit.thin_curve(step, reward)
    assert bin_plan(step.size, logfit.MAX_FIT_POINTS) == (b, 2) == (3, 2)
    np.testing.assert_array_equal(r[1:], bin_means(reward, b, 2))
    np.testing.assert_array_equal(s[1:], bin_means(step, b, 2))
    assert s[0] == 1.5 and r[0] == reward[:2].mean()


def test_bin_noise_is_the_step_noise_over_sqrt_count():
    """White noise of sd 1: full bins of b steps have sd 1 / sqrt(b); the head bin's variance
    is 1 / head, which is why the fit weights it by head / b."""
    rng = np.random.default_rng(0)
    n, max_points = 8_011, 160
    b, head = bin_plan(n, max_points)
    assert (b, head) == (51, 4)
    means = np.stack([bin_means(d, b, head, keep_head=True) for d in rng.normal(size=(1000, n))])
    assert np.std(means[:, 1:]) == pytest.approx(1 / np.sqrt(b), rel=0.02)
    assert np.std(means[:, 0]) == pytest.approx(1 / np.sqrt(head), rel=0.1)


def _log(step, reward, columns=None):
    return RewardLog(step, reward, columns or {}, {}, (), "t", "mem", "reward")


def test_short_logs_are_untouched():
    """The real corpus (all under 2,000 steps) is fitted and diagnosed exactly as before."""
    step = np.arange(1.0, 2001.0)
    log = _log(step, np.sin(step), {"learning_rate": np.ones(2000)})
    assert logfit.thin_log(log) is log
    assert signals.thin_log(log) is log
    sig = signals.signals_from_log(log)
    assert signals.thin_signals(sig) is sig


def test_a_fit_weights_the_short_head_bin():
    """A 40,009-step log: bins of 11 aligned to the end and a head bin of the first
    40,009 mod 11 = 2 steps, weighted 2 / 11; the weighted fit recovers the raw fit's
    parameters within their standard errors."""
    from pgrpo.dynamics.fit import fit_curve

    rng = np.random.default_rng(1)
    n = 40_009
    step = np.arange(1.0, n + 1.0)
    reward = 0.8 - 0.6 * np.exp(-step / 6000.0) + rng.normal(0, 0.1, n)
    thin = logfit.thin_log(_log(step, reward))
    b, head = bin_plan(n, logfit.MAX_FIT_POINTS)
    assert head > 0 and thin.metrics["bin_size"] == b
    w = logfit.bin_weights(thin)
    assert w is not None and w[0] == pytest.approx(head / b) and np.all(w[1:] == 1.0)
    assert any(f"the first of {head}" in note for note in thin.warnings)
    fit = logfit.fit_log(_log(step, reward))
    raw = fit_curve(step, reward, "exponential")
    for name in ("R_inf", "tau"):
        se = raw.params[name].stderr
        assert abs(fit.baselines["exponential"].values[name] - raw.values[name]) < 2 * se
