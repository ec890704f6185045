"""Measure the curvature scale kappa of the dynamics model before (or early in) a run.

The ROM (docs/dynamics.md) needs one measured number: kappa, the stiffness per unit
learning rate along the update direction, including the optimizer's preconditioner P:

    kappa = - g^T P H P g / g^T P g,        u = P g (the update direction)

where g is the EXPECTED ascent gradient of the GRPO objective (rollouts redrawn at every theta, so
H includes how the outcome distribution moves with the policy, not only the Hessian of one fixed
batch's surrogate) and H its Jacobian. We never form H: H u is a finite difference of expected
gradients along u, estimated with common random numbers (the same sampling seed at theta - eps u
and at theta + eps u, so most rollouts coincide and the difference is mostly signal):

    kappa_i = - u . (g_s(theta + eps u) - g_s(theta - eps u)) / (2 eps g^T P g)   (s: pair seed)

averaged over pairs, with its standard error. P is Adam's steady-state preconditioner
1 / (sqrt(E[g_b^2]) + eps_adam) estimated from the direction batches' gradients (identity for
SGD / EMA momentum). The batches' seeds come from numpy's SeedSequence (`probe_seeds`), so two
probe seeds are independent replicates. On the two-arm bandit this reduces to -dF/dd, the exact
curvature of `pgrpo.bandit.kappa` (checked in tests/test_probe.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from pgrpo.measure.config import ProbeConfig

GradFn = Callable[[torch.Tensor, int], torch.Tensor]
"""grad_fn(theta [P] float64, seed) -> an unbiased estimate of the expected ascent gradient [P]."""


@dataclass(frozen=True)
class ProbeResult:
    """kappa (mean over pairs), its standard error, the per-pair samples, and how many pairs
    had exactly equal gradients at both ends (zero_pairs: each a kappa = 0 sample)."""

    kappa: float
    stderr: float
    samples: tuple[float, ...]
    metrics: dict[str, float] = field(default_factory=dict)
    zero_pairs: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "kappa": self.kappa,
            "stderr": self.stderr,
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


def probe_curvature(grad_fn: GradFn, theta: torch.Tensor, cfg: ProbeConfig) -> ProbeResult:
    """kappa along the preconditioned update direction at theta ([P], float64);
    cfg.preconditioner must be given ('adam' or 'sgd')."""
    if cfg.preconditioner is None:
        raise ValueError(
            "probe_curvature needs preconditioner='adam' or 'sgd' (unset means the run "
            "optimizer's, which probe_run_config resolves)"
        )
    theta = theta.detach().to(torch.float64)
    dir_seeds, pair_seeds = probe_seeds(cfg.seed, cfg.n_direction, cfg.n_pairs)
    dirs = torch.stack([grad_fn(theta, s) for s in dir_seeds])
    g = dirs.mean(0)
    if cfg.preconditioner == "adam":
        p = 1.0 / (dirs.pow(2).mean(0).sqrt() + cfg.adam_eps)
    else:
        p = torch.ones_like(g)
    u = p * g
    gpg = float(g @ u)
    if not gpg > 0:
        raise ValueError(
            "the expected gradient is zero at this point (all groups degenerate, or the policy "
            "is at its fixed point): probe earlier in the run or with more rollouts"
        )
    samples, zero_pairs = [], 0
    for seed in pair_seeds:
        # central difference: the O(eps) bias of a one-sided difference cancels
        diff = grad_fn(theta + cfg.epsilon * u, seed) - grad_fn(theta - cfg.epsilon * u, seed)
        zero_pairs += not bool(diff.any())  # equal gradients: every group degenerate at both
        samples.append(-float(u @ diff) / (2 * cfg.epsilon * gpg))
    arr = np.asarray(samples)
    stderr = float(arr.std(ddof=1) / math.sqrt(arr.size))
    metrics = {
        "kappa": float(arr.mean()),
        "kappa_stderr": stderr,
        "grad_norm": float(g.norm()),
        "gPg": gpg,
        "preconditioner_mean": float(p.mean()),
        "zero_pairs": zero_pairs,
    }
    if len(dirs) > 1:  # |mean gradient| / its standard error: is the direction signal or noise?
        metrics["direction_snr"] = float(g.norm() / (dirs.std(0).norm() / math.sqrt(len(dirs))))
    return ProbeResult(float(arr.mean()), stderr, tuple(samples), metrics, zero_pairs)


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


def objective_gradient(
    policy: Any, task: Any, examples: list[dict[str, Any]], config: Any, *, seed: int
) -> tuple[float, torch.Tensor]:
    """(loss, ascent gradient [P] float64) of the on-policy GRPO objective the trainer's first
    optimizer step takes on `examples`: sampled at `seed` (torch's generator), scored and given
    advantages by the trainer's rollout path (`pgrpo.train.rollout`), differentiated by its update
    (`pgrpo.train.update.on_policy_gradient`: temperatures, score temperature, reference, loss,
    micro-batches). config: a `pgrpo.train.config.RunConfig`."""
    from pgrpo.train.rollout import batch_advantages, collect
    from pgrpo.train.update import on_policy_gradient

    params = policy.trainable_parameters()
    torch.manual_seed(seed)  # common random numbers: same draws at theta and theta + eps u
    batch = collect(policy, task, examples, config)
    adv = batch_advantages(batch, task, config.grpo).advantages
    for p in params:
        p.grad = None
    result = on_policy_gradient(policy, config, batch.rollout, adv)
    flat = [torch.zeros_like(p) if p.grad is None else p.grad for p in params]
    grad = -torch.cat([g.reshape(-1) for g in flat]).to(torch.float64)
    for p in params:
        p.grad = None
    return float(result.loss), grad


def lm_gradient(
    policy: Any, task: Any, examples: list[dict[str, Any]], config: Any
) -> tuple[GradFn, torch.Tensor]:
    """(grad_fn, theta0) for the policy's trainable parameters: grad_fn draws
    config.grpo.batch_prompts prompts (chosen by the seed), and returns the ascent gradient of the
    trained objective on them (`objective_gradient`). config: a `pgrpo.train.config.RunConfig`."""
    from torch.nn.utils import parameters_to_vector, vector_to_parameters

    params = policy.trainable_parameters()
    theta0 = parameters_to_vector(params).detach().to(torch.float64).clone()
    n = config.grpo.batch_prompts
    if len(examples) < n:
        raise ValueError(f"the split has {len(examples)} examples, fewer than batch_prompts={n}")

    def grad_fn(theta: torch.Tensor, seed: int) -> torch.Tensor:
        with torch.no_grad():
            vector_to_parameters(theta.to(params[0].dtype), params)
        rng = np.random.default_rng(seed)
        batch = [examples[i] for i in rng.choice(len(examples), n, replace=False)]
        return objective_gradient(policy, task, batch, config, seed=seed)[1]

    return grad_fn, theta0


def probe_run_config(config: Any, cfg: ProbeConfig, *, checkpoint: Any = None) -> dict[str, Any]:
    """Probe kappa for a `pgrpo.train.config.RunConfig` (model, task, G, B, temperatures,
    estimator, transform, loss, optimizer) at its initial policy (or at a trainer `checkpoint`
    folder: "early in a run"), then what the ROM predicts with it (`pgrpo.dynamics.predict`) with
    the reduction of the run's optimizer (`optim.name`; AdamW's 'adam': kappa preconditioned, no
    K*): regime, tau (the exact mean's decay time, -K / ln rho of the window map), K*.
    cfg.preconditioner unset: the optimizer's ('adam' for adam, 'sgd' for sgd_momentum); one that
    contradicts it is measured and warned about, with no prediction (its kappa is in other units).
    The probe step is cfg.step_lrs in units of the run's lr. A kappa from pairs that were all
    exactly zero (every group degenerate) is no measurement: kappa and stderr are None. Raises
    UserError when kappa is not finite (the probe step took the weights out of range)."""
    from torch.nn.utils import vector_to_parameters

    from pgrpo.train.optimizers import TRAIN_OPTIMIZERS
    from pgrpo.train.rollout import load_task_and_policy
    from pgrpo.train.setup import resolve_config

    c = resolve_config(config)
    if c.model.precision == "auto" and c.model.dtype == "float32":
        # a finite difference of gradients at eps ~ 10 lr is below bf16's rounding (2^-8
        # relative): probe in fp32 unless bf16 is asked for explicitly
        c = replace(c, model=replace(c.model, precision="fp32"))
    reduction = TRAIN_OPTIMIZERS.get(c.optim.name).reduction
    preconditioner = cfg.preconditioner or ("adam" if reduction == "adam" else "sgd")
    cfg = replace(cfg, epsilon=cfg.step_lrs * c.optim.lr, preconditioner=preconditioner)
    task, policy = load_task_and_policy(c, checkpoint=checkpoint)
    grad_fn, theta0 = lm_gradient(policy, task, task.load(c.task.split), c)
    params = policy.trainable_parameters()
    try:
        result = probe_curvature(grad_fn, theta0, cfg)
    finally:
        with torch.no_grad():
            vector_to_parameters(theta0.to(params[0].dtype), params)
    out: dict[str, Any] = {
        **result.to_dict(),
        "optimizer": reduction,
        "preconditioner": preconditioner,
        "lr": c.optim.lr,
        "beta1": c.optim.beta1,
        "beta2": c.optim.beta2,
        "refresh_interval": c.grpo.refresh_interval,
        "group_size": c.grpo.group_size,
        "batch_prompts": c.grpo.batch_prompts,
        "steps": c.run.steps,
        "precision": policy.precision.name,
    }
    out.update(_verdict(result, cfg, c, reduction))
    return out


def _verdict(result: ProbeResult, cfg: ProbeConfig, c: Any, reduction: str) -> dict[str, Any]:
    """noise_dominated, warnings, prediction (or None) and note for a probe of run config `c`
    (resolved, reduction: its optimizer's) with preconditioner cfg.preconditioner."""
    from pgrpo.dynamics import predict
    from pgrpo.errors import UserError

    kappa, n = result.kappa, len(result.samples)
    if not (math.isfinite(kappa) and math.isfinite(result.stderr)):
        raise UserError(
            f"kappa is {kappa} +- {result.stderr} (not finite): the probe step "
            f"--step-lrs {cfg.step_lrs:g} x lr = {cfg.epsilon:g} took the weights out of range",
            "lower --step-lrs (default 10)",
        )
    if result.zero_pairs == n:
        return {
            "kappa": None,
            "stderr": None,
            "noise_dominated": True,
            "warnings": [],
            "prediction": None,
            "note": "no measurement: every pair's gradients were equal (all groups degenerate); "
            "raise grpo.group_size / grpo.batch_prompts / generation.max_new_tokens",
        }
    warnings = []
    if result.zero_pairs:
        warnings.append(
            f"{result.zero_pairs} of {n} pairs had equal gradients at both ends (every group "
            "degenerate) and count as kappa = 0; raise grpo.group_size, grpo.batch_prompts or "
            "generation.max_new_tokens"
        )
    snr = result.metrics.get("direction_snr")
    if snr is not None and snr < 2:
        warnings.append(
            f"direction_snr = {snr:.2g} < 2: the direction g is mostly noise, and kappa's "
            "standard error (over pairs along this one direction) leaves out how kappa moves "
            "with the direction drawn (two --seed values of a SmolLM2 probe gave 0.67 +- 0.55 "
            "and -4.1 +- 0.67); raise --direction-batches, or compare seeds"
        )
    noise_dominated = bool(result.stderr >= 0.5 * abs(kappa))
    if noise_dominated:
        warnings.append(
            "the standard error is at least half of kappa (noise-dominated); raise --pairs, "
            "grpo.batch_prompts or grpo.group_size before trusting the forecast"
        )
    out = {"noise_dominated": noise_dominated, "warnings": warnings, "prediction": None}
    matching = "adam" if reduction == "adam" else "sgd"
    if cfg.preconditioner != matching:
        warnings.append(
            f"--preconditioner {cfg.preconditioner} contradicts optim.name={c.optim.name} (its "
            f"'{reduction}' prediction needs kappa measured with {matching}), so no prediction "
            "is made; drop --preconditioner"
        )
        out["note"] = f"no prediction: kappa was measured with preconditioner {cfg.preconditioner}"
    elif kappa > 0:
        pred = predict(
            c.optim.lr,
            c.optim.beta1,
            kappa,
            refresh_interval=c.grpo.refresh_interval,
            group_size=c.grpo.group_size,
            batch_prompts=c.grpo.batch_prompts,
            n_steps=c.run.steps,
            optimizer=reduction,
            beta2=c.optim.beta2,
        )
        out["prediction"] = pred.to_dict()
    else:
        out["note"] = (
            "kappa <= 0 here: no restoring force measured (the reward is far from a fixed point, "
            "or the probe is noise-dominated: most groups degenerate); add pairs or rollouts"
        )
    return out
