"""`predict`'s regime label comes from the exact recursion, so it agrees with its own
oscillation onset and with what the recursion does when run."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pgrpo.dynamics.predict import predict, recursion_regime
from pgrpo.dynamics.recursion import oscillation_onset, simulate_recursion, spectral_radius
from pgrpo.errors import UserError


def test_the_reported_case_is_underdamped():
    """a = 0.027 at beta1 = 0.9 lies above the exact onset 0.0263: the mean oscillates (the
    continuum label, damping ratio 1.01, said 'overdamped')."""
    pred = predict(0.027, 0.9, 1.0).metrics
    assert pred["oscillation_onset_a"] == pytest.approx(0.02633, abs=1e-5)
    assert pred["regime"] == "underdamped"
    assert pred["continuum_regime"] == "overdamped"
    x = simulate_recursion(0.027, 0.9, 3000)[0]
    assert x.min() < 0  # it does oscillate


@settings(max_examples=60, deadline=None)
@given(st.floats(0.0, 0.98), st.floats(1e-3, 3.0), st.integers(1, 4))
@example(5e-324, 0.5, 1)  # a subnormal beta1: m k underflowed to 0 in the damping ratio
@example(0.9765625, 2.0625, 2)  # blurred eigenvalues, radius 1 + 4e-4: read 'underdamped'
def test_regime_agrees_with_the_onset_and_the_threshold(beta1, a, k):
    onset = oscillation_onset(beta1, k)
    assume(abs(a - onset) > 1e-6 * onset)
    pred = predict(a, beta1, 1.0, refresh_interval=k, n_steps=5).metrics
    regime = pred["regime"]
    if not pred["stable"]:
        assert regime == "unstable"
    elif regime == "marginal":  # spectral radius exactly 1 (a K = 2 at beta1 = 0)
        assert spectral_radius(a, beta1, k) == pytest.approx(1.0, abs=1e-12)
    else:
        assert regime == ("underdamped" if a > onset else "overdamped")


@settings(max_examples=40, deadline=None)
@given(st.floats(0.0, 0.95), st.floats(1e-3, 2.0))
def test_regime_matches_the_simulated_mean(beta1, a):
    """K = 1: 'overdamped' means x_n stays positive; 'underdamped' (clearly past the onset)
    means x_n changes sign; 'marginal' means it neither decays nor grows; 'unstable' means it
    grows."""
    onset = oscillation_onset(beta1, 1)
    assume(a < 0.95 * onset or a > 1.1 * onset)
    x = simulate_recursion(a, beta1, 20_000)[0]
    regime = recursion_regime(a, beta1, 1)
    if regime == "overdamped":
        assert x.min() >= -1e-12  # decays through denormals, whose rounding can dip below 0
    elif regime == "underdamped":
        assert x.min() < 0 and np.abs(x[-100:]).max() <= 1.0
    elif regime == "marginal":  # spectral radius 1 (a = 2 at beta1 = 0): never settles
        assert 0.5 < np.abs(x[-100:]).max() <= 1.0 + 1e-9
    else:
        assert regime == "unstable" and not np.abs(x[-100:]).max() <= 1.0


@pytest.mark.parametrize("kw", [{"group_size": 1}, {"n_steps": 0}, {"n_steps": -5}])
def test_refuses_g1_and_no_steps(kw):
    with pytest.raises(UserError):
        predict(0.01, 0.9, 1.0, **kw)


def test_cli_prints_the_exact_regime(tmp_path):
    from pgrpo.cli import _load_commands, app

    _load_commands()
    res = CliRunner().invoke(
        app, ["predict", "--lr", "0.027", "--kappa", "1", "--out", str(tmp_path), "--json"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["regime"] == "underdamped" and doc["oscillation_onset_a"] < doc["a"]


@pytest.mark.parametrize("K", [20, 100, 117])
def test_where_the_continuum_has_no_limit_the_prediction_is_the_exact_recursion(K):
    """a = 0.02, beta1 = 0.9: c = 1 - a (K - 1) / 2 <= 0 from K = 101, while the recursion is
    stable up to K* = 118. predict reported stable: true with tau -8.0, stationary_std null and
    (K = 100, c = 0.01) a std of 0.177 against 0.036 simulated (formula review 2026-12-03).
    Now tau is the window map's decay time and the std the recursion's own, checked here against
    a simulation of the recursion with the same per-step noise."""
    from pgrpo.dynamics.model import rom_coefficients

    pred = predict(0.02, 0.9, 1.0, refresh_interval=K, n_steps=2000)
    m = pred.metrics
    assert m["stable"] is True and m["refresh_threshold"] == 118
    assert 0 < m["tau"] < np.inf and m["continuum_tau"] == pytest.approx(pred.coefficients.c / 0.02)
    D = rom_coefficients(0.02, 0.9, 1.0, refresh_interval=K, group_size=8).D
    rng = np.random.default_rng(K)
    noise = rng.normal(0.0, np.sqrt(2 * D), size=(64, 30_000))
    x = simulate_recursion(0.02, 0.9, 30_000, refresh_interval=K, x0=0.0, noise=noise)
    assert m["stationary_std"] == pytest.approx(x[:, 10_000:].std(), rel=0.05)
    if K > 100:  # no continuum limit: its closed form is not drawn, the exact mean is
        assert np.isnan(pred.closed_form).all() and np.isfinite(pred.mean).all()
        assert m["continuum_regime"] == "unstable" and m["inflection_time"] is not None


def test_tau_is_the_slow_decay_of_the_exact_mean():
    """K = 1, a = 0.02, beta1 = 0.9: the mean's distance to the plateau shrinks by e every tau
    steps late in the run (c / k = 50 ignores the mass; the slow mode decays in 37.3)."""
    pred = predict(0.02, 0.9, 1.0, n_steps=1500, R0=0.0, R_inf=1.0)
    gap = 1.0 - pred.mean
    assert np.log(gap[300] / gap[700]) == pytest.approx(400 / pred.metrics["tau"], rel=1e-3)
    assert pred.metrics["continuum_tau"] == pytest.approx(50.0)


def test_a_schedule_must_peak_at_lr_and_its_inflection_is_the_exact_means():
    """With lr_schedule the metrics used the constant lr without checking it was the peak (lr
    1e-6 under a 0.02 schedule: 'stable' at K = 60 while the mean ran to -2e31), and the
    inflection was the constant-lr continuum's 20 steps under a 500-step warm-up whose mean rises
    fastest at step 167 (review 2026-12-03)."""
    sched = np.minimum(1.0, np.arange(1, 2001) / 500) * 0.02
    pred = predict(0.02, 0.9, 1.0, n_steps=2000, lr_schedule=sched)
    assert pred.metrics["inflection_time"] == int(np.argmax(np.abs(np.diff(pred.mean)))) == 167
    with pytest.raises(UserError, match="not the peak of lr_schedule"):
        predict(1e-6, 0.9, 1.0, n_steps=2000, lr_schedule=sched)
