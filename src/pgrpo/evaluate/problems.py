"""The problems of an evaluation: each known by its id (`pgrpo.tasks.base.problem_id`), each
once (a split that repeats a problem holds it once), scored for correctness rather than reward.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pgrpo.tasks.base import is_correct, problem_id


def distinct_problems(
    task: Any, examples: Sequence[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[str]]:
    """(examples [D], ids [D]): each problem once, at its first row, in split order. The
    arithmetic test split at level 1 holds ~21 distinct expressions in its 200 rows: counted as
    200 problems, repeats made the interval over problems too narrow (a problem drawn twice is
    one problem evaluated with twice the samples, not two independent problems)."""
    seen: dict[str, dict[str, Any]] = {}
    for example in examples:
        seen.setdefault(problem_id(task, example), example)
    return list(seen.values()), list(seen)


class CorrectnessTask:
    """`task` scored by correctness: reward 1.0 when `is_correct(task, completion, example)`,
    else 0.0. Safe scoring (`score_completions`) runs it like any task, with the task's own
    isolation, so a correctness check that raises or hangs is counted, not fatal; picklable when
    the task is."""

    reward_range = (0.0, 1.0)

    def __init__(self, task: Any) -> None:
        self.task = task
        self.name = str(getattr(task, "name", type(task).__name__))
        self.reward_is_fast = bool(getattr(task, "reward_is_fast", False))

    def prepare(self) -> None:
        """The task's own preparation (the reward worker calls it once per task)."""
        fn = getattr(self.task, "prepare", None)
        if callable(fn):
            fn()

    def prompt(self, example: dict[str, Any]) -> str:
        return self.task.prompt(example)

    def reward(self, completion: str, example: dict[str, Any]) -> float:
        return float(is_correct(self.task, completion, example))

    def metrics(self, completions: Any, examples: Any, rewards: Any) -> dict[str, float]:
        return {}
