"""The task protocol and its registry."""

from __future__ import annotations

import hashlib
import math
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
    - `reward_range` (optional attribute): (lo, hi), the bounds of one reward; fits and forecasts
      keep the reward curve's levels inside it (`task_reward_range`).
    - `correct(completion, example)` (optional): whether the completion solves the problem, apart
      from any shaping of the reward (e.g. a format bonus); `pgrpo eval` counts it (`is_correct`).
    - `problem_id(example)` (optional): the problem's identity, the same in every evaluation; by
      default the dataset's own id field, else a hash of the prompt (`problem_id`).
    - `reward_only_options` (optional class attribute): names of options that change the reward
      but neither the problems `load` gives nor `correct`; `pgrpo eval --baseline` compares
      evaluations that differ only in them (arithmetic: `format_weight`).
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
    """Build the task registered as `name` with its options (unknown names list the valid ones;
    unknown options raise UserError listing the task's options)."""
    check_task_options(name, options)
    return TASKS.get(name)(**options)


def task_reward_range(task: Any) -> tuple[float, float] | None:
    """A task's declared (lo, hi) reward bounds, or None when it declares none (or a bad one:
    `checked_reward_range`)."""
    from pgrpo.core.rewardrange import checked_reward_range

    r = getattr(task, "reward_range", None)
    try:
        return None if r is None else checked_reward_range(r)
    except ValueError:
        return None


ID_FIELDS = ("unique_id", "id", "key")
"""Example fields that name a problem in its dataset (MATH-500's `unique_id`, IFEval's `key`)."""


def problem_id(task: Any, example: dict[str, Any]) -> str:
    """A problem's identity, the same in every evaluation of it (so that two systems are compared
    problem by problem): `task.problem_id(example)` when the task defines it (arithmetic: the
    expression), else the dataset's own id (`ID_FIELDS`), else "prompt:" and 16 hex digits of
    the SHA-1 of the prompt text (GSM8K has no id field)."""
    fn = getattr(task, "problem_id", None)
    if callable(fn):
        return str(fn(example))
    for key in ID_FIELDS:
        if example.get(key) not in (None, ""):
            return str(example[key])
    return "prompt:" + hashlib.sha1(str(task.prompt(example)).encode()).hexdigest()[:16]


def is_correct(task: Any, completion: str, example: dict[str, Any]) -> bool:
    """Whether `completion` solves `example`: `task.correct(completion, example)` when the task
    defines it (arithmetic: the final number, whatever its format weight), else whether the
    reward reaches the task's maximum (the high end of `reward_range`, 1 when it declares none).
    A reward that is not a finite number raises ValueError (safe scoring counts it)."""
    fn = getattr(task, "correct", None)
    if callable(fn):
        return bool(fn(completion, example))
    reward = float(task.reward(completion, example))
    if not math.isfinite(reward):
        raise ValueError(f"reward is not finite ({reward})")
    high = (task_reward_range(task) or (0.0, 1.0))[1]
    return reward >= high - 1e-9


def check_task_options(name: str, options: dict[str, Any]) -> None:
    """UserError if `options` holds keys the factory of task `name` does not take; the registry's
    error naming the known tasks if there is no task `name`."""
    import inspect

    from pgrpo.errors import UserError

    factory = TASKS.get(name)  # an unknown name: UnknownNameError listing the known ones
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a factory without an inspectable signature
        return
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    valid = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise UserError(
            f"unknown task.options {', '.join(map(repr, unknown))} for task {name!r}",
            f"valid options: {', '.join(valid) or '(none)'}",
        )


def _check_examples(examples: Any, where: str) -> list[dict[str, Any]]:
    """A loader's output as a list of dicts, or TypeError saying what came back instead."""
    if isinstance(examples, dict) or not isinstance(examples, Sequence):
        raise TypeError(
            f"{where} must return a list of example dicts, got {type(examples).__name__}"
        )
    out = list(examples)
    for i, ex in enumerate(out):
        if not isinstance(ex, dict):
            raise TypeError(f"{where}: example {i} is a {type(ex).__name__}, expected a dict")
    return out


class FunctionTask:
    """A task built from plain functions, so users can add one without subclassing anything.

    - `examples`: a callable `split_or_path -> list[dict]`, a dict `split -> list[dict]`, or one
      list of dicts used for every split.
    - `prompt`: `example -> str` (the user message). `reward`: `(completion, example) -> float`.
    - `metrics`: optional `(completions, examples, rewards) -> dict[str, float]`, merged over the
      default `reward_mean`.
    - `reward_range`: optional (lo, hi) bounds of the reward (fits and forecasts stay inside).
    - `reward_is_fast`: True for rewards that take microseconds (they are then scored in a child
      forked per batch instead of the persistent reward worker process).

    Every reward call has a hard timeout (its process is killed); a task that cannot be pickled
    (lambdas, closures) is scored in a forked child as well (see `tasks/scoring.py`).
    """

    def __init__(
        self,
        name: str,
        *,
        examples: Callable[[str], Sequence[dict[str, Any]]]
        | dict[str, Sequence[dict[str, Any]]]
        | Sequence[dict[str, Any]],
        prompt: Callable[[dict[str, Any]], str],
        reward: Callable[[str, dict[str, Any]], float],
        metrics: Callable[..., dict[str, float]] | None = None,
        reward_is_fast: bool = False,
        reward_range: tuple[float, float] | None = None,
    ) -> None:
        if not callable(prompt) or not callable(reward):
            raise TypeError("FunctionTask needs callables for prompt= and reward=")
        if metrics is not None and not callable(metrics):
            raise TypeError("FunctionTask metrics= must be a callable or None")
        self.name = name
        self._examples = examples
        self._prompt = prompt
        self._reward = reward
        self._metrics = metrics
        self.reward_is_fast = bool(reward_is_fast)
        self.reward_range = reward_range

    def load(self, split_or_path: str) -> list[dict[str, Any]]:
        source = self._examples
        if callable(source):
            return _check_examples(source(split_or_path), f"task {self.name!r} loader")
        if isinstance(source, dict):
            if split_or_path not in source:
                raise KeyError(
                    f"task {self.name!r} has no split {split_or_path!r}; "
                    f"valid splits: {', '.join(map(str, source))}"
                )
            return _check_examples(source[split_or_path], f"task {self.name!r} split")
        return _check_examples(source, f"task {self.name!r} examples")

    def prompt(self, example: dict[str, Any]) -> str:
        return str(self._prompt(example))

    def reward(self, completion: str, example: dict[str, Any]) -> float:
        return self._reward(completion, example)

    def metrics(
        self,
        completions: Sequence[str],
        examples: Sequence[dict[str, Any]],
        rewards: Sequence[float],
    ) -> dict[str, float]:
        out = {"reward_mean": float(sum(rewards) / len(rewards)) if rewards else 0.0}
        if self._metrics is not None:
            out.update(
                {k: float(v) for k, v in self._metrics(completions, examples, rewards).items()}
            )
        return out


def register_task(
    name: str,
    factory: Callable[..., Task] | None = None,
    *,
    examples: Any = None,
    prompt: Callable[[dict[str, Any]], str] | None = None,
    reward: Callable[[str, dict[str, Any]], float] | None = None,
    metrics: Callable[..., dict[str, float]] | None = None,
    reward_is_fast: bool = False,
    reward_range: tuple[float, float] | None = None,
) -> None:
    """Register a task under `name` so `get_task(name)` and `pgrpo train task=name` find it.

    Either pass `factory` (a class or function taking keyword options and returning a `Task`), or
    the pieces of a `FunctionTask` (`examples`, `prompt`, `reward`, optional `metrics`). A name that
    is already registered fails (pick another name).
    """
    if factory is not None:
        if any(x is not None for x in (examples, prompt, reward, metrics)):
            raise TypeError(
                "register_task: pass either factory or examples/prompt/reward, not both"
            )
        TASKS.add(name, factory)
        return
    if examples is None or prompt is None or reward is None:
        raise TypeError("register_task needs factory=, or all of examples=, prompt= and reward=")
    task = FunctionTask(
        name,
        examples=examples,
        prompt=prompt,
        reward=reward,
        metrics=metrics,
        reward_is_fast=reward_is_fast,
        reward_range=reward_range,
    )

    def build(**options: Any) -> Task:
        if options:
            raise TypeError(
                f"task {name!r} was registered from functions and takes no options; "
                f"got {', '.join(sorted(options))}. Register a factory to accept options."
            )
        return task

    TASKS.add(name, build)
