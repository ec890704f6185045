"""Exact finite-G expected force for binary rewards on the two-arm softmax bandit.

One logit z, success probability p = sigmoid(z). A group of G i.i.d. samples has c ~ Bin(G, p)
correct ones; the estimator turns the group's rewards into advantages A_i and the policy gradient
on z is (1/G) sum_i A_i d log pi(a_i)/dz with d log pi/dz = 1 - p (correct) and -p (wrong):

    F_G(p) = sum_c Bin(c; G, p) [(1 - p) S_+(c) - p S_-(c)] / G

S_+(c), S_-(c): the sums of the advantages of the correct and the wrong samples. The advantages
come from `pgrpo.core.advantages.compute_advantages` (any registered estimator, one group per
outcome), so this is exact for the estimator the trainer actually uses. Degenerate groups
(c = 0 or G) carry no force for centred estimators: that is the residual G-dependence of the
"G-invariant" mean trajectory (docs/dynamics.md, "The model").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import binom

_REFERENCE_G = 512  # numerical limit for estimators without a closed-form limit


@dataclass(frozen=True)
class FiniteGroupForce:
    """force: [P] expected force per unit lr; infinite: [P] its G -> inf limit; ratio: [P]."""

    p: np.ndarray
    group_size: int
    estimator: str
    force: np.ndarray
    infinite: np.ndarray
    ratio: np.ndarray
    metrics: dict[str, float] = field(default_factory=dict)


def outcome_sums(
    group_size: int, estimator: str | Callable[[np.ndarray], np.ndarray] = "grpo", **options: Any
) -> tuple[np.ndarray, np.ndarray]:
    """(S_+ [G+1], S_- [G+1]): advantage sums of the correct and wrong samples for c = 0..G.

    estimator: a registered advantage estimator name (options go to it) or a callable
    rewards [G] -> advantages [G].
    """
    G = int(group_size)
    if G < 1 or G != group_size:
        raise ValueError(f"group_size must be an integer >= 1, got {group_size!r}")
    s_plus, s_minus = np.zeros(G + 1), np.zeros(G + 1)
    for c in range(G + 1):
        rewards = np.r_[np.ones(c), np.zeros(G - c)]
        adv = _advantages(rewards, estimator, options)
        s_plus[c], s_minus[c] = adv[:c].sum(), adv[c:].sum()
    return s_plus, s_minus


def _advantages(rewards: np.ndarray, estimator: Any, options: dict[str, Any]) -> np.ndarray:
    if callable(estimator):
        return np.asarray(estimator(rewards), dtype=float)
    from pgrpo.core.advantages import compute_advantages

    G = rewards.size
    return np.asarray(
        compute_advantages(estimator, rewards, group_size=G, **options).advantages, dtype=float
    )


def finite_group_force(
    p: np.ndarray | float,
    group_size: int,
    estimator: str | Callable[[np.ndarray], np.ndarray] = "grpo",
    **options: Any,
) -> FiniteGroupForce:
    """Exact expected force F_G(p) ([P] for p: [P] in [0, 1]) and its ratio to G -> infinity.

    With `grpo` (std-normalised, Bessel std as in TRL) the ratio is 0.70 / 0.87 / 0.94 for
    G = 4 / 8 / 16 at p = 0.5 and 0.44 / 0.65 / 0.83 at p = 0.1.
    """
    p_arr = np.atleast_1d(np.asarray(p, dtype=float))
    if np.any(~np.isfinite(p_arr)) or np.any((p_arr < 0) | (p_arr > 1)):
        raise ValueError("p must be probabilities in [0, 1]")
    force = _force(p_arr, group_size, estimator, options)
    name = estimator if isinstance(estimator, str) else getattr(estimator, "__name__", "callable")
    limit = _closed_form_limit(estimator)
    if limit is not None and not options:
        inf = limit(p_arr)
    else:
        inf = _force(p_arr, _REFERENCE_G, estimator, options)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(inf != 0, force / np.where(inf != 0, inf, 1.0), np.nan)
    degenerate = binom.pmf(0, group_size, p_arr) + binom.pmf(group_size, group_size, p_arr)
    metrics = {"degenerate_fraction_mean": float(np.mean(degenerate))}
    return FiniteGroupForce(p_arr, int(group_size), name, force, inf, ratio, metrics)


def _closed_form_limit(estimator: Any) -> Callable[[np.ndarray], np.ndarray] | None:
    """The estimator's declared G -> infinity force (registry metadata), or None."""
    if not isinstance(estimator, str):
        return None
    from pgrpo.core.advantages import ADVANTAGE_ESTIMATORS

    return ADVANTAGE_ESTIMATORS.get(estimator).binary_force_limit


def _force(p: np.ndarray, G: int, estimator: Any, options: dict[str, Any]) -> np.ndarray:
    s_plus, s_minus = outcome_sums(G, estimator, **options)
    c = np.arange(G + 1)
    pmf = binom.pmf(c[None, :], G, p[:, None])  # [P, G+1]
    per_outcome = ((1.0 - p[:, None]) * s_plus[None, :] - p[:, None] * s_minus[None, :]) / G
    return (pmf * per_outcome).sum(axis=1)
