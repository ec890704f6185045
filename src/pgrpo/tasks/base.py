"""The task protocol and its registry."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from pgrpo._registry import Registry


@runtime_checkable
class Task(Protocol):
    """What the trainer, `pgrpo eval` and the integrations need from a task.

    - `name`: the registry name.
    - `load(split_or_path)`: a list of example dicts in the dataset's own fields.
    - `prompt(example)`: the user message text; the trainer applies the model's chat template.
    - `reward(completion, example)`: a float in the task's reward range (pure, may raise: the caller
      wraps it with a timeout and counts errors).
    - `metrics(completions, examples, rewards)`: task-specific aggregate metrics (e.g. SSR/HSR),
      stable names, floats.
    """

    name: str

    def load(self, split_or_path: str) -> list[dict[str, Any]]: ...

    def prompt(self, example: dict[str, Any]) -> str: ...

    def reward(self, completion: str, example: dict[str, Any]) -> float: ...

    def metrics(
        self,
        completions: Sequence[str],
        examples: Sequence[dict[str, Any]],
        rewards: Sequence[float],
    ) -> dict[str, float]: ...


TASKS: Registry[Callable[..., Task]] = Registry("task")


def get_task(name: str, **options: Any) -> Task:
    """Build the task registered as `name` with its options (unknown names list the valid ones)."""
    return TASKS.get(name)(**options)
