"""The closed form used: with lr, beta1 and K known, m and c follow from the optimizer
(`optimizers.fit_reduction`, the run optimizer's reduction) and only kappa is fitted
(`rom_fixed`); compared with the free fit by AICc, kappa reported with its profile interval."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo._registry import UnknownNameError
from pgrpo.dynamics import fit_curve, lr_schedule, rom_coefficients, simulate_recursion, trajectory
from pgrpo.dynamics.optimizers import fit_reduction


def _closed_form_run(beta1: float, k: float, lr: float = 1e-5, n: int = 300, seed: int = 0):
    red = fit_reduction("sgd_momentum", k, beta1, 1)
    t = np.arange(0.0, n)
    mean = trajectory(t, 0.1, 0.8, red.mass, red.damping, k)
    reward = mean + np.random.default_rng(seed).normal(0.0, 0.02, n)
    return t, reward, np.full(n, lr)


@pytest.mark.parametrize("K", [1, 2, 4])
def test_the_fit_reduction_is_the_model_coefficients(K):
    for beta1, k in ((0.0, 0.01), (0.9, 0.02), (0.95, 0.003)):
        for name in ("sgd_momentum", "adam"):  # both reduce to heavy-ball at the effective a
            red = fit_reduction(name, k, beta1, K)
            ref = rom_coefficients(k / 2.0, beta1, 2.0, refresh_interval=K)
            assert (red.mass, red.damping, red.beta1) == pytest.approx((ref.m, ref.c, beta1))
    with pytest.raises(UnknownNameError, match="sgd_momentum"):
        fit_reduction("nope", 0.01, 0.9, 1)


def test_beta1_now_changes_the_fit_and_kappa_is_recovered_with_its_interval():
    t, reward, lr = _closed_form_run(beta1=0.9, k=0.03)
    fits = {b: fit_curve(t, reward, lr=lr, beta1=b) for b in (0.5, 0.9)}
    m9, m5 = fits[0.9].metrics, fits[0.5].metrics  # the old code: identical fits
    assert m9["r2_constrained"] != pytest.approx(m5["r2_constrained"], abs=1e-4)
    assert m9["kappa_constrained"] == pytest.approx(3000.0, rel=0.1)
    assert m9["preferred"] == "constrained" and m9["delta_aicc"] < 0
    assert m9["closed_form"] == "consistent" and m9["lr_test_p"] >= 0.05
    assert m9["optimizer_reduction"] == "adam"  # the default: AdamW
    fixed = fit_curve(t, reward, "rom_fixed", lr=lr, beta1=0.9)
    assert fixed.varying == ("R_inf", "R_0", "k")
    assert fixed.metrics["m"] == pytest.approx(9.0 + 0.0, rel=1e-9)


def test_the_kappa_interval_covers_the_truth_at_its_level():
    covered = []
    for seed in range(12):
        t, reward, lr = _closed_form_run(beta1=0.9, k=0.03, seed=seed)
        m = fit_curve(t, reward, lr=lr, beta1=0.9).metrics
        assert m["kappa_level"] == 0.9 and m["kappa_lo"] < m["kappa_hi"]
        covered.append(m["kappa_lo"] <= 3000.0 <= m["kappa_hi"])
    assert np.mean(covered) >= 0.75  # nominal 90%; 19 of 20 seeds measured


def test_a_run_off_the_optimizer_model_prefers_the_free_fit():
    # the mass the data show (m = 60) is far from beta1 = 0.5's m = 1
    t = np.arange(0.0, 400)
    mean = trajectory(t, 0.1, 0.8, 60.0, 1.0, 0.03)
    reward = mean + np.random.default_rng(1).normal(0.0, 0.01, t.size)
    res = fit_curve(t, reward, lr=np.full(t.size, 1e-5), beta1=0.5)
    assert res.metrics["preferred"] == "free" and res.metrics["delta_aicc"] > 10
    assert res.metrics["closed_form"] == "rejected" and res.metrics["lr_test_p"] < 1e-3


def test_schedule_and_refresh_interval_use_the_exact_recursion():
    n, K = 600, 4
    lr = lr_schedule(n, 1e-6, warmup=50, decay="cosine")
    kappa = 5000.0
    x = simulate_recursion(kappa * lr, 0.9, n, refresh_interval=K)[0, :-1]
    reward = 0.7 + (0.2 - 0.7) * x + np.random.default_rng(2).normal(0.0, 0.01, n)
    res = fit_curve(np.arange(n, dtype=float), reward, lr=lr, beta1=0.9, refresh_interval=K)
    assert res.metrics["kappa_constrained"] == pytest.approx(kappa, rel=0.1)
    assert res.metrics["kappa_lo"] <= kappa <= res.metrics["kappa_hi"]
    assert "[[Constrained]]" in res.report()


def test_no_constrained_fit_without_lr_or_beta1():
    t, reward, lr = _closed_form_run(beta1=0.9, k=0.03)
    assert "preferred" not in fit_curve(t, reward, lr=lr).metrics
    assert "preferred" not in fit_curve(t, reward, beta1=0.9).metrics
    with pytest.raises(ValueError, match="beta1"):
        fit_curve(t, reward, "rom_fixed", lr=lr)


# --- the free start (rom_v0) against the start from rest: `compare_start` ----------------------


def _fake_fit(sse: float, n: int, k: int, rho: float = 0.0, model: str = "rom", u: float = -0.1,
              resid: np.ndarray | None = None):  # fmt: skip
    """What `aicc`, `likelihood_ratio` and `compare_start` read of a FitResult: a Gaussian fit's
    AIC n log(SSE / n) + 2 k, its free parameters, n, SSE, residual lag-1 autocorrelation, R^2,
    values (u), model, and reward - fitted (the residuals, white unless given)."""
    from types import SimpleNamespace

    resid = np.random.default_rng(n).normal(size=n) if resid is None else resid
    return SimpleNamespace(sse=sse, n=n, varying=tuple(range(k)), residual_autocorr=rho,
                           aic=n * np.log(sse / n) + 2 * k, r2=1.0 - sse, values={"u": u},
                           model=model, reward=resid, fitted=np.zeros(n))  # fmt: skip


@given(
    sse=st.floats(0.01, 1.0),
    shrink=st.floats(0.0, 0.5),
    n=st.integers(10, 2000),
    rho=st.floats(-0.5, 0.99),
)
@settings(max_examples=200, deadline=None)
def test_the_likelihood_ratio_shrinks_the_sample_by_the_rho_it_is_given(sse, shrink, n, rho):
    """Property: n_eff log(SSE_narrow / SSE_wide), n_eff = n (1 - r) / (1 + r) with r the given
    rho (else the wide fit's residual rho) clipped to [0, 0.95], against chi2 with 1 degree of
    freedom; a larger rho never gives more evidence."""
    from scipy.stats import chi2

    from pgrpo.dynamics.constrained import likelihood_ratio

    rest, free = _fake_fit(sse, n, 4), _fake_fit(sse * (1.0 - shrink), n, 5, rho)
    r = min(max(rho, 0.0), 0.95)
    stat = max(n * (1 - r) / (1 + r) * np.log(sse / (sse * (1.0 - shrink))), 0.0)
    for got in (likelihood_ratio(free, rest), likelihood_ratio(_fake_fit(free.sse, n, 5), rest,
                                                                rho=rho)):  # fmt: skip
        assert got[0] == pytest.approx(stat, rel=1e-9, abs=1e-12)
        assert got[1] == pytest.approx(chi2.sf(stat, 1), rel=1e-6, abs=1e-12)
    assert likelihood_ratio(free, rest, rho=0.0)[0] >= likelihood_ratio(free, rest)[0] - 1e-9


@given(seed=st.integers(0, 10_000), shrink=st.floats(0.0, 0.9), n=st.integers(8, 400),
       extra=st.floats(0.0, 0.5), u=st.floats(-2.0, 2.0))  # fmt: skip
@settings(max_examples=80, deadline=None)
def test_a_free_start_needs_aicc_against_the_reported_rom_and_the_test_against_the_nested_one(
    seed, shrink, n, extra, u
):
    """Property: "free" exactly when AICc(reported) - AICc(free) > FREE_START_AICC, the
    likelihood-ratio test of the nested constant-lr rom against rom_v0 (rho: the diagnosis'
    upper bound on rom_v0's residuals, never below 0) gives p < FREE_START_P, and u is inside its
    bound; the reported rom (here a variant with a lower SSE than the nested one) enters only
    the AICc. (`logfit.fit_start` passes that bound in: `dynamics` may not import `diagnose`.)"""
    from pgrpo.diagnose.nullmodel import lag1_autocorr
    from pgrpo.dynamics.constrained import (
        FREE_START_AICC,
        FREE_START_P,
        U_BOUND,
        aicc,
        compare_start,
        likelihood_ratio,
    )

    resid = np.random.default_rng(seed).normal(size=n)
    sse = float(resid @ resid)
    free = _fake_fit(sse, n, 5, u=u, resid=resid)
    nested = _fake_fit(sse / (1.0 - shrink), n, 4)
    rest = _fake_fit(sse / (1.0 - shrink) / (1.0 + extra), n, 4, model="rom_schedule")
    rho = lag1_autocorr(resid)
    out = compare_start(rest, free, nested, rho)
    assert out.rho_bound == rho >= 0.0
    assert (out.lr_test_stat, out.lr_test_p) == likelihood_ratio(free, nested, rho=rho)
    d = aicc(rest) - aicc(free)
    assert out.delta_aicc == pytest.approx(d)
    wins = d > FREE_START_AICC and out.lr_test_p < FREE_START_P
    assert (out.preferred == "free") == (wins and abs(u) < U_BOUND * (1 - 1e-6))
    assert out.rest_model == "rom_schedule"
    assert (out.sentence() is None) == (out.preferred == "rest")


def test_the_free_start_thresholds_are_the_ones_the_null_bench_set():
    """bench/free_start.py set them (docs/dynamics.md, "Which start describes the run"): a change
    has to go through that bench again."""
    from pgrpo.dynamics.constrained import FREE_START_AICC, FREE_START_P, U_BOUND

    assert (FREE_START_AICC, FREE_START_P, U_BOUND) == (2.0, 0.01, 2.0)


def _start(rest_sse, free_sse, n, seed=0, **kw):
    from pgrpo.diagnose.nullmodel import lag1_autocorr
    from pgrpo.dynamics.constrained import compare_start

    resid = np.random.default_rng(seed).normal(size=n)
    free = _fake_fit(free_sse, n, 5, resid=resid, **kw)
    rest = _fake_fit(rest_sse, n, 4)
    return compare_start(rest, free, rest, lag1_autocorr(resid))


def test_each_condition_of_the_free_start_is_needed():
    """Cases on the edges: a test that rejects with AICc short of 2 (9 points), AICc well past 2
    with p between 0.01 and 0.05, u at its bound, a robust loss, residuals that are not finite;
    and a free start that fits no better."""
    from pgrpo.dynamics.constrained import compare_start

    short = _start(1.0, 0.35, 9, seed=8)  # p < 0.01 but the extra parameter costs too much
    assert short.lr_test_p < 0.01 and short.delta_aicc <= 2.0 and short.preferred == "rest"
    n = 200  # delta AICc ~ 200 log(1 / 0.97) - 2 ~ 4, and p ~ 0.02 at these white residuals
    mid = _start(1.0, 0.97, n, seed=1)
    assert mid.delta_aicc > 2.0 and 0.01 < mid.lr_test_p < 0.05 and mid.preferred == "rest"
    strong = _start(1.0, 0.5, n, seed=1)
    assert strong.preferred == "free" and strong.reason == ""
    for kw, why in (({"u": 2.0}, "bound"), ({"u": -2.0}, "bound")):
        out = _start(1.0, 0.5, n, seed=1, **kw)
        assert out.preferred == "rest" and why in out.reason
    resid = np.random.default_rng(1).normal(size=n)
    rest, free = _fake_fit(1.0, n, 4), _fake_fit(0.5, n, 5, resid=resid)
    robust = compare_start(rest, free, rest, 0.0, loss="soft_l1")
    assert robust.preferred == "rest" and "soft_l1" in robust.reason
    for m in (8, 30, 300):
        same = compare_start(_fake_fit(0.5, m, 4), _fake_fit(0.5, m, 5), _fake_fit(0.5, m, 4), 0.0)
        assert same.preferred == "rest" and same.lr_test_p == 1.0 and same.delta_aicc < 0


def test_fit_start_takes_the_rho_bound_of_the_free_fits_residuals_from_its_caller():
    """`logfit.fit_start` hands rom_v0's residuals to the noise_rho it is given (the diagnosis'
    bound: `dynamics` may not import `diagnose`) and uses what it returns; residuals that are
    not finite give 0.95, the most cautious, without calling it."""
    from pgrpo.dynamics.logfit import fit_start

    n = 200
    resid = np.random.default_rng(1).normal(size=n)
    rest, free = _fake_fit(1.0, n, 4), _fake_fit(0.5, n, 5, resid=resid)
    seen = []

    def noise_rho(r):
        seen.append(np.array(r))
        return 0.37

    out, v0 = fit_start(np.arange(n), resid, rest, noise_rho, v0=free)
    assert v0 is free and out.rho_bound == 0.37 and np.array_equal(seen[0], resid)
    free.reward = np.where(np.arange(n) == 3, np.nan, resid)
    out, _ = fit_start(np.arange(n), resid, rest, noise_rho, v0=free)
    assert out.rho_bound == 0.95 and len(seen) == 1


def test_the_start_line_says_which_way_the_start_differs():
    up, dip = _start(1.0, 0.5, 200, seed=1, u=-0.1), _start(1.0, 0.5, 200, seed=1, u=0.1)
    assert "faster than a start from rest" in up.sentence()
    assert "first moved away" in dip.sentence() and "faster" not in dip.sentence()


def test_the_closed_form_test_shrinks_its_sample_by_the_rho_it_is_given():
    """`compare_constrained` with noise_rho (what `pgrpo fit` and the report pass: the diagnosis'
    bound) hands the free fit's residuals to it and tests at that rho; without it, at the
    residuals' point estimate (`fit_curve`'s default). The p-value is the likelihood ratio's at
    that rho, and "rejected" is p < CLOSED_FORM_P."""
    from pgrpo.dynamics.constrained import CLOSED_FORM_P, likelihood_ratio

    t, reward, lr = _closed_form_run(beta1=0.9, k=0.03, n=120, seed=4)
    seen = []

    def noise_rho(r):
        seen.append(np.array(r))
        return 0.6

    res = fit_curve(t, reward, lr=lr, beta1=0.5, noise_rho=noise_rho)  # beta1 0.5: off the truth
    m = res.metrics
    assert np.allclose(seen[0], res.reward - res.fitted) and len(seen) == 1
    assert m["lr_test_rho"] == 0.6 and m["lr_test_rho_source"] == "bound"
    assert m["lr_test_p"] == pytest.approx(likelihood_ratio(res, res.constrained, rho=0.6)[1])
    assert m["closed_form"] == ("rejected" if m["lr_test_p"] < CLOSED_FORM_P else "consistent")
    point = fit_curve(t, reward, lr=lr, beta1=0.5).metrics
    assert point["lr_test_rho_source"] == "point"
    assert point["lr_test_rho"] == pytest.approx(min(max(res.residual_autocorr, 0.0), 0.95))
    assert point["lr_test_p"] == pytest.approx(likelihood_ratio(res, res.constrained)[1])
    assert point["lr_test_p"] != pytest.approx(m["lr_test_p"])  # the rho moved the test


def test_the_closed_form_level_is_the_one_the_bench_measured():
    from pgrpo.dynamics.constrained import CLOSED_FORM_P

    assert CLOSED_FORM_P == 0.05  # bench/closed_form_check.py: the bound's rate at this level
