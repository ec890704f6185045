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


def test_the_report_lets_every_step_s_columns_go_before_its_fits(tmp_path, monkeypatch):
    """The fits, the statsmodels import and the band caveat's null curves run without the log's
    full-length columns (44 MB on the 200,000-step log of bench/cli_speed.py, held through them
    before: the report's peak RSS); the report is the same (tests/test_report.py and
    tests/test_fit_caveats.py check what it says)."""
    import weakref

    import pgrpo.logs as logs
    import pgrpo.report.build as build

    n = 5000
    step = np.arange(1, n + 1)
    reward = 0.2 + 0.5 * (1 - np.exp(-step / 900.0)) + 0.05 * np.sin(step / 7.0)
    path = tmp_path / "run.csv"
    rows = (
        f"{s},{r:.4f},{1 - s / 9000:.4f},{s / 40000:.5f}\n"
        for s, r in zip(step, reward, strict=True)
    )
    path.write_text("step,reward,entropy,kl\n" + "".join(rows))
    columns, seen = [], []
    read = logs.read_log

    def reading(*args, **kwargs):
        log = read(*args, **kwargs)
        columns.extend(weakref.ref(v) for v in log.columns.values())
        return log

    fits = build._fits

    def fitting(log):
        seen.append(sum(ref() is not None for ref in columns))
        return fits(log)

    monkeypatch.setattr(logs, "read_log", reading)
    monkeypatch.setattr(build, "_fits", fitting)
    res = build.build_report(path, out_dir=tmp_path / "report")
    assert len(columns) >= 2 and seen == [0]
    assert {"reward", "entropy", "kl"} <= set(res.pngs)
