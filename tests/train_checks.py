"""Helpers shared by the trainer's update tests (imported by them; not a test module)."""

from __future__ import annotations

import torch

from pgrpo.train.setup import _Run, make_scheduler
from pgrpo.train.trainer import optimize


def optimize_from(cfg, task, policy, state, rollout, advantages):
    """Run the trainer's K-step update (`optimize`, AdamW at cfg.optim.lr) from `policy` reset to
    `state`; returns (metrics, grads): the gradients each optimizer step saw, one list of
    tensors (one per trainable parameter) per step."""
    policy.model.load_state_dict(state)
    params = policy.trainable_parameters()
    optimizer = torch.optim.AdamW(params, lr=cfg.optim.lr)
    grads: list[list[torch.Tensor]] = []
    optimizer.register_step_pre_hook(
        lambda *_: grads.append([p.grad.detach().clone() for p in params])
    )
    temps = tuple(float(t) for t in rollout.temperatures[: cfg.grpo.group_size])
    run = _Run(cfg, policy, task, None, optimizer, make_scheduler(optimizer, cfg), temps)  # type: ignore[arg-type]
    return optimize(run, rollout, advantages), grads
