"""bench/free_start.py: its curves from rest start at R_0 and rise towards R_inf; its rows read
a corpus folder with the described fit's R^2; a bad folder is one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from free_start import ar1, from_rest, real_rows  # noqa: E402

SCRIPT = ROOT / "bench" / "free_start.py"


@settings(max_examples=30, deadline=None)
@given(n=st.integers(30, 400), seed=st.integers(0, 2**16))
def test_curves_from_rest_start_at_r0_and_rise(n, seed):
    y = from_rest(n, np.random.default_rng(seed))
    assert y.shape == (n,) and abs(y[0] - 0.2) < 1e-12
    assert y[-1] > y[0] + 0.25 and np.all(y <= 0.7 + 0.2)  # it rises towards R_inf 0.7


def test_ar1_noise_has_its_rho_and_unit_sd():
    e = ar1(200_000, 0.8, np.random.default_rng(0))
    assert abs(np.std(e) - 1.0) < 0.02 and abs(np.corrcoef(e[:-1], e[1:])[0, 1] - 0.8) < 0.01


def test_real_rows_give_the_described_fit(tmp_path):
    t = np.arange(1, 201)
    y = 0.8 - 0.5 * (0.5 * np.exp(-t / 3.0) + 0.5 * np.exp(-t / 150.0))
    y = y + np.random.default_rng(3).normal(0, 0.01, t.size)
    (tmp_path / "two.csv").write_text(
        "step,reward\n" + "".join(f"{s},{v:.5f}\n" for s, v in zip(t, y, strict=True))
    )
    (tmp_path / "index.json").write_text(json.dumps({"runs": [
        {"name": "two", "csv": "two.csv", "repo": "x/y", "G": 8, "prompts_per_step": 32,
         "verdict": "learning"}]}))  # fmt: skip
    (row,) = real_rows([tmp_path])  # G 8 x 32 prompts: the reported rom is rom_starved
    assert row["preferred"] == "free" and row["r2_described"] == row["r2_free"] > row["r2_rest"]
    assert row["n_rollouts"] == 256 and row["reference"]


def test_a_folder_without_an_index_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--curves", "1"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "index.json" in proc.stderr


def test_the_rule_reads_few_free_starts_on_long_white_noise():
    """A seeded slice of the null table: 20 pure-noise curves of 300 points (the cell where the
    nominal test at 0.05 read 12%); the rule reads at most 2 (the stored table: 1 of 100)."""
    from pgrpo.diagnose.nullmodel import lag1_autocorr
    from pgrpo.dynamics.logfit import fit_log
    from pgrpo.logs.base import RewardLog

    rng = np.random.default_rng(11)
    step = np.arange(1, 301, dtype=float)
    said = sum(
        fit_log(RewardLog(step, 0.5 + 0.1 * ar1(300, 0.0, rng), {}, {}, (), "n", "n", "reward"),
                noise_rho=lag1_autocorr)
        .free_start for _ in range(20)
    )  # fmt: skip
    assert said <= 2
