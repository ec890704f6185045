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
(D >> N); the tests check this against exact gradients on the tiny model. It is not exact: the
top singular value is inflated, by up to (1 + sqrt(N / D))^2 for a flat spectrum (32 equal
values, D = 4096: stable rank 27.4 instead of 32), so exact rows are the default wherever they fit
(`resolve_projection_dim`) and a sketch reports its expected distortion (`sketch_distortion`).

The estimators' ranks are set against controls on the same S (`pgrpo.measure.rank_controls`):
many seeded draws each of random, support-matched and within-group-permuted advantages.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from pgrpo.core.advantages import ADVANTAGE_ESTIMATORS, compute_advantages
from pgrpo.errors import UserError, check_seed
from pgrpo.measure.rank import effective_ranks
from pgrpo.measure.rank_controls import rank_controls, score_core

_CHUNK = 1 << 22  # parameters hashed per generator call
SKETCH_DIM = 4096
"""The sketch dimension D where exact rows do not fit (`resolve_projection_dim`)."""
EXACT_BYTES = 256 << 20
"""Exact rows are the default while the [N, P] float64 matrix takes at most this (P <= 1.05M
parameters at N = 32: the tiny model, LoRA adapters). They cost the same backward passes as a
sketch, their SVD is O(N^2 P) through a QR (1.2 s at 32 x 2M), and they carry no distortion."""


@dataclass(frozen=True)
class GradRankConfig:
    """What to measure."""

    estimators: tuple[str, ...] = ("grpo", "sign", "dual_anchor")
    """Advantage estimators to compare (registry names)."""
    projection_dim: int | None = None
    """Sketch dimension D; 0 keeps exact gradient rows; unset: exact rows where the [N, P] matrix
    takes at most 256 MiB (the tiny model, LoRA adapters), else D = 4096."""
    seed: int = 0
    """Seed of the sketch and of the control draws."""
    n_controls: int = 200
    """Draws of each control (random, support-matched, within-group permutation); 0: none (library
    use: `pgrpo gradrank --controls` takes 20 or more)."""
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
        check_estimator_names(self.estimators)
        if self.projection_dim is not None and self.projection_dim < 0:
            raise ValueError(f"projection_dim must be >= 0 (0 = exact), got {self.projection_dim}")
        if self.n_controls and self.n_controls < 20:
            raise ValueError(
                f"n_controls must be 0 (none) or >= 20 (a 5-95% interval), got {self.n_controls}"
            )
        check_seed(self.seed, "seed")


def check_estimator_names(names: Sequence[str], label: str = "estimators") -> None:
    """UserError when `names` holds an estimator more than once (it would be measured twice
    under one key): the one check of `GradRankConfig.estimators` and of `pgrpo gradrank
    --estimators` before the model loads (`label` names what was given)."""
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UserError(f"{label} names {', '.join(twice)} more than once", "give each once")


@dataclass(frozen=True)
class GradRankResult:
    """ranks: estimator -> effective-rank metrics of the whole batch matrix, plus
    'group/entropy_mean' (mean over non-degenerate groups), 'nonzero_rows' and 'abs_uniform'
    (1: every row's |A| is the same, so the spectrum is the score matrix's own); controls:
    estimator -> control -> metric -> {mean, p05, p95, share_at_or_below}
    (`pgrpo.measure.rank_controls`); notes: what a reader must not conclude."""

    ranks: dict[str, dict[str, float]]
    rewards: list[float]
    group_size: int
    metrics: dict[str, float] = field(default_factory=dict)
    controls: dict[str, dict[str, dict]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def physical_memory() -> int | None:
    """This machine's memory in bytes (POSIX sysconf), None where unknown."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


def check_projection_dim(dim: int | None, n_rows: int) -> None:
    """Before any model loads: a sketch dimension that cannot be right for N = n_rows rows (below
    N, which caps every rank at D; or rows too large for this machine's memory) is a UserError."""
    if not dim:
        return
    if dim < n_rows:
        raise UserError(
            f"--projection-dim {dim} is below the {n_rows} gradient rows: every rank would be "
            f"capped at {dim}",
            f"give D >> {n_rows} (default {SKETCH_DIM}), 0 for exact rows, or leave it unset",
        )
    memory = physical_memory()
    need = (n_rows + 2) * dim * 8
    if memory is not None and need > memory // 2:
        raise UserError(
            f"--projection-dim {dim} needs {need / 2**30:.3g} GiB for {n_rows} sketched rows, "
            f"more than half this machine's {memory / 2**30:.3g} GiB",
            f"lower --projection-dim (default {SKETCH_DIM}: D >> N suffices)",
        )


def resolve_projection_dim(dim: int | None, n_rows: int, n_params: int) -> int:
    """The D to use (0: exact rows) for N = n_rows rows of P = n_params parameters: unset gives
    exact rows while N x P float64 fits EXACT_BYTES, else SKETCH_DIM. A sketch as wide as P, or
    exact rows beyond half this machine's memory, is a UserError."""
    exact_bytes = n_rows * n_params * 8
    if dim is None:
        return 0 if exact_bytes <= EXACT_BYTES or n_params <= SKETCH_DIM else SKETCH_DIM
    if dim >= n_params:
        raise UserError(
            f"--projection-dim {dim} is not below the {n_params:,} trainable parameters: a "
            "sketch cannot be smaller than the exact rows here",
            "give --projection-dim 0 (exact rows) or leave it unset",
        )
    memory = physical_memory()
    if dim == 0 and memory is not None and exact_bytes > memory // 2:
        raise UserError(
            f"--projection-dim 0 keeps {n_rows} exact rows of {n_params:,} parameters "
            f"({exact_bytes / 2**30:.3g} GiB), more than half this machine's memory",
            f"give a sketch dimension (--projection-dim {SKETCH_DIM}) or leave it unset",
        )
    return dim


def sketch_distortion(n_rows: int, dim: int) -> dict[str, float]:
    """What a CountSketch to D = dim does to a FLAT spectrum of N = n_rows equal singular values
    (the worst case; spectra concentrated on few directions move far less): the sketched row
    Gram matrix is a Marchenko-Pastur-like matrix of ratio N / D, so the stable rank reads x
    1 / (1 + sqrt(N / D))^2 and the participation ratio x 1 / (1 + N / D). Measured: 27.4 and
    31.76 of 32 at D = 4096 against 27.0 and 31.75 (bench/sketch_distortion.py). {} for exact."""
    if not dim:
        return {}
    c = n_rows / dim
    return {
        "sketch/stable_rank_factor": 1.0 / (1.0 + math.sqrt(c)) ** 2,
        "sketch/participation_factor": 1.0 / (1.0 + c),
    }


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
    """Effective ranks of M = diag(A) S for each estimator, against cfg.n_controls seeded draws
    of each control (`pgrpo.measure.rank_controls`) on the same S.

    scores: [N, D] per-rollout score gradients; rewards: [N], contiguous groups of group_size.
    Every rank is computed on `score_core(S)` ([N, N], the same singular values for any row
    scaling), so estimators and controls share one numerical path."""
    r = torch.as_tensor(list(rewards), dtype=torch.float64)
    if r.numel() != scores.shape[0]:
        raise ValueError(f"{r.numel()} rewards for {scores.shape[0]} gradient rows")
    advantages = {
        name: compute_advantages(
            name, r, group_size=group_size, **cfg.estimator_options.get(name, {})
        ).advantages.to(torch.float64)
        for name in cfg.estimators
    }
    core = score_core(scores)
    ranks, notes = {}, []
    for name, adv in advantages.items():
        m = adv[:, None] * core
        metrics = dict(effective_ranks(m).metrics)
        metrics["group/entropy_mean"], metrics["group/nonzero_groups"] = _group_entropy_rank(
            m, group_size
        )
        metrics["nonzero_rows"] = float((adv.abs() > 1e-12).sum())
        size = adv.abs()
        metrics["abs_uniform"] = float(bool(size.min() > 0 and size.max() - size.min() <= 1e-12))
        if metrics["abs_uniform"]:
            notes.append(
                f"{name}: every rollout's |A| is the same ({float(size[0]):.3g}; e.g. sign with "
                "0/1 rewards: A = +-1), and flipping or scaling all rows alike keeps the singular "
                "values, so its ranks are the score matrix's own (scores/*): they say nothing "
                "about the estimator"
            )
        ranks[name] = metrics
    controls = (
        rank_controls(core, advantages, ranks, group_size, cfg.n_controls, cfg.seed)
        if cfg.n_controls
        else {}
    )
    score_ranks = effective_ranks(core).metrics
    metrics = {f"scores/{k}": v for k, v in score_ranks.items()}
    metrics.update(n_rollouts=float(r.numel()), reward_mean=float(r.mean()))
    metrics["n_controls"] = float(cfg.n_controls)
    return GradRankResult(ranks, r.tolist(), group_size, metrics, controls, notes)


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
    the gradient ranks. model: a `pgrpo.train.config.ModelConfig` (tiny, smollm2, HF name, LoRA).
    cfg.projection_dim is checked before the model loads (`check_projection_dim`) and resolved
    against its parameter count before any sampling (`resolve_projection_dim`)."""
    from pgrpo.train.config import GenerationConfig, GRPOConfig, RunConfig, RunSettings, TaskConfig
    from pgrpo.train.rollout import collect, estimator_options, load_task_and_policy

    cfg = cfg or GradRankConfig(seed=seed)
    check_projection_dim(cfg.projection_dim, n_prompts * group_size)
    config = RunConfig(
        model=model,
        task=TaskConfig(name=task_name, options=dict(task_options or {}), split=split),
        generation=GenerationConfig(max_new_tokens=max_new_tokens, temperature=temperature),
        grpo=GRPOConfig(group_size=group_size, batch_prompts=n_prompts),
        run=RunSettings(seed=seed),
    )
    task, policy = load_task_and_policy(config)
    n_params = sum(p.numel() for p in policy.trainable_parameters())
    dim = resolve_projection_dim(cfg.projection_dim, n_prompts * group_size, n_params)
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
        projection_dim=dim,
        seed=cfg.seed,
        length_normalise=cfg.length_normalise,
    )
    result = gradient_rank(scores, rewards, group_size, cfg)
    metrics = {**result.metrics, "n_params": float(n_params), "projection_dim": float(dim)}
    metrics.update(sketch_distortion(scores.shape[0], dim))
    return replace(result, metrics=metrics)
