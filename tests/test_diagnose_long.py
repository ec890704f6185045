"""Long logs are diagnosed as bin means (`pgrpo.diagnose.signals.thin_signals`): the null
false-alarm rate survives the thinning, short logs are diagnosed exactly as before, the live
replay's polls share one analysed length, and `pgrpo diagnose` says what it analysed."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.stats import binom
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.diagnose import diagnose
from pgrpo.diagnose import nullmodel as nm
from pgrpo.diagnose.costs import MAX_REPLAY_POINTS, plateau_step, replay_prefixes
from pgrpo.diagnose.live import LiveConfig, assess_live
from pgrpo.diagnose.progress import _tests
from pgrpo.diagnose.signals import Signals, bin_means, bin_plan, thin_signals
from pgrpo.logs import RewardLog

_load_commands()
runner = CliRunner()


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 5000), max_points=st.integers(1, 600), seed=st.integers(0, 99))
def test_bin_means_are_nan_aware_means_of_equal_bins(n, max_points, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    x[rng.random(n) < 0.1] = np.nan
    b, head = bin_plan(n, max_points)
    got = bin_means(x, b, head)
    m = (n - head) // b
    assert (n <= max_points and (b, head) == (1, 0)) or (m <= max_points and head < b)
    assert m * b + head == n  # every bin holds exactly b steps; only the first `head` are left
    ref = x[head:].reshape(m, b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN bins
        expect = np.nanmean(ref, axis=1)
    np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-12)


def _null_curves(kind: str, n: int, m_curves: int, rng, p: float, n_rollouts: int, rho: float):
    if kind == "binomial":  # batch means of N 0/1 rewards at a constant success rate
        return rng.binomial(n_rollouts, p, size=(m_curves, n)) / n_rollouts
    e = rng.standard_normal((m_curves, n + 50))
    y = np.empty_like(e)
    y[:, 0] = e[:, 0]
    for t in range(1, n + 50):
        y[:, t] = rho * y[:, t - 1] + e[:, t]
    return 0.5 + 0.1 * y[:, 50:]


@settings(max_examples=6, deadline=None)
@example(kind="binomial", b=7, head=0, p=0.5, n_rollouts=32, rho=0.0, seed=1)
@example(kind="binomial", b=7, head=4, p=0.5, n_rollouts=8, rho=0.0, seed=86)
@given(
    kind=st.sampled_from(["binomial", "ar1"]),
    b=st.integers(2, 12),
    head=st.integers(0, 11),
    p=st.floats(0.15, 0.85),
    n_rollouts=st.sampled_from([4, 8, 32]),
    rho=st.sampled_from([0.0, 0.5, 0.8]),
    seed=st.integers(0, 10**6),
)
def test_thinning_null_noise_keeps_the_false_alarm_rate(kind, b, head, p, n_rollouts, rho, seed):
    """Pure null noise of about 200 b steps, thinned to about 200 bin means, tested against the
    null at the analysed length (binomial with b N draws, AR(1) fitted to the bin means): each
    test of the progress verdict fires at most at its level (5% here), and for binomial noise,
    whose bin means are exactly binomial with b N draws, at no less.

    The count of alarms over the curves is itself random: the bounds are the exact binomial
    quantiles at a 1e-5 chance per example that a calibrated test fails one of its 7 checks
    (3 SE bounds failed a calibrated test in about 1 check of 400: gain_p fired on 23 of 240
    curves in the first pinned example, and on 5.6% of 2,640 curves of the same setting). At
    1e-3 on 480 curves a random run failed (the second pinned example: recent_p_up on 6 of
    480; its statistic passes the null's 5% point on about 4.9% of 192,000 curves over 400
    seeds, with a binomial spread: a 1-in-90,000 draw, which the shrinker found). On 960 curves
    at 1e-5 the bounds are 20..83 (2.1%-8.6%): a test at 10% still fails an example 9 times in
    10, and a null sample whose 5% quantile is off by 3 of its standard errors (a rate of 6.5%)
    fails one in 250."""
    rng = np.random.default_rng(seed)
    m_points, m_curves, alpha = 200, 960, 0.05
    n = m_points * b - head % b  # b steps per bin; a head of n mod b steps left out
    b, head = bin_plan(n, m_points)
    curves = _null_curves(kind, n, m_curves, rng, p, n_rollouts, rho)
    hits = {"trend_p": 0, "gain_p": 0, "drop_p": 0, "recent_p_up": 0}
    for y in curves:
        sig = Signals(np.arange(1.0, n + 1), {"reward": y}, {"group_size": n_rollouts,
                      "batch_prompts": 1.0})  # fmt: skip
        thin = thin_signals(sig, max_points=m_points)
        x = thin.get("reward")
        assert x.size == (n - head) // b and thin.config["batch_prompts"] == b
        big_n = thin.hyper("group_size") * thin.hyper("batch_prompts")  # N b draws per bin
        ev = _tests(thin.steps, x, big_n if kind == "binomial" else None)
        for key in hits:
            hits[key] += ev[key] < alpha
    lo, hi = binom.ppf(1e-5 / 7, m_curves, alpha), binom.isf(1e-5 / 7, m_curves, alpha)
    for key, k in hits.items():
        assert k <= hi, (key, k, m_curves)
        if kind == "binomial" and key != "drop_p":  # drop_p is one-sided on a max: conservative
            assert k >= lo, (key, k, m_curves)


def _log(reward, **cols):
    n = len(reward)
    step = np.arange(1.0, n + 1)
    cols = {k: np.asarray(v, dtype=float) for k, v in cols.items()}
    return RewardLog(step, np.asarray(reward, float), cols, {"group_size": 8.0,
                     "batch_prompts": 4.0}, (), "test", "pgrpo", "reward",
                     {"log_every": 1.0})  # fmt: skip


def _old_plateau_step(log):
    """The replay before long logs were binned: the full `assess_live` (forecast and fit
    evidence included) on the prefixes every n // 40 steps."""
    cfg = LiveConfig(stop_on=("plateau",))
    history: tuple = ()
    for k in range(cfg.min_points, len(log) + 1, max(1, len(log) // 40)):
        cols = {c: v[:k] for c, v in log.columns.items()}
        sub = replace(log, step=log.step[:k], reward=log.reward[:k], columns=cols)
        status = assess_live(sub, cfg, history)
        history = (*history, status)
        if status.stop:
            return float(log.step[k - 1])
    return None


def test_short_logs_are_diagnosed_exactly_as_before():
    """Below the threshold nothing is binned: the diagnosis with the thinning path equals the
    one without it (max_points above any length), and the decision-only replay stops where the
    full live assessment stopped."""
    rng = np.random.default_rng(3)
    n = 400
    t = np.arange(n)
    reward = np.round((0.2 + 0.5 * (1 - np.exp(-t / 40)) + rng.normal(0, 0.04, n)) * 32) / 32
    cols = {"reward_std": np.full(n, 0.3), "frac_reward_zero_std": rng.uniform(0, 0.2, n),
            "entropy": 1.0 - 0.3 * t / n + rng.normal(0, 0.01, n),
            "completion_length": 100 + rng.normal(0, 2, n)}  # fmt: skip
    log = _log(reward, **cols)
    thinned, raw = diagnose(log, max_points=2000), diagnose(log, max_points=10**9)
    assert thinned.to_dict() == raw.to_dict()
    assert thinned.metrics["bin_steps"] == 1 and thinned.metrics["analysed_points"] == n
    at = plateau_step(log)
    assert at is not None and at == _old_plateau_step(log)  # a plateau, found identically


@settings(max_examples=40, deadline=None)
@given(n=st.integers(21, 3_000_000), max_points=st.integers(20, 5000))
def test_replay_polls_past_the_threshold_share_one_analysed_length(n, max_points):
    ks = replay_prefixes(n, 20, max_points)
    assert ks == sorted(set(ks)) and ks[-1] <= n
    if n <= max_points:
        assert ks == list(range(20, n + 1, max(1, n // 40)))
        return
    long = [k for k in ks if k >= max_points]
    assert len(ks) <= 40 + MAX_REPLAY_POINTS + 1 and long[-1] == n
    for k in long[:-1]:  # every poll but the whole log: exactly max_points equal bins
        b, head = bin_plan(k, max_points)
        assert head == 0 and k // b == max_points


def test_level_only_null_statistics_equal_the_full_ones():
    null = nm.NullModel("ar1", 0.3)
    level = nm.null_statistics(333, null, level_only=True)
    full = nm.null_statistics(333, null)
    for key in nm.LEVEL_STATISTICS:
        np.testing.assert_array_equal(level[key], full[key])
    y = np.random.default_rng(0).normal(size=(3, 333))
    whole, part = nm.curve_statistics(y), nm.level_statistics(y)
    assert all(np.array_equal(whole[k], part[k]) for k in part)


def _write_long(path, n, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(1, n + 1)
    reward = np.clip(0.3 + 0.4 * (1 - np.exp(-t / (0.2 * n))) + rng.normal(0, 0.05, n), 0, 1)
    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"step": int(t[i]), "reward": round(float(reward[i]), 4),
                                 "reward_std": 0.3, "frac_reward_zero_std": 0.1,
                                 "entropy": 0.9, "grad_norm": 1.0, "learning_rate": 1e-6,
                                 "group_size": 8, "batch_prompts": 4}) + "\n")  # fmt: skip
    return path


def test_cli_diagnose_of_a_long_log_reports_the_thinning(tmp_path):
    log = _write_long(tmp_path / "metrics.jsonl", 20_000)
    res = runner.invoke(app, ["diagnose", str(log), "--json", "--max-points", "500"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["metrics"] == {"steps": 20000.0, "analysed_points": 500.0, "bin_steps": 40.0}
    assert doc["progress"]["label"] in ("learning", "plateau")  # it rose: not flat noise
    assert doc["progress"]["evidence"]["n"] == 500
    waste = next(c for c in doc["checks"] if c["name"] == "wasted_compute")
    assert waste["status"] in ("ok", "warn") and "zero_gradient_steps" in waste["evidence"]
    text = runner.invoke(app, ["diagnose", str(log), "--max-points", "500"])
    assert text.exit_code == 0
    assert "20000 logged steps analysed as 500 means of 40 consecutive steps" in text.stdout
    bad = runner.invoke(app, ["diagnose", str(log), "--max-points", "3"])
    assert bad.exit_code == 2 and "--max-points" in bad.output
