"""Group statistics: how many groups carry a learning signal, and what i.i.d. sampling predicts.

A group whose rewards are all equal has a centred advantage of exactly zero ("gradient
starvation", arXiv 2605.07689). For binary rewards the i.i.d. Bernoulli prediction of that rate
at success probability p is

    f_G(p) = p^G + (1 - p)^G                       (all pass + all fail)

f_G is strictly convex, so over prompts of varying difficulty p(x) the true rate
D_true = E_x f_G(p(x)) >= f_G(E_x p(x)) = D_iid (Jensen), with gap ~ f_G''(pbar) Var(p) / 2,
f_G''(p) = G (G - 1) (p^(G-2) + (1 - p)^(G-2)). See docs/core.md, "Group statistics".

- `group_stats(rewards, group_size= | group_ids=, reward_range=)`: per-step metrics with stable
  names (`frac_reward_zero_std` as TRL, `degeneracy/*`, `reward_within_group_std`) and per-group
  arrays.
- `iid_degeneracy(p, G)`: f_G(p); `iid_all_equal(values, sizes)`: its form for any rewards,
  sum_v q_v^G over the pooled distribution (f_G(p) for 0/1 rewards).
- `jensen_estimate(success_rates, G)`: D_true from held-out per-prompt success rates, and the
  gap decomposition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pgrpo.core.groups import group_mean_std, make_groups
from pgrpo.core.rewardinput import as_reward_tensor, check_finite
from pgrpo.core.rewardrange import checked_reward_range
from pgrpo.core.stats import iid_degeneracy as iid_degeneracy  # re-exported: torch-free home
from pgrpo.core.stats import pass_at_k


@dataclass(frozen=True)
class GroupStats:
    """Statistics of one batch of grouped rewards.

    metrics: stable names (see `group_stats`). Per-group arrays, numpy, [n_groups], in the group
    order of `make_groups` (contiguous order for group_size=, sorted unique ids for group_ids=):
    sizes (valid rewards per group), mean, std (Bessel, 0 for a single reward), zero_std,
    all_pass, all_fail (bool: zero-std at the top / the bottom of the reward range, `group_stats`).
    """

    metrics: dict[str, float]
    sizes: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    zero_std: np.ndarray
    all_pass: np.ndarray
    all_fail: np.ndarray


def group_stats(
    rewards: Any,
    *,
    group_size: int | None = None,
    group_ids: Sequence[Any] | np.ndarray | torch.Tensor | None = None,
    atol: float = 1e-6,
    nan: str = "error",
    reward_range: tuple[float, float] | None = None,
) -> GroupStats:
    """Degeneracy and spread of grouped rewards [N] (numpy or torch).

    Metrics:
    - `reward`, `reward_std`: batch mean and Bessel std (TRL's names).
    - `frac_reward_zero_std`: fraction of groups whose (Bessel) reward std is <= atol: TRL's
      metric (TRL uses torch.isclose, atol 1e-8), with a tolerance for graded float rewards. A
      group with a single valid reward counts as zero-std (it carries no group-relative signal).
    - `degeneracy/all_pass`, `degeneracy/all_fail`: fraction of groups that are zero-std with mean
      within atol of the top / the bottom of `reward_range` (lo, hi), the bounds of one reward
      (the trainer passes the task's); without a range, of 1 / of 0, the 0/1 reading (rewards of
      -1/+1 or 0/10 then need the range). A homogeneous group inside the range is in neither.
    - `reward_within_group_std`: mean over groups of the within-group std.
    - `degeneracy/iid_prediction`: the chance that a group of G rewards drawn i.i.d. from the
      batch's pooled rewards is all equal, sum_v q_v^G over the distinct values v (within atol)
      with pooled frequencies q_v: for 0/1 rewards exactly f_G(pbar) = pbar^G + (1 - pbar)^G,
      and for graded or signed rewards the same Jensen lower bound (x^G is convex), where
      f_G(pbar) was no prediction at all (rewards 0, 1/3, 2/3, 1 in every group: f_4 = 0.125
      against 0.0156, an 'excess' of -0.125). With ragged groups the average over groups of
      their own G (a group with no valid reward counts 1, as it counts in frac_reward_zero_std).
    - `degeneracy/excess`: frac_reward_zero_std - iid_prediction (> 0: prompts differ in
      difficulty, Jensen; a plug-in from the same batch, so noisy: use `jensen_estimate` on held-out
      success rates for the real figure).
    - `num_groups`, `group_size/mean`.
    nan: "error" (default) or "mask" (leave non-finite rewards out; count them in
    `degeneracy/nonfinite_rewards`).
    """
    if atol < 0:
        raise ValueError(f"atol must be >= 0, got {atol}")
    lo, hi = (0.0, 1.0) if reward_range is None else checked_reward_range(reward_range)
    r, _ = as_reward_tensor(rewards)
    r = r.double()
    groups = make_groups(r.numel(), group_size=group_size, group_ids=group_ids)
    if groups.n_groups == 0:
        raise ValueError("group_stats needs at least one reward; got an empty batch")
    valid, _ = check_finite(r, nan)
    r_clean = r if valid is None else torch.where(valid, r, torch.zeros_like(r))
    mean, std, count = group_mean_std(r_clean, groups, unbiased=True, mask=valid)
    zero = std <= atol
    all_pass = zero & ((mean - hi).abs() <= atol) & (count > 0)
    all_fail = zero & ((mean - lo).abs() <= atol) & (count > 0)
    pool = r_clean if valid is None else r[valid]
    pbar = float(pool.mean()) if pool.numel() else float("nan")
    sizes = count.round().long()
    # Over the same groups as frac_zero: a group with no valid reward (nan="mask") is zero-std
    # there, and certain to be under i.i.d. sampling too (size 1: sum_v q_v = 1).
    iid = iid_all_equal(pool.numpy(), np.maximum(sizes.numpy(), 1), atol)
    frac_zero = float(zero.double().mean())
    metrics = {
        "reward": pbar,
        "reward_std": float(pool.std()) if pool.numel() > 1 else 0.0,
        "frac_reward_zero_std": frac_zero,
        "degeneracy/all_pass": float(all_pass.double().mean()),
        "degeneracy/all_fail": float(all_fail.double().mean()),
        "reward_within_group_std": float(std.mean()),
        "degeneracy/iid_prediction": iid,
        "degeneracy/excess": frac_zero - iid,
        "degeneracy/nonfinite_rewards": float(0 if valid is None else int((~valid).sum())),
        "num_groups": float(groups.n_groups),
        "group_size/mean": float(count.mean()),
    }
    return GroupStats(
        metrics=metrics,
        sizes=sizes.numpy(),
        mean=mean.numpy(),
        std=std.numpy(),
        zero_std=zero.numpy(),
        all_pass=all_pass.numpy(),
        all_fail=all_fail.numpy(),
    )


def iid_all_equal(values: np.ndarray, sizes: np.ndarray, atol: float = 0.0) -> float:
    """Mean over groups of sum_v q_v^G_g: the chance that G_g rewards drawn i.i.d. from the
    pooled `values` [N] are all equal (values within `atol` of a common grid point count as one);
    sizes: [n_groups] (>= 1). For 0/1 values exactly the mean of f_G(pbar). NaN without values."""
    if values.size == 0:
        return float("nan")
    keys = np.round(values / atol) if atol > 0 else values
    q = np.unique(keys, return_counts=True)[1] / values.size  # [distinct values]
    by_size = {g: float(np.sum(q ** float(g))) for g in np.unique(sizes)}
    return float(np.mean([by_size[g] for g in sizes]))


@dataclass(frozen=True)
class JensenEstimate:
    """Degeneracy predicted from per-prompt success rates p_x [P] at group size G.

    d_true = mean_x f_G(p_x) (split into all_pass = mean p^G and all_fail = mean (1-p)^G);
    d_iid = f_G(pbar); gap = d_true - d_iid >= 0; gap_approx = f_G''(pbar) Var(p) / 2 (second
    order; exact for G = 2).
    """

    d_true: float
    d_iid: float
    gap: float
    gap_approx: float
    metrics: dict[str, float]


def jensen_estimate(
    success_rates: Any, group_size: int, *, num_samples: Any = None
) -> JensenEstimate:
    """D_true from held-out per-prompt success rates (docs/core.md, "Group statistics").

    success_rates: [P] in [0, 1], each prompt's success rate estimated on samples *not* used for
    training (plugging in K/G from the training group itself is biased). group_size: G.
    num_samples: None, or the number of held-out samples n per prompt ([P] or scalar, n >= G): then
    p_x = c_x / n_x is read as counts and p^G, (1-p)^G are replaced by their unbiased estimates
    C(c, G) / C(n, G) and C(n - c, G) / C(n, G) (drawing G of the n samples without replacement;
    plug-in p^G overstates degeneracy at small n). Var(p) is then the plug-in variance.
    """
    p = np.asarray(success_rates, dtype=np.float64).reshape(-1)
    if p.size == 0:
        raise ValueError("success_rates is empty: pass one held-out success rate per prompt")
    if not isinstance(group_size, int | np.integer) or group_size < 1:
        raise ValueError(f"group_size must be an integer >= 1, got {group_size!r}")
    g = int(group_size)
    if np.any(~np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError("success_rates must be in [0, 1] (fraction of held-out samples correct)")
    if num_samples is None:
        all_pass, all_fail = p**g, (1.0 - p) ** g
    else:
        n = np.broadcast_to(np.asarray(num_samples), p.shape)
        c = np.round(p * n)
        if np.any(np.abs(c - p * n) > 1e-6 * np.maximum(n, 1)):
            raise ValueError(
                "with num_samples=, success_rates must be counts / num_samples (c / n); pass "
                "num_samples=None to use the plug-in rates instead"
            )
        if np.any(n < g):
            raise ValueError(
                f"num_samples must be >= group_size={g} for the unbiased estimate; pass "
                "num_samples=None to use the plug-in rates"
            )
        all_fail = 1.0 - pass_at_k(n, c, g)
        all_pass = 1.0 - pass_at_k(n, n - c, g)
    pbar, var = float(p.mean()), float(p.var())
    d_true = float(np.mean(all_pass + all_fail))
    d_iid = float(iid_degeneracy(pbar, g))
    curvature = g * (g - 1) * (pbar ** (g - 2) + (1 - pbar) ** (g - 2)) if g >= 2 else 0.0
    gap_approx = float(curvature * var / 2)
    metrics = {
        "jensen/d_true": d_true,
        "jensen/all_pass": float(np.mean(all_pass)),
        "jensen/all_fail": float(np.mean(all_fail)),
        "jensen/d_iid": d_iid,
        "jensen/gap": d_true - d_iid,
        "jensen/gap_approx": gap_approx,
        "jensen/mean_p": pbar,
        "jensen/var_p": var,
        "jensen/num_prompts": float(p.size),
    }
    return JensenEstimate(d_true, d_iid, d_true - d_iid, gap_approx, metrics)
