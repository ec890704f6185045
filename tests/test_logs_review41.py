"""Review 41 (2026-12-07): `logs.base.assemble` decided which rows the newest run keeps, but some
things were still read over every row of the file, or a reader's order hid the rewind. Each
test here failed before the fix: NaN rewards of a trajectory a resume or restart replaced read
as the newest run's collapse (F1); a TensorBoard resume (F2) and a TRL console resume (F3) kept
the discarded trajectory; an earlier run's eval values went onto the newest run (F4); one stray
repeated row read as a resume (F6); a step that starts over each epoch read as runs appended
(F11). The rule throughout: a whole file reads like its newest run alone."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.logs import read_log

_load_commands()
runner = CliRunner()


def _rise(steps, seed: int, top: float = 0.8) -> list[float]:
    rng = np.random.default_rng(seed)
    s = np.asarray(steps, dtype=float)
    return list(0.2 + (top - 0.2) * (1 - np.exp(-s / 25.0)) + rng.normal(0, 0.02, s.size))


def _csv(path, rows, header="step,reward"):
    cell = lambda v: str(v) if isinstance(v, int) else repr(float(v))  # noqa: E731
    path.write_text(header + "\n" + "".join(",".join(map(cell, r)) + "\n" for r in rows))
    return path


def _same(whole, alone):
    np.testing.assert_array_equal(whole.step, alone.step)
    np.testing.assert_array_equal(whole.reward, alone.reward)
    for key in ("nonfinite_tail", "nonfinite_from", "dropped_nan"):
        assert whole.metrics.get(key) == alone.metrics.get(key), key


def _doc(path, *extra):
    res = runner.invoke(app, ["diagnose", str(path), "--json", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


# --- F2: TensorBoard: a resume into the run's folder drops what it superseded --------------


def _tb_resumed(folder):
    """Two event files: steps 1-100 (rising to step 60, then 0.0), and a resume from
    checkpoint 60 logging 61-80; the second file renamed to sort first by name, so only the
    events' wall times tell the write order. -> the rows as written."""
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    steps = range(1, 101)
    first = [(s, r if s <= 60 else 0.0) for s, r in zip(steps, _rise(steps, 4), strict=True)]
    second = list(zip(range(61, 81), _rise(range(61, 81), 5), strict=True))
    for rows in (first, second):
        w = SummaryWriter(str(folder))
        for s, r in rows:
            w.add_scalar("train/reward", r, s)
            if s % 20 == 0:
                w.add_scalar("eval/accuracy", 0.5, s)
        w.close()
    newer = max(folder.glob("events.out.tfevents.*"), key=lambda f: f.name)
    os.rename(newer, folder / "events.out.tfevents.1000000000.host.1.0")
    return first + second


def test_a_tensorboard_resume_reads_like_the_same_rows_in_a_csv(tmp_path):
    """Before: the files' steps merged and sorted, so steps 81-100 of the discarded trajectory
    (0.0) read as the run's newest: "Collapsed" and dynamical_instability, where the CSV of the
    same rows in write order reads the resume."""
    rows = _tb_resumed(tmp_path / "tb")
    tb, csv = read_log(tmp_path / "tb"), read_log(_csv(tmp_path / "same.csv", rows))
    np.testing.assert_array_equal(tb.step, np.arange(1.0, 81.0))
    np.testing.assert_array_equal(tb.step, csv.step)
    np.testing.assert_allclose(tb.reward, csv.reward, rtol=1e-6)
    assert any("replaced by a resume" in w and "from 100 to 61" in w for w in tb.warnings)
    assert np.isfinite(tb.columns["eval/accuracy"]).sum() == 4  # 20, 40, 60 and the resume's 80
    assert _doc(tmp_path / "tb")["progress"]["label"] == _doc(csv.source)["progress"]["label"]


# --- F3: a TRL console log whose progress-bar counts go back ---------------------------------


def _bar_line(s: int, r: float, total: int = 200) -> str:
    return f" {s}/{total} [00:10<01:00,  1.2s/it]{{'loss': 0.01, 'reward': {r!r}, 'epoch': 0.1}}"


def test_a_resumed_console_log_keeps_the_bar_counts_as_steps(tmp_path):
    """Bars 5-100 (collapsing after 60), "Continuing training from checkpoint", bars 55-200.
    Before: "its dicts carry no step and no training progress bar count before each", the
    dicts' order as the step, and both trajectories spliced into one curve ("Flat")."""
    steps = range(5, 101, 5)
    first = [(s, r if s <= 60 else 0.05) for s, r in zip(steps, _rise(steps, 6), strict=True)]
    second = list(zip(range(55, 201, 5), _rise(range(55, 201, 5), 7), strict=True))
    lines = ["***** Running training *****", *(_bar_line(s, r) for s, r in first),
             "  Continuing training from checkpoint, will skip to saved global_step 50",
             *(_bar_line(s, r) for s, r in second)]  # fmt: skip
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    log, csv = read_log(path), read_log(_csv(tmp_path / "same.csv", first + second))
    np.testing.assert_array_equal(log.step, csv.step)
    np.testing.assert_array_equal(log.reward, csv.reward)
    assert log.step.tolist() == [*map(float, range(5, 55, 5)), *map(float, range(55, 201, 5))]
    assert not any("carry no step" in w for w in log.warnings)
    assert any("replaced by a resume" in w for w in log.warnings)
    assert _doc(path)["progress"]["label"] == _doc(csv.source)["progress"]["label"]


def test_console_counts_that_restart_read_the_newest_run(tmp_path):
    """A run printed twice (counts 1-6, then 1-6 again) is two runs, as in a CSV; it read as
    one run of twelve dicts in order until review 41."""
    lines = [f"\r {s % 6 + 1}/12 [00:10<01:30, 2.1s/it]\n{{'reward': {0.1 + s / 100!r}}}"
             for s in range(12)]  # fmt: skip
    path = tmp_path / "twice.log"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert log.step.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    np.testing.assert_allclose(log.reward, [0.1 + s / 100 for s in range(6, 12)])
    assert any("2 runs appended" in w for w in log.warnings)
