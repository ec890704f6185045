"""A user's whole journey on the tiny model: train -> fit -> diagnose -> eval -> report.

Each step is a CLI call as a user would type it, on the outputs of the previous one; the assertions
check what the next step relies on (names, shapes, files), not just exit codes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app

_load_commands()
runner = CliRunner()


def _run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, f"pgrpo {' '.join(args)} failed:\n{result.output}"
    return result.output


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("e2e")
    _run(
        "train",
        "model.name=tiny",
        "model.tiny_warmup_steps=60",
        "task.options={levels: [1]}",
        "grpo.group_size=4",
        "grpo.batch_prompts=4",
        "generation.max_new_tokens=6",
        "optim.lr=1e-3",
        "run.steps=8",
        "run.forecast_every=4",
        f"run.output_dir={out}",
        "run.name=e2e",
        "--json",
    )
    return out / "e2e"


def test_train_writes_a_log_every_reader_understands(run_dir: Path) -> None:
    from pgrpo.logs import read_log

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 9))
    log = read_log(run_dir)
    assert len(log.reward) == 8
    # The hyperparameters the dynamics model needs come from the run's config.yaml.
    assert log.hyperparameters["group_size"] == 4


def test_fit_and_diagnose_read_the_run(run_dir: Path) -> None:
    fit = json.loads(_run("fit", str(run_dir), "--json", "--out", str(run_dir / "fit")))
    assert {"r2", "params", "baselines"} <= set(fit)
    assert "R_inf" in fit["params"]
    assert (run_dir / "fit" / "fit.png").stat().st_size > 0
    diag = json.loads(_run("diagnose", str(run_dir), "--json"))
    names = {m["name"] for m in diag["modes"]}
    assert {
        "reward_hacking",
        "advantage_degeneracy",
        "policy_concentration",
        "dynamical_instability",
    } <= names
    for mode in diag["modes"]:
        assert isinstance(mode["detected"], bool)
        assert mode["action"] or not mode["detected"]  # every detected mode says what to do


def test_eval_then_report_is_one_self_contained_page(run_dir: Path) -> None:
    eval_json = run_dir / "eval.json"
    _run(
        "eval",
        "--model",
        str(run_dir),
        "--problems",
        "4",
        "--samples",
        "2",
        "--max-new-tokens",
        "6",
        "--out",
        str(eval_json),
        "--json",
    )
    result = json.loads(eval_json.read_text())
    assert result  # the report and diagnose read this file
    _run("report", str(run_dir), "--eval-log", str(eval_json), "--out", str(run_dir / "report"))
    pages = list((run_dir / "report").glob("*.html"))
    assert len(pages) == 1
    html = pages[0].read_text()
    assert "data:image/png;base64," in html  # plots are embedded, not linked
    assert "advantage_degeneracy" in html or "advantage degeneracy" in html.lower()
