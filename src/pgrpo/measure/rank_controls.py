"""Null distributions for the effective rank of M = diag(A) S (`pgrpo gradrank`): many control
draws of the advantages A on the same score matrix S, summarised by their mean, 5-95% interval
and the share at or below the estimator's value (an empirical one-sided p for "the estimator's
matrix is more concentrated than the control's").

Controls, per estimator with advantages A_e (rewards in contiguous groups of G):

- `random`: A ~ N(0, 1) i.i.d. on every row (no zero-sum constraint, no degenerate rows);
- `support`: A ~ N(0, 1) on the rows where A_e is non-zero, 0 elsewhere (GRPO zeroes every row of
  a group whose rewards are all equal, which alone concentrates the spectrum on fewer rows);
- `permutation`: A_e's own values shuffled within each group (the same magnitudes, including the
  one large advantage of a lone correct rollout, on rollouts chosen at random).

S is fixed, so each draw is cheap: with S^T = Q R (Q [D, N] orthonormal, R [N, N]) the singular
values of diag(a) S are those of diag(a) R^T, an N x N matrix (`score_core`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from pgrpo.measure.rank import effective_ranks

CONTROLS = ("random", "support", "permutation")
SUMMARISED = (
    "rank/entropy",
    "rank/participation_ratio",
    "rank/stable",
    "rank/numerical",
    "rank/energy_90",
    "rank/energy_95",
    "rank/energy_99",
)


def score_core(scores: torch.Tensor) -> torch.Tensor:
    """[N, min(N, D)] float64 with the same row Gram matrix as scores [N, D] (so every row subset
    and every row scaling has the same singular values): R^T of S^T = Q R when D > N, else S."""
    s = scores.detach().to(torch.float64)
    if s.shape[1] <= s.shape[0]:
        return s
    return torch.linalg.qr(s.T, mode="r").R.T


def permuted_draws(
    adv: torch.Tensor, group_size: int, n: int, gen: torch.Generator
) -> torch.Tensor:
    """[n, N]: adv [N] (contiguous groups of group_size) shuffled within each group, n times."""
    groups = adv.to(torch.float64).reshape(-1, group_size)  # [B, G]
    order = torch.rand(n, *groups.shape, generator=gen).argsort(-1)  # [n, B, G]
    return torch.gather(groups.expand(n, -1, -1), 2, order).reshape(n, adv.numel())


def summarise(values: dict[str, list[float]], estimator: dict[str, float]) -> dict[str, dict]:
    """Per metric: mean, p05, p95 of the draws and share_at_or_below the estimator's value."""
    out = {}
    for key, vals in values.items():
        v = np.asarray(vals)
        out[key] = {
            "mean": float(v.mean()),
            "p05": float(np.percentile(v, 5)),
            "p95": float(np.percentile(v, 95)),
            "share_at_or_below": float(np.mean(v <= estimator[key] + 1e-9)),
        }
    return out


def control_ranks(
    core: torch.Tensor, draws: torch.Tensor, ranks: Callable = effective_ranks
) -> dict[str, list[float]]:
    """The SUMMARISED metrics of diag(a) core for each draw a: [n, N] -> metric -> [n] values."""
    values: dict[str, list[float]] = {k: [] for k in SUMMARISED}
    for a in draws:
        metrics = ranks(a[:, None] * core).metrics
        for key in SUMMARISED:
            values[key].append(metrics[key])
    return values


def rank_controls(
    core: torch.Tensor,
    advantages: dict[str, torch.Tensor],
    ranks: dict[str, dict[str, float]],
    group_size: int,
    n_controls: int,
    seed: int,
) -> dict[str, dict[str, dict]]:
    """estimator -> control kind -> metric -> summary, from n_controls seeded draws each (the
    `random` draws are shared by every estimator; `support` is the same draws, masked to the
    estimator's non-zero rows)."""
    gen = torch.Generator().manual_seed(seed)
    shared = torch.randn(n_controls, core.shape[0], generator=gen, dtype=torch.float64)
    random_values = control_ranks(core, shared)
    out: dict[str, dict[str, dict]] = {}
    for name, adv in advantages.items():
        mask = adv.abs() > 1e-12
        support = random_values if bool(mask.all()) else control_ranks(core, shared * mask)
        perm = control_ranks(core, permuted_draws(adv, group_size, n_controls, gen))
        out[name] = {
            kind: summarise(vals, ranks[name])
            for kind, vals in zip(CONTROLS, (random_values, support, perm), strict=True)
        }
    return out
