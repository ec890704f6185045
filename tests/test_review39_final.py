"""A review of session 39's diff: the sign advantage says when rewards leave its range (the TRL
and verl integrations pass none of their own), and the paired t interval of an accuracy
difference stays in [-1, 1] and says when few problems leave it wide."""

from __future__ import annotations

import json
import warnings

import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.core.advantages import compute_advantages

_load_commands()


def test_sign_warns_on_rewards_outside_its_range():
    with pytest.warns(RuntimeWarning, match=r"outside its reward_range \[0, 1\]"):
        out = compute_advantages("sign", [-1.0, -1.0, 1.0, 1.0], group_size=4)
    assert out.advantages.tolist() == [-3.0, -3.0, 1.0, 1.0]  # the values themselves unchanged
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        ok = compute_advantages("sign", [-1.0, 1.0], group_size=2, reward_range=(-1.0, 1.0))
        assert ok.advantages.tolist() == [-1.0, 1.0]
        compute_advantages("sign", [0.0, 1.0, 0.5, 1.0], group_size=2)  # inside (0, 1): silent


def test_paired_interval_of_two_problems_is_clipped_and_said(tmp_path):
    """The review's case: 2 problems printed "paired t 95% CI [-5.853, +6.853]" for a difference
    of accuracies, which lies in [-1, 1]."""
    from test_eval_review39 import _file, _record

    a = _file(tmp_path / "a.json", _record(["p1", "p2"], [8, 0]))
    b = _file(tmp_path / "b.json", _record(["p1", "p2"], [0, 0]))
    res = CliRunner().invoke(app, ["eval", "--from", str(a), "--baseline", str(b)])
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert "paired t 95% CI [-1.000, +1.000] (t interval clipped to [-1, 1])" in text
    assert "only 2 problems" in text
    res = CliRunner().invoke(app, ["eval", "--from", str(a), "--baseline", str(b), "--json"])
    cmp = json.loads(res.stdout)["comparison"]
    assert cmp["paired_ci"] == [-1.0, 1.0] and cmp["paired_ci_clipped"] is True
