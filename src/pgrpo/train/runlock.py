"""One writer per run folder: an exclusive POSIX record lock (`fcntl.lockf`) on `RUN_DIR/.lock`.

    with run_lock(run_dir):      # RunLockedError at once if another process holds it
        ...                      # write metrics.jsonl, config.yaml, checkpoints

A POSIX lock belongs to the process that took it: the kernel releases it when that process
ends, however it ends (SIGKILL included), so a stale lock file never blocks a resume; and a
forked child does not inherit it (the reward scorer forks one per batch: with `flock`, whose
lock belongs to the open file description, a child that had not yet run its at-fork hook when
the trainer was killed kept the lock, and a resume straight after the kill was refused; seen
in the test suite on a loaded machine, 2026-12-04). Because a POSIX lock is not exclusive
within its own process, and closing any descriptor of the file releases it, a second
`run_lock` of the same file in the same process is refused before the file is opened
(`_HELD`, by device and inode). The file holds the holder's PID, which the error names. The
file is never deleted (deleting it would let two processes lock two different files of the
same name). A forked child closes its inherited copy of the descriptor at once (tidiness: it
holds no lock either way).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

LOCK_FILE = ".lock"
_HELD: dict[tuple[int, int], int] = {}  # (device, inode) of each lock file held -> its fd


def _close_in_child() -> None:
    for fd in _HELD.values():
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
    with contextlib.suppress(FileNotFoundError):
        st = os.stat(path)
        if (st.st_dev, st.st_ino) in _HELD:  # opening it again would be closing it: refuse first
            raise RunLockedError(
                f"{run_dir} is already being written by this process (pid {os.getpid()}): "
                "finish that run first, or choose another run.name"
            )
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    key = None
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EAGAIN):
                raise
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise RunLockedError(
                f"{run_dir} is being written by another pgrpo process (pid {holder}): wait for it "
                f"to finish or stop it (kill -INT {holder}), or choose another run.name"
            ) from None
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _HELD[key] = fd
        yield path
    finally:
        if key is not None:
            _HELD.pop(key, None)
        os.close(fd)  # releases the lock


def check_unlocked(run_dir: str | Path) -> None:
    """RunLockedError now if another process (or this one) holds `run_dir`'s lock; nothing is
    created where the folder or its lock file does not exist. For a caller that wants to say so
    before it prints anything; `run_lock` still decides (another process may take the lock in
    between)."""
    if (Path(run_dir) / LOCK_FILE).is_file():
        with run_lock(run_dir):
            pass
