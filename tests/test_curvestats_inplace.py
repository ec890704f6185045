"""The curve statistics build their [M, n] arrays in place (a chunk of null curves is 8 MB per
array): bit for bit what the out-of-place formulas they replaced gave, on curves with noise,
constant stretches (the ROUNDING tolerance), ties and -0.0; and the null curves come in rows
(C order), as the statistics' reductions have always read them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pgrpo.diagnose import curvestats as cs
from pgrpo.diagnose.nullmodel import NullModel, null_curves


def _hac_reference(y):
    n = y.shape[1]
    t = (np.arange(n) - (n - 1) / 2.0).astype(y.dtype)
    stt = float(t @ t)
    tol = cs.ROUNDING * np.max(np.abs(y), axis=1)
    slope = (y @ t) / stt
    slope = np.where(np.abs(slope) * max(n - 1, 1) <= tol, 0.0, slope)
    resid = y - y.mean(axis=1, keepdims=True) - slope[:, None] * t
    resid = np.where(np.abs(resid) <= tol[:, None], 0.0, resid)
    u = resid * t
    s = np.einsum("ij,ij->i", u, u)
    lags = int(math.floor(4.0 * (n / 100.0) ** (2.0 / 9.0)))
    for lag in range(1, lags + 1):
        s += 2.0 * (1.0 - lag / (lags + 1.0)) * np.einsum("ij,ij->i", u[:, lag:], u[:, :-lag])
    return slope, np.sqrt(np.maximum(s, 0.0)) / stt


def _curves(m: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y = np.cumsum(rng.standard_normal((m, n)), axis=1) * 0.01 + rng.standard_normal((m, n))
    y[0] = 0.25  # constant: slope and residuals at rounding
    y[1, : n // 2] = -0.0
    y[2] = np.round(y[2] * 4) / 4  # ties
    y[3, n // 3 :] = 0.5 + 1e-12 * rng.standard_normal(n - n // 3)  # a flat stretch
    return y


@pytest.mark.parametrize(("m", "n"), [(8, 9), (7, 64), (40, 301), (5, 2000)])
def test_in_place_statistics_are_the_out_of_place_formulas_bit_for_bit(m, n):
    y = _curves(m, n, seed=n)
    for got, want in zip(cs.hac_slope(y), _hac_reference(y), strict=True):
        assert got.tobytes() == want.tobytes()
    half = y[:, n // 2 :]  # a view, as `level_statistics` passes it
    for got, want in zip(cs.hac_slope(half), _hac_reference(half), strict=True):
        assert got.tobytes() == want.tobytes()
    w = cs.window_size(n)
    c = np.cumsum(np.pad(y, ((0, 0), (1, 0))), axis=1)
    assert cs._moving_mean(y, w).tobytes() == ((c[:, w:] - c[:, :-w]) / w).tobytes()
    h = max(5, n // 10) // 2
    if n > 2 * h:
        mid = (c[:, 2 * h + 1 :] - c[:, : n - 2 * h]) / (2 * h + 1)
        assert cs.centred_smooth(y, max(5, n // 10))[:, h : n - h].tobytes() == mid.tobytes()
    sd = np.linspace(0.5, 2.0, m)
    k = np.arange(2, w)
    low = np.minimum.accumulate(y, axis=1)[:, k - 1]
    z, kk, head = cs.head_rise(y, sd)
    want_head = (np.cumsum(y, axis=1)[:, k - 1] - low) / (k - 1)
    assert head.tobytes() == want_head[np.arange(m), kk - 2].tobytes()


def test_null_curves_come_in_rows():
    for null in (NullModel("ar1", 0.5), NullModel("binomial", 0.0, 16, 0.3)):
        curves = null_curves(300, null, 120, seed=3)
        assert curves.dtype == np.float32 and curves.flags["C_CONTIGUOUS"]
