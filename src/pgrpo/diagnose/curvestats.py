"""The statistics of a logged reward curve that the reward-curve tests read (`nullmodel` gives
their distributions on null curves of the same length, computed by this same code).

All statistics are self-normalised (divided by the curve's own noise scale from first
differences), so a null needs no scale: only its shape. Every function takes curves as rows,
y: [M, n], and returns one value per row.
"""

from __future__ import annotations

import math

import numpy as np


def window_mean_sd(noise: float, k: float, rho: float) -> float:
    """Standard deviation of the mean of k consecutive points of a stationary AR(1) series at
    lag-1 autocorrelation rho whose first-difference noise scale (`noise_sd`) is `noise`.
    First differences see sigma sqrt(1 - rho) of the series' marginal sd sigma (they take out
    the slow part the autocorrelation adds, as they take out a trend), so sigma^2 = noise^2 /
    (1 - rho); the mean of k points has variance sigma^2 (1 + 2 sum_{j<k} (1 - j / k) rho^j) / k,
    which tends to sigma^2 (1 + rho) / ((1 - rho) k) for k >> 1 / (1 - rho). noise^2 (1 + rho) /
    ((1 - rho) k), what the reward_hacking gain and the gaming checks' trend used before
    2026-12-04, is (1 - rho) of that: at rho 0.8 a standard error 2.2x too small, and
    reward_hacking fired on 3.6-3.9% of flat AR(0.8) runs (`bench/diagnose_bounds.py`)."""
    rho = min(max(float(rho), -0.99), 0.99)
    k = max(float(k), 1.0)
    j = np.arange(1, math.ceil(k))
    factor = 1.0 + 2.0 * float(np.sum((1.0 - j / k) * rho**j))
    return float(noise) * math.sqrt(max(factor, 0.0) / ((1.0 - rho) * k))


def window_size(n: int) -> int:
    """Points in the start / end / peak windows: a fifth of the run, at least 3."""
    return max(3, n // 5)


def _moving_mean(y: np.ndarray, w: int) -> np.ndarray:
    """Trailing means of w points: [M, n] -> [M, n - w + 1]."""
    c = np.cumsum(np.pad(y, ((0, 0), (1, 0))), axis=1)
    mw = c[:, w:] - c[:, :-w]
    mw /= w  # in place: a chunk of null curves' [M, n] arrays are 8 MB each
    return mw


def centred_smooth(y: np.ndarray, w: int) -> np.ndarray:
    """Centred moving average with shrinking edges: [M, n] -> [M, n]."""
    n, h = y.shape[1], w // 2
    c = np.cumsum(np.pad(y, ((0, 0), (1, 0))), axis=1)
    if n <= 2 * h:
        i = np.arange(n)
        lo, hi = np.clip(i - h, 0, n), np.clip(i + h + 1, 0, n)
        return (c[:, hi] - c[:, lo]) / (hi - lo)
    out = np.empty_like(y)
    mid = out[:, h : n - h]  # filled in place (as `_moving_mean`)
    np.subtract(c[:, 2 * h + 1 :], c[:, : n - 2 * h], out=mid)
    mid /= 2 * h + 1
    head, tail = np.arange(h), np.arange(n - h, n)
    out[:, :h] = c[:, head + h + 1] / (head + h + 1)
    out[:, n - h :] = (c[:, [n]] - c[:, tail - h]) / (n - tail + h)
    return out


def hac_slope(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """OLS slope per point of the index and its Newey-West (Bartlett) standard error: [M, n] ->
    ([M], [M]). A slope and residuals at float rounding of the curve's values (ROUNDING x max
    |y|) count as 0: on an exactly constant stretch they are ~1e-17, and their ratio read as
    t = 3.5. The residuals, so the error, do not change when a line is added to y."""
    n = y.shape[1]
    t = (np.arange(n) - (n - 1) / 2.0).astype(y.dtype)
    stt = float(t @ t)
    tol = ROUNDING * np.max(np.abs(y), axis=1)
    slope = (y @ t) / stt
    slope = np.where(np.abs(slope) * max(n - 1, 1) <= tol, 0.0, slope)
    # u = resid * t, built in one [M, n] array (the null curves' chunks are 8 MB each)
    u = y - y.mean(axis=1, keepdims=True)
    u -= slope[:, None] * t
    u[(u <= tol[:, None]) & (u >= -tol[:, None])] = 0.0  # |u| <= tol, without an |u| array
    u *= t
    s = np.einsum("ij,ij->i", u, u)
    lags = int(math.floor(4.0 * (n / 100.0) ** (2.0 / 9.0)))
    for lag in range(1, lags + 1):
        s += 2.0 * (1.0 - lag / (lags + 1.0)) * np.einsum("ij,ij->i", u[:, lag:], u[:, :-lag])
    return slope, np.sqrt(np.maximum(s, 0.0)) / stt


def _hac_t(y: np.ndarray) -> np.ndarray:
    """The `hac_slope` t-statistic: [M, n] -> [M]. A slope with no residual noise at all (a
    noiseless line) is t = +-inf; no slope and no noise, 0."""
    slope, se = hac_slope(y)
    with np.errstate(divide="ignore", invalid="ignore"):  # a noiseless line: t = +-inf
        noiseless = np.where(slope > 0, np.inf, np.where(slope < 0, -np.inf, 0.0))
        return np.where(se > 0, slope / se, noiseless)


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


STEP_MIN_SEGMENT = 3
"""`without_largest_step`'s shortest segment either side of the break (a lone outlier is no
step)."""


def without_largest_step(y: np.ndarray, min_segment: int = STEP_MIN_SEGMENT) -> np.ndarray:
    """Curves y [M, n] less their largest single step in level: the one break (at least
    `min_segment` points either side) that a two-segment mean fits best, its jump subtracted
    from the points after it; [M, n] -> [M, n] (unchanged below 2 min_segment + 2 points). One
    of the two curves `lag1_estimate` reads; `nullmodel.overdispersed` reads the noise of the
    curve less its largest step anywhere (min_segment 1)."""
    y = np.atleast_2d(np.asarray(y, dtype=float))
    m, n = y.shape
    if n < 2 * min_segment + 2:
        return y
    c = np.cumsum(y, axis=1)
    b = np.arange(min_segment, n - min_segment + 1)  # segments [0, b) and [b, n)
    jump = (c[:, -1:] - c[:, b - 1]) / (n - b) - c[:, b - 1] / b  # [M, len(b)]
    best = np.argmax(b * (n - b) * jump**2, axis=1)  # the largest drop in squared error
    after = np.arange(n)[None, :] >= b[best][:, None]
    return y - jump[np.arange(m), best][:, None] * after


def _lag1_ratio(r: np.ndarray) -> np.ndarray:
    """sum r_t r_t-1 / sum r_t^2 per row: [M, k] -> [M] (0 where r is all 0)."""
    den = np.einsum("ij,ij->i", r, r)
    num = np.einsum("ij,ij->i", r[:, 1:], r[:, :-1])
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


def _lag1_two_ways(y: np.ndarray) -> np.ndarray:
    """The mean of two AR(1) estimates that a trend moves in different ways, [M, n] -> [M]: from
    the first differences, 1 + 2 corr(dy_t, dy_t-1) (for AR(1) noise corr(dy_t, dy_t-1) = -(1 -
    rho) / 2) with a straight line removed from the differences; and the lag-1 autocorrelation
    of the levels about a cubic. The first reads a sharp bend (a rise that stops, a drop) as
    rho near 1; the second is biased low on short curves and reads a slow curve as
    autocorrelation."""
    n = y.shape[1]
    d = np.diff(y, axis=1)
    t = np.arange(n - 1) - (n - 2) / 2.0
    d = d - d.mean(axis=1, keepdims=True) - np.outer((d @ t) / float(t @ t), t)
    q, _ = np.linalg.qr(np.vander(np.linspace(-1.0, 1.0, n), 4))  # [n, 4]: a cubic's basis
    levels = y - (y @ q) @ q.T
    return 0.5 * ((1.0 + 2.0 * _lag1_ratio(d)) * (np.abs(d).sum(axis=1) > 0) + _lag1_ratio(levels))


def lag1_estimate(y: np.ndarray) -> np.ndarray:
    """AR(1) coefficient of curves y [M, n] -> [M] (0 for fewer than 8 points): the lower of
    `_lag1_two_ways` on the curve and on the curve less its largest step
    (`without_largest_step`), so that neither a rise or drop done within a step or two nor a
    smooth rise passes for autocorrelated noise (a step taken out of a smooth rise leaves a
    jump in it). `nullmodel.lag1_autocorr` calibrates this estimate on AR(1) curves of the same
    length, so only its spread matters. Before the step was taken out (to 2026-12-05), a jump
    of 0.2 -> 0.8 at noise sd 0.07 put the bound at rho 0.9 on most 64-point curves, and with
    no N stated they read 'flat'."""
    y = np.atleast_2d(np.asarray(y, dtype=float))
    if y.shape[1] < 8:
        return np.zeros(y.shape[0])
    return np.minimum(_lag1_two_ways(y), _lag1_two_ways(without_largest_step(y)))


def curve_statistics(
    y: np.ndarray, binary: bool = False, noise_scale: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """The tests' statistics for curves y: [M, n] (or [n]); each value [M].

    trend_t: HAC t of the whole-run slope; recent_t: the same on the second half; gain_z: (end
    window - start window) / (sd / sqrt(w)); drop_z: (highest window - end window) / (sd /
    sqrt(w)); growth, growth_rank: residual sizes over the last third against the first
    (residuals from a centred moving average); spectral: the prominence of the sharpest
    periodogram peak of those residuals (`_spectral_peak`). binary: the values are means of 0/1
    rewards, whose noise sd moves with the level as sqrt(p (1 - p)): the residual statistics are
    then taken relative to each curve's own profile at its smoothed level (the binomial nulls
    get the same treatment, so the test sees the same statistic on both). noise_scale: [n] (or
    [M, n]) the expected noise sd at each step in any unit, e.g. the smoothed logged within-batch
    reward spread; the growth statistics then read the residuals relative to it instead, with
    the last third's expected size at least the first's: a logged spread can explain swings
    that grow with it, but a spread that falls (groups that saturate) says nothing of the
    swings of a mean over few prompts, whose difficulty it does not see (dividing by it read
    growth on 5 of the 33 corpus runs). The spectral test keeps the binary profile or none.
    """
    y = np.atleast_2d(np.asarray(y, dtype=float))
    return {**level_statistics(y), **_residual_statistics(y, binary, noise_scale)}


def binary_curve_statistics(y: np.ndarray) -> dict[str, np.ndarray]:
    """`curve_statistics(y, binary=True)`: the statistics of means of 0/1 rewards."""
    return curve_statistics(y, binary=True)


LEVEL_STATISTICS = (
    "trend_t", "recent_t", "gain_z", "drop_z", "rise_z", "late_drop_z", "head_rise_z", "noise_sd"
)  # fmt: skip
"""The statistics of `curve_statistics` that the progress verdict reads (`level_statistics`)."""


def head_rise(y: np.ndarray, sd: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A rise within the start window (`window_size`), which its mean dilutes: the largest, over
    k = 2 .. w - 1, of (mean of the points after the first k - the head) / (sd sqrt(1/(k - 1) +
    1/(n - k))), the head being the mean of the first k points less their lowest, so that one
    point off the level (an outlier of heavy-tailed noise, a row logged before training) makes
    no rise: ([M], [M] ints, [M]) the statistic, its k and its head. y: [M, n]; sd: [M] the
    noise sd (inf: no noise, no rise). A jump after the first 2 of 200 points moved the start
    window's mean by 1% of it and read `flat` (2026-12-05, session 27)."""
    n = y.shape[1]
    k = np.arange(2, window_size(n))
    c = np.cumsum(y, axis=1)
    low = np.minimum.accumulate(y[:, : k.size + 1], axis=1)  # the columns k - 1 read
    head = (c[:, k - 1] - low[:, k - 1]) / (k - 1)
    rest = (c[:, -1:] - c[:, k - 1]) / (n - k)
    z = (rest - head) / (sd[:, None] * np.sqrt(1.0 / (k - 1) + 1.0 / (n - k)))
    best = np.argmax(z, axis=1)
    rows = np.arange(y.shape[0])
    return z[rows, best], k[best], head[rows, best]


def level_statistics(y: np.ndarray) -> dict[str, np.ndarray]:
    """The LEVEL_STATISTICS of `curve_statistics` alone (the same code, the same values):
    y: [M, n] (or [n]); each value [M]."""
    y = np.atleast_2d(np.asarray(y, dtype=float))
    n = y.shape[1]
    w = window_size(n)
    m = late_split(n)
    d2 = np.diff(y, axis=1) ** 2  # noise_sd's, once for the whole curve and its head
    sd = np.sqrt(np.mean(d2, axis=1) / 2.0)
    sd_m = np.sqrt(np.mean(d2[:, : m - 1], axis=1) / 2.0)
    del d2  # each [M, n] array is let go once read: a chunk of null curves is 8 MB of them
    safe = np.where(sd > 0, sd, np.inf)
    mw = _moving_mean(y, w)
    se_w = safe / math.sqrt(w)
    # the larger of the head's noise sd and the whole curve's: a head that happens to hold few
    # of a heavy-tailed noise's dips (or none: a constant head) must not make the end's look
    # like a fall; the null curves take the same larger sd
    big = np.maximum(sd_m, sd)
    se_m = np.where(big > 0, big, np.inf) * math.sqrt(1.0 / m + 1.0 / w)
    out = {
        "gain_z": (mw[:, -1] - mw[:, 0]) / se_w,
        "drop_z": (mw.max(axis=1) - mw[:, -1]) / se_w,
        "rise_z": (mw[:, -1] - mw.min(axis=1)) / se_w,
        "late_drop_z": (y[:, :m].mean(axis=1) - mw[:, -1]) / se_m,
    }
    del mw
    return {
        "trend_t": _hac_t(y),
        "recent_t": _hac_t(y[:, n // 2 :]),
        **out,
        "head_rise_z": head_rise(y, safe)[0],
        "noise_sd": sd,
    }


def binomial_sd(level: np.ndarray) -> np.ndarray:
    """sqrt(p (1 - p)) at a level p on the 0/1 scale (clipped to [0, 1]): the sd of one 0/1
    reward, the profile of a binomial batch mean's noise."""
    p = np.clip(level, 0.0, 1.0)
    return np.sqrt(p * (1.0 - p))


def late_split(n: int) -> int:
    """The points before the last third (at least 3): `late_drop_z` compares the end window
    with their mean, in units of the larger of their noise sd and the whole curve's, against
    null curves chosen on those points alone, so that a fall at the end does not widen the
    null it is judged against (a plateau that collapses over its last 10 of 61 points raised
    the whole curve's AR(1) rho bound to 0.9, and read 'flat')."""
    return max(3, n - n // 3)


LATE_MIN_HEAD = 16
"""The late test needs this many points before the last third (runs of >= 23 points): the
head's rho bound is 0 below 8 points and loose up to about 16 (a review, 2026-12-04: the test
fired on 3.6-12% of AR(0.6-0.9) curves of 8-10 points at level 0.5%)."""


ROUNDING = 1e-9
"""Residuals below ROUNDING x the curve's largest |value| are float rounding of the moving
average, not noise: a constant reward leaves ~1e-17 there, whose 'growth' was inf."""


SCALE_FLOOR = math.sqrt(0.02 * 0.98)
"""The spectral test divides residuals by the noise profile sqrt(p (1 - p)) floored here (p
kept in [0.02, 0.98]), so a level near 0 or 1 does not blow single residuals up."""


GROWTH_MIN = 1.5
"""The growth test also needs the swings' size to grow by half (residual sd, last third over
the first): the rank test sees a 20% rise in a noise level that moves with the reward (a
learning run's, watchdog_qwen3_8b_lora: p 0.0045), which is no instability."""


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
    """Row rms of v [M, k] over the `keep` [M, k] entries (0 where none is kept)."""
    cnt = np.maximum(keep.sum(axis=1), 1)
    return np.sqrt(np.where(keep, v * v, 0.0).sum(axis=1) / cnt)


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n of x [n], tied values sharing their average rank (scipy.stats.rankdata's
    default, without importing scipy.stats)."""
    order = np.argsort(x, kind="mergesort")
    srt = x[order]
    first = np.r_[True, srt[1:] != srt[:-1]]  # the start of each run of equal values
    group = np.cumsum(first) - 1
    starts = np.flatnonzero(first)
    ends = np.r_[starts[1:], x.size]  # one past each run's end
    ranks = np.empty(x.size)
    ranks[order] = ((starts + 1 + ends) / 2.0)[group]
    return ranks


def _late_rank_sum(both: np.ndarray, first: int) -> tuple[np.ndarray, np.ndarray]:
    """(sum of the average ranks of columns >= first, sum over groups of tied values of t^3 - t)
    per row, over the finite entries of both [M, k] (NaN = left out) -> ([M], [M]). One sort per
    row; the rows with ties (a logged curve's discrete values; rare on null curves) are ranked
    again with averaged ranks."""
    order = np.argsort(both, axis=1)  # NaN last: the finite values take ranks 1..count
    srt = np.take_along_axis(both, order, axis=1)
    late = (order >= first) & np.isfinite(srt)
    r_late = np.where(late, np.arange(1, both.shape[1] + 1), 0).sum(axis=1).astype(float)
    ties = np.zeros(both.shape[0])
    for i in np.flatnonzero(np.any(srt[:, 1:] == srt[:, :-1], axis=1)):  # NaN != NaN
        keep = np.isfinite(both[i])
        ranks = average_ranks(both[i][keep])
        r_late[i] = float(ranks[np.flatnonzero(keep) >= first].sum())
        _, t = np.unique(both[i][keep], return_counts=True)
        ties[i] = float(np.sum(t.astype(float) ** 3 - t))
    return r_late, ties


def thirds(n: int) -> tuple[slice, slice]:
    """The first and last thirds of n points (at least 3 each; they overlap when n < 6) that
    the growth statistics compare."""
    third = max(3, n // 3)
    return slice(0, third), slice(n - third, n)


def level_shift_z(y: np.ndarray) -> np.ndarray:
    """How far the level moved between the thirds the growth test compares: (mean of the last
    third - mean of the first) / its standard error, from each third's own first-difference noise
    (`noise_sd`) as independent steps (autocorrelated noise makes the z larger, so the growth
    test, `instability.LEVEL_SHIFT_Z`, is judged less often: the safe side for its false
    alarms). y: [M, n] -> [M]; 0 for a constant
    curve, +-inf for a step between two constant thirds."""
    y = np.atleast_2d(np.asarray(y, dtype=float))
    first, last = thirds(y.shape[1])
    a, b = y[:, first], y[:, last]
    gap = b.mean(axis=1) - a.mean(axis=1)
    se = np.sqrt(noise_sd(a) ** 2 / a.shape[1] + noise_sd(b) ** 2 / b.shape[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(se > 0, gap / se, np.where(gap != 0, np.copysign(np.inf, gap), 0.0))


def _rank_growth(early: np.ndarray, late: np.ndarray) -> np.ndarray:
    """Mann-Whitney z (ties corrected) of late values over early ones, per row, over the finite
    entries: early [M, a], late [M, b] -> [M]; 0 (no evidence) where either has fewer than
    MIN_FREE or every value is tied. Distribution-free for exchangeable values, and a z rather
    than the AUC so that a third with few usable steps (a sparse 0/1 mean: the steps at the floor
    are pinned) is not judged against the spread of a full one."""
    r_late, ties = _late_rank_sum(np.concatenate([early, late], axis=1), early.shape[1])
    n_e = np.isfinite(early).sum(axis=1).astype(float)
    n_l = np.isfinite(late).sum(axis=1).astype(float)
    total = n_e + n_l
    u = r_late - n_l * (n_l + 1) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        var = n_e * n_l / 12.0 * ((total + 1) - ties / (total * (total - 1)))
        z = (u - n_e * n_l / 2.0) / np.sqrt(var)
    ok = (n_e >= MIN_FREE) & (n_l >= MIN_FREE) & (var > 0)
    return np.where(ok, z, 0.0)


def _residual_statistics(
    y: np.ndarray, binary: bool, noise_scale: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """growth, growth_rank, spectral and peak_period of `curve_statistics`: y [M, n] -> each [M].

    growth is the residual sd over the last third / the first third, each over the steps that
    are not pinned at the curve's lowest or highest value (`_pinned`: a run that sits at 0 for
    its first third has no noise to grow from; before, its growth was inf against AR(1) noise).
    With `binary`, each third's sd is divided by the rms of the expected noise sd
    sqrt(p (1 - p)) (p the curve's smoothed level) over the same steps (pooled, not point by
    point: where the level sits at 0 or 1 both are 0, and a floor on the divisor there made
    such a run look like growing swings). A given noise_scale [n] / [M, n] takes the place of
    sqrt(p (1 - p)) there (the same pooling).
    growth_rank, what the instability test reads, compares the same two thirds by ranks: the
    Mann-Whitney z of the late |residuals| (over their third's expected scale) against the
    early ones (`_rank_growth`). The sd ratio is the size it reports; as a test it was not
    robust: on t(3) noise, or sparse 0/1 means with N unknown, against a Gaussian null, it
    fired on 10-33% of curves at level 0.005. Residuals under ROUNDING x max |y| count as 0."""
    n = y.shape[1]
    level = centred_smooth(y, max(5, n // 10))
    resid = y - level
    scale = binomial_sd(level) if binary else None
    tol = ROUNDING * np.max(np.abs(y), axis=1, keepdims=True)
    resid = np.where(np.abs(resid) <= tol, 0.0, resid)
    free = ~_pinned(y, tol)
    parts = thirds(n)
    early, late = (_masked_sd(resid[:, part], free[:, part]) for part in parts)
    ones = np.ones((y.shape[0], 1))
    divisor = [ones, ones]
    profile = scale if noise_scale is None else np.broadcast_to(np.atleast_2d(noise_scale), y.shape)
    if profile is not None:
        expected = [_masked_rms(profile[:, part], free[:, part]) for part in parts]
        if noise_scale is not None:  # it may explain growing swings, never make them
            expected[1] = np.maximum(expected[1], expected[0])
        divisor = [np.where(e > 0, e, np.nan)[:, None] for e in expected]
        with np.errstate(divide="ignore", invalid="ignore"):
            early, late = (
                np.where(e > 0, sd / e, np.nan)
                for sd, e in zip((early, late), expected, strict=True)
            )
    with np.errstate(divide="ignore", invalid="ignore"):
        growth = np.where(early > 0, late / early, np.where(late > 0, np.inf, 1.0))
        size = [
            np.where(free[:, part], np.abs(resid[:, part]) / d, np.nan)
            for part, d in zip(parts, divisor, strict=True)
        ]
    growth = np.where(np.isnan(early) | np.isnan(late), 1.0, growth)
    growth_rank = np.where(np.isnan(early) | np.isnan(late), 0.0, _rank_growth(*size))
    if scale is not None:
        resid = resid / np.maximum(scale, SCALE_FLOOR)
    spectral, peak_period = _spectral_peak(resid)
    return {
        "growth": growth,
        "growth_rank": growth_rank,
        "spectral": spectral,
        "peak_period": peak_period,
    }
