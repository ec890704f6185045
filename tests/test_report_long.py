"""A long log's report panels draw at most MAX_DRAWN points per series (every n-th step), the
same steps for every series; a short log's panels draw every step."""

from __future__ import annotations

import numpy as np

from pgrpo.logs import RewardLog
from pgrpo.report.build import MAX_DRAWN, _drawn


def _log(n: int) -> RewardLog:
    step = np.arange(1.0, n + 1.0)
    cols = {"entropy": np.sin(step), "kl": np.cos(step)}
    return RewardLog(step, step / n, cols, {}, (), "t", "mem", "reward")


def test_long_series_are_drawn_every_nth_step():
    log = _log(200_001)
    margin = np.linspace(0, 1, 200_001)
    step, reward, cols, m, iid = _drawn(log, margin, None)
    assert step.size <= MAX_DRAWN and iid is None
    stride = int(step[1] - step[0])
    assert stride == -(-200_001 // MAX_DRAWN)
    np.testing.assert_array_equal(reward, log.reward[::stride])
    np.testing.assert_array_equal(cols["kl"], log.columns["kl"][::stride])
    np.testing.assert_array_equal(m, margin[::stride])


def test_short_series_are_drawn_whole():
    log = _log(MAX_DRAWN)
    step, reward, cols, _, _ = _drawn(log, None, log.reward)
    assert step is not None and np.array_equal(step, log.step) and cols.keys() == log.columns.keys()
