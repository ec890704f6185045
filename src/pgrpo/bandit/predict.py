"""Predictions used by the bandit reproductions (temporary: until `pgrpo.dynamics` exposes the
exact refresh threshold and the exact discrete oscillation onset, they are computed here from
the recursion of the dynamics notes)."""

from __future__ import annotations

import math

import numpy as np


def window_monodromy(a: float, beta1: float, refresh_interval: int) -> np.ndarray:
    """2x2 map of (x_s, x_{s-1}) over one window of K steps of
    x_{n+1} - x_n = beta1 (x_n - x_{n-1}) - (1 - beta1) a x_s."""
    out = np.zeros((2, 2))
    for j, (x, xp) in enumerate(((1.0, 0.0), (0.0, 1.0))):
        xs = x
        for _ in range(refresh_interval):
            x, xp = x + beta1 * (x - xp) - (1 - beta1) * a * xs, x
        out[:, j] = (x, xp)
    return out


def refresh_threshold(a: float, beta1: float, *, k_max: int = 100_000) -> int:
    """Smallest K whose window monodromy has spectral radius > 1."""
    for k in range(1, k_max + 1):
        if np.abs(np.linalg.eigvals(window_monodromy(a, beta1, k))).max() > 1 + 1e-12:
            return k
    raise ValueError(f"no unstable K <= {k_max} for a={a}, beta1={beta1}")


def oscillation_onset(beta1: float) -> float:
    """Exact discrete onset (K = 1): a > (1 - sqrt(beta1)) / (1 + sqrt(beta1))."""
    s = math.sqrt(beta1)
    return (1 - s) / (1 + s)
