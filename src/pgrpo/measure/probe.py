"""Measure the curvature scale kappa of the dynamics model at a policy (before or during a run).

The ROM (docs/dynamics.md) needs one measured number: kappa, the stiffness per unit
learning rate along the update direction, including the optimizer's preconditioner P:

    kappa = - g^T P H P g / g^T P g,        u = P g (the update direction)

where g is the EXPECTED ascent gradient of the GRPO objective (rollouts redrawn at every theta, so
H includes how the outcome distribution moves with the policy, not only the Hessian of one fixed
batch's surrogate) and H its Jacobian. What this measures is the LOCAL slope of the restoring force
at the probed policy; the model's kappa is that slope at the fixed point (the plateau), so a probe
far from the plateau (at the initial policy) does not measure it (docs/diagnostics.md, `pgrpo
probe`; bench/probe_init_bandit.py).

g is the mean of n_direction batch gradients g_k (each the mean of the rows grad_fn returns: one
per optimizer step the batch feeds, `grpo.num_minibatches` of them for the trainer), u_k = P g_k.
We never form H: H u_k is a central finite difference of expected gradients along u_k, with
common random numbers (the same sampling seed at theta - eps u_k and theta + eps u_k, so most
rollouts coincide and the difference is mostly signal); pair i probes direction batch i mod
n_direction. By linearity H u = mean_k H u_k, so

    kappa = - u . mean_k(H u_k) / g . u

and a delete-one jackknife over the direction batches (each with its pairs) gives a standard error
that includes how the direction's own sampling noise moves kappa, not only the pairs' noise (the
reported one is the larger of it and the pairs' spread: with 4 batches it has 3 degrees of
freedom). That
noise also biases kappa towards the curvature of the noise's directions (low, on a known
quadratic: bench/probe_direction_noise.py). P is Adam's steady-state preconditioner
1 / (sqrt(E[g_b^2]) + eps_adam) with g_b the rows (the gradients Adam sees), held fixed in the
jackknife (identity for SGD / EMA momentum). Seeds come from numpy's SeedSequence
(`probe_seeds`), so two probe seeds are independent replicates. On the two-arm bandit this reduces
to -dF/dd, the exact curvature of `pgrpo.bandit.kappa` (checked in tests/test_probe.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from pgrpo.measure.config import ProbeConfig

GradFn = Callable[[torch.Tensor, int], torch.Tensor]
"""grad_fn(theta [P] float64, seed) -> an unbiased estimate of the expected ascent gradient: [P],
or [M, P] rows (one per optimizer step the batch feeds, whose mean is the step's expectation)."""

LINEAR_P = 0.01
"""Significance at which more all-zero gradients at theta +- eps u_k than at theta (direction
batches) say the probe step left the linear regime (`StepTooLarge`)."""


class StepTooLarge(ValueError):
    """The probe step took the policy out of the linear regime: the gradient is exactly zero
    (every group degenerate) at the pairs' ends far more often than at the probed policy."""

    def __init__(self, zero_ends: int, n_ends: int, zero_dirs: int, n_dirs: int) -> None:
        self.counts = (zero_ends, n_ends, zero_dirs, n_dirs)
        super().__init__(
            f"the probe step left the linear regime: the gradient was exactly zero (every group "
            f"degenerate) at {zero_ends} of {n_ends} probe points theta +- eps u against "
            f"{zero_dirs} of {n_dirs} direction batches at theta (the step wrecked the policy)"
        )


@dataclass(frozen=True)
class ProbeResult:
    """kappa, its standard error (with >= 2 direction batches the larger of the jackknife over
    them, which includes the direction's noise, and the pairs' spread, `stderr_kind` saying
    which; 'pairs only' with one direction batch, which leaves the direction's noise out), the
    per-pair samples -u . D_i / (2 eps g . u) (kappa is the mean over direction batches of their
    pairs' mean), and how many pairs had exactly equal gradients at both ends (zero_pairs: each
    a kappa = 0 sample)."""

    kappa: float
    stderr: float
    samples: tuple[float, ...]
    metrics: dict[str, float] = field(default_factory=dict)
    zero_pairs: int = 0
    stderr_kind: str = "pairs only"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kappa": self.kappa,
            "stderr": self.stderr,
            "stderr_kind": self.stderr_kind,
            "samples": list(self.samples),
            "zero_pairs": self.zero_pairs,
            "metrics": dict(self.metrics),
        }


def probe_seeds(seed: int, n_direction: int, n_pairs: int) -> tuple[list[int], list[int]]:
    """(direction-batch seeds, pair seeds), each < 2^32: two independent streams spawned from
    numpy's SeedSequence(seed), so different probe seeds share no batch and no direction batch is
    a pair's. More batches extend a stream (the first ones stay)."""
    dirs, pairs = np.random.SeedSequence(seed).spawn(2)
    return dirs.generate_state(n_direction).tolist(), pairs.generate_state(n_pairs).tolist()


def _rows(grad: torch.Tensor) -> torch.Tensor:
    """grad_fn's output as [M, P] float64 rows."""
    grad = grad.detach().to(torch.float64)
    return grad[None] if grad.ndim == 1 else grad


def _left_linear_regime(zero_ends: int, n_ends: int, zero_dirs: int, n_dirs: int) -> bool:
    """Whether the pairs' ends have all-zero gradients significantly more often than the
    direction batches at theta (one-sided Fisher exact test at LINEAR_P), most of them zero."""
    from scipy.stats import fisher_exact

    if 2 * zero_ends < n_ends:
        return False
    table = [[zero_ends, n_ends - zero_ends], [zero_dirs, n_dirs - zero_dirs]]
    return float(fisher_exact(table, alternative="greater").pvalue) < LINEAR_P


def _kappa(g: torch.Tensor, p: torch.Tensor, hu: torch.Tensor) -> float:
    """-u . H u / g . u with u = p g; g: [P] mean gradient, hu: [P] the estimate of H u."""
    u = p * g
    return -float(u @ hu) / float(g @ u)


def _jackknife(grads: torch.Tensor, p: torch.Tensor, hus: torch.Tensor) -> float:
    """Delete-one jackknife standard error of kappa over direction batches k (each with its
    pairs' H u_k). grads, hus: [n, P]; p: [P] held fixed."""
    n = grads.shape[0]
    keep = [[k for k in range(n) if k != j] for j in range(n)]
    est = np.array([_kappa(grads[i].mean(0), p, hus[i].mean(0)) for i in keep])
    with np.errstate(invalid="ignore"):  # a non-finite kappa is reported by the caller
        return float(math.sqrt((n - 1) / n * ((est - est.mean()) ** 2).sum()))


def probe_curvature(grad_fn: GradFn, theta: torch.Tensor, cfg: ProbeConfig) -> ProbeResult:
    """kappa along the preconditioned update direction at theta ([P], float64);
    cfg.preconditioner must be given ('adam' or 'sgd'). Raises ValueError when the expected
    gradient is zero, StepTooLarge when the step left the linear regime."""
    if cfg.preconditioner is None:
        raise ValueError(
            "probe_curvature needs preconditioner='adam' or 'sgd' (unset means the run "
            "optimizer's, which probe_run_config resolves)"
        )
    theta = theta.detach().to(torch.float64)
    dir_seeds, pair_seeds = probe_seeds(cfg.seed, cfg.n_direction, cfg.n_pairs)
    rows = [_rows(grad_fn(theta, s)) for s in dir_seeds]  # n x [M, P]
    grads = torch.stack([r.mean(0) for r in rows])  # [n, P]: g_k
    g = grads.mean(0)
    if cfg.preconditioner == "adam":  # v from the gradients Adam sees (the rows)
        p = 1.0 / (torch.cat(rows).pow(2).mean(0).sqrt() + cfg.adam_eps)
    else:
        p = torch.ones_like(g)
    u = p * g
    gpg = float(g @ u)
    zero_dirs = sum(not bool(gk.any()) for gk in grads)
    if not gpg > 0:
        raise ValueError(
            f"the expected gradient is zero at this point ({zero_dirs} of {len(grads)} direction "
            "batches had every group degenerate, or the policy is at its fixed point)"
        )
    n = len(dir_seeds)
    hus = torch.zeros(n, g.numel(), dtype=torch.float64)
    per_dir: list[list[float]] = [[] for _ in range(n)]
    samples, zero_pairs, zero_ends = [], 0, 0
    for i, seed in enumerate(pair_seeds):
        k = i % n
        # central difference: the O(eps) bias of a one-sided difference cancels
        plus = _rows(grad_fn(theta + cfg.epsilon * p * grads[k], seed)).mean(0)
        minus = _rows(grad_fn(theta - cfg.epsilon * p * grads[k], seed)).mean(0)
        diff = plus - minus
        zero_ends += (not bool(plus.any())) + (not bool(minus.any()))
        zero_pairs += not bool(diff.any())  # equal gradients: every group degenerate at both
        hus[k] += diff / (2 * cfg.epsilon)
        per_dir[k].append(-float(u @ diff) / (2 * cfg.epsilon * gpg))
        samples.append(per_dir[k][-1])
    if _left_linear_regime(zero_ends, 2 * len(pair_seeds), zero_dirs, n):
        raise StepTooLarge(zero_ends, 2 * len(pair_seeds), zero_dirs, n)
    hus /= torch.tensor([len(s) for s in per_dir], dtype=torch.float64)[:, None]
    kappa = _kappa(g, p, hus.mean(0))
    arr = np.asarray(samples)
    with np.errstate(invalid="ignore"):  # a non-finite kappa is reported by the caller
        pair_se = float(arr.std(ddof=1) / math.sqrt(arr.size))
    # the jackknife has n - 1 degrees of freedom (3 at the default 4 batches): the larger of it
    # and the pairs' spread covers better (bench/probe_direction_noise.py)
    jack = _jackknife(grads, p, hus) if n >= 2 else math.nan
    if n < 2:
        kind, stderr = "pairs only", pair_se
    elif jack >= pair_se or not math.isfinite(jack):
        kind, stderr = "jackknife over direction batches", jack
    else:
        kind, stderr = "spread over pairs (above the jackknife over direction batches)", pair_se
    metrics = {
        "kappa": kappa,
        "kappa_stderr": stderr,
        "jackknife_stderr": jack,  # over direction batches with their pairs (nan: one batch)
        "pair_stderr": pair_se,  # the spread of the per-pair samples / sqrt(pairs)
        "grad_norm": float(g.norm()),
        "gPg": gpg,
        "preconditioner_mean": float(p.mean()),
        "rows_per_batch": float(rows[0].shape[0]),
        "zero_pairs": zero_pairs,
        "zero_ends": zero_ends,
        "zero_direction_batches": zero_dirs,
    }
    if n > 1:  # |mean gradient| / its standard error: is the direction signal or noise?
        metrics["direction_snr"] = float(g.norm() / (grads.std(0).norm() / math.sqrt(n)))
    return ProbeResult(kappa, stderr, tuple(samples), metrics, zero_pairs, kind)


# ---------------------------------------------------------------------------------------------
# The two-arm bandit: exact and sampled expected gradients in the logits (z0, z1)
# ---------------------------------------------------------------------------------------------


def bandit_exact_gradient(model: Any) -> GradFn:
    """g(z) = the exact expected ascent gradient of `pgrpo.bandit.kappa.ForceModel` (seed unused):
    (E g0, -E g0) with E g0 = F(d) / 2, d = z0 - z1."""
    from pgrpo.bandit.kappa import force

    def grad_fn(theta: torch.Tensor, seed: int) -> torch.Tensor:
        half = force(model, theta[0] - theta[1]) / 2
        return torch.stack([half, -half]).to(torch.float64)

    return grad_fn


def bandit_sampled_gradient(model: Any, n_groups: int) -> GradFn:
    """g(z) from n_groups sampled groups of G (common random numbers: uniforms drawn from `seed`),
    advantages from the registry, loss from `pgrpo.core.losses.policy_loss` (as the trainer)."""
    from pgrpo.core.advantages import compute_advantages
    from pgrpo.core.losses import policy_loss

    g_size = model.group_size

    def grad_fn(theta: torch.Tensor, seed: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(seed)
        z = theta.detach().clone().requires_grad_(True)
        logp = torch.log_softmax(z, 0)
        uniforms = torch.rand(n_groups * g_size, generator=gen, dtype=torch.float64)
        correct = uniforms < logp[0].exp().detach()
        rewards = correct.to(torch.float64)
        adv = compute_advantages(
            model.estimator, rewards, group_size=g_size, **model.estimator_options
        ).advantages
        lp = torch.where(correct, logp[0], logp[1])[:, None]
        ref_lp = None
        if model.loss.uses_reference:
            p_ref = torch.tensor([model.p_ref, 1 - model.p_ref], dtype=torch.float64).log()
            ref_lp = torch.where(correct, p_ref[0], p_ref[1])[:, None]
        mask = torch.ones_like(lp)
        res = policy_loss(lp, lp.detach(), adv, mask, model.loss, ref_log_probs=ref_lp)
        (grad,) = torch.autograd.grad(-res.loss, z)
        return grad.detach()

    return grad_fn


# ---------------------------------------------------------------------------------------------
# A causal LM on a task (tiny model, SmolLM2, any HF model): the trainer's own pieces
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchGradients:
    """The trainer's gradients on one sampled batch: rows [M, P] float64, the ascent gradient of
    each of its `grpo.num_minibatches` minibatches at ratio 1 (what the optimizer sees, one per
    optimizer step; M = 1: the whole batch), the first one's loss, and the batch's mean reward."""

    rows: torch.Tensor
    loss: float
    reward_mean: float


def batch_gradients(
    policy: Any, task: Any, examples: list[dict[str, Any]], config: Any, *, seed: int
) -> BatchGradients:
    """Sample `examples` at `seed` (torch's generator), score them and give them advantages by the
    trainer's rollout path (`pgrpo.train.rollout`), and differentiate the loss of each of the
    trainer's minibatches (`pgrpo.train.update.minibatches` / `minibatch_gradient`: temperatures,
    score temperature, reference, loss, micro-batches) at ratio 1. config: a `RunConfig`."""
    from pgrpo.train.rollout import batch_advantages, collect
    from pgrpo.train.update import (
        minibatch_gradient,
        minibatches,
        reference_log_probs,
        scoring_temperatures,
    )

    params = policy.trainable_parameters()
    torch.manual_seed(seed)  # common random numbers: same draws at theta and theta + eps u
    batch = collect(policy, task, examples, config)
    adv = batch_advantages(batch, task, config.grpo).advantages
    temps = scoring_temperatures(batch.rollout, config)
    ref = reference_log_probs(policy, batch.rollout, config)
    rows, losses = [], []
    for idx in minibatches(batch.rollout.input_ids.shape[0], config):
        for p in params:
            p.grad = None
        result = minibatch_gradient(
            policy, config, batch.rollout, idx, adv, None, ref, temps, first=True
        )
        flat = [torch.zeros_like(p) if p.grad is None else p.grad for p in params]
        rows.append(-torch.cat([g.reshape(-1) for g in flat]).to(torch.float64))
        losses.append(float(result.loss))
    for p in params:
        p.grad = None
    return BatchGradients(torch.stack(rows), losses[0], float(batch.rewards.float().mean()))


def objective_gradient(
    policy: Any, task: Any, examples: list[dict[str, Any]], config: Any, *, seed: int
) -> tuple[float, torch.Tensor]:
    """(loss, ascent gradient [P] float64) of the on-policy GRPO objective the trainer's first
    optimizer step takes on `examples` (its first minibatch: `batch_gradients`)."""
    out = batch_gradients(policy, task, examples, config, seed=seed)
    return out.loss, out.rows[0]


class LMGradient:
    """grad_fn for the policy's trainable parameters: at theta, draws config.grpo.batch_prompts
    prompts (chosen by the seed) and returns the trainer's minibatch gradients on them ([M, P],
    `batch_gradients`); `reward_means` records each seed's batch mean reward at the theta it was
    last drawn at (the direction batches': the probed policy's reward)."""

    def __init__(self, policy: Any, task: Any, examples: list[dict[str, Any]], config: Any):
        from torch.nn.utils import parameters_to_vector

        self.policy, self.task, self.examples, self.config = policy, task, examples, config
        self.params = policy.trainable_parameters()
        self.theta0 = parameters_to_vector(self.params).detach().to(torch.float64).clone()
        self.reward_means: dict[int, float] = {}
        n = config.grpo.batch_prompts
        if len(examples) < n:
            raise ValueError(
                f"the split has {len(examples)} examples, fewer than batch_prompts={n}"
            )

    def __call__(self, theta: torch.Tensor, seed: int) -> torch.Tensor:
        from torch.nn.utils import vector_to_parameters

        with torch.no_grad():
            vector_to_parameters(theta.to(self.params[0].dtype), self.params)
        rng = np.random.default_rng(seed)
        n = self.config.grpo.batch_prompts
        batch = [self.examples[i] for i in rng.choice(len(self.examples), n, replace=False)]
        out = batch_gradients(self.policy, self.task, batch, self.config, seed=seed)
        self.reward_means[seed] = out.reward_mean
        return out.rows


def lm_gradient(
    policy: Any, task: Any, examples: list[dict[str, Any]], config: Any
) -> tuple[GradFn, torch.Tensor]:
    """(grad_fn, theta0): an `LMGradient` and the policy's trainable parameters as one vector.
    config: a `pgrpo.train.config.RunConfig`."""
    grad_fn = LMGradient(policy, task, examples, config)
    return grad_fn, grad_fn.theta0
