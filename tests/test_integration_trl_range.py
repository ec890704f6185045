"""TRL's `pgrpo_reward_range` (session 40): the bounds of one reward reach the sign advantage and
the all-pass / all-fail split, checked when the config is built. The tiny model, tokenizer and
trainer come from test_integration_trl."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch

pytest.importorskip("trl")
from test_integration_trl import G, _config, _train, odd_digit  # noqa: E402


def signed_odd_digit(completions, **kwargs):
    """A -1 / +1 reward (a wrong answer costs), TRL reward functions carry no range."""
    return [2.0 * r - 1.0 for r in odd_digit(completions)]


@pytest.mark.parametrize("given", ["[-1, 1]", [-1.0, 1.0], None])
def test_reward_range_reaches_sign_and_the_all_pass_all_fail_split(tmp_path, given):
    """Session 40: TRL's integration counted all-pass / all-fail groups at rewards 1 / 0 whatever
    the reward's scale (an all-wrong -1 group was in neither), and sign's range could only come
    from its options; `pgrpo_reward_range` now sets both (as task.reward_range does in pgrpo
    train), and without it sign warns that its rewards leave [0, 1]."""
    kw = {} if given is None else {"pgrpo_reward_range": given}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = _train(tmp_path, signed_odd_digit, pgrpo_advantage="sign", **kw)
    outside = [w for w in caught if "sign advantage: rewards from -1" in str(w.message)]
    assert bool(outside) == (given is None)
    state = json.loads((Path(trainer.args.output_dir) / "trainer_state.json").read_text())
    steps = [h for h in state["log_history"] if "degeneracy/all_pass" in h]
    for h, batch in zip(steps, trainer.generated, strict=True):
        r = torch.tensor(batch["rewards"]["signed_odd_digit"]).reshape(-1, G)
        if given is None:  # the 0/1 reading: a -1 group is not "all fail"
            assert h["degeneracy/all_fail"] == 0.0
            continue
        assert set(batch["advantages"].tolist()) <= {-1.0, 1.0}
        assert h["degeneracy/all_pass"] == pytest.approx(float((r == 1).all(1).double().mean()))
        assert h["degeneracy/all_fail"] == pytest.approx(float((r == -1).all(1).double().mean()))
    all_fail = sum(h["degeneracy/all_fail"] for h in steps)
    assert given is None or all_fail + sum(h["degeneracy/all_pass"] for h in steps) > 0


@pytest.mark.parametrize("bad", [[1, 1], "[0, nan]", "{1", [0, 1, 2], "lo-hi"])
def test_a_bad_reward_range_is_refused_when_the_config_is_built(tmp_path, bad):
    with pytest.raises(ValueError, match="pgrpo_reward_range"):
        _config(tmp_path, pgrpo_reward_range=bad)


def test_two_different_reward_ranges_are_refused(tmp_path):
    both = {"pgrpo_advantage": "sign", "pgrpo_reward_range": [-1, 1]}
    with pytest.raises(ValueError, match="give the range once"):
        _config(tmp_path, **both, pgrpo_advantage_options={"reward_range": [0, 1]})
    cfg = _config(tmp_path, **both, pgrpo_advantage_options={"reward_range": [-1, 1]})
    assert cfg.pgrpo_reward_range == [-1.0, 1.0]
