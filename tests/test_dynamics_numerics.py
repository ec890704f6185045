"""The dynamics model at the edges of float64: a = lr kappa -> 0, beta1 -> 1, huge lr, the
marginal map, and what `pgrpo predict` says there (a hostile review's findings, 2026-12-04)."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.dynamics.optimizers import adam_self_consistent, heavy_ball_continuum
from pgrpo.dynamics.predict import predict, recursion_regime
from pgrpo.dynamics.recursion import (
    SMALL_A,
    first_unstable,
    refresh_threshold,
    resolved,
    spectral_radius,
    window_stationary_variance,
    window_timescale,
)

runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def _commands():
    _load_commands()


def _continuum_std(a: float, beta1: float, k: int, noise: float = 1.0) -> float:
    c = heavy_ball_continuum(a, beta1, k)[1]
    return math.sqrt(noise / (2.0 * c * a))


@settings(max_examples=60, deadline=None)
@given(
    log_gap=st.floats(min_value=-9.0, max_value=-3.0),
    k=st.sampled_from([1, 2, 4, 16, 32]),
)
def test_the_stationary_std_tends_to_the_continuum_as_beta1_tends_to_1(log_gap, k):
    """As beta1 -> 1 the recursion's variance tends to the continuum's D / (c k); the Lyapunov
    solve gave a std 34% low at beta1 = 1 - 1e-7 and a negative variance past it."""
    beta1 = 1.0 - 10.0**log_gap
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no LinAlgWarning either
        var = window_stationary_variance(0.02, beta1, k, 1.0)
    assert var > 0 and math.isfinite(var)
    assert math.sqrt(var) == pytest.approx(_continuum_std(0.02, beta1, k), rel=1e-3)


@settings(max_examples=60, deadline=None)
@given(log_a=st.floats(min_value=-300.0, max_value=-3.0), beta1=st.sampled_from([0.0, 0.9, 0.99]))
def test_the_timescale_tends_to_c_over_k_as_a_tends_to_0(log_a, beta1):
    """tau -> the continuum's slow mode (c / a as a -> 0), with no drift where float64 loses the
    eigenvalue gap (tau was 8.19e13 for a true 1e14 at a = 1e-14, then stuck at 1.5e15)."""
    a = 10.0**log_a
    tau = window_timescale(a, beta1, 4)
    m, c = heavy_ball_continuum(a, beta1, 4)
    slow = (c + math.sqrt(c * c - 4.0 * m * a)) / 2.0  # a / (slow root): c as a -> 0
    assert tau * a == pytest.approx(slow, rel=max(1e-6, 50 * a))
    assert recursion_regime(a, beta1, 4) == "overdamped"


def test_the_exact_and_the_continuum_paths_meet_at_the_switch():
    """Either side of `resolved`, tau and the std agree to 1e-5: no step in the output."""
    grid = np.geomspace(1e-8, 1e-4, 60)
    flags = [resolved(a, 0.9, 4) for a in grid]
    assert not flags[0] and flags[-1]
    i = flags.index(True)
    lo, hi = grid[i - 1], grid[i]
    assert window_timescale(lo, 0.9, 4) * lo == pytest.approx(
        window_timescale(hi, 0.9, 4) * hi, rel=1e-4
    )
    s_lo = math.sqrt(window_stationary_variance(lo, 0.9, 4, 1.0) * lo)
    s_hi = math.sqrt(window_stationary_variance(hi, 0.9, 4, 1.0) * hi)
    assert s_lo == pytest.approx(s_hi, rel=1e-4)


@pytest.mark.parametrize("beta1", [0.0, 0.5, 0.9, 0.99])
@pytest.mark.parametrize("a", [1e-8, 3e-8, 1e-7, 1e-6, 1e-5, 1e-4])
def test_the_small_a_threshold_is_the_exact_scan(a, beta1):
    """Below SMALL_A, K* is the first integer past 2 / a + 2 beta1 / (1 - beta1); where the
    exact scan still resolves the map (a >= 1e-8 here) the two agree to the integer."""
    scan = first_unstable(lambda k: spectral_radius(a, beta1, k), 10**12, 1e-12)
    thumb = 2.0 / a + 2.0 * beta1 / (1.0 - beta1)
    assert scan == math.floor(thumb + 8 * math.ulp(thumb)) + 1
    assert refresh_threshold(a, beta1).K_star == scan


def test_a_threshold_past_float64_integers_is_said_not_invented():
    thr = refresh_threshold(1e-300, 0.9)
    assert thr.K_star is None and thr.rule_of_thumb > 1e299
    assert refresh_threshold(SMALL_A / 2, 0.9).K_star == math.floor(4e7 + 18) + 1
    pred = predict(1.0, 0.9, 1e-300)
    assert pred.metrics["refresh_threshold"] is None
    assert "past float64's exact integers" in pred.metrics["refresh_threshold_statement"]
    assert pred.metrics["tau"] == pytest.approx(1e300, rel=1e-9)


@pytest.mark.parametrize("a0", [1e-18, 1e-12, 1e-9, 1e-6])
def test_adam_closure_solves_down_to_tiny_stiffness(a0):
    """w^2 = 1 + a^2 Phi had no root below a0 = 1e-12 (every tiny a read as unstable); the RMS
    then tends to sqrt(a0 K / 2)."""
    w, rms = adam_self_consistent(a0, 0.9, 4)
    assert w == pytest.approx(1.0, abs=1e-5)
    assert rms == pytest.approx(math.sqrt(a0 * 4 / 2), rel=1e-3)


def _predict(tmp_path, *args: str):
    return runner.invoke(app, ["predict", *args, "--out", str(tmp_path)])


@pytest.mark.parametrize(
    "args",
    [
        ("--lr", "1e200", "--kappa", "1"),  # OverflowError traceback, exit 1
        ("--lr", "1e200", "--kappa", "1e140"),  # "Array must not contain infs or NaNs"
        ("--lr", "1e-300", "--kappa", "1e-300"),  # a underflows to 0
        ("--lr", "0", "--kappa", "1"),
    ],
)
def test_predict_out_of_range_settings_get_one_line_with_a_fix(tmp_path, args):
    res = _predict(tmp_path, *args)
    assert res.exit_code == 2, res.output
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.output
    assert "; " in lines[0] or "check the units" in lines[0]  # a fix, not only the problem


@pytest.mark.parametrize("beta1", ["0.9999999", "0.99999999"])
def test_predict_near_beta1_1_gives_the_continuum_std(tmp_path, beta1):
    """The std was 0.01168 (true 0.01768) at 1 - 1e-7, 'math domain error' at 1 - 1e-8."""
    res = _predict(tmp_path, "--lr", "0.02", "--kappa", "1", "--beta1", beta1, "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["stationary_std"] == pytest.approx(math.sqrt(data["D"] / (data["c"] * data["k"])))


def test_adam_predict_at_tiny_stiffness(tmp_path):
    res = _predict(tmp_path, "--lr", "1e-9", "--kappa", "1e-9", "--optimizer", "adam", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["stable"] is True


@pytest.mark.parametrize(
    "args",
    [("--lr", "0.01", "--beta1", "0", "--refresh-interval", "200"), ("--lr", "2", "--beta1", "0")],
)
def test_a_marginal_map_is_named_and_its_infinite_tau_said(tmp_path, args):
    """|rho| = 1: a period-2 oscillation for ever; it read 'underdamped' with '-' for tau."""
    res = _predict(tmp_path, *args, "--kappa", "1")
    assert res.exit_code == 0, res.output
    assert "marginal" in res.output and "inf (never decays)" in res.output
    data = json.loads(_predict(tmp_path, *args, "--kappa", "1", "--json").stdout)
    assert data["regime"] == "marginal" and data["stable"] is True and data["tau"] is None


def test_no_inflection_says_why(tmp_path):
    res = _predict(
        tmp_path, "--lr", "0.02", "--kappa", "1", "--refresh-interval", "110", "--steps", "50"
    )
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    # not the R0 = R_inf reason (the noise note names --r-inf since session 36)
    assert "no inflection_time" in text and "--r0 equals" not in text and "horizon" in text
    same = _predict(tmp_path, "--lr", "0.02", "--kappa", "1", "--r0", "0.5", "--r-inf", "0.5")
    assert "--r0 equals --r-inf" in " ".join(same.output.split())
    ok = json.loads(_predict(tmp_path, "--lr", "0.02", "--kappa", "1", "--json").stdout)
    assert ok["inflection_time"] > 0 and ok["inflection_note"] == ""


def test_adam_says_what_it_ignores_and_never_cites_an_infinite_bound(tmp_path):
    res = _predict(tmp_path, "--lr", "1e-6", "--kappa", "2e4", "--refresh-interval", "500",
                   "--optimizer", "adam", "--beta1", "0.999", "--beta2", "0.99")  # fmt: skip
    text = " ".join(res.output.split())
    assert res.exit_code == 0 and "at most inf" not in text and "beta1^2 >= beta2" in text
    assert "--group-size, --batch-prompts and --noise-var do not change stationary_std" in text
    sgd = _predict(tmp_path, "--lr", "1e-6", "--kappa", "2e4", "--beta2", "0.9")
    assert "--beta2 0.9 is unused by sgd_momentum" in " ".join(sgd.output.split())
    assert "unused" not in " ".join(
        _predict(tmp_path, "--lr", "1e-6", "--kappa", "2e4").output.split()
    )
