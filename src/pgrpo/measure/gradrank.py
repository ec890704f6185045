"""Effective rank of the per-rollout GRPO gradient matrix (arXiv 2606.29238; docs/diagnostics.md,
`pgrpo gradrank`).

For one batch of N = B * G rollouts, row i of the matrix is rollout i's gradient contribution
M_i = A_i s_i, s_i = grad_theta sum_t log pi(y_t | prefix) over its completion tokens. The score
vectors s_i do not depend on the advantage, so they are computed once (one backward per rollout)
and every estimator (grpo, sign, dual_anchor, ...) and the random-advantage control reuse them.

The gradient lives in the space of all trainable parameters (135M for SmolLM2). Rows are either
exact (small models, LoRA adapters) or sketched with a fixed seeded CountSketch (each coordinate j
of parameter tensor p goes to bucket h_p(j) in [0, D) with sign sigma_p(j)): an unbiased inner-
product-preserving projection that is regenerated chunk by chunk from its seed, so the [P, D]
matrix is never built. Singular values of the sketched matrix approach the true ones as D grows
(D >> N); the tests check this against exact gradients on the tiny model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from pgrpo.core.advantages import ADVANTAGE_ESTIMATORS, compute_advantages
from pgrpo.errors import check_seed
from pgrpo.measure.rank import effective_ranks

_CHUNK = 1 << 22  # parameters hashed per generator call


@dataclass(frozen=True)
class GradRankConfig:
    """What to measure."""

    estimators: tuple[str, ...] = ("grpo", "sign", "dual_anchor")
    """Advantage estimators to compare (registry names)."""
    projection_dim: int = 4096
    """Sketch dimension D; 0 keeps exact gradients (only for small models or LoRA)."""
    seed: int = 0
    """Seed of the sketch and of the random-advantage control."""
    length_normalise: bool = False
    """Divide each s_i by its completion length (sequence-mean aggregation) instead of summing."""
    estimator_options: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {"dual_anchor": {"num_constraints": 1}}
    )
    """Options per estimator. An estimator's declared per-completion columns (dual_anchor's
    constraint count C) come from the task when it provides them (`task.num_constraints`); the
    values here are the fallback (C = 1 for a binary task)."""

    def __post_init__(self) -> None:
        if not self.estimators:
            raise ValueError("estimators is empty: give at least one, e.g. grpo,sign")
        for name in self.estimators:
            ADVANTAGE_ESTIMATORS.get(name)
        if self.projection_dim < 0:
            raise ValueError(f"projection_dim must be >= 0 (0 = exact), got {self.projection_dim}")
        check_seed(self.seed, "seed")


@dataclass(frozen=True)
class GradRankResult:
    """ranks: estimator (and 'random_control') -> effective-rank metrics of the whole batch
    matrix, plus 'group/entropy_mean' (mean over non-degenerate groups) and 'nonzero_rows'."""

    ranks: dict[str, dict[str, float]]
    rewards: list[float]
    group_size: int
    metrics: dict[str, float] = field(default_factory=dict)


def countsketch(vectors: Sequence[torch.Tensor], dim: int, seed: int) -> torch.Tensor:
    """Sketch the concatenation of `vectors` (one per parameter tensor) to [dim], float64.

    Bucket and sign of each coordinate come from a generator seeded by (seed, tensor index,
    chunk index), so the same coordinate always lands in the same bucket."""
    out = torch.zeros(dim, dtype=torch.float64)
    for t_idx, vec in enumerate(vectors):
        flat = vec.detach().reshape(-1).to(torch.float64)
        for c_idx, start in enumerate(range(0, flat.numel(), _CHUNK)):
            part = flat[start : start + _CHUNK]
            gen = torch.Generator().manual_seed(seed * 1_000_003 + t_idx * 10_007 + c_idx)
            bucket = torch.randint(0, dim, (part.numel(),), generator=gen)
            sign = torch.randint(0, 2, (part.numel(),), generator=gen, dtype=torch.int8)
            out.index_add_(0, bucket, torch.where(sign.bool(), part, -part))
    return out


def score_gradients(
    model: torch.nn.Module,
    rollout: Any,
    params: Sequence[torch.nn.Parameter],
    *,
    projection_dim: int,
    seed: int,
    length_normalise: bool = False,
) -> torch.Tensor:
    """s_i for every rollout: [N, D] (D = projection_dim, or the parameter count when 0).

    rollout: a `pgrpo.train.generation.Rollout` (input_ids, attention_mask, prompt_len,
    completion_mask, temperatures). One forward + backward per row."""
    from pgrpo.train.logprobs import completion_scores

    rows = []
    for i in range(rollout.input_ids.shape[0]):
        model.zero_grad(set_to_none=True)
        scores = completion_scores(
            model,
            rollout.input_ids[i : i + 1],
            rollout.attention_mask[i : i + 1],
            rollout.prompt_len,
            rollout.temperatures[i : i + 1],
        )
        mask = rollout.completion_mask[i : i + 1].to(scores.log_probs.dtype)
        total = (scores.log_probs * mask).sum()
        if length_normalise:
            total = total / mask.sum().clamp(min=1)
        grads = torch.autograd.grad(total, list(params), allow_unused=True)
        grads = [
            torch.zeros_like(p) if g is None else g for g, p in zip(grads, params, strict=True)
        ]
        if projection_dim:
            rows.append(countsketch(grads, projection_dim, seed))
        else:
            rows.append(torch.cat([g.reshape(-1).to(torch.float64) for g in grads]))
    model.zero_grad(set_to_none=True)
    return torch.stack(rows)


def _group_entropy_rank(matrix: torch.Tensor, group_size: int) -> tuple[float, float]:
    """Mean entropy effective rank over groups with a non-zero block, and that group count."""
    ranks = []
    for start in range(0, matrix.shape[0], group_size):
        block = matrix[start : start + group_size]
        if block.abs().sum() > 0:
            ranks.append(effective_ranks(block).metrics["rank/entropy"])
    return (float(np.mean(ranks)) if ranks else 0.0), float(len(ranks))


def gradient_rank(
    scores: torch.Tensor, rewards: Sequence[float], group_size: int, cfg: GradRankConfig
) -> GradRankResult:
    """Effective ranks of M = diag(A) S for each estimator and a random-advantage control.

    scores: [N, D] per-rollout score gradients; rewards: [N], contiguous groups of group_size.
    The control draws A ~ N(0, 1) i.i.d. (seeded): no zero-sum constraint, same S."""
    r = torch.as_tensor(list(rewards), dtype=torch.float64)
    if r.numel() != scores.shape[0]:
        raise ValueError(f"{r.numel()} rewards for {scores.shape[0]} gradient rows")
    advantages = {
        name: compute_advantages(
            name, r, group_size=group_size, **cfg.estimator_options.get(name, {})
        ).advantages
        for name in cfg.estimators
    }
    gen = torch.Generator().manual_seed(cfg.seed)
    advantages["random_control"] = torch.randn(r.numel(), generator=gen, dtype=torch.float64)
    ranks = {}
    for name, adv in advantages.items():
        m = adv[:, None] * scores.to(torch.float64)
        metrics = dict(effective_ranks(m).metrics)
        metrics["group/entropy_mean"], metrics["group/nonzero_groups"] = _group_entropy_rank(
            m, group_size
        )
        metrics["nonzero_rows"] = float((adv.abs() > 1e-12).sum())
        ranks[name] = metrics
    score_ranks = effective_ranks(scores).metrics
    metrics = {f"scores/{k}": v for k, v in score_ranks.items()}
    metrics.update(n_rollouts=float(r.numel()), reward_mean=float(r.mean()))
    return GradRankResult(ranks=ranks, rewards=r.tolist(), group_size=group_size, metrics=metrics)


def measure_gradrank(
    model: Any,
    task_name: str = "arithmetic",
    *,
    task_options: dict[str, Any] | None = None,
    split: str = "train",
    n_prompts: int = 4,
    group_size: int = 8,
    temperature: float = 1.0,
    max_new_tokens: int = 32,
    cfg: GradRankConfig | None = None,
    seed: int = 0,
) -> GradRankResult:
    """Sample one batch (n_prompts x group_size) from a policy on a task, score it, and measure
    the gradient ranks. model: a `pgrpo.train.config.ModelConfig` (tiny, smollm2, HF name, LoRA)."""
    from pgrpo.train.config import GenerationConfig, GRPOConfig, RunConfig, RunSettings, TaskConfig
    from pgrpo.train.rollout import collect, estimator_options, load_task_and_policy

    cfg = cfg or GradRankConfig(seed=seed)
    config = RunConfig(
        model=model,
        task=TaskConfig(name=task_name, options=dict(task_options or {}), split=split),
        generation=GenerationConfig(max_new_tokens=max_new_tokens, temperature=temperature),
        grpo=GRPOConfig(group_size=group_size, batch_prompts=n_prompts),
        run=RunSettings(seed=seed),
    )
    task, policy = load_task_and_policy(config)
    examples = task.load(split)
    if len(examples) < n_prompts:
        raise ValueError(f"split {split!r} has {len(examples)} examples, fewer than {n_prompts}")
    rng = np.random.default_rng(seed)
    chosen = [examples[i] for i in rng.choice(len(examples), n_prompts, replace=False)]
    torch.manual_seed(seed)
    batch = collect(policy, task, chosen, config)  # the trainer's sample -> score path
    rollout, rewards = batch.rollout, batch.rewards.tolist()
    options = {}
    for name in cfg.estimators:  # declared columns from the task, else the configured fallback
        given = cfg.estimator_options.get(name, {})
        columns = ADVANTAGE_ESTIMATORS.get(name).columns
        explicit = {k: v for k, v in given.items() if k not in columns}
        options[name] = estimator_options(
            name,
            explicit,
            task,
            batch.per_completion,
            fallback=given,
            reward_range=batch.reward_range,
        )
    cfg = replace(cfg, estimator_options=options)
    params = policy.trainable_parameters()
    scores = score_gradients(
        policy.model,
        rollout,
        params,
        projection_dim=cfg.projection_dim,
        seed=cfg.seed,
        length_normalise=cfg.length_normalise,
    )
    result = gradient_rank(scores, rewards, group_size, cfg)
    n_params = float(sum(p.numel() for p in params))
    metrics = {**result.metrics, "n_params": n_params, "projection_dim": float(cfg.projection_dim)}
    return GradRankResult(result.ranks, result.rewards, group_size, metrics)
