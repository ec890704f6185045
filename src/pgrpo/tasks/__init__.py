"""Tasks: dataset loader + prompt + reward + metrics, behind one registry.

    task = pgrpo.get_task("arithmetic", **options)
    examples = task.load("train")            # list of dicts in the dataset's own fields
    prompt = task.prompt(examples[0])         # the user message (chat template applied later)
    r = task.reward(completion, examples[0])  # float, the same function the trainer uses
    result = score_completions(task, completions, examples, timeout_s=5.0)  # safe, counted

Built in: `arithmetic` (default, generated), `gsm8k`, `math` (MATH-500, math-verify), `ifeval`.
Register your own task without touching pgrpo: `register_task("name", examples=..., prompt=...,
reward=...)`, or `register_task("name", factory)` with a class taking keyword options. See
docs/tasks.md.
"""

from __future__ import annotations

from pgrpo.tasks import arithmetic, gsm8k, ifeval, math500  # noqa: F401  (registers the tasks)
from pgrpo.tasks.base import TASKS, FunctionTask, Task, get_task, register_task
from pgrpo.tasks.scoring import ScoreResult, score_completions
from pgrpo.tasks.scoring_worker import shutdown_workers

__all__ = [
    "TASKS",
    "FunctionTask",
    "ScoreResult",
    "Task",
    "get_task",
    "register_task",
    "score_completions",
    "shutdown_workers",
]
