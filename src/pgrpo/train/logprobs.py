"""Log-probabilities and entropy of completion tokens, without a [N, L, V] log-softmax.

The backbone gives hidden states [N, L, H]; only the T positions that predict completion tokens
go through the LM head, `chunk` positions at a time: logits [N, chunk, V], logsumexp, gather.
With gradients on and more than one chunk, each chunk runs under activation checkpointing, so
backward recomputes one chunk's logits at a time instead of keeping all of them: peak memory
~ N * chunk * V floats instead of N * T * V (a memory complaint about TRL; docs/trainer.md,
"Log-probs without a [batch, length, vocab] log-softmax"). When all T positions fit one chunk
there is nothing to save (backward starts with the head, where the recomputed logits would be
alive anyway), so no recompute is paid.

Each row is scored at its own temperature (logits / T_i), the one it was sampled at, unless the
caller passes ones (MDP-GRPO's code scores everything at T = 1).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch.utils.checkpoint import checkpoint

from pgrpo.train import lean


@dataclass(frozen=True)
class TokenScores:
    """log_probs: [N, T] log pi(token | prefix) at each row's temperature; entropy: [N, T] of the
    same tempered distribution (None when not asked for); kl_log_probs: [N, T] log pi at the
    KL's temperatures (`completion_scores(kl_temperatures=)`; None when not asked for)."""

    log_probs: torch.Tensor
    entropy: torch.Tensor | None
    kl_log_probs: torch.Tensor | None = None


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that skip left padding, as `generate` assigns them. [N, L] -> [N, L]."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def _backbone(model: torch.nn.Module) -> torch.nn.Module:
    get = getattr(model, "get_decoder", None)
    decoder = get() if callable(get) else None
    if decoder is None:
        raise TypeError(
            f"{type(model).__name__} has no get_decoder(): pgrpo needs a transformers causal LM "
            "whose decoder returns hidden states (AutoModelForCausalLM)"
        )
    return decoder


ENTROPY_ROWS = 64
"""Positions per block of the no-gradient logsumexp and entropy: [64, V] fp32 buffers (12.6 MB
at SmolLM2's V = 49,152) instead of ones as large as a chunk's logits."""


def _logsumexp_rows(logits: torch.Tensor) -> torch.Tensor:
    """[..., V] -> [...] logsumexp over V, ENTROPY_ROWS positions at a time, no gradient: the
    same bits as one `torch.logsumexp` (each row is reduced alone), whose max-shifted exp would
    be two more tensors as large as `logits` at once."""
    flat = logits.reshape(-1, logits.shape[-1])
    out = torch.empty(flat.shape[0], dtype=logits.dtype, device=logits.device)
    for s in range(0, flat.shape[0], ENTROPY_ROWS):
        out[s : s + ENTROPY_ROWS] = torch.logsumexp(flat[s : s + ENTROPY_ROWS], dim=-1)
    return out.view(logits.shape[:-1])


class _TokenLogProbs(torch.autograd.Function):
    """log_probs [N, C] = (logits * inv_temp).float() at the targets - lse, whose backward
    rebuilds the fp32 logits from the saved head output and turns them into the gradient in place:
    (targets one-hot - exp(x - lse)) * g * inv_temp. The same elementwise operations, in the same
    order, as autograd's backward of `logits.float() * inv_temp`, `logsumexp` and `gather`, so the
    same bits; it keeps the head's bf16 output (N x C x V x 2 bytes) instead of its fp32 copy and
    builds the gradient in one fp32 buffer instead of four (the softmax, its product with g, the
    gather's scattered zeros and their sum): ~0.25 GB less at the peak of an 8x4x32 SmolLM2 step."""

    @staticmethod
    def forward(ctx, logits, targets, inv_temp, lse):
        """logits [N, C, V] (the head's output, any float dtype); targets [N, C]; inv_temp
        [N, 1, 1] or None; lse [N, C] logsumexp of the tempered fp32 logits (no gradient)."""
        picked = logits.gather(-1, targets.unsqueeze(-1)).float()
        if inv_temp is not None:
            picked = picked * inv_temp
        ctx.save_for_backward(logits, targets, lse, inv_temp)
        return picked.squeeze(-1) - lse

    @staticmethod
    def backward(ctx, grad):
        logits, targets, lse, inv_temp = ctx.saved_tensors
        x = logits.float()
        x = x.clone() if x is logits else x  # fp32 logits: never write into the saved tensor
        if inv_temp is not None:
            x.mul_(inv_temp)
        x.sub_(lse.unsqueeze(-1)).exp_().mul_(grad.neg().unsqueeze(-1))  # from -lse
        x.scatter_add_(-1, targets.unsqueeze(-1), grad.unsqueeze(-1))  # from the gather
        if inv_temp is not None:
            x.mul_(inv_temp)
        return x.to(logits.dtype), None, None, None


def _tempered_log_probs(
    raw: torch.Tensor,
    targets: torch.Tensor,
    inv_temp: torch.Tensor | None,
    softcap: float | None,
    own_backward: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """raw [N, C, V] (the head's output), targets [N, C], inv_temp [N, 1, 1] (None: T = 1) ->
    log_probs [N, C] of the targets, the tempered fp32 logits [N, C, V] and their logsumexp
    [N, C]. own_backward (gradients on, no softcap, no entropy gradient): the log-probs'
    gradient from the head output itself (`_TokenLogProbs`), the fp32 logits only give lse (and
    the entropy) without a gradient; else autograd's through the fp32 logits."""
    if own_backward:
        with torch.no_grad():
            logits = raw.float()
            if inv_temp is not None:
                logits = logits * inv_temp
            lse = _logsumexp_rows(logits)
        return _TokenLogProbs.apply(raw, targets, inv_temp, lse), logits, lse
    logits = raw.float()
    if softcap:
        logits = softcap * torch.tanh(logits / softcap)
    if inv_temp is not None:  # x * 1.0 == x: skipping it at T = 1 changes no bit
        logits = logits * inv_temp
    lse = torch.logsumexp(logits, dim=-1) if torch.is_grad_enabled() else _logsumexp_rows(logits)
    return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - lse, logits, lse


def _chunk_scores(
    hidden: torch.Tensor,
    targets: torch.Tensor,
    inv_temp: torch.Tensor | None,
    head: torch.nn.Module,
    softcap: float | None,
    with_entropy: bool,
    entropy_grad: bool = False,
    with_kl: bool = False,
    kl_inv_temp: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """hidden [N, C, H], targets [N, C], inv_temp [N, 1, 1] (None: every row at T = 1) ->
    log_probs, entropy, kl_log_probs [N, C]; with_kl: the last from the same head output at
    kl_inv_temp ([N, 1, 1], None: T = 1), else None."""
    raw = head(hidden)
    own = torch.is_grad_enabled() and not softcap and not entropy_grad
    kl_log_probs = None
    if with_kl:  # first: its fp32 logits are gone before the entropy's
        kl_log_probs = _tempered_log_probs(raw, targets, kl_inv_temp, softcap, own)[0]
    # before the entropy: under checkpointing the recompute stops once this has saved
    log_probs, logits, lse = _tempered_log_probs(raw, targets, inv_temp, softcap, own)
    del raw  # kept by autograd where backward needs it, else freed before the entropy
    if not with_entropy:
        return log_probs, torch.zeros_like(lse), kl_log_probs
    # H = lse - sum_v p_v * logits_v, with a gradient only for an entropy bonus (off by default)
    if entropy_grad and torch.is_grad_enabled():
        entropy = lse - (torch.softmax(logits, dim=-1) * logits).sum(-1)
        return log_probs, entropy, kl_log_probs
    # no gradient: p = exp(logits - lse), then p * logits in place (0.8x softmax * logits' time),
    # ENTROPY_ROWS positions at a time, so p is a small buffer, not a second [N, C, V] tensor
    with torch.no_grad():
        flat, flat_lse = logits.reshape(-1, logits.shape[-1]), lse.reshape(-1)
        entropy = torch.empty_like(flat_lse)
        for s in range(0, flat.shape[0], ENTROPY_ROWS):
            rows, row_lse = flat[s : s + ENTROPY_ROWS], flat_lse[s : s + ENTROPY_ROWS]
            p = (rows - row_lse.unsqueeze(-1)).exp_()
            entropy[s : s + ENTROPY_ROWS] = row_lse - p.mul_(rows).sum(-1)
        return log_probs, entropy.view_as(lse), kl_log_probs


def _cache_kwarg(backbone: torch.nn.Module) -> str:
    """transformers >= 5.40 renames `past_key_values` to `cache`."""
    params = inspect.signature(backbone.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def shared_prompts(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(first [U], inverse [N]): the U distinct prompts among the rows (same prompt tokens and
    mask), as the row index of each one's first occurrence, and which of them each row uses.
    Read from the tokens themselves, so rows may come in any order and groups may be split."""
    key = torch.cat([input_ids[:, :prompt_len], attention_mask[:, :prompt_len]], dim=1)
    _, inverse = torch.unique(key, dim=0, return_inverse=True)
    n = input_ids.shape[0]
    first = torch.full((int(inverse.max()) + 1 if n else 0,), n, dtype=torch.long)
    first.scatter_reduce_(0, inverse, torch.arange(n), reduce="amin")
    return first, inverse


@contextlib.contextmanager
def checkpointed_layers(backbone: torch.nn.Module) -> Iterator[None]:
    """Inside the block each decoder layer of `backbone` runs under non-reentrant activation
    checkpointing: autograd keeps the layer's inputs, and backward runs the layer again for the
    rest (the same operations, so the same values and gradients, for one more decoder forward).
    Unlike transformers' `gradient_checkpointing_enable()`, which drops the KV cache, a layer
    that reads and extends a cache (the shared prompt's) keeps it: the cache layer's state is
    noted when the layer runs and put back before the recompute, so the recompute sees the
    cache the layer saw (transformers' DynamicCache, whose `update` concatenates)."""
    layers = getattr(backbone, "layers", None)
    if layers is None:
        raise TypeError(
            f"{type(backbone).__name__} has no .layers: activation checkpointing needs a "
            "transformers decoder; set grpo.activation_checkpointing=false"
        )
    for index, layer in enumerate(layers):
        layer.forward = functools.partial(_checkpointed_forward, type(layer).forward, layer, index)
    try:
        yield
    finally:
        for layer in layers:
            del layer.forward


def _checkpointed_forward(forward, layer, index, *args, **kwargs):
    cache = kwargs.get("cache", kwargs.get("past_key_values"))
    state = None
    if cache is not None:
        layer_caches = getattr(cache, "layers", None)
        if layer_caches is None or index >= len(layer_caches):
            raise TypeError(
                f"activation checkpointing cannot restore a {type(cache).__name__} for the "
                "recompute; set grpo.activation_checkpointing=false"
            )
        state = dict(vars(layer_caches[index]))

    def run(*a, **k):
        if state is not None:  # the recompute sees the cache the first run saw
            vars(cache.layers[index]).update(state)
        return forward(layer, *a, **k)

    return checkpoint(run, *args, use_reentrant=False, **kwargs)


def completion_hidden(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    prompt_len: int,
    share_prompts: bool = True,
) -> torch.Tensor:
    """Hidden states [N, T, H] at the positions that predict the T completion tokens.

    share_prompts: rows with the same prompt (as the G completions of a group) run it once and
    reuse its KV cache for their completions: the same values and gradients as running every row
    in full, with less prompt compute. Which rows share is read from the tokens (`shared_prompts`),
    so it is correct for any subset or order of rows.
    """
    backbone = _backbone(model)
    positions = position_ids(attention_mask)
    n, length = input_ids.shape
    first, inverse = shared_prompts(input_ids, attention_mask, prompt_len)
    if not share_prompts or len(first) == n or length == prompt_len:
        out = backbone(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=positions,
            use_cache=False,
        )
        return out.last_hidden_state[:, prompt_len - 1 : length - 1]
    prompt = backbone(
        input_ids=input_ids[first, :prompt_len],
        attention_mask=attention_mask[first, :prompt_len],
        position_ids=positions[first, :prompt_len],
        use_cache=True,
    )
    cache = prompt.cache if "cache" in prompt else prompt.past_key_values
    cache.batch_select_indices(inverse)  # row i gets the cache of its own prompt
    first_hidden = prompt.last_hidden_state[inverse, -1:]  # predicts token P
    if length - prompt_len == 1:
        return first_hidden
    rest = backbone(
        input_ids=input_ids[:, prompt_len : length - 1],
        attention_mask=attention_mask[:, : length - 1],
        position_ids=positions[:, prompt_len : length - 1],
        use_cache=True,
        **{_cache_kwarg(backbone): cache},
    )
    return torch.cat([first_hidden, rest.last_hidden_state], dim=1)


def completion_scores(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    prompt_len: int,
    temperatures: torch.Tensor | None = None,
    *,
    chunk: int = 16,
    with_entropy: bool = False,
    entropy_grad: bool = False,
    share_prompts: bool = True,
    checkpoint_layers: bool = False,
    lean_layers: bool = False,
    kl_temperatures: torch.Tensor | None = None,
) -> TokenScores:
    """Log-probs [N, T] of tokens input_ids[:, prompt_len:] under `model`, chunked over positions.

    input_ids, attention_mask: [N, P + T]; temperatures: [N] (None: 1.0); kl_temperatures: [N]
    (None: not asked for), also the log-probs at these temperatures from the same logits
    (`TokenScores.kl_log_probs`, the KL's: `loss.kl_temperature`), for one more logsumexp and
    gather per chunk, no forward; share_prompts: run each
    distinct prompt once (see `completion_hidden`); entropy_grad: keep the entropy's gradient (for
    an entropy bonus); checkpoint_layers: activation checkpointing of the decoder layers when
    gradients are on (`checkpointed_layers`: less memory, one more decoder forward in backward,
    the same values and gradients); lean_layers: RMSNorm / SwiGLU modules that keep less for
    backward (`lean.lean_layers`: the same values and gradients; not under checkpoint_layers,
    whose recompute must save what the first run saved). Runs with gradients when grad mode is
    on (call under torch.no_grad() for old / reference log-probs).
    """
    n, length = input_ids.shape
    t = length - prompt_len
    layers = contextlib.nullcontext()
    if checkpoint_layers and torch.is_grad_enabled():
        layers = checkpointed_layers(_backbone(model))
    elif lean_layers and torch.is_grad_enabled():
        layers = lean.lean_layers(_backbone(model))
    with layers:
        hidden = completion_hidden(model, input_ids, attention_mask, prompt_len, share_prompts)
    targets = input_ids[:, prompt_len:]
    inv_temp, kl_inv_temp = _inverse(temperatures, n), _inverse(kl_temperatures, n)
    with_kl = kl_temperatures is not None
    head = model.get_output_embeddings()
    softcap = getattr(getattr(model, "config", None), "final_logit_softcapping", None)
    logps, ents, kls = [], [], []
    for start in range(0, t, chunk):
        args = (hidden[:, start : start + chunk], targets[:, start : start + chunk], inv_temp)
        rest = (head, softcap, with_entropy, entropy_grad, with_kl, kl_inv_temp)
        if torch.is_grad_enabled() and t > chunk:  # only several chunks save memory
            lp, ent, kl = checkpoint(_chunk_scores, *args, *rest, use_reentrant=False)
        else:
            # entropy_grad as in the checkpointed branch: without it an entropy bonus had no
            # gradient on any micro-batch whose completions fit in one chunk
            lp, ent, kl = _chunk_scores(*args, *rest)
        logps.append(lp)
        ents.append(ent)
        kls.append(kl)
    log_probs = torch.cat(logps, dim=1)
    entropy = torch.cat(ents, dim=1) if with_entropy else None
    if entropy is not None and not entropy_grad:
        entropy = entropy.detach()
    kl_log_probs = torch.cat(kls, dim=1) if with_kl else None
    return TokenScores(log_probs=log_probs, entropy=entropy, kl_log_probs=kl_log_probs)


def _inverse(temperatures: torch.Tensor | None, n: int) -> torch.Tensor | None:
    """[N] temperatures -> [N, 1, 1] 1 / T; None where every row is at T = 1 (no division)."""
    if temperatures is None or not bool((temperatures != 1).any()):
        return None
    return (1.0 / temperatures.float()).view(n, 1, 1)
