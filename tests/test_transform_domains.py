"""Session 40: a transform's option values are checked like an estimator's, and dual_anchor says
when rewards leave the unit interval its absolute anchor reads them on.

Before: `prospect` took lambda_neg=-2 (losses rewarded), beta=0 (every advantage 0) and
exponent=-1 silently, in `compute_advantages`, `pgrpo train` and TRL's config; dual_anchor trained
on rewards of 0..10 against a goal of 0.5 with sigma_goal 1 / (2 sqrt C) without a word.
Each test below failed on the code before (ff. d8f6a1e).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from cli_checks import one_line_error
from conftest import TINY_CLI_ARGS
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pgrpo import compute_advantages
from pgrpo.cli import _load_commands, app
from pgrpo.core import domains as dom
from pgrpo.core.advantages import ADVANTAGE_TRANSFORMS, prospect
from pgrpo.train.config import GRPOConfig

_load_commands()
runner = CliRunner()
R = np.array([0.0, 1.0, 0.5, 1.0, 0.0, 0.0, 1.0, 0.25])

BAD = [
    ({"lambda_neg": -2.0}, "lambda_neg must be a finite number > 0"),
    ({"lambda_pos": 0}, "lambda_pos must be a finite number > 0"),
    ({"beta": 0.0}, "beta must be a finite number > 0"),
    ({"beta": math.nan}, "beta must be a finite number > 0"),
    ({"exponent": -1.0}, "exponent must be a finite number > 0"),
    ({"lambda_pos": True}, "lambda_pos must be a finite number > 0"),
    ({"form": "exp"}, "form must be 'tanh' or 'power'"),
]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("PGRPO_CACHE", str(tmp_path_factory.getbasetemp() / "pgrpo-cache"))


@pytest.mark.parametrize(("options", "needle"), BAD)
@pytest.mark.parametrize("estimator", ["grpo", "dual_anchor"])
def test_prospect_refuses_values_outside_its_domain(estimator, options, needle):
    extra = {"num_constraints": 2} if estimator == "dual_anchor" else {}
    transform = "prospect" if estimator == "grpo" else "default"
    with pytest.raises(ValueError, match="advantage transform 'prospect': ") as info:
        compute_advantages(
            estimator, R, group_size=4, transform=transform, transform_options=options, **extra
        )
    assert needle in str(info.value) and "got " in str(info.value)
    with pytest.raises(ValueError, match="grpo.transform_options=.* is invalid: "):
        GRPOConfig(advantage=estimator, transform=transform, transform_options=options)


def test_pgrpo_train_refuses_a_bad_transform_value_in_one_line(tmp_path):
    bad = ["grpo.transform=prospect", "grpo.transform_options.lambda_neg=-2"]
    args = ["train", *TINY_CLI_ARGS, *bad, "steps=1", f"run.output_dir={tmp_path}"]
    line = one_line_error(runner.invoke(app, args), "lambda_neg must be a finite number > 0")
    assert "grpo.transform_options" in line
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


def test_trl_config_refuses_bad_option_values_before_any_model(tmp_path):
    trl = pytest.importorskip("pgrpo.integrations.trl")
    common = {"output_dir": str(tmp_path), "report_to": [], "use_cpu": True}
    with pytest.raises(ValueError, match="lambda_neg must be a finite number > 0"):
        trl.PgrpoGRPOConfig(
            **common, pgrpo_transform="prospect", pgrpo_transform_options={"lambda_neg": -2.0}
        )
    with pytest.raises(ValueError, match="eps must be a finite number >= 0"):
        trl.PgrpoGRPOConfig(**common, pgrpo_advantage_options={"eps": -1e-4})


@settings(max_examples=60, deadline=None)
@given(
    st.floats(0.01, 10.0),
    st.floats(0.01, 10.0),
    st.floats(0.01, 5.0),
    st.sampled_from(["tanh", "power"]),
    st.floats(0.05, 2.0),
)
def test_values_inside_the_domain_pass_and_keep_the_sign(lp, ln, beta, form, exponent):
    """Inside the domain nothing is refused and shaping keeps each advantage's sign (what a
    positive scale guarantees and a negative one broke)."""
    options = {"lambda_pos": lp, "lambda_neg": ln, "beta": beta, "form": form, "exponent": exponent}
    dom.check_values("t", dom.declared(prospect), options)
    v = torch.linspace(-3.0, 3.0, 13, dtype=torch.float64)
    assert torch.equal(torch.sign(prospect(v, **options)), torch.sign(v))


def test_a_users_own_transform_without_domains_is_checked_by_keyword_only():
    def clip(values, *, at=1.0):
        return values.clamp(-at, at)

    assert dom.declared(clip) == {}
    out = compute_advantages("grpo", R, group_size=4, transform=clip, transform_options={"at": -1})
    assert np.all(np.isfinite(out.advantages))  # a value of its own is the user's to check
    assert dom.declared(ADVANTAGE_TRANSFORMS.get("prospect"))  # the built-in one declares them


def test_dual_anchor_warns_when_rewards_leave_the_unit_interval_and_not_inside_it():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compute_advantages("dual_anchor", R, group_size=4, num_constraints=3)  # in [0, 1]: quiet
        compute_advantages(  # a masked NaN is not a reward outside the range
            "dual_anchor", np.r_[R[:7], math.nan], group_size=4, num_constraints=3, nan="mask"
        )
    with pytest.warns(RuntimeWarning, match=r"dual_anchor: rewards from 0 to 10 lie outside") as w:
        compute_advantages("dual_anchor", R * 10, group_size=4, num_constraints=3)
    assert "share of the C constraints met" in str(w[0].message)
    assert w[0].filename == __file__  # points at the caller's line, not pgrpo's


def test_the_nan_reward_error_survives_pickling_with_its_setting():
    """Ray returns a verl worker's exception pickled: NonFiniteRewards(count, positions)
    raised TypeError on unpickling, so the verl wording could not reach the user."""
    import pickle

    from pgrpo.core.rewardinput import NonFiniteRewards

    err = NonFiniteRewards(2, [0, 3]).with_setting("set +algorithm.pgrpo.nan=mask")
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err) and back.positions == [0, 3]
