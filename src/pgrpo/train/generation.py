"""Batched sampling of groups: left padding, a preallocated KV cache, one temperature per row.

    rollout = sample(policy, prompts, group_size=4, temperatures=[0.1, 0.4, 0.7, 1.0],
                     max_new_tokens=32)

Each prompt is repeated G times, contiguously, so completion i belongs to group i // G and sits at
position i % G; with a multi-temperature schedule (MDP-GRPO) position j is always drawn at
temperatures[j]. Each prompt but its last token runs once (`shared_prompt_cache`), its KV cache is
repeated G times, then `decode` runs pgrpo's own loop of model forwards: row i's token is an exact
sample of softmax(logits / T_i) by inverse CDF (`draw_tokens`; no top-k / top-p; T_i = 0 is the
argmax, for `pgrpo eval --temperature 0`), so its log-probs can be recomputed exactly. The loop
draws the same tokens as HF `generate` with the same sampler (`hf_generate`, the reference it is
tested against) at 0.77x its CPU time per token; everything runs under the policy's precision,
as the log-prob recompute (docs/trainer.md, "The decode loop").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pgrpo.train.kvcache import preallocate
from pgrpo.train.logprobs import _backbone, _cache_kwarg, position_ids
from pgrpo.train.policies import Policy


class RowTemperature:
    """LogitsProcessor: scores [N, V] -> scores / temperatures[:, None]."""

    def __init__(self, temperatures: torch.Tensor) -> None:
        self.temperatures = temperatures

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return scores / self.temperatures.to(scores.dtype)[:, None]


def draw_tokens(scores: torch.Tensor, temperatures: torch.Tensor) -> torch.Tensor:
    """scores [N, V], temperatures [N] -> tokens [N]: row i's token is an exact sample of
    softmax(scores_i / temperatures_i) by inverse CDF (one uniform per row from torch's stream,
    float64 cumulative sum); a row at temperature 0 takes the argmax (greedy decoding, for
    evaluation; training needs T > 0)."""
    temps = temperatures.double()[:, None]
    greedy = temps == 0
    logits = scores.double()  # a copy, worked on in place
    if bool((temps != 1).any()):  # x / 1.0 == x: skipping it at T = 1 changes no bit
        logits.div_(torch.where(greedy, 1.0, temps))
    # unnormalised CDF: exp(logits - max), cumulative sum; the uniform is scaled to its total
    cdf = logits.sub_(logits.amax(-1, keepdim=True)).exp_().cumsum_(-1)
    u = torch.rand(scores.shape[0], 1, dtype=torch.float64) * cdf[:, -1:]
    token = torch.searchsorted(cdf, u, right=True).clamp_(max=scores.shape[1] - 1)
    if bool(greedy.any()):
        token = torch.where(greedy, scores.argmax(-1, keepdim=True), token)
    return token.squeeze(-1)


class RowTemperatureSampler:
    """LogitsProcessor that draws the next token itself (`draw_tokens`), for HF `generate` in
    greedy mode: the returned scores are 0 at the drawn token and -inf elsewhere, so the greedy
    argmax takes it. The same distribution as `generate`'s multinomial sampling, which draws
    N x V exponentials per step (torch.multinomial without replacement): measured 50 ms per step
    for 32 rows of SmolLM2's 49,152-token vocabulary, 30% of sampling. pgrpo's own decode loop
    (`decode`) calls `draw_tokens` directly; this processor is the same draw inside `generate`
    (the reference the tests compare the loop with)."""

    def __init__(self, temperatures: torch.Tensor) -> None:
        self.temperatures = temperatures

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """scores [N, V] -> [N, V] (0 at the drawn token, -inf elsewhere)."""
        token = draw_tokens(scores, self.temperatures)
        out = torch.full_like(scores, -math.inf)
        return out.scatter_(1, token[:, None], 0.0)


@dataclass(frozen=True)
class Rollout:
    """One batch of sampled groups.

    input_ids: [N, P + T] left-padded prompt then completion; attention_mask: [N, P + T] (prompt
    padding 0, every completion position 1, as during generation); prompt_len: P;
    completion_ids: [N, T]; completion_mask: [N, T] (1 up to and including the first EOS);
    temperatures: [N] the temperature each row was drawn at; texts: N decoded completions;
    truncated: [N] bool, no EOS within max_new_tokens; sampler_log_probs: [N, T] the sampler's
    own log-probs of the drawn tokens (0 after the first EOS), when asked for.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    prompt_len: int
    completion_ids: torch.Tensor
    completion_mask: torch.Tensor
    temperatures: torch.Tensor
    texts: list[str]
    truncated: torch.Tensor
    sampler_log_probs: torch.Tensor | None = None

    @property
    def num_tokens(self) -> int:
        """Prompt + completion tokens processed (for tokens/second)."""
        return int(self.attention_mask[:, : self.prompt_len].sum() + self.completion_mask.sum())


def left_pad(sequences: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token lists -> (ids [N, P], mask [N, P]) with padding on the left."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, s in enumerate(sequences):
        if len(s):
            ids[i, width - len(s) :] = torch.tensor(list(s), dtype=torch.long)
            mask[i, width - len(s) :] = 1
    return ids, mask


def completion_mask(completion_ids: torch.Tensor, eos_id: int) -> torch.Tensor:
    """[N, T] -> [N, T] long: 1 up to and including the first EOS, 0 after it."""
    is_eos = (completion_ids == eos_id).long()
    after = torch.cumsum(is_eos, dim=1) - is_eos  # EOS tokens strictly before this position
    return (after == 0).long()


def row_temperatures(n_prompts: int, group_size: int, schedule: Sequence[float]) -> torch.Tensor:
    """[n_prompts * G]: position j of every group gets schedule[j] (len(schedule) == G)."""
    if len(schedule) != group_size:
        raise ValueError(
            f"temperature schedule has {len(schedule)} entries for group_size {group_size}; "
            "give one temperature per position in the group"
        )
    return torch.tensor(list(schedule), dtype=torch.float32).repeat(n_prompts)


@torch.no_grad()
def shared_prompt_cache(
    model: torch.nn.Module, encoded: Sequence[Sequence[int]], pad_id: int, group_size: int
) -> object | None:
    """KV cache of every prompt but its last token, computed once per prompt and repeated G
    times: `generate` then prefills only the last prompt token of each row instead of the whole
    prompt G times. None when there is nothing to share (G = 1 or one-token prompts)."""
    ids, mask = left_pad(encoded, pad_id)
    if group_size < 2 or ids.shape[1] < 2:
        return None
    backbone = _backbone(model)
    out = backbone(
        input_ids=ids[:, :-1],
        attention_mask=mask[:, :-1],
        position_ids=position_ids(mask)[:, :-1],
        use_cache=True,
    )
    cache = out.cache if "cache" in out else out.past_key_values
    cache.batch_repeat_interleave(group_size)
    return cache


@dataclass(frozen=True)
class Decoded:
    """completion_ids: [N, T'] drawn tokens (pad after a row's EOS), T' <= max_new_tokens (the loop
    stops once every row has its EOS); log_probs: [N, T'] float32 log softmax(logits / T_i) of
    each drawn token (None unless asked for)."""

    completion_ids: torch.Tensor
    log_probs: torch.Tensor | None


@torch.no_grad()
def decode(
    model: torch.nn.Module,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    temperatures: torch.Tensor,
    *,
    max_new_tokens: int,
    eos_id: int,
    pad_id: int,
    cache: object | None = None,
    with_log_probs: bool = False,
) -> Decoded:
    """Autoregressive sampling with a KV cache: one backbone forward per token, the LM head on
    the last position only, `draw_tokens` at each row's temperature.

    prompt_ids, prompt_mask: [N, P] left-padded; temperatures: [N]; cache: the keys / values of
    prompt_ids[:, :P - 1] (`shared_prompt_cache`), or None to prefill the whole prompt.
    The same tokens, positions and masks as HF `generate` in greedy mode with
    `RowTemperatureSampler` (`hf_generate.generate_decode`; tests/test_train_decode.py):
    positions skip the left padding, a row that has drawn its EOS is fed and keeps `pad_id`,
    the loop ends when every row has ended. Without `generate`'s per-step work: the cache is
    preallocated (`kvcache.preallocate`: no per-token `torch.cat` of every layer, and under
    autocast no per-token cast of the whole cache), the attention mask and positions are built
    once and sliced, the drawn token is used as is (no one-hot scores and argmax), the
    sampler's log-probs are gathered at each step (no N x T x V logits kept).
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens}: give at least 1")
    n, p = prompt_ids.shape
    total = p + max_new_tokens
    backbone, head = _backbone(model), model.get_output_embeddings()
    softcap = getattr(getattr(model, "config", None), "final_logit_softcapping", None)
    mask = torch.ones((n, total), dtype=prompt_mask.dtype)
    mask[:, :p] = prompt_mask
    positions = position_ids(mask)
    # after the prompt, positions count on from its last one (as `generate`; also for an empty one)
    positions[:, p:] = positions[:, p - 1 : p] + torch.arange(1, max_new_tokens + 1)
    start = 0 if cache is None else p - 1
    cache = preallocate(cache, backbone.config, total)
    kwarg = _cache_kwarg(backbone)
    inputs, done = prompt_ids[:, start:], torch.zeros(n, dtype=torch.bool)
    tokens, logps = [], []
    for t in range(max_new_tokens):
        length = p + t  # sequence tokens seen once this forward has run
        out = backbone(
            input_ids=inputs,
            attention_mask=mask[:, :length],
            position_ids=positions[:, length - inputs.shape[1] : length],
            use_cache=True,
            **{kwarg: cache},
        )
        scores = head(out.last_hidden_state[:, -1:]).float()[:, 0]
        if softcap:
            scores = softcap * torch.tanh(scores / softcap)
        token = torch.where(done, pad_id, draw_tokens(scores, temperatures))
        tokens.append(token)
        if with_log_probs:
            logp = torch.log_softmax(scores / temperatures[:, None], dim=-1)
            logps.append(logp.gather(-1, token[:, None]).squeeze(-1))
        done |= token == eos_id
        if bool(done.all()):
            break
        inputs = token[:, None]
    completion_ids = torch.stack(tokens, dim=1)
    return Decoded(completion_ids, torch.stack(logps, dim=1) if with_log_probs else None)


@torch.no_grad()
def sample(
    policy: Policy,
    prompts: Sequence[str],
    *,
    group_size: int,
    temperatures: Sequence[float],
    max_new_tokens: int,
    with_log_probs: bool = False,
) -> Rollout:
    """Draw G completions for each prompt (prompt-major, contiguous groups). with_log_probs: also
    keep the sampler's own log-probs of the drawn tokens (`Rollout.sampler_log_probs`)."""
    tok = policy.tokenizer
    encoded = [tok.encode_prompt(p) for p in prompts]
    repeated = [e for e in encoded for _ in range(group_size)]
    prompt_ids, prompt_mask = left_pad(repeated, tok.pad_token_id)
    temps = row_temperatures(len(prompts), group_size, temperatures)
    was_training = policy.model.training
    policy.model.eval()
    with policy.precision.autocast():  # the same precision as the log-prob recompute
        cache = shared_prompt_cache(policy.model, encoded, tok.pad_token_id, group_size)
        out = decode(
            policy.model,
            prompt_ids,
            prompt_mask,
            temps,
            max_new_tokens=max_new_tokens,
            eos_id=tok.eos_token_id,
            pad_id=tok.pad_token_id,
            cache=cache,
            with_log_probs=with_log_probs,
        )
    policy.model.train(was_training)
    return _rollout(tok, prompt_ids, prompt_mask, temps, out)


def _rollout(
    tok: object,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    temps: torch.Tensor,
    out: Decoded,
) -> Rollout:
    """The `Rollout` of a decode: completion mask up to the first EOS, pad after it, texts."""
    completion_ids = out.completion_ids
    mask = completion_mask(completion_ids, tok.eos_token_id)
    truncated = ~(completion_ids == tok.eos_token_id).any(dim=1)
    completion_ids = torch.where(mask.bool(), completion_ids, tok.pad_token_id)
    texts = [
        tok.decode(row[m.bool()].tolist()) for row, m in zip(completion_ids, mask, strict=True)
    ]
    sampler = None
    if out.log_probs is not None:
        sampler = torch.where(mask.bool(), out.log_probs, torch.zeros_like(out.log_probs))
    return Rollout(
        input_ids=torch.cat([prompt_ids, completion_ids], dim=1),
        attention_mask=torch.cat([prompt_mask, torch.ones_like(completion_ids)], dim=1),
        prompt_len=prompt_ids.shape[1],
        completion_ids=completion_ids,
        completion_mask=mask,
        temperatures=temps,
        texts=texts,
        truncated=truncated,
        sampler_log_probs=sampler,
    )
