"""bench/win_direction.py: the forecaster that only says "a hair above the last-10 mean" wins
exactly on the runs that rose after the cut, with the last-10 mean's own error; keeping the
default from forecasting below the recent level never loses a win on a run that rose; the
stored results are what the stored rows give; a missing or wrong rows file is one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from win_direction import FLOOR_KS, summarise  # noqa: E402

SCRIPT = ROOT / "bench" / "win_direction.py"
STORED = ROOT / "bench" / "results" / "win_direction.json"


def _rows(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    last10 = rng.normal(size=n)
    cols = (last10 + rng.normal(0.1, 0.3, n), last10, last10 + rng.normal(0, 0.2, n),
            rng.uniform(0.2, 2.0, n))  # fmt: skip
    return [{"folder": "/x/holdout9/all/curves", "observed": float(y), "last10": float(v),
             "pred_consensus": float(c), "std": float(s), "cut": 0.5}
            for y, v, c, s in zip(*cols, strict=True)]  # fmt: skip


@settings(max_examples=30, deadline=None)
@given(n=st.integers(3, 60), seed=st.integers(0, 2**16))
def test_hair_above_is_the_direction_and_nothing_else(n, seed):
    rows = _rows(n, seed)
    s = summarise(rows)
    assert s["hair_above"]["wins"] == s["rose"] == sum(r["observed"] > r["last10"] for r in rows)
    assert s["hair_above"]["median"] == pytest.approx(s["last10_median"], abs=1.5e-4)  # 4 decimals
    rose = [r for r in rows if r["observed"] > r["last10"]]
    if rose:  # on the runs that rose, a floor at the recent level can only add wins
        on_rose = summarise(rose)
        assert on_rose["floor_0"]["wins"] >= on_rose["consensus"]["wins"]
    fell = [r for r in rows if r["observed"] < r["last10"]]
    if fell:  # and on those that fell, every floor wins nothing
        on_fell = summarise(fell)
        assert all(on_fell[f"floor_{k:g}"]["wins"] == 0 for k in FLOOR_KS)


def test_the_stored_results_are_the_stored_rows():
    stored = json.loads(STORED.read_text())
    rows = json.loads((ROOT / stored["rows_file"].split("/work/main/")[-1]).read_text())["rows"]
    again = json.loads(json.dumps(summarise([r for r in rows if r.get("cut", 0.5) == 0.5])))
    assert again == stored["pooled"]


@pytest.mark.parametrize("content", [None, '{"rows": [{"cut": 0.5, "observed": 1.0}]}'])
def test_bad_rows_file_is_one_line_exit_2(tmp_path, content):
    path = tmp_path / "rows.json"
    if content is not None:
        path.write_text(content)
    out = tmp_path / "out.json"
    cmd = [sys.executable, str(SCRIPT), "--rows", str(path), "--out", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 2
    assert len(res.stdout.strip().splitlines()) == 1 and res.stdout.startswith("error:")
    assert not out.exists()
