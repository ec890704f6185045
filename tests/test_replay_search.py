"""The live plateau replay of `wasted_compute` (`costs.plateau_step`) searches its polls for the
first run of plateau verdicts instead of assessing every poll: the same step as the replay that
assesses them all, with the history it carries, and each poll's prefix seen as a watcher saw
it then (a NaN tail of the whole log is not yet there)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.diagnose.costs import _prefix, first_run, plateau_step
from pgrpo.diagnose.live import LiveConfig, assess_live
from pgrpo.logs import RewardLog, read_log

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from replay_search import every_poll  # noqa: E402  (the replay that assesses every poll)


def _brute_first_run(bits: list[bool], length: int) -> int | None:
    for end in range(length - 1, len(bits)):
        if all(bits[end - length + 1 : end + 1]):
            return end
    return None


@settings(max_examples=300, deadline=None)
@given(bits=st.lists(st.booleans(), max_size=60), length=st.integers(1, 10))
def test_first_run_is_the_first_window_of_hits_and_asks_each_index_once(bits, length):
    asked: list[int] = []

    def hit(i: int) -> bool:
        asked.append(i)
        return bits[i]

    assert first_run(hit, len(bits), length) == _brute_first_run(bits, length)
    assert len(asked) == len(set(asked)) <= len(bits)


def test_first_run_skips_polls_where_no_run_is_near():
    asked: list[int] = []
    assert first_run(lambda i: asked.append(i) or False, 100, 8) is None
    assert len(asked) == 12  # one poll in 8, each the end of a window: 7, 15, ..., 95


def _log(reward: np.ndarray, **cols: np.ndarray) -> RewardLog:
    step = np.arange(1.0, reward.size + 1)
    return RewardLog(step, reward, cols, {"group_size": 8.0, "batch_prompts": 4.0}, (), "test",
                     "test", "reward", {"log_every": 1.0})  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(20, 320),
    tau=st.floats(2.0, 200.0),
    noise=st.floats(0.0, 0.1),
    max_points=st.sampled_from([None, 40, 97]),
    seed=st.integers(0, 2**16),
)
def test_the_search_stops_where_the_full_replay_stops(n, tau, noise, max_points, seed):
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=float)
    reward = np.round((0.2 + 0.6 * (1 - np.exp(-t / tau)) + noise * rng.standard_normal(n)) * 32)
    log = _log(reward / 32, reward_std=np.full(n, 0.3))
    assert plateau_step(log, max_points) == every_poll(log, max_points)


def test_a_nan_tail_is_seen_only_by_the_last_poll(tmp_path):
    """A run that plateaued, then diverged into NaN rewards: each earlier poll saw the plateau,
    not the divergence (before, every poll read the whole log's NaN tail, `collapsed`, and the
    replayed stop never fired)."""
    rng = np.random.default_rng(0)
    t = np.arange(1, 201)
    reward = 0.8 - 0.6 * np.exp(-t / 10) + 0.02 * rng.standard_normal(200)
    rows = [f"{s},{r:.4f}" for s, r in zip(t, reward, strict=True)]
    rows += [f"{s},nan" for s in range(201, 211)]
    path = tmp_path / "diverged.csv"
    path.write_text("step,reward\n" + "\n".join(rows) + "\n")
    log = read_log(path)
    assert log.metrics["nonfinite_tail"] == 10 and len(log) == 200
    at = plateau_step(log)
    assert at is not None and 30 <= at <= 100 and at == every_poll(log, None)


def test_a_saturated_run_stops_on_saturated_verdicts():
    """A reward at its known ceiling with no spread reads `saturated`, which the plateau stop
    counts as a plateau: the search must too (it stops at the 8th such poll, as the full
    replay does)."""
    n = 200
    t = np.arange(n)
    noise = 0.05 * np.random.default_rng(0).standard_normal(n)
    reward = np.where(t < 30, np.clip(0.2 + 0.8 * t / 30 + noise, 0.0, 1.0), 1.0)
    hyper = {"group_size": 8.0, "batch_prompts": 4.0, "reward_min": 0.0, "reward_max": 1.0}
    cols = {"reward_std": np.where(t < 30, 0.3, 0.0)}
    log = RewardLog(np.arange(1.0, n + 1), reward, cols, hyper, (), "test", "test", "reward",
                    {"log_every": 1.0})  # fmt: skip
    cfg = LiveConfig(stop_on=("plateau",), plateau_confirmed=False)
    at = plateau_step(log)
    assert at == every_poll(log, None) == 75.0
    k = int(at)  # the stopping poll's verdict is `saturated`, not `plateau`
    assert assess_live(_prefix(log, log.columns, k), cfg, decision_only=True).verdict == "saturated"


def test_only_the_whole_log_poll_carries_the_nan_tail(tmp_path):
    rows = [f"{s},{0.5 + 0.01 * (s % 3):.3f}" for s in range(1, 41)] + ["41,nan", "42,inf"]
    path = tmp_path / "tail.csv"
    path.write_text("step,reward\n" + "\n".join(rows) + "\n")
    log = read_log(path)
    assert log.metrics["nonfinite_tail"] == 2 and len(log) == 40
    assert _prefix(log, {}, 40).metrics["nonfinite_tail"] == 2  # the whole log: as read
    part = _prefix(log, {}, 39).metrics
    assert not any(key.startswith("nonfinite_") for key in part) and part["log_every"] == 1.0
