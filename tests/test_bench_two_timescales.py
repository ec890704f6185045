"""bench/two_timescales.py: the two-exponential fit recovers the time constants of a noisy sum of
two exponentials and does no worse than one exponential on a curve with a single timescale; the
script reads research-scale learning runs of a corpus folder and says a bad folder in one line,
exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from two_timescales import fit_two, two_exponentials  # noqa: E402

SCRIPT = ROOT / "bench" / "two_timescales.py"


@settings(max_examples=8, deadline=None)
@given(
    tau1=st.floats(1.5, 6.0),
    tau2=st.floats(60.0, 200.0),
    seed=st.integers(0, 2**16),
)
def test_two_time_constants_are_recovered(tau1, tau2, seed):
    t = np.arange(300.0)
    clean = two_exponentials(t, 0.8, 0.3, tau1, 0.2, tau2)
    y = clean + np.random.default_rng(seed).normal(0, 0.005, t.size)
    got = fit_two(t, y)
    ceiling = 1 - np.sum((y - clean) ** 2) / np.sum((y - y.mean()) ** 2)  # the true curve's R^2
    assert got["r2"] >= ceiling - 1e-3
    assert got["tau_fast"] == pytest.approx(tau1, rel=0.25)
    assert got["tau_slow"] == pytest.approx(tau2, rel=0.25)


def test_one_timescale_is_fitted_as_well_as_by_one_exponential():
    t = np.arange(200.0)
    y = 0.7 - 0.4 * np.exp(-t / 30) + np.random.default_rng(0).normal(0, 0.02, t.size)
    one = 1 - np.sum((y - (0.7 - 0.4 * np.exp(-t / 30))) ** 2) / np.sum((y - y.mean()) ** 2)
    assert fit_two(t, y)["r2"] >= one - 1e-6


def test_a_folder_without_an_index_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "index.json" in proc.stderr
