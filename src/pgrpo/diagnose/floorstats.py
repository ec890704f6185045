"""A run stuck at its floor: how unlikely so long a stay is at the run's own rate of success
(`stuck_p`, which the progress verdict's `collapsed` and live collapse read), and the exact
hypergeometric it needs for means of 0/1 rewards (`hypergeom_none`)."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr

from pgrpo.diagnose import nullmodel as nm


def hypergeom_none(total: int, successes: int, draws: int) -> float:
    """P(no success in `draws` drawn without replacement from `total` holding `successes`):
    C(total - successes, draws) / C(total, draws) = prod_{k < m} (1 - a / (total - k)) with
    (m, a) the smaller and the larger of successes and draws (the two are interchangeable), as
    a sum of log1p terms: within ~1e-14 of the exact ratio also at totals of millions (a
    log-gamma difference lost 6e-9 there, scipy.stats.hypergeom's pmf(0) up to 2e-9), without
    importing scipy.stats."""
    if draws > total - successes:
        return 0.0
    m, a = sorted((int(successes), int(draws)))
    if m == 0:
        return 1.0
    k = np.arange(m, dtype=float)
    return float(np.exp(np.sum(np.log1p(-a / (total - k)))))


def stuck_p(x: np.ndarray, w: int, n_rollouts: float | None) -> float:
    """p-value of a last window of w steps stuck at the run's floor, were the run's rate the same
    throughout. x: [n], on the 0/1 scale of the reward's range when known (`nm.unit_scale`).
    For means of N 0/1 rewards (N stated or read off the values) with the
    floor at 0: the chance that none of the run's K successes falls in the window's N w of its
    N n rollouts (hypergeometric, exact under i.i.d. steps); on any other scale: the mean before
    the window over the floor, in units of its standard error (one-sided normal)."""
    n_eff = nm.rollouts(x, n_rollouts)[0]
    floor = float(x.min())
    if n_eff and nm.is_binary_mean(x, n_eff) and floor == 0.0:
        big = int(round(n_eff))
        successes = int(round(float(x.sum()) * big))
        return hypergeom_none(big * x.size, successes, big * w)
    head = x[:-w]
    sd = float(nm.noise_sd(x[None, :])[0])
    if head.size == 0 or sd <= 0:
        return 1.0
    z = (float(head.mean()) - floor) / (sd * math.sqrt(1.0 / head.size + 1.0 / w))
    return float(ndtr(-z))  # the normal upper tail, as scipy.stats.norm.sf computes it
