"""Group structure of a flat batch of rollouts, and per-group reductions.

A batch holds N rollouts; rollouts of the same prompt form a group. Groups are either contiguous
and of equal size G (the fast path: a [N / G, G] view, reductions as a matrix-vector product, no
[N] index materialised) or given by arbitrary ids per rollout (ragged groups, any order: scatter
sums and gathers). Every reduction accepts an optional validity mask so that masked rewards (NaN
with `nan="mask"`) take no part in the statistics.

Speed notes (CPU, 1M rollouts): a reduction over a size-8 inner axis (`v.sum(1)`, `v.std(1)`) is
~50x slower in torch than `torch.mv(v, ones)`; torch's integer gathers are ~5-10x slower than
numpy's `take` on the same memory, so CPU gathers go through numpy (zero-copy views).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class Groups:
    """How N rollouts split into groups.

    index: [N] long, group number in 0..n_groups-1 of each rollout (built lazily on the equal-size
        path, where it is rarely needed).
    sizes: [n_groups] long, rollouts per group.
    group_size: G when the groups are contiguous and all of size G (enables the reshape path).
    """

    sizes: torch.Tensor
    n_groups: int
    group_size: int | None
    _index: torch.Tensor | None = field(default=None, repr=False, compare=False)

    @property
    def index(self) -> torch.Tensor:
        if self._index is None:
            assert self.group_size is not None
            idx = torch.arange(self.n_groups).repeat_interleave(self.group_size)
            object.__setattr__(self, "_index", idx)
        return self._index  # type: ignore[return-value]

    @property
    def n(self) -> int:
        return int(self.sizes.sum())


def make_groups(
    n: int,
    *,
    group_size: int | None = None,
    group_ids: Sequence[Any] | np.ndarray | torch.Tensor | None = None,
) -> Groups:
    """Group structure for `n` rollouts from a constant `group_size` or per-rollout `group_ids`.

    `group_ids` may be ints, strings (verl's `uid`) or any hashables (tuples, mixed kinds), one
    per rollout, in any order; ids are told apart by exact equality (1 and '1' are two groups).
    Group numbers follow the sorted order of the distinct ids (`_dense_ids`). Exactly one of the
    two must be given.
    """
    if (group_size is None) == (group_ids is None):
        raise ValueError(
            "give exactly one of group_size= (contiguous groups of equal size) or group_ids= "
            "(one id per rollout, for ragged or shuffled groups)"
        )
    if group_size is not None:
        if isinstance(group_size, bool) or not isinstance(group_size, int | np.integer):
            raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
        if group_size < 1:
            raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
        if n % group_size:
            raise ValueError(
                f"{n} rewards do not split into groups of {group_size}; pass group_ids= for ragged "
                f"groups or check that every prompt has group_size completions"
            )
        n_groups = n // group_size
        sizes = torch.full((n_groups,), int(group_size), dtype=torch.long)
        return Groups(sizes=sizes, n_groups=n_groups, group_size=int(group_size))
    index, sizes = _dense_ids(group_ids)
    if index.size != n:
        raise ValueError(f"group_ids has {index.size} entries but there are {n} rewards")
    # ids that happen to be contiguous and of equal size take the reshape fast path
    equal = bool(sizes.size) and sizes.min() == sizes.max()
    contiguous = equal and bool(np.all(index[1:] >= index[:-1]))
    return Groups(
        sizes=torch.from_numpy(sizes),
        n_groups=int(sizes.size),
        group_size=int(sizes[0]) if contiguous else None,
        _index=torch.from_numpy(index),
    )


def _dense_ids(group_ids: Any) -> tuple[np.ndarray, np.ndarray]:
    """Map ids to 0..n_groups-1 by exact equality: two ids share a group when Python's `==` and
    hash say they are equal (1 and '1' are two groups; a tuple is one id). Returns
    (index [N] int64, sizes [n_groups] int64).

    Numbers (numpy arrays and tensors, or sequences of only ints or only floats) and numpy
    string arrays are numbered in their sorted order: integers in a compact range by an O(N)
    bincount, others by `np.unique`. Other ids (strings in a sequence or an object array, as
    verl's uids; tuples; mixed kinds) are hashed and numbered in sorted order of their text
    str(id), distinct ids with one text (1 and '1') in order of first appearance: for strings
    their sorted order, and wherever the texts differ the numbers the text-sorting code gave
    before. (A numpy string array has lost any trailing NULs of its strings already.)"""
    typed = _typed_ids(group_ids)
    if not isinstance(typed, np.ndarray):
        return _hashed_ids(typed)
    arr = typed
    if arr.size and np.issubdtype(arr.dtype, np.integer):
        lo, hi = int(arr.min()), int(arr.max())
        if hi - lo <= 4 * arr.size + 1024:
            shifted = arr - lo if lo else arr
            counts = np.bincount(shifted, minlength=hi - lo + 1)
            present = counts > 0
            if present.all():  # already dense (e.g. verl's 0..B-1 uids): no remapping
                return shifted.astype(np.int64, copy=False), counts.astype(np.int64)
            index = np.cumsum(present, dtype=np.int64)[shifted] - 1
            return index, counts[present].astype(np.int64)
    _, inverse, counts = np.unique(arr, return_inverse=True, return_counts=True)
    return inverse.reshape(-1).astype(np.int64), counts.astype(np.int64)


_KINDS = ((int, np.integer), (float, np.floating))
"""Python/numpy scalar types whose values a numeric numpy array holds exactly, one kind at a time
(bools are ints, as in Python: True == 1). Not strings: numpy drops their trailing NULs."""


def _typed_ids(group_ids: Any) -> np.ndarray | list[Any]:
    """A 1-D array of the ids when that holds them exactly, else a list of them (for hashing).
    numpy would turn [1, '1'] into the strings ['1', '1'] and [(0, 1), ...] into a 2-D array, so
    a sequence becomes an array only when its items are all ints or all floats."""
    if isinstance(group_ids, torch.Tensor):
        return group_ids.detach().cpu().reshape(-1).numpy()
    if isinstance(group_ids, np.ndarray) and group_ids.dtype != object and group_ids.ndim == 1:
        return group_ids
    items = group_ids.tolist() if isinstance(group_ids, np.ndarray) else list(group_ids)
    if isinstance(group_ids, np.ndarray) and group_ids.ndim > 1:  # one row per rollout
        items = [tuple(row) if isinstance(row, list) else row for row in items]
    types = set(map(type, items))
    for kind in _KINDS:
        if types and all(issubclass(t, kind) for t in types):
            try:
                return np.asarray(items, dtype=np.int64 if kind[0] is int else None)
            except OverflowError:  # ints beyond int64: hash them
                return items
    return items


def _hashed_ids(items: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Dense ids of hashable `items` [N] by a dict, numbered by (str(id), first appearance)."""
    codes: dict[Any, int] = {}
    try:
        first = np.fromiter(
            (codes.setdefault(x, len(codes)) for x in items), dtype=np.int64, count=len(items)
        )
    except TypeError as exc:
        raise TypeError(
            f"group_ids must be hashable (ints, strings, tuples, ...): {exc}; pass one such id "
            "per rollout"
        ) from None
    keys = list(codes)
    order = sorted(range(len(keys)), key=lambda j: (str(keys[j]), j))
    rank = np.empty(len(keys), dtype=np.int64)
    rank[order] = np.arange(len(keys), dtype=np.int64)
    index = rank[first]
    return index, np.bincount(index, minlength=len(keys)).astype(np.int64)


def _take(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """table[index] for 1-D CPU tensors via numpy (much faster than torch's gather on CPU)."""
    if table.device.type == "cpu" and index.device.type == "cpu" and not table.requires_grad:
        return torch.from_numpy(table.numpy().take(index.numpy()))
    return table.index_select(0, index)


def group_sum(values: torch.Tensor, groups: Groups) -> torch.Tensor:
    """Per-group sum. values: [N] -> [n_groups]."""
    if groups.group_size is not None:
        ones = values.new_ones(groups.group_size)
        return torch.mv(values.view(groups.n_groups, groups.group_size), ones)
    out = torch.zeros(groups.n_groups, dtype=values.dtype, device=values.device)
    return out.scatter_add_(0, groups.index.to(values.device), values)  # ~4x index_add_ on CPU


@dataclass(frozen=True)
class GroupMoments:
    """Per-group mean, std, count ([n_groups]) and the centred values r - mu_group ([N], zero at
    masked positions). std is None when not requested."""

    mean: torch.Tensor
    std: torch.Tensor | None
    count: torch.Tensor
    centered: torch.Tensor


def group_moments(
    values: torch.Tensor,
    groups: Groups,
    *,
    unbiased: bool = True,
    mask: torch.Tensor | None = None,
    with_std: bool = True,
) -> GroupMoments:
    """Two-pass per-group mean and std, returning the centred values too (so estimators need no
    second gather). values: [N]; mask: [N] bool or None (all valid).
    A group with count <= 1 (unbiased) or 0 gets std 0 (and mean 0 when empty)."""
    if mask is None and groups.group_size is not None:
        g = groups.group_size
        v = values.view(groups.n_groups, g)
        ones = values.new_ones(g)
        count = values.new_full((groups.n_groups,), float(g))
        centered = v - v[:, :1]  # shift by a member: exact zeros on constant groups
        offset = torch.mv(centered, ones).div_(g)
        centered.sub_(offset.unsqueeze(1))
        mean = offset.add_(v[:, 0])
        std = None
        if with_std:
            denom = g - 1 if unbiased else g  # row norms: no [N] temporary for the squares
            std = torch.linalg.vector_norm(centered, dim=1).div_(math.sqrt(max(denom, 1)))
            if unbiased and g == 1:
                std.zero_()
        return GroupMoments(mean, std, count, centered.view(-1))
    # Ragged path. In-place ops on the two fresh gather buffers: fewer [N] allocations (each
    # costs page faults) and a peak of ~2 extra [N] tensors.
    index = groups.index
    ref = _group_member(values, groups, mask)
    centered = _take(ref, index).neg_().add_(values)  # values - ref: exact zeros on constants
    if mask is None:
        count = groups.sizes.to(values.dtype)
    else:
        w = mask.to(values.dtype)
        count = group_sum(w, groups)
        centered.mul_(w)
    offset = group_sum(centered, groups) / count.clamp(min=1)
    scratch = _take(offset, index)
    centered.sub_(scratch)
    if mask is not None:
        centered.mul_(w)
    mean = offset + ref
    std = None
    if with_std:
        ss = group_sum(torch.mul(centered, centered, out=scratch), groups)
        denom = (count - 1).clamp(min=1) if unbiased else count.clamp(min=1)
        ok = count > (1 if unbiased else 0)
        std = torch.where(ok, (ss / denom).sqrt(), torch.zeros_like(ss))
    return GroupMoments(mean, std, count, centered)


def _group_member(values: torch.Tensor, groups: Groups, mask: torch.Tensor | None) -> torch.Tensor:
    """Any one (valid) member's value per group, [n_groups]; 0 for a group with no valid member."""
    ref = torch.zeros(groups.n_groups, dtype=values.dtype, device=values.device)
    idx, vals = groups.index.to(values.device), values.detach()
    if mask is not None:
        idx, vals = idx[mask], vals[mask]
    if values.device.type == "cpu":
        ref.numpy()[idx.numpy()] = vals.numpy()  # duplicates: numpy keeps one, any one will do
    else:
        ref.index_put_((idx,), vals)
    return ref


def group_mean_std(
    values: torch.Tensor, groups: Groups, *, unbiased: bool, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-group mean, std and count of valid entries.

    values: [N]; mask: [N] bool or None (all valid). Returns mean, std, count: each [n_groups].
    A group with count <= 1 (unbiased) or 0 gets std 0 (and mean 0 when empty).
    """
    m = group_moments(values, groups, unbiased=unbiased, mask=mask)
    assert m.std is not None
    return m.mean, m.std, m.count


def broadcast(per_group: torch.Tensor, groups: Groups) -> torch.Tensor:
    """[n_groups] -> [N]: each rollout gets its group's value."""
    if groups.group_size is not None:
        return per_group.repeat_interleave(groups.group_size)
    return _take(per_group, groups.index)


def scale_by_group(
    values: torch.Tensor, per_group: torch.Tensor, groups: Groups, *, inplace: bool = False
) -> torch.Tensor:
    """values [N] * per_group [n_groups] broadcast to rollouts, without materialising the
    broadcast on the equal-size path. inplace=True overwrites `values` (pass a tensor you own)."""
    if groups.group_size is not None:
        v = values.view(groups.n_groups, groups.group_size)
        scale = per_group.unsqueeze(1)
        return (v.mul_(scale) if inplace else v * scale).view(-1)
    factor = _take(per_group, groups.index)
    return values.mul_(factor) if inplace else values * factor
