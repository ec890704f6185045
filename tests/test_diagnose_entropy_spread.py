"""A reward that collapses while the entropy blows up early and stays up: the words name the
entropy's rise and the step it first doubled, and the entropy check does not call the level it
heads for a floor (a review, 2026-12-06: "entropy floor 5.35 ... not falling" and a restart at a
step already past the blow-up). Descriptive only: no label or mode changes."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.diagnose import diagnose
from pgrpo.diagnose.findings import SPREAD_FLAT_ACTION
from pgrpo.diagnose.instability import BLOWUP, entropy_rise

N = 60


def _cols(blowup: bool) -> dict:
    rng = np.random.default_rng(0)
    t = np.arange(N)
    p = np.where(t < 6, 0.08, 0.0)  # a few successes, then every group fails
    reward = rng.binomial(256, p) / 256
    entropy = 0.9 + 0.02 * rng.standard_normal(N)
    if blowup:
        entropy = entropy + np.clip(t - 3, 0, 4) * 1.5  # x7 by step 8, and it stays
    return {"reward": reward, "entropy": entropy, "completions_per_step": np.full(N, 256.0)}


def test_entropy_rise_reads_an_early_blowup_that_stays():
    cols = _cols(True)
    ev = entropy_rise(np.arange(1.0, N + 1), cols["entropy"])
    assert ev["entropy_rise"] > 5 and ev["entropy_rise_step"] == 5.0  # t = 4: 0.9 + 1.5 > 1.8
    assert entropy_rise(np.arange(1.0, N + 1), -np.ones(N)) == {}


def test_the_collapse_names_the_entropy_rise_and_not_without_it():
    with_rise, without = diagnose(_cols(True)), diagnose(_cols(False))
    assert with_rise.progress.label == without.progress.label  # labels are unchanged
    said = with_rise.findings()[0]["sentence"]
    assert "Meanwhile the entropy rose x" in said and "first above 2x it at step 4" in said
    assert "the checkpoints worth keeping are from step 0 to just before 4" in said
    # the action goes back to those (session 37: "restart from a checkpoint within steps 1-8"
    # beside "worth keeping ... to just before 4"); without the rise, from the best window
    act = with_rise.findings()[0]["action"]
    assert "a checkpoint from step 0 to just before 4 (in the best window" in act
    assert "within steps" not in act
    assert "a checkpoint within steps" in without.findings()[0]["action"]
    # one action everywhere: the verdict's own (JSON progress.action) and the healthy row's
    assert with_rise.progress.action == act  # (they said "within steps 0-11": a review)
    assert "within steps" not in with_rise.healthy.action
    assert "Meanwhile the entropy" not in without.findings()[0]["sentence"]
    ev = with_rise.mode("dynamical_instability").evidence
    assert ev["entropy_rise"] >= BLOWUP and ev["entropy_blowup"] < BLOWUP  # late / mid-run: ~1


def test_the_entropy_check_says_it_rose(tmp_path):
    cols = _cols(True)
    path = tmp_path / "log.csv"
    rows = zip(range(1, N + 1), cols["reward"], cols["entropy"], strict=True)
    path.write_text("step,reward,entropy\n" + "".join(f"{s},{r},{e}\n" for s, r, e in rows))
    _load_commands()
    out = CliRunner().invoke(app, ["diagnose", str(path), "--json"])
    assert out.exit_code == 0, out.output
    check = next(c for c in json.loads(out.stdout)["checks"] if c["name"] == "entropy_floor")
    assert check["summary"].startswith("entropy rose: ")
    assert "floor 5" not in check["summary"]
    # the last tenth's multiplier is the finding's, and the fitted curve's is named as such
    # (a review, 2026-12-06: x11.3 in the check beside x6.9 in the finding, neither explained)
    said = json.loads(out.stdout)["findings"][0]["sentence"]
    rise = entropy_rise(np.arange(1.0, N + 1), cols["entropy"])["entropy_rise"]
    assert f"rose x{rise:.1f} from its start" in said
    assert (
        f"rose: {rise:.1f} times its" in check["summary"]
        and "its fitted curve heads for" in (check["summary"])
    )


def test_a_flat_reward_beside_an_entropy_that_rose_is_told_to_lower_the_update():
    """The flat verdict's "check that the learning rate is not too small" beside a policy that
    spread out x7 points the wrong way (a review, 2026-12-06); without the rise it stays."""
    rng = np.random.default_rng(3)
    t = np.arange(N)
    base = {"reward": rng.binomial(256, 0.3, N) / 256, "completions_per_step": np.full(N, 256.0)}
    flat_rise = base | {"entropy": 0.9 + np.clip(t - 3, 0, 4) * 1.5}
    flat_level = base | {"entropy": 0.9 + 0.02 * rng.standard_normal(N)}
    d_rise, d_level = diagnose(flat_rise), diagnose(flat_level)
    assert d_rise.progress.label == d_level.progress.label == "flat"
    assert d_rise.findings()[0]["action"] == SPREAD_FLAT_ACTION
    assert d_level.findings()[0]["action"] == d_level.progress.action != SPREAD_FLAT_ACTION


def test_an_entropy_that_rose_before_the_best_window_names_no_checkpoint():
    """The entropy doubled early (a ramp, then level) while the reward rose to step ~35 and then
    collapsed: "keep the checkpoints before step 8" would throw the rise away (a review,
    2026-12-06), so the words name the rise and leave the rollback to the action."""
    rng = np.random.default_rng(1)
    t = np.arange(80)
    p = np.where(t < 56, np.minimum(0.1 + 0.025 * t, 0.85), 0.08)
    cols = {
        "reward": rng.binomial(256, p) / 256,
        "completions_per_step": np.full(80, 256.0),
        "entropy": 0.5 * (1 + 3 * np.minimum(t / 8.0, 1.0)) + 0.01 * rng.standard_normal(80),
    }
    d = diagnose(cols)
    assert d.progress.label in ("collapsed", "declining")
    said = d.findings()[0]["sentence"]
    assert "Meanwhile the entropy rose x" in said and "worth keeping" not in said
    assert d.findings()[0]["action"] == d.progress.action  # the best window's, unchanged
