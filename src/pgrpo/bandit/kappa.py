"""Exact expected force and independent curvature of the two-arm softmax bandit.

One prompt, two arms (correct / wrong) with logits (z0, z1); d = z0 - z1 is the one coordinate
that matters and p = sigmoid(d) is the success probability (the expected reward R). One
optimizer step on B groups of G samples, loss = the `LossConfig` objective with T = 1 (the
bandit uses `token_mean` over samples), moves z0 by lr * g0 and z1 by -lr * g0, so

    d <- d + lr * F,        F = 2 E[g0]      (the "force", per unit learning rate)

E[g0] is exact: a group's rewards are Binomial(G, p_s) and, given k correct, every correct sample
gets the same advantage A+(k) and every wrong one A-(k) (taken from the advantage registry on
the G + 1 possible reward vectors), so the expectation is a finite sum over k = 0..G.

Lag. With a refresh interval K > 1 the rollouts were drawn at d_s while the logits are at d.
`force(d, d_s)` is exact for that too: without an importance ratio ('reinforce') the samples'
score functions use the current p while the outcome distribution is the stale one; with the
ratio ('clipped') each sample is reweighted by pi(a) / pi_s(a) (zero when clipped); the KL
estimator always uses the current log-probs. Linearising at the fixed point d* (F(d*, d*) = 0):

    F(d, d_s) ~ -kappa_now (d - d*) - kappa_lag (d_s - d*),    kappa = kappa_now + kappa_lag

kappa = -dF(d, d)/dd at d* is the curvature of the model (docs/dynamics.md; docs/reproductions.md,
"The testbed"); no trajectory is involved. With zero-sum
advantages (grpo, dr_grpo, rloo) and no ratio the advantage force is exactly stale (the
current-p terms cancel), so only the KL term contributes to kappa_now.

Derivatives are exact (autograd through the closed-form sum in float64), not finite differences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from scipy.optimize import brentq

from pgrpo.core.advantages import ADVANTAGE_ESTIMATORS, compute_advantages
from pgrpo.core.losses import (
    KL_ESTIMATORS,
    POLICY_LOSSES,
    LossConfig,
    asymmetric_kl_weights,
    config_options,
)


@dataclass(frozen=True)
class ForceModel:
    """What determines the exact expected force: estimator, group size, loss, KL anchor."""

    estimator: str = "dr_grpo"
    """Advantage estimator (registry name); its advantage must depend on its own group only."""
    group_size: int = 8
    """G, samples per prompt."""
    loss: LossConfig = field(default_factory=lambda: LossConfig(policy_loss="reinforce"))
    """Objective pieces. loss.kl_coef > 0: KL to the reference inside the loss (current state)."""
    kl_reward_coef: float = 0.0
    """KL in the reward (verl's use_kl_in_reward): r <- r - coef * k1(old, ref) at rollout time,
    so its force acts through the advantages, at the rollouts' state."""
    p_ref: float = 0.5
    """Success probability of the KL reference policy."""
    estimator_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ADVANTAGE_ESTIMATORS.get(self.estimator)
        if ADVANTAGE_ESTIMATORS.get(self.estimator).batch_coupled:
            coupled = [n for n in ADVANTAGE_ESTIMATORS if ADVANTAGE_ESTIMATORS.get(n).batch_coupled]
            usable = [n for n in ADVANTAGE_ESTIMATORS.names() if n not in coupled]
            raise ValueError(
                f"{self.estimator!r} normalises by a statistic of the whole batch, so its force "
                f"is not a sum over one group's outcomes; use one of {', '.join(usable)}"
            )
        if int(self.group_size) != self.group_size or self.group_size < 2:
            raise ValueError(f"group_size must be an integer >= 2, got {self.group_size!r}")
        if not 0.0 < self.p_ref < 1.0:
            raise ValueError(f"p_ref must be in (0, 1), got {self.p_ref!r}")
        if self.kl_reward_coef < 0:
            raise ValueError(f"kl_reward_coef must be >= 0, got {self.kl_reward_coef!r}")
        if self.loss.max_length not in (None, 1):
            raise ValueError(
                "with one token per sample every aggregator is the sample mean only when "
                f"max_length is None or 1, got {self.loss.max_length}"
            )
        if self.loss.entropy_coef:
            raise ValueError("entropy_coef is not part of the bandit force model; set it to 0")


def shaped_rewards(model: ForceModel, p_s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rewards of a correct and a wrong sample drawn at success probability p_s: 1 and 0, minus
    kl_reward_coef * k1(log pi_s(a), log ref(a)) when the KL is in the reward."""
    one = torch.ones_like(p_s)
    if not model.kl_reward_coef:
        return one, torch.zeros_like(p_s)
    k1 = KL_ESTIMATORS.get("k1")
    ref_c = torch.full_like(p_s, math.log(model.p_ref))
    ref_w = torch.full_like(p_s, math.log1p(-model.p_ref))
    r_c = one - model.kl_reward_coef * k1(torch.log(p_s), ref_c)
    r_w = -model.kl_reward_coef * k1(torch.log1p(-p_s), ref_w)
    return r_c, r_w


def _binary_table(model: ForceModel, rewards_correct: float, rewards_wrong: float) -> np.ndarray:
    """Advantages [G + 1, G] of the G + 1 groups [r_c]*k + [r_w]*(G - k), k = 0..G (one
    `compute_advantages` call)."""
    g = model.group_size
    correct = np.arange(g)[None, :] < np.arange(g + 1)[:, None]
    rewards = np.where(correct, rewards_correct, rewards_wrong).astype(np.float64)
    adv = compute_advantages(
        model.estimator, rewards.reshape(-1), group_size=g, **model.estimator_options
    ).advantages
    return np.asarray(adv, dtype=np.float64).reshape(g + 1, g)


def _affine_basis(model: ForceModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A0, Ac, Aw), each [G + 1, G], with A(r_c, r_w) = A0 + r_c Ac + r_w Aw for every k.

    Exact for estimators affine in the rewards (dr_grpo, rloo, sign); checked at two extra points,
    so a non-affine estimator (grpo's std normalisation) fails with a clear message.
    """
    a0 = _binary_table(model, 0.0, 0.0)
    ac = _binary_table(model, 1.0, 0.0) - a0
    aw = _binary_table(model, 0.0, 1.0) - a0
    for rc, rw in ((0.7, -0.3), (2.5, 0.4)):
        if not np.allclose(_binary_table(model, rc, rw), a0 + rc * ac + rw * aw, atol=1e-9):
            raise ValueError(
                f"with the KL in the reward the force model needs an estimator that is affine in "
                f"the rewards (dr_grpo, rloo, sign); {model.estimator!r} is not (its std "
                "normalisation makes the force jump at the fixed point). Put the KL in the loss "
                "(loss.kl_coef) instead"
            )
    return a0, ac, aw


def advantage_table(model: ForceModel, p_s: Any = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages of a correct (A+[..., k]) and a wrong (A-[..., k]) sample in a group with k
    correct, for rollouts drawn at p_s [...]. Returns two float64 tensors [..., G + 1] (A+[.., 0]
    and A-[.., G] do not occur and are 0).

    Without the KL in the reward the rewards are 1 / 0 and the table comes straight from
    `compute_advantages`. With it they depend on p_s; the table is then the estimator's affine
    map of the two reward levels, so it stays differentiable in p_s (exact derivatives).
    """
    g = model.group_size
    p_s = torch.as_tensor(p_s, dtype=torch.float64)
    k = torch.arange(g + 1)
    if not model.kl_reward_coef:
        table = torch.from_numpy(_binary_table(model, 1.0, 0.0))
        a_pos = torch.where(k > 0, table[:, 0], 0.0).expand(*p_s.shape, g + 1)
        a_neg = torch.where(k < g, table[:, -1], 0.0).expand(*p_s.shape, g + 1)
        return a_pos, a_neg
    a0, ac, aw = (torch.from_numpy(t) for t in _affine_basis(model))
    r_c, r_w = shaped_rewards(model, p_s)
    adv = a0 + r_c[..., None, None] * ac + r_w[..., None, None] * aw  # [..., G+1, G]
    a_pos = torch.where(k > 0, adv[..., 0], torch.zeros_like(adv[..., 0]))
    a_neg = torch.where(k < g, adv[..., -1], torch.zeros_like(adv[..., -1]))
    return a_pos, a_neg


def _binomial_pmf(p: torch.Tensor, g: int) -> torch.Tensor:
    """P(k correct of G) for k = 0..G. p: [...] -> [..., G + 1]."""
    k = torch.arange(g + 1, dtype=torch.float64)
    log_c = torch.lgamma(torch.tensor(g + 1.0, dtype=torch.float64)) - torch.lgamma(k + 1)
    log_c = log_c - torch.lgamma(g - k + 1)
    p = p.unsqueeze(-1).clamp(1e-300, 1.0)
    q = (1.0 - p).clamp(1e-300, 1.0)
    return torch.exp(log_c + k * torch.log(p) + (g - k) * torch.log(q))


def _sample_terms(model: ForceModel, d: torch.Tensor, d_s: torch.Tensor):
    """Per-outcome z0-gradient (ascent) of one correct / one wrong sample: [..., G + 1] each,
    plus the outcome probabilities [..., G + 1]."""
    p, p_s = torch.sigmoid(d), torch.sigmoid(d_s)
    a_pos, a_neg = advantage_table(model, p_s)
    pu, psu = p.unsqueeze(-1), p_s.unsqueeze(-1)
    cfg = model.loss
    # score of z0: correct sample 1 - p, wrong sample -p (the current policy's); the registered
    # per-token loss gives the weight of each sample's score (ratio, clipping) by autograd
    w_c = _score_weight(cfg, torch.log(pu), torch.log(psu), a_pos)
    w_w = _score_weight(cfg, torch.log(1 - pu), torch.log(1 - psu), a_neg)
    t_c = w_c * (1 - pu)
    t_w = -w_w * pu
    if cfg.uses_reference:
        kc = _kl_coefs(cfg, a_pos)
        kw = _kl_coefs(cfg, a_neg)
        t_c = t_c + _kl_ascent(cfg, pu, model.p_ref, correct=True) * kc
        t_w = t_w + _kl_ascent(cfg, pu, model.p_ref, correct=False) * kw
    return t_c, t_w, _binomial_pmf(p_s, model.group_size)


def _score_weight(
    cfg: LossConfig, log_p: torch.Tensor, log_p_old: torch.Tensor, adv: torch.Tensor
) -> torch.Tensor:
    """-d loss / d log pi of one sample under the registered per-token loss, [..., G + 1]: the
    factor of its score in the ascent direction (A * ratio, or 0 where clipped, for 'clipped').
    log_p, log_p_old: [..., 1]; adv: [..., G + 1]. Differentiable in log_p and log_p_old."""
    fn = POLICY_LOSSES.get(cfg.policy_loss)
    graph = torch.is_grad_enabled() and (log_p.requires_grad or log_p_old.requires_grad)
    with torch.enable_grad():
        lp = log_p.expand_as(adv).unsqueeze(-1)  # one token per sample: [..., G + 1, 1]
        if not lp.requires_grad:
            lp = lp.detach().requires_grad_(True)
        old = log_p_old.expand_as(adv).unsqueeze(-1)
        loss = fn(lp, old, adv.unsqueeze(-1), **config_options(fn, cfg)).loss
        (grad,) = torch.autograd.grad(loss.sum(), lp, create_graph=graph)
    return -grad.squeeze(-1)


def _kl_coefs(cfg: LossConfig, adv: torch.Tensor) -> torch.Tensor:
    return asymmetric_kl_weights(
        adv, kl_coef=cfg.kl_coef, kl_coef_negative=cfg.kl_coef_negative
    ).to(torch.float64)


def _kl_ascent(cfg: LossConfig, p: torch.Tensor, p_ref: float, *, correct: bool) -> torch.Tensor:
    """-d KL_estimator(log pi(a), log ref(a)) / d z0 for one sample of arm a (current policy);
    the derivative in log pi comes from the registered estimator (with the `LossConfig` options
    it declares, e.g. k3's cap) by autograd."""
    pi_a = p if correct else 1 - p
    ref_a = p_ref if correct else 1 - p_ref
    score = (1 - p) if correct else -p  # d log pi(a) / d z0
    graph = torch.is_grad_enabled() and p.requires_grad
    with torch.enable_grad():
        log_pi = torch.log(pi_a)
        if not log_pi.requires_grad:
            log_pi = log_pi.detach().requires_grad_(True)
        fn = KL_ESTIMATORS.get(cfg.kl_estimator)
        ref = torch.full_like(log_pi, math.log(ref_a))
        kl = fn(log_pi, ref, **config_options(fn, cfg))
        (dk,) = torch.autograd.grad(kl.sum(), log_pi, create_graph=graph)
    return -dk * score


def force(model: ForceModel, d: Any, d_s: Any = None) -> torch.Tensor:
    """Exact expected rate of change of d = z0 - z1 per unit learning rate, F(d, d_s).

    d: current logit gap [...]; d_s: logit gap when the rollouts were drawn (default: d, on-policy).
    Returns a float64 tensor of d's shape (differentiable in d and d_s).
    """
    d = torch.as_tensor(d, dtype=torch.float64)
    d_s = d if d_s is None else torch.as_tensor(d_s, dtype=torch.float64)
    t_c, t_w, pmf = _sample_terms(model, d, d_s)
    g = model.group_size
    k = torch.arange(g + 1, dtype=torch.float64)
    per_group = (k * t_c + (g - k) * t_w) / g  # mean z0-gradient of one group with k correct
    return 2.0 * (pmf * per_group).sum(-1)


def group_gradient_moments(model: ForceModel, d: float) -> tuple[float, float]:
    """Mean and variance of one group's mean z0-gradient g0 at d (on-policy): (E g0, Var g0)."""
    dd = torch.tensor(float(d), dtype=torch.float64)
    t_c, t_w, pmf = _sample_terms(model, dd, dd)
    g = model.group_size
    k = torch.arange(g + 1, dtype=torch.float64)
    per_group = (k * t_c + (g - k) * t_w) / g
    mean = float((pmf * per_group).sum())
    return mean, float((pmf * per_group**2).sum()) - mean**2


@dataclass(frozen=True)
class Curvature:
    """The fixed point and the curvature of the exact force there (per unit learning rate).

    kappa = -dF(d, d)/dd at d*; kappa_lag, kappa_now: the parts from the rollouts' state and the
    current state (kappa = kappa_lag + kappa_now). grad_rms: sqrt(E g0^2) of one step's z0
    gradient with B groups at d* (Adam's preconditioner); kappa_adam = kappa / grad_rms.
    """

    d_star: float
    p_star: float
    kappa: float
    kappa_lag: float
    kappa_now: float
    grad_rms: float
    kappa_adam: float
    metrics: dict[str, float] = field(default_factory=dict)


SCAN_POINTS = 161
"""Grid of `fixed_point`'s scan for a stable zero when F has one sign at both ends (0.25 apart
on [-20, 20])."""


def fixed_point(model: ForceModel, *, lo: float = -20.0, hi: float = 20.0) -> float:
    """d* with F(d*, d*) = 0 (brentq on [lo, hi] where F changes sign there). Where F has one sign
    at both ends, the first stable zero (F falling through 0) on a grid of SCAN_POINTS: a capped
    k3 (`LossConfig.k3_max`, verl's) anchors the policy only up to where the rarer arm's k3
    reaches the cap, and beyond it the advantage force alone is left, of the sign it has at the
    far end. Raises when there is none (no interior fixed point: add a KL penalty,
    kl_coef > 0)."""

    def f(x: float) -> float:
        return float(force(model, x))

    f_lo, f_hi = f(lo), f(hi)
    if f_lo * f_hi <= 0:
        return float(brentq(f, lo, hi, xtol=1e-13, rtol=1e-13, maxiter=200))
    grid = np.linspace(lo, hi, SCAN_POINTS)
    values = [f_lo, *(f(x) for x in grid[1:-1]), f_hi]
    for a, b, f_a, f_b in zip(grid, grid[1:], values, values[1:], strict=False):
        if f_a > 0 >= f_b:
            return float(brentq(f, a, b, xtol=1e-13, rtol=1e-13, maxiter=200))
    capped = " (or loss.k3_max=None: a capped k3 may let go)" if model.loss.uses_reference else ""
    raise ValueError(
        f"the expected force has no zero for d in [{lo}, {hi}] (F={f_lo:.3g}, {f_hi:.3g}): "
        f"there is no interior fixed point; set loss.kl_coef > 0 to anchor the policy{capped}"
    )


def curvature(model: ForceModel, *, batch_prompts: int = 1) -> Curvature:
    """Fixed point and exact curvature of the force; no trajectory is involved."""
    d_star = fixed_point(model)
    d = torch.tensor(d_star, dtype=torch.float64, requires_grad=True)
    d_s = torch.tensor(d_star, dtype=torch.float64, requires_grad=True)
    f = force(model, d, d_s)
    g_now, g_lag = torch.autograd.grad(f, (d, d_s))
    kappa_now, kappa_lag = -float(g_now), -float(g_lag)
    kappa = kappa_now + kappa_lag
    if not math.isfinite(kappa):
        raise ValueError(f"the force of {model.estimator!r} has no finite slope at its fixed point")
    mean, var = group_gradient_moments(model, d_star)
    rms = math.sqrt(mean**2 + var / batch_prompts)
    p_star = 1.0 / (1.0 + math.exp(-d_star))
    return Curvature(
        d_star=d_star,
        p_star=p_star,
        kappa=kappa,
        kappa_lag=kappa_lag,
        kappa_now=kappa_now,
        grad_rms=rms,
        kappa_adam=kappa / rms if rms > 0 else math.inf,
        metrics={"kappa": kappa, "p_star": p_star, "lag_fraction": kappa_lag / kappa},
    )
