"""The default forecaster on real GRPO logs (../shared/data/curves), leave-one-repository-out:
the prior is derived from the other repositories, the error is scored on the held-out one
(bench/forecast_real.py, bench/forecast_stack.py; figures in docs/dynamics.md)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from pgrpo.dynamics import forecast
from pgrpo.dynamics.levelgain import (
    CORPUS_PRIOR,
    GAIN_GRID,
    ForecastPrior,
    derive_prior,
    repository_weights,
    stack_weights,
)

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT / "bench"))


@pytest.fixture(scope="module")
def corpus():
    if not (SHARED_DATA / "curves" / "index.json").is_file():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    import forecast_real as fr
    import forecast_stack as fs

    runs = fr.load_corpus()
    cen = fr.centres(runs)
    table = [row for r in runs for row in fs.candidate_rows(r, cen)]
    return fr, fs, runs, cen, table


def test_the_default_beats_the_last_10_mean_out_of_repository(corpus):
    fr, fs, _, _, table = corpus
    rows = fs.loro_variant(fs.VARIANTS[fr.DEFAULT], table, (0.3, 0.5, 0.7))
    for cut in (0.3, 0.5, 0.7):
        s = fr.summary([r for r in rows if r["cut"] == cut])
        # measured (docs/dynamics.md): medians 0.295 / 0.165 / 0.152 vs 0.433 / 0.311 / 0.170
        assert s["median_err"] < s["median_err_last10"]
        assert s["repo_median_err"] <= 0.20 < s["repo_median_err_last10"] or cut == 0.7
        assert s["coverage_90"] >= 0.8  # nominal 0.9: 0.88 / 0.82 / 0.91
    half = fr.summary([r for r in rows if r["cut"] == 0.5])
    assert half["median_err"] <= 0.20 and half["wins_vs_last10"] >= 0.6 * half["runs"]


def test_the_library_forecast_is_what_the_benchmark_scores(corpus):
    fr, fs, runs, cen, table = corpus
    run = next(r for r in runs if r["meta"]["repo"] == "Caitlyn-Yin/grpo_norm")
    train = [r for r in table if r["repo"] != run["meta"]["repo"]]
    prior = fr.corpus_prior(train, cen[run["meta"]["repo"]], run["meta"]["repo"])
    kw = {k: v for k, v in run["inputs"].items() if k != "optimizer"}
    fc = forecast(run["log"].step, run["log"].reward, 0.5, method="level_gain", prior=prior, **kw)
    predict, _ = fs.VARIANTS[fr.DEFAULT](train, run["meta"]["repo"], 0.5)
    row = next(r for r in table if r["run"] == run["meta"]["name"] and r["cut"] == 0.5)
    pred, half = predict(row)
    assert fc.predicted_mean == pytest.approx(pred, rel=1e-9)
    assert fc.mean_band[1] - fc.predicted_mean == pytest.approx(half, rel=1e-6)


def test_the_shared_corpus_gives_the_prior_learned_on_it(corpus):
    """The shared corpus alone gives the prior shipped until 2026-12-04 (kept as
    bench/forecast_prior.EARLIER_PRIOR); today's CORPUS_PRIOR is learned on every run seen
    (tests/test_dynamics_forecast_prior.py)."""
    from forecast_prior import EARLIER_PRIOR

    fr, _, _, cen, table = corpus
    prior = fr.corpus_prior(table, cen["all"])
    assert prior.gain_fraction == EARLIER_PRIOR.gain_fraction
    assert prior.band_scale == pytest.approx(EARLIER_PRIOR.band_scale, abs=1e-3)
    assert prior.log_tau_ratio == pytest.approx(EARLIER_PRIOR.log_tau_ratio, abs=1e-3)
    stored = dict(EARLIER_PRIOR.band_scale_by_cut)
    for cut, q in prior.band_scale_by_cut:
        assert q == pytest.approx(stored[cut], abs=1e-3)


def test_the_stacking_weights_are_what_the_benchmark_recorded(corpus):
    import json

    _, fs, _, _, table = corpus
    stored = json.loads((ROOT / "bench" / "results" / "forecast_real.json").read_text())
    for name in ("stack", "stack@cut"):
        w = fs.VARIANTS[name](table, "all", 0.5)[1]["weights"]
        again = fs.VARIANTS[name](table, "all", 0.5)[1]["weights"]
        assert w == again  # a linear programme: the same weights every time
        recorded = stored["variant_fitted_on_all_runs"][name]["weights"]
        assert w == pytest.approx(recorded, abs=1e-3)
        assert sum(w.values()) == pytest.approx(1.0, abs=1e-3)


def test_derive_prior_recovers_a_known_gain_fraction_and_covers():
    rng = np.random.default_rng(0)
    n = 200
    level, gain, unit = rng.normal(0.5, 0.1, n), rng.normal(0.2, 0.1, n), np.full(n, 0.05)
    observed = level + 0.4 * gain + rng.normal(0.0, 0.05, n)
    prior = derive_prior(level, level + gain, unit, observed, np.ones(n))
    assert prior.gain_fraction == pytest.approx(0.4, abs=0.1) and 0.4 in GAIN_GRID
    pred = level + prior.gain_fraction * gain
    assert np.mean(np.abs(pred - observed) <= prior.band_scale * unit) >= 0.9
    with pytest.raises(ValueError, match="at least 3"):
        derive_prior(level[:2], level[:2], unit[:2], observed[:2], np.ones(2))
    # one repository of 150 runs that deliver all the gain does not outvote 50 others
    big = np.r_[np.full(150, 1.0), np.full(50, 0.0)]
    obs2 = level + big * gain
    groups = ["big"] * 150 + [f"r{i}" for i in range(50)]
    by_run = derive_prior(level, level + gain, unit, obs2, np.ones(n))
    by_repo = derive_prior(level, level + gain, unit, obs2, np.ones(n),
                           weights=repository_weights(groups))  # fmt: skip
    assert by_run.gain_fraction == 1.0 and by_repo.gain_fraction == 0.0
    assert repository_weights(groups).sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="weights"):
        derive_prior(level, level, unit, observed, np.ones(n), weights=-np.ones(n))


def test_stacking_weights_recover_a_known_mix_and_are_reproducible():
    rng = np.random.default_rng(5)
    r = 120
    C = rng.normal(0.0, 1.0, (r, 3))
    y = 0.7 * C[:, 0] + 0.3 * C[:, 1] + rng.laplace(0.0, 0.02, r)
    std, a = np.full(r, 2.0), np.ones(r) / r
    w = stack_weights(C, y, std, a)
    assert w.shape == (3,) and np.all(w >= 0) and w.sum() == pytest.approx(1.0)
    assert w == pytest.approx([0.7, 0.3, 0.0], abs=0.03)
    assert np.array_equal(w, stack_weights(C, y, std, a))  # deterministic
    perm = rng.permutation(r)
    assert stack_weights(C[perm], y[perm], std[perm], a[perm]) == pytest.approx(w, abs=1e-9)
    with pytest.raises(ValueError, match="candidates"):
        stack_weights(C[:2], y[:2], std[:2], a[:2])


def test_the_timescale_prior_pulls_an_unidentified_tau_and_stays_unit_free():
    from pgrpo.dynamics.levelgain import log_tau_ratio, timescale_centre

    rng = np.random.default_rng(3)
    t = np.arange(1.0, 201.0)
    y = 0.2 + 0.002 * t + rng.normal(0.0, 0.05, t.size)  # a straight creep: tau not identified
    free = forecast(t, y, 0.5, method="level_gain", prior=ForecastPrior(0.2, 3.0))
    tight = ForecastPrior(0.2, 3.0, log_tau_ratio=math.log(0.05), tau_spread=0.1)
    pulled = forecast(t, y, 0.5, method="level_gain", prior=tight)
    # tau pulled towards 5% of the whole run's 199 steps; a short tau means no further gain
    assert pulled.fit.metrics["tau"] == pytest.approx(0.05 * 199, rel=0.3)
    assert pulled.fit.metrics["tau"] < free.fit.metrics["tau"]
    scaled = forecast(t / 100.0, 3 * y, 0.5, method="level_gain", prior=tight)
    assert scaled.predicted_mean / 3 == pytest.approx(pulled.predicted_mean, rel=1e-5)
    assert math.isfinite(log_tau_ratio(t, y, {}))
    assert timescale_centre([0.0, 1.0, 2.0, np.nan]) == 1.0
    with pytest.raises(ValueError, match="tau_spread"):
        ForecastPrior(0.2, 1.0, tau_spread=0.0)


def test_the_band_scale_follows_the_share_of_the_run_seen():
    prior = ForecastPrior(0.1, 3.0, band_scale_by_cut=((0.3, 6.0), (0.7, 2.0)))
    assert prior.band_scale_at(0.25) == 6.0 and prior.band_scale_at(0.9) == 2.0
    assert ForecastPrior(0.1, 3.0).band_scale_at(0.3) == 3.0
    t = np.arange(1.0, 101.0)
    y = 0.5 + 0.1 * np.sin(t)
    early = forecast(t, y, 0.3, method="level_gain", prior=prior)
    late = forecast(t, y, 0.7, method="level_gain", prior=prior)
    assert early.metrics["band_scale"] == 6.0 and late.metrics["band_scale"] == 2.0
    with pytest.raises(ValueError, match="band_scale_by_cut"):
        ForecastPrior(0.1, 3.0, band_scale_by_cut=((1.5, 2.0),))


def test_the_stated_schedule_is_the_clock_when_the_lr_is_not_logged():
    import forecast_real as fr

    step = np.arange(1.0, 201.0)
    meta = {"lr_schedule": "linear decay (TRL default)", "learning_rate": 1e-5, "max_steps": 200}
    lr = fr.stated_lr(meta, step)
    assert lr[0] == pytest.approx(1e-5 * 199 / 200) and lr[-1] == pytest.approx(0.0)
    cos = fr.stated_lr({**meta, "lr_schedule": "cosine", "warmup": 0.1}, step)
    assert cos[9] == pytest.approx(1e-5 * 10 / 20) and cos[19] == pytest.approx(1e-5)
    assert np.all(np.diff(cos[20:]) <= 0)
    assert fr.stated_lr({**meta, "lr_schedule": "constant"}, step) is None


def test_the_mean_level_is_unbiased_for_a_skewed_reward_where_the_robust_fit_is_not():
    """One prompt x 6 completions of a 0 / 2.5 reward at p = 0.05: the batch mean is skewed (3 of
    4 steps are 0), and a soft_l1 level sits near the mode; level="mean" shifts the same curve
    by the prefix's recent mean residual (measured: bias -0.054 vs -0.004, sd 0.02 a run)."""
    from dataclasses import replace

    from pgrpo.dynamics.levelgain import LEVELS

    rng = np.random.default_rng(11)
    t = np.arange(1.0, 301.0)
    errs = {"fit": [], "mean": []}
    for _ in range(20):
        y = 2.5 * rng.binomial(6, 0.05, t.size) / 6.0  # true mean 0.125 at every step
        for name in errs:
            fc = forecast(t, y, 0.5, method="level_gain", prior=replace(CORPUS_PRIOR, level=name))
            errs[name].append(fc.predicted_mean - 0.125)
    bias = {k: float(np.mean(v)) for k, v in errs.items()}
    assert bias["fit"] < -0.035  # the robust level is low by > a quarter of the mean
    assert abs(bias["mean"]) < 0.015
    y = 0.4 + 0.1 * np.sin(t / 7.0)
    shift = LEVELS.get("mean")(y, np.full(t.size, 0.4))
    assert shift == pytest.approx(float(np.mean(y[150:] - 0.4)))
    assert LEVELS.get("fit")(y, y) == 0.0
    with pytest.raises(ValueError, match="forecast level"):
        ForecastPrior(0.1, 3.0, level="median")
    # a prior derived from mean-shifted levels keeps that reading (a review, 2026-12-04)
    z = np.zeros(4)
    assert derive_prior(z, z + 0.1, z + 1.0, z + 0.05, z + 1.0, level_kind="mean").level == "mean"
    assert derive_prior(z, z + 0.1, z + 1.0, z + 0.05, z + 1.0).level == "fit"
