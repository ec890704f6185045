"""Safe reward scoring: every reward call has a timeout, and no reward failure reaches the caller.

    result = score_completions(task, completions, examples, timeout_s=5.0)
    result.rewards   # a float per completion; the low end of the reward range where a call failed
    result.errors, result.timeouts, result.error_messages, result.metrics

How a call is isolated (`isolation="auto"`, the default): always in another process, which is
killed when a call runs past `timeout_s`. Only a kill stops every hang: C code that never returns
to Python (regex backtracking, sympy), and a reward that catches `BaseException` in a loop (which
swallows any exception a timer raises in-process).
- A task that declares `reward_is_fast = True` (arithmetic, gsm8k: microseconds of regex) and a
  task that cannot be pickled (a lambda or closure reward) run in a child forked for the batch
  ("fork": nothing is pickled, the child shares the parent's memory; milliseconds per batch).
- Any other task (math-verify, IFEval checkers, user functions) runs in one persistent worker
  process ("process": multiprocessing 'forkserver' context, 'spawn' where that is missing); the
  task is sent once per batch.
In both, each completion gets `timeout_s` from the moment the previous one finished; on a timeout
the child is killed and scoring continues in a new one with the next completion.
Where fork is missing (Windows), fast and unpicklable tasks fall back to a `SIGALRM` timer in the
main thread ("signal"), with a warning. The explicit modes "signal" and "inline" (no timeout) run
here: they cannot stop C code or a reward that swallows `BaseException`. At exit the worker is
killed, before multiprocessing's own exit handler (which would wait for it for ever).

Exceptions, timeouts and non-finite rewards score `failure_reward(reward_range)` (the low end of
the range, 0.0 without one: never above a wrong answer) and are counted; only a programming error
of the caller (mismatched lengths, an unknown isolation mode) raises.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import math
import multiprocessing
import multiprocessing.util
import pickle
import signal
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pgrpo.core.rewardrange import failure_reward
from pgrpo.tasks.base import task_reward_range

MAX_ERROR_MESSAGES = 5
WORKER_START_TIMEOUT_S = 120.0
ISOLATION_MODES = ("auto", "process", "fork", "signal", "inline")


@dataclass(frozen=True)
class ScoreResult:
    """Rewards of one batch plus what went wrong.

    - `rewards`: [N] floats in input order; a failed call scores the low end of the range.
    - `errors`: calls that raised, returned a non-number or a NaN/inf.
    - `timeouts`: calls that ran past `timeout_s`.
    - `error_messages`: the first few failure messages (for the log), each naming its completion.
    - `isolation`: how the calls were run ("process", "fork", "signal" or "inline").
    """

    rewards: list[float]
    errors: int
    timeouts: int
    error_messages: tuple[str, ...] = ()
    isolation: str = "inline"
    seconds: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)


class RewardTimeout(BaseException):
    """Raised inside a reward call by the signal timer. A BaseException so that a reward function's
    own `except Exception` cannot swallow it."""


def _check_value(value: Any) -> float:
    """The reward as a float (True: 1.0), or ValueError naming what is wrong with it."""
    try:
        if isinstance(value, str | bytes):  # float("0.7") would take a string
            raise TypeError
        out = float(value)
    except Exception:  # noqa: BLE001 - a failing float() (10**400) is a counted error
        msg = f"reward must be a real number, got {type(value).__name__} {value!r:.80}"
        raise ValueError(msg) from None
    if not math.isfinite(out):
        raise ValueError(
            f"reward is not finite ({out}); a reward function must return a finite float"
        )
    return out


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


class _Tally:
    """Collects rewards and failures in input order."""

    def __init__(self, n: int, failed: float) -> None:
        self.failed = failed
        self.rewards = [failed] * n
        self.errors = 0
        self.timeouts = 0
        self.messages: list[str] = []

    def ok(self, i: int, value: Any) -> None:
        try:
            self.rewards[i] = _check_value(value)
        except ValueError as exc:
            self.fail(i, f"error: {exc}")

    def fail(self, i: int, message: str, timeout: bool = False) -> None:
        self.rewards[i] = self.failed
        if timeout:
            self.timeouts += 1
        else:
            self.errors += 1
        if len(self.messages) < MAX_ERROR_MESSAGES:
            self.messages.append(f"completion {i}: {message}")


# ----------------------------------------------------------------------------- in-process paths


class _Alarm:
    """SIGALRM handler of the signal path: raises RewardTimeout in the reward, again every
    REPEAT_S while the call goes on, and remembers that it fired. A reward that catches
    BaseException in a loop still cannot be stopped in-process (tracing cannot be switched on
    from a signal handler in the interrupted frame): that needs the "fork" or "process" modes."""

    REPEAT_S = 0.1

    def __init__(self) -> None:
        self.fired = 0

    def __call__(self, signum: int, frame: Any) -> None:
        self.fired += 1
        raise RewardTimeout()


def _call_with_alarm(reward: Callable, completion: str, example: dict, timeout_s: float) -> Any:
    """`reward(completion, example)` under the alarm; RewardTimeout when it fired at all."""
    alarm = _Alarm()
    signal.signal(signal.SIGALRM, alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, timeout_s, _Alarm.REPEAT_S)
        try:
            value = reward(completion, example)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except RewardTimeout:
        raise
    except Exception:
        if alarm.fired:  # the reward turned our timeout into its own exception
            raise RewardTimeout() from None
        raise
    if alarm.fired:  # it swallowed the timeout and returned late
        raise RewardTimeout()
    return value


def _score_signal(
    reward: Callable[[str, dict], float],
    items: Sequence[tuple[int, str, dict]],
    tally: _Tally,
    timeout_s: float,
) -> None:
    """Main thread only: an ITIMER_REAL timer interrupts each call after `timeout_s`.

    A timer someone else had armed (e.g. pytest-timeout's) is re-armed afterwards with the time it
    had left, so an outer timeout still fires."""
    outer_delay, outer_interval = signal.getitimer(signal.ITIMER_REAL)
    started = time.monotonic()
    previous = signal.getsignal(signal.SIGALRM)
    try:
        for i, completion, example in items:
            try:
                value = _call_with_alarm(reward, completion, example, timeout_s)
            except RewardTimeout:
                tally.fail(i, f"timeout after {timeout_s:g} s", timeout=True)
            except Exception as exc:  # a reward failure never reaches the caller
                tally.fail(i, f"error: {_describe(exc)}")
            else:
                tally.ok(i, value)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_delay > 0:  # overdue: fire almost at once
            left = max(outer_delay - (time.monotonic() - started), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left, outer_interval)


def _score_inline(
    reward: Callable[[str, dict], float], items: Sequence[tuple[int, str, dict]], tally: _Tally
) -> None:
    """No timeout possible: used only off the main thread for tasks the worker cannot run."""
    for i, completion, example in items:
        try:
            value = reward(completion, example)
        except Exception as exc:
            tally.fail(i, f"error: {_describe(exc)}")
        else:
            tally.ok(i, value)


# ----------------------------------------------------------------------------- worker process


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
                conn.send(("load_error", _describe(exc)))
        elif msg[0] == "score":
            _, token, items = msg
            task = tasks[token]
            for i, completion, example in items:
                try:
                    conn.send(("ok", i, _check_value(task.reward(completion, example))))
                except BaseException as exc:
                    conn.send(("err", i, _describe(exc)))
        elif msg[0] == "stop":
            return


def _fork_main(conn: Any, reward: Callable[[str, dict], Any], items: list) -> None:
    """Child of the "fork" mode: score `items` in order, one reply per item."""
    _ignore_stop_signals()
    for i, completion, example in items:
        try:
            conn.send(("ok", i, _check_value(reward(completion, example))))
        except BaseException as exc:
            conn.send(("err", i, _describe(exc)))
    conn.close()


def _collect(conn: Any, items: list, tally: _Tally, timeout_s: float) -> tuple[int, bool]:
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


def _score_fork(reward: Callable, items: list, tally: _Tally, timeout_s: float) -> None:
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


class _TaskLoadError(RuntimeError):
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
            ctx.set_forkserver_preload(["pgrpo.tasks.scoring"])
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
            raise _TaskLoadError(
                f"the reward worker did not load the task in {WORKER_START_TIMEOUT_S} s"
            )
        try:
            reply = self.conn.recv()
        except (EOFError, OSError) as exc:
            self.stop()
            raise _TaskLoadError(f"the reward worker died loading the task ({exc})") from None
        if reply[0] != "ready":
            raise _TaskLoadError(reply[1])
        self.token = token

    def score(self, blob: bytes, items: list, tally: _Tally, timeout_s: float) -> None:
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


_WORKER = _Worker()
# Before multiprocessing's exit handler SIGTERMs the worker (ignored) and joins it for ever: a
# finalizer that handler runs first, and an atexit handler registered after it (run first, LIFO).
multiprocessing.util.Finalize(None, _WORKER.stop, exitpriority=100)
atexit.register(_WORKER.stop)


def shutdown_workers() -> None:
    """Stop the reward worker process (it restarts on the next `score_completions`)."""
    with _WORKER.lock:
        _WORKER.stop()


# ----------------------------------------------------------------------------- public entry point


def _choose(task: Any, isolation: str) -> tuple[str, bytes | None]:
    """Pick the isolation mode; returns (mode, pickled task or None)."""
    main = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    can_fork = "fork" in multiprocessing.get_all_start_methods()
    if isolation == "signal" and not main:
        raise ValueError("isolation='signal' needs the main thread; use 'process' or 'auto'")
    if isolation == "fork" and not can_fork:
        raise ValueError("isolation='fork' needs os.fork (POSIX); use 'process' or 'auto'")
    if isolation in ("signal", "inline", "fork"):
        return isolation, None
    if isolation == "auto" and getattr(task, "reward_is_fast", False) and can_fork:
        return "fork", None
    try:
        return "process", pickle.dumps(task)
    except Exception as exc:
        if isolation == "process":
            msg = f"isolation='process' needs a picklable task: {_describe(exc)}"
            raise ValueError(msg) from exc
        if can_fork:
            return "fork", None
        _warn_fallback(task, _describe(exc), main)
        return ("signal" if main else "inline"), None


_WARNED: set[str] = set()


def _warn_fallback(task: Any, reason: str, main: bool) -> None:
    key = f"{getattr(task, 'name', type(task).__name__)}:{main}"
    if key in _WARNED:
        return
    _WARNED.add(key)
    if "fork" in multiprocessing.get_all_start_methods():
        how = "a forked child process per batch (killed on a timeout)"
    elif main:
        how = "a signal timer in this process (it cannot stop C code)"
    else:
        how = "NO timeout (not in the main thread)"
    warnings.warn(
        f"task {getattr(task, 'name', task)!r} cannot run in the reward worker process ({reason}); "
        f"scoring it with {how}. Define the task and its reward function at module top level "
        "(no lambdas or closures) so it can be pickled and isolated in a process.",
        RuntimeWarning,
        stacklevel=3,
    )


def score_completions(
    task: Any,
    completions: Sequence[str],
    examples: Sequence[dict[str, Any]],
    *,
    timeout_s: float = 5.0,
    isolation: str = "auto",
    reward_range: tuple[float, float] | None = None,
) -> ScoreResult:
    """Score `completions[i]` against `examples[i]` with `task.reward`, safely.

    completions: [N] strings; examples: [N] example dicts (repeat each prompt's example G times).
    `isolation`: "auto" (see the module docstring), "process", "signal" (main thread only) or
    "inline" (exceptions caught, no timeout). `reward_range`: the run's (lo, hi), whose low end a
    failed call scores; None: the task's declared range (`task_reward_range`). Returns a
    `ScoreResult`; never raises for a reward failure.
    """
    if len(completions) != len(examples):
        raise ValueError(
            f"got {len(completions)} completions but {len(examples)} examples; pass one example "
            "per completion (repeat each prompt's example group_size times)"
        )
    if isolation not in ISOLATION_MODES:
        raise ValueError(f"unknown isolation {isolation!r}; valid: {', '.join(ISOLATION_MODES)}")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    start = time.perf_counter()
    failed = failure_reward(reward_range if reward_range is not None else task_reward_range(task))
    tally = _Tally(len(completions), failed)
    items = [(i, str(c), e) for i, (c, e) in enumerate(zip(completions, examples, strict=True))]
    mode, blob = _choose(task, isolation)
    if mode == "process" and items:
        try:
            with _WORKER.lock:
                _WORKER.score(blob, items, tally, timeout_s)
        except _TaskLoadError as exc:
            main = threading.current_thread() is threading.main_thread()
            _warn_fallback(task, f"the worker could not load it: {exc}", main)
            can_fork = "fork" in multiprocessing.get_all_start_methods()
            mode = "fork" if can_fork else "signal" if main else "inline"
            tally = _Tally(len(completions), failed)
    if mode == "fork" and items:
        _score_fork(task.reward, items, tally, timeout_s)
    elif mode == "signal":
        _score_signal(task.reward, items, tally, timeout_s)
    elif mode == "inline":
        _score_inline(task.reward, items, tally)
    seconds = time.perf_counter() - start
    return ScoreResult(
        rewards=tally.rewards, errors=tally.errors, timeouts=tally.timeouts,
        error_messages=tuple(tally.messages), isolation=mode, seconds=seconds,
        metrics={"reward_errors": float(tally.errors), "reward_timeouts": float(tally.timeouts),
                 "time/score_s": seconds},
    )  # fmt: skip
