"""SIGINT / SIGTERM during training: stop at a step boundary with a checkpoint.

    with stop_on_signals(run_dir) as stop:
        for step in ...:
            if stop.signum is not None:
                checkpoint the previous step unless done; raise interrupted(stop.signum, run_dir)
            ...one step...; checkpoint it too if stop.signum is set

The first signal only sets `stop.signum`: the step in flight finishes, is logged and
checkpointed, and the run ends with `RunInterrupted` (which names the `--resume` command); a
signal between steps checkpoints the last finished one; a signal during set-up stops the run
before its first step. A second signal abandons the step at
once (`StepAbandoned`, a BaseException so that no `except Exception` swallows it); the last
checkpoint stands and resume recomputes from there.
Off the main thread (no signal handlers there) the context does nothing.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StepAbandoned(BaseException):
    """A second signal arrived: the step in flight is dropped."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class RunInterrupted(Exception):
    """The run stopped on a signal; `exit_code` is 128 + the signal number."""

    def __init__(self, signum: int, step: int, checkpoint: Path | None, command: str) -> None:
        name = signal.Signals(signum).name
        where = f"checkpoint {checkpoint.name} holds step {step}" if checkpoint else "no checkpoint"
        super().__init__(f"interrupted by {name} after step {step}: {where}; resume: {command}")
        self.signum, self.step, self.checkpoint, self.command = signum, step, checkpoint, command
        self.exit_code = 128 + signum


def resume_command(run_dir: Path) -> str:
    """The exact command that continues the run in `run_dir` (a relative run.output_dir is
    relative to this directory, so the command starts there)."""
    command = f"pgrpo train --config {shlex.quote(str(Path(run_dir) / 'config.yaml'))} --resume"
    if Path(run_dir).is_absolute():
        return command
    return f"cd {shlex.quote(os.getcwd())} && {command}"


def interrupted(signum: int, run_dir: Path) -> RunInterrupted:
    """The RunInterrupted that names the run's latest checkpoint and how to resume from it."""
    from pgrpo.train.checkpoint import latest_checkpoint

    latest = latest_checkpoint(run_dir)
    step = int(latest.name.split("-")[1]) if latest else 0
    return RunInterrupted(signum, step, latest, resume_command(run_dir))


@contextlib.contextmanager
def stop_on_signals(run_dir: Path) -> Iterator[StopFlag]:
    """`deferred_signals`, with an abandoned step turned into RunInterrupted."""
    with deferred_signals() as flag:
        try:
            yield flag
        except StepAbandoned as exc:
            raise interrupted(exc.signum, run_dir) from None


@dataclass
class StopFlag:
    signum: int | None = None


@contextlib.contextmanager
def deferred_signals() -> Iterator[StopFlag]:
    flag = StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum: int, frame: object) -> None:
        if flag.signum is not None:
            raise StepAbandoned(signum)
        flag.signum = signum

    previous = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield flag
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
