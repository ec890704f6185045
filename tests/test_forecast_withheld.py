"""One reading of "steps to 90%" (`FitResult.steps_to_fraction`), and the level-derived forecast
keys withheld where the verdict contradicts the level (`fitwords.contradiction`), live and in the
trainer (session 39).

Before: the trainer's `forecast/steps_to_90` was the step at which the fitted curve had covered
90% of the way (14.8 at step 30 of a run that got there at step 15, read as 15 more steps); and
on the shared watchdog run, still rising to 0.152 at its end, `pgrpo watch` drew a forecast of
-0.18 beside `verdict learning`, and the trainer logged a plateau below the reward."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.diagnose.fitwords import WITHHELD, contradiction, level_caveat
from pgrpo.diagnose.live import LiveConfig, assess_live, progress_of
from pgrpo.dynamics import fit_curve
from pgrpo.logs import read_log
from pgrpo.train.config import load_config
from pgrpo.train.online import forecast_metrics

FORECAST_KEYS = ("pgrpo/forecast_plateau", "pgrpo/forecast_lo", "pgrpo/forecast_hi",
                 "pgrpo/steps_to_90", "pgrpo/progress")  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(
    tau=st.floats(2.0, 60.0),
    n=st.integers(12, 80),
    r0=st.floats(-2.0, 2.0),
    gain=st.floats(0.2, 3.0).flatmap(lambda g: st.sampled_from([g, -g])),
)
def test_steps_to_90_counts_whole_steps_from_the_last_one(tau, n, r0, gain):
    """On an exact exponential the count is the first whole step after the last one at which
    R_0 + 0.9 gain is reached (t90 = step0 + tau ln 10), 0 once reached; rises and falls."""
    step = np.arange(1.0, n + 1.0)
    reward = r0 + gain * (1.0 - np.exp(-(step - 1.0) / tau))
    fit = fit_curve(step, reward, "exponential")
    got = fit.steps_to_fraction(step[-1] + 100.0 * n)
    t90 = float(fit.context.step0) + float(fit.values["tau"]) * math.log(10.0)
    want = 0.0 if t90 <= step[-1] else float(math.ceil(t90 - step[-1]))
    assert abs(got - want) <= 1.0
    assert got >= 0.0
    if got >= 1.0:  # the horizon is the last step searched: one short of it finds nothing
        assert fit.steps_to_fraction(step[-1] + got) == got
        assert fit.steps_to_fraction(step[-1] + got - 1.0) == math.inf


def test_no_gain_is_no_count():
    step = np.arange(1.0, 21.0)
    fit = fit_curve(step, np.full(20, 0.4), "exponential")
    assert math.isnan(fit.steps_to_fraction(100.0))


def test_live_withholds_a_forecast_below_a_run_still_rising(shared_data):
    log = read_log(shared_data / "curves" / "watchdog_qwen3_8b_lora.csv")
    status = assess_live(log, LiveConfig())
    assert status.verdict == "learning"
    assert status.metrics["pgrpo/forecast_withheld"] == 1.0
    assert not any(k in status.metrics for k in FORECAST_KEYS)
    assert "pgrpo/level" in status.metrics  # the level itself is still given
    # the rule is the fit's level caveat: the same verdict reads the same contradiction
    progress = progress_of(log)
    assert contradiction(progress, -0.18) == "below"
    assert level_caveat(progress, "rom", -0.18) is not None


def test_live_keeps_a_forecast_the_verdict_agrees_with():
    from test_live_to90_words import timed_rise

    status = assess_live(timed_rise(), LiveConfig())
    assert status.verdict == "learning"
    assert status.metrics["pgrpo/forecast_withheld"] == 0.0
    assert all(k in status.metrics for k in FORECAST_KEYS)


def test_trainer_withholds_the_plateau_below_a_run_still_rising(shared_data):
    reward = list(read_log(shared_data / "curves" / "watchdog_qwen3_8b_lora.csv").reward)
    cfg = load_config(None, [f"steps={len(reward)}"])
    out = forecast_metrics(reward, [1e-6] * len(reward), cfg)
    assert out["forecast/progress"] == "learning"
    assert out["forecast/withheld"] == WITHHELD["below"]
    assert out["forecast/plateau"] is None and out["forecast/steps_to_90"] is None
    assert out["forecast/tau"] is not None  # the fit's dynamics are still logged


def test_watch_says_why_the_forecast_is_withheld(shared_data):
    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()
    log = shared_data / "curves" / "watchdog_qwen3_8b_lora.csv"
    res = CliRunner().invoke(app, ["watch", str(log), "--once"])
    assert res.exit_code == 0, res.output
    assert "forecast withheld (below the reward, still rising)  verdict learning" in res.output
    res = CliRunner().invoke(app, ["watch", str(log), "--once", "--json"])
    last = [line for line in res.output.splitlines() if line.startswith("{")][-1]
    assert '"pgrpo/forecast_withheld": 1.0' in last and "pgrpo/forecast_plateau" not in last


def test_train_summary_and_progress_line_show_the_latest_forecast_withheld():
    from pgrpo.cli.train import progress_description, summary

    row = {"reward": 0.5, "frac_reward_zero_std": 0.0, "degeneracy/all_pass": 0.0,
           "degeneracy/all_fail": 0.0}  # fmt: skip
    earlier = {**row, "step": 10, "forecast/progress": "learning", "forecast/plateau": 0.4,
               "forecast/withheld": None}  # fmt: skip
    latest = {**row, "step": 20, "forecast/progress": "learning", "forecast/plateau": None,
              "forecast/withheld": WITHHELD["below"]}  # fmt: skip
    out = summary([earlier, {**row, "step": 15}, latest])
    assert out["forecast/plateau"] is None and out["forecast/withheld"] == WITHHELD["below"]
    assert progress_description(latest).endswith("forecast withheld")
    assert "forecast 0.4" in progress_description(earlier)
