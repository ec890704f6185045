"""One batch's reward calls settled in input order, whichever way they ran
(`pgrpo.tasks.scoring`): the check of a returned value, the message of a failure, and the tally of
rewards, errors and timeouts."""

from __future__ import annotations

import math
from typing import Any

MAX_ERROR_MESSAGES = 5


def checked_reward(value: Any) -> float:
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


def describe_failure(exc: BaseException) -> str:
    """`Type: message` of a failed call, cut to 300 characters (for the log)."""
    return f"{type(exc).__name__}: {exc}"[:300]


class Tally:
    """Collects rewards and failures in input order."""

    def __init__(self, n: int, failed: float) -> None:
        self.failed = failed
        self.rewards = [failed] * n
        self.errors = 0
        self.timeouts = 0
        self.messages: list[str] = []

    def ok(self, i: int, value: Any) -> None:
        try:
            self.rewards[i] = checked_reward(value)
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
