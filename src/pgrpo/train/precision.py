"""Numeric precision of a run: what runs in bf16 and what stays fp32 (docs/trainer.md, Precision).

    precision = resolve_precision(config.model, device_type="cpu")
    with precision.autocast():
        ...  # sampling and every log-prob forward

Three settings (`model.precision`, `model.dtype`):
- fp32: everything in float32.
- bf16 (mixed, the default where the hardware runs bf16 natively): matmuls and convolutions of
  the network run in bfloat16 under `torch.autocast`; the weights (master copy), their gradients
  and the AdamW state stay float32; the logits are cast to float32 before every softmax,
  log-softmax, logsumexp and entropy; the loss, the advantages and the KL are float32.
- bf16 weights (`model.dtype=bfloat16`): the parameters themselves are bfloat16 (half the memory),
  so the optimizer state is bfloat16 too and updates below bf16's resolution are lost (relative
  2^-8); the logits are still cast to float32 before the softmax reductions.
`auto` picks bf16 autocast on CUDA devices with bf16 support and on CPUs with native bf16 dot
products (AVX-512 BF16 or AMX), else fp32; `Precision.reason` says what was found.
Sampling, the old/reference log-prob recompute and the update all run under the same setting.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

PRECISIONS = ("auto", "fp32", "bf16")


@dataclass(frozen=True)
class Precision:
    """compute: 'fp32' or 'bf16' (the matmuls); weights: 'fp32' or 'bf16' (the parameters and the
    optimizer state); device_type: 'cpu' or 'cuda'; reason: why (for the log)."""

    compute: str = "fp32"
    weights: str = "fp32"
    device_type: str = "cpu"
    reason: str = "fp32 asked for"

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        """bf16 autocast for fp32 weights with bf16 compute; nothing otherwise (bf16 weights
        already compute in bf16, fp32 in fp32)."""
        if self.compute == "bf16" and self.weights == "fp32":
            with torch.autocast(self.device_type, dtype=torch.bfloat16):
                yield
        else:
            yield

    @contextlib.contextmanager
    def keep_casts(self) -> Iterator[None]:
        """Keep autocast's bf16 copies of the weights from one `autocast()` block to the next
        until this block ends: one cast per weight instead of one per micro-batch (each cast of
        SmolLM2's 135M weights reads 0.54 GB and writes 0.27 GB). The weights must
        not change inside it: wrap the micro-batches of ONE optimizer step, not its `step()`.
        Autocast itself stays off here, so backward runs as it would outside. A no-op unless
        autocast is used (bf16 compute, fp32 weights)."""
        if self.compute == "bf16" and self.weights == "fp32":
            # an outer autocast block (disabled) holds the nesting level above 0, and autocast
            # empties its cast cache only when the outermost block exits
            with torch.autocast(self.device_type, enabled=False):
                yield
        else:
            yield

    @property
    def name(self) -> str:
        """'fp32', 'bf16-autocast' or 'bf16-weights' (the log's `precision` field)."""
        if self.compute == "fp32":
            return "fp32"
        return "bf16-weights" if self.weights == "bf16" else "bf16-autocast"

    def describe(self) -> str:
        if self.compute == "fp32":
            return f"fp32 ({self.reason})"
        if self.weights == "bf16":
            return f"bf16 weights and optimizer state ({self.reason})"
        return f"bf16 autocast, fp32 master weights and optimizer state ({self.reason})"


def bf16_support(device_type: str = "cpu") -> tuple[bool, str]:
    """(native bf16 matmuls?, what was found) for 'cpu' or 'cuda'."""
    if device_type == "cuda":
        ok = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        return ok, "CUDA bf16 support" if ok else "CUDA device without bf16"
    caps = getattr(torch.cpu, "get_capabilities", None)
    found = caps() if callable(caps) else {}
    native = [name for name in ("amx_bf16", "avx512_bf16") if found.get(name)]
    if native:
        return True, f"CPU with {' and '.join(n.upper() for n in native)}"
    return False, "CPU without AVX-512 BF16 or AMX (bf16 would be emulated, slower than fp32)"


def resolve_precision(precision: str, dtype: str, device_type: str = "cpu") -> Precision:
    """The setting for `model.precision` and `model.dtype` on this device."""
    if dtype == "bfloat16":
        return Precision("bf16", "bf16", device_type, "model.dtype=bfloat16")
    if precision == "fp32":
        return Precision("fp32", "fp32", device_type, "model.precision=fp32")
    if precision == "bf16":
        return Precision("bf16", "fp32", device_type, "model.precision=bf16")
    ok, found = bf16_support(device_type)
    return Precision("bf16" if ok else "fp32", "fp32", device_type, f"auto: {found}")
