"""The one rollout path: (policy, task, examples, config) -> a scored batch and its advantages.

    task, policy = load_task_and_policy(config)
    batch = collect(policy, task, examples, config)      # sample -> score -> empty rule
    adv = batch_advantages(batch, task, config.grpo)     # registry estimator + transform

The trainer, the curvature probe, gradrank and evaluate all go through these functions, so they
measure the objective that is trained: the same temperatures (one per position in the group), the
same safe scoring (each reward call isolated with the task's timeout; errors, hangs and non-finite
rewards score the low end of the run's reward range and are counted), the same empty-completion
rule (an empty completion scores that low end too), and the same advantage options, transform and
NaN handling. The run's reward range is `task.reward_range`, else the task's declared one
(`task_reward_range`); without either a failure scores 0. An estimator's per-completion inputs
(`AdvantageEstimator.columns`, e.g. dual_anchor's constraint counts) come from the task's method of
the same name unless the options give them, and an estimator that takes a reward range
(`AdvantageEstimator.takes_reward_range`, e.g. sign) gets the run's unless the options give one.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pgrpo.core.advantages import ADVANTAGE_ESTIMATORS, AdvantageResult, compute_advantages
from pgrpo.core.rewardrange import checked_reward_range, failure_reward
from pgrpo.tasks.base import task_reward_range
from pgrpo.tasks.scoring import ScoreResult, score_completions
from pgrpo.train.config import GRPOConfig, RunConfig
from pgrpo.train.generation import Rollout, sample
from pgrpo.train.policies import Policy, load_policy


@dataclass(frozen=True)
class ScoredBatch:
    """One batch of B prompts x G completions, sampled and scored.

    rollout: the samples (ids, masks, texts, temperatures [N] each row was drawn at);
    examples: [B] the prompts' examples; per_completion: [N] the example of each completion
    (row i belongs to examples[i // G]); rewards: [N] float32 after safe scoring and the empty
    rule; empty: [N] bool, empty completions; score: what safe scoring counted (errors,
    timeouts, messages); reward_range: the run's (lo, hi) the batch was scored under (a failed or
    empty completion scored lo), None when neither the run nor the task declares one."""

    rollout: Rollout
    examples: list[dict[str, Any]]
    per_completion: list[dict[str, Any]]
    rewards: torch.Tensor
    empty: torch.Tensor
    score: ScoreResult
    group_size: int
    reward_range: tuple[float, float] | None = None


def temperature_schedule(config: RunConfig) -> tuple[float, ...]:
    """The temperature of each position in a group: `generation.temperatures`, or G copies of
    `generation.temperature`."""
    gen = config.generation
    return tuple(gen.temperatures or (gen.temperature,) * config.grpo.group_size)


def sample_and_score(
    policy: Policy,
    task: Any,
    examples: Sequence[dict[str, Any]],
    *,
    group_size: int,
    temperatures: Sequence[float],
    max_new_tokens: int,
    reward_timeout_s: float,
    reward_range: tuple[float, float] | None = None,
) -> ScoredBatch:
    """Draw G completions per example (position j at temperatures[j]) and score them safely.
    reward_range: the run's (lo, hi); None: the task's declared range (`task_reward_range`)."""
    examples = list(examples)
    rollout = sample(
        policy,
        [task.prompt(e) for e in examples],
        group_size=group_size,
        temperatures=temperatures,
        max_new_tokens=max_new_tokens,
    )
    per_completion = [e for e in examples for _ in range(group_size)]
    bounds = task_reward_range(task) if reward_range is None else checked_reward_range(reward_range)
    scored = score_completions(
        task, rollout.texts, per_completion, timeout_s=reward_timeout_s, reward_range=bounds
    )
    rewards = torch.tensor(scored.rewards, dtype=torch.float32)
    empty = torch.tensor([not t.strip() for t in rollout.texts], dtype=torch.bool)
    floor = torch.full_like(rewards, failure_reward(bounds))
    rewards = torch.where(empty, floor, rewards)  # an empty completion: the range's low end
    return ScoredBatch(
        rollout, examples, per_completion, rewards, empty, scored, group_size, bounds
    )


def collect(
    policy: Policy, task: Any, examples: Sequence[dict[str, Any]], config: RunConfig
) -> ScoredBatch:
    """`sample_and_score` with the run's group size, temperatures, length limit and timeout."""
    return sample_and_score(
        policy,
        task,
        examples,
        group_size=config.grpo.group_size,
        temperatures=temperature_schedule(config),
        max_new_tokens=config.generation.max_new_tokens,
        reward_timeout_s=config.task.reward_timeout_s,
        reward_range=config.task.reward_range,
    )


def estimator_options(
    name: str,
    options: dict[str, Any],
    task: Any,
    per_completion: Sequence[dict[str, Any]],
    *,
    fallback: dict[str, Any] | None = None,
    reward_range: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """The estimator's options with each declared column filled: from `options` when given,
    else from the task (`task.<column>(example)` per completion), else from `fallback`; and, for
    an estimator that takes a reward range, `reward_range` (the run's) unless `options` has one."""
    estimator = ADVANTAGE_ESTIMATORS.get(name)
    out = dict(options)
    if estimator.takes_reward_range and reward_range is not None:
        out.setdefault("reward_range", tuple(reward_range))
    for column in estimator.columns:
        if column in out:
            continue
        fn = getattr(task, column, None)
        if callable(fn):
            out[column] = [fn(e) for e in per_completion]
        elif fallback and column in fallback:
            out[column] = fallback[column]
        else:
            raise ValueError(
                f"the {name} advantage needs each completion's {column}, but task "
                f"{getattr(task, 'name', task)!r} has no {column}(example); set "
                f"grpo.advantage_options.{column}=<value> or use a task that provides it"
            )
    return out


def batch_advantages(batch: ScoredBatch, task: Any, grpo: GRPOConfig) -> AdvantageResult:
    """Advantages [N] of the batch's rewards under the configured estimator, transform and NaN
    rule (an estimator that takes a reward range gets the batch's unless the options give one)."""
    return compute_advantages(
        grpo.advantage,
        batch.rewards,
        group_size=batch.group_size,
        transform=grpo.transform,
        transform_options=grpo.transform_options,
        nan=grpo.nan_rewards,
        **estimator_options(
            grpo.advantage,
            grpo.advantage_options,
            task,
            batch.per_completion,
            reward_range=batch.reward_range,
        ),
    )


# ---------------------------------------------------------------------------------------------
# Loading: one function for the trainer, the probe, gradrank and evaluate
# ---------------------------------------------------------------------------------------------


def import_tasks() -> None:
    """Import every module of pgrpo.tasks so that the built-in tasks are registered."""
    import pgrpo.tasks as tasks

    for info in pkgutil.iter_modules(tasks.__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"pgrpo.tasks.{info.name}")


def load_task_and_policy(
    config: RunConfig, *, checkpoint: str | Path | None = None, warm_up: bool = True
) -> tuple[Any, Policy]:
    """The task of `config.task` and the policy of `config.model` (with a reference model when
    the loss has a KL term). checkpoint: a trainer checkpoint folder whose weights replace the
    initial ones (the tiny model then skips its warm-up); warm_up=False skips it too (resume)."""
    import_tasks()
    from pgrpo.tasks import get_task

    c = config
    task = get_task(c.task.name, **c.task.options)
    policy = load_policy(
        c.model,
        task=task,
        task_key=f"{c.task.name}:{sorted(c.task.options.items())}",
        seed=c.run.seed,
        need_reference=c.loss.uses_reference,
        warm_up=warm_up and checkpoint is None,
    )
    if checkpoint is not None:
        load_checkpoint_weights(policy, checkpoint)
    return task, policy


def load_checkpoint_weights(policy: Policy, checkpoint: str | Path) -> dict[str, Any]:
    """Copy a trainer checkpoint's trainable weights into `policy` (in place) after checking its
    frozen base; returns the checkpoint state (its `step` says which). Loaded with
    weights_only=True: a checkpoint that holds pickled objects is refused
    (UnsafeCheckpointError) before anything in it runs."""
    from pgrpo.train.checkpoint import load_weights, read_state

    state = read_state(Path(checkpoint))
    load_weights(policy.model, state, Path(checkpoint))
    return state
