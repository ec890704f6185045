"""Tasks: dataset loader + prompt + reward + metrics, behind one registry.

    task = pgrpo.get_task("arithmetic", **options)
    examples = task.load("train")            # list of dicts in the dataset's own fields
    prompt = task.prompt(examples[0])         # the user message (chat template applied later)
    r = task.reward(completion, examples[0])  # float, the same function the trainer uses

Register your own task without touching pgrpo: `@pgrpo.tasks.TASKS.register("name")` on a class
(or factory) taking keyword options and returning an object with the `Task` protocol below.
"""

from __future__ import annotations

from pgrpo.tasks.base import TASKS, Task, get_task

__all__ = ["TASKS", "Task", "get_task"]
