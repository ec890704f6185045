"""Every benchmark script answers --help with its usage and exit 0, and writes nothing: an audit
(2026-12-05) ran `python bench/step_costs.py --help`, which took --help for a label, measured
for 40 s and added a row labelled "--help" to bench/results/step_costs.json."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
SCRIPTS = sorted(
    p.name for p in BENCH.glob("*.py") if 'if __name__ == "__main__":' in p.read_text()
)


def _results_state() -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in (BENCH / "results").rglob("*") if p.is_file()}


def test_every_script_is_found():
    assert len(SCRIPTS) >= 40 and "step_costs.py" in SCRIPTS and "real_runs.py" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_prints_usage_and_writes_nothing(script, tmp_path):
    before = _results_state()
    env = {**os.environ, "PGRPO_BENCH_ROLLOUT": str(tmp_path / "rollout.pt")}
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage" in done.stdout.lower(), done.stdout[:500]
    assert _results_state() == before
    assert not (tmp_path / "rollout.pt").exists()
