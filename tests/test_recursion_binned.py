"""The binned path of `schedule_response` (a long log's fit) against the per-step recursion."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.dynamics.binned_recursion import (
    _SCAN_ROWS,
    BINNED_TOLERANCE,
    _scan_states,
    _step_power,
    binned_path,
    schedule_response,
)
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


@settings(max_examples=40, deadline=None)
@given(
    ga=st.lists(st.floats(0.0, 2.0), min_size=1, max_size=6),
    beta=st.floats(0.0, 0.99),
    powers=st.lists(st.integers(1, 300), min_size=1, max_size=6),
)
def test_step_power_is_the_matrix_power(ga, beta, powers):
    """`_step_power` (Cayley-Hamilton on (u, w)) against numpy's matrix power of each step
    matrix [[1 - ga, b], [-ga, b]], for mixed exponents in one call."""
    w = min(len(ga), len(powers))
    g = np.array(ga[:w])[None, :]
    p = np.array(powers[:w])
    b = np.array([[beta]])
    got = np.stack(_step_power(g, b, p))[:, 0, :]  # [4, w]
    for j in range(w):
        m = np.array([[1 - g[0, j], beta], [-g[0, j], beta]])
        want = np.linalg.matrix_power(m, int(p[j])).ravel()
        scale = max(1.0, float(np.max(np.abs(want))))
        np.testing.assert_allclose(got[:, j], want, rtol=0, atol=1e-12 * scale * p[j])


def test_many_rows_scan_interval_by_interval_as_few_rows_do():
    """More than _SCAN_ROWS rows take the interval-by-interval scan, fewer the prefix products:
    the same states."""
    rng = np.random.default_rng(0)
    rows = _SCAN_ROWS + 8
    ga = rng.uniform(0.0, 0.05, (rows, 700))
    power = _step_power(ga, np.full((rows, 1), 0.9), rng.integers(1, 60, 700))
    x0, v0 = rng.normal(size=rows), rng.normal(size=rows)
    many = _scan_states(power, x0, v0)
    for lo in range(0, rows, 4):  # 4 rows at a time: the prefix products
        few = _scan_states(tuple(c[lo : lo + 4] for c in power), x0[lo : lo + 4], v0[lo : lo + 4])
        for got, want in zip(many, few, strict=True):
            np.testing.assert_allclose(got[lo : lo + 4], want, rtol=0, atol=1e-12)


def test_a_fit_contexts_schedule_is_computed_once_read_only_and_gives_the_same_response():
    """`FitContext.schedule` hands out one read-only array per length; `schedule_response`
    recognises it by identity and answers exactly as for an equal writable copy."""
    from pgrpo.dynamics.curves import FitContext

    lr = 1e-6 * _cosine(N, 0.01)
    ctx = FitContext(lr=lr)
    sched = ctx.schedule(N)
    assert sched is ctx.schedule(N) and not sched.flags.writeable
    np.testing.assert_array_equal(sched, lr / lr.max())
    t = _bin_times(N, 50)
    ks = np.array([3e-4])
    by_identity = schedule_response(ks, sched, 0.9, t)
    assert np.array_equal(schedule_response(ks, sched, 0.9, t), by_identity)
    assert np.array_equal(schedule_response(ks, sched.copy(), 0.9, t), by_identity)
