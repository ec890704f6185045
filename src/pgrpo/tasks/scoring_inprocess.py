"""Reward calls run in this process (`pgrpo.tasks.scoring`'s "signal" and "inline" modes): a
SIGALRM timer in the main thread, or no timeout at all. Neither can stop C code that never returns
to Python or a reward that swallows `BaseException`; the child-process modes
(`pgrpo.tasks.scoring_worker`) can."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from typing import Any

from pgrpo.tasks.scoring_tally import Tally, describe_failure


class RewardTimeout(BaseException):
    """Raised inside a reward call by the signal timer. A BaseException so that a reward function's
    own `except Exception` cannot swallow it."""


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


def score_signal(
    reward: Callable[[str, dict], float],
    items: Sequence[tuple[int, str, dict]],
    tally: Tally,
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
                tally.fail(i, f"error: {describe_failure(exc)}")
            else:
                tally.ok(i, value)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_delay > 0:  # overdue: fire almost at once
            left = max(outer_delay - (time.monotonic() - started), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left, outer_interval)


def score_inline(
    reward: Callable[[str, dict], float], items: Sequence[tuple[int, str, dict]], tally: Tally
) -> None:
    """No timeout possible: used only off the main thread for tasks the worker cannot run."""
    for i, completion, example in items:
        try:
            value = reward(completion, example)
        except Exception as exc:
            tally.fail(i, f"error: {describe_failure(exc)}")
        else:
            tally.ok(i, value)
