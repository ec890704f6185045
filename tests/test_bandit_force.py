"""Exact finite-G expected force: check values, Monte Carlo, and the registry estimators."""

from __future__ import annotations

import numpy as np
import pytest

from pgrpo.bandit.force import finite_group_force
from pgrpo.core.advantages import compute_advantages


@pytest.mark.parametrize("p,ratios", [(0.5, (0.70, 0.87, 0.94)), (0.1, (0.44, 0.65, 0.83))])
def test_grpo_force_ratio_check_values(p, ratios):
    got = [float(finite_group_force(p, G).ratio[0]) for G in (4, 8, 16)]
    np.testing.assert_allclose(got, ratios, atol=0.005)


def test_force_matches_monte_carlo_of_the_policy_gradient():
    rng = np.random.default_rng(0)
    p, G, groups = 0.3, 6, 20000
    r = (rng.random((groups, G)) < p).astype(float)
    adv = compute_advantages("grpo", r.ravel(), group_size=G).advantages.reshape(groups, G)
    score = np.where(r == 1.0, 1.0 - p, -p)  # d log pi / dz
    mc = (adv * score).mean(axis=1)
    exact = float(finite_group_force(p, G).force[0])
    assert mc.mean() == pytest.approx(exact, abs=4 * mc.std() / np.sqrt(groups))


def test_force_limits_and_estimators():
    p = np.array([0.1, 0.5, 0.9])
    big = finite_group_force(p, 256)
    np.testing.assert_allclose(big.ratio, 1.0, atol=0.02)
    # the sign advantage ignores the group, so it has no finite-G loss
    np.testing.assert_allclose(finite_group_force(p, 4, "sign").ratio, 1.0, atol=1e-12)
    # RLOO is unbiased for every G; mean-centring (Dr. GRPO) loses a factor (G - 1) / G
    np.testing.assert_allclose(finite_group_force(p, 4, "rloo").ratio, 1.0, atol=1e-12)
    np.testing.assert_allclose(finite_group_force(p, 4, "dr_grpo").ratio, 0.75, atol=1e-12)
    # a callable estimator: numerical G -> inf reference
    res = finite_group_force(0.5, 8, lambda r: r - r.mean())
    assert res.ratio[0] == pytest.approx(7 / 8, abs=0.01)


def test_degenerate_groups_and_errors():
    res = finite_group_force([0.0, 1.0], 8)
    np.testing.assert_array_equal(res.force, [0.0, 0.0])  # all-equal groups: no force
    assert res.metrics["degenerate_fraction_mean"] == 1.0
    with pytest.raises(ValueError, match="probabilities"):
        finite_group_force(1.5, 8)
    with pytest.raises(ValueError, match="group_size"):
        finite_group_force(0.5, 0)
    with pytest.raises(KeyError, match="valid names"):
        finite_group_force(0.5, 4, "nope")


def test_declared_force_limits_match_a_large_group():
    """Each estimator's declared closed-form G -> infinity force (registry metadata) agrees with
    the exact finite-G force at G = 512; estimators without one fall back to that numerically."""
    from pgrpo.bandit.force import _force
    from pgrpo.core.advantages import ADVANTAGE_ESTIMATORS

    p = np.array([0.1, 0.3, 0.5, 0.8])
    declared = [n for n in ADVANTAGE_ESTIMATORS if ADVANTAGE_ESTIMATORS.get(n).binary_force_limit]
    assert {"grpo", "dr_grpo", "rloo", "batch_std", "sign"} <= set(declared)
    for name in declared:
        limit = ADVANTAGE_ESTIMATORS.get(name).binary_force_limit(p)
        np.testing.assert_allclose(_force(p, 512, name, {}), limit, rtol=2e-2, err_msg=name)
        np.testing.assert_allclose(finite_group_force(p, 8, name).infinite, limit, rtol=0)
