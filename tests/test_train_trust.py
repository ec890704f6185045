"""A run folder cannot run code, has one writer, and survives signals and full disks (issue 11).

Each test failed on the code before the fix: pickled checkpoints were loaded with
weights_only=False (the marker file appeared), a second writer clobbered the log, SIGINT left no
checkpoint of the step in flight and printed a traceback, ENOSPC printed a traceback.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import TINY_CLI_ARGS
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.train import checkpoint as ckpt
from pgrpo.train.log import read_metrics
from pgrpo.train.trainer import TIMING_KEYS

_load_commands()
runner = CliRunner()

TINY = [*TINY_CLI_ARGS, "forecast_every=0"]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("PGRPO_CACHE", str(tmp_path_factory.getbasetemp() / "pgrpo-cache"))


def _args(tmp_path, name, *extra):
    return ["train", *TINY, f"run.output_dir={tmp_path}", f"run.name={name}", *extra]


def _train(tmp_path, name, *extra):
    out = runner.invoke(app, [*_args(tmp_path, name, *extra), "--json"])
    assert out.exit_code == 0, out.output
    return tmp_path / name


def _log(run_dir):
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in read_metrics(run_dir)]


def _one_error_line(out):
    """The failure is one `error:` line (beside the progress bar and notes), no traceback."""
    lines = [x for x in out.output.splitlines() if x.startswith("error:")]
    return len(lines) == 1 and "Traceback" not in out.output


class _RunsCommand:
    """Unpickling this runs `touch <marker>` (what a hostile checkpoint would do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(str(self.marker))}",))


# ---------------------------------------------------------------------------------------------
# 1. No code execution from a run folder
# ---------------------------------------------------------------------------------------------


def test_a_checkpoint_carrying_a_pickled_command_is_refused_and_never_runs(tmp_path):
    run_dir = _train(tmp_path, "r", "steps=2")
    state_file = run_dir / "checkpoints" / "step-2" / "state.pt"
    state = torch.load(state_file, weights_only=True)
    marker = tmp_path / "pwned"
    state["data_position"] = _RunsCommand(marker)
    torch.save(state, state_file)

    resumed = runner.invoke(app, [*_args(tmp_path, "r", "steps=3"), "--resume"])
    assert resumed.exit_code == 2
    assert "refused" in resumed.output and "state.pt" in resumed.output
    assert _one_error_line(resumed)
    evaluated = runner.invoke(app, ["eval", "--model", str(run_dir), "--problems", "2"])
    assert evaluated.exit_code != 0
    from pgrpo.train.policies import load_policy
    from pgrpo.train.rollout import load_checkpoint_weights

    policy = load_policy(load_config_of(run_dir).model, warm_up=False)
    with pytest.raises(ckpt.UnsafeCheckpointError, match="refused"):
        load_checkpoint_weights(policy, run_dir / "checkpoints" / "step-2")  # probe --run's path
    assert not marker.exists()


def load_config_of(run_dir):
    from pgrpo.train.config import load_config

    return load_config(run_dir / "config.yaml")


def test_checkpoints_latest_pointing_outside_the_run_is_refused(tmp_path):
    run_dir = _train(tmp_path, "r", "steps=2")
    outside = tmp_path / "elsewhere" / "step-7"
    outside.mkdir(parents=True)
    (outside / "state.pt").write_bytes((run_dir / "checkpoints/step-2/state.pt").read_bytes())
    latest = run_dir / "checkpoints" / "latest"
    for target in ("../../elsewhere/step-7", "/etc", "step-9"):
        if target == "step-9":  # a step-<n> name that is a symlink out of checkpoints/
            (run_dir / "checkpoints" / "step-9").symlink_to(outside)
        latest.write_text(target + "\n")
        with pytest.raises(ckpt.UnsafeCheckpointError, match="not a step-<n> folder inside"):
            ckpt.latest_checkpoint(run_dir)
        out = runner.invoke(app, [*_args(tmp_path, "r", "steps=3"), "--resume"])
        assert out.exit_code == 2 and "refused" in out.output, out.output


def test_a_deleted_or_damaged_checkpoint_is_refused_and_the_log_kept(tmp_path):
    """The old code restarted at step 1 (overwriting the log) when `latest` named a folder
    without its state file."""
    run_dir = _train(tmp_path, "r", "steps=2")
    log = (run_dir / "metrics.jsonl").read_text()
    state = run_dir / "checkpoints" / "step-2" / "state.pt"
    data = state.read_bytes()
    for damage in ("deleted", "cut"):
        if damage == "deleted":
            state.unlink()
        else:
            state.write_bytes(data[: len(data) // 2])
        out = runner.invoke(app, [*_args(tmp_path, "r", "steps=3"), "--resume"])
        assert out.exit_code == 2 and _one_error_line(out), out.output
        assert ("has no state.pt" if damage == "deleted" else "is damaged") in out.output
        assert "--overwrite" in out.output
        assert (run_dir / "metrics.jsonl").read_text() == log


def test_checkpoint_state_is_plain_tensors_and_values(tmp_path):
    run_dir = _train(tmp_path, "r", "steps=1")
    state = torch.load(run_dir / "checkpoints/step-1/state.pt", weights_only=True)
    assert isinstance(state["rng"]["numpy"]["keys"], torch.Tensor)
    assert state["format"] == 2 and state["step"] == 1 and len(state["base_digest"]) == 64


# ---------------------------------------------------------------------------------------------
# 2 + 5. One writer; SIGINT / SIGTERM stop with a checkpoint and the resume command
# ---------------------------------------------------------------------------------------------

_CLI = "import sys; from pgrpo.cli import main; sys.argv[0] = 'pgrpo'; main()"


def _start(tmp_path, name, *extra):
    cmd = [sys.executable, "-c", _CLI, *_args(tmp_path, name, *extra)]
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
    )


def _wait_for_steps(proc, run_dir, n, timeout=240):
    log = run_dir / "metrics.jsonl"
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if log.exists() and len(log.read_text().splitlines()) >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"the run ended or stalled before step {n}: {proc.communicate()}")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_second_writer_fails_naming_the_holder_and_a_signal_stops_with_a_checkpoint(
    tmp_path, signum
):
    # 24 steps, not 8: the two second-writer invocations run while the live run goes on, and
    # with the faster sampler (2026-12-02) a tiny 8-step run could finish before the signal
    n_steps = 24
    steps = [f"steps={n_steps}", "checkpoint_every=5"]
    reference = _log(_train(tmp_path, "ref", *steps))
    proc = _start(tmp_path, "live", *steps)
    run_dir = tmp_path / "live"
    try:
        _wait_for_steps(proc, run_dir, 1)
        for extra in (["--overwrite"], ["--resume"]):
            second = runner.invoke(app, [*_args(tmp_path, "live", *steps), *extra])
            assert second.exit_code == 2, second.output
            assert f"pid {proc.pid}" in second.output
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signum
    line = [x for x in err.splitlines() if x.startswith("stopped:")]
    assert len(line) == 1 and "Traceback" not in err, err
    done = len(read_metrics(run_dir))
    assert 1 <= done < n_steps
    assert f"checkpoint step-{done} holds step {done}" in line[0]  # the step in flight, saved
    assert (run_dir / "checkpoints" / f"step-{done}" / "state.pt").is_file()
    command = line[0].split("resume: ", 1)[1]
    argv = shlex.split(command)
    assert argv[:2] == ["pgrpo", "train"] and "--resume" in argv
    finished = runner.invoke(app, argv[1:])
    assert finished.exit_code == 0, finished.output
    assert _log(run_dir) == reference  # one trajectory, identical to the uninterrupted run


@pytest.mark.parametrize("at", [1, 3])
def test_a_signal_between_steps_checkpoints_the_last_finished_step(tmp_path, at):
    """A signal that lands after a step's checkpoint decision (here in on_step, where the CLI
    prints its progress line) stopped the next step's start with "after step 0: no checkpoint"
    on the old code (CI, 2026-12-06): the steps already logged were lost to the resume."""
    from test_train_resume import cfg

    from pgrpo.train.interrupts import RunInterrupted
    from pgrpo.train.trainer import train

    reference = _log(train(cfg(tmp_path, "ref", "checkpoint_every=5")).run_dir)

    def signal_after(metrics):
        if metrics["step"] == at:
            os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(RunInterrupted) as stopped:
        train(cfg(tmp_path, "live", "checkpoint_every=5"), on_step=signal_after)
    run_dir = tmp_path / "live"
    assert stopped.value.step == at and stopped.value.exit_code == 128 + signal.SIGTERM
    assert f"checkpoint step-{at} holds step {at}" in str(stopped.value)
    assert len(read_metrics(run_dir)) == at
    train(cfg(tmp_path, "live", "checkpoint_every=5"), resume=True)
    assert _log(run_dir) == reference  # nothing lost: the resume goes on from step `at`


def test_a_second_signal_abandons_the_step_and_resume_still_matches(tmp_path):
    steps = ["steps=8", "checkpoint_every=2"]
    reference = _log(_train(tmp_path, "ref", *steps))
    proc = _start(tmp_path, "twice", *steps)
    run_dir = tmp_path / "twice"
    try:
        _wait_for_steps(proc, run_dir, 3)
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 130
    line = [x for x in err.splitlines() if x.startswith("stopped:")]
    assert len(line) == 1 and "Traceback" not in err, err
    latest = ckpt.latest_checkpoint(run_dir)
    assert f"checkpoint {latest.name} holds step" in line[0]
    finished = runner.invoke(app, shlex.split(line[0].split("resume: ", 1)[1])[1:])
    assert finished.exit_code == 0, finished.output
    assert _log(run_dir) == reference


def test_two_runs_started_together_one_fails_and_the_log_holds_one_trajectory(tmp_path):
    reference = _log(_train(tmp_path, "ref", "steps=4"))
    procs = [_start(tmp_path, "both", "steps=4", "--overwrite") for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], outs
    loser = outs[[p.returncode for p in procs].index(2)][1]
    assert "being written by another pgrpo process" in loser or "already holds a run" in loser
    assert _log(tmp_path / "both") == reference


# ---------------------------------------------------------------------------------------------
# 5. Disk full
# ---------------------------------------------------------------------------------------------


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_disk_full_at_a_checkpoint_is_one_line_and_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    run_dir = _train(tmp_path, "r", "steps=2", "checkpoint_every=1")
    monkeypatch.setattr(ckpt.torch, "save", _enospc)
    out = runner.invoke(app, [*_args(tmp_path, "r", "steps=3", "checkpoint_every=1"), "--resume"])
    assert out.exit_code == 2
    assert _one_error_line(out) and "no space left" in out.output
    assert "checkpoint step-3" in out.output and str(run_dir / "checkpoints") in out.output
    assert ckpt.latest_checkpoint(run_dir).name == "step-2"
    assert not [p for p in (run_dir / "checkpoints").iterdir() if p.name.startswith(".tmp")]
    monkeypatch.undo()
    again = runner.invoke(
        app, [*_args(tmp_path, "r", "steps=3", "checkpoint_every=1"), "--resume", "--json"]
    )
    assert again.exit_code == 0, again.output
    assert [r["step"] for r in read_metrics(run_dir)] == [1, 2, 3]


def test_disk_full_writing_the_log_is_one_line_and_leaves_no_torn_line(tmp_path, monkeypatch):
    run_dir = _train(tmp_path, "r", "steps=1")
    import pgrpo.train.log as log_module

    monkeypatch.setattr(log_module.os, "fsync", _enospc)
    out = runner.invoke(app, [*_args(tmp_path, "r", "steps=2"), "--resume"])
    assert out.exit_code == 2 and _one_error_line(out)
    assert "no space left" in out.output and "metrics.jsonl" in out.output
    text = (run_dir / "metrics.jsonl").read_text()
    assert text.endswith("\n") and [json.loads(x)["step"] for x in text.splitlines()] == [1]


@pytest.fixture
def small_disk(tmp_path):
    """A 640 KiB tmpfs (root only): room for one tiny-model checkpoint, not two."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    cmd = ["mount", "-t", "tmpfs", "-o", "size=640k", "tmpfs", str(mnt)]
    if os.geteuid() != 0 or subprocess.run(cmd, capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_really_full_disk_is_one_line_and_the_run_resumes_once_there_is_room(
    tmp_path, small_disk
):
    """On a real full device torch's zip writer reports RuntimeError, not ENOSPC."""
    steps = ["steps=4", "checkpoint_every=1"]
    reference = _log(_train(tmp_path, "ref", *steps))
    args = ["train", *TINY, *steps, f"run.output_dir={small_disk}", "run.name=r"]
    out = runner.invoke(app, args)
    assert out.exit_code == 2 and _one_error_line(out), out.output
    assert "no space left on the device writing checkpoint step-" in out.output
    run_dir = small_disk / "r"
    assert ckpt.latest_checkpoint(run_dir) is not None
    assert not [p for p in (run_dir / "checkpoints").iterdir() if p.name.startswith(".tmp")]
    remount = ["mount", "-o", "remount,size=16m", str(small_disk)]
    subprocess.run(remount, check=True)
    again = runner.invoke(app, [*args, "--resume", "--json"])
    assert again.exit_code == 0, again.output
    assert _log(run_dir) == reference


def test_partial_checkpoint_folders_are_removed_on_the_next_start(tmp_path):
    run_dir = _train(tmp_path, "r", "steps=1")
    (run_dir / "checkpoints" / ".tmp-step-2-99999").mkdir()
    (run_dir / "checkpoints" / ".tmp-step-2-99999" / "state.pt").write_bytes(b"\0" * 10)
    (run_dir / "checkpoints" / ".latest-99999").write_text("step-2\n")
    out = runner.invoke(app, [*_args(tmp_path, "r", "steps=2"), "--resume", "--json"])
    assert out.exit_code == 0, out.output
    assert "removed partial checkpoint files" in out.output
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["latest", "step-2"]


def _kill_a_writer_whose_child_lives_on(run_dir, before_fork: str = "") -> None:
    """Start a process that takes run_dir's lock, runs `before_fork` (one line of Python inside
    the lock, `runlock` imported), forks a child that sleeps on, and SIGKILL it."""
    import signal
    import subprocess
    import sys

    code = (
        "import os, sys, time\n"
        "from pgrpo.train import runlock\n"
        "with runlock.run_lock(sys.argv[1]):\n"
        f"    {before_fork or 'pass'}\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(30); os._exit(0)\n"
        "    print('ready', flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(run_dir)], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"ready"
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_a_killed_writer_whose_forked_child_lives_on_does_not_keep_the_lock(tmp_path):
    """The reward scorer forks a child per batch; a SIGKILL of the trainer left that child holding
    the inherited lock until it exited, so a resume straight after the kill was refused (seen once
    in tests/test_train_resume.py's SIGKILL test under load)."""
    from pgrpo.train.runlock import run_lock

    _kill_a_writer_whose_child_lives_on(tmp_path)
    with run_lock(tmp_path):  # the orphaned child is still asleep; the lock is free
        pass


def test_a_child_that_still_has_the_lock_file_open_does_not_keep_the_lock(tmp_path):
    """The race behind the test above, made certain: the child keeps an open descriptor of the
    lock file (a dup its at-fork hook does not know of, as a child that has not yet run the
    hook when the trainer is killed). The lock is the dead writer's own, so it is free."""
    from pgrpo.train.runlock import run_lock

    _kill_a_writer_whose_child_lives_on(
        tmp_path, "spare = os.dup(next(iter(runlock._HELD.values())))"
    )
    with run_lock(tmp_path):
        pass


def test_a_second_lock_of_the_same_folder_in_one_process_is_refused_and_keeps_the_first(tmp_path):
    import subprocess
    import sys

    from pgrpo.train.runlock import RunLockedError, run_lock

    probe = ("import sys\nfrom pgrpo.train.runlock import run_lock, RunLockedError\n"
             "try:\n    with run_lock(sys.argv[1]): print('free')\n"
             "except RunLockedError: print('held')\n")  # fmt: skip
    with run_lock(tmp_path):
        with pytest.raises(RunLockedError, match="this process"):
            with run_lock(tmp_path):
                pass
        out = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True,
                             text=True, timeout=60).stdout.strip()  # fmt: skip
        assert out == "held"  # the refused second lock did not release the first
    with run_lock(tmp_path):  # released on leaving the block
        pass


def test_a_model_folder_published_by_another_process_first_is_kept(tmp_path):
    """Two runs converting SmolLM2 at once on a fresh machine: the second's os.replace of its
    folder onto the first's (not empty) raised ENOTEMPTY and that run failed (seen when a
    benchmark started while the test suite converted the model)."""
    from pgrpo.train.policies import publish

    target, first, second = tmp_path / "model", tmp_path / "model.tmp1", tmp_path / "model.tmp2"
    for folder, text in ((first, "first"), (second, "second")):
        folder.mkdir()
        (folder / "config.json").write_text(text)
    publish(first, target)
    assert (target / "config.json").read_text() == "first" and not first.exists()
    publish(second, target)  # the race: target already published
    assert (target / "config.json").read_text() == "first" and not second.exists()
    half = tmp_path / "half"  # a target without config.json is not a finished model: still raises
    (half / "x").mkdir(parents=True)
    third = tmp_path / "model.tmp3"
    third.mkdir()
    with pytest.raises(OSError):
        publish(third, half)
