"""Statistics of a logged reward curve and their distribution on null curves of the same length.

A logged reward is a batch mean: noisy (binomial for 0/1 rewards, with ties and zero MADs), and
often autocorrelated (prompt order, curricula, slow drift). Every test below is a statistic
computed by `curve_statistics` on the curve *and*, with the same code, on seeded null curves of
the same length (`null_curves`): binomial batch means of N = B x G rollouts at the run's mean
reward when N is known and the reward is a 0/1 average, otherwise Gaussian AR(1) noise with the
curve's own lag-1 autocorrelation. p-values are the share of null curves at least as extreme, so
the false-alarm rate of a test at level alpha is alpha on its null by construction, whatever
the length, the ties or the autocorrelation. The null statistics are cached per (length, null).

All statistics are self-normalised (divided by the curve's own noise scale from first
differences), so the null needs no scale: only its shape (binomial p and N, or AR(1) rho).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy.signal import lfilter

N_NULL = 2000
"""Null curves per (length, null model): p-values resolve down to 1 / 2001."""
SEED = 20261201


@dataclass(frozen=True)
class NullModel:
    """kind 'binomial' (n_rollouts, p) or 'ar1' (rho); `describe()` for the evidence."""

    kind: str
    rho: float = 0.0
    n_rollouts: int = 0
    p: float = 0.5
    metrics: dict[str, float] = field(default_factory=dict)

    def describe(self) -> str:
        if self.kind == "binomial":
            return f"binomial batch means, N={self.n_rollouts} rollouts, p={self.p:.2f}"
        return f"AR(1) noise, rho={self.rho:.1f}"


def window_size(n: int) -> int:
    """Points in the start / end / peak windows: a fifth of the run, at least 3."""
    return max(3, n // 5)


def _moving_mean(y: np.ndarray, w: int) -> np.ndarray:
    """Trailing means of w points: [M, n] -> [M, n - w + 1]."""
    c = np.cumsum(np.pad(y, ((0, 0), (1, 0))), axis=1)
    return (c[:, w:] - c[:, :-w]) / w


def _centred_smooth(y: np.ndarray, w: int) -> np.ndarray:
    """Centred moving average with shrinking edges: [M, n] -> [M, n]."""
    n, h = y.shape[1], w // 2
    c = np.cumsum(np.pad(y, ((0, 0), (1, 0))), axis=1)
    if n <= 2 * h:
        i = np.arange(n)
        lo, hi = np.clip(i - h, 0, n), np.clip(i + h + 1, 0, n)
        return (c[:, hi] - c[:, lo]) / (hi - lo)
    out = np.empty_like(y)
    out[:, h : n - h] = (c[:, 2 * h + 1 :] - c[:, : n - 2 * h]) / (2 * h + 1)
    head, tail = np.arange(h), np.arange(n - h, n)
    out[:, :h] = c[:, head + h + 1] / (head + h + 1)
    out[:, n - h :] = (c[:, [n]] - c[:, tail - h]) / (n - tail + h)
    return out


def _hac_t(y: np.ndarray) -> np.ndarray:
    """OLS slope t-statistic with a Newey-West (Bartlett) variance: [M, n] -> [M]."""
    n = y.shape[1]
    t = (np.arange(n) - (n - 1) / 2.0).astype(y.dtype)
    stt = float(t @ t)
    slope = (y @ t) / stt
    resid = y - y.mean(axis=1, keepdims=True) - slope[:, None] * t
    u = resid * t
    s = np.einsum("ij,ij->i", u, u)
    lags = int(math.floor(4.0 * (n / 100.0) ** (2.0 / 9.0)))
    for lag in range(1, lags + 1):
        s += 2.0 * (1.0 - lag / (lags + 1.0)) * np.einsum("ij,ij->i", u[:, lag:], u[:, :-lag])
    se = np.sqrt(np.maximum(s, 0.0)) / stt
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(se > 0, slope / se, 0.0)


SPECTRAL_HALF_WIDTH = 4


def _spectral_peak(resid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Prominence of the sharpest periodogram peak: max_k P_k / mean of its 2h neighbours
    (h = SPECTRAL_HALF_WIDTH), over periods of 3 to n/4 points. A local ratio, so a smooth red
    spectrum (slow wander, common in real runs) is not a peak; an oscillation is. [M, n] ->
    ([M], [M] period in points)."""
    m, n = resid.shape
    power = np.abs(np.fft.rfft(resid - resid.mean(axis=1, keepdims=True), axis=1)) ** 2
    h = SPECTRAL_HALF_WIDTH
    k = np.arange(power.shape[1])
    centre = k[(k >= 4) & (k <= n // 3) & (k >= h) & (k < power.shape[1] - h)]
    if centre.size < 3:
        return np.zeros(m), np.full(m, np.nan)
    c = np.cumsum(np.pad(power, ((0, 0), (1, 0))), axis=1)
    around = (c[:, centre + h + 1] - c[:, centre - h] - power[:, centre]) / (2 * h)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(around > 0, power[:, centre] / around, 0.0)
    best = np.argmax(ratio, axis=1)
    return ratio[np.arange(m), best], n / centre[best]


def noise_sd(y: np.ndarray) -> np.ndarray:
    """Per-curve noise scale from first differences, sqrt(mean(diff^2) / 2): [M, n] -> [M].
    A mean of squares, not a MAD: discrete rewards give zero MADs."""
    d = np.diff(y, axis=1)
    return np.sqrt(np.mean(d * d, axis=1) / 2.0)


def curve_statistics(y: np.ndarray, scale: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The tests' statistics for curves y: [M, n] (or [n]); each value [M].

    trend_t: HAC t of the whole-run slope; recent_t: the same on the second half; gain_z: (end
    window - start window) / (sd / sqrt(w)); drop_z: (highest window - end window) / (sd /
    sqrt(w)); growth: residual sd over the last third / the first third (residuals from a
    centred moving average, divided by `scale` [n] when the noise level changes with the reward);
    spectral: the prominence of the sharpest periodogram peak of those residuals
    (`_spectral_peak`).
    """
    y = np.atleast_2d(np.asarray(y, dtype=float))
    return {**level_statistics(y), **_residual_statistics(y, scale)}


LEVEL_STATISTICS = ("trend_t", "recent_t", "gain_z", "drop_z", "rise_z", "noise_sd")
"""The statistics of `curve_statistics` that the progress verdict reads (`level_statistics`)."""


def level_statistics(y: np.ndarray) -> dict[str, np.ndarray]:
    """The LEVEL_STATISTICS of `curve_statistics` alone (the same code, the same values):
    y: [M, n] (or [n]); each value [M]."""
    y = np.atleast_2d(np.asarray(y, dtype=float))
    n = y.shape[1]
    w = window_size(n)
    sd = noise_sd(y)
    safe = np.where(sd > 0, sd, np.inf)
    mw = _moving_mean(y, w)
    se_w = safe / math.sqrt(w)
    return {
        "trend_t": _hac_t(y),
        "recent_t": _hac_t(y[:, n // 2 :]),
        "gain_z": (mw[:, -1] - mw[:, 0]) / se_w,
        "drop_z": (mw.max(axis=1) - mw[:, -1]) / se_w,
        "rise_z": (mw[:, -1] - mw.min(axis=1)) / se_w,
        "noise_sd": sd,
    }


ROUNDING = 1e-9
"""Residuals below ROUNDING x the curve's largest |value| are float rounding of the moving
average, not noise: a constant reward leaves ~1e-17 there, whose 'growth' was inf."""


SCALE_FLOOR = math.sqrt(0.02 * 0.98)
"""The spectral test divides residuals by the noise profile sqrt(p (1 - p)) floored here (p
kept in [0.02, 0.98]), so a level near 0 or 1 does not blow single residuals up."""


MIN_FREE = 5
"""Unpinned points a third needs for the growth test (fewer: growth 1, no evidence)."""


def _pinned(y: np.ndarray, tol: np.ndarray) -> np.ndarray:
    """[M, n] bool: steps in a run of >= 2 consecutive values at the curve's own lowest or
    highest value (a reward pinned at a floor or ceiling, e.g. every rollout failing: no noise
    there, whatever the noise is elsewhere)."""
    at = (y <= y.min(axis=1, keepdims=True) + tol) | (y >= y.max(axis=1, keepdims=True) - tol)
    pad = np.zeros((y.shape[0], 1), dtype=bool)
    before, after = np.hstack([pad, at[:, :-1]]), np.hstack([at[:, 1:], pad])
    return at & (before | after)


def _masked_sd(r: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Row sd of r [M, k] over the `keep` entries; NaN where fewer than MIN_FREE are kept."""
    cnt = keep.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(keep, r, 0.0).sum(axis=1) / cnt
        var = np.where(keep, (r - mean[:, None]) ** 2, 0.0).sum(axis=1) / cnt
    return np.where(cnt >= MIN_FREE, np.sqrt(var), np.nan)


def _masked_rms(v: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Row rms of v [1 or M, k] over the `keep` [M, k] entries (0 where none is kept)."""
    cnt = np.maximum(keep.sum(axis=1), 1)
    return np.sqrt(np.where(keep, v * v, 0.0).sum(axis=1) / cnt)


def _residual_statistics(y: np.ndarray, scale: np.ndarray | None) -> dict[str, np.ndarray]:
    """growth, spectral and peak_period of `curve_statistics`: y [M, n] -> each [M].

    growth is the residual sd over the last third / the first third, each over the steps that
    are not pinned at the curve's lowest or highest value (`_pinned`: a run that sits at 0 for
    its first third has no noise to grow from; before, its growth was inf against AR(1) noise).
    With `scale` [n] (the expected noise sd per step), each third's sd is divided by the rms of
    `scale` over the same steps (pooled, not point by point: where the level sits at 0 or 1
    both are 0, and a floor on the divisor there made such a run look like growing swings).
    Residuals under ROUNDING x max |y| count as 0."""
    n = y.shape[1]
    resid = y - _centred_smooth(y, max(5, n // 10))
    tol = ROUNDING * np.max(np.abs(y), axis=1, keepdims=True)
    resid = np.where(np.abs(resid) <= tol, 0.0, resid)
    free = ~_pinned(y, tol)
    third = max(3, n // 3)
    parts = (slice(0, third), slice(n - third, n))
    early, late = (_masked_sd(resid[:, part], free[:, part]) for part in parts)
    if scale is not None:
        expected = [_masked_rms(scale[None, part], free[:, part]) for part in parts]
        with np.errstate(divide="ignore", invalid="ignore"):
            early, late = (
                np.where(e > 0, sd / e, np.nan)
                for sd, e in zip((early, late), expected, strict=True)
            )
    with np.errstate(divide="ignore", invalid="ignore"):
        growth = np.where(early > 0, late / early, np.where(late > 0, np.inf, 1.0))
    growth = np.where(np.isnan(early) | np.isnan(late), 1.0, growth)
    if scale is not None:
        resid = resid / np.maximum(scale, SCALE_FLOOR)
    spectral, peak_period = _spectral_peak(resid)
    return {"growth": growth, "spectral": spectral, "peak_period": peak_period}


def lag1_autocorr(y: np.ndarray) -> float:
    """AR(1) coefficient from the first differences, rho = 1 + 2 corr(dy_t, dy_t-1) (for
    AR(1) noise corr(dy_t, dy_t-1) = -(1 - rho) / 2), with a straight line removed from the
    differences so that a trend, even a curved one, barely moves it; shrunk by n / (n + 20)
    (short curves give wild estimates). [n] -> float, rounded up to the 0.1 grid of the cached
    nulls, clipped to [0, 0.9]."""
    d = np.diff(np.asarray(y, dtype=float))
    if d.size < 4:
        return 0.0
    t = np.arange(d.size, dtype=float)
    d = d - np.polyval(np.polyfit(t, d, 1), t)
    den = float(d @ d)
    if den <= 0:
        return 0.0
    rho = (1.0 + 2.0 * float(d[1:] @ d[:-1]) / den) * y.size / (y.size + 20.0)
    return float(np.clip(math.ceil(rho * 10 - 1e-9) / 10, 0.0, 0.9))


def is_binary_mean(reward: np.ndarray, n_rollouts: float | None) -> bool:
    """Whether the logged values look like means of N 0/1 rewards: in [0, 1] and (nearly all)
    multiples of 1/N. Unknown N: False (nothing assumes rewards in [0, 1])."""
    r = np.asarray(reward, dtype=float)
    r = r[np.isfinite(r)]
    if not n_rollouts or r.size == 0 or r.min() < 0.0 or r.max() > 1.0:
        return False
    k = r * float(n_rollouts)
    # logs round their values (4 decimals shift k by up to 5e-5 N: 0.205 at N = 4096, past a
    # cap of 0.2); a continuous score lands within the tolerance on far fewer than 90% of
    # steps as long as it stays well below 0.5 (at 0.25: on about half of them)
    tol = min(0.25, max(1e-6, 6e-4 * float(n_rollouts)))
    return bool(np.mean(np.abs(k - np.round(k)) < tol) >= 0.9)


OVERDISPERSION = 2.0


def overdispersed(reward: np.ndarray, n_rollouts: float) -> bool:
    """Batch noise variance (from first differences) above OVERDISPERSION x the binomial
    p (1 - p) / N: prompts of unequal difficulty make the batch mean far noisier than N
    independent draws, and the binomial shape is then the wrong null."""
    r = np.asarray(reward, dtype=float)
    p = float(np.mean(r))
    binom = p * (1 - p) / float(n_rollouts)
    return binom > 0 and float(noise_sd(r[None, :])[0]) ** 2 > OVERDISPERSION * binom


def choose_null(reward: np.ndarray, n_rollouts: float | None, rho: float | None = None):
    """Binomial batch noise at N = B x G when N is known, the values are means of N 0/1
    rewards (fresh rollouts every step: independent noise) and their noise is not overdispersed;
    AR(1) with the curve's rho otherwise. reward: [n] finite values."""
    rho = lag1_autocorr(reward) if rho is None else rho
    if is_binary_mean(reward, n_rollouts) and not overdispersed(reward, n_rollouts):
        # p on a 0.01 grid (for the cache), never 0 or 1: a null with no variation tests nothing
        p = float(np.clip(round(float(np.mean(reward)) * 100) / 100, 0.01, 0.99))
        return NullModel("binomial", rho, int(n_rollouts), p)
    return NullModel("ar1", rho)


CHUNK_VALUES = 1_000_000
"""Null curves are simulated in row chunks of at most this many values (bounded memory on long
logs: 1,000 curves of 10,000 steps are 10 chunks of 8 MB arrays)."""


def null_curves(
    n: int, null: NullModel, m: int = N_NULL, seed: int = SEED, chunk: int = 0
) -> np.ndarray:
    """m seeded null curves of length n: [m, n] (chunk: which block of rows, for seeding)."""
    key = [seed, n, round(null.rho * 10), null.n_rollouts, round(null.p * 100), chunk]
    rng = np.random.default_rng(key)
    if null.kind == "binomial":
        x = rng.binomial(null.n_rollouts, null.p, size=(m, n)) / null.n_rollouts
        return x.astype(np.float32)  # float32: half the memory traffic, ample precision
    e = rng.standard_normal((m, n + 50), dtype=np.float32)
    return lfilter([1.0], [1.0, -null.rho], e, axis=1)[:, 50:].astype(np.float32)


def _simulated(n: int, null: NullModel, statistics) -> dict[str, np.ndarray]:  # noqa: ANN001
    """`statistics` ([M, n] -> {name: [M]}) of the N_NULL seeded null curves, in row chunks."""
    rows = max(1, CHUNK_VALUES // max(n, 1))
    parts = [
        statistics(null_curves(n, null, min(rows, N_NULL - i), chunk=i // rows))
        for i in range(0, N_NULL, rows)
    ]
    return {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}


def _sorted_null(stats: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    # a null curve with no variation at all (binomial at p = 0 or 1) is never significant
    flat = stats["noise_sd"] <= 0
    for key in ("trend_t", "recent_t", "gain_z", "drop_z", "rise_z"):
        stats[key] = np.where(flat, 0.0, stats[key])
    return {k: np.sort(v) for k, v in stats.items()}


_FULL_KEYS: set[tuple] = set()
"""Keys `_null_stats` has computed: a level-only request is served from them."""


@lru_cache(maxsize=256)
def _null_stats(n: int, kind: str, rho: float, n_rollouts: int, p: float) -> dict:
    _FULL_KEYS.add((n, kind, rho, n_rollouts, p))
    return _sorted_null(_simulated(n, NullModel(kind, rho, n_rollouts, p), curve_statistics))


@lru_cache(maxsize=256)
def _null_level(n: int, kind: str, rho: float, n_rollouts: int, p: float) -> dict:
    return _sorted_null(_simulated(n, NullModel(kind, rho, n_rollouts, p), level_statistics))


def null_statistics(n: int, null: NullModel, level_only: bool = False) -> dict[str, np.ndarray]:
    """Sorted null values of every statistic ([N_NULL] each) for curves of length n; with
    level_only, of the LEVEL_STATISTICS at least (half the cost where the others are not
    cached yet; what the progress verdict reads). The same values either way."""
    key = (int(n), null.kind, float(null.rho), int(null.n_rollouts), float(null.p))
    if level_only and key not in _FULL_KEYS:
        return _null_level(*key)
    return _null_stats(*key)


def p_value(value: float, null_sorted: np.ndarray, two_sided: bool = False) -> float:
    """Share of null values at least as extreme as `value` (with the +1 correction)."""
    if not math.isfinite(value):
        return 1.0 / (null_sorted.size + 1) if value > 0 or two_sided else 1.0
    if two_sided:
        a = np.abs(null_sorted)
        count = a.size - np.searchsorted(np.sort(a), abs(value), side="left")
    else:
        count = null_sorted.size - np.searchsorted(null_sorted, value, side="left")
    return float((count + 1) / (null_sorted.size + 1))


def fmt_p(p: float) -> str:
    """'p=0.012', or 'p<0.001' at the resolution of the null (no null curve as extreme)."""
    return "p<0.001" if p <= 1.5 / (N_NULL + 1) else f"p={p:.2g}"


def quantile(null_sorted: np.ndarray, q: float) -> float:
    """The q-quantile of a sorted null statistic (the threshold of a level 1 - q test)."""
    return float(np.quantile(null_sorted[np.isfinite(null_sorted)], q))
