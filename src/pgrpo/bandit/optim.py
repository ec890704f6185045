"""Per-run optimizers for the bandit logits [R, P, M] and the learning-rate schedules.

Every hyperparameter may differ per run (lr [R], beta1 [R]); the updates are elementwise, so
each run evolves exactly as it would alone.

- `ema`: SGD with exponential-moving-average momentum, the exact reduction of docs/dynamics.md:
      v <- beta1 v + (1 - beta1) g,   z <- z + lr v          (g = -grad, the ascent direction)
  so z_{n+1} - z_n = beta1 (z_n - z_{n-1}) + (1 - beta1) lr g_n, the heavy-ball recursion
  x_{n+1} - x_n = beta1 (x_n - x_{n-1}) - (1 - beta1) a x_s once g is linearised.
- `adam`: Adam (Kingma & Ba 2015) with bias correction, elementwise per logit.
"""

from __future__ import annotations

import torch

from pgrpo._registry import Registry
from pgrpo.core.schedules import LR_SCHEDULES, lr_factor

OPTIMIZERS: Registry[type] = Registry("bandit optimizer")
__all__ = ["LR_SCHEDULES", "OPTIMIZERS", "lr_factor"]


def _per_run(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """[R] -> [R, 1, ..., 1] broadcastable against `like` [R, ...]."""
    return x.view(-1, *([1] * (like.ndim - 1)))


@OPTIMIZERS.register("ema")
class EmaMomentum:
    """v <- beta1 v + (1 - beta1) g; z <- z + lr v. Velocity starts at zero."""

    def __init__(self, z: torch.Tensor, *, lr, beta1: torch.Tensor, **_: object) -> None:
        self.beta1 = _per_run(beta1, z)
        self.v = torch.zeros_like(z)

    def step(self, z: torch.Tensor, grad: torch.Tensor, lr: torch.Tensor) -> torch.Tensor:
        """grad: gradient of the loss (to minimise) [R, ...]; lr [R]. Returns the new z."""
        self.v = self.beta1 * self.v - (1 - self.beta1) * grad
        return z + _per_run(lr, z) * self.v


@OPTIMIZERS.register("adam")
class Adam:
    """Adam with bias correction: z <- z - lr m_hat / (sqrt(v_hat) + eps)."""

    def __init__(
        self, z: torch.Tensor, *, lr, beta1: torch.Tensor, beta2: float, eps: float, **_: object
    ) -> None:
        self.beta1 = _per_run(beta1, z)
        self.beta2, self.eps = beta2, eps
        self.m = torch.zeros_like(z)
        self.v = torch.zeros_like(z)
        self.t = 0

    def step(self, z: torch.Tensor, grad: torch.Tensor, lr: torch.Tensor) -> torch.Tensor:
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * grad
        self.v = self.beta2 * self.v + (1 - self.beta2) * grad * grad
        m_hat = self.m / (1 - self.beta1**self.t)
        v_hat = self.v / (1 - self.beta2**self.t)
        return z - _per_run(lr, z) * m_hat / (v_hat.sqrt() + self.eps)
