"""The report's degeneracy panel and the verdict read one decision (`starvation.iid_prediction`)
of whether the reward is a mean of 0/1 rewards, and the panel uses the settings the page lists
(review, 2026-12-06, finding 7)."""

from __future__ import annotations

import json

import numpy as np
import pytest

STEPS = np.arange(1, 121)


def _report(tmp_path, name: str, reward: np.ndarray, *options: str) -> dict:
    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()
    log = tmp_path / f"{name}.csv"
    rows = "".join(f"{s},{r!r}\n" for s, r in zip(STEPS, reward.tolist(), strict=True))
    log.write_text("step,reward\n" + rows)
    res = CliRunner().invoke(app, ["report", str(log), "--json", *options])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output[res.output.index("{") :])
    doc["page"] = (tmp_path / f"report-{name}" / "report.html").read_text()
    return doc


def _degeneracy(doc: dict) -> dict:
    return next(m for m in doc["modes"] if m["name"] == "advantage_degeneracy")


def _rise(rng: np.random.Generator) -> np.ndarray:
    return 0.25 + 0.7 * (1 - np.exp(-STEPS / 20.0)) + rng.normal(0, 0.01, STEPS.size)


def test_no_iid_plot_for_a_reward_the_verdict_does_not_read_as_a_mean_of_0_1(tmp_path):
    """h15a_ys_verl (3-decimal reward, G = 5, B = 1024, --reward-range 0,1): the page drew the
    i.i.d. prediction (85-90% of groups all-equal) beside "not enough evidence to judge
    advantage_degeneracy ... not known to be a mean of 0/1 rewards". At N = 5,120 a 3-decimal
    value cannot show it is a multiple of 1/N; the verdict's rule holds and the panel now
    follows it, naming why."""
    reward = np.round(np.clip(_rise(np.random.default_rng(0)), 0, 1), 3)
    opts = ("--group-size", "5", "--batch-prompts", "1024", "--reward-range", "0,1")
    doc = _report(tmp_path, "rounded", reward, *opts)
    mode = _degeneracy(doc)
    assert mode["confidence"] == 0.0 and "not known to be a mean" in mode["evidence"]["reason"]
    assert "degeneracy" not in doc["pngs"]
    why = doc["missing"]["degeneracy"]
    assert "not known to be a mean of N = 5120 0/1 rewards" in why
    assert "logged to steps of 0.001" in why and "no group_size" not in why
    assert "Advantage degeneracy vs i.i.d. prediction" not in doc["page"]


def test_the_iid_plot_is_drawn_where_the_verdict_reads_it(tmp_path):
    """A mean of N = 40 0/1 rewards (G = 5, B = 8): the verdict judges from the i.i.d. bound
    alone and the panel draws that bound."""
    rng = np.random.default_rng(1)
    p = np.clip(_rise(rng), 0, 1)
    reward = rng.binomial(40, p) / 40
    doc = _report(tmp_path, "binary", reward, "--group-size", "5", "--batch-prompts", "8")
    assert "iid_prediction" in _degeneracy(doc)["evidence"]
    assert "degeneracy" in doc["pngs"] and "degeneracy" not in doc["missing"]


def test_without_batch_prompts_the_iid_bound_is_not_drawn_alone(tmp_path):
    """G known, N unknown: the verdict cannot tell a mean of 0/1 rewards from a [0, 1] score and
    asks for batch_prompts; the page says the same instead of drawing the bound."""
    rng = np.random.default_rng(2)
    reward = rng.binomial(40, np.clip(_rise(rng), 0, 1)) / 40
    doc = _report(tmp_path, "no_b", reward, "--group-size", "5")
    mode = _degeneracy(doc)
    assert mode["confidence"] == 0.0 and any("batch_prompts" in m for m in mode["missing"])
    assert "degeneracy" not in doc["pngs"]
    assert "no batch_prompts" in doc["missing"]["degeneracy"]


@pytest.mark.parametrize(
    ("options", "says", "not_says"),
    [
        (("--group-size", "4", "--batch-prompts", "64"), "leaves [0, 1]", "no group_size"),
        ((), "no group_size", "leaves [0, 1]"),
    ],
)
def test_the_panel_uses_the_settings_the_page_lists(tmp_path, options, says, not_says):
    """tzy_searchr1 (reward -0.04 to 0.41, --group-size 4 --batch-prompts 64): the page listed
    "group_size 4 (command line)" and said the panel was not shown for "no group_size". The
    reason is the reward's scale, and the message says so."""
    reward = _rise(np.random.default_rng(3)) * 0.5 - 0.15  # -0.04 .. 0.33
    doc = _report(tmp_path, "signed", reward, *options)
    assert "degeneracy" not in doc["pngs"]
    why = doc["missing"]["degeneracy"]
    assert says in why and not_says not in why
    if options:
        assert doc["settings"]["sources"]["group_size"] == "command line"
        assert "group_size 4 (command line)" in doc["page"]


def _report_std(tmp_path, name: str, reward: np.ndarray, reward_std: np.ndarray) -> dict:
    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()
    log = tmp_path / f"{name}.csv"
    rows = "".join(
        f"{s},{r!r},{d!r}\n"
        for s, r, d in zip(STEPS, reward.tolist(), reward_std.tolist(), strict=True)
    )
    log.write_text("step,reward,reward_std\n" + rows)
    res = CliRunner().invoke(app, ["report", str(log), "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output[res.output.index("{") :])


def test_the_panel_draws_the_reward_std_zero_share_the_verdict_read(tmp_path):
    """const.csv (review 2, finding 11): reward_std 0 on every step; the verdict said "100% of
    groups have no reward spread (at least: ... reward_std == 0)" while the panel said "no
    frac_reward_zero_std / degeneracy columns". It now draws that share, as a lower bound."""
    from pgrpo.diagnose.starvation import ZERO_STD_SOURCE

    rng = np.random.default_rng(4)
    sd = np.where(rng.random(STEPS.size) < 0.7, 0.0, rng.uniform(0.1, 0.4, STEPS.size))
    doc = _report_std(tmp_path, "zero_std", 0.5 + rng.normal(0, 0.01, STEPS.size), sd)
    assert _degeneracy(doc)["evidence"]["degeneracy_source"] == ZERO_STD_SOURCE
    assert "degeneracy" in doc["pngs"] and "degeneracy" not in doc["missing"]


def test_a_rounded_reward_std_is_not_drawn_and_the_reason_says_why(tmp_path):
    """A reward_std printed to 3 decimals that takes values of a few steps gives no lower bound
    (`starvation.zero_spread_share`): the verdict does not read it, and the panel names why."""
    rng = np.random.default_rng(5)
    sd = np.round(rng.choice([0.0, 0.001, 0.002, 0.003, 0.004, 0.005, 0.2], STEPS.size), 3)
    doc = _report_std(tmp_path, "rounded_std", 0.5 + rng.normal(0, 0.01, STEPS.size), sd)
    assert "degeneracy_source" not in _degeneracy(doc)["evidence"]
    assert "degeneracy" not in doc["pngs"]
    why = doc["missing"]["degeneracy"]
    assert "reward_std gives no lower bound (its reward_std is rounded to steps of 0.001" in why


def test_the_trailing_share_is_the_mean_over_the_last_logged_steps():
    from pgrpo.report.build import trailing_share

    x = np.array([1.0, 0.0, np.nan, 1.0, 1.0])
    assert np.allclose(trailing_share(x, 2), [1.0, 0.5, 0.0, 1.0, 1.0])
    assert np.allclose(trailing_share(x, 1)[[0, 1, 3]], [1, 0, 1])
    assert np.isnan(trailing_share(x, 1)[2])
