"""The TensorBoard event-file reader and the W&B run reader (offline, from a recorded export)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from pgrpo.logs import LogFormatError, read_log
from pgrpo.logs.wandb_run import export_wandb_run, read_wandb_run

FIXTURES = Path(__file__).parent / "fixtures" / "logs"
EXPORT = FIXTURES / "wandb_run_export.json"


def _write_events(folder: Path, n: int = 30, start: int = 1) -> None:
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(folder))
    for s in range(start, start + n):
        w.add_scalar("train/reward", 0.7 - 0.5 * math.exp(-s / 8), s)
        w.add_scalar("train/rewards/fmt/mean", 0.5, s)
        w.add_scalar("train/learning_rate", 1e-6, s)
        if s % 10 == 0:
            w.add_scalar("eval/reward", 0.1, s)  # an eval-only scalar at some steps
    w.close()


def test_tensorboard_dir_is_detected_and_read(tmp_path):
    _write_events(tmp_path / "runs" / "a")
    (tmp_path / "training_args.json").write_text(json.dumps({"num_generations": 8}))
    log = read_log(tmp_path)
    assert log.format == "tensorboard" and len(log) == 30
    np.testing.assert_allclose(log.step, np.arange(1, 31))
    np.testing.assert_allclose(log.reward, 0.7 - 0.5 * np.exp(-np.arange(1, 31) / 8), rtol=1e-6)
    assert "rewards/fmt/mean" in log.columns and log.hyperparameters["lr"] == pytest.approx(1e-6)


def test_tensorboard_several_runs_reads_the_newest_and_says_so(tmp_path):
    _write_events(tmp_path / "old", n=10)
    _write_events(tmp_path / "new", n=20)
    log = read_log(tmp_path, format="tensorboard")
    assert len(log) == 20 and any("2 TensorBoard runs" in w for w in log.warnings)
    single = next((tmp_path / "old").glob("events.out.tfevents.*"))
    assert len(read_log(single)) == 10  # one event file read directly


def test_tensorboard_truncated_file_keeps_what_is_readable(tmp_path):
    _write_events(tmp_path / "r", n=30)
    f = next((tmp_path / "r").glob("events.out.tfevents.*"))
    data = f.read_bytes()
    f.write_bytes(data[: int(len(data) * 0.6)])  # a run killed mid-write
    log = read_log(tmp_path)
    assert 5 <= len(log) < 30


def test_tensorboard_without_events_says_what_is_missing(tmp_path):
    with pytest.raises(LogFormatError, match="no events.out.tfevents"):
        read_log(tmp_path, format="tensorboard")


def test_recorded_wandb_export_reads_like_any_log():
    log = read_log(EXPORT)
    assert log.format == "wandb_export" and len(log) == 80
    assert log.hyperparameters["group_size"] == 8 and log.hyperparameters["refresh_interval"] == 1
    assert {"rewards/format_reward/mean", "rewards/correctness_reward/mean"} <= set(log.columns)
    assert any("dropped" in w for w in log.warnings)  # the system-metrics row without a step


class _RecordedApi:
    """A `wandb.Api()` stand-in serving the recorded export (the online code path, offline)."""

    def __init__(self, data):
        self.data = data

    def run(self, path):
        if path != self.data["wandb_run"]:
            raise ValueError(f"Could not find run {path}")
        data = self.data

        class Run:
            config = data["config"]

            def scan_history(self):
                return iter(data["history"])

        return Run()


def test_wandb_run_by_path_through_the_api(tmp_path):
    api = _RecordedApi(json.loads(EXPORT.read_text()))
    log = read_wandb_run("pgrpo-tests/grpo/run-recorded", api=api)
    ref = read_log(EXPORT)
    np.testing.assert_array_equal(log.reward, ref.reward)
    out = export_wandb_run("pgrpo-tests/grpo/run-recorded", tmp_path / "run.json", api=api)
    np.testing.assert_array_equal(read_log(out).reward, ref.reward)
    with pytest.raises(LogFormatError, match="cannot fetch the run.*entity/project/run_id"):
        read_wandb_run("someone/else/run", api=api)


def test_cli_reads_tensorboard_and_wandb_export(tmp_path):
    from pgrpo.cli import _load_commands, app

    _load_commands()
    _write_events(tmp_path / "tb", n=30)
    shutil.copy(EXPORT, tmp_path / "run.json")
    runner = CliRunner()
    for path in (tmp_path / "tb", tmp_path / "run.json"):
        out = runner.invoke(app, ["watch", str(path), "--once", "--json"])
        assert out.exit_code in (0, 3), out.output
        assert "pgrpo/forecast_plateau" in json.loads(out.stdout.strip().splitlines()[-1])
