"""bench/win_direction.py: the forecaster that only says "a hair above the last-10 mean" wins
exactly on the runs that rose after the cut, with the last-10 mean's own error; a tie is not a
win; a floor at the recent level moves a forecast below it to exactly that level, wins every run
that rose past it, and never a run that fell; per round and pooled, the stored results are what
the script gives on the stored rows, and its consensus figures are what bench/forecast_pooled.py
computed on its own; bad rows files are one line on stderr, exit 2, nothing written."""

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
from win_direction import FLOOR_KS, main, summarise  # noqa: E402

SCRIPT = ROOT / "bench" / "win_direction.py"
STORED = ROOT / "bench" / "results" / "win_direction.json"


def _row(y: float, last10: float, c: float, std: float = 1.0, folder: str = "/x/holdout9/a/b"):
    return {"folder": folder, "observed": y, "last10": last10, "pred_consensus": c, "std": std,
            "cut": 0.5}  # fmt: skip


def _rows(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    last10 = rng.normal(size=n)
    cols = (last10 + rng.normal(0.1, 0.3, n), last10, last10 + rng.normal(0, 0.2, n),
            rng.uniform(0.2, 2.0, n))  # fmt: skip
    return [_row(float(y), float(v), float(c), float(s)) for y, v, c, s in zip(*cols, strict=True)]


@settings(max_examples=30, deadline=None)
@given(n=st.integers(3, 60), seed=st.integers(0, 2**16))
def test_hair_above_is_the_direction_and_nothing_else(n, seed):
    rows = _rows(n, seed)
    s = summarise(rows)
    assert s["hair_above"]["wins"] == s["rose"] == sum(r["observed"] > r["last10"] for r in rows)
    assert s["hair_above"]["median"] == pytest.approx(s["last10_median"], abs=1.5e-4)  # 4 decimals
    rose = [r for r in rows if r["observed"] > r["last10"]]
    if rose:  # on the runs that rose, a floor at the recent level can only add wins
        assert summarise(rose)["floor_0"]["wins"] >= summarise(rose)["consensus"]["wins"]
    fell = [r for r in rows if r["observed"] < r["last10"]]
    if fell:  # and on those that fell, every floor wins nothing
        assert all(summarise(fell)[f"floor_{k:g}"]["wins"] == 0 for k in FLOOR_KS)


def test_ties_are_not_wins_and_floors_are_exact():
    tie = _row(y=1.0, last10=0.5, c=1.5)  # the same distance: not a win
    level = _row(y=0.5, last10=0.5, c=0.5)  # nothing moved: neither rose nor won
    assert summarise([tie])["consensus"]["wins"] == 0
    s = summarise([level])
    assert s["rose"] == 0 and s["hair_above"]["wins"] == 0 and s["consensus"]["wins"] == 0
    # below the recent level, the floor at +0.1 std lifts the forecast to last10 + 0.1 std = 0.7
    low = _row(y=0.9, last10=0.5, c=0.2, std=2.0)
    s = summarise([low])
    assert s["consensus"]["wins"] == 0 and s["floor_0.1"]["wins"] == 1
    assert s["floor_0.1"]["median"] == pytest.approx(abs(0.7 - 0.9) / 2.0, abs=1e-4)
    assert s["floor_0.3"]["median"] == pytest.approx(abs(1.1 - 0.9) / 2.0, abs=1e-4)
    assert s["floor_0.3"]["wins"] == 1  # 0.2 from the mean against the last-10 mean's 0.4
    above = _row(y=0.9, last10=0.5, c=0.85, std=2.0)  # a forecast above every floor stays
    assert summarise([above])["floor_0.1"]["median"] == summarise([above])["consensus"]["median"]


def test_the_stored_results_are_what_the_script_gives(tmp_path):
    stored = json.loads(STORED.read_text())
    rows_file = ROOT / stored["rows_file"].split("/work/main/")[-1]
    out = tmp_path / "again.json"
    assert main(["--rows", str(rows_file), "--out", str(out)]) == 0
    again = json.loads(out.read_text())
    assert again["rounds"] == stored["rounds"] and again["pooled"] == stored["pooled"]
    assert [r["round"] for r in stored["rounds"]] == [f"holdout{k}" for k in range(6, 24)]
    assert sum(r["runs"] for r in stored["rounds"]) == stored["pooled"]["runs"]
    # bench/forecast_pooled.py's own summary of the same rows, computed there
    pooled = json.loads(rows_file.read_text())["summary"]["pooled"]["0.5"]
    assert pooled["runs"] == stored["pooled"]["runs"]
    assert pooled["consensus"]["wins_vs_last10"] == stored["pooled"]["consensus"]["wins"]
    assert round(pooled["consensus"]["median_err"], 4) == stored["pooled"]["consensus"]["median"]
    assert round(pooled["median_err_last10"], 4) == stored["pooled"]["last10_median"]


@pytest.mark.parametrize(
    "content",
    [
        None,
        "{not json",
        "[1, 2]",
        '{"summary": {}}',
        '{"rows": {"a": 1}}',
        '{"rows": [{"cut": 0.3, "observed": 1.0}]}',
        json.dumps({"rows": [_row(1.0, 0.5, 0.7), {**_row(1.0, 0.5, 0.7), "observed": None}]}),
        json.dumps({"rows": [{k: v for k, v in _row(1.0, 0.5, 0.7).items() if k != "std"}]}),
    ],
)
def test_bad_rows_file_is_one_line_exit_2(tmp_path, content):
    path = tmp_path / "rows.json"
    if content is not None:
        path.write_text(content)
    out = tmp_path / "out.json"
    cmd = [sys.executable, str(SCRIPT), "--rows", str(path), "--out", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and res.stderr.startswith("error:")
    assert not out.exists()
