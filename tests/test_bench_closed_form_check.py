"""bench/closed_form_check.py: its curves follow the closed form from R_0 towards R_inf; its real
rows give the closed-form test under both rhos; a bad folder is one line, exit 2; a seeded slice
of its table holds the bound's false-rejection rate."""

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
from closed_form_check import ar1, closed_form_curve, decisions, real_rows  # noqa: E402

SCRIPT = ROOT / "bench" / "closed_form_check.py"


@settings(max_examples=30, deadline=None)
@given(n=st.integers(30, 400), seed=st.integers(0, 2**16))
def test_closed_form_curves_start_at_r0_and_head_for_r_inf(n, seed):
    y = closed_form_curve(n, np.random.default_rng(seed))
    assert y.shape == (n,) and abs(y[0] - 0.2) < 1e-12
    assert abs(y[-1] - 0.7) < abs(y[0] - 0.7)  # nearer R_inf 0.7 at the end than at the start


def test_real_rows_give_both_rhos_and_verdicts(tmp_path):
    t = np.arange(1, 121)
    y = 0.7 - 0.5 * np.exp(-t / 30.0) + np.random.default_rng(2).normal(0, 0.03, t.size)
    (tmp_path / "r.csv").write_text(
        "step,reward\n" + "".join(f"{s},{v:.5f}\n" for s, v in zip(t, y, strict=True))
    )
    (tmp_path / "index.json").write_text(json.dumps({"runs": [
        {"name": "r", "csv": "r.csv", "repo": "x/y", "learning_rate": 1e-5}]}))  # fmt: skip
    (row,) = real_rows([tmp_path])  # lr from the index, beta1 0.9 (corpus_entry)
    assert {row["point_closed_form"], row["bound_closed_form"]} <= {"consistent", "rejected"}
    assert 0.0 <= row["bound_p"] <= 1.0 and 0.0 <= row["point_p"] <= 1.0
    assert row["bound_rho"] in (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9)


def test_a_folder_without_an_index_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--curves", "1"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "index.json" in proc.stderr


def test_the_bound_rarely_rejects_the_closed_form_when_it_holds():
    """A seeded slice of the table: 20 curves from the closed form, 100 points, AR(1) rho 0.8
    (the cell where the point estimate rejected 9 of 100 at the nominal 5%); the bound rejects
    at most 2 (the stored table: 3 of 100), and fewer than the point estimate (2 of these 20):
    with the point estimate in its place the second assertion fails."""
    rng = np.random.default_rng(7)
    said = [decisions(np.arange(100.0), closed_form_curve(100, rng) + 0.1 * ar1(100, 0.8, rng))
            for _ in range(20)]  # fmt: skip
    assert all(d is not None for d in said)
    assert sum(d["bound"] for d in said) <= 2
    assert sum(d["bound"] for d in said) < sum(d["point"] for d in said)
