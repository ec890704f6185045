"""`pgrpo reproduce`: end-to-end runs through the CLI, JSON contract and written files."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from pgrpo.cli import _load_commands
from pgrpo.cli.app import app

_load_commands()
runner = CliRunner()


def test_reproduce_threshold_json_contract(tmp_path) -> None:
    result = runner.invoke(
        app, ["reproduce", "threshold", "--out", str(tmp_path), "--json", "--seeds", "4"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert list(payload) == ["rows"]
    keys = ["optimizer", "importance_ratio", "lr", "beta1", "kappa", "predicted_K", "measured_K"]
    assert len(payload["rows"]) == 16
    for row in payload["rows"]:
        assert list(row) == keys
        assert row["optimizer"] in ("ema", "adam")
        assert isinstance(row["importance_ratio"], bool)
    ema = [r for r in payload["rows"] if r["optimizer"] == "ema" and not r["importance_ratio"]]
    assert all(abs(r["measured_K"] - r["predicted_K"]) <= 0.1 * r["predicted_K"] for r in ema)
    saved = json.loads((tmp_path / "threshold.json").read_text())
    assert saved["experiment"] == "threshold" and len(saved["rows"]) == 16
    assert (tmp_path / "threshold.png").stat().st_size > 1000


def test_reproduce_table_and_files(tmp_path) -> None:
    result = runner.invoke(app, ["reproduce", "degeneracy", "--out", str(tmp_path), "--seeds", "4"])
    assert result.exit_code == 0, result.output
    assert "homogeneous" in result.stdout and "wrote" in result.stdout
    saved = json.loads((tmp_path / "degeneracy.json").read_text())
    rows = {r["setting"]: r for r in saved["rows"]}
    assert rows["bimodal"]["observed_step0"] > rows["bimodal"]["iid_step0"] + 0.2
    assert (tmp_path / "degeneracy.png").exists()


def test_reproduce_bad_input(tmp_path) -> None:
    result = runner.invoke(app, ["reproduce", "nope", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "valid names" in result.output and "threshold" in result.output
    result = runner.invoke(app, ["reproduce", "degeneracy", "--out", str(tmp_path), "--seeds", "1"])
    assert result.exit_code == 2 and "seeds" in result.output
    assert not (tmp_path / "degeneracy.json").exists()


def test_bad_seeds_print_and_create_nothing(tmp_path):
    """--seeds 0 printed the experiment's description and created --out before the error."""
    out = tmp_path / "new"
    result = runner.invoke(app, ["reproduce", "threshold", "--out", str(out), "--seeds", "0"])
    assert result.exit_code == 2
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "--seeds 4" in lines[0], result.output
    assert not out.exists()
