"""Defects the review of issue #13 left open (2026-12-02): an undefined R^2 on a constant
reward, the remaining gain of a curve that never saturates, an optimizer the model does not
know, where `diagnose` and `report` take the run's settings from, an empty run folder. Each
test goes through the CLI (or the library for library behaviour) and fails on the code before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app

runner = CliRunner()
FIX = Path(__file__).parent / "fixtures" / "logs"


@pytest.fixture(scope="module", autouse=True)
def _commands():
    _load_commands()


def _csv(path: Path, reward: np.ndarray) -> Path:
    rows = [f"{i},{r!r}" for i, r in enumerate(reward.tolist(), start=1)]
    path.write_text("step,reward\n" + "\n".join(rows) + "\n")
    return path


def _json(*args: str) -> dict:
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _one_line_error(res, *needles: str) -> str:
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _lion_run(tmp_path: Path) -> Path:
    run = tmp_path / "lion_run"
    shutil.copytree(FIX / "pgrpo_run", run)
    with (run / "config.yaml").open("a") as fh:
        fh.write("optim:\n  name: lion\n")
    return run


# --- 3. an optimizer the model does not know ------------------------------------------------------


def test_an_unknown_optimizer_in_the_log_falls_back_to_the_free_fit(tmp_path):
    """Before: `fit` stopped with exit 2 and a message that did not mention --optimizer."""
    data = _json("fit", str(_lion_run(tmp_path)), "--no-plot")
    s = data["settings"]
    assert s["values"]["optimizer"] == "lion" and s["sources"]["optimizer"] == "log config"
    assert s["metrics"]["closed_form_fitted"] == 0.0
    note = next(n for n in s["notes"] if "'lion'" in n)
    assert "--optimizer" in note and "sgd_momentum" in note and "free fit" in note
    assert data["constrained"] is None and data["model"].startswith("rom")
    assert "preferred" not in data["metrics"]


def test_an_unknown_optimizer_on_the_command_line_names_the_option(tmp_path):
    res = runner.invoke(app, ["fit", str(FIX / "pgrpo_run"), "--out", str(tmp_path),
                              "--optimizer", "lion"])  # fmt: skip
    _one_line_error(res, "--optimizer 'lion'", "adam", "sgd_momentum")


# --- 5. a folder without a log ------------------------------------------------------------------


@pytest.mark.parametrize("command", ["fit", "diagnose", "report"])
def test_an_empty_folder_says_it_has_no_log_file(tmp_path, command):
    """Before: 'unrecognised log format; pass format= ...'."""
    folder = tmp_path / "empty"
    folder.mkdir()
    res = runner.invoke(app, [command, str(folder), "--out", str(tmp_path / "o")]
                        if command != "diagnose" else [command, str(folder)])  # fmt: skip
    line = _one_line_error(res, f"{folder} has no log file", "looked for", "metrics.jsonl")
    assert "unrecognised" not in line


def test_a_folder_of_other_files_says_what_it_holds(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    _csv(folder / "curve.csv", np.linspace(0, 1, 20))
    res = runner.invoke(app, ["fit", str(folder), "--out", str(tmp_path)])
    _one_line_error(res, "has no log file pgrpo recognises", "it holds curve.csv")
