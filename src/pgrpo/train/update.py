"""The gradient of the GRPO objective on a scored batch, accumulated in micro-batches.

    result = minibatch_gradient(policy, config, rollout, idx, advantages, old, ref, temps,
                                first=True)   # one of the trainer's K steps (and the probe's rows)

Micro-batching is plain accumulation: every registered aggregator is numerator / denominator with
a numerator that sums one term per row (`pgrpo.core.losses.Aggregator`), so the loss of a
minibatch is the sum over its micro-batches of numerator(rows) / denominator(minibatch), and so is
its gradient. Rows that share a prompt run it once (`completion_scores(share_prompts=True)`), read
from the tokens, so any micro-batch size is exact, aligned to the groups or not.
"""

from __future__ import annotations

import contextlib

import torch

from pgrpo.core.losses import LossResult, loss_denominator, policy_loss
from pgrpo.train.config import RunConfig
from pgrpo.train.generation import Rollout
from pgrpo.train.logprobs import TokenScores, completion_scores
from pgrpo.train.policies import Policy
from pgrpo.train.setup import release_freed_memory


def scoring_temperatures(rollout: Rollout, config: RunConfig) -> torch.Tensor | None:
    """[N] the temperature each row is scored at for the ratio: the one it was drawn at
    ('sampled'), or None (1.0, generation.score_temperature='one')."""
    return rollout.temperatures if config.generation.score_temperature == "sampled" else None


def kl_temperatures(rollout: Rollout, config: RunConfig) -> torch.Tensor | None:
    """[N] the temperature each row's KL to the reference is taken at, the reference's and the
    current policy's: the one it was drawn at ('sampled'), or None (1.0,
    loss.kl_temperature='one', the default)."""
    return rollout.temperatures if config.loss.kl_temperature == "sampled" else None


def _separate_kl_temperatures(
    temps: torch.Tensor | None, rollout: Rollout, config: RunConfig
) -> torch.Tensor | None:
    """[N] the KL's temperatures where they differ from the ratio's `temps` for some row (the
    current policy's log-probs are then gathered a second time from the same logits), else None
    (the KL reads the ratio's log-probs: every temperature 1, or both 'sampled' or both 'one')."""
    ones = torch.ones(rollout.completion_mask.shape[0])
    kl = kl_temperatures(rollout, config)
    kl, ratio = (ones if t is None else t.float() for t in (kl, temps))
    return None if torch.equal(kl, ratio) else kl


def minibatches(n: int, config: RunConfig) -> list[torch.Tensor]:
    """The M minibatches of a batch of n rows: contiguous, in order (step k uses k mod M)."""
    return list(torch.arange(n).chunk(config.grpo.num_minibatches))


def _partition(idx: torch.Tensor, config: RunConfig) -> list[torch.Tensor]:
    """Positions in `idx` of each micro-batch (`grpo.micro_batch_size` rows)."""
    return list(torch.arange(len(idx)).split(config.grpo.micro_batch_size or len(idx)))


@torch.no_grad()
def sequence_scores(
    policy: Policy,
    config: RunConfig,
    rollout: Rollout,
    temps: torch.Tensor | None,
    *,
    model: torch.nn.Module | None = None,
    with_entropy: bool = False,
) -> TokenScores:
    """[N, T] log-probs (and, asked for, entropies) of the completion tokens under `model`
    (default: the policy's), no gradient (old / reference log-probs). Rows go through the same
    minibatches, micro-batches, column cuts and precision as in `minibatch_gradient`, so that
    before the first optimizer step the old log-probs are the current ones bit for bit (ratio
    exactly 1, also in bf16)."""
    mask = rollout.completion_mask
    out = torch.zeros(mask.shape)
    entropy = torch.zeros(mask.shape) if with_entropy else None
    with policy.precision.keep_casts():  # no weight changes in here: one bf16 cast per weight
        for idx in minibatches(mask.shape[0], config):
            for part in _partition(idx, config):
                rows = idx[part]
                fill = torch.zeros(len(rows), mask.shape[1])
                scores = _score_rows(
                    policy, config, rollout, rows, temps, fill, with_entropy, False, model=model
                )
                out[rows] = scores.log_probs.float()
                if entropy is not None:
                    entropy[rows] = scores.entropy.float()
    return TokenScores(log_probs=out, entropy=entropy)


def sequence_log_probs(
    policy: Policy,
    config: RunConfig,
    rollout: Rollout,
    temps: torch.Tensor | None,
    *,
    model: torch.nn.Module | None = None,
) -> torch.Tensor:
    """[N, T]: the log-probs of `sequence_scores`."""
    return sequence_scores(policy, config, rollout, temps, model=model).log_probs


def reference_log_probs(policy: Policy, rollout: Rollout, config: RunConfig) -> torch.Tensor | None:
    """[N, T] under the reference policy at the KL's temperatures (`kl_temperatures`) when the
    loss has a KL term, else None."""
    if not config.loss.uses_reference:
        return None
    temps = kl_temperatures(rollout, config)
    with policy.reference_model() as reference:
        return sequence_log_probs(policy, config, rollout, temps, model=reference)


def minibatch_gradient(
    policy: Policy,
    config: RunConfig,
    rollout: Rollout,
    idx: torch.Tensor,
    advantages: torch.Tensor,
    old: torch.Tensor | None,
    ref: torch.Tensor | None,
    temps: torch.Tensor | None,
    *,
    first: bool,
) -> LossResult:
    """Accumulate the gradient of the loss of minibatch `idx` into .grad, micro-batch by
    micro-batch (`grpo.micro_batch_size` rows each); return that loss and its metrics.

    idx: [n] rows of the rollout; advantages: [N]; old, ref: [N, T] or None (old None: the
    current policy, detached: ratio 1; ref: at the KL's temperatures, `reference_log_probs`);
    temps: [N] or None, the ratio's; first: the first of the K steps (its entropy is logged, the
    on-policy one). Where the KL's temperatures differ from `temps` (`kl_temperatures`), the
    current log-probs at them come from the same forward (`TokenScores.kl_log_probs`)."""
    cfg = config
    mask, adv = rollout.completion_mask[idx], advantages[idx]
    denominator = loss_denominator(mask, cfg.loss)  # of the whole minibatch
    entropy_grad = cfg.loss.entropy_coef > 0
    with_entropy = first or entropy_grad
    kl_temps = None if ref is None else _separate_kl_temperatures(temps, rollout, cfg)
    log_probs = torch.zeros(mask.shape)
    entropy = torch.zeros(mask.shape) if with_entropy else None
    kl_log_probs = None if kl_temps is None else torch.zeros(mask.shape)
    parts = _partition(idx, cfg)
    # the weights change only after this function, so the micro-batches can share one bf16 cast
    # per weight; one pass under activation checkpointing keeps none, so each layer's casts go
    # with its backward (the recompute casts again: ~0.2 GiB less at backward's end, SmolLM2)
    keep = len(parts) > 1 or not cfg.grpo.activation_checkpointing
    with policy.precision.keep_casts() if keep else contextlib.nullcontext():
        for part in parts:
            rows = idx[part]
            fill = torch.zeros(len(rows), mask.shape[1]) if old is None else old[rows]
            scores = _score_rows(
                policy, cfg, rollout, rows, temps, fill, with_entropy, entropy_grad, kl_temps
            )
            result = policy_loss(
                scores.log_probs,
                scores.log_probs.detach() if old is None else old[rows],
                adv[part],
                mask[part],
                cfg.loss,
                ref_log_probs=None if ref is None else ref[rows],
                entropy=scores.entropy if entropy_grad else None,
                denominator=denominator,
                kl_log_probs=scores.kl_log_probs,
            )
            release_freed_memory(cfg.grpo.release_memory)  # before backward's peak
            result.loss.backward()
            log_probs[part] = scores.log_probs.detach()
            if entropy is not None:
                entropy[part] = scores.entropy.detach()
            if kl_log_probs is not None:
                kl_log_probs[part] = scores.kl_log_probs.detach()
    with torch.no_grad():  # loss value and metrics of the whole minibatch
        return policy_loss(
            log_probs,
            log_probs if old is None else old[idx],
            adv,
            mask,
            cfg.loss,
            ref_log_probs=None if ref is None else ref[idx],
            entropy=entropy,
            kl_log_probs=kl_log_probs,
        )


def _score_rows(
    policy: Policy,
    cfg: RunConfig,
    rollout: Rollout,
    rows: torch.Tensor,
    temps: torch.Tensor | None,
    fill: torch.Tensor,
    with_entropy: bool,
    entropy_grad: bool,
    kl_temps: torch.Tensor | None = None,
    model: torch.nn.Module | None = None,
) -> TokenScores:
    """Scores of `rows` with the columns that are padding in all of them cut off (the prompt's
    left padding, the completions' tail after the last EOS): less compute, same values on the
    completion mask. Cut completion positions get `fill` (log-probs: the old ones, so the ratio
    there is 1 and finite), entropy 0 and KL log-probs 0 (asked for with `kl_temps` [N]); they
    are outside the mask, so the loss and its gradient are unchanged. Runs under the policy's
    precision (`Precision.autocast`)."""
    att = rollout.attention_mask[rows]
    p, t_full = rollout.prompt_len, rollout.completion_mask.shape[1]
    lo = int(att[:, :p].sum(0).nonzero()[0]) if p else 0
    t = max(1, int(rollout.completion_mask[rows].sum(1).max()))
    with policy.precision.autocast():
        scores = completion_scores(
            policy.model if model is None else model,
            rollout.input_ids[rows, lo : p + t],
            att[:, lo : p + t],
            p - lo,
            None if temps is None else temps[rows],
            chunk=cfg.generation.logprob_chunk,
            with_entropy=with_entropy,
            entropy_grad=entropy_grad,
            checkpoint_layers=cfg.grpo.activation_checkpointing,
            lean_layers=cfg.grpo.lean_layers,
            kl_temperatures=None if kl_temps is None else kl_temps[rows],
        )
    if t == t_full:
        return scores
    log_probs = torch.cat([scores.log_probs, fill[:, t:]], dim=1)
    entropy, kl_log_probs = scores.entropy, scores.kl_log_probs
    if entropy is not None:
        entropy = torch.cat([entropy, entropy.new_zeros(len(rows), t_full - t)], dim=1)
    if kl_log_probs is not None:
        zeros = kl_log_probs.new_zeros(len(rows), t_full - t)
        kl_log_probs = torch.cat([kl_log_probs, zeros], dim=1)
    return TokenScores(log_probs=log_probs, entropy=entropy, kl_log_probs=kl_log_probs)
