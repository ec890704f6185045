"""The exact recursion: K* (check values, brute force), oscillation onset, loop vs vectorised."""

from __future__ import annotations

import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pgrpo.dynamics import (
    monodromy,
    oscillation_onset,
    recursion,
    refresh_threshold,
    simulate_recursion,
    spectral_radius,
)
from pgrpo.dynamics.model import continuum_oscillation_onset, rule_of_thumb_threshold
from pgrpo.dynamics.recursion import unit_response


@pytest.mark.parametrize(
    "a,beta1,expected",
    [
        (0.1, 0.0, 21), (0.1, 0.9, 38), (0.1, 0.95, 28),
        (0.02, 0.0, 101), (0.02, 0.9, 118), (0.02, 0.95, 138),
        (0.01, 0.0, 201), (0.01, 0.9, 218), (0.01, 0.95, 238),
    ],
)  # fmt: skip
def test_refresh_threshold_check_values(a, beta1, expected):
    thr = refresh_threshold(a, beta1)
    assert thr.K_star == expected
    assert thr.rule_of_thumb == pytest.approx(rule_of_thumb_threshold(a, beta1))


def _grows(a: float, beta1: float, K: int, windows: int = 300) -> float:
    """Brute force: max |x| over the last 20 windows / over the first 20 windows."""
    x = np.abs(simulate_recursion(a, beta1, K * windows, refresh_interval=K)[0])
    return float(x[-20 * K :].max() / x[: 20 * K].max())


@pytest.mark.parametrize("a", [0.05, 0.1, 0.2, 0.4])
@pytest.mark.parametrize("beta1", [0.0, 0.5, 0.9])
def test_refresh_threshold_matches_brute_force_simulation(a, beta1):
    K_star = refresh_threshold(a, beta1).K_star
    assert K_star is not None
    assert _grows(a, beta1, K_star + 1) > 1.5  # past the threshold the mean diverges
    if spectral_radius(a, beta1, K_star - 1) < 1 - 1e-3:
        assert _grows(a, beta1, K_star - 1) < 1.0  # below it the mean decays


def test_beta1_zero_threshold_is_two_over_a():
    for a in (0.1, 0.05, 0.025):
        assert refresh_threshold(a, 0.0).K_star == round(2 / a) + 1
        assert spectral_radius(a, 0.0, round(2 / a)) == pytest.approx(1.0, abs=1e-9)


def test_monodromy_is_one_window_of_the_recursion():
    a, beta1, K = 0.03, 0.8, 7
    x = simulate_recursion(a, beta1, 3 * K, refresh_interval=K, x0=1.0, v0=0.2)[0]
    state = np.array([1.0, 1.0 - 0.2, 1.0])  # (x_0, x_{-1}, x_s)
    M = monodromy(a, beta1, K)
    for w in range(3):
        state = M @ state
        assert state[0] == pytest.approx(x[(w + 1) * K], abs=1e-12)


def test_oscillation_onset_closed_form_and_simulation():
    for beta1 in (0.5, 0.9, 0.95):
        sb = math.sqrt(beta1)
        onset = oscillation_onset(beta1)
        assert onset == pytest.approx((1 - sb) / (1 + sb))
        below = simulate_recursion(onset * 0.97, beta1, 3000)[0]
        above = simulate_recursion(onset * 1.5, beta1, 3000)[0]
        assert below.min() >= 0.0  # no overshoot below the onset
        assert above.min() < 0.0  # overshoot above it
    assert oscillation_onset(0.9) == pytest.approx(0.0263, abs=1e-4)
    assert continuum_oscillation_onset(0.9) == pytest.approx(1 / 36)
    assert oscillation_onset(0.0) == 1.0


def test_oscillation_onset_with_refresh_interval_is_consistent():
    a0 = oscillation_onset(0.9, 4)
    ev_below = np.linalg.eigvals(monodromy(a0 * 0.95, 0.9, 4))
    ev_above = np.linalg.eigvals(monodromy(a0 * 1.05, 0.9, 4))
    top_b = ev_below[np.argmax(np.abs(ev_below))]
    top_a = ev_above[np.argmax(np.abs(ev_above))]
    assert abs(top_b.imag) < 1e-12 and top_b.real > 0
    assert abs(top_a.imag) > 1e-9 or top_a.real < 0


@settings(max_examples=30, deadline=None)
@given(
    beta1=st.floats(0.0, 0.99),
    K=st.integers(1, 9),
    n=st.integers(1, 200),
    seed=st.integers(0, 2**16),
)
def test_python_loop_equals_vectorised_recursion(beta1, K, n, seed):
    a = np.random.default_rng(seed).uniform(0.0, 0.2, n)
    vec = simulate_recursion(a, beta1, n, refresh_interval=K)[0]
    loop = np.array(unit_response(a.tolist(), beta1, K))
    np.testing.assert_allclose(vec, loop, rtol=1e-12, atol=1e-12)


def test_recursion_is_batched_and_validates():
    a = np.array([[0.01] * 5, [0.02] * 5])
    x = simulate_recursion(a, np.array([0.0, 0.9]), 5)
    assert x.shape == (2, 6)
    assert x[0, 1] == pytest.approx(0.99)
    assert x[1, 1] == pytest.approx(1 - 0.1 * 0.02)
    with pytest.raises(ValueError, match="refresh_interval"):
        simulate_recursion(0.1, 0.9, 5, refresh_interval=0)
    with pytest.raises(ValueError, match="beta1"):
        simulate_recursion(0.1, 1.0, 5)
    with pytest.raises(ValueError, match="a > 0|must be > 0"):
        refresh_threshold(0.0, 0.9)


def _definition(a, beta1, K, x0, v0, noise):
    """The recursion as written in the module docstring, one step at a time: [n] -> [n + 1]."""
    x_prev, x = x0 - v0, x0
    out = [x]
    for n in range(len(a)):
        xs = out[K * (n // K)]
        force = a[n] * xs + (0.0 if noise is None else noise[n])
        x_prev, x = x, x + beta1 * (x - x_prev) - (1.0 - beta1) * force
        out.append(x)
    return np.array(out)


@settings(max_examples=40, deadline=None)
@given(
    batch=st.integers(1, 18),
    K=st.integers(1, 7),
    n=st.integers(0, 120),
    with_noise=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_both_recursion_paths_follow_the_definition(batch, K, n, with_noise, seed):
    """Rows of any batch size (scalar path <= 12 rows, batched above) match the definition."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.0, 0.3, (batch, n))
    beta = rng.uniform(0.0, 0.99, batch)
    x0, v0 = rng.normal(size=batch), rng.normal(0, 0.1, size=batch)
    noise = rng.normal(0, 0.01, (batch, n)) if with_noise else None
    with mock.patch.object(recursion, "_BLOCK", 5):  # time blocks of the batched path
        x = simulate_recursion(a, beta, n, refresh_interval=K, x0=x0, v0=v0, noise=noise)
    assert x.shape == (batch, n + 1)
    for i in range(batch):
        ref = _definition(a[i], beta[i], K, x0[i], v0[i], None if noise is None else noise[i])
        scale = max(1.0, float(np.max(np.abs(ref))))
        np.testing.assert_allclose(x[i], ref, rtol=0, atol=1e-10 * scale)


@settings(max_examples=30, deadline=None)
@given(K=st.integers(1, 5), n=st.integers(0, 150), seed=st.integers(0, 2**16))
def test_scalar_and_batched_recursion_paths_are_bitwise_equal(K, n, seed):
    """A row alone (Python-float loop) equals the same row inside a batch too big for the scalar
    path (numpy loop)."""
    rows = recursion._SCALAR_ROWS + 2
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.0, 0.5, (rows, n))
    beta = rng.uniform(0.0, 0.99, rows)
    with mock.patch.object(recursion, "_BLOCK", 7):  # many time blocks, ragged last one
        big = simulate_recursion(a, beta, n, refresh_interval=K)
    assert np.array_equal(big, simulate_recursion(a, beta, n, refresh_interval=K))
    for i in (0, rows // 2, rows - 1):
        alone = simulate_recursion(a[i], beta[i], n, refresh_interval=K)[0]
        assert np.array_equal(alone, big[i])
        assert np.array_equal(np.array(unit_response(a[i].tolist(), beta[i], K)), big[i])


def _scan_threshold(a: float, beta1: float, f: float, max_refresh: int) -> int | None:
    """The K-by-K scan the thresholds used before first_unstable (the reference)."""
    g = 1.0 - beta1
    step = np.array(
        [[1.0 + beta1 - g * a * f, -beta1, -g * a * (1.0 - f)], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    )
    P = np.eye(3)
    for K in range(1, max_refresh + 1):
        P = step @ P
        A = P[:2, :2].copy()
        A[:, 0] += P[:2, 2]
        if np.max(np.abs(np.linalg.eigvals(A))) > 1.0 + 1e-12:
            return K
    return None


@settings(max_examples=60, deadline=None)
@given(
    log_a=st.floats(-3.0, 0.3),
    beta1=st.floats(0.0, 0.98),
    f=st.sampled_from([0.0, 0.0, 0.25, 0.5, 0.9]),
)
@example(log_a=0.0703125, beta1=0.0703125, f=0.5)  # marginal: 1 + 6.5e-12 at K = 19-20 only
def test_threshold_search_equals_the_k_by_k_scan(log_a, beta1, f):
    """first_unstable assumes a window map stays unstable at every K above an unstable one; on
    random a, beta1 and current fractions its K* is the scan's (including None), except where
    the map is marginal to within float64: a radius above 1 + tol by less than MARGINAL at the
    first K either finds, which the search may step over (a README test run drew a = 1.18,
    beta1 = 0.07, f = 0.5: 1 + 6.5e-12 at K = 19 and 20, back to 1 + 1e-13 by K = 24; the
    radius of a near-defective eigenvalue carries rounding of order sqrt(eps) ~ 1e-8)."""
    from pgrpo.dynamics.optimizers import window_threshold
    from pgrpo.dynamics.recursion import default_max_refresh

    a = 10.0**log_a
    limit = default_max_refresh(a, beta1)
    found, scanned = window_threshold(a, beta1, f), _scan_threshold(a, beta1, f, limit)
    if found != scanned:
        first = min(k for k in (found, scanned) if k is not None)
        assert _radius(a, beta1, f, first) - 1.0 < MARGINAL, (found, scanned)


MARGINAL = 1e-9
"""A window map whose radius exceeds 1 by less than this is marginal to within float64 (see
test_threshold_search_equals_the_k_by_k_scan)."""


def _radius(a: float, beta1: float, f: float, K: int) -> float:
    g = 1.0 - beta1
    step = np.array(
        [[1.0 + beta1 - g * a * f, -beta1, -g * a * (1.0 - f)], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    )
    P = np.linalg.matrix_power(step, K)
    A = P[:2, :2].copy()
    A[:, 0] += P[:2, 2]
    return float(np.max(np.abs(np.linalg.eigvals(A))))


def test_threshold_of_a_tiny_rate_is_found_at_once():
    """`pgrpo predict --lr 1e-6 --kappa 1` scanned ~2M windows (killed after 25 s)."""
    thr = refresh_threshold(1e-6, 0.9)
    assert thr.K_star == 2_000_019 and thr.metrics["spectral_radius_at_K_star"] > 1.0
    assert spectral_radius(1e-6, 0.9, thr.K_star - 1) <= 1.0 + 1e-12


@pytest.mark.parametrize("K", [2, 10, 1000, 2_000_000])
def test_oscillation_onset_at_beta1_zero_is_one_over_k_at_any_k(K):
    """The scan started at a = 1e-6, so an onset below it (K > 1e6) was reported as none."""
    assert oscillation_onset(0.0, K) == pytest.approx(1.0 / K, rel=1e-9)
