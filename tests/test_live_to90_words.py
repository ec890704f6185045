"""The live keys `pgrpo/steps_to_90` and `pgrpo/progress` follow the progress verdict's words:
absent beside a run still rising whose verdict's fit cannot tell how much more to expect (a
docs audit, session 37: `pgrpo watch` printed `to90 0` and progress 0.98 on the shared
cs336_shibuki_onpolicy_lr1e-5 run, beside "still rising over the second half ...; the fit
cannot yet tell how much more to expect"), given where the verdict's fit can tell."""

from __future__ import annotations

import math

import numpy as np

from pgrpo.diagnose.live import LiveConfig, assess_live
from pgrpo.logs import read_log
from pgrpo.logs.base import assemble

KEYS = ("pgrpo/steps_to_90", "pgrpo/progress")


def test_a_run_still_rising_that_the_verdict_cannot_time_gets_no_steps_to_90(shared_data):
    log = read_log(shared_data / "curves" / "cs336_shibuki_onpolicy_lr1e-5.csv")
    status = assess_live(log, LiveConfig())
    assert status.verdict == "learning"
    assert "cannot yet tell how much more" in status.summary
    assert not any(k in status.metrics for k in KEYS)
    assert "pgrpo/forecast_plateau" in status.metrics  # the forecast itself is still given


def timed_rise():
    """200 batch means of 256 0/1 rewards rising 0.1 -> 0.7 (timescale 120): a rise the verdict
    reads `learning` and can time."""
    t = np.arange(1, 201)
    reward = np.random.default_rng(0).binomial(256, 0.1 + 0.6 * (1 - np.exp(-t / 120))) / 256
    records = [{"step": int(s), "reward": float(r)} for s, r in zip(t, reward, strict=True)]
    return assemble(records, fmt="csv", source="sim",
                    hyperparameters={"completions_per_step": 256.0})  # fmt: skip


def test_a_rise_the_verdict_can_time_keeps_them():
    status = assess_live(timed_rise(), LiveConfig())
    assert status.verdict == "learning"
    assert "90% of it within" in status.summary
    assert all(k in status.metrics for k in KEYS)
    assert math.isfinite(status.metrics["pgrpo/steps_to_90"])
