"""The exact discrete heavy-ball recursion, its monodromy matrix, K* and the oscillation onset.

    x_{n+1} - x_n = beta1 (x_n - x_{n-1}) - (1 - beta1) (a_n x_{s(n)} + eta_n e_n),
    a_n = eta_n * kappa,   s(n) = K * floor(n / K)

x = R - R_inf; s(n) is the step at which the rollouts in use were drawn (off-policy lag); e_n is
the per-step gradient noise (variance noise_var / (B G)). x_{-1} = x_0 - v0 (v0 = 0: Adam's first
moment starts at zero). Source: docs/dynamics.md, "The model" (our derivation of arXiv 2606.30789).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


def simulate_recursion(
    a: np.ndarray | float,
    beta1: np.ndarray | float,
    n_steps: int,
    *,
    refresh_interval: int = 1,
    x0: np.ndarray | float = 1.0,
    v0: np.ndarray | float = 0.0,
    noise: np.ndarray | None = None,
) -> np.ndarray:
    """Run the recursion for `n_steps` steps, vectorised over a batch of runs.

    a: scalar, [n_steps] (schedule shared by the batch) or [batch, n_steps]; beta1, x0, v0:
    scalar or [batch]; noise: optional [batch, n_steps] additive force noise (already
    multiplied by eta_n; it enters as -(1 - beta1) noise_n). Returns x: [batch, n_steps + 1]
    (x[:, 0] = x0); the batch size is the broadcast of the inputs' leading dimensions.
    """
    if n_steps < 0 or int(n_steps) != n_steps:
        raise ValueError(f"n_steps must be an integer >= 0, got {n_steps!r}")
    K = _check_k(refresh_interval)
    a_arr = np.asarray(a, dtype=float)
    if a_arr.ndim == 0:
        a_arr = np.full((1, n_steps), float(a_arr))
    elif a_arr.ndim == 1:
        a_arr = a_arr[None, :]
    if a_arr.shape[-1] < n_steps:
        raise ValueError(f"a has {a_arr.shape[-1]} steps but n_steps = {n_steps}")
    x0_arr = np.atleast_1d(np.asarray(x0, dtype=float))
    v0_arr = np.atleast_1d(np.asarray(v0, dtype=float))
    b_arr = np.atleast_1d(np.asarray(beta1, dtype=float))
    if np.any((b_arr < 0) | (b_arr >= 1)):
        raise ValueError(f"beta1 must be in [0, 1), got {beta1!r}")
    shapes = [a_arr.shape[0], x0_arr.shape[0], v0_arr.shape[0], b_arr.shape[0]]
    if noise is not None:
        noise = np.atleast_2d(np.asarray(noise, dtype=float))
        shapes.append(noise.shape[0])
    batch = int(np.broadcast_shapes(*[(s,) for s in shapes])[0])
    beta = np.broadcast_to(b_arr, (batch,)).astype(float)
    x = np.broadcast_to(x0_arr, (batch,)).astype(float)
    v = np.broadcast_to(v0_arr, (batch,)).astype(float)
    a_arr = np.broadcast_to(a_arr[:, :n_steps], (batch, n_steps))
    if noise is None and batch <= _SCALAR_ROWS:
        rows = [
            _scalar_run(a_arr[i].tolist(), float(beta[i]), K, float(x[i]), float(v[i]))
            for i in range(batch)
        ]
        return np.array(rows, dtype=float).reshape(batch, n_steps + 1)
    if noise is not None:
        noise = np.broadcast_to(noise[:, :n_steps], (batch, n_steps))
    return _batched_run(a_arr, beta, K, x, v, noise)


# Up to this many rows one Python-float loop per row beats one numpy call per step: a numpy
# ufunc on a small array costs ~1 us, a float operation ~30 ns (measured 2026-12-01, 200,000
# steps, CPU s: 1 row 0.022 against 0.59, 16 rows 0.48 against 0.45, 48 rows 1.36 against 0.61).
# Both paths do the same float64 operations in the same order (bitwise equal results).
_SCALAR_ROWS = 12


def _scalar_run(a: list[float], beta1: float, K: int, x: float, v: float) -> list[float]:
    """One row of the recursion in Python floats: a [n_steps] -> x [n_steps + 1]."""
    g = 1.0 - beta1
    xs = x
    out = [x]
    append = out.append
    if K == 1:
        for an in a:
            v = beta1 * v - g * (an * x)
            x = x + v
            append(x)
        return out
    for n, an in enumerate(a):
        if n % K == 0:
            xs = x
        v = beta1 * v - g * (an * xs)
        x = x + v
        append(x)
    return out


def _batched_run(
    a: np.ndarray, beta: np.ndarray, K: int, x: np.ndarray, v: np.ndarray, noise: np.ndarray | None
) -> np.ndarray:
    """The recursion over a batch: a [batch, n_steps] -> x [batch, n_steps + 1] (a transposed
    view of a time-major array).

    One small in-place numpy call per operation; a and noise are read in time-major blocks of
    _BLOCK steps (contiguous rows, no full transposed copy).
    """
    n_steps = a.shape[1]
    g = 1.0 - beta
    out = np.empty((n_steps + 1, a.shape[0]))
    out[0] = x
    xs = x.copy()
    force = np.empty_like(x)
    for start in range(0, n_steps, _BLOCK):
        a_t = np.ascontiguousarray(a[:, start : start + _BLOCK].T)
        f_t = None if noise is None else np.ascontiguousarray(noise[:, start : start + _BLOCK].T)
        for j in range(a_t.shape[0]):
            if (start + j) % K == 0:
                xs[:] = x
            np.multiply(a_t[j], xs, out=force)
            if f_t is not None:
                force += f_t[j]
            force *= g
            v *= beta
            v -= force
            x += v
            out[start + j + 1] = x
    return out.T


_BLOCK = 4096


def unit_response(a: list[float], beta1: float, refresh_interval: int = 1) -> list[float]:
    """x_n for x0 = 1, v0 = 0 and one schedule `a` (Python floats: the fit's fast inner loop).

    a: [n_steps] -> [n_steps + 1]. Equal to `simulate_recursion(a, beta1, len(a))[0]`.
    """
    return _scalar_run(list(a), float(beta1), _check_k(refresh_interval), 1.0, 0.0)


def at_times(basis: np.ndarray, t: np.ndarray) -> np.ndarray:
    """basis: [..., T+1] on integer times -> values at t: [..., n] (linear interpolation)."""
    idx = np.rint(t).astype(int)
    if np.all(idx == t):
        return basis[..., idx]
    lo = np.clip(np.floor(t).astype(int), 0, basis.shape[-1] - 1)
    hi = np.clip(lo + 1, 0, basis.shape[-1] - 1)
    frac = t - lo
    return basis[..., lo] * (1.0 - frac) + basis[..., hi] * frac


def _check_k(refresh_interval: int) -> int:
    if int(refresh_interval) != refresh_interval or refresh_interval < 1:
        raise ValueError(f"refresh_interval must be an integer >= 1, got {refresh_interval!r}")
    return int(refresh_interval)


def step_matrix(a: float, beta1: float) -> np.ndarray:
    """One step on the state (x_n, x_{n-1}, x_s): [3, 3]. x_s is the frozen rollout state."""
    g = 1.0 - beta1
    return np.array([[1.0 + beta1, -beta1, -g * a], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])


_REFRESH = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])  # x_s <- x_n


def monodromy(a: float, beta1: float, refresh_interval: int) -> np.ndarray:
    """State map over one rollout window of K steps (refresh, then K steps): [3, 3]."""
    K = _check_k(refresh_interval)
    return np.linalg.matrix_power(step_matrix(a, beta1), K) @ _REFRESH


def spectral_radius(a: float, beta1: float, refresh_interval: int) -> float:
    """Largest |eigenvalue| of the one-window monodromy matrix (> 1: the mean diverges)."""
    return float(np.max(np.abs(np.linalg.eigvals(monodromy(a, beta1, refresh_interval)))))


@dataclass(frozen=True)
class RefreshThreshold:
    """K*: the smallest refresh interval whose window map has spectral radius > 1 (+ tol)."""

    K_star: int | None
    a: float
    beta1: float
    rule_of_thumb: float
    metrics: dict[str, float] = field(default_factory=dict)


def first_unstable(radius: Callable[[int], float], max_refresh: int, tol: float) -> int | None:
    """The smallest K in [1, max_refresh] with radius(K) > 1 + tol, or None. Doubling, then
    bisection: O(log^2 K*) 3x3 products with `radius` from a matrix power, where the K-by-K scan
    took O(K*) eigenvalue calls (`pgrpo predict --lr 1e-6 --kappa 1` ran for minutes). It assumes
    what the scan found on every grid tried: once a window map is unstable, it stays unstable at
    every larger K (tests/test_dynamics_recursion.py checks the two agree on random a, beta1, f),
    but for maps marginal to within float64, whose radius can rise above 1 + tol by ~1e-11 at a
    few K and fall back (a = 1.18, beta1 = 0.07, f = 0.5: K = 19-20), which the search may step
    over where the scan stops."""
    lo, hi = 0, 1  # lo: stable (0: none yet)
    while not radius(hi) > 1.0 + tol:
        if hi >= max_refresh:
            return None
        lo, hi = hi, min(2 * hi, max_refresh)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if radius(mid) > 1.0 + tol else (mid, hi)
    return hi


def default_max_refresh(a: float, beta1: float) -> int:
    """The scan limit of the thresholds: 10 (2 / a + 2 / (1 - beta1)) + 10."""
    return int(10 * (2.0 / a + 2.0 / (1.0 - beta1))) + 10


SMALL_A = 1e-7
"""Below this a = lr kappa, `refresh_threshold` is the first integer past 2 / a + 2 beta1 /
(1 - beta1): the exact scan equals it at every a in 1e-8..1e-4 and beta1 in {0, 0.5, 0.9,
0.99} (tests/test_dynamics_numerics.py), and drifts from it below (by 1.6e4 at a = 1e-10,
beta1 = 0.99; None from a = 1e-15) as float64 loses the window map. None past 2^53 (~9e15),
where float64 holds no exact integer."""


def refresh_threshold(
    a: float, beta1: float, *, max_refresh: int | None = None, tol: float = 1e-12
) -> RefreshThreshold:
    """Exact first-unstable refresh interval K* for a = eta * kappa (per step) and momentum beta1.

    K* is the first K whose one-window map S^K R (S = one-step matrix, R = the refresh) has
    spectral radius > 1 + tol (`first_unstable`). `tol` makes the marginal case (rho = 1
    exactly, e.g. K = 2 / a at beta1 = 0) count as stable. K_star is None when every
    K <= max_refresh (default `default_max_refresh`) is stable. `rule_of_thumb` =
    2 / a + 2 beta1 / (1 - beta1), labelled as such; below SMALL_A, K* is the first integer
    past it (metrics `small_a_asymptote`).
    """
    if not a > 0:
        raise ValueError(f"a = lr * kappa must be > 0, got {a!r}")
    if not 0.0 <= beta1 < 1.0:
        raise ValueError(f"beta1 must be in [0, 1), got {beta1!r}")
    thumb = 2.0 / a + 2.0 * beta1 / (1.0 - beta1)
    if max_refresh is None:
        max_refresh = default_max_refresh(a, beta1)
    if a < SMALL_A:  # the first integer past the asymptote (float64 loses the window map here)
        # 8 ulp: 2 / 1e-5 is 199999.99999999997 in float64; beyond 2^53 no integer is exact
        K_star: int | None = math.floor(thumb + 8 * math.ulp(thumb)) + 1
        if K_star is not None and (K_star > max_refresh or thumb > 2.0**53):
            K_star = None
        return RefreshThreshold(K_star, a, beta1, thumb, {"small_a_asymptote": 1.0})
    K_star = first_unstable(lambda K: spectral_radius(a, beta1, K), max_refresh, tol)
    rho = spectral_radius(a, beta1, K_star) if K_star is not None else math.nan
    return RefreshThreshold(K_star, a, beta1, thumb, {"spectral_radius_at_K_star": rho})


def oscillation_onset(beta1: float, refresh_interval: int = 1) -> float:
    """Smallest a = eta * kappa at which the mean trajectory oscillates (complex or negative
    dominant window eigenvalue).

    K = 1: exact closed form (1 - sqrt(beta1)) / (1 + sqrt(beta1)) (complex roots of
    l^2 - (1 + beta1 - (1 - beta1) a) l + beta1); at beta1 = 0 the root 1 - a turns negative at
    a = 1. K > 1: found by scanning a on a log grid and bisecting the window map's dominant
    eigenvalue (continuum value for K = 1: (1 - beta1) / (4 beta1), see model.py).
    """
    K = _check_k(refresh_interval)
    if not 0.0 <= beta1 < 1.0:
        raise ValueError(f"beta1 must be in [0, 1), got {beta1!r}")
    if K == 1:
        if beta1 == 0.0:
            return 1.0
        sb = math.sqrt(beta1)
        return (1.0 - sb) / (1.0 + sb)

    def oscillates(a: float) -> bool:
        ev = np.linalg.eigvals(monodromy(a, beta1, K))
        top = ev[np.argmax(np.abs(ev))]
        return abs(top.imag) > 1e-12 * max(abs(top), 1e-300) or top.real < 0

    grid = np.geomspace(min(1e-6, 0.01 / K), 4.0, 400)  # the onset falls like 1 / K
    for lo, hi in zip(grid[:-1], grid[1:], strict=True):
        if oscillates(hi) and not oscillates(lo):
            for _ in range(60):
                mid = math.sqrt(lo * hi)
                lo, hi = (lo, mid) if oscillates(mid) else (mid, hi)
            return hi
    return math.inf


def window_timescale(a: float, beta1: float, refresh_interval: int = 1) -> float:
    """Decay time of the exact recursion's mean, in optimizer steps: -K / ln rho with rho the
    spectral radius of the one-window map (`spectral_radius`); inf when rho >= 1, 0 when the
    mean reaches its plateau within one window (rho = 0). Valid wherever the recursion is
    stable, also where the continuum's damping c = 1 - a (K - 1) / 2 is <= 0 and its c / k
    turns negative; -> c / k as a -> 0. Where not `resolved`, the continuum's slow
    mode -1 / max Re s of m s^2 + c s + a = 0."""
    K = _check_k(refresh_interval)
    ev = np.linalg.eigvals(monodromy(a, beta1, K))
    if slow_gap(ev) < RESOLVED_GAP:  # float64 eigenvalues lose the gap: the continuum's slow mode
        m, c = _continuum(a, beta1, K)
        if c > 0:  # the slow root of m s^2 + c s + a = 0, without cancellation
            disc = c * c - 4.0 * m * a
            return (c + math.sqrt(disc)) / (2.0 * a) if disc > 0 else 2.0 * m / c
    rho = float(np.max(np.abs(ev)))
    if rho >= 1.0:
        return math.inf
    return 0.0 if rho == 0.0 else -K / math.log(rho)


RESOLVED_GAP = 1e-6
"""The smallest product (1 - |l1|)(1 - |l2|) (`slow_gap`) over a window map's two largest
eigenvalues, the largest near +1, for which its timescale and variance come from the
eigenvalues and the Lyapunov equation. Below it (a = lr kappa -> 0, or beta1 -> 1, where both
eigenvalues approach 1) float64 loses the gap: at beta1 = 1 - 1e-7 the Lyapunov solve gave a std
34% low, then a negative variance; at a = 1e-12 the eigenvalue tau was 1.3e-4 off. There the
continuum limit, exact to O(1 - rho), is used instead (`resolved`)."""


def resolved(a: float, beta1: float, refresh_interval: int) -> bool:
    """Whether float64 resolves the window map's slow modes (`RESOLVED_GAP`)."""
    return slow_gap(np.linalg.eigvals(monodromy(a, beta1, refresh_interval))) >= RESOLVED_GAP


def slow_gap(eigenvalues: np.ndarray) -> float:
    """(1 - |l1|)(1 - |l2|) for the two largest eigenvalues by modulus when the largest lies near
    +1 (|1 - l1| < 0.5: a slow mode, where the continuum limit holds); inf otherwise (a mode
    near -1 is a period-2 oscillation, not a slow one: a marginal map is resolved)."""
    ev = eigenvalues[np.argsort(-np.abs(eigenvalues))]
    if abs(1.0 - ev[0]) >= 0.5:
        return math.inf
    return float(np.prod(1.0 - np.abs(ev[:2])))


def _continuum(a: float, beta1: float, refresh_interval: int) -> tuple[float, float]:
    """(m, c) of the heavy-ball continuum (`optimizers.heavy_ball_continuum`)."""
    from pgrpo.dynamics.optimizers import heavy_ball_continuum

    return heavy_ball_continuum(a, beta1, refresh_interval)


def window_stationary_variance(
    a: float, beta1: float, refresh_interval: int, noise_var_per_step: float
) -> float:
    """Exact stationary Var(x) of the recursion with refresh interval K and white force noise
    e_n of variance `noise_var_per_step` each step (entering as -(1 - beta1) e_n), averaged over
    the K steps of a window; inf when the window map is unstable. K = 1 is
    `discrete_stationary_variance`; -> D / (c k) of the continuum (noise_var_per_step = 2 D) as
    a -> 0 (used where not `resolved`), but not near c = 0, where the continuum's variance
    diverges while the recursion's
    stays finite up to K*.

    Solves Sigma = M Sigma M^T + Q for the state (x_n, x_{n-1}, x_s) at window ends, M = S^K R,
    Q = s2 sum_{j<K} S^j B B^T S^jT (B = (-(1 - beta1), 0, 0)); then the variance at each step
    of the window from the refreshed state. O(K) 3x3 products.
    """
    from scipy.linalg import solve_discrete_lyapunov

    K = _check_k(refresh_interval)
    ev = np.linalg.eigvals(monodromy(a, beta1, K))
    if slow_gap(ev) < RESOLVED_GAP:  # the continuum's D / (c k), D = noise_var_per_step / 2
        c = _continuum(a, beta1, K)[1]
        if c > 0:
            return noise_var_per_step / (2.0 * c * a)
    if np.max(np.abs(ev)) >= 1.0:
        return math.inf
    S = step_matrix(a, beta1)
    b = np.array([-(1.0 - beta1), 0.0, 0.0])
    Q = np.zeros((3, 3))  # the noise accumulated over the first j steps of a window
    P = np.eye(3)  # S^j
    covs = []
    for _ in range(K):
        covs.append((P, Q.copy()))
        Q = S @ Q @ S.T + noise_var_per_step * np.outer(b, b)
        P = S @ P
    sigma = solve_discrete_lyapunov(P @ _REFRESH, Q)  # at window ends
    start = _REFRESH @ sigma @ _REFRESH.T  # the refreshed state a window starts from
    return float(np.mean([(Pj @ start @ Pj.T + Qj)[0, 0] for Pj, Qj in covs]))


def discrete_stationary_variance(a: float, beta1: float, noise_var_per_step: float) -> float:
    """Exact stationary Var(x) of the K = 1 recursion with white force noise e_n of variance
    `noise_var_per_step` (x_{n+1} = (1 + b - g a) x_n - b x_{n-1} - g e_n, g = 1 - b).

    Solves the discrete Lyapunov equation; -> D / (c k) of the continuum as a -> 0.
    """
    from scipy.linalg import solve_discrete_lyapunov

    g = 1.0 - beta1
    A = np.array([[1.0 + beta1 - g * a, -beta1], [1.0, 0.0]])
    if np.max(np.abs(np.linalg.eigvals(A))) >= 1.0:
        return math.inf
    Q = np.array([[g * g * noise_var_per_step, 0.0], [0.0, 0.0]])
    return float(solve_discrete_lyapunov(A, Q)[0, 0])
