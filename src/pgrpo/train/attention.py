"""Attention for the update's passes on a CPU: grouped-query attention in plain matmuls.

    from pgrpo.train.attention import use_attention
    use_attention(model, "auto")   # pgrpo's CPU kernel where it applies, sdpa elsewhere

On a CPU, torch's fused attention (`scaled_dot_product_attention`, the flash kernel for CPU) is
slow in backward at the shapes of a GRPO update: 18 ms a layer for 32 rows x 32 completion
tokens against 82 keys, where the same work in batched matmuls takes a quarter of that
(docs/trainer.md, "Attention"). With a padding mask, transformers also repeats
every key / value head to the query heads (`repeat_kv`) before calling it, and the kernel keeps
the repeated copies for backward. `grouped_attention` works on the grouped heads directly and
keeps only q, k, v and each row's max and log-sum; backward recomputes the probabilities.

It is registered with transformers as the attention implementation "pgrpo" (with sdpa's mask
builder), and it hands everything it does not cover to transformers' sdpa unchanged: a single
query position (the decode loop: sdpa's grouped decode path is faster there), a device other
than the CPU, dropout, soft-capping, sinks or a position bias.
"""

from __future__ import annotations

import math

import torch

NAME = "pgrpo"
ATTENTIONS = ("auto", NAME, "sdpa", "eager")
CUTOFF = 40.0


class _GroupedAttention(torch.autograd.Function):
    """q [B, H, Lq, D], k, v [B, Hk, L, D] (H = r Hk; query head h reads key head h // r),
    allowed: bool [B or 1, 1, Lq, L] or None, scale -> [B, H, Lq, D] in q's dtype.

    Scores, softmax and both products run in float32; a query row that may attend to nothing
    gets the uniform average (as an additive mask of the dtype's minimum does), never NaN."""

    @staticmethod
    def forward(ctx, q, k, v, allowed, scale):
        with _no_autocast(q):
            return _GroupedAttention._forward(ctx, q, k, v, allowed, scale)

    @staticmethod
    def _forward(ctx, q, k, v, allowed, scale):
        qf, kf, vf = _grouped(q, k.shape[1]), k.float(), v.float()
        p, top, log_total = _probabilities(qf, kf, allowed, scale)
        out = torch.matmul(p, vf)  # [B, Hk, r Lq, D]
        ctx.save_for_backward(q, k, v, allowed, top, log_total)
        ctx.scale = scale
        return out.view(q.shape).to(q.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        with _no_autocast(grad_out):
            return _GroupedAttention._backward(ctx, grad_out)

    @staticmethod
    def _backward(ctx, grad_out):
        q, k, v, allowed, top, log_total = ctx.saved_tensors
        qf, kf, vf = _grouped(q, k.shape[1]), k.float(), v.float()
        scores = _scores(qf, kf, allowed, ctx.scale)
        p = _exp_shifted(scores, top, log_total)  # the forward's probabilities, rebuilt
        g = _grouped(grad_out, k.shape[1])
        grad_v = torch.matmul(p.transpose(-1, -2), g)
        dp = torch.matmul(g, vf.transpose(-1, -2))
        ds = p.mul_(dp.sub_((p * dp).sum(-1, keepdim=True))).mul_(ctx.scale)
        grad_q = torch.matmul(ds, kf).view(q.shape)
        grad_k = torch.matmul(ds.transpose(-1, -2), qf)
        return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype), None, None


def _no_autocast(x: torch.Tensor) -> torch.autocast:
    """Everything inside runs in float32 as written (autocast would turn the matmuls to bf16)."""
    return torch.autocast(device_type=x.device.type, enabled=False)


def _grouped(x: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """[B, H, Lq, D] -> float32 [B, Hk, (H / Hk) Lq, D]: query heads next to their key head."""
    b, h, lq, d = x.shape
    return x.float().reshape(b, kv_heads, (h // kv_heads) * lq, d)


def _scores(qf, kf, allowed, scale) -> torch.Tensor:
    """float32 [B, Hk, r Lq, L]: q k^T * scale, the float32 minimum where not allowed."""
    scores = torch.matmul(qf, kf.transpose(-1, -2)).mul_(scale)
    if allowed is not None:
        b, hk, rows, keys = scores.shape
        lq = allowed.shape[-2]
        view = scores.view(b, hk, rows // lq, lq, keys)
        view.masked_fill_(~allowed[:, :, None], torch.finfo(torch.float32).min)
    return scores


def _exp_shifted(scores: torch.Tensor, *shifts: torch.Tensor) -> torch.Tensor:
    """exp(scores - sum(shifts)) in place, exactly 0 below exp(-CUTOFF) (4e-18: below float32's
    resolution of the row's sum, which is >= 1, by ten orders of magnitude). Tiny probabilities
    would make the matmuls after it produce denormals (10x their time here), and torch's exp
    takes a slow path for arguments far below the cutoff (masked scores: 5x its time)."""
    for shift in shifts:
        scores.sub_(shift)
    p = scores.clamp_(min=-CUTOFF).exp_()
    return torch.nn.functional.threshold_(p, math.exp(-CUTOFF) * 1.5, 0.0)


def _probabilities(qf, kf, allowed, scale) -> tuple[torch.Tensor, ...]:
    """softmax of `_scores` over the keys, with its row max and log of the shifted sum
    [B, Hk, r Lq, 1] (kept apart: in a row with nothing allowed the max is the float32 minimum,
    which would absorb the log of the sum)."""
    scores = _scores(qf, kf, allowed, scale)
    top = scores.amax(-1, keepdim=True)
    p = _exp_shifted(scores, top)
    total = p.sum(-1, keepdim=True)
    return p.div_(total), top, total.log_()


def grouped_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    allowed: torch.Tensor | None,
    scale: float | None = None,
) -> torch.Tensor:
    """Attention of q [B, H, Lq, D] over k, v [B, Hk, L, D] -> [B, H, Lq, D].

    allowed: bool, broadcastable to [B, 1, Lq, L] (True: may attend), or None for none masked.
    scale: 1 / sqrt(D) if None. Equal to `scaled_dot_product_attention` on k, v repeated to H
    heads, up to float32 rounding (tests/test_train_attention.py)."""
    if allowed is not None:
        allowed = allowed.expand(q.shape[0], 1, q.shape[2], k.shape[2])
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    return _GroupedAttention.apply(q, k, v, allowed, scale)


def causal(lq: int, keys: int) -> torch.Tensor:
    """bool [1, 1, Lq, L]: query i (the last Lq of L positions) may see keys j <= i + L - Lq."""
    return torch.ones(lq, keys, dtype=torch.bool).tril(keys - lq)[None, None]


def attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' attention interface: query [B, H, Lq, D], key, value [B, Hk, L, D] ->
    ([B, Lq, H, D], None). `grouped_attention` where it applies, else transformers' sdpa."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    covered = (
        query.device.type == "cpu"
        and query.shape[2] > 1
        and not dropout
        and kwargs.get("softcap") is None
        and kwargs.get("position_bias") is None
        and kwargs.get("s_aux") is None
        and kwargs.get("sinks") is None
        and key.shape[-1] == value.shape[-1] == query.shape[-1]
        and query.shape[1] % key.shape[1] == 0
        and (attention_mask is None or attention_mask.dtype == torch.bool)
    )
    if not covered:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs
        )
    allowed = attention_mask
    if is_causal is None:
        is_causal = getattr(module, "is_causal", True)
    if allowed is None and is_causal:
        allowed = causal(query.shape[2], key.shape[2])
    if allowed is not None:
        allowed = allowed[..., : key.shape[2]]
    device = query.device.type
    if torch.is_autocast_enabled(device):  # what autocast gives sdpa: its inputs in bf16
        low = torch.get_autocast_dtype(device)
        query, key, value = query.to(low), key.to(low), value.to(low)
    out = grouped_attention(query, key, value, allowed, scaling)
    return out.transpose(1, 2).contiguous(), None


def register() -> None:
    """Make "pgrpo" an attention implementation of transformers (with sdpa's mask builder)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, attention_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)


def use_attention(model: torch.nn.Module, choice: str) -> str:
    """Set the model's attention implementation; returns the one in use. choice: "auto" (pgrpo's
    where the model runs transformers' sdpa, which it falls back on), or a transformers name
    ("sdpa", "eager", ...) kept as given."""
    config = getattr(model, "config", None)
    current = getattr(config, "_attn_implementation", None)
    wanted = (NAME if current == "sdpa" else current) if choice == "auto" else choice
    if wanted is None or wanted == current:
        return current
    if wanted == NAME:
        register()
    model.set_attn_implementation(wanted)
    return wanted
