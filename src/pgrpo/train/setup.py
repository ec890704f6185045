"""Setting up a run: seeding, the task, the policy, the optimizer and its lr schedule. The loop
itself is in `pgrpo.train.trainer`; the checks that a resumed run is the same run are in
`pgrpo.train.resume`."""

from __future__ import annotations

import ctypes
import dataclasses
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pgrpo.core.losses import aggregator_options
from pgrpo.core.schedules import LRHorizon, lr_factor, lr_horizon
from pgrpo.train.config import RunConfig
from pgrpo.train.data import PromptStream
from pgrpo.train.optimizers import build_optimizer
from pgrpo.train.policies import Policy
from pgrpo.train.rollout import load_task_and_policy, temperature_schedule


@dataclass
class _Run:
    """Everything a step needs (mutable: the policy and optimizer change every step)."""

    config: RunConfig
    policy: Policy
    task: Any
    stream: PromptStream
    optimizer: torch.optim.Optimizer
    scheduler: Any
    temperatures: tuple[float, ...]
    optimizer_steps: int = 0


def _seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def optimizer_steps_total(cfg: RunConfig) -> int:
    """The run's optimizer steps, the length of its lr schedule: run.steps x refresh_interval."""
    return cfg.run.steps * cfg.grpo.refresh_interval


def lr_multipliers(cfg: RunConfig, step: Any) -> Any:
    """The run's multiplier of optim.lr at 0-based optimizer step(s) `step` (int or array): linear
    warm-up, then constant, linear or cosine decay towards 0, reached one step past the last of
    the run's `optimizer_steps_total`, as transformers' schedules
    (`pgrpo.core.schedules.lr_factor`). The trainer's scheduler runs it."""
    total = optimizer_steps_total(cfg)
    return lr_factor(cfg.optim.schedule, step, total, cfg.optim.warmup_steps)


def run_lr_horizon(cfg: RunConfig, start: int) -> LRHorizon | None:
    """The lr the run's optimizer steps start .. total - 1 run at (`pgrpo.core.schedules.
    lr_horizon` over the trainer's schedule, the values `lr_multipliers` gives its scheduler);
    None at or past the run's end, where no optimizer step is left. `pgrpo probe` predicts over
    it, and its `pgrpo predict` line (--schedule-start start --steps total - start) gets the same
    values."""
    total = optimizer_steps_total(cfg)
    if start >= total:
        return None
    return lr_horizon(cfg.optim.schedule, cfg.optim.lr, total, start, cfg.optim.warmup_steps)


def make_scheduler(optimizer: torch.optim.Optimizer, cfg: RunConfig) -> Any:
    """The run's lr schedule (`lr_multipliers`) as a torch scheduler."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda n: lr_multipliers(cfg, n))


def resolve_config(config: RunConfig) -> RunConfig:
    """Fill values that depend on other sections: an aggregator that consumes `max_length` (Dr.
    GRPO's constant normaliser) gets the generation limit."""
    numerator_opts, denominator_opts = aggregator_options(config.loss)
    wants_length = "max_length" in {**numerator_opts, **denominator_opts}
    if wants_length and config.loss.max_length is None:
        loss = dataclasses.replace(config.loss, max_length=config.generation.max_new_tokens)
        config = dataclasses.replace(config, loss=loss)
    return config


_resolve = resolve_config


def with_reward_range(config: RunConfig, task: Any) -> RunConfig:
    """`config` with task.reward_range resolved: the user's, else the task's declared range
    (`task_reward_range`; None when it declares none), so config.yaml records what the fits use."""
    from pgrpo.tasks.base import task_reward_range

    if config.task.reward_range is not None:
        return config
    found = task_reward_range(task)
    if found is None:
        return config
    return dataclasses.replace(config, task=dataclasses.replace(config.task, reward_range=found))


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters


def _libc() -> Any:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def keep_freed_memory() -> None:
    """Serve allocations below 1 GiB from the heap and never shrink it (glibc `mallopt`
    M_MMAP_THRESHOLD = 1 GiB, M_TRIM_THRESHOLD = 2 GiB - 1), so that a step reuses the pages the
    last one freed. glibc's defaults map each tensor above its adaptive threshold (at most
    32 MiB) afresh and unmap it when freed: on the 8x4x32 SmolLM2 step ~1M page faults an update,
    a quarter of its CPU (docs/trainer.md, "Page faults"). Process-wide and not undone (glibc's
    adaptive threshold stays off once set); `grpo.release_memory=true` skips it. No-op without
    glibc."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, 1 << 30)
        mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)


def release_freed_memory(release: bool = True) -> None:
    """Give the heap's free pages back to the OS (glibc `malloc_trim(0)`) when `release`
    (`grpo.release_memory`): after the update, so that memory the update freed is not held while
    sampling, and before each backward, so that the forward's freed temporaries are not held
    through backward's peak (0.37 GB less peak RSS on the 8x4x32 SmolLM2 step; docs/trainer.md,
    "Peak memory"). Each trim's pages fault back in when next used ("Page faults"), hence off by
    default. No-op without glibc (a libc without `malloc_trim`, or none found)."""
    trim = getattr(_libc(), "malloc_trim", None) if release else None
    if trim is not None:
        trim(0)


def build_run(config: RunConfig, *, resume: bool) -> _Run:
    """Task, policy (the tiny model skips its warm-up when resuming), optimizer, schedule."""
    cfg = config
    if cfg.run.torch_threads:
        torch.set_num_threads(cfg.run.torch_threads)
    if not cfg.grpo.release_memory:
        keep_freed_memory()
    _seed(cfg.run.seed)
    task, policy = load_task_and_policy(cfg, warm_up=not resume)
    cfg = with_reward_range(cfg, task)
    stream = PromptStream(task.load(cfg.task.split), cfg.run.seed)
    _seed(cfg.run.seed)  # the training stream does not depend on how the model was obtained
    optimizer = build_optimizer(policy.trainable_parameters(), cfg.optim)
    temps = temperature_schedule(cfg)
    return _Run(cfg, policy, task, stream, optimizer, make_scheduler(optimizer, cfg), temps)
