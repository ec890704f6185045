"""The fit's R^2 read against the noise (issue #13's R^2 bar): the noise ceiling, the R^2 a
perfect mean curve reaches under the log's batch noise, and R^2 on block means. `pgrpo fit`
printed a per-step R^2 of 0.74 on a 256-rollout CS336 run with nothing to say that 0.79 is the
most any curve can reach there and that the smoothed curve is fitted at 0.96."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.dynamics.fit import fit_curve
from pgrpo.dynamics.logfit import block_r2, fit_quality, noise_ceiling

runner = CliRunner()
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "curves"


@pytest.fixture(scope="module", autouse=True)
def _commands():
    _load_commands()


def _r2(y: np.ndarray, f: np.ndarray) -> float:
    return 1.0 - float(np.sum((y - f) ** 2)) / float(np.sum((y - y.mean()) ** 2))


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(300, 800),
    sigma=st.floats(0.02, 0.2),
    gain=st.floats(0.2, 1.0),
    tau=st.floats(20.0, 150.0),
)
def test_the_true_mean_curve_reaches_the_noise_ceiling(seed, n, sigma, gain, tau):
    """A perfect mean curve's R^2 is the ceiling up to sampling error; blocks of 10 average the
    noise down, so the same curve's block R^2 is higher."""
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=float)
    mean = 0.2 + gain * (1 - np.exp(-t / tau))
    y = mean + rng.normal(0, sigma, n)
    ceiling, r2 = noise_ceiling(y), _r2(y, mean)
    # sd of the ceiling estimate: MAD of n differences (~1.7/sqrt(n) relative on sigma^2)
    tol = 4 * 1.7 / math.sqrt(n) * sigma**2 / float(np.var(y)) + 0.01
    assert abs(ceiling - r2) < tol, (ceiling, r2)
    assert block_r2(y, mean) > r2


def test_block_r2_and_ceiling_are_undefined_where_they_should_be():
    y = np.linspace(0, 1, 39)
    assert math.isnan(block_r2(y, y))  # 3 blocks of 10
    assert block_r2(np.linspace(0, 1, 40), np.linspace(0, 1, 40)) == pytest.approx(1.0)
    assert math.isnan(block_r2(np.ones(50), np.ones(50)))  # no variance between blocks
    assert math.isnan(noise_ceiling(np.full(30, 0.5)))


def test_fit_quality_of_a_fit():
    rng = np.random.default_rng(0)
    t = np.arange(200, dtype=float)
    y = 0.8 - 0.6 * np.exp(-t / 40) + rng.normal(0, 0.08, t.size)
    fit = fit_curve(t, y, "exponential")
    q = fit_quality(fit)
    assert q["r2"] == fit.r2 and q["block"] == 10
    assert q["r2"] <= q["noise_ceiling"] + 0.02 < 1 and q["r2_block_means"] > 0.95
    assert "r2_block_means_constrained" not in q
    assert fit_quality(fit, constrained=fit)["r2_block_means_constrained"] == q["r2_block_means"]


@pytest.mark.skipif(not CORPUS.is_dir(), reason="needs ../shared/data/curves")
def test_pgrpo_fit_reads_a_research_scale_r2_against_its_noise(tmp_path):
    """The CS336 run of docs/dynamics.md: per-step R^2 0.743 under a ceiling of 0.789, 0.958 on
    10-step means (0.935 closed form); the same figures in --json and in the text."""
    log = CORPUS / "cs336_shibuki_no_std_norm.csv"
    args = ["fit", str(log), "--optimizer", "adamw", "--no-plot"]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    q = json.loads(res.stdout)["fit_quality"]
    assert q["r2"] == pytest.approx(0.743, abs=0.002)
    assert q["noise_ceiling"] == pytest.approx(0.789, abs=0.002)
    assert q["r2_block_means"] == pytest.approx(0.958, abs=0.002)
    assert q["r2_block_means_constrained"] == pytest.approx(0.935, abs=0.002)
    text = " ".join(runner.invoke(app, args).output.split())
    assert "noise ceiling of 0.789" in text and "on means of 10 points R^2 0.958" in text
    assert "closed form 0.935" in text


def test_a_constant_reward_says_r2_is_undefined_and_nothing_else(tmp_path):
    log = tmp_path / "flat.csv"
    log.write_text("step,reward\n" + "".join(f"{i},0.5\n" for i in range(60)))
    res = runner.invoke(app, ["fit", str(log), "--no-plot", "--json"])
    assert res.exit_code == 0, res.output
    q = json.loads(res.stdout)["fit_quality"]
    assert q["noise_ceiling"] is None and q["r2_block_means"] is None
    text = runner.invoke(app, ["fit", str(log), "--no-plot"]).output
    assert "R^2 n/a" in text and "noise ceiling" not in text


def test_the_report_states_the_ceiling_beside_the_r2(tmp_path):
    run = Path(__file__).resolve().parent / "fixtures" / "logs" / "pgrpo_run"
    fit = json.loads(runner.invoke(app, ["fit", str(run), "--no-plot", "--json"]).stdout)
    res = runner.invoke(app, ["report", str(run), "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    page = re.sub(r"<[^>]+>", "", (tmp_path / "rep" / "report.html").read_text())
    line = page[page.index("Fit ") :][:600]
    assert f"noise ceiling {fit['fit_quality']['noise_ceiling']:.3f}" in line
