"""Simulate many independent GRPO runs of the softmax bandit at once.

Each optimizer step, in the order of the GRPO loop:
  1. runs whose refresh interval has elapsed draw new rollouts: B prompts x G arms each, score
     them (reward 1 for arm 0), shape the reward with the KL when it lives in the reward, compute
     advantages with `pgrpo.core.advantages.compute_advantages` (one call for all runs), and
     freeze the old log-probs;
  2. the objective is `pgrpo.core.losses.policy_loss` on the sampled arms' log-probs as [N, 1]
     tensors (one token per sample), so every per-token piece (ratio, clipping, KL, aggregation)
     is the trainer's; autograd gives the gradient with respect to the logits;
  3. the optimizer (EMA momentum or Adam, per-run lr / beta1) updates the logits.

The N = R * B * G samples of all runs share one loss call. The aggregators divide by the sample
count, so the loss is multiplied by R: each run's gradient is exactly what its own batch alone
would give (checked against a loop over runs in the tests).

Hyperparameters that define a sweep (lr, beta1, refresh_interval) may be one value or one per run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from pgrpo.bandit.optim import OPTIMIZERS, lr_factor
from pgrpo.bandit.policy import (
    DifficultyConfig,
    draw_prompts,
    initial_success_probs,
    logit_gap,
    logits_from_success,
    sample_arms,
    success_probs,
)
from pgrpo.core.advantages import ADVANTAGE_ESTIMATORS, compute_advantages
from pgrpo.core.losses import KL_ESTIMATORS, LossConfig, policy_loss
from pgrpo.core.stats import iid_degeneracy

PerRun = float | Sequence[float]


@dataclass(frozen=True)
class BanditConfig:
    """One batch of independent bandit runs."""

    num_runs: int = 64
    """R, independent runs advanced together."""
    num_prompts: int = 1
    """P, prompts per run."""
    num_arms: int = 2
    """M, arms per prompt (arm 0 correct)."""
    batch_prompts: int = 8
    """B, prompts drawn per rollout batch (with replacement when B > P)."""
    group_size: int = 8
    """G, samples per prompt."""
    steps: int = 200
    """Optimizer steps."""
    estimator: str = "dr_grpo"
    """Advantage estimator (registry name)."""
    estimator_options: dict[str, Any] = field(default_factory=dict)
    loss: LossConfig = field(default_factory=lambda: LossConfig(policy_loss="reinforce"))
    """Objective pieces: 'reinforce' (no ratio) or 'clipped' (ratio + clip), KL in the loss."""
    kl_reward_coef: float = 0.0
    """KL in the reward (verl's use_kl_in_reward): r - coef * k1(old, ref) at rollout time."""
    p_ref: float | None = None
    """Success probability of the reference policy (every prompt); None: the initial policy."""
    optimizer: str = "ema"
    """'ema' (SGD with EMA momentum: v <- b1 v + (1 - b1) g, z <- z + lr v) or 'adam'."""
    lr: PerRun = 0.1
    """Learning rate, one value or one per run."""
    beta1: PerRun = 0.0
    """Momentum / Adam first-moment decay, one value or one per run."""
    beta2: float = 0.999
    """Adam second-moment decay."""
    adam_eps: float = 1e-8
    refresh_interval: int | Sequence[int] = 1
    """K: optimizer steps per rollout batch (one value or one per run)."""
    lr_schedule: str = "constant"
    """'constant', 'cosine' or 'linear' decay towards 0 (reached at `steps`, one past the last
    step), after `warmup_steps` (`pgrpo.core.schedules`)."""
    warmup_steps: int = 0
    difficulty: DifficultyConfig = field(default_factory=DifficultyConfig)
    """Initial success probabilities of the prompts."""
    initial_logit_gap: float | None = None
    """If set, every prompt starts at this logit gap d = logit(p) (overrides `difficulty`)."""
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("num_runs", "num_prompts", "batch_prompts", "group_size", "steps"):
            v = getattr(self, name)
            if int(v) != v or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if self.num_arms < 2:
            raise ValueError(f"num_arms must be >= 2, got {self.num_arms}")
        est = ADVANTAGE_ESTIMATORS.get(self.estimator)
        if est.needs_group_stats and self.group_size < 2:
            raise ValueError(f"{self.estimator!r} needs group_size >= 2 (or use 'sign')")
        OPTIMIZERS.get(self.optimizer)
        lr_factor(self.lr_schedule, 0, self.steps, self.warmup_steps)
        if self.kl_reward_coef < 0:
            raise ValueError(f"kl_reward_coef must be >= 0, got {self.kl_reward_coef}")
        needs_ref = self.loss.uses_reference or self.kl_reward_coef > 0
        if self.p_ref is not None and not 0 < self.p_ref < 1:
            raise ValueError(f"p_ref must be in (0, 1) or None, got {self.p_ref}")
        if self.p_ref is not None and not needs_ref:
            raise ValueError("p_ref is set but no KL is used: set loss.kl_coef or kl_reward_coef")
        lr, b1, k = self.per_run()
        if bool((lr <= 0).any()):
            raise ValueError("every lr must be > 0")
        if bool(((b1 < 0) | (b1 >= 1)).any()):
            raise ValueError("every beta1 must be in [0, 1)")
        if bool((k < 1).any()):
            raise ValueError("every refresh_interval must be an integer >= 1")

    def per_run(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """lr [R], beta1 [R] (float64) and refresh_interval [R] (long)."""
        return (
            _per_run(self.lr, self.num_runs, "lr", torch.float64),
            _per_run(self.beta1, self.num_runs, "beta1", torch.float64),
            _per_run(self.refresh_interval, self.num_runs, "refresh_interval", torch.long),
        )


def _per_run(value: Any, runs: int, name: str, dtype: torch.dtype) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(value, dtype=np.float64)).reshape(-1)
    if t.numel() == 1:
        t = t.expand(runs)
    if t.numel() != runs:
        raise ValueError(f"{name} has {t.numel()} values but num_runs is {runs}: give 1 or {runs}")
    if dtype == torch.long and bool((t != t.round()).any()):
        raise ValueError(f"{name} must hold integers")
    return t.to(dtype).clone()


@dataclass(frozen=True)
class BanditResult:
    """Per-step records of every run. Step 0 of the state arrays is the initial state.

    success: [S + 1, R] expected reward (mean over prompts of p); gap: [S + 1, R] mean logit gap;
    batch_reward: [S, R] observed mean raw reward of the rollouts in use; all_pass / all_fail:
    [S, R] fraction of degenerate groups among them; batch_success: [S, R] mean exact success
    probability of their prompts at draw time, and expected_degeneracy: [S, R] the mean over those
    prompts of p^G + (1 - p)^G (the exact expectation of the observed degeneracy);
    final_success: [R, P]; initial_success: [R, P].
    """

    success: np.ndarray
    gap: np.ndarray
    batch_reward: np.ndarray
    all_pass: np.ndarray
    all_fail: np.ndarray
    batch_success: np.ndarray
    expected_degeneracy: np.ndarray
    initial_success: np.ndarray
    final_success: np.ndarray
    metrics: dict[str, float]


@dataclass
class _Rollouts:
    """The rollouts in use, per run: prompts [R, B], arms / advantages / log-probs [R, B, G]."""

    prompts: torch.Tensor
    arms: torch.Tensor
    rewards: torch.Tensor
    advantages: torch.Tensor
    old_log_probs: torch.Tensor
    ref_log_probs: torch.Tensor
    success: torch.Tensor  # [R, B] exact success probability of each drawn prompt at draw time


def _gather(logits: torch.Tensor, prompts: torch.Tensor) -> torch.Tensor:
    """logits [R, P, M], prompts [R, B] -> [R, B, M]."""
    m = logits.shape[-1]
    return logits.gather(1, prompts.unsqueeze(-1).expand(*prompts.shape, m))


def draw_rollouts(
    cfg: BanditConfig, logits: torch.Tensor, ref_logits: torch.Tensor, gen: torch.Generator
) -> _Rollouts:
    """Sample, score, shape and compute advantages for the runs of `logits` [R', P, M] (one
    advantage call for all of them)."""
    r = logits.shape[0]
    prompts = draw_prompts(r, cfg.num_prompts, cfg.batch_prompts, gen)
    logp = _log_softmax(_gather(logits, prompts))
    arms = sample_arms(logp.exp(), cfg.group_size, gen)
    old = logp.gather(-1, arms)
    ref = _log_softmax(_gather(ref_logits, prompts)).gather(-1, arms)
    rewards = (arms == 0).to(torch.float64)
    shaped = rewards
    if cfg.kl_reward_coef:
        shaped = rewards - cfg.kl_reward_coef * KL_ESTIMATORS.get("k1")(old, ref)
    adv = compute_advantages(
        cfg.estimator,
        shaped.reshape(-1),
        group_size=cfg.group_size,
        **cfg.estimator_options,
    ).advantages.reshape(arms.shape)
    return _Rollouts(prompts, arms, rewards, adv, old, ref, logp[..., 0].exp())


def _merge(due: torch.Tensor, new: _Rollouts, old: _Rollouts) -> None:
    """Overwrite, in place, the rollouts of the runs with due [R] True by `new` (due runs only)."""
    for name in _Rollouts.__annotations__:
        getattr(old, name)[due] = getattr(new, name)


def _log_softmax(z: torch.Tensor) -> torch.Tensor:
    """log_softmax over the last axis; the two-arm case without the slow generic kernel."""
    if z.shape[-1] == 2:
        return z - torch.logaddexp(z[..., :1], z[..., 1:])
    return torch.log_softmax(z, dim=-1)


def loss_gradient(
    cfg: BanditConfig, logits: torch.Tensor, ro: _Rollouts
) -> tuple[torch.Tensor, dict[str, float]]:
    """Gradient of each run's GRPO objective with respect to its logits: [R, P, M]."""
    z = logits.detach().requires_grad_(True)
    log_probs = _log_softmax(_gather(z, ro.prompts)).gather(-1, ro.arms)
    n = log_probs.numel()
    mask = torch.ones(n, 1, dtype=torch.float64)
    res = policy_loss(
        log_probs.reshape(n, 1),
        ro.old_log_probs.reshape(n, 1),
        ro.advantages.reshape(n),
        mask,
        cfg.loss,
        ref_log_probs=ro.ref_log_probs.reshape(n, 1) if cfg.loss.uses_reference else None,
    )
    (grad,) = torch.autograd.grad(res.loss * cfg.num_runs, z)
    return grad, res.metrics


def initial_logits(cfg: BanditConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Initial logits [R, P, M] and the reference logits [R, P, M]."""
    rng = np.random.default_rng(cfg.seed)
    if cfg.initial_logit_gap is not None:
        p0 = torch.full((cfg.num_runs, cfg.num_prompts), 1 / (1 + math.exp(-cfg.initial_logit_gap)))
        p0 = p0.to(torch.float64)
    else:
        p0 = initial_success_probs(cfg.difficulty, cfg.num_runs, cfg.num_prompts, rng)
    logits = logits_from_success(p0, cfg.num_arms)
    if cfg.p_ref is None:
        return logits, logits.clone()
    p_ref = torch.full_like(p0, cfg.p_ref)
    return logits, logits_from_success(p_ref, cfg.num_arms)


def simulate(cfg: BanditConfig, logits: torch.Tensor | None = None) -> BanditResult:
    """Run every run for cfg.steps optimizer steps; `logits` [R, P, M] overrides the start."""
    gen = torch.Generator().manual_seed(cfg.seed)
    z0, ref_logits = initial_logits(cfg)
    z = (z0 if logits is None else logits.to(torch.float64)).clone()
    if z.shape != z0.shape:
        raise ValueError(f"logits must have shape {tuple(z0.shape)} [runs, prompts, arms]")
    lr, beta1, refresh = cfg.per_run()
    opt = OPTIMIZERS.get(cfg.optimizer)(z, lr=lr, beta1=beta1, beta2=cfg.beta2, eps=cfg.adam_eps)
    s, r = cfg.steps, cfg.num_runs
    success = np.empty((s + 1, r))
    gap = np.empty((s + 1, r))
    batch_reward, all_pass, all_fail, batch_p, exp_deg = (np.empty((s, r)) for _ in range(5))
    initial = success_probs(z)
    success[0], gap[0] = initial.mean(1).numpy(), logit_gap(z).mean(1).numpy()
    ro = draw_rollouts(cfg, z, ref_logits, gen)
    for n in range(s):
        # -- rollouts: refresh the runs whose K steps on the previous batch are done
        due = (n % refresh) == 0
        if n > 0 and bool(due.any()):
            _merge(due, draw_rollouts(cfg, z[due], ref_logits[due], gen), ro)
        k_correct = ro.rewards.sum(-1)
        batch_reward[n] = ro.rewards.mean((1, 2)).numpy()
        all_pass[n] = (k_correct == cfg.group_size).double().mean(1).numpy()
        all_fail[n] = (k_correct == 0).double().mean(1).numpy()
        batch_p[n] = ro.success.mean(1).numpy()
        g = cfg.group_size
        exp_deg[n] = iid_degeneracy(ro.success.numpy(), g).mean(1)
        # -- one optimizer step on the objective of the rollouts in use
        grad, _ = loss_gradient(cfg, z, ro)
        z = opt.step(z, grad, lr * lr_factor(cfg.lr_schedule, n, s, cfg.warmup_steps))
        p = success_probs(z)
        success[n + 1], gap[n + 1] = p.mean(1).numpy(), logit_gap(z).mean(1).numpy()
    final = success_probs(z).numpy()
    metrics = {
        "final_success": float(final.mean()),
        "degeneracy": float((all_pass + all_fail).mean()),
        "all_pass": float(all_pass.mean()),
        "all_fail": float(all_fail.mean()),
    }
    return BanditResult(
        success,
        gap,
        batch_reward,
        all_pass,
        all_fail,
        batch_p,
        exp_deg,
        initial.numpy(),
        final,
        metrics,
    )
