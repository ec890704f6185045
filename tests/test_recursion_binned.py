"""The binned path of `schedule_response` (a long log's fit) against the per-step recursion."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.dynamics.binned_recursion import BINNED_TOLERANCE, binned_path, schedule_response
from pgrpo.dynamics.recursion import at_times, simulate_recursion

N = 200_000


def _cosine(n: int, warm_frac: float) -> np.ndarray:
    """Warm-up + cosine lr / max lr at optimizer steps 0..n-1 (as bench/cli_speed.py logs it)."""
    t = np.arange(1, n + 1, dtype=float)
    lr = np.minimum(1.0, t / max(1, int(warm_frac * n))) * 0.5 * (1 + np.cos(np.pi * t / n))
    return lr / lr.max()


def _bin_times(n: int, b: int) -> np.ndarray:
    """Mean optimizer step (from 0) of each bin of b steps (the last bin shorter)."""
    step = np.arange(n, dtype=float)
    edges = np.arange(0, n, b)
    return np.add.reduceat(step, edges) / np.diff(np.r_[edges, n])


@settings(max_examples=12, deadline=None)
@given(
    log_k=st.floats(-5.0, 0.0),
    beta=st.floats(0.0, 0.99),
    b=st.integers(25, 120),
    warm=st.sampled_from([0.0, 0.01, 0.05]),
)
def test_binned_matches_the_per_step_recursion(log_k, beta, b, warm):
    t = _bin_times(N, b)
    n_steps = int(np.ceil(t.max()))
    sched = _cosine(N, warm)[:n_steps]
    ks = np.array([10.0**log_k, 10.0 ** (log_k - 0.5)])
    assert binned_path(t, n_steps)
    fast = schedule_response(ks, sched, beta, t)
    exact = at_times(simulate_recursion(ks[:, None] * sched, beta, n_steps), t)
    assert np.max(np.abs(fast - exact)) <= BINNED_TOLERANCE
    one = schedule_response(ks[:1], sched, beta, t)  # the one-row (Python float) scan
    np.testing.assert_allclose(one[0], fast[0], rtol=0, atol=1e-12)


def test_short_or_dense_times_take_the_exact_path_bit_for_bit():
    sched = _cosine(3000, 0.01)
    t = np.arange(3000, dtype=float)
    assert not binned_path(t, 3000)
    ks = np.array([1e-3, 1e-2])
    exact = simulate_recursion(ks[:, None] * sched, 0.9, 3000)[:, :-1]
    assert np.array_equal(schedule_response(ks, sched, 0.9, t), exact)


def test_refresh_interval_above_one_takes_the_exact_path():
    t = _bin_times(N, 50)
    assert not binned_path(t, int(np.ceil(t.max())), refresh_interval=2)


def test_times_in_any_order_and_repeated_calls_give_the_same_values():
    """The binned path does not assume sorted times, and its result cache hands out copies."""
    t = _bin_times(N, 50)
    n_steps = int(np.ceil(t.max()))
    sched = _cosine(N, 0.01)[:n_steps]
    ks = np.array([3e-4, 2e-3])
    first = schedule_response(ks, sched, 0.9, t)
    first[:] = np.nan  # a caller writing into its result must not reach the cache
    again = schedule_response(ks, sched, 0.9, t)
    assert np.isfinite(again).all()
    order = np.random.default_rng(0).permutation(t.size)
    np.testing.assert_allclose(schedule_response(ks, sched, 0.9, t[order]), again[:, order],
                               rtol=0, atol=1e-12)  # fmt: skip
