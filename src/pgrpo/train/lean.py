"""Decoder layers that keep fewer activations for backward, with the same values and gradients.

Two pieces of a Llama-style layer keep more for backward than their gradient needs:
- **RMSNorm** (`weight * x * rsqrt(mean(x^2) + eps)` in fp32) keeps x, rsqrt(...) and the
  normalised x (a second fp32 copy of the hidden state, for the weight's gradient). `_RMSNorm`
  keeps x and rsqrt(...) and recomputes x * rsqrt(...) in backward (one elementwise product).
- **SwiGLU** (`down(silu(gate(x)) * up(x))`) keeps gate(x), silu(gate(x)), up(x) and the product
  (four [tokens, intermediate] tensors). `_SwiGLU` keeps gate(x) and up(x) and recomputes silu and
  the product in backward (two elementwise operations; the product is what down's own backward
  keeps, so it stays alive either way).
On SmolLM2 under bf16 autocast this is ~10.7 of ~29.5 KiB a token a layer kept for backward
(estimated from one layer's saved tensors); measured on the 8x4x32 step in fp32: 1674 -> 1285
MiB kept for backward (docs/trainer.md, "Leaner decoder layers"). Backward runs the same
elementwise kernels autograd would, in the same order, so forward values and gradients are
bit-identical.

`lean_layers(backbone)` swaps in these forwards for the modules of `backbone` whose class passes a
probe: on random inputs (in the dtype and autocast state of the call), its own forward and the lean
one must give the same output and the same gradients, bit for bit. A class that fails (another
formula, e.g. Gemma's `(1 + weight)` norm or a GELU MLP) keeps its own forward: nothing is ever
approximated. Each class is probed once per (dtype, autocast) setting.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import torch
import torch.nn.functional as F


class _RMSNorm(torch.autograd.Function):
    """weight * (x * rsqrt(mean(x^2, -1) + eps)), x fp32: keeps x and rsqrt(...) only.

    x comes in twice (`apply(x, x, weight, eps)`) and backward returns its two gradient terms
    separately, the one through `x * rstd` first and the one through `x^2` second, so that the
    engine adds them to x's other gradients (the residual's) in the order it adds autograd's
    own: a single summed term would round differently."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, x_again: torch.Tensor, weight: torch.Tensor, eps: float):  # noqa: ANN205
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, rstd, weight)
        return weight * (x * rstd)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # noqa: ANN205
        x, rstd, weight = ctx.saved_tensors
        # autograd's formulas, in its order: mul (weight, x_hat), mul (x, rstd), rsqrt, mean, pow
        grad_weight = None
        if ctx.needs_input_grad[2]:
            grad_weight = (grad * (x * rstd)).sum_to_size(weight.shape)
        grad_hat = grad * weight
        grad_rstd = (grad_hat * x).sum_to_size(rstd.shape)
        grad_var = -0.5 * grad_rstd * rstd.pow(3)
        grad_sq = grad_var.expand(x.shape) / x.shape[-1]
        return grad_hat * rstd, grad_sq * (2.0 * x), grad_weight, None


class _SwiGLU(torch.autograd.Function):
    """silu(gate) * up: keeps gate and up only."""

    @staticmethod
    def forward(ctx, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(gate, up)
        return F.silu(gate) * up

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # noqa: ANN205
        gate, up = ctx.saved_tensors
        grad_up = grad * F.silu(gate) if ctx.needs_input_grad[1] else None
        grad_gate = None
        if ctx.needs_input_grad[0]:
            grad_gate = torch.ops.aten.silu_backward(grad * up, gate)
        return grad_gate, grad_up


def _norm_forward(module: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    if x.dtype != torch.float32:  # the fp32 residual stream only; others run as written
        return type(module).forward(module, x)
    return _RMSNorm.apply(x, x, module.weight, module.variance_epsilon)


def _mlp_forward(module: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    return module.down_proj(_SwiGLU.apply(module.gate_proj(x), module.up_proj(x)))


def _kind(module: torch.nn.Module):  # noqa: ANN202
    """The lean forward that may replace `module`'s (by its parts; the probe decides), or None."""
    if all(hasattr(module, a) for a in ("gate_proj", "up_proj", "down_proj", "act_fn")):
        return _mlp_forward
    if isinstance(getattr(module, "weight", None), torch.Tensor) and isinstance(
        getattr(module, "variance_epsilon", None), float
    ):
        return _norm_forward
    return None


def _probe_input(module: torch.nn.Module, lean) -> torch.Tensor:  # noqa: ANN001
    width = module.gate_proj.in_features if lean is _mlp_forward else module.weight.shape[-1]
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, width, generator=gen, dtype=torch.float32) * 3
    x[0, 0] = 0.0  # a row of zeros: rsqrt(eps)
    return x.requires_grad_(True)


def _same_bits(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(-1), b.view(-1))


@functools.cache
def _passes(cls: type, lean, setting: tuple) -> bool:  # noqa: ANN001
    """Whether the lean forward matches cls's own, bit for bit, in this autocast setting. The
    cache key is the class; the probe runs on the first module of that class seen."""
    module = _PROBE_MODULE[cls]
    params = [p for p in module.parameters() if p.requires_grad]
    outs = []
    for forward in (type(module).forward, lean):
        x = _probe_input(module, lean)
        # identity hooks on top of the stack: a caller's saved-tensor hooks never see the probe
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(_same, _same):
            y = forward(module, x)
            upstream = torch.randn(y.shape, generator=torch.Generator().manual_seed(1))
            grads = torch.autograd.grad(y, [x, *params], upstream.to(y.dtype), allow_unused=True)
        outs.append((y.detach(), grads))
    (y0, g0), (y1, g1) = outs
    return _same_bits(y0, y1) and all(_same_bits(a, b) for a, b in zip(g0, g1, strict=True))


_PROBE_MODULE: dict[type, torch.nn.Module] = {}


def _same(t: torch.Tensor) -> torch.Tensor:
    return t


def _setting() -> tuple:
    return (
        torch.is_autocast_enabled("cpu"),
        torch.get_autocast_dtype("cpu"),
        torch.is_autocast_enabled("cuda") if torch.cuda.is_available() else False,
    )


@contextlib.contextmanager
def lean_layers(backbone: torch.nn.Module) -> Iterator[int]:
    """Inside the block the RMSNorm and SwiGLU modules of `backbone` whose class passes the probe
    run the lean forwards above; yields how many modules were swapped. Only worth it with
    gradients on (without, nothing is kept either way)."""
    swapped = []
    setting = _setting()
    for module in backbone.modules():
        lean = _kind(module)
        if lean is None or "forward" in vars(module):  # already swapped (e.g. checkpointing)
            continue
        _PROBE_MODULE.setdefault(type(module), module)
        if _passes(type(module), lean, setting):
            module.forward = functools.partial(lean, module)
            swapped.append(module)
    try:
        yield len(swapped)
    finally:
        for module in swapped:
            del module.forward
