"""bench/trainer.py: the parts that need no model (cells, ratios, bad options)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import trainer  # noqa: E402


def test_parse_cell_and_its_errors():
    assert trainer.parse_cell("16x4x64") == {"B": 16, "G": 4, "T": 64}
    for bad in ("8x4", "8x1x32", "0x4x32", "axbxc"):
        with pytest.raises(ValueError, match="bad cell"):
            trainer.parse_cell(bad)


def test_default_grid_is_the_issue_grid():
    cells = {tuple(trainer.parse_cell(c).values()) for c in trainer.DEFAULT_CELLS}
    assert cells == {(b, g, t) for b, g in ((8, 4), (16, 4), (8, 8)) for t in (32, 64, 128)}


def _row(variant, s, rss, roof=1.0, bf16_roof=0.5):
    return {
        "variant": variant,
        "seconds_per_step": s,
        "steps_per_s": 1 / s,
        "peak_rss_mb": rss,
        "roofline_s": roof,
        "bf16_roofline_s": bf16_roof,
    }


def test_cell_ratios_compare_like_with_like():
    rows = [
        _row("floor-bf16", 2.0, 900),
        _row("pgrpo-bf16", 3.0, 600),
        _row("pgrpo-fp32", 6.0, 700),
        _row("trl-bf16", 9.0, 1200),
        _row("trl-fp32", 12.0, 1000),
    ]
    r = trainer.cell_ratios(rows)
    assert r["pgrpo-bf16/vs_floor"] == pytest.approx(1.5)  # against the bf16 floor
    assert "pgrpo-fp32/vs_floor" not in r  # no fp32 floor in this cell: no ratio
    assert r["pgrpo-bf16/steps_per_s_vs_trl-bf16"] == pytest.approx(3.0)
    assert r["pgrpo-bf16/steps_per_s_vs_trl-fp32"] == pytest.approx(4.0)
    assert r["pgrpo-bf16/peak_rss_vs_trl-bf16"] == pytest.approx(0.5)
    assert r["pgrpo-bf16/vs_bf16_roofline"] == pytest.approx(6.0)
    assert r["trl-fp32/vs_roofline"] == pytest.approx(12.0)


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--cells", "8x4"], "bad cell"),
        (["--variants", "pgrpo"], "unknown --variants"),
        (["--steps", "0"], "--steps 0"),
    ],
)
def test_bad_options_fail_with_one_line_and_exit_code_2(argv, message, tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "trainer.py"), *argv, "--out", str(tmp_path / "x")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert message in done.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "x").exists()
