"""The verl adapter's option handling without verl installed: defaults and switches come from
registry metadata and signatures, not from names (the full adapter: test_integration_verl.py)."""

from __future__ import annotations

import pytest
import torch

from pgrpo.core.advantages import compute_advantages
from pgrpo.core.losses import POLICY_LOSSES
from pgrpo.integrations import verl as pv

REWARDS = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0])
MASK = torch.ones(8, 3)


def _outcome(name: str, config=None) -> torch.Tensor:
    token_rewards = torch.zeros(8, 3)
    token_rewards[:, -1] = REWARDS
    adv, _ = pv.outcome_advantages(name, token_rewards, MASK, [0] * 4 + [1] * 4, config)
    return adv[:, 0]


@pytest.mark.parametrize("name", ["grpo", "batch_std", "dual_anchor"])
def test_verl_eps_for_estimators_that_take_eps(name):
    opts = {"num_constraints": 1} if name == "dual_anchor" else {}
    config = {"pgrpo": {"options": opts}} if opts else None
    want = compute_advantages(name, REWARDS, group_size=4, eps=1e-6, **opts).advantages
    torch.testing.assert_close(_outcome(name, config), want.float())


def test_no_eps_for_estimators_without_it():
    want = compute_advantages("rloo", REWARDS, group_size=4).advantages
    torch.testing.assert_close(_outcome("rloo"), want.float())


def test_norm_adv_by_std_switches_to_the_declared_unscaled_variant():
    want = compute_advantages("dr_grpo", REWARDS, group_size=4).advantages
    got = _outcome("grpo", {"norm_adv_by_std_in_grpo": False})
    torch.testing.assert_close(got, want.float())
    # an estimator without a declared variant ignores the switch
    rloo = compute_advantages("rloo", REWARDS, group_size=4).advantages
    torch.testing.assert_close(_outcome("rloo", {"norm_adv_by_std_in_grpo": False}), rloo.float())


def test_clip_ranges_reach_only_losses_that_take_them():
    config = {"clip_ratio": 0.2, "clip_ratio_high": 0.28}
    clipped = pv._loss_kwargs(POLICY_LOSSES.get("clipped"), config)
    # and verl's log-ratio clamp (vanilla's +-20: one extreme token made the loss inf; session 40)
    # and its dual clip at clip_ratio_c, default 3 (session 41)
    want = {"epsilon_low": 0.2, "epsilon_high": 0.28, "max_log_ratio": 20.0, "dual_clip": 3.0}
    assert clipped == want
    assert pv._loss_kwargs(POLICY_LOSSES.get("reinforce"), config) == {}
    with_c = pv._loss_kwargs(POLICY_LOSSES.get("clipped"), {**config, "clip_ratio_c": 5})
    assert with_c == {**want, "dual_clip": 5.0}


@pytest.mark.parametrize("bad", [1.0, 0.5, float("nan")])
def test_a_bad_clip_ratio_c_is_refused_in_verl_terms(bad):
    """verl's vanilla asserts clip_ratio_c > 1; pgrpo_clipped refuses it naming verl's key."""
    with pytest.raises(ValueError, match=r"actor_rollout_ref\.actor\.clip_ratio_c=.*> 1"):
        pv._loss_kwargs(POLICY_LOSSES.get("clipped"), {"clip_ratio_c": bad})
