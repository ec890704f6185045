"""The distribution of a logged reward curve's statistics on null curves of the same length.

A logged reward is a batch mean: noisy (binomial for 0/1 rewards, with ties and zero MADs), and
often autocorrelated (prompt order, curricula, slow drift). Every test is a statistic computed by
`curvestats.curve_statistics` on the curve *and*, with the same code, on seeded null curves of
the same length (`null_curves`): binomial batch means of N = B x G rollouts at the run's mean
reward when N is known (or read off the values' 1/N steps) and the reward is a 0/1 average,
otherwise Gaussian AR(1) noise at a 90% upper confidence bound on the curve's lag-1
autocorrelation (`lag1_autocorr`). p-values are the share of null curves at least as extreme,
so the false-alarm rate of a test at level alpha is alpha on its null by construction, whatever
the length or the ties; bench/null_rates.py measures it on curves off the null's shape. The
null statistics are cached per (length, null).

All statistics are self-normalised (divided by the curve's own noise scale from first
differences), so the null needs no scale: only its shape (binomial p and N, or AR(1) rho).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from pgrpo.core.rewardrange import range_holding
from pgrpo.diagnose import rhotable
from pgrpo.diagnose.curvestats import (  # noqa: F401  (re-exported: nm.curve_statistics, ...)
    GROWTH_MIN,
    LATE_MIN_HEAD,
    LEVEL_STATISTICS,
    binary_curve_statistics,
    curve_statistics,
    hac_slope,
    lag1_estimate,
    late_split,
    level_statistics,
    noise_sd,
    window_size,
    without_largest_step,
)

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
    inferred: bool = False
    """N read off the values' lattice (`lattice_size`), not given by the log or the user."""

    def describe(self) -> str:
        if self.kind == "binomial":
            how = f" (from the values' 1/{self.n_rollouts} steps)" if self.inferred else ""
            return f"binomial batch means, N={self.n_rollouts} rollouts{how}, p={self.p:.2f}"
        if self.n_rollouts:  # `choose_null`'s white batch noise: a stated N, fresh every step
            return f"independent batch noise, N={self.n_rollouts} rollouts per logged point"
        return f"AR(1) noise, rho={self.rho:.2f}"


RHO_GRID = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9)
"""The AR(1) coefficients of the cached nulls: finer near 1, where the level statistics' null
spread grows fastest with rho (a window mean's sd by sqrt((1 + rho) / (1 - rho))). The top
stays at 0.9: a smooth rise with little noise reads as rho near 1 (its differences are
autocorrelated), and against a null at 0.975 a collapse from 0.8 to 0.1 at noise sd 0.02 read
flat; slow wander beyond 0.9 is the price (docs/diagnostics.md gives the rates)."""
RHO_CONFIDENCE = 0.9
"""One-sided confidence of the AR(1) null's rho (`lag1_autocorr`): an upper bound, not the
point estimate, which on a short curve falls well below the truth as often as above it (at
rho 0.9 and n = 50 the estimate spread over 0.46-1.23; the old shrunk point estimate put half
the curves under a too-narrow null: 39% of them read as not flat)."""
TABLE_CURVES = 2000
"""AR(1) curves per (length, rho) behind the stored table of the estimator's quantiles."""


def simulated_quantile(n: int, rho: float, q: float, m: int = TABLE_CURVES) -> float:
    """The q-quantile of `lag1_estimate` on m seeded AR(1) curves of length n at rho: what
    `rhotable` stores for q = 1 - RHO_CONFIDENCE on a grid of lengths."""
    null = NullModel("ar1", rho)
    return float(np.quantile(lag1_estimate(null_curves(n, null, m, SEED + 1)), q))


@lru_cache(maxsize=1024)
def _estimate_quantile(n: int, rho: float, q: float) -> float:
    """`simulated_quantile` read from the stored table (`rhotable`) when it holds q: at the
    longest tabulated length <= n (a shorter curve's estimate spreads wider, so its low quantile
    is lower and the bound it gives is no lower: conservative between the grid's lengths, which
    are 2^(1/4) apart; past the last, 2048, the same); simulated otherwise."""
    if q == rhotable.Q and n >= rhotable.LENGTHS[0]:
        i = int(np.searchsorted(rhotable.LENGTHS, n, side="right")) - 1
        return rhotable.QUANTILES[i][RHO_GRID.index(rho)]
    return simulated_quantile(n, rho, q)


def lag1_autocorr(y: np.ndarray) -> float:
    """The AR(1) null's rho for a curve y [n]: the largest RHO_GRID value whose estimates
    (`lag1_estimate`) fall at or below the curve's own with probability >= 1 - RHO_CONFIDENCE,
    i.e. a one-sided RHO_CONFIDENCE upper confidence bound on the grid, from the estimator's
    simulated distribution at the curve's length (`_estimate_quantile`: a stored table; found by
    bisection, the quantile growing with rho). The tests' p-values
    grow with rho (a wider null), so the bound keeps their false-alarm rate near their level
    for every rho up to 0.9 (the grid's top: slow wander beyond it is not covered; the rates
    are in docs/diagnostics.md). 0.0 below 8 points."""
    y = np.asarray(y, dtype=float)
    if y.size < 8:
        return 0.0
    est = float(lag1_estimate(y[None, :])[0])
    q = round(1.0 - RHO_CONFIDENCE, 6)
    lo, hi = 0, len(RHO_GRID) - 1  # invariant: the bound's index is in [lo, hi]
    if _estimate_quantile(y.size, RHO_GRID[0], q) > est:
        return 0.0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _estimate_quantile(y.size, RHO_GRID[mid], q) <= est:
            lo = mid
        else:
            hi = mid - 1
    return float(RHO_GRID[lo])


UNIT_SNAP = 1e-9
"""`unit_scale` puts values this close to the range's ends (in units of its width) on them."""


def unit_scale(reward: np.ndarray, reward_range: tuple[float, float] | None) -> np.ndarray:
    """The reward on the 0/1 scale of its known range (lo, hi): (reward - lo) / (hi - lo), [n]
    -> [n]. The binomial null and every 0/1 test read the reward there: means of N rewards in
    {lo, hi} are lo + (hi - lo) k / N, so a -1/+1 (or 0/10) reward whose range is stated is
    tested as a mean of 0/1 rewards. Without a range, or one that some value leaves
    (`range_holding`, which allows 1e-9 of the width for rounding): the reward itself (and
    0/1 tests then need it in [0, 1]). Finite mapped values are clipped to [0, 1] and those
    within UNIT_SNAP of an end put on it; inf and NaN are kept."""
    r = np.asarray(reward, dtype=float)
    bounds = range_holding(r, reward_range)
    if bounds is None:
        return r
    lo, hi = bounds
    u = (r - lo) / (hi - lo)
    ok = np.isfinite(u)  # a logged inf or NaN stays what it is (callers drop it)
    # rounding: a mean of rewards in {0.1, 0.3} logged as 0.10000000000000002 is the floor
    v = np.clip(u[ok], 0.0, 1.0)
    v[v < UNIT_SNAP] = 0.0
    v[v > 1.0 - UNIT_SNAP] = 1.0
    u[ok] = v
    return u


def is_binary_mean(reward: np.ndarray, n_rollouts: float | None) -> bool:
    """Whether the logged values look like means of N 0/1 rewards: in [0, 1] and (nearly all)
    multiples of 1/N. Unknown N: False (nothing assumes rewards in [0, 1])."""
    r = np.asarray(reward, dtype=float)
    r = r[np.isfinite(r)]
    if not n_rollouts or r.size == 0 or r.min() < 0.0 or r.max() > 1.0:
        return False
    k = r * float(n_rollouts)
    return bool(np.mean(np.abs(k - np.round(k)) < _lattice_tolerance(n_rollouts)) >= 0.9)


def maybe_binary_mean(reward: np.ndarray, n_rollouts: float | None) -> bool:
    """Whether the logged values can be means of 0/1 rewards (what an i.i.d. degeneracy
    prediction assumes): in [0, 1], and multiples of 1/N when N is known (`is_binary_mean`)."""
    r = np.asarray(reward, dtype=float)
    r = r[np.isfinite(r)]
    if r.size == 0 or r.min() < 0 or r.max() > 1:
        return False
    return not n_rollouts or is_binary_mean(r, n_rollouts)


OVERDISPERSION = 2.0


def overdispersed(reward: np.ndarray, n_rollouts: float) -> bool:
    """Batch noise variance above OVERDISPERSION x the binomial p (1 - p) / N at the curve's
    mean p: prompts of unequal difficulty make the batch mean far noisier than N independent
    draws, and the binomial shape is then the wrong null. The variance is from first
    differences, the lower of the curve's and of the curve less its largest step anywhere
    (`without_largest_step` with segments of 1 point or more), as `lag1_estimate` takes the
    lower of its two readings: a rise done within a step is no noise (its one large difference
    made 24-point curves at N = 32 that jump 0.2 -> 0.8 after their first 2 or 3 points
    overdispersed, so the AR(1) bound judged them and most read `flat`; 2026-12-05,
    docs/diagnostics.md, "A jump in the first steps with the batch stated"), and a step taken
    out of a smooth rise leaves a jump in it."""
    r = np.asarray(reward, dtype=float)
    p = float(np.mean(r))
    binom = p * (1 - p) / float(n_rollouts)
    both = np.vstack([r, without_largest_step(r[None, :], min_segment=1)[0]])
    noise = float(noise_sd(both).min())
    return binom > 0 and noise**2 > OVERDISPERSION * binom


LATTICE_MAX = 64
"""The largest N `lattice_size` reads off a log's values: past it, a reward rounded to two
decimals (multiples of 1/100) would read as a mean of 100 rollouts."""


def lattice_size(reward: np.ndarray) -> int | None:
    """The N of a log that does not state it, when its values look like means of N 0/1 rewards:
    the N <= LATTICE_MAX whose lattice fits every distinct value best (each a multiple of 1/N
    within `is_binary_mean`'s rounding tolerance; every value, not 90% of steps: a run at 0 on
    99% of its steps would otherwise read as N = 1 whatever its few successes; ties: the
    smallest N), among curves with at
    least three distinct values, or two of which one is 0 or 1 (a rare success: 0 and 1/8); a
    constant says nothing of N. None otherwise. reward: [n]."""
    r = np.asarray(reward, dtype=float)
    r = r[np.isfinite(r)]
    values = np.unique(r)
    if values.size < 2 or r.min() < 0.0 or r.max() > 1.0:
        return None
    if values.size == 2 and not (values[0] == 0.0 or values[1] == 1.0):
        return None  # two values, neither a floor of 0 nor a ceiling of 1: not a 0/1 mean
    fits = [(round(_lattice_error(values, k), 9), k) for k in range(1, LATTICE_MAX + 1)]
    fits = [(err, k) for err, k in fits if err < _lattice_tolerance(k)]
    return min(fits)[1] if fits else None  # the best fit, then the smallest N (0, 1/64, 2/64 fit
    # 1/63 within 63's tolerance; their own lattice fits exactly)


def _lattice_tolerance(n_rollouts: float) -> float:
    # logs round their values (4 decimals shift k by up to 5e-5 N: 0.205 at N = 4096, past a
    # cap of 0.2); a continuous score lands within the tolerance on far fewer than 90% of
    # steps as long as it stays well below 0.5 (at 0.25: on about half of them)
    return min(0.25, max(1e-6, 6e-4 * float(n_rollouts)))


def _lattice_error(values: np.ndarray, k: int) -> float:
    """The largest distance of k x value from a whole number."""
    return float(np.max(np.abs(values * k - np.round(values * k))))


INFERRED_RHO_MAX = 0.3
"""The largest rho bound (`lag1_autocorr`) at which an N read off the values is used."""

UNDERDISPERSION = 0.25
"""An N read off the values is dropped when their noise variance (first differences) is below
this share of the binomial p (1 - p) / N: values on a lattice by rounding (a score logged with
one decimal reads as N = 10; values within 6e-4 of 0 as N = 1) are not 0/1 means."""


def _underdispersed(reward: np.ndarray, n_rollouts: float) -> bool:
    r = np.asarray(reward, dtype=float)
    r = r[np.isfinite(r)]
    p = float(np.mean(r))
    return float(noise_sd(r[None, :])[0]) ** 2 < UNDERDISPERSION * p * (1 - p) / n_rollouts


def rollouts(
    reward: np.ndarray, n_rollouts: float | None, rho: float | None = None
) -> tuple[float | None, bool]:
    """(N, inferred): the stated N, else the values' `lattice_size` (inferred True) unless
    their noise is far below that N's binomial noise (`UNDERDISPERSION`) or may be
    autocorrelated (the rho bound above INFERRED_RHO_MAX): the binomial null assumes
    independent steps, which a stated N vouches for and a lattice does not (an AR(0.8) score
    rounded to one decimal read as N = 10 and 'collapsed' on 31 of 80 curves). rho: the
    curve's `lag1_autocorr` when the caller has it."""
    if n_rollouts:
        return n_rollouts, False
    k = lattice_size(reward)
    independent = (lag1_autocorr(reward) if rho is None else rho) <= INFERRED_RHO_MAX
    ok = k is not None and independent and not _underdispersed(reward, k)
    return (float(k), True) if ok else (None, False)


def grid_p(p: float, draws: int) -> float:
    """The binomial null's p on a grid (for the cache): 0.01 steps in [0.05, 0.95], 0.001 steps
    nearer 0 or 1 (a floor of 0.01 made p = 0.005 look twice as noisy as it is: 13% false
    alarms), never closer to 0 or 1 than one success in the run's `draws` rollouts (a null
    with no variation tests nothing)."""
    q = min(p, 1.0 - p)
    q = round(q * 100) / 100 if q >= 0.05 else round(q * 1000) / 1000
    q = min(max(q, 0.001, 1.0 / max(draws, 1)), 0.5)
    return q if p <= 0.5 else 1.0 - q


def choose_null(reward: np.ndarray, n_rollouts: float | None, rho: float | None = None):
    """Binomial batch noise at N = B x G when N is known (stated, or read off the values'
    1/N steps: `rollouts`), the values are means of N 0/1 rewards (fresh rollouts every step:
    independent noise) and their noise is not overdispersed; independent batch noise (AR(1) at
    rho 0, marked by its N) when N is stated, the values are not means of 0/1 rewards and the
    curve does not reject independent steps (`autocorrelated`): the same fresh rollouts vouch
    for independent steps, whatever the reward's scale (round 6, 2026-12-04: against AR(1) at
    the bound on rho, which on 25-51 points of a rise that stops reaches 0.9, partial-credit
    rewards rising tenfold read 'flat'); AR(1) at the bound on the curve's rho
    (`lag1_autocorr`) otherwise. reward: [n] finite values."""
    rho = lag1_autocorr(reward) if rho is None else rho
    n_rollouts, inferred = rollouts(reward, n_rollouts, rho)
    binary = is_binary_mean(reward, n_rollouts)
    if binary and not overdispersed(reward, n_rollouts):
        p = grid_p(float(np.mean(reward)), int(n_rollouts) * reward.size)
        return NullModel("binomial", rho, int(n_rollouts), p, inferred=inferred)
    if n_rollouts and not inferred and not binary and not autocorrelated(reward):
        return NullModel("ar1", 0.0, int(n_rollouts))
    return NullModel("ar1", rho)


INDEPENDENCE_LEVEL = 0.05
"""`autocorrelated`'s level: the share of curves of independent steps it calls autocorrelated
(`rhotable.INDEPENDENT` stores the quantile at 1 - this level)."""


def autocorrelated(reward: np.ndarray) -> bool:
    """Whether a curve's own lag-1 estimate (`lag1_estimate`) rejects independent steps: above
    its (1 - INDEPENDENCE_LEVEL) quantile on curves of independent noise, read from the stored
    table (`rhotable.INDEPENDENT`) at the longest tabulated length <= the curve's (past 2,048,
    that one). A stated N vouches for fresh rollouts at every step, not for the steps'
    independence: a smoothed log, prompts served in a fixed order or a level that wanders make
    the logged means autocorrelated, and against independent batch noise AR(0.5) curves with
    a stated N read 'collapsed' in 24% of live replays (bench/live_checks.py --null-rho 0.5,
    2026-12-05; 1.5% with this check). The price: a sharp rise also raises the estimate (its
    differences are autocorrelated), so such a rise keeps the AR(1) null at the rho bound, as
    before the independent null (round 6's jkorrr reads `flat` again; residuals about a
    running median, which a step does not move, left 14% of those live replays 'collapsed').
    reward: [n]; False below 8 points."""
    y = np.asarray(reward, dtype=float)
    if y.size < rhotable.LENGTHS[0]:
        return False
    est = float(lag1_estimate(y[None, :])[0])
    i = int(np.searchsorted(rhotable.LENGTHS, y.size, side="right")) - 1
    return est > rhotable.INDEPENDENT[i]


CHUNK_VALUES = 1_000_000
"""Null curves are simulated in row chunks of at most this many values (bounded memory on long
logs: 1,000 curves of 10,000 steps are 10 chunks of 8 MB arrays)."""


def null_curves(
    n: int, null: NullModel, m: int = N_NULL, seed: int = SEED, chunk: int = 0
) -> np.ndarray:
    """m seeded null curves of length n: [m, n] (chunk: which block of rows, for seeding)."""
    key = [seed, n, round(null.rho * 100), null.n_rollouts, round(null.p * 10000), chunk]
    rng = np.random.default_rng(key)
    if null.kind == "binomial":
        x = rng.binomial(null.n_rollouts, null.p, size=(m, n)) / null.n_rollouts
        return x.astype(np.float32)  # float32: half the memory traffic, ample precision
    e = rng.standard_normal((m, n + 50), dtype=np.float32)
    return ar1_filter(e, null.rho)[:, 50:].astype(np.float32, order="C")  # rows, as ever


LOOP_MIN_ROWS = 100
"""`ar1_filter` loops over the steps when a chunk holds at least this many rows (curves of up to
CHUNK_VALUES / LOOP_MIN_ROWS = 10,000 points: on par with lfilter); on fewer, longer rows the
loop's cost per step is not shared, and scipy.signal's lfilter is imported there and then (a
review, 2026-12-04: 50,000-point nulls took 5.8 s by the loop, 1.6 s by lfilter)."""


def ar1_filter(e: np.ndarray, rho: float) -> np.ndarray:
    """x_t = rho x_{t-1} + e_t along each row from x_0 = e_0, in float64: [M, n] -> [M, n].
    Bit for bit what `scipy.signal.lfilter([1], [1, -rho], e, axis=1)` returns (a test checks
    it): a loop over the n steps, each one vector operation over the M rows, so that the
    diagnosis does not import scipy.signal (~0.35 s of the CLI's start-up with scipy.stats);
    lfilter itself for fewer than LOOP_MIN_ROWS rows."""
    if np.shape(e)[0] < LOOP_MIN_ROWS:
        from scipy.signal import lfilter  # here: long curves only (LOOP_MIN_ROWS)

        return lfilter([1.0], [1.0, -rho], e, axis=1)
    x = np.array(np.transpose(e), dtype=np.float64, order="C")  # [n, M]: a row per step
    prev = np.zeros(x.shape[1])
    for row in x:  # filtered in place: x_t = e_t + rho x_{t-1}
        row += rho * prev
        prev = row
    return x.T


def _simulated(n: int, null: NullModel, statistics) -> dict[str, np.ndarray]:  # noqa: ANN001
    """`statistics` ([M, n] -> {name: [M]}) of the N_NULL seeded null curves, in row chunks."""
    rows = max(1, CHUNK_VALUES // max(n, 1))
    parts = [  # in float64, as the statistics read them: the float32 chunk is let go first
        statistics(null_curves(n, null, min(rows, N_NULL - i), chunk=i // rows).astype(float))
        for i in range(0, N_NULL, rows)
    ]
    return {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}


def _sorted_null(stats: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    # a null curve with no variation at all (binomial at p = 0 or 1) is never significant
    flat = stats["noise_sd"] <= 0
    for key in ("trend_t", "recent_t", "gain_z", "drop_z", "rise_z", "head_rise_z"):
        stats[key] = np.where(flat, 0.0, stats[key])
    return {k: np.sort(v) for k, v in stats.items()}


_FULL_KEYS: set[tuple] = set()
"""Keys `_null_stats` has computed: a level-only request is served from them."""


@lru_cache(maxsize=256)
def _null_stats(n: int, kind: str, rho: float, n_rollouts: int, p: float) -> dict:
    _FULL_KEYS.add((n, kind, rho, n_rollouts, p))
    # a binomial null's statistics read each curve's noise profile, as the data's do then
    statistics = binary_curve_statistics if kind == "binomial" else curve_statistics
    return _sorted_null(_simulated(n, NullModel(kind, rho, n_rollouts, p), statistics))


@lru_cache(maxsize=256)
def _null_level(n: int, kind: str, rho: float, n_rollouts: int, p: float) -> dict:
    return _sorted_null(_simulated(n, NullModel(kind, rho, n_rollouts, p), level_statistics))


def null_statistics(n: int, null: NullModel, level_only: bool = False) -> dict[str, np.ndarray]:
    """Sorted null values of every statistic ([N_NULL] each) for curves of length n; with
    level_only, of the LEVEL_STATISTICS at least (half the cost where the others are not
    cached yet; what the progress verdict reads). The same values either way."""
    rollouts_key = int(null.n_rollouts) if null.kind == "binomial" else 0  # AR(1): N only names it
    key = (int(n), null.kind, float(null.rho), rollouts_key, float(null.p))
    if level_only and key not in _FULL_KEYS:
        return _null_level(*key)
    return _null_stats(*key)


LATE_P_FACTOR = 3.0
"""`late_drop_p` is reported x3 (Bonferroni): the verdicts OR it with the best-to-end fall test
at the same level, and its null, chosen on the head alone, is looser near the rho grid's top
(a review, 2026-12-04: 1.0-1.75% of AR(0.9) curves at level 0.5% unadjusted, 0.75-1.5% x3;
heavy-tailed dips 0-1.25% and 0-0.25%; 400 curves a cell)."""


def late_drop_p(unit: np.ndarray, z: float, n_rollouts: float | None) -> float:
    """p-value of `late_drop_z` z of a curve ([n], on its 0/1 scale when known: the end window
    below the mean of the points before the last third, `late_split`) against null curves whose
    model is chosen on those points alone (`choose_null` of the head: its rho bound, or binomial
    noise): under a stationary null the head's bound covers the whole curve's rho, and a fall at
    the end cannot widen the null it is judged against. 1 when the end window is not below the
    head's mean, or with fewer than LATE_MIN_HEAD points before the last third. Multiplied by
    LATE_P_FACTOR (capped at 1)."""
    if not z > 0 or late_split(unit.size) < LATE_MIN_HEAD:
        return 1.0
    head = choose_null(unit[: late_split(unit.size)], n_rollouts)
    p = p_value(z, null_statistics(unit.size, head, level_only=True)["late_drop_z"])
    return min(1.0, LATE_P_FACTOR * p)


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


def fmt_share(share: float) -> str:
    """A share as a whole percentage, with a decimal where rounding would read 0% or 100% for a
    share strictly between them (0.9969 read '100% of groups')."""
    text = f"{share:.0%}"
    if text not in ("0%", "100%") or not 0 < share < 1:
        return text
    fine = f"{share:.1%}"
    return {"0.0%": "<0.1%", "100.0%": ">99.9%"}.get(fine, fine)


def fmt_p(p: float) -> str:
    """'p=0.012', or 'p<0.001' at the resolution of the null (no null curve as extreme)."""
    return "p<0.001" if p <= 1.5 / (N_NULL + 1) else f"p={p:.2g}"


def quantile(null_sorted: np.ndarray, q: float) -> float:
    """The q-quantile of a sorted null statistic (the threshold of a level 1 - q test)."""
    return float(np.quantile(null_sorted[np.isfinite(null_sorted)], q))
