"""One writer per run folder: an exclusive `fcntl.flock` on `RUN_DIR/.lock`.

    with run_lock(run_dir):      # RunLockedError at once if another process holds it
        ...                      # write metrics.jsonl, config.yaml, checkpoints

The lock belongs to the open file description, so the kernel releases it when the process ends,
however it ends (SIGKILL included): a stale lock file never blocks a resume. The file holds the
holder's PID, which the error names. The file is never deleted (deleting it would let two
processes lock two different files of the same name). A forked child (the reward scorer forks
one per batch) closes its inherited copy of the descriptor at once: otherwise, when the trainer
is killed, the child would keep the lock until it exits and a resume straight after the kill
would be refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

LOCK_FILE = ".lock"
_HELD: set[int] = set()  # descriptors of the locks this process holds


def _close_in_child() -> None:
    for fd in _HELD:
        with contextlib.suppress(OSError):
            os.close(fd)  # the child's copy only: the parent's lock stays
    _HELD.clear()


os.register_at_fork(after_in_child=_close_in_child)


class RunLockedError(RuntimeError):
    """Another live process is writing this run folder."""


@contextlib.contextmanager
def run_lock(run_dir: str | Path) -> Iterator[Path]:
    """Hold the exclusive lock of `run_dir` (created if missing) for the block; yields the
    lock file's path."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise RunLockedError(
                f"{run_dir} is being written by another pgrpo process (pid {holder}): wait for it "
                f"to finish or stop it (kill -INT {holder}), or choose another run.name"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _HELD.add(fd)
        yield path
    finally:
        _HELD.discard(fd)
        os.close(fd)  # releases the lock
