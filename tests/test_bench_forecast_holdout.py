"""bench/forecast_holdout.py: forecasts of held-back runs with every prior frozen on the
development corpus. The shipped default runs through the library; runs of a repository that is
also in the development corpus are summarised apart; a folder without index.json is one line
and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import corpus_folder

ROOT = Path(__file__).resolve().parents[1]
CURVES = ROOT.parent / "shared" / "data" / "curves"
SCRIPT = ROOT / "bench" / "forecast_holdout.py"
DEV = (
    "grponorm_easy_standard",
    "grponorm_hard_standard",
    "countdown_trl_grpo",
    "hotpotqa_agent_grpo_v1",
    "hotpotqa_agent_grpo_v2",
    "chaos_economy_llama32_3b_500",
)
HELD = ("grponorm_easy_no_std", "countdown_custom_grpo_500", "gsm8k_qwen3_1p7b_abl_baseline")


@pytest.mark.skipif(not (CURVES / "index.json").exists(), reason="needs ../shared/data/curves")
def test_held_back_runs_are_scored_with_frozen_priors(tmp_path):
    # the development runs come from two folders, pooled (round 2: shared corpus + round 1)
    dev = [corpus_folder(tmp_path / "dev1", DEV[:2]), corpus_folder(tmp_path / "dev2", DEV[2:])]
    held = corpus_folder(tmp_path / "held", HELD)
    out = tmp_path / "out.json"
    cmd = [sys.executable, str(SCRIPT), "--corpus", str(held), "--dev", *map(str, dev),
           "--cuts", "0.5", "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["command"].startswith("python bench/forecast_holdout.py --corpus")
    assert sorted(r["run"] for r in doc["runs"]) == sorted(HELD)
    groups = doc["default"]["0.5"]
    # grpo_norm (first folder) and countdown (second) are development repositories; tonywang1990
    # is not
    assert groups["same_repository"]["runs"] == 2 and groups["new_repository"]["runs"] == 1
    assert groups["all"]["runs"] == 3
    assert set(doc["selected_on_dev"]) == {"error", "gain_over_last10"}
    assert all(doc["selected_on_dev"][k] in doc["variants"] for k in doc["selected_on_dev"])
    assert {"level_gain+tau", "level_gain+tau (step clock)", "level_gain+tau (huber)"} <= set(
        doc["variants"]
    )
    assert doc["bar_cut_0.5"]["all"]["wins"].endswith("/3")
    chosen = doc["bar_cut_0.5_selected"]
    assert chosen["variant"] == doc["selected_on_dev"]["error"]
    assert "level_gain+tau+mean" in doc["variants"] and chosen["all"]["wins"].endswith("/3")
    assert "held-back forecasts" in proc.stdout


def test_a_folder_without_an_index_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--corpus", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "no index.json" in proc.stderr
