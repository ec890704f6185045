"""bench/forecast_ceiling.py: on a flat run of Gaussian AR(1) noise, the exact win probability
of the prefix mean against the last-10 mean and the ceiling (the most any forecast wins) agree
with a simulation that builds the noise by its recursion (not with the covariance the code
uses) and with the closed forms of white noise; a forecast a hair from the last-10 mean towards
the best linear unbiased prediction reaches the ceiling, and neither the prefix mean nor that
prediction itself passes it; the prediction's weights sum to 1 and beat the prefix mean's
error under autocorrelation; the script runs on corpus folders (a run too short to forecast is
kept with empty columns) and says a bad folder in one line, exit 2."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import corpus_folder
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from forecast_ceiling import blup_weights, flat_win_ceiling, flat_win_probability  # noqa: E402

CURVES = ROOT.parent / "shared" / "data" / "curves"
SCRIPT = ROOT / "bench" / "forecast_ceiling.py"
DRAWS = 40_000  # sd of a simulated share <= 0.0025


def _ar1(rho: float, n: int, draws: int, seed: int) -> np.ndarray:
    """[draws, n] unit-variance AR(1) noise by its recursion."""
    z = np.random.default_rng(seed).normal(size=(draws, n))
    e = np.empty_like(z)
    e[:, 0] = z[:, 0]
    for t in range(1, n):
        e[:, t] = rho * e[:, t - 1] + math.sqrt(1.0 - rho**2) * z[:, t]
    return e


def _wins(f: np.ndarray, last: np.ndarray, after: np.ndarray) -> float:
    return float(np.mean(np.abs(f - after) < np.abs(last - after)))


lengths = {"m": st.integers(11, 80), "h": st.integers(1, 80), "seed": st.integers(0, 2**16)}


@settings(max_examples=10, deadline=None)
@given(rho=st.sampled_from([0.0, 0.3, 0.6, 0.85]), **lengths)
def test_the_figures_are_the_simulated_ones(m, h, rho, seed):
    e = _ar1(rho, m + h, DRAWS, seed)
    x, after = e[:, :m], e[:, m:].mean(1)
    last = x[:, -10:].mean(1)
    pred = x @ blup_weights(m, h, rho)
    nudge = last + 1e-9 * np.sign(pred - last)
    assert _wins(x.mean(1), last, after) == pytest.approx(
        flat_win_probability(m, h, rho), abs=0.015
    )
    ceiling = flat_win_ceiling(m, h, rho)
    assert _wins(nudge, last, after) == pytest.approx(ceiling, abs=0.015)
    assert _wins(x.mean(1), last, after) <= ceiling + 0.015
    assert _wins(pred, last, after) <= ceiling + 0.015


@given(m=st.integers(11, 300), h=st.integers(1, 300))
def test_white_noise_closed_forms(m, h):
    u = 1 / 10 - 1 / m
    mean_form = 0.5 + math.asin(math.sqrt(u / (3 / m + 1 / 10 + 4 / h))) / math.pi
    ceiling_form = 0.5 + math.atan(math.sqrt(u / (1 / m + 1 / h))) / math.pi
    assert flat_win_probability(m, h) == pytest.approx(mean_form, abs=1e-9)
    assert flat_win_ceiling(m, h) == pytest.approx(ceiling_form, abs=1e-9)
    assert np.allclose(blup_weights(m, h), 1.0 / m)


@settings(max_examples=10, deadline=None)
@given(rho=st.sampled_from([0.3, 0.6, 0.85]), **lengths)
def test_the_prediction_is_unbiased_and_beats_the_prefix_mean(m, h, rho, seed):
    w = blup_weights(m, h, rho)
    assert w.sum() == pytest.approx(1.0, abs=1e-9)
    e = _ar1(rho, m + h, DRAWS, seed) + 5.0  # a level the weights must not need to know
    x, after = e[:, :m], e[:, m:].mean(1)
    assert np.mean(x @ w - after) == pytest.approx(0.0, abs=0.05)
    assert np.mean((x @ w - after) ** 2) <= np.mean((x.mean(1) - after) ** 2) * 1.01


@given(m=st.integers(1, 10), h=st.integers(1, 50))
def test_a_prefix_of_ten_points_or_fewer_on_white_noise_gives_no_win(m, h):
    assert flat_win_probability(m, h) == 0.0 and flat_win_ceiling(m, h) == 0.0


@pytest.mark.skipif(not (CURVES / "index.json").exists(), reason="needs ../shared/data/curves")
def test_the_script_counts_ceilings_and_wins(tmp_path):
    names = ("grponorm_easy_standard", "countdown_trl_grpo", "gsm8k_qwen3_1p7b_abl_baseline")
    folder = corpus_folder(tmp_path / "c", names)
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), str(folder), "--out", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["command"].startswith("python bench/forecast_ceiling.py") and doc["date"]
    rows, s = doc["rows"], doc["summary"]["all"]
    assert len(rows) == 3 and s["runs"] == 3 and s["bar_wins"] == 2
    assert s["ceiling_expected_white"] == pytest.approx(sum(r["ceiling_white"] for r in rows))
    assert s["consensus_wins"] == sum(r["consensus_wins"] for r in rows)
    for r in rows:
        assert 0.0 <= r["rho"] <= 0.95
        assert r["prefix_mean_p_white"] <= r["ceiling_white"] <= 1.0
        assert r["prefix_mean_p_rho"] <= r["ceiling_rho"] + 1e-12
        assert r["consensus_direction_right"] >= r["consensus_wins"]  # a win needs the direction


@pytest.mark.skipif(not (CURVES / "index.json").exists(), reason="needs ../shared/data/curves")
def test_a_run_too_short_to_forecast_is_kept_without_its_forecast(tmp_path):
    folder = corpus_folder(tmp_path / "c", ("countdown_trl_grpo",))
    index = json.loads((folder / "index.json").read_text())
    csv = folder / index["runs"][0]["csv"]
    csv.write_text("".join(csv.read_text().splitlines(keepends=True)[:11]))  # 10 rows
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), str(folder), "--out", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert row["consensus_wins"] is None and row["forecast_error"]


def test_a_folder_without_an_index_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "index.json" in proc.stderr
