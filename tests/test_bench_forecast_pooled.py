"""bench/forecast_pooled.py: the shipped forecaster and the logistic / AIC / average / consensus /
damped-trend variants on several corpus folders, per folder and pooled; a folder without
index.json is one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import corpus_folder

ROOT = Path(__file__).resolve().parents[1]
CURVES = ROOT.parent / "shared" / "data" / "curves"
SCRIPT = ROOT / "bench" / "forecast_pooled.py"


@pytest.mark.skipif(not (CURVES / "index.json").exists(), reason="needs ../shared/data/curves")
def test_two_folders_are_scored_apart_and_pooled(tmp_path):
    a = corpus_folder(tmp_path / "a" / "curves", ("grponorm_easy_standard", "countdown_trl_grpo"))
    b = corpus_folder(tmp_path / "b" / "curves", ("gsm8k_qwen3_1p7b_abl_baseline",))
    out = tmp_path / "pooled.json"
    cmd = [sys.executable, str(SCRIPT), str(a), str(b), "--cuts", "0.5", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    summary = doc["summary"]
    assert summary[str(a)]["0.5"]["runs"] == 2 and summary[str(b)]["0.5"]["runs"] == 1
    pooled = summary["pooled"]["0.5"]
    assert pooled["runs"] == 3
    rows = doc["rows"]
    methods = ("default", "logistic", "aic", "average", "consensus", "consensus3",
               "damped_trend", "recent_level")  # fmt: skip
    for method in methods:  # the summary is the rows' scores
        err = [abs(r[f"pred_{method}"] - r["observed"]) / r["std"] for r in rows]
        base = [abs(r["last10"] - r["observed"]) / r["std"] for r in rows]
        assert pooled[method]["median_err"] == pytest.approx(float(np.median(err)))
        wins = sum(e < b for e, b in zip(err, base, strict=True))
        assert pooled[method]["wins_vs_last10"] == wins
    assert pooled["logistic_failed"] == sum(r["logistic_failed"] for r in rows)
    cover = np.mean([r["covered_consensus"] for r in rows])
    assert pooled["coverage_consensus"] == pytest.approx(float(cover))
    for r in rows:
        assert r["pred_average"] == pytest.approx(0.5 * (r["pred_default"] + r["pred_logistic"]))
        pick = r["pred_logistic"] if r["aic_logistic_better"] else r["pred_default"]
        assert r["pred_aic"] == pick
        assert not (r["logistic_failed"] and r["aic_logistic_better"])
        three = (r["pred_default"], r["pred_logistic"], r["pred_damped_trend"])
        assert r["pred_consensus3"] == pytest.approx(float(np.median(three)))
        four = three if r["recent_level_failed"] else (*three, r["pred_recent_level"])
        assert r["pred_consensus"] == pytest.approx(float(np.median(four)))
    assert "a/curves" in proc.stdout and "pooled" in proc.stdout


def test_a_folder_without_an_index_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "no index.json" in proc.stderr


def test_the_median_interval_covers_the_median_at_least_as_often_as_it_says():
    sys.path.insert(0, str(ROOT / "bench"))
    from forecast_pooled import median_interval

    rng = np.random.default_rng(0)
    for r in (9, 35, 113):
        hits = 0
        for _ in range(400):
            lo, hi = median_interval(rng.exponential(1.0, r))
            hits += lo <= np.log(2.0) <= hi  # the exponential's median
        assert hits >= 0.87 * 400  # 90% nominal, at least (order statistics are conservative)
    assert median_interval(np.array([0.3])) == (0.3, 0.3)
    lo, hi = median_interval(np.arange(35.0))
    assert lo < 17.0 < hi and lo + hi == 34.0  # symmetric order statistics about the median


def test_the_scale_split_puts_each_run_in_one_group_by_its_rollouts():
    sys.path.insert(0, str(ROOT / "bench"))
    from forecast_pooled import RESEARCH_ROLLOUTS, by_scale

    rows = [{"run": k, "n_rollouts": n} for k, n in
            enumerate((None, 1, RESEARCH_ROLLOUTS - 1, RESEARCH_ROLLOUTS, 1024, None))]  # fmt: skip
    split = by_scale(rows)
    assert [r["run"] for r in split["scale: research"]] == [3, 4]
    assert [r["run"] for r in split["scale: smaller"]] == [1, 2]
    assert [r["run"] for r in split["scale: unknown"]] == [0, 5]
    assert sum(len(v) for v in split.values()) == len(rows)
    assert set(by_scale(rows[1:3])) == {"scale: smaller"}  # a group without rows is left out
