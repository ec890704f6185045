"""bench/forecast_ceiling.py: the exact win probability of the prefix mean against the last-10
mean on a flat run of Gaussian AR(1) noise agrees with simulation for random lengths and rho;
a prefix of 10 points or fewer never wins (a tie is no win); on white noise more points before
the cut never lower it; the script runs on corpus folders and says a bad folder in one line,
exit 2."""

from __future__ import annotations

import json
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
from forecast_ceiling import ar1_covariance, flat_win_probability  # noqa: E402

CURVES = ROOT.parent / "shared" / "data" / "curves"
SCRIPT = ROOT / "bench" / "forecast_ceiling.py"


def _simulated(m: int, h: int, rho: float, draws: int, seed: int) -> float:
    chol = np.linalg.cholesky(ar1_covariance(m + h, rho) + 1e-12 * np.eye(m + h))
    e = np.random.default_rng(seed).normal(size=(draws, m + h)) @ chol.T
    after = e[:, m:].mean(1)
    whole, last = np.abs(e[:, :m].mean(1) - after), np.abs(e[:, m - 10 : m].mean(1) - after)
    return float(np.mean(whole < last))


@settings(max_examples=12, deadline=None)
@given(
    m=st.integers(11, 120),
    h=st.integers(1, 120),
    rho=st.sampled_from([0.0, 0.3, 0.6, 0.85]),
    seed=st.integers(0, 2**16),
)
def test_the_closed_form_is_the_simulated_probability(m, h, rho, seed):
    draws = 20_000  # sd of the simulated share <= 0.0036
    assert flat_win_probability(m, h, rho) == pytest.approx(
        _simulated(m, h, rho, draws, seed), abs=0.02
    )


@given(m=st.integers(1, 10), h=st.integers(1, 50), rho=st.floats(0.0, 0.9))
def test_a_prefix_of_ten_points_or_fewer_never_wins(m, h, rho):
    assert flat_win_probability(m, h, rho) == 0.0


@given(h=st.integers(1, 200))
def test_more_points_before_the_cut_never_lower_it_on_white_noise(h):
    p = [flat_win_probability(m, h) for m in range(11, 200, 7)]
    assert all(b >= a - 1e-12 for a, b in zip(p, p[1:], strict=False))
    assert 0.5 < p[-1] < 1.0


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
    assert s["expected_wins_white"] == pytest.approx(sum(r["ceiling_white"] for r in rows))
    assert s["consensus_wins"] == sum(r["consensus_wins"] for r in rows)
    assert all(0.0 <= r["ceiling_rho"] <= 1.0 and 0.0 <= r["rho"] <= 0.95 for r in rows)


def test_a_folder_without_an_index_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "index.json" in proc.stderr
