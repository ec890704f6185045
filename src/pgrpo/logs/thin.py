"""Long logs as bin means: the one thinning that `pgrpo fit` (`dynamics.logfit`) and `pgrpo
diagnose` (`diagnose.signals`) both use.

An n-point series longer than `max_points` becomes means of b = ceil(n / max_points) consecutive
points, the bins aligned to the end of the series (the latest points are always whole bins):
m = floor(n / b) full bins and a head of n mod b (< b) leading points. The head is either left
out (`keep_head=False`, the diagnosis: every bin then holds exactly b points, and a prefix of
j x max_points points is binned into exactly max_points bins of j, which lets the live replay
share one null model across its polls) or kept as a shorter first bin (`keep_head=True`, the
fit: no step is lost). The noise of a bin mean is the per-point noise / sqrt(count): `counts`
gives each bin's count, so a fit can weight the shorter head bin by count / b (inverse variance)
and a noise model can scale the per-step batch size by b. NaN values are skipped (a bin with
none left is NaN); inf is kept (a bin holding an inf is inf), so a blow-up stays visible.
Series of <= max_points points come back unchanged (b = 1).
"""

from __future__ import annotations

import numpy as np


def bin_plan(n: int, max_points: int) -> tuple[int, int]:
    """(b, head) for an n-point series: b = ceil(n / max_points) points per bin and the head of
    n mod b leading points; (1, 0) when n <= max_points."""
    if max_points < 1:
        raise ValueError(f"max_points must be >= 1, got {max_points}")
    if n <= max_points:
        return 1, 0
    b = -(-n // max_points)
    return b, n % b


def bin_counts(n: int, b: int, head: int = 0, keep_head: bool = False) -> np.ndarray:
    """Points per bin: [m] (m = (n - head) // b, plus one for a kept head > 0), the kept head
    bin first."""
    full = np.full((n - head) // b, b, dtype=np.int64)
    return np.r_[head, full] if keep_head and head > 0 else full


def bin_means(x: np.ndarray, b: int, head: int = 0, keep_head: bool = False) -> np.ndarray:
    """Means of consecutive bins of b values after the first `head` ones (kept as one shorter
    first bin with keep_head): [n] -> [m] (see `bin_counts`). NaN-aware, inf kept (module
    docstring). b = 1 and no head: x itself."""
    x = np.asarray(x, dtype=float)
    if b == 1 and head == 0:
        return x
    body = _full_bin_means(x[head : head + (x.size - head) // b * b].reshape(-1, b))
    if keep_head and head > 0:
        return np.r_[_full_bin_means(x[None, :head]), body]
    return body


def _full_bin_means(v: np.ndarray) -> np.ndarray:
    """Row means of v: [m, b] skipping NaN (an all-NaN row is NaN)."""
    if not np.isnan(v).any():
        return v.sum(axis=1) / v.shape[1]
    ok = ~np.isnan(v)
    count = ok.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, np.where(ok, v, 0.0).sum(axis=1) / count, np.nan)
