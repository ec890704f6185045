"""`pgrpo train` and `pgrpo demo` end to end (tiny model; SmolLM2 in one slow test)."""

from __future__ import annotations

import json

import pytest
from conftest import TINY_CLI_ARGS
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app

_load_commands()
runner = CliRunner()

TINY = TINY_CLI_ARGS


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("PGRPO_CACHE", str(tmp_path_factory.getbasetemp() / "pgrpo-cache"))


def test_train_json_summary_and_log(tmp_path):
    out = runner.invoke(
        app, ["train", *TINY, "steps=6", "forecast_every=6", f"run.output_dir={tmp_path}", "--json"]
    )
    assert out.exit_code == 0, out.output
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info["steps"] == 6
    rows = [json.loads(x) for x in (tmp_path / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 7))
    assert "forecast/plateau" in rows[-1] or "forecast/error" in rows[-1]


def test_train_from_yaml_then_resume_extends_the_run(tmp_path):
    yaml_file = tmp_path / "run.yaml"
    yaml_file.write_text(
        "model: {name: tiny, tiny_hidden: 32, tiny_warmup_steps: 60}\n"
        "task: {options: {levels: [1], n: 200}}\n"
        "grpo: {group_size: 4, batch_prompts: 4}\n"
        "generation: {max_new_tokens: 4}\n"
        f"run: {{steps: 2, output_dir: {tmp_path}, name: y, torch_threads: 1}}\n"
    )
    assert runner.invoke(app, ["train", "--config", str(yaml_file), "--json"]).exit_code == 0
    again = runner.invoke(app, ["train", "--config", str(yaml_file), "--json"])
    assert again.exit_code == 2 and "--resume" in again.output
    more = runner.invoke(
        app, ["train", "--config", str(yaml_file), "steps=3", "--resume", "--json"]
    )
    assert more.exit_code == 0, more.output
    assert json.loads(more.stdout.strip().splitlines()[-1])["steps"] == 3
    assert "note: run.steps 2 -> 3: training steps 3..3; config.yaml is updated" in more.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["nosuch=1"], "valid keys"),
        (["group_size=1"], "advantage=sign"),
        (["group_size=4", "temperatures=[0.5,1.0]"], "one temperature per completion"),
    ],
)
def test_bad_input_fails_before_loading_a_model(args, message):
    out = runner.invoke(app, ["train", *args])
    assert out.exit_code == 2
    assert message in out.output


def test_demo_on_the_tiny_model_writes_fit_diagnosis_and_plot(tmp_path):
    out = runner.invoke(
        app,
        ["demo", "--steps", "6", "--output-dir", str(tmp_path), "--json", *TINY],
    )
    assert out.exit_code == 0, out.output
    info = json.loads(out.stdout.strip().splitlines()[-1])
    for name in ("metrics", "config", "diagnosis", "plot", "summary"):
        assert (tmp_path / "demo").joinpath(info["files"][name]).exists()
    assert (tmp_path / "demo" / "reward.png").stat().st_size > 1000
    assert "degenerate groups" in (tmp_path / "demo" / "diagnosis.txt").read_text()
    # the demo's fit and plots are the ones `pgrpo report` makes of the same run
    run_dir, again = tmp_path / "demo", tmp_path / "report_again"
    out = runner.invoke(app, ["report", str(run_dir), "--out", str(again)])
    assert out.exit_code == 0, out.output
    for name in ("reward", "degeneracy"):
        assert (run_dir / f"{name}.png").read_bytes() == (again / f"{name}.png").read_bytes()
    from pgrpo.logs import read_log
    from pgrpo.report.build import _fits

    fit = _fits(read_log(run_dir))[0]
    doc = json.loads((run_dir / "fit.json").read_text())
    assert doc["model"] == fit.model and doc["params"] == pytest.approx(fit.values)
    assert doc["metrics"]["kappa"] == pytest.approx(fit.metrics["kappa"])
    assert (run_dir / "fit.txt").read_text().strip() == fit.report().strip()


@pytest.mark.parametrize(
    ("override", "said"),
    [("run.steps=5", "run.steps=5 sets what --steps sets; pass --steps 5"),
     ("steps=5", "steps=5 sets what --steps sets; pass --steps 5"),
     ("output_dir=elsewhere", "output_dir=elsewhere sets what --output-dir sets; pass "
      "--output-dir elsewhere")],
)  # fmt: skip
def test_demo_refuses_an_override_of_its_own_options(tmp_path, override, said):
    """`demo --steps 3 run.steps=5` ran 5 steps and said 3: the override silently won."""
    out = runner.invoke(app, ["demo", "--steps", "3", "--output-dir", str(tmp_path), *TINY,
                              override])  # fmt: skip
    assert out.exit_code == 2, out.output
    assert out.output.strip().splitlines() == [f"error: {said}"], out.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_train_smollm2_two_steps(tmp_path):
    out = runner.invoke(
        app,
        [
            "train",
            "steps=2",
            "group_size=2",
            "batch_prompts=2",
            "max_new_tokens=8",
            "task.options={levels: [1]}",
            f"run.output_dir={tmp_path}",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    rows = [json.loads(x) for x in (tmp_path / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(0 <= r["reward"] <= 1 for r in rows)
    assert rows[0]["completions/mean_length"] > 0
