"""A KV cache that is allocated once per rollout and written in place.

transformers' `DynamicCache` grows each layer's keys and values by `torch.cat` at every decode
step, copying the whole cache of every layer each token (121 `aten::cat` calls, 23 ms of a 118 ms
decode step of 32 SmolLM2-135M rows under `torch.profiler`; docs/trainer.md, "The decode loop"). A
`PreallocatedLayer` holds one [N, H, capacity, D] buffer per keys and values, writes the new
states into it and hands attention a view of the filled part, so the attention sees the same
values (and the same sequence length) as with `DynamicCache`, without the copies.

    cache = preallocate(cache_or_none, config, capacity=prompt_len + max_new_tokens)
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


def _storage_dtype(states: torch.Tensor, cached: torch.Tensor | None) -> torch.dtype:
    """The dtype the cache keeps: under autocast, the autocast dtype for float32 states (the
    attention's matmuls cast its inputs to it anyway, so keeping the cast values changes no
    number; without this, autocast re-casts the whole cache at every decode step: 9 of 102 CPU
    ms per decode step of 32 SmolLM2 rows, bench/decode_loop.py); otherwise the states' dtype."""
    device = states.device.type
    dtype = states.dtype
    if cached is not None:
        dtype = torch.promote_types(cached.dtype, dtype)
    if dtype == torch.float32 and torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return dtype


class PreallocatedLayer(DynamicLayer):
    """A `DynamicLayer` whose keys / values [N, H, L, D] are views of a buffer [N, H, capacity, D]
    written in place. A batch or head count that changes, or more than `capacity` tokens,
    reallocates (correct, only slower)."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self._buffers: tuple[torch.Tensor, torch.Tensor] | None = None

    @classmethod
    def from_layer(cls, layer: DynamicLayer, capacity: int) -> PreallocatedLayer:
        """A preallocated copy of `layer`'s cached keys and values (room for `capacity` tokens)."""
        new = cls(capacity)
        if layer.is_initialized and layer.get_seq_length() > 0:
            new.update(layer.keys, layer.values)
        return new

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """key_states, value_states [N, H, q, D] -> all keys, values so far [N, H, L + q, D]."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        length, q = self.get_seq_length(), key_states.shape[-2]
        if not self._fits(key_states, value_states, length + q):
            self._allocate(key_states, value_states, length + q)
        keys, values = self._buffers
        keys[:, :, length : length + q].copy_(key_states)
        values[:, :, length : length + q].copy_(value_states)
        self.keys, self.values = keys[:, :, : length + q], values[:, :, : length + q]
        return self.keys, self.values

    def _fits(self, key_states: torch.Tensor, value_states: torch.Tensor, needed: int) -> bool:
        if self._buffers is None:
            return False
        keys, values = self._buffers
        return (
            keys.shape[-2] >= needed
            and keys.shape[:2] == key_states.shape[:2]
            and keys.dtype == _storage_dtype(key_states, keys)
            and values.dtype == _storage_dtype(value_states, values)
        )

    def _allocate(self, key_states: torch.Tensor, value_states: torch.Tensor, needed: int) -> None:
        """New buffers for max(capacity, needed) tokens, holding the keys / values cached so far."""
        length = self.get_seq_length()
        size = max(self.capacity, needed)
        old = (self.keys, self.values) if length else None
        buffers = []
        for i, states in enumerate((key_states, value_states)):
            dtype = _storage_dtype(states, None if old is None else old[i])
            n, h, _, d = states.shape
            buf = states.new_empty((n, h, size, d), dtype=dtype)
            if old is not None:
                buf[:, :, :length].copy_(old[i])
            buffers.append(buf)
        self._buffers = (buffers[0], buffers[1])

    def batch_repeat_interleave(self, repeats: int) -> None:
        super().batch_repeat_interleave(repeats)
        self._buffers = None  # the next update copies the new keys into fresh buffers

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        super().batch_select_indices(indices)
        self._buffers = None

    def crop(self, tokens_to_remove: int) -> None:
        super().crop(tokens_to_remove)  # a shorter view of the same buffers: still writes in place

    def reset(self) -> None:
        super().reset()
        self._buffers = None


def preallocate(cache: DynamicCache | None, config: object, capacity: int) -> DynamicCache:
    """`cache` (or a new `DynamicCache` for `config`) with every plain full-attention layer
    replaced by a `PreallocatedLayer` of `capacity` tokens holding the same keys and values.
    Other layer kinds (sliding windows, linear attention, ...) are kept as they are; a cache whose
    layers are created lazily (a config without layer types) is returned unchanged."""
    if cache is None:
        cache = DynamicCache(config=config)
    for i, layer in enumerate(cache.layers):
        if type(layer) is DynamicLayer:
            cache.layers[i] = PreallocatedLayer.from_layer(layer, capacity)
    return cache
