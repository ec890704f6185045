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
in this process: they cannot stop C code or a reward that swallows `BaseException`. At exit the
worker is killed, before multiprocessing's own exit handler (which would wait for it for ever).

Exceptions, timeouts and non-finite rewards score `failure_reward(reward_range)` (the low end of
the range, 0.0 without one: never above a wrong answer) and are counted; only a programming error
of the caller (mismatched lengths, an unknown isolation mode) raises.

Here: the choice of mode and the entry point. The child-process modes are in
`pgrpo.tasks.scoring_worker`, the in-process ones in `pgrpo.tasks.scoring_inprocess`, and the
check and tally of the values in `pgrpo.tasks.scoring_tally`.
"""

from __future__ import annotations

import multiprocessing
import pickle
import signal
import threading
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pgrpo.core.rewardrange import failure_reward
from pgrpo.tasks.base import task_reward_range
from pgrpo.tasks.scoring_inprocess import RewardTimeout, score_inline, score_signal
from pgrpo.tasks.scoring_tally import MAX_ERROR_MESSAGES, Tally, describe_failure
from pgrpo.tasks.scoring_worker import (
    WORKER,
    WORKER_START_TIMEOUT_S,
    TaskLoadError,
    score_fork,
    shutdown_workers,
)

# public names of this module before it was split (session 40), still importable from here
__all__ = [
    "ISOLATION_MODES",
    "MAX_ERROR_MESSAGES",
    "WORKER_START_TIMEOUT_S",
    "RewardTimeout",
    "ScoreResult",
    "score_completions",
    "shutdown_workers",
]

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
            msg = f"isolation='process' needs a picklable task: {describe_failure(exc)}"
            raise ValueError(msg) from exc
        if can_fork:
            return "fork", None
        _warn_fallback(task, describe_failure(exc), main)
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
    tally = Tally(len(completions), failed)
    items = [(i, str(c), e) for i, (c, e) in enumerate(zip(completions, examples, strict=True))]
    mode, blob = _choose(task, isolation)
    if mode == "process" and items:
        try:
            with WORKER.lock:
                WORKER.score(blob, items, tally, timeout_s)
        except TaskLoadError as exc:
            main = threading.current_thread() is threading.main_thread()
            _warn_fallback(task, f"the worker could not load it: {exc}", main)
            can_fork = "fork" in multiprocessing.get_all_start_methods()
            mode = "fork" if can_fork else "signal" if main else "inline"
            tally = Tally(len(completions), failed)
    if mode == "fork" and items:
        score_fork(task.reward, items, tally, timeout_s)
    elif mode == "signal":
        score_signal(task.reward, items, tally, timeout_s)
    elif mode == "inline":
        score_inline(task.reward, items, tally)
    seconds = time.perf_counter() - start
    return ScoreResult(
        rewards=tally.rewards, errors=tally.errors, timeouts=tally.timeouts,
        error_messages=tuple(tally.messages), isolation=mode, seconds=seconds,
        metrics={"reward_errors": float(tally.errors), "reward_timeouts": float(tally.timeouts),
                 "time/score_s": seconds},
    )  # fmt: skip


__all__ = ["ISOLATION_MODES", "ScoreResult", "score_completions", "shutdown_workers"]
