"""`loss.dual_clip` through `pgrpo train` (session 41): the option reaches the clipped surrogate
(`LossConfig` fields reach a loss by its signature), its share of dual-clipped tokens is logged
as `clip_ratio/dual_mean` beside TRL's clip fractions, and a bad value stops the run in one line
before anything is written. The loss itself: tests/test_core_losses.py; verl: the verl tests."""

from __future__ import annotations

import math

import pytest
from cli_checks import one_line_error
from conftest import TINY_CLI_ARGS
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.train.config import load_config
from pgrpo.train.log import read_metrics

_load_commands()
runner = CliRunner()


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("PGRPO_CACHE", str(tmp_path_factory.getbasetemp() / "pgrpo-cache"))


def test_pgrpo_train_refuses_a_bad_dual_clip_in_one_line(tmp_path):
    args = ["train", *TINY_CLI_ARGS, "loss.dual_clip=0.5", f"run.output_dir={tmp_path}"]
    line = one_line_error(runner.invoke(app, args), "loss.dual_clip=0.5 is invalid", "> 1")
    assert "None" in line
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


@pytest.mark.parametrize("option", ["loss.dual_clip=3", "loss.epsilon_low=0.1"])
def test_an_option_the_chosen_policy_loss_does_not_read_is_refused(tmp_path, option):
    """'reinforce' has no ratio: a clip option beside it used to be ignored in silence."""
    args = ["train", *TINY_CLI_ARGS, "loss.policy_loss=reinforce", option,
            f"run.output_dir={tmp_path}"]  # fmt: skip
    name = option.split("=")[0]
    one_line_error(runner.invoke(app, args), f"{name}=", "no effect with", "'clipped'")
    assert list(tmp_path.iterdir()) == []


def test_pgrpo_train_with_dual_clip_logs_its_fraction(tmp_path):
    """K = 2 (ratios away from 1 on the second step) with the dual clip on: every step logs a
    dual-clipped fraction in [0, 1]; config.yaml keeps the option, so a resume trains with it.
    Without the option the column is absent."""
    common = [*TINY_CLI_ARGS, "steps=2", "refresh_interval=2", "num_minibatches=2",
              "forecast_every=0", f"run.output_dir={tmp_path}"]  # fmt: skip
    res = runner.invoke(app, ["train", *common, "loss.dual_clip=3", "run.name=dual", "--json"])
    assert res.exit_code == 0, res.output
    rows = read_metrics(tmp_path / "dual")
    assert len(rows) == 2
    for row in rows:
        assert 0.0 <= row["clip_ratio/dual_mean"] <= 1.0 and math.isfinite(row["loss"])
    assert load_config(tmp_path / "dual" / "config.yaml").loss.dual_clip == 3.0
    res = runner.invoke(app, ["train", *common, "run.name=plain", "--json"])
    assert res.exit_code == 0, res.output
    assert all("clip_ratio/dual_mean" not in row for row in read_metrics(tmp_path / "plain"))
