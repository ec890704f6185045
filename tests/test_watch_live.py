"""`pgrpo watch` on logs as they are really written (a hostile review, 2026-12-04): a file cut
back, rotated, resumed or restarted into; a log that will never be readable; old TRL checkpoints
deleted while it looks; a last line caught mid-write. Each test failed before its fix (except
`test_a_log_with_no_record_yet_is_waited_for`, which guards against failing too early)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import pgrpo.diagnose.watch as watch_mod
from pgrpo.cli import _load_commands, app
from pgrpo.diagnose.live import LiveConfig, warning_kind
from pgrpo.diagnose.watch import watch_log
from pgrpo.logs import LogFormatError, LogNotReadyError, read_log
from pgrpo.logs.base import newest_run

_load_commands()
runner = CliRunner()
SRC = str(Path(__file__).resolve().parents[1] / "src")
NONE = LiveConfig(stop_on=())


def _curve(steps, tau=100.0, top=1.4, seed=0) -> list[float]:
    rng = np.random.default_rng(seed)
    return [top - math.exp(-s / tau) + 0.03 * rng.standard_normal() for s in steps]


def _jsonl(steps, rewards) -> str:
    return "".join(
        json.dumps({"step": s, "reward": r}) + "\n" for s, r in zip(steps, rewards, strict=True)
    )


def _csv(steps, rewards) -> str:
    return "step,reward\n" + "".join(f"{s},{r}\n" for s, r in zip(steps, rewards, strict=True))


# --- what the live reader reads -----------------------------------------------------------------


def test_newest_run_tells_a_fresh_run_from_a_resume():
    """A step going back to (or below) the file's first step starts a new run; a step going back
    to a later one is the same run resumed from a checkpoint (its repeats replace the old ones)."""
    assert newest_run(np.array([5.0, 10, 15, 20, 5, 10])) == 4  # restarted from scratch
    assert newest_run(np.array([1.0, 2, 3, 0, 1, 2])) == 3  # ... at a step below the first
    assert newest_run(np.array([1.0, 2, 3, 4, 3, 4, 5])) == 0  # resumed from step 2's checkpoint
    assert newest_run(np.array([1.0, 2, 1, 2, 1])) == 4  # the last of several runs
    assert newest_run(np.array([3.0])) == newest_run(np.array([])) == 0


def test_live_and_static_reading_keep_the_newest_run(tmp_path):
    log = tmp_path / "metrics.jsonl"
    old, new = list(range(5, 1001, 5)), list(range(5, 51, 5))
    log.write_text(_jsonl(old, _curve(old)) + _jsonl(new, _curve(new, seed=1)))
    live = read_log(log, live=True)
    assert live.step.tolist() == [float(s) for s in new]
    assert live.metrics["restart_step"] == 5 and live.metrics["restart_row"] == len(old)
    static = read_log(log)  # fit / diagnose: the same rows, and a warning says why
    assert static.step.tolist() == live.step.tolist()
    assert any("holds 2 runs appended" in w for w in static.warnings)
    assert not any("holds 2 runs" in w for w in live.warnings)  # watch says it once (_news)
    resumed = tmp_path / "resumed.jsonl"  # 1..100, then resumed from step 60's checkpoint
    first, again = list(range(1, 101)), list(range(61, 121))
    resumed.write_text(_jsonl(first, _curve(first)) + _jsonl(again, _curve(again, seed=1)))
    log = read_log(resumed, live=True)
    assert log.step.tolist() == list(map(float, range(1, 121))) and "restart_row" not in log.metrics
    assert log.reward[70] == _curve(again, seed=1)[10]  # the resumed run's value of step 71


@pytest.mark.parametrize(
    ("name", "text", "cut", "n_static"),
    [
        ("p.csv", "step,reward\n1,0.1\n2,0.2\n3,0.3\n", "4,0.5", 4),
        ("metrics.jsonl", _jsonl([1, 2, 3], [0.1, 0.2, 0.3]), '{"step": 4, "reward": 0.5', 3),
        ("console.log", "".join(f"step:{s} - critic/score/mean:0.{s}\n" for s in (1, 2, 3)),
         "step:4 - critic/score/mean:0.5", 4),
    ],
)  # fmt: skip
def test_live_reading_leaves_a_last_line_caught_mid_write(tmp_path, name, text, cut, n_static):
    """`4,0.5` may be the first half of `4,0.55`: a live read leaves an unterminated last line
    for the next poll; a static read (fit of a file that ends without a newline) keeps it."""
    path = tmp_path / name
    path.write_text(text + cut)
    live = read_log(path, live=True)
    assert live.step.tolist() == [1.0, 2.0, 3.0] and not live.warnings
    assert len(read_log(path)) == n_static  # a JSON line cut short is malformed either way


@pytest.mark.parametrize(
    ("text", "ready"),
    [
        ("", True),  # empty
        ("step,reward\n", True),  # a header only
        ("step,rew", True),  # the header being written
        ("step,acc\n1,0.5\n", False),  # records, no reward column
    ],
)
def test_not_ready_is_told_from_never_readable(tmp_path, text, ready):
    path = tmp_path / "log.csv"
    path.write_text(text)
    with pytest.raises(LogFormatError) as err:
        read_log(path, live=True)
    assert isinstance(err.value, LogNotReadyError) == ready


def test_a_trainer_state_caught_mid_write_is_not_ready_and_a_csv_read_as_one_is_final(tmp_path):
    state = tmp_path / "trainer_state.json"
    for cut in ('{"log_history": [{"step": 1, "rew', '{"log_history": [{"step": 1, '):
        state.write_text(cut)
        with pytest.raises(LogNotReadyError):
            read_log(state, format="trl", live=True)
    csv = tmp_path / "log.csv"
    csv.write_text("step,reward\n1,0.5\n")
    with pytest.raises(LogFormatError) as err:
        read_log(csv, format="trl", live=True)
    assert not isinstance(err.value, LogNotReadyError)


# --- the watcher: a log that does not continue what it read before -------------------------------


def _follow(path: Path, states: list[str], **kw):
    """watch_log on `path`, writing the next of `states` after each assessment (deterministic:
    the writer is the status callback); returns (result, statuses, notes)."""
    statuses, notes, todo = [], [], list(states)

    def on_status(status, log):
        statuses.append((status, len(log)))
        if todo:
            path.write_text(todo.pop(0))

    path.write_text(todo.pop(0))
    kw = {"every": 5, "poll_s": 0.01, "idle_s": 0.3, **kw}
    result = watch_log(path, NONE, on_status=on_status, on_note=notes.append, **kw)
    return result, statuses, notes


def test_a_rotated_log_is_followed_from_its_new_start(tmp_path):
    """Rotated (a new file from step 61 on): the point count fell below the one assessed, and
    the watcher went silent until the new file outgrew the old (reviewer: stuck at step 570)."""
    steps = list(range(1, 121))
    r = _curve(steps)
    states = [_csv(steps[:60], r[:60]), _csv(steps[60:70], r[60:70]), _csv(steps[60:], r[60:])]
    result, statuses, notes = _follow(tmp_path / "log.csv", states)
    assert [s.step for s, _ in statuses] == [60, 70, 120]
    assert result.ended == "idle" and result.points == 60  # the new file's points
    assert notes == ["the log changed at step 61 (a rotated or rewritten file, or a resume that "
                     "logged new values): assessing its 10 point(s) afresh"]  # fmt: skip


def test_a_resume_cut_back_to_its_checkpoint_continues_the_same_run(tmp_path):
    """`pgrpo train --resume` cuts metrics.jsonl back to the checkpoint, then appends: the log up
    to the checkpoint is the same run, so the watcher assesses all of it, afresh."""
    steps = list(range(1, 101))
    r, again = _curve(steps), _curve(steps, seed=1)
    states = [_jsonl(steps[:80], r[:80]), _jsonl(steps[:50], r[:50]),
              _jsonl(steps[:50], r[:50]) + _jsonl(steps[50:], again[50:])]  # fmt: skip
    result, statuses, notes = _follow(tmp_path / "metrics.jsonl", states)
    assert [(s.step, n) for s, n in statuses] == [(80, 80), (50, 50), (100, 100)]
    assert result.points == 100
    assert notes == ["the log was cut back to step 50 (a resume from a checkpoint, or a "
                     "rewrite): assessing its 50 point(s) afresh"]  # fmt: skip


def test_a_fresh_run_appended_to_the_same_file_is_assessed_alone(tmp_path):
    old, new = list(range(5, 501, 5)), list(range(5, 101, 5))
    first = _jsonl(old, _curve(old))
    states = [first, first + _jsonl(new[:10], _curve(new)[:10]), first + _jsonl(new, _curve(new))]
    result, statuses, notes = _follow(tmp_path / "metrics.jsonl", states)
    assert [(s.step, n) for s, n in statuses] == [(500, 100), (50, 10), (100, 20)]
    assert result.points == 20
    assert notes == ["a new run starts at step 5 of the log, after 100 row(s) of an earlier run: "
                     "assessing the new run alone"]  # fmt: skip


def test_once_does_not_stop_a_new_run_on_the_old_runs_plateau(tmp_path):
    """The reviewer's restart_appended.jsonl: an old run to step 1000 on its plateau, then a
    restart 5..50 appended. `--once` said "stop: plateau at step 1000" (exit 3, stop file
    touched): the new job would have been stopped on the old run's tail."""
    log = tmp_path / "metrics.jsonl"
    old, new = list(range(5, 1001, 5)), list(range(5, 51, 5))
    log.write_text(_jsonl(old, _curve(old)) + _jsonl(new, _curve(new)))
    stop = tmp_path / "STOP"
    out = runner.invoke(app, ["watch", str(log), "--once", "--stop-file", str(stop), "--json"])
    assert out.exit_code == 0, out.output
    assert not stop.exists()
    assert json.loads(out.stdout.splitlines()[-1])["step"] == 50
    assert "note:" in out.stderr and "a new run starts at step 5" in out.stderr
    log.write_text(_jsonl(old, _curve(old)))  # the old run alone does stop: the test can tell
    assert runner.invoke(app, ["watch", str(log), "--once"]).exit_code == 3


def test_a_file_removed_as_it_is_read_is_read_again(tmp_path, monkeypatch):
    """A trainer deleting old checkpoints (save_total_limit) while the watcher looks: an OSError
    on a poll is retried at the next one (it ended the watch with exit 2)."""
    path = tmp_path / "log.csv"
    steps = list(range(1, 21))
    path.write_text(_csv(steps, _curve(steps)))
    calls = {"sig": 0, "read": 0}
    signature, read = watch_mod._signature, watch_mod.read_log

    def flaky_signature(p):
        calls["sig"] += 1
        if calls["sig"] == 1:
            raise FileNotFoundError(2, "No such file or directory", str(p / "checkpoint-87"))
        return signature(p)

    def flaky_read(p, **kw):
        calls["read"] += 1
        if calls["read"] == 1:
            raise FileNotFoundError(2, "No such file or directory", str(p))
        return read(p, **kw)

    monkeypatch.setattr(watch_mod, "_signature", flaky_signature)
    monkeypatch.setattr(watch_mod, "read_log", flaky_read)
    result = watch_log(path, NONE, poll_s=0.01, idle_s=0.3)
    assert result.ended == "idle" and result.points == 20 and calls["read"] == 2


def test_trl_checkpoints_deleted_mid_scan(tmp_path):
    """Old checkpoint-N/ folders removed as the watcher scans the output folder (the reviewer's
    race_writer.py): the watch goes on (it died: "error: race2/checkpoint-87: no such file")."""
    writer = textwrap.dedent(
        """
        import json, shutil, sys, time
        from pathlib import Path
        out, hist, t = Path(sys.argv[1]), [], time.time()
        for n in range(1, 10**6):
            if time.time() - t > 4:
                break
            hist.append({"step": n, "reward": 0.5 + 0.01 * (n % 7)})
            d = out / f"checkpoint-{n}"
            d.mkdir()
            for j in range(30):
                (d / f"f{j}").write_bytes(b"x" * 100)
            (d / "trainer_state.json").write_text(json.dumps({"log_history": hist}))
            if n > 1:
                shutil.rmtree(out / f"checkpoint-{n - 1}")
            time.sleep(0.02)
        """
    )
    out = tmp_path / "trl_out"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", writer, str(out)], env=env)
    try:
        args = ["--poll", "0.005", "--every", "1", "--stop-on", "none", "--idle", "2"]
        res = runner.invoke(app, ["watch", str(out), *args, "--timeout", "60"])
    finally:
        proc.wait(timeout=60)
    assert res.exit_code == 0, res.output
    assert "no such file" not in res.output


# --- the CLI: a log that will never be readable, warnings said once -------------------------------

WRITER = textwrap.dedent(
    """
    import sys, time
    path, delay, chunks = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    with open(path, "w") as fh:
        for chunk in chunks:
            fh.write(chunk.replace("|", "\\n"))
            fh.flush()
            time.sleep(delay)
    """
)


@pytest.fixture
def writer(tmp_path):
    procs = []

    def start(path, delay, chunks):
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(delay),
                                       *chunks], env=env))  # fmt: skip
        return procs[-1]

    yield start
    for p in procs:
        if p.poll() is None:
            p.terminate()
        p.wait(timeout=10)


@pytest.mark.parametrize(
    ("header", "args", "message"),
    [
        ("step,acc_mean", [], "no reward column found"),  # the reward renamed
        ("step,reward", ["--reward-column", "rewrd"], "reward column 'rewrd' not found"),
        ("step,reward", ["--format", "trl"], "not valid JSON"),
    ],
)
def test_a_log_that_will_never_be_readable_fails_at_once(tmp_path, writer, header, args, message):
    """The reviewer's ren2.csv: a job appending rows with no reward column (or a typo in
    --reward-column, a wrong --format) printed nothing for ever, as the file kept growing."""
    log = tmp_path / "log.csv"
    writer(log, 0.1, [f"{header}|", *(f"{s},0.{s % 10}|" for s in range(1, 200))])
    t = time.monotonic()
    out = runner.invoke(app, ["watch", str(log), "--poll", "0.1", "--idle", "3",
                              "--timeout", "60", *args])  # fmt: skip
    assert out.exit_code == 2 and time.monotonic() - t < 15, out.output
    lines = [x for x in out.output.strip().splitlines() if "waiting:" not in x]  # header only
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0]


def test_a_log_with_no_record_yet_is_waited_for(tmp_path, writer):
    """The header alone, then the rows: not yet readable is not the same as never readable."""
    log = tmp_path / "log.csv"
    steps = list(range(1, 31))
    rows = [f"{s},{r}|" for s, r in zip(steps, _curve(steps, tau=1e4), strict=True)]
    writer(log, 0.05, ["step,re", "ward|", "", "", "", "", *rows])
    out = runner.invoke(app, ["watch", str(log), "--poll", "0.05", "--idle", "2",
                              "--timeout", "60", "--stop-on", "none", "--json"])  # fmt: skip
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout.splitlines()[-1])["step"] == 30


def test_each_kind_of_repair_is_said_once_as_the_log_grows(tmp_path, writer):
    """A line cut mid-write at each poll is no malformed line (189 warnings before); a really
    malformed line is said once, though its count and line number change as the log grows."""
    log = tmp_path / "metrics.jsonl"
    steps = list(range(1, 41))
    lines = [
        json.dumps({"step": s, "reward": r})
        for s, r in zip(steps, _curve(steps, tau=1e4), strict=True)
    ]
    chunks = []
    for i, line in enumerate(lines):
        chunks += [line[:9], line[9:] + "|"] + (["oops|"] if i % 10 == 5 else [])
    writer(log, 0.03, chunks)
    out = runner.invoke(app, ["watch", str(log), "--poll", "0.02", "--every", "1", "--idle", "2",
                              "--timeout", "60", "--stop-on", "none"])  # fmt: skip
    assert out.exit_code == 0, out.output
    warned = [x for x in out.stderr.splitlines() if x.startswith("warning:")]
    assert len([x for x in warned if "malformed" in x]) == 1, warned
    assert out.stdout.splitlines()[-1].startswith("step 40 ")


def test_warning_kind_ignores_the_numbers():
    a = warning_kind("3 malformed line(s) skipped (first at line 7)")
    assert a == warning_kind("12 malformed line(s) skipped (first at line 9)")
    assert a != warning_kind("3 NaN/inf reward(s) dropped")


def test_once_reads_a_csv_without_a_half_written_last_row(tmp_path):
    log = tmp_path / "p.csv"
    steps = list(range(1, 30))
    log.write_text(_csv(steps, _curve(steps)) + "30,0.5")
    out = runner.invoke(app, ["watch", str(log), "--once", "--json", "--stop-on", "none"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout.splitlines()[-1])["step"] == 29


def test_a_trl_history_with_only_eval_entries_is_waited_for(tmp_path):
    """eval_on_start (or eval_steps < logging_steps) writes a checkpoint whose log_history has
    eval rows only: that is a log not ready yet, not a final 'no reward column' (watch gave up
    on it with an error before its first training row)."""
    import threading

    state = tmp_path / "checkpoint-1" / "trainer_state.json"
    state.parent.mkdir()
    evals = [{"step": 0, "epoch": 0.0, "eval_loss": 1.0, "eval_reward": 0.2}]
    state.write_text(json.dumps({"log_history": evals}))
    with pytest.raises(LogNotReadyError, match="only eval or summary entries"):
        read_log(tmp_path, live=True)
    assert read_log(state, reward_key="eval_reward").reward.tolist() == [0.2]  # named: read

    def train_rows():
        time.sleep(0.3)
        rows = [{"step": s, "reward": 0.3 + 0.01 * s, "loss": 0.1} for s in range(1, 21)]
        (tmp_path / "checkpoint-20").mkdir()
        (tmp_path / "checkpoint-20" / "trainer_state.json").write_text(
            json.dumps({"log_history": evals + rows})
        )

    thread = threading.Thread(target=train_rows)
    thread.start()
    try:
        result = watch_log(tmp_path, NONE, poll_s=0.02, idle_s=1.0, timeout_s=30)
    finally:
        thread.join()
    assert result.ended == "idle" and result.points == 20, result


@pytest.mark.parametrize("name", ["README.md", "missing.jsonl"])
def test_a_watch_on_a_file_it_cannot_read_yet_says_why_once(tmp_path, name):
    """`pgrpo watch README.md` (or a path not written yet) waited in silence until --timeout."""
    path = tmp_path / name
    if name == "README.md":
        path.write_text("# a project\n\nNot a training log.\n")
    res = runner.invoke(app, ["watch", str(path), "--poll", "0.01", "--timeout", "0.3"])
    assert res.exit_code == 2
    waits = [line for line in res.output.splitlines() if "waiting:" in line]
    assert len(waits) == 1, res.output
    assert ("unrecognised log format" if name == "README.md" else "no such file") in waits[0]
