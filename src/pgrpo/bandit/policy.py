"""The vectorised softmax-bandit policy: R independent runs x P prompts x M arms of logits.

Arm 0 of every prompt is the correct answer (reward 1), arms 1..M-1 are wrong (reward 0), so a
prompt's success probability is p = softmax(z)[0] and a run's expected reward is the mean of p
over its prompts. This is the reduction of the reward-dynamics model (docs/reproductions.md,
"The testbed"): with one prompt and two arms the policy is summarised exactly by
its expected reward, the mean-field assumption of the reduced-order model.

Initial difficulty (the success probability of each prompt at step 0) is homogeneous, drawn from
a Beta distribution, or bimodal (a mixture of easy and hard prompts): the heterogeneity that
makes the observed degeneracy exceed the i.i.d. prediction (arXiv 2605.07689).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

DIFFICULTY_KINDS = ("homogeneous", "beta", "bimodal")


@dataclass(frozen=True)
class DifficultyConfig:
    """How the prompts' initial success probabilities are drawn (independently per run)."""

    kind: str = "homogeneous"
    """'homogeneous' (every prompt has p = mean), 'beta' (Beta with this mean and
    concentration), or 'bimodal' (p_high with probability mean_high_frac, else p_low)."""
    mean: float = 0.5
    """Mean success probability ('homogeneous', 'beta')."""
    concentration: float = 2.0
    """Beta concentration a + b: small = very heterogeneous, large = nearly homogeneous."""
    p_low: float = 0.05
    """'bimodal': success probability of the hard prompts."""
    p_high: float = 0.9
    """'bimodal': success probability of the easy prompts."""
    high_frac: float = 0.3
    """'bimodal': fraction of easy prompts."""

    def __post_init__(self) -> None:
        if self.kind not in DIFFICULTY_KINDS:
            raise ValueError(
                f"difficulty kind must be one of {', '.join(DIFFICULTY_KINDS)}, got {self.kind!r}"
            )
        for name in ("mean", "p_low", "p_high"):
            v = getattr(self, name)
            if not 0.0 < v < 1.0:
                raise ValueError(f"difficulty {name} must be in (0, 1), got {v!r}")
        if not self.concentration > 0:
            raise ValueError(f"concentration must be > 0, got {self.concentration!r}")
        if not 0.0 <= self.high_frac <= 1.0:
            raise ValueError(f"high_frac must be in [0, 1], got {self.high_frac!r}")


def initial_success_probs(
    cfg: DifficultyConfig, runs: int, prompts: int, rng: np.random.Generator
) -> torch.Tensor:
    """Draw p [R, P] (float64), clipped to [1e-6, 1 - 1e-6] so that logits stay finite."""
    shape = (runs, prompts)
    if cfg.kind == "homogeneous":
        p = np.full(shape, cfg.mean)
    elif cfg.kind == "beta":
        p = rng.beta(cfg.mean * cfg.concentration, (1 - cfg.mean) * cfg.concentration, shape)
    else:
        p = np.where(rng.random(shape) < cfg.high_frac, cfg.p_high, cfg.p_low)
    return torch.from_numpy(np.clip(p, 1e-6, 1 - 1e-6).astype(np.float64))


def logits_from_success(p: torch.Tensor, num_arms: int = 2) -> torch.Tensor:
    """Logits [R, P, M] whose softmax puts p on arm 0 and (1 - p) / (M - 1) on each wrong arm."""
    if num_arms < 2:
        raise ValueError(f"num_arms must be >= 2 (one correct, at least one wrong), got {num_arms}")
    wrong = torch.log1p(-p) - math.log(num_arms - 1)
    z = wrong.unsqueeze(-1).expand(*p.shape, num_arms).clone()
    z[..., 0] = torch.log(p)
    return z


def success_probs(logits: torch.Tensor) -> torch.Tensor:
    """p = softmax(z)[..., 0]. logits: [R, P, M] -> [R, P]."""
    return torch.softmax(logits, dim=-1)[..., 0]


def logit_gap(logits: torch.Tensor) -> torch.Tensor:
    """log p - log(1 - p) = z0 - logsumexp(z_wrong): the bandit's one coordinate d.
    logits: [R, P, M] -> [R, P]."""
    return logits[..., 0] - torch.logsumexp(logits[..., 1:], dim=-1)


def draw_prompts(runs: int, prompts: int, batch: int, gen: torch.Generator) -> torch.Tensor:
    """Prompt indices [R, B]: without replacement when B <= P, with replacement otherwise."""
    if batch <= prompts:
        return torch.rand(runs, prompts, generator=gen).argsort(dim=-1)[:, :batch]
    return torch.randint(prompts, (runs, batch), generator=gen)


def sample_arms(probs: torch.Tensor, group_size: int, gen: torch.Generator) -> torch.Tensor:
    """G arms per (run, prompt) row. probs: [R, B, M] -> arms [R, B, G] (long)."""
    r, b, m = probs.shape
    if m == 2:  # Bernoulli is much cheaper than multinomial
        u = torch.rand(r, b, group_size, generator=gen, dtype=probs.dtype)
        return (u >= probs[..., :1]).long()
    flat = torch.multinomial(probs.reshape(-1, m), group_size, replacement=True, generator=gen)
    return flat.reshape(r, b, group_size)
