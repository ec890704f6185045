"""The lr-schedule recursion sampled at a long log's bin means, jumped from one sampled time to
the next: `schedule_response(ks, schedule, beta1, t)` is `at_times(simulate_recursion(...), t)`
for one row per k, exact (the per-step recursion) on short or densely sampled runs and binned
(the lr held at its interval mean, each interval one 2 x 2 matrix power) past BINNED_MIN_STEPS
optimizer steps with BINNED_MIN_SPACING or more steps per sampled time (K = 1); within
BINNED_TOLERANCE of the per-step recursion (`tests/test_recursion_binned.py`). Used by the
`rom_schedule` and `rom_fixed` fits (`curves`, `constrained`) of a thinned log (`logfit`).
"""

from __future__ import annotations

import numpy as np

from pgrpo.dynamics.recursion import _check_k, at_times, simulate_recursion

# A fit of a long log samples the response at a few thousand bin means of a run of ~10^5 steps or
# more; past this many steps with 8 or more steps per sampled time, `schedule_response` runs the
# recursion interval by interval (see there) instead of step by step.
BINNED_MIN_STEPS = 20_000
BINNED_MIN_SPACING = 8


def schedule_response(
    ks: np.ndarray,
    schedule: np.ndarray,
    beta1: np.ndarray | float,
    t: np.ndarray,
    refresh_interval: int = 1,
) -> np.ndarray:
    """x at times t for x0 = 1, v0 = 0 and a_n = k schedule_n, one row per k: ks [P],
    schedule [n_steps], beta1 scalar or [P], t [n] (optimizer steps, may be fractional,
    within [0, n_steps]) -> [P, n]; linear interpolation between integer steps.

    Exact path: `at_times(simulate_recursion(ks[:, None] * schedule, beta1, n_steps), t)`.
    Binned path (K = 1, n_steps >= BINNED_MIN_STEPS and >= BINNED_MIN_SPACING steps per sampled
    time): the grid is cut at the sampled integer times q_i = floor(t_i); on each interval
    [q_i, q_{i+1}) a_n is held at its interval mean and the recursion jumps the interval with the
    L_i-th power of its 2 x 2 step matrix (exact for that piecewise-constant schedule); where
    the schedule moves fast for the row's k, intervals are cut finer (`_binned_response`). Cost
    O(P n log L) instead of O(P n_steps). `tests/test_recursion_binned.py` bounds the difference
    from the exact path at BINNED_TOLERANCE on 200,000-step warm-up + cosine schedules.
    """
    ks = np.atleast_1d(np.asarray(ks, dtype=float))
    schedule = np.asarray(schedule, dtype=float)
    t = np.asarray(t, dtype=float)
    n_steps = schedule.size
    K = _check_k(refresh_interval)
    if not binned_path(t, n_steps, K):
        a = ks[:, None] * schedule[None, :]
        return at_times(simulate_recursion(a, beta1, n_steps, refresh_interval=K), t)
    q = _sorted_unique(np.clip(np.floor(t), 0, n_steps).astype(int))
    return _binned_response(ks, schedule, np.asarray(beta1, dtype=float), t, q)


def _sorted_unique(x: np.ndarray) -> np.ndarray:
    """np.unique of an int array, O(n) when it is already sorted (a fit's times are)."""
    if x.size > 1 and not np.all(x[1:] >= x[:-1]):
        x = np.sort(x, kind="stable")
    return x[np.r_[True, x[1:] != x[:-1]]] if x.size else x


def binned_path(t: np.ndarray, n_steps: int, refresh_interval: int = 1) -> bool:
    """Whether `schedule_response` takes its binned path for times t: [n] on n_steps steps."""
    return (
        refresh_interval == 1
        and n_steps >= BINNED_MIN_STEPS
        and t.size * BINNED_MIN_SPACING <= n_steps
    )


BINNED_SPLIT = 1e-5
"""The largest L^2 k d (L steps held at one a, d the schedule's change per step) of an interval
of the binned path (`_binned_group`)."""
BINNED_TOLERANCE = 1e-5
"""Largest |x_binned - x_exact| allowed on the tests' 200,000-step schedules (|x_0| = 1)."""


def _binned_response(
    ks: np.ndarray, schedule: np.ndarray, beta1: np.ndarray, t: np.ndarray, q: np.ndarray
) -> np.ndarray:
    """The binned path of `schedule_response`: q [m] sorted unique sampled integer times.

    Holding a_n at its mean over L steps of a ramp of slope d shifts x by ~ L^2 d / (1 - beta)
    x g = L^2 d k (the momentum integrates the force): an interval is cut into
    ceil(L sqrt(k d / BINNED_SPLIT)) equal pieces. Rows are grouped by how finely their k needs
    cutting (within a factor 2), so that a small k is not cut as finely as a large one; the last
    few results are kept (a fit asks for the same rows more than once)."""
    beta = np.broadcast_to(np.asarray(beta1, dtype=float), ks.shape)
    csum, step_change = _schedule_sums(schedule)
    key = (ks.tobytes(), beta.tobytes(), t.tobytes(), id(csum))
    hit = _RESULTS.get(key)
    if hit is not None and hit[0] is csum:  # the entry keeps its csum alive: ids stay unique
        return hit[1].copy()
    base, length, slope = _intervals(csum, step_change, q)
    need = np.sqrt(np.abs(ks)[:, None] * slope[None, :] / BINNED_SPLIT) * length  # [P, m']
    total = np.clip(np.ceil(need), 1, length).sum(axis=1)  # pieces each row would need
    level = np.floor(np.log2(np.maximum(total / length.size, 1.0)))
    out = np.empty((ks.size, t.size))
    for lv in np.unique(level):
        rows = level == lv
        out[rows] = _binned_group(ks[rows], csum, beta[rows], t, base, slope)
    if ks.size <= 64:  # small results only: the cache stays under ~30 MB
        _RESULTS[key] = (csum, out.copy())
        while len(_RESULTS) > 16:
            _RESULTS.pop(next(iter(_RESULTS)))
    return out


_RESULTS: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}


def _intervals(
    csum: np.ndarray, step_change: np.ndarray, q: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(base [m'+1]: 0, the sampled times q, n_steps; length [m']; slope [m'], the schedule's
    largest change per step within each interval) of the last few (schedule, q) pairs."""
    key = (id(csum), q.tobytes())
    hit = _PLANS.get(key)
    if hit is not None and hit[0] is csum:
        return hit[1]
    n_steps = csum.size - 1
    base = q
    if q[0] > 0:
        base = np.r_[0, base]
    if q[-1] < n_steps:
        base = np.r_[base, n_steps]
    plan = (base, np.diff(base), np.maximum.reduceat(step_change, base[:-1]))
    _PLANS[key] = (csum, plan)
    while len(_PLANS) > 4:
        _PLANS.pop(next(iter(_PLANS)))
    return plan


_PLANS: dict[tuple, tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}


def _binned_group(
    ks: np.ndarray,
    csum: np.ndarray,
    beta: np.ndarray,
    t: np.ndarray,
    base: np.ndarray,
    slope: np.ndarray,
) -> np.ndarray:
    """One group of rows (ks, beta: [P]) of `_binned_response` on the intervals between the
    sampled times (base [m'+1], slope [m'] the schedule's largest change per step in each).

    The intervals are cut (see there) only while the response is alive (|x| > 1e-12 on a
    first, uncut pass; past that its error is below the same 1e-12)."""
    n_steps = int(base[-1])
    length = np.diff(base)
    top = float(np.max(np.abs(ks)))
    pieces = np.clip(np.ceil(length * np.sqrt(top * slope / BINNED_SPLIT)), 1, length)
    pieces = pieces.astype(int)
    if int(pieces.sum()) > 2 * length.size:  # a large k: cut only while x is alive
        xs, _ = _interval_states(ks, csum, beta, base)
        alive = np.flatnonzero(np.max(np.abs(xs), axis=0) > 1e-12)
        stop = int(alive[-1]) + 2 if alive.size else 0
        pieces[stop:] = 1
    edges = _sorted_unique(np.r_[base, _sub_edges(base, pieces)]) if np.any(pieces > 1) else base
    xs, x_next = _interval_states(ks, csum, beta, edges)
    pos = np.searchsorted(edges, np.clip(np.floor(t), 0, n_steps))  # t's interval (its start)
    frac = t - edges[pos]
    x_at = xs[:, pos]
    x_up = x_next[:, np.minimum(pos, edges.size - 1)]
    return np.where(frac == 0.0, x_at, x_at * (1.0 - frac) + x_up * frac)


def _sub_edges(base: np.ndarray, pieces: np.ndarray) -> np.ndarray:
    """The inner cuts of each interval [base[i], base[i + 1]) split into pieces[i] equal parts."""
    split = np.flatnonzero(pieces > 1)
    counts = pieces[split] - 1
    which = np.repeat(split, counts)
    j = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts) + 1
    start, length = base[which], base[which + 1] - base[which]
    return start + (j * length) // pieces[which]


def _schedule_sums(schedule: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cumsum of the schedule from 0: [n_steps + 1], |change| to the next step: [n_steps]) of the
    last few schedules (a fit calls `schedule_response` ~100 times with one schedule; a cached
    schedule is recognised by its size and sum, then compared element by element)."""
    same = _SUMS_OF.get(id(schedule))  # a read-only schedule (FitContext.schedule's): by identity
    if same is not None and same[0] is schedule:
        return same[1], same[2]
    key = (schedule.size, float(np.sum(schedule)))
    hit = _SUMS.get(key)
    if hit is not None and np.array_equal(hit[0], schedule):
        _remember(schedule, hit[1], hit[2])
        return hit[1], hit[2]
    csum = np.concatenate(([0.0], np.cumsum(schedule)))
    change = np.r_[np.abs(np.diff(schedule)), 0.0]
    _SUMS[key] = (schedule.copy(), csum, change)
    while len(_SUMS) > 4:
        _SUMS.pop(next(iter(_SUMS)))
    _remember(schedule, csum, change)
    return csum, change


def _remember(schedule: np.ndarray, csum: np.ndarray, change: np.ndarray) -> None:
    """Key a read-only schedule's sums by its identity too (the entry keeps it alive)."""
    if not schedule.flags.writeable:
        _SUMS_OF[id(schedule)] = (schedule, csum, change)
        while len(_SUMS_OF) > 4:
            _SUMS_OF.pop(next(iter(_SUMS_OF)))


_SUMS: dict[tuple[int, float], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
_SUMS_OF: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _interval_states(
    ks: np.ndarray, csum: np.ndarray, beta: np.ndarray, edges: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """x at each edge ([P, m'+1]: edges [m'+1] from 0 to n_steps) and x one step after each
    edge ([P, m'+1]; at n_steps: x itself), a held at its mean over each interval
    [edges[i], edges[i + 1]); csum: the schedule's cumulative sum from 0 ([n_steps + 1]).
    Intervals are processed in blocks of ~_BLOCK_ELEMENTS (rows x intervals; memory stays small)."""
    length = np.diff(edges)  # [m'] >= 1
    mean_s = (csum[edges[1:]] - csum[edges[:-1]]) / length  # [m']
    b = beta[:, None]
    m = length.size
    xs, x_next = np.empty((ks.size, m + 1)), np.empty((ks.size, m + 1))
    x, v = np.ones(ks.size), np.zeros(ks.size)
    width = max(_MIN_WIDTH, _BLOCK_ELEMENTS // ks.size)
    for lo in range(0, m, width):
        hi = min(lo + width, m)
        ga = (1.0 - b) * ks[:, None] * mean_s[None, lo:hi]  # g a on each interval: [P, w]
        bx, bv, x, v = _scan_states(_step_power(ga, b, length[lo:hi]), x, v)
        xs[:, lo:hi] = bx
        x_next[:, lo:hi] = (1.0 - ga) * bx + b * bv  # one step of the interval's matrix
    xs[:, m] = x_next[:, m] = x
    return xs, x_next


# rows x intervals per block: arrays of 128 KiB stay in cache (measured 2026-12-02 on the
# 200,000-step cosine fit's calls: 0.58 s with 2^17 and 1,024 intervals at least, 0.49 s with
# 2^14 and 128)
_BLOCK_ELEMENTS = 1 << 14
_MIN_WIDTH = 128


def _step_power(ga: np.ndarray, b: np.ndarray, power: np.ndarray) -> tuple[np.ndarray, ...]:
    """The power-th power of the step matrix S = [[1 - ga, b], [-ga, b]] on (x, v), elementwise:
    ga [P, w], b [P, 1], power [w] ints >= 1 -> (m00, m01, m10, m11) each [P, w].

    S has trace tau = 1 - ga + b and determinant b, so (Cayley-Hamilton) S^2 = tau S - b I and
    every power is S^n = u S + w I: binary exponentiation from the top bit on the pair (u, w)
    (squaring (u, w) -> (u^2 tau + 2 u w, w^2 - u^2 b), times S (u, w) -> (u tau + w, -u b)),
    ~12 array operations per bit instead of two 2 x 2 matrix products and four selections."""
    tau = 1.0 - ga + b
    bits = int(power.max()).bit_length()
    u, w = np.ones_like(ga), np.zeros_like(ga)  # S^1: every power >= 1 has the top bit set
    top = (power >> (bits - 1)) & 1  # [w]: powers with fewer bits start at the identity
    if not top.all():
        u, w = np.where(top == 1, u, 0.0), np.where(top == 1, w, 1.0)
    for bit in range(bits - 2, -1, -1):
        uu = u * u
        u, w = uu * tau + 2.0 * u * w, w * w - uu * b  # squared
        use = ((power >> bit) & 1).astype(bool)
        if use.any():
            up, wp = u * tau + w, -u * b  # times S
            if use.all():
                u, w = up, wp
            else:
                u, w = np.where(use, up, u), np.where(use, wp, w)
    ub = u * b
    return u * (1.0 - ga) + w, ub, -u * ga, ub + w


def _matmul(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    return (
        a[0] * b[0] + a[1] * b[2],
        a[0] * b[1] + a[1] * b[3],
        a[2] * b[0] + a[3] * b[2],
        a[2] * b[1] + a[3] * b[3],
    )


def _scan_states(
    power: tuple[np.ndarray, ...], x: np.ndarray, v: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """States (x, v) at each interval start from (x, v) ([P] each), applying the interval
    powers ([P, w] each) in turn -> (x [P, w], v [P, w], x after the last, v after the last).

    Up to _SCAN_ROWS rows: prefix products of the interval maps in log2(w) vectorised rounds
    (Hillis-Steele); more rows: one vectorised step per interval (the maps' columns taken as a
    list of [P] rows: list indexing, no array indexing, in the loop)."""
    rows, m = power[0].shape
    if rows <= _SCAN_ROWS:
        q = _prefix_products(power)  # q[:, i] = M_i ... M_0
        x_after = q[0] * x[:, None] + q[1] * v[:, None]
        v_after = q[2] * x[:, None] + q[3] * v[:, None]
        xs = np.concatenate((x[:, None], x_after[:, :-1]), axis=1)
        vs = np.concatenate((v[:, None], v_after[:, :-1]), axis=1)
        return xs, vs, x_after[:, -1], v_after[:, -1]
    xs, vs = [], []
    m00, m01, m10, m11 = (list(np.ascontiguousarray(c.T)) for c in power)  # [w] of [P]
    for i in range(m):
        xs.append(x)
        vs.append(v)
        x, v = m00[i] * x + m01[i] * v, m10[i] * x + m11[i] * v
    return np.stack(xs, axis=1), np.stack(vs, axis=1), x, v


# measured 2026-12-02, 4,158 intervals in blocks of _BLOCK_ELEMENTS: prefix products against the
# loop 0.7 / 12 ms (1 row), 7.2 / 12.7 (16 rows), 14.3 / 13.1 (24 rows)
_SCAN_ROWS = 20


def _prefix_products(m: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Inclusive prefix products along the last axis, later maps on the left: [P, w] each ->
    q[:, i] = m[:, i] @ m[:, i - 1] @ ... @ m[:, 0]."""
    q = tuple(np.array(c, dtype=float) for c in m)
    d = 1
    while d < q[0].shape[1]:
        later = tuple(c[:, d:] for c in q)
        earlier = tuple(c[:, :-d] for c in q)
        prod = _matmul(later, earlier)
        for c, new in zip(q, prod, strict=True):
            c[:, d:] = new
        d *= 2
    return q
