"""Reward calls run in a child process (`pgrpo.tasks.scoring`'s "fork" and "process" modes),
killed when a call runs past its timeout: a child forked per batch, or one persistent worker
process (multiprocessing 'forkserver', else 'spawn') that the task is sent to once per batch.
After a timeout or a crash scoring goes on in a new child with the next completion. At exit the
worker is killed, before multiprocessing's own exit handler (which would wait for it for ever)."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import multiprocessing
import multiprocessing.util
import pickle
import signal
import threading
from collections.abc import Callable
from typing import Any

from pgrpo.tasks.scoring_tally import Tally, checked_reward, describe_failure

WORKER_START_TIMEOUT_S = 120.0


def _ignore_stop_signals() -> None:
    """Reward processes leave SIGINT/SIGTERM to the trainer (a Ctrl-C or a `kill` of the process
    group must not fail the step in flight: the trainer finishes it); the parent kills them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _worker_main(conn: Any) -> None:
    """Worker loop. Messages: ("task", token, bytes) -> ("ready",) | ("load_error", msg);
    ("score", token, [(i, completion, example)]) -> one ("ok"|"err", i, value|msg) per item."""
    _ignore_stop_signals()
    tasks: dict[str, Any] = {}
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg[0] == "task":
            _, token, blob = msg
            try:
                task = pickle.loads(blob)
                prepare = getattr(task, "prepare", None)
                if callable(prepare):
                    prepare()
                tasks = {token: task}  # keep only the current task
                conn.send(("ready",))
            except BaseException as exc:  # report, keep serving
                conn.send(("load_error", describe_failure(exc)))
        elif msg[0] == "score":
            _, token, items = msg
            task = tasks[token]
            for i, completion, example in items:
                try:
                    conn.send(("ok", i, checked_reward(task.reward(completion, example))))
                except BaseException as exc:
                    conn.send(("err", i, describe_failure(exc)))
        elif msg[0] == "stop":
            return


def _fork_main(conn: Any, reward: Callable[[str, dict], Any], items: list) -> None:
    """Child of the "fork" mode: score `items` in order, one reply per item."""
    _ignore_stop_signals()
    for i, completion, example in items:
        try:
            conn.send(("ok", i, checked_reward(reward(completion, example))))
        except BaseException as exc:
            conn.send(("err", i, describe_failure(exc)))
    conn.close()


def _collect(conn: Any, items: list, tally: Tally, timeout_s: float) -> tuple[int, bool]:
    """Read one reply per item, each within `timeout_s`; returns (items settled, whether the
    child timed out or crashed). Stops at the first timeout or crash (counted): the caller kills
    the child then."""
    done = 0
    for i, _, _ in items:
        try:
            reply = conn.recv() if conn.poll(timeout_s) else None
        except (EOFError, OSError):
            reply = ("crash",)
        if reply is None or reply[0] == "crash":
            timeout = reply is None
            msg = f"timeout after {timeout_s:g} s" if timeout else "reward worker crashed"
            tally.fail(i, msg, timeout=timeout)
            return done + 1, True
        if reply[0] == "ok":
            tally.ok(i, reply[2])
        else:
            tally.fail(i, f"error: {reply[2]}")
        done += 1
    return done, False


def score_fork(reward: Callable, items: list, tally: Tally, timeout_s: float) -> None:
    """Score in a child forked per batch (and again after each timeout), killed on a timeout."""
    ctx = multiprocessing.get_context("fork")
    pending = list(items)
    while pending:
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_fork_main, args=(child, reward, pending), daemon=True)
        proc.start()
        child.close()
        try:
            done, _ = _collect(parent, pending, tally, timeout_s)
        finally:
            parent.close()
            proc.kill()  # done or hung: either way no need to wait for a clean exit
            proc.join(timeout=5)
        pending = pending[done:]


class TaskLoadError(RuntimeError):
    pass


class _Worker:
    """One persistent reward process, restarted after a timeout or a crash."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: Any = None
        self.conn: Any = None
        self.token: str | None = None

    @staticmethod
    def _context() -> Any:
        methods = multiprocessing.get_all_start_methods()
        if "forkserver" in methods:
            ctx = multiprocessing.get_context("forkserver")
            # The fork server imports pgrpo once; each (re)started worker is then a cheap fork.
            ctx.set_forkserver_preload(["pgrpo.tasks.scoring_worker"])
            return ctx
        return multiprocessing.get_context("spawn")

    def _start(self) -> None:
        ctx = self._context()
        parent, child = ctx.Pipe(duplex=True)
        proc = ctx.Process(target=_worker_main, args=(child,), name="pgrpo-reward", daemon=True)
        proc.start()
        child.close()
        self.proc, self.conn, self.token = proc, parent, None

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(OSError):
            self.conn.close()
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=5)
        self.proc, self.conn, self.token = None, None, None

    def _ensure(self, token: str, blob: bytes) -> None:
        if self.proc is None or not self.proc.is_alive():
            self.stop()
            self._start()
        if self.token == token:
            return
        self.conn.send(("task", token, blob))
        if not self.conn.poll(WORKER_START_TIMEOUT_S):
            self.stop()
            raise TaskLoadError(
                f"the reward worker did not load the task in {WORKER_START_TIMEOUT_S} s"
            )
        try:
            reply = self.conn.recv()
        except (EOFError, OSError) as exc:
            self.stop()
            raise TaskLoadError(f"the reward worker died loading the task ({exc})") from None
        if reply[0] != "ready":
            raise TaskLoadError(reply[1])
        self.token = token

    def score(self, blob: bytes, items: list, tally: Tally, timeout_s: float) -> None:
        token = hashlib.sha1(blob).hexdigest()
        pending = list(items)
        while pending:
            self._ensure(token, blob)
            self.conn.send(("score", token, pending))
            try:
                done, failed = _collect(self.conn, pending, tally, timeout_s)
            except BaseException:  # interrupted (e.g. a second Ctrl-C): unread replies stale
                self.stop()
                raise
            if failed:
                self.stop()  # kill the hung worker; the next loop restarts it
            pending = pending[done:]


WORKER = _Worker()
# Before multiprocessing's exit handler SIGTERMs the worker (ignored) and joins it for ever: a
# finalizer that handler runs first, and an atexit handler registered after it (run first, LIFO).
multiprocessing.util.Finalize(None, WORKER.stop, exitpriority=100)
atexit.register(WORKER.stop)


def shutdown_workers() -> None:
    """Stop the reward worker process (it restarts on the next `score_completions`)."""
    with WORKER.lock:
        WORKER.stop()
