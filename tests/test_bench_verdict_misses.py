"""bench/verdict_misses.py: a miss is sorted by the rule that made it (the AR(1) null at its rho
bound, a rise significant at 5% but not at the verdict's level, or neither); on a folder whose
entries' words allow every verdict it finds no miss; a folder without index.json is one line,
exit 2, and writes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from verdict_misses import reason  # noqa: E402

SCRIPT = ROOT / "bench" / "verdict_misses.py"


def test_reasons():
    ar = "AR(1) noise, rho=0.90"
    assert reason({"null_model": ar, "trend_p": 0.001, "gain_p": 0.5}, "flat") == "rho_bound"
    weak = {"null_model": "AR(1) noise, rho=0.30", "trend_p": 0.2, "gain_p": 0.03}
    assert reason(weak, "flat") == "weak"
    assert reason({**weak, "gain_p": 0.06}, "flat") == "other"
    assert reason(weak, "declining") == "other"
    up = {**weak, "gain_p": 0.5, "trend_p": 0.01, "trend_slope": 0.002}
    assert reason(up, "flat") == "weak"
    assert reason({**up, "trend_slope": -0.002}, "flat") == "other"  # a fall is no weak rise


def test_no_miss_where_every_word_allows_the_verdict(tmp_path):
    steps = range(1, 41)
    (tmp_path / "a.csv").write_text(
        "step,reward\n" + "".join(f"{s},{0.1 + 0.02 * s:.3f}\n" for s in steps)
    )
    entry = {"name": "a", "csv": "a.csv", "repo": "x/y", "verdict": "learning"}
    (tmp_path / "index.json").write_text(json.dumps({"runs": [entry]}))
    out = tmp_path / "out.json"
    res = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert res.returncode == 0, res.stderr
    got = json.loads(out.read_text())
    assert got["judged"] == 1 and got["misses"] == 0
    entry["verdict"] = "flat"  # a clean rise the word calls flat is a miss, sorted `other`
    (tmp_path / "index.json").write_text(json.dumps({"runs": [entry]}))
    subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--out", str(out)],
                   capture_output=True, text=True, cwd=ROOT, check=True)  # fmt: skip
    got = json.loads(out.read_text())
    assert got["misses"] == 1 and got["rows"][0]["label"] == "learning"
    assert got["rows"][0]["reason"] == "other"


def test_folder_without_index_is_one_line_exit_2(tmp_path):
    out = tmp_path / "out.json"
    res = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1 and res.stderr.startswith("error:")
    assert not out.exists()
