"""Policy-loss pieces: per-token objectives, aggregators, KL estimators, entropy.

Three registries, one signature each, composed by `policy_loss`:

    POLICY_LOSSES: fn(log_probs [N,T], old_log_probs [N,T], advantages [N] or [N,T], **opts)
                   -> TokenLoss (.loss [N,T] to minimise, .low_clipped/.high_clipped/.dual_clipped
                   [N,T] bool)
    AGGREGATORS:   fn(values [N,T], response_mask [N,T], **opts) -> scalar
    KL_ESTIMATORS: fn(log_probs [N,T], ref_log_probs [N,T], **opts) -> [N,T]

The per-token objective, the aggregation and the regularisers are separate named pieces (verl's
`core_algos` split), so that changing one never means copying the others.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field, fields

import torch

from pgrpo._registry import Registry


@dataclass(frozen=True)
class TokenLoss:
    """loss: [N,T] per-token loss to minimise; low/high_clipped: [N,T] bool (None: no ratio);
    dual_clipped: [N,T] bool, the tokens the dual clip capped (None: no dual clip)."""

    loss: torch.Tensor
    low_clipped: torch.Tensor | None = None
    high_clipped: torch.Tensor | None = None
    dual_clipped: torch.Tensor | None = None


POLICY_LOSSES: Registry[Callable[..., TokenLoss]] = Registry("policy loss")
AGGREGATORS: Registry[Aggregator] = Registry("loss aggregator")
KL_ESTIMATORS: Registry[Callable[..., torch.Tensor]] = Registry("KL estimator")


def _per_token(advantages: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """advantages: [N] (one per sequence, outcome reward) or [N,T] -> [N,T]."""
    return advantages.unsqueeze(-1).expand_as(like) if advantages.ndim == 1 else advantages


# ---------------------------------------------------------------------------------------------
# Per-token objectives
# ---------------------------------------------------------------------------------------------


@POLICY_LOSSES.register("clipped")
def clipped_surrogate(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    *,
    epsilon_low: float = 0.2,
    epsilon_high: float | None = None,
    max_log_ratio: float | None = None,
    dual_clip: float | None = None,
) -> TokenLoss:
    """PPO/GRPO clipped surrogate (Schulman et al. 2017; asymmetric clip of DAPO, Yu et al. 2025):

        ratio = exp(log_probs - old_log_probs)
        loss  = -min(ratio A, clip(ratio, 1 - epsilon_low, 1 + epsilon_high) A)

    epsilon_high defaults to epsilon_low. A token is low-clipped when A < 0 and ratio < 1 - eps_low,
    high-clipped when A > 0 and ratio > 1 + eps_high (TRL's clip_ratio metrics).
    max_log_ratio (None: off, the paper's form): clamp log(ratio) to [-max, max] first, as verl's
    `vanilla` does with 20, so that one token whose log-probs differ by hundreds gives a finite
    loss with no gradient instead of exp overflow (inf loss, NaN gradient).
    dual_clip (None: off, the paper's and TRL's form): the dual clip of Ye et al. 2019
    (arXiv 1912.09729), verl `vanilla`'s `clip_ratio_c`: where A < 0 the loss is capped at
    -dual_clip A, min(-dual_clip A, loss), so a token whose ratio grew past dual_clip adds a
    constant and no gradient; `dual_clipped` marks those tokens (verl's `pg_clipfrac_lower`).
    """
    check_dual_clip(dual_clip)
    eps_high = epsilon_low if epsilon_high is None else epsilon_high
    adv = _per_token(advantages, log_probs)
    log_ratio = log_probs - old_log_probs
    if max_log_ratio is not None:
        log_ratio = torch.clamp(log_ratio, -max_log_ratio, max_log_ratio)
    ratio = torch.exp(log_ratio)
    clipped = torch.clamp(ratio, 1.0 - epsilon_low, 1.0 + eps_high)
    loss = -torch.minimum(ratio * adv, clipped * adv)
    low = (ratio < 1.0 - epsilon_low) & (adv < 0)
    high = (ratio > 1.0 + eps_high) & (adv > 0)
    if dual_clip is None:
        return TokenLoss(loss=loss, low_clipped=low, high_clipped=high)
    cap = -adv * dual_clip  # verl's order of operations, so that loss and gradient are its own
    negative = adv < 0
    dual = (loss > cap) & negative
    loss = torch.where(negative, torch.minimum(cap, loss), loss)
    return TokenLoss(loss=loss, low_clipped=low, high_clipped=high, dual_clipped=dual)


def check_dual_clip(dual_clip: float | None, name: str = "dual_clip", off: bool = True) -> None:
    """Refuse a dual clip that is not a finite number > 1 (at <= 1 it would cap tokens at ratio
    1 and take their on-policy gradient; NaN would turn it off silently). name: the setting the
    message names; off: None is allowed (and the message says so)."""
    if dual_clip is None and off:
        return
    if not (isinstance(dual_clip, numbers.Real) and dual_clip > 1 and math.isfinite(dual_clip)):
        alt = ", or None for no dual clip" if off else ""
        raise ValueError(
            f"{name}={dual_clip!r} is invalid: use a finite number > 1 (the ratio above which a "
            f"token with A < 0 is capped; 3 in Ye et al. 2019 and verl){alt}"
        )


@POLICY_LOSSES.register("reinforce")
def reinforce(
    log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor
) -> TokenLoss:
    """No importance ratio: loss = -A log pi (REINFORCE). Its gradient equals the clipped
    surrogate's at ratio 1 (on-policy, refresh interval K = 1); with K > 1 it ignores staleness.
    `old_log_probs` is accepted for the uniform signature and unused."""
    return TokenLoss(loss=-_per_token(advantages, log_probs) * log_probs)


# ---------------------------------------------------------------------------------------------
# Aggregators
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Aggregator:
    """A loss aggregation written as numerator / denominator:

        aggregate(values, mask) = numerator(values, mask).sum() / denominator(mask)

    numerator: fn(values [N,T], response_mask [N,T], **opts) -> [N], one term per row that reads
    only that row; denominator: fn(response_mask [N,T], **opts) -> scalar tensor, a constant of
    the whole batch. The split is what makes gradient accumulation exact: the loss of a batch is
    the plain sum over its micro-batches of numerator(rows) / denominator(whole batch).
    Options are keyword-only parameters of the two functions; `policy_loss` passes each
    `LossConfig` field of the same name (e.g. `max_length`).
    """

    numerator: Callable[..., torch.Tensor]
    denominator: Callable[..., torch.Tensor]

    def __call__(self, values: torch.Tensor, response_mask: torch.Tensor, **opts) -> torch.Tensor:
        """values, response_mask: [N,T] -> scalar; each option goes to the function taking it."""
        num = {k: v for k, v in opts.items() if k in _keyword_only(self.numerator)}
        den = {k: v for k, v in opts.items() if k in _keyword_only(self.denominator)}
        unknown = set(opts) - set(num) - set(den)
        if unknown:
            raise TypeError(f"aggregator options {sorted(unknown)} are not accepted by it")
        return self.numerator(values, response_mask, **num).sum() / self.denominator(
            response_mask, **den
        )


def on_mask(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """[N,T] -> [N,T]: the values on the response mask, 0 off it, selected rather than
    multiplied (0 x inf at a padded position was NaN); no gradient reaches the padded ones."""
    return torch.where(response_mask.bool(), values, torch.zeros((), dtype=values.dtype))


def _masked_row_sum(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """[N,T] -> [N]: sum of the values on the response mask."""
    return on_mask(values, response_mask).sum(-1)


def _token_count(response_mask: torch.Tensor) -> torch.Tensor:
    return response_mask.sum().to(torch.get_default_dtype()).clamp(min=1.0)


def _row_token_means(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    count = response_mask.to(values.dtype).sum(-1).clamp(min=1.0)
    return on_mask(values, response_mask).sum(-1) / count


def _row_count(response_mask: torch.Tensor) -> torch.Tensor:
    return torch.tensor(float(max(response_mask.shape[0], 1)))


def _constant_norm(response_mask: torch.Tensor, *, max_length: int | None = None) -> torch.Tensor:
    norm = float(max_length if max_length is not None else response_mask.shape[-1])
    return torch.tensor(response_mask.shape[0] * norm)


token_mean = Aggregator(_masked_row_sum, _token_count)
"""Sum over all response tokens in the batch / number of response tokens (DAPO, TRL `dapo`)."""
seq_mean_token_mean = Aggregator(_row_token_means, _row_count)
"""Mean over sequences of each sequence's token mean (original GRPO, TRL `grpo`)."""
seq_sum_constant_norm = Aggregator(_masked_row_sum, _constant_norm)
"""Token sum / (N * max_length), a constant normaliser (Dr. GRPO, Liu et al. 2025): no length
bias. max_length defaults to T, the padded completion length (pass the generation limit)."""

AGGREGATORS.add("token_mean", token_mean)
AGGREGATORS.add("seq_mean_token_mean", seq_mean_token_mean)
AGGREGATORS.add("seq_sum_constant_norm", seq_sum_constant_norm)


# ---------------------------------------------------------------------------------------------
# KL estimators (Schulman 2020, "Approximating KL divergence"), lr = log pi_ref - log pi
# ---------------------------------------------------------------------------------------------


@KL_ESTIMATORS.register("k1")
def kl_k1(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """k1 = -lr = log pi - log pi_ref (unbiased, high variance, can be negative)."""
    return log_probs - ref_log_probs


@KL_ESTIMATORS.register("k2")
def kl_k2(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """k2 = lr^2 / 2 (biased, low variance, >= 0)."""
    return 0.5 * (ref_log_probs - log_probs) ** 2


K3_MAX_LOG_RATIO = 20.0
"""|lr| beyond which k3 reads the log-ratio as +-20 (verl's `low_var_kl`): exp(lr) stays finite."""
K3_MAX = 10.0
"""The most one token's k3 contributes by default (`LossConfig.k3_max`; verl's `low_var_kl`)."""


@KL_ESTIMATORS.register("k3")
def kl_k3(
    log_probs: torch.Tensor, ref_log_probs: torch.Tensor, *, k3_max: float | None = K3_MAX
) -> torch.Tensor:
    """k3 = exp(lr) - lr - 1 (unbiased, >= 0; GRPO's default). Computed as expm1(lr) - lr,
    clamped at 0: the literal form cancels to small negative values for |lr| < 1e-8.

    Clamped as verl's `low_var_kl` (`core_algos.kl_penalty_forward`): lr to [-20, 20]
    (`K3_MAX_LOG_RATIO`) and k3 to <= k3_max (default 10, `K3_MAX`; None: neither clamp, the
    textbook k3, whose blow-up the bandit's `stale_kl_divergence` scenario simulates), so
    that one token far from the reference cannot make the loss or its gradient inf (before
    2026-12-06, session 40, one token with lr > 88.7 made them inf in float32). A token at the
    bound contributes k3_max and no gradient; inside it (at 10: -11.0 < lr < 2.61) the value and
    the gradient are the unclamped formula's, bit for bit.
    """
    lr = ref_log_probs - log_probs
    if k3_max is None:
        return (torch.expm1(lr) - lr).clamp(min=0.0)
    lr = lr.clamp(-K3_MAX_LOG_RATIO, K3_MAX_LOG_RATIO)
    return (torch.expm1(lr) - lr).clamp(0.0, k3_max)


def asymmetric_kl_weights(
    advantages: torch.Tensor, *, kl_coef: float, kl_coef_negative: float | None
) -> torch.Tensor:
    """Per-completion KL coefficient [N] (MDP-GRPO's asymmetric KL, arXiv 2606.06058): a completion
    with A < 0 gets `kl_coef_negative` (paper 0.025), otherwise `kl_coef` (paper 0.01). With
    `kl_coef_negative=None` every completion gets `kl_coef`. advantages: [N] or [N,T] (row mean)."""
    a = advantages if advantages.ndim == 1 else advantages.mean(-1)
    if kl_coef_negative is None:
        return torch.full_like(a, kl_coef)
    return torch.where(a < 0, torch.full_like(a, kl_coef_negative), torch.full_like(a, kl_coef))


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the softmax over the last axis. logits: [..., V] -> [...]. Call it on chunks of
    positions to avoid materialising [N, T, V] probabilities."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


# ---------------------------------------------------------------------------------------------
# Composition
# ---------------------------------------------------------------------------------------------


KL_TEMPERATURES = ("one", "sampled")
"""`LossConfig.kl_temperature`'s values."""


@dataclass(frozen=True)
class LossConfig:
    """The pieces of the GRPO objective, by registry name, with their coefficients."""

    policy_loss: str = "clipped"
    """Per-token objective: 'clipped' (ratio + clip) or 'reinforce' (no ratio)."""
    aggregator: str = "token_mean"
    """'token_mean', 'seq_mean_token_mean' or 'seq_sum_constant_norm' (Dr. GRPO)."""
    epsilon_low: float = 0.2
    """Lower clip range of the ratio (1 - epsilon_low)."""
    epsilon_high: float | None = None
    """Upper clip range (1 + epsilon_high); None: same as epsilon_low."""
    dual_clip: float | None = None
    """Dual clip (Ye et al. 2019; verl's `clip_ratio_c`, 3 there): a token with A < 0 adds at most
    -dual_clip A and no gradient once its ratio exceeds dual_clip. None: off (the paper's and
    TRL's clipped surrogate). Since 2026-12-07, session 41."""
    kl_estimator: str = "k3"
    """'k1', 'k2' or 'k3'; used only when kl_coef > 0 or kl_coef_negative is set."""
    kl_coef: float = 0.0
    """KL coefficient (TRL's `beta`); with asymmetric KL, that of completions with A >= 0."""
    kl_coef_negative: float | None = None
    """Asymmetric KL: coefficient of completions with A < 0 (MDP-GRPO: 0.025 with kl_coef 0.01)."""
    k3_max: float | None = K3_MAX
    """The most one token's k3 KL contributes (verl's `low_var_kl`: 10; k3's log-ratio is also
    clamped to [-20, 20]); a token beyond it adds k3_max and no gradient: k3 stops pulling a
    token whose probability fell below 1/13.6 of the reference's. None: no cap and no log-ratio
    clamp (the bandit's reproductions, whose KL-anchored plateaus lie there: `reproduce
    group-size`, G = 16; and its `stale_kl_divergence` scenario, which diverges).
    Before 2026-12-06 (session 40) k3 had no cap."""
    kl_temperature: str = "one"
    """The policies the KL compares: 'one' (the current and the reference policy at T = 1,
    whatever temperature drew the tokens: MDP-GRPO's code) or 'sampled' (both at the temperature
    each completion was drawn at: TRL's, whose one temperature scores everything). Read by the
    trainer, which passes `policy_loss` the matching log-probs; no effect where every temperature
    is 1. Before 2026-12-06 (session 40) the KL was always 'sampled' (docs/trainer.md)."""
    entropy_coef: float = 0.0
    """Entropy bonus coefficient (subtracted from the loss); 0 by default as in the papers."""
    max_length: int | None = None
    """Constant normaliser for 'seq_sum_constant_norm' (the generation limit); None: padded T."""
    aggregator_options: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        POLICY_LOSSES.get(self.policy_loss)
        AGGREGATORS.get(self.aggregator)
        KL_ESTIMATORS.get(self.kl_estimator)
        if self.kl_temperature not in KL_TEMPERATURES:
            raise ValueError(
                f"loss.kl_temperature={self.kl_temperature!r} is invalid: use 'one' (the KL "
                "between the policies at T = 1, the default) or 'sampled' (at each completion's "
                "sampling temperature)"
            )
        # `not x >= 0` (not `x < 0`): NaN fails it, where it would silently turn clipping or KL off
        optional = ("epsilon_high", "kl_coef_negative", "k3_max")
        for name in ("epsilon_low", "kl_coef", "entropy_coef", *optional):
            value = getattr(self, name)
            if value is None and name in optional:
                continue
            if not (value >= 0 and math.isfinite(value)):
                alt = " or None" if name in optional else ""
                raise ValueError(f"{name} must be >= 0{alt}, a finite number; got {value!r}")
        check_dual_clip(self.dual_clip, "loss.dual_clip")
        self._check_read()
        if self.k3_max == 0:
            raise ValueError("k3_max must be > 0 (the cap of one token's k3) or None (no cap)")
        lengths = {"max_length": self.max_length}
        lengths["aggregator_options.max_length"] = self.aggregator_options.get("max_length")
        for name, length in lengths.items():
            whole = isinstance(length, int | float) and not isinstance(length, bool)
            if length is not None and not (whole and length >= 1 and float(length).is_integer()):
                raise ValueError(
                    f"{name} must be None (the padded length T) or a whole number of tokens >= 1 "
                    f"(the generation limit), got {length!r}: a value <= 0 flips or breaks the "
                    "Dr. GRPO loss"
                )

    def _check_read(self) -> None:
        """Refuse a policy-loss option set away from its default that the chosen loss does not
        read (loss.dual_clip with 'reinforce'): it would be ignored in silence."""
        names, chosen = POLICY_LOSSES.names(), _keyword_only(POLICY_LOSSES.get(self.policy_loss))
        for f in fields(self):
            users = [n for n in names if f.name in _keyword_only(POLICY_LOSSES.get(n))]
            if users and f.name not in chosen and getattr(self, f.name) != f.default:
                raise ValueError(
                    f"loss.{f.name}={getattr(self, f.name)!r} has no effect with loss.policy_loss="
                    f"{self.policy_loss!r}, which does not read it: drop it, or use "
                    f"loss.policy_loss={' or '.join(map(repr, users))}"
                )

    @property
    def uses_reference(self) -> bool:
        """True when a reference model is needed (some KL coefficient is non-zero)."""
        return self.kl_coef > 0 or bool(self.kl_coef_negative)


@dataclass(frozen=True)
class LossResult:
    """loss: scalar tensor to backpropagate; metrics: floats with TRL's names where they exist."""

    loss: torch.Tensor
    metrics: dict[str, float]


def config_options(fn: Callable[..., object], config: LossConfig) -> dict[str, object]:
    """The `LossConfig` fields that a registry entry consumes: those named by its keyword-only
    parameters (the entry declares them in its signature; callers never switch on its name)."""
    wanted = _keyword_only(fn)
    return {f.name: getattr(config, f.name) for f in fields(config) if f.name in wanted}


def _keyword_only(fn: Callable[..., object]) -> set[str]:
    params = inspect.signature(fn).parameters.values()
    return {p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}


def aggregator_options(config: LossConfig) -> tuple[dict[str, object], dict[str, object]]:
    """(numerator options, denominator options) of the configured aggregator: the LossConfig
    fields each function declares, overridden by `aggregator_options` entries it accepts."""
    agg = AGGREGATORS.get(config.aggregator)
    out = []
    for fn in (agg.numerator, agg.denominator):
        extra = {k: v for k, v in config.aggregator_options.items() if k in _keyword_only(fn)}
        out.append({**config_options(fn, config), **extra})
    return out[0], out[1]


def loss_denominator(response_mask: torch.Tensor, config: LossConfig) -> torch.Tensor:
    """The configured aggregator's denominator over a whole batch (response_mask [N,T]): pass it
    as `policy_loss(..., denominator=)` for each micro-batch of that batch."""
    _, denominator_opts = aggregator_options(config)
    return AGGREGATORS.get(config.aggregator).denominator(response_mask, **denominator_opts)


def policy_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    config: LossConfig,
    *,
    ref_log_probs: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    denominator: torch.Tensor | None = None,
    kl_log_probs: torch.Tensor | None = None,
) -> LossResult:
    """The GRPO objective: aggregate(per-token loss + w_i KL) - entropy_coef aggregate(entropy).

    log_probs, old_log_probs, ref_log_probs, entropy, response_mask: [N,T];
    advantages: [N] or [N,T]. denominator: the aggregator's denominator of the batch these rows
    belong to (`loss_denominator`); None: that of these rows. With it, the losses of disjoint
    micro-batches sum to the loss of their batch (the metrics are those of these rows).
    kl_log_probs: [N,T] the current policy's log-probs the KL to ref_log_probs is taken at,
    where they are not `log_probs` (the trainer's `kl_temperature='one'` with tokens drawn at
    T != 1: log_probs at the sampling temperature for the ratio, these at T = 1); None:
    log_probs.
    Positions off the response mask are set to 0 in every [N,T] input first (`on_mask`): a
    padded position may hold anything (-inf from a masked log-softmax) without a NaN loss or
    gradient.
    """
    log_probs, old_log_probs = (
        on_mask(log_probs, response_mask),
        on_mask(old_log_probs, response_mask),
    )
    if ref_log_probs is not None:
        ref_log_probs = on_mask(ref_log_probs, response_mask)
    kl_log_probs = log_probs if kl_log_probs is None else on_mask(kl_log_probs, response_mask)
    if entropy is not None:
        entropy = on_mask(entropy, response_mask)
    if advantages.ndim == 2:
        advantages = on_mask(advantages, response_mask)
    numerator_opts, denominator_opts = aggregator_options(config)
    aggregate = AGGREGATORS.get(config.aggregator)
    if denominator is None:
        denominator = aggregate.denominator(response_mask, **denominator_opts)

    def reduce(values: torch.Tensor) -> torch.Tensor:
        return aggregate.numerator(values, response_mask, **numerator_opts).sum() / denominator

    token_fn = POLICY_LOSSES.get(config.policy_loss)
    token = token_fn(log_probs, old_log_probs, advantages, **config_options(token_fn, config))
    per_token = token.loss
    metrics = _clip_metrics(token, response_mask)
    if config.uses_reference:
        if ref_log_probs is None:
            raise ValueError(
                "a KL coefficient is set but ref_log_probs is None: pass ref_log_probs= (the "
                "reference model's log-probs) or set kl_coef=0 and kl_coef_negative=None"
            )
        kl_fn = KL_ESTIMATORS.get(config.kl_estimator)
        kl = kl_fn(kl_log_probs, ref_log_probs, **config_options(kl_fn, config))
        w = asymmetric_kl_weights(
            advantages, kl_coef=config.kl_coef, kl_coef_negative=config.kl_coef_negative
        )
        per_token = per_token + w.unsqueeze(-1) * kl
        metrics["kl"] = float(token_mean(kl.detach(), response_mask))
    loss = reduce(per_token)
    if entropy is not None:
        metrics["entropy"] = float(token_mean(entropy.detach(), response_mask))
        if config.entropy_coef:
            loss = loss - config.entropy_coef * reduce(entropy)
    metrics["frac_gradient_tokens"] = gradient_token_fraction(advantages, response_mask)
    return LossResult(loss=loss, metrics=metrics)


def _clip_metrics(token: TokenLoss, response_mask: torch.Tensor) -> dict[str, float]:
    if token.low_clipped is None or token.high_clipped is None:
        return {}
    low = token_mean(token.low_clipped.double(), response_mask)
    high = token_mean(token.high_clipped.double(), response_mask)
    metrics = {
        "clip_ratio/low_mean": float(low),
        "clip_ratio/high_mean": float(high),
        "clip_ratio/region_mean": float(low + high),
    }
    if token.dual_clipped is not None:
        dual = token_mean(token.dual_clipped.double(), response_mask)
        metrics["clip_ratio/dual_mean"] = float(dual)  # verl's pg_clipfrac_lower
    return metrics


def gradient_token_fraction(
    advantages: torch.Tensor, response_mask: torch.Tensor, *, atol: float = 1e-12
) -> float:
    """Fraction of response tokens whose advantage is non-zero: the share of the batch that carries
    a policy-gradient signal. Degenerate groups still cost their tokens in a token-mean denominator.
    advantages: [N] or [N,T]; response_mask: [N,T]."""
    adv = _per_token(advantages, response_mask.to(torch.float64))
    return float(token_mean((adv.abs() > atol).double(), response_mask))
