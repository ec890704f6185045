"""The flat stop follows the flat verdict's words (session 36): a `flat` verdict "with a possible
rise" (its end window above its start window at 5%, or a straight-line rise at 95%) tells the
user to log more steps, so it does not raise the flat alert; a plain flat verdict, or one with a
possible fall, does. Before, `--stop-on flat` stopped beside the words "a possible rise" (on the
corpus replay, `gsm8k_qwen3_1p7b_abl_num_groups_4` at step 27 of 50, which then rose 3.0 SE)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.diagnose.live import LiveConfig, assess_live, progress_of
from pgrpo.diagnose.progresstext import POSSIBLE_P, possible_drift
from pgrpo.logs import RewardLog

_load_commands()
runner = CliRunner()


def _curve(seed: int, n: int = 40, late: float = 0.05) -> np.ndarray:
    """[n] rewards: noise sd 0.05 around 0.3, and a step of `late` over the last 12 points."""
    rng = np.random.default_rng(seed)
    return 0.3 + 0.05 * rng.standard_normal(n) + np.where(np.arange(n) >= n - 12, late, 0.0)


def _log(reward: np.ndarray) -> RewardLog:
    return RewardLog(np.arange(1.0, reward.size + 1), reward, {}, {}, (), "t", "mem", "reward")


@pytest.mark.parametrize(
    ("ev", "want"),
    [
        ({"trend_change_lo": -0.1, "trend_change_hi": 0.1, "gain_p": 0.3}, None),
        ({"trend_change_lo": -0.1, "trend_change_hi": 0.1, "gain_p": POSSIBLE_P}, None),
        ({"trend_change_lo": -0.1, "trend_change_hi": 0.1, "gain_p": 0.049}, "rise"),
        ({"trend_change_lo": 0.01, "trend_change_hi": 0.2, "gain_p": 0.3}, "rise"),
        ({"trend_change_lo": -0.2, "trend_change_hi": -0.01, "gain_p": 0.3}, "fall"),
        ({"trend_change_lo": -0.2, "trend_change_hi": -0.01, "gain_p": 0.01}, "fall"),
        ({"trend_change_lo": math.nan, "trend_change_hi": math.nan}, None),
    ],
)
def test_possible_drift_reads_the_gain_test_and_the_trend_interval(ev, want):
    assert possible_drift(ev) == want


def test_the_flat_alert_is_raised_exactly_on_flat_verdicts_without_a_possible_rise():
    """On 40 noisy curves with a small late step (each kind occurs), the alert is decided by
    the verdict and `possible_drift` alone, and the words say which case it is."""
    cfg = LiveConfig(stop_on=("flat",))
    seen = set()
    for seed in range(40):
        log = _log(_curve(seed))
        status = assess_live(log, cfg, decision_only=True)
        verdict = progress_of(log, fit=False)
        assert status.verdict == verdict.label
        if verdict.label != "flat":
            assert "flat" not in status.alerts
            continue
        drift = possible_drift(verdict.evidence)
        seen.add(drift)
        assert ("flat" in status.alerts) == (drift != "rise"), seed
        assert ("possible" in verdict.summary) == (drift is not None), seed
    assert {None, "rise"} <= seen  # both cases were exercised


def test_a_possible_rise_counts_towards_the_patience_but_does_not_request_the_stop():
    """The earlier assessments count when their verdict is flat (as an unconfirmed plateau
    counts for the plateau stop); the one that requests the stop must raise the alert."""
    cfg = LiveConfig(stop_on=("flat",), plateau_patience=2)
    plain, rising = _log(_curve(5)), _log(_curve(17))
    assert "flat" in assess_live(plain, cfg, decision_only=True).alerts
    first = assess_live(rising, cfg, decision_only=True)
    assert first.verdict == "flat" and not first.alerts
    assert assess_live(plain, cfg, (first,), decision_only=True).stop
    assert not assess_live(rising, cfg, (first,), decision_only=True).stop


def test_watch_stops_on_a_plain_flat_run_and_says_why_it_waits_beside_a_possible_rise(tmp_path):
    for seed, code in ((5, 3), (17, 0)):
        path = tmp_path / f"run{seed}.csv"
        reward = _curve(seed)
        path.write_text("step,reward\n" + "".join(f"{i + 1},{v}\n" for i, v in enumerate(reward)))
        res = runner.invoke(app, ["watch", str(path), "--once", "--stop-on", "flat",
                                  "--plateau-patience", "1"])  # fmt: skip
        assert res.exit_code == code, res.output
        waits = "flat with a possible rise" in res.output
        assert waits == (code == 0), res.output
