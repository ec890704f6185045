"""SIGINT / SIGTERM during training: stop at a step boundary with a checkpoint.

    with deferred_signals() as stop:
        for step in ...:
            ...one step...
            if stop.signum is not None: checkpoint, then raise RunInterrupted(...)

The first signal only sets `stop.signum`: the step in flight finishes, is logged and
checkpointed, and the run ends with `RunInterrupted` (which names the `--resume` command). A
second signal abandons the step at once (`StepAbandoned`, a BaseException so that no
`except Exception` swallows it); the last checkpoint stands and resume recomputes from there.
Off the main thread (no signal handlers there) the context does nothing.
"""

from __future__ import annotations

import contextlib
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
    """The exact command that continues the run in `run_dir`."""
    return f"pgrpo train --config {shlex.quote(str(Path(run_dir) / 'config.yaml'))} --resume"


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
