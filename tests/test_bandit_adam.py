"""The Adam vs SGD-momentum refresh-interval sweep on the exact-reduction bandit (short version)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pgrpo.bandit.experiments.adam import (
    AdamBanditConfig,
    first_unstable_bracket,
    run_adam_bandit,
)
from pgrpo.bandit.experiments.base import single_thread


def small_config(**overrides) -> AdamBanditConfig:
    """A seconds-long version of the documented sweep."""
    base = AdamBanditConfig(
        sgd_settings=((0.2, 0.0),),
        sgd_k_max=14,
        adam_settings=((0.2, 0.0, 0.999),),
        adam_k_max=4,
        adam_k_tail=(30,),
        group_sizes=(4, 16),
        group_k=(1, 30),
        far_starts=(1.0,),
        far_beta2=(0.9,),
        far_steps=400,
        seeds=16,
    )
    return replace(base, **overrides)


def test_bracket_on_a_contiguous_and_a_skipping_grid():
    ks = list(range(1, 11))
    flags = [k >= 7 for k in ks]
    b = first_unstable_bracket(ks, flags)
    assert (b["lo"], b["hi"], b["resolution"]) == (7, 7, 1)
    assert b["statement"] == "first unstable K in [7, 7]"
    # today's docs' grid: ..., 36, 38: "38" means the first unstable K is 37 or 38
    b = first_unstable_bracket([30, 33, 36, 38, 42], [False, False, False, True, True])
    assert (b["lo"], b["hi"], b["resolution"]) == (37, 38, 2)
    b = first_unstable_bracket([1, 2, 3, 4], [False, True, False, True])
    assert b["inversions"] == [3] and "stable again at K = 3" in b["statement"]
    assert first_unstable_bracket([1, 2], [False, False])["statement"] == "none up to 2"


@pytest.fixture(scope="module")
def result():
    with single_thread():
        return run_adam_bandit(small_config())


def test_sgd_threshold_within_one_grid_step(result):
    (row,) = result.rows
    assert row["resolution"] == 1 and not row["inversions"]
    assert abs(row["measured_hi"] - row["predicted_K"]) <= 1


def test_adam_bounded_and_rms_as_the_closure_predicts(result):
    cells = result.series["adam"] + result.series["group"]
    assert any(c["K"] > 2 * c["K_lin"] for c in cells)  # far past the noise-only threshold
    for c in cells:
        final = c.get("long_rerun", c)
        assert not final["still_growing"], c
        assert 0.7 <= final["rms_ratio"] <= 1.4, c


def test_far_from_the_fixed_point_adam_moves_at_eta_per_step_whatever_g(result):
    rows = result.series["far_field"]
    assert {r["group_size"] for r in rows} == {4, 16}
    for r in rows:
        assert r["x0_over_s"] > 100  # kappa |x| >> sigma
        assert r["speed_over_eta_first_50"] == pytest.approx(1.0, abs=0.1)
        assert r["t_half"] == pytest.approx(r["t_half_constant_speed"], rel=0.15)
        assert r["t_half"] > 20 * r["noise_only_timescale"]  # not the near-field time scale


def test_adam_stiffness_moves_with_group_size(result):
    by_g = {c["group_size"]: c for c in result.series["group"] if c["K"] == 1}
    assert by_g[16]["noise_only_a"] > 2 * by_g[4]["noise_only_a"]  # less noise: a larger step
    assert by_g[16]["K_lin"] < by_g[4]["K_lin"]
