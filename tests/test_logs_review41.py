"""Review 41 (2026-12-07): `logs.base.assemble` decided which rows the newest run keeps, but some
things were still read over every row of the file, or a reader's order hid the rewind. Each
test here failed before the fix: NaN rewards of a trajectory a resume or restart replaced read
as the newest run's collapse (F1); a TensorBoard resume (F2) and a TRL console resume (F3) kept
the discarded trajectory; an earlier run's eval values went onto the newest run (F4); one stray
repeated row read as a resume (F6); a step that starts over each epoch read as runs appended
(F11). The rule throughout: a whole file reads like its newest run alone."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.logs import read_log
from pgrpo.logs.base import assemble

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


# --- F1: NaN rows of a replaced trajectory are history, not the newest run's collapse -------


@st.composite
def diverged_then_rerun(draw):
    """(whole file, the newest run alone), as (step, reward) rows: a run that logged n1 finite
    rewards, then NaN / inf, then was resumed from a checkpoint it had logged (or restarted from
    step 1); the new part may itself end in NaN (a real tail, which must still read as one)."""
    n1, n_nan = draw(st.integers(8, 40)), draw(st.integers(1, 15))
    start = draw(st.sampled_from([1, *range(2, n1 + 1)]))
    n2, tail2 = draw(st.integers(4, 40)), draw(st.integers(0, 4))
    bad = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    first = list(zip(range(1, n1 + 1), _rise(range(1, n1 + 1), n1), strict=True))
    first += [(s, bad) for s in range(n1 + 1, n1 + n_nan + 1)]
    steps2 = range(start, start + n2)
    second = list(zip(steps2, _rise(steps2, n2 + 7, 0.9), strict=True))
    second += [(s, math.nan) for s in range(start + n2, start + n2 + tail2)]
    alone = ([r for r in first if r[0] < start] if start > 1 else []) + second
    return first + second, alone


@settings(max_examples=200, deadline=None)
@given(diverged_then_rerun())
def test_a_rerun_after_a_divergence_reads_like_the_newest_run_alone(case):
    whole, alone = case
    read = [assemble([{"step": s, "reward": r} for s, r in rows], fmt="t", source="t")
            for rows in (whole, alone)]  # fmt: skip
    _same(*read)
    assert any("NaN/inf reward(s) in rows a later resume or restart replaced" in w
               for w in read[0].warnings)  # fmt: skip
    assert not any("NaN/inf reward(s) in rows" in w for w in read[1].warnings)


def _diverge_files(tmp_path, restart: bool):
    """The review's files: steps 1-39 rising, 40-50 NaN, then a resume from checkpoint 30 (or
    a restart from step 1) rising again; and the newest run alone."""
    first = [*zip(range(1, 40), _rise(range(1, 40), 1), strict=True)]
    first += [(s, math.nan) for s in range(40, 51)]
    start = 1 if restart else 30
    second = list(zip(range(start, 46), _rise(range(start, 46), 2), strict=True))
    alone = ([] if restart else first[: start - 1]) + second
    return _csv(tmp_path / "whole.csv", first + second), _csv(tmp_path / "alone.csv", alone)


@pytest.mark.parametrize("restart", [False, True])
def test_diagnose_fail_on_and_watch_read_the_rerun_not_the_old_nan(tmp_path, restart):
    """Before: "Collapsed: the last 5 logged rewards are NaN or inf ... the run diverged",
    dynamical_instability, --fail-on fail exit 1, and watch --once touched its stop file and
    exited 3 on a healthy resumed run."""
    whole, alone = _diverge_files(tmp_path, restart)
    a, b = _doc(whole), _doc(alone)
    assert a["progress"]["label"] == b["progress"]["label"] != "collapsed"
    assert a["progress"]["summary"] == b["progress"]["summary"]
    detected = lambda d: sorted(m["name"] for m in d["modes"] if m["detected"])  # noqa: E731
    assert detected(a) == detected(b) and "dynamical_instability" not in detected(a)
    text = runner.invoke(app, ["diagnose", str(whole)])
    assert text.exit_code == 0 and "Collapsed" not in text.output
    assert " ".join(b["progress"]["summary"].split()) in " ".join(text.output.split())
    assert runner.invoke(app, ["diagnose", str(whole), "--fail-on", "fail"]).exit_code == 0
    stop = tmp_path / "STOP"
    res = runner.invoke(app, ["watch", str(whole), "--once", "--min-points", "8",
                              "--stop-file", str(stop)])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert not stop.exists() and "collapsed" not in res.output


def test_a_restarted_run_with_nan_only_says_its_own_rewards_are_nan(tmp_path):
    """A newest run whose every reward is NaN is that run's divergence, named as the newest
    run's (the earlier run's finite rows do not hide it)."""
    rows = [*zip(range(1, 31), _rise(range(1, 31), 3), strict=True)]
    rows += [(s, math.nan) for s in range(1, 6)]
    with pytest.raises(ValueError, match="every logged reward of the newest run"):
        assemble([{"step": s, "reward": r} for s, r in rows], fmt="t", source="t")


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


def test_a_console_resume_one_step_behind_the_last_dict_is_a_resume(tmp_path):
    """Dicts at every step 1-30 (collapsing after 20), then a resume from the checkpoint at 29:
    the next count is 30 again. Before: a count equal to the one before was neither a rise nor
    a fall, so the dicts' order was the step and the two trajectories were spliced."""
    first = [(s, r if s <= 20 else 0.05) for s, r in zip(range(1, 31), _rise(range(1, 31), 8),
                                                         strict=True)]  # fmt: skip
    second = list(zip(range(30, 61), _rise(range(30, 61), 9), strict=True))
    lines = [*(_bar_line(s, r) for s, r in first),
             "  Continuing training from checkpoint, will skip to saved global_step 29",
             *(_bar_line(s, r) for s, r in second)]  # fmt: skip
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    log, csv = read_log(path), read_log(_csv(tmp_path / "same.csv", first + second))
    assert log.step.tolist() == list(map(float, range(1, 61)))
    np.testing.assert_array_equal(log.reward, csv.reward)
    assert log.reward[29] == second[0][1]
    assert not any("carry no step" in w or "do not read as" in w for w in log.warnings)


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


# --- F4: eval rows are the newest run's only --------------------------------------------------


@st.composite
def runs_with_evals(draw):
    """(whole, alone): W&B-style records, an eval row (no reward) after every k-th training
    row; a second part that restarts (from step 1) or resumes from a logged step."""
    k = draw(st.integers(2, 8))

    def part(steps, seed, acc):
        out = []
        for s, r in zip(steps, _rise(steps, seed), strict=True):
            out.append({"train/global_step": s, "train/reward": r})
            if s % k == 0:
                out.append({"train/global_step": s, "eval/accuracy": acc + s / 1000})
        return out

    n1 = draw(st.integers(10, 50))
    start = draw(st.sampled_from([1, *range(2, n1 + 1)]))
    first = part(range(1, n1 + 1), n1, 0.4)
    second = part(range(start, start + draw(st.integers(6, 60))), n1 + 1, 0.2)
    alone = [r for r in first if r["train/global_step"] < start] + second
    return first + second, alone


@settings(max_examples=150, deadline=None)
@given(runs_with_evals())
def test_eval_values_are_read_from_the_newest_run_only(case):
    """Before: the first run's eval rows (the whole file's) went onto the newest run's steps:
    the review's restart read "eval accuracy changed by -0.24" and missed reward hacking."""
    whole, alone = (assemble(recs, fmt="t", source="t") for recs in case)
    _same(whole, alone)
    got, want = (log.columns.get("eval/accuracy") for log in (whole, alone))
    assert (got is None) == (want is None)
    np.testing.assert_array_equal(got, want)


# --- F6: one stray repeated row is no resume -------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.integers(20, 80), st.data())
def test_one_stray_copy_of_a_logged_step_drops_nothing(n, data):
    """A copy of an earlier step written once, the steps going on after it (base.csv with the
    step-10 row repeated after step 39): it read as a resume to step 10 and dropped the rows
    10-39. Every step is kept; the stray row's value is read at its step, and a warning says
    so."""
    at = data.draw(st.integers(2, n - 1))  # a row follows the stray
    j = data.draw(st.integers(1, at - 1))  # a step logged before, below the one before it
    rows = [(s, s / n) for s in range(1, n + 1)]
    rows.insert(at, (j, -1.0))
    log = assemble([{"step": s, "reward": r} for s, r in rows], fmt="t", source="t")
    assert log.step.tolist() == list(map(float, range(1, n + 1)))
    assert log.reward[j - 1] == -1.0 and log.metrics["repeated_steps"] == 1
    said = [w for w in log.warnings if "stray row" in w]
    assert said and f"step {j} comes again" in said[0] and "no row was dropped" in said[0]
    assert not any("replaced by a resume" in w for w in log.warnings)


def test_the_review_stray_file_reads_like_the_file_without_it(tmp_path):
    rows = list(zip(range(1, 61), _rise(range(1, 61), 8), strict=True))
    base = _csv(tmp_path / "base.csv", rows)
    stray = _csv(tmp_path / "stray.csv", [*rows[:39], rows[9], *rows[39:]])
    a, b = _doc(stray), _doc(base)
    assert a["progress"]["summary"] == b["progress"]["summary"]


# --- F11: a step counted within each epoch ---------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(5, 40), min_size=2, max_size=5), st.integers(1, 3), st.booleans())
def test_a_step_that_starts_over_each_epoch_counts_on_across_them(lengths, stride, frac):
    """Three epochs of steps 0-39 with an epoch column read as "3 runs appended" and kept the
    last third. Where the step falls while the epoch goes up, each epoch's steps follow the
    last one's, by the stride; the epoch may be whole or fractional (HF's)."""
    recs = []
    for e, m in enumerate(lengths):
        for i in range(m):
            epoch = e + i / m if frac else e
            recs.append({"step": i * stride, "epoch": epoch, "reward": 0.1 + len(recs) / 1000})
    log = assemble(recs, fmt="t", source="t")
    np.testing.assert_array_equal(log.step, stride * np.arange(sum(lengths), dtype=float))
    assert any("starts over where the 'epoch' column goes up" in w for w in log.warnings)
    assert not any("runs appended" in w for w in log.warnings)


def test_a_restart_or_resume_still_takes_the_epoch_back_with_it():
    """A restart from scratch resets the step and the epoch: still read as runs appended; a
    resume goes back in both: still a resume."""
    run = [{"step": s, "epoch": s / 20, "reward": s / 100} for s in range(1, 41)]
    restarted = assemble(run + run[:25], fmt="t", source="t")
    assert restarted.step.tolist() == list(map(float, range(1, 26)))
    resumed = assemble(run + run[19:30], fmt="t", source="t")
    assert resumed.step.tolist() == list(map(float, range(1, 31)))
    assert any("replaced by a resume" in w for w in resumed.warnings)


def test_a_restart_on_a_smaller_dataset_moves_the_epoch_on_but_is_still_a_restart():
    """A short aborted run (epoch 0.001-0.01), then a restart on a smaller dataset (epoch
    0.05, 0.10, ...): the step falls while the epoch goes up, but within the same epoch, so
    it is a restart (the newest run's 40 rows), not a step that starts over each epoch."""
    aborted = [{"step": s, "epoch": s / 1000, "reward": 0.1} for s in range(1, 11)]
    newest = [{"step": s, "epoch": s / 20, "reward": 0.2 + s / 100} for s in range(1, 41)]
    log = assemble(aborted + newest, fmt="t", source="t")
    assert log.step.tolist() == list(map(float, range(1, 41)))
    assert any("2 runs appended" in w for w in log.warnings)
    assert not any("starts over where" in w for w in log.warnings)


def test_step_column_at_order_counts_the_reward_rows_only():
    """@order numbered every record: an eval row after each epoch's 40 reward rows read steps
    ..., 38, 39, 41, ... and warned of gaps. The reward rows are counted; an eval row takes the
    step of the reward row before it, where its value is read."""
    recs: list[dict] = [{"step": 0, "eval/accuracy": 0.2}]  # an eval row before any reward
    for e in range(3):
        recs += [{"step": s, "reward": 0.2 + 0.005 * (40 * e + s)} for s in range(40)]
        recs.append({"step": 39, "eval/accuracy": 0.3 + 0.1 * e})
    log = assemble(recs, fmt="t", source="t", step_key="@order")
    assert log.step.tolist() == list(map(float, range(120)))
    assert not any("gap" in w for w in log.warnings)
    acc = log.columns["eval/accuracy"]
    assert np.flatnonzero(np.isfinite(acc)).tolist() == [0, 39, 79, 119]
    np.testing.assert_allclose(acc[[0, 39, 79, 119]], [0.2, 0.3, 0.4, 0.5])


def test_without_an_epoch_column_the_message_offers_a_fix_that_works(tmp_path):
    """No epoch column: a step that starts over cannot be told from a restart, and is read as
    one; the warning offers --step-column @order (the rows in file order as the steps), which
    reads every row."""
    rows = [(s, 0.2 + 0.005 * (40 * e + s)) for e in range(3) for s in range(40)]
    path = _csv(tmp_path / "epochs.csv", rows)
    log = read_log(path)
    assert len(log) == 40
    assert any("3 runs appended" in w and "--step-column @order" in w for w in log.warnings)
    whole = read_log(path, step_key="@order")
    assert whole.step.tolist() == list(map(float, range(120))) and not whole.warnings
    doc = _doc(path, "--step-column", "@order")
    assert doc["metrics"]["steps"] == 120
