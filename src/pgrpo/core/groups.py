"""Group structure of a flat batch of rollouts, and per-group reductions.

A batch holds N rollouts; rollouts of the same prompt form a group. Groups are either contiguous
and of equal size G (the fast path: reshape to [N / G, G]) or given by arbitrary ids per rollout
(ragged groups, any order: scatter reductions). Every reduction accepts an optional validity mask
so that masked rewards (NaN with `nan="mask"`) take no part in the statistics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class Groups:
    """How N rollouts split into groups.

    index: [N] long, group number in 0..n_groups-1 of each rollout.
    sizes: [n_groups] long, rollouts per group.
    group_size: G when the groups are contiguous and all of size G (enables the reshape path).
    """

    index: torch.Tensor
    sizes: torch.Tensor
    n_groups: int
    group_size: int | None

    @property
    def n(self) -> int:
        return int(self.index.numel())


def make_groups(
    n: int,
    *,
    group_size: int | None = None,
    group_ids: Sequence[Any] | np.ndarray | torch.Tensor | None = None,
) -> Groups:
    """Group structure for `n` rollouts from a constant `group_size` or per-rollout `group_ids`.

    `group_ids` may be ints, strings (verl's `uid`) or any hashables; order is free. Exactly one of
    the two must be given.
    """
    if (group_size is None) == (group_ids is None):
        raise ValueError(
            "give exactly one of group_size= (contiguous groups of equal size) or group_ids= "
            "(one id per rollout, for ragged or shuffled groups)"
        )
    if group_size is not None:
        if not isinstance(group_size, int | np.integer) or group_size < 1:
            raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
        if n % group_size:
            raise ValueError(
                f"{n} rewards do not split into groups of {group_size}; pass group_ids= for ragged "
                f"groups or check that every prompt has group_size completions"
            )
        n_groups = n // group_size
        index = torch.arange(n_groups).repeat_interleave(group_size)
        sizes = torch.full((n_groups,), group_size, dtype=torch.long)
        return Groups(index=index, sizes=sizes, n_groups=n_groups, group_size=int(group_size))
    index = _dense_ids(group_ids)
    if index.numel() != n:
        raise ValueError(f"group_ids has {index.numel()} entries but there are {n} rewards")
    n_groups = int(index.max()) + 1 if n else 0
    sizes = torch.bincount(index, minlength=n_groups)
    return Groups(index=index, sizes=sizes, n_groups=n_groups, group_size=None)


def _dense_ids(group_ids: Any) -> torch.Tensor:
    """Map arbitrary ids to 0..n_groups-1 in order of first appearance-free `unique` order."""
    if isinstance(group_ids, torch.Tensor):
        _, inverse = torch.unique(group_ids.flatten(), return_inverse=True)
        return inverse.long()
    arr = np.asarray(group_ids)
    if arr.ndim != 1:
        arr = np.array(list(group_ids), dtype=object)
    if arr.dtype == object:
        arr = arr.astype(str)
    _, inverse = np.unique(arr, return_inverse=True)
    return torch.from_numpy(inverse.astype(np.int64))


def group_sum(values: torch.Tensor, groups: Groups) -> torch.Tensor:
    """Per-group sum. values: [N] -> [n_groups]."""
    if groups.group_size is not None:
        return values.view(groups.n_groups, groups.group_size).sum(1)
    out = torch.zeros(groups.n_groups, dtype=values.dtype)
    return out.index_add_(0, groups.index, values)


def group_mean_std(
    values: torch.Tensor, groups: Groups, *, unbiased: bool, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-group mean, std and count of valid entries.

    values: [N]; mask: [N] bool or None (all valid). Returns mean, std, count: each [n_groups].
    A group with count <= 1 (unbiased) or 0 gets std 0 (and mean 0 when empty).
    """
    if mask is None and groups.group_size is not None:
        v = values.view(groups.n_groups, groups.group_size)
        count = torch.full((groups.n_groups,), groups.group_size, dtype=values.dtype)
        if groups.group_size == 1:
            return v[:, 0], torch.zeros_like(count), count
        return v.mean(1), v.std(1, correction=1 if unbiased else 0), count
    w = torch.ones_like(values) if mask is None else mask.to(values.dtype)
    count = group_sum(w, groups)
    safe = count.clamp(min=1)
    mean = group_sum(values * w, groups) / safe
    dev = (values - mean[groups.index]) * w
    ss = group_sum(dev * dev, groups)
    denom = (count - 1).clamp(min=1) if unbiased else safe
    std = torch.where(count > (1 if unbiased else 0), (ss / denom).sqrt(), torch.zeros_like(ss))
    return mean, std, count


def broadcast(per_group: torch.Tensor, groups: Groups) -> torch.Tensor:
    """[n_groups] -> [N]: each rollout gets its group's value."""
    if groups.group_size is not None:
        return per_group.repeat_interleave(groups.group_size)
    return per_group[groups.index]
