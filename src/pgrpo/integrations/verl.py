"""pgrpo's advantage estimators and policy losses inside verl (tested with verl 0.9.1).

`register()` (also run at import) adds every pgrpo estimator to verl's `ADV_ESTIMATOR_REGISTRY`
and every pgrpo per-token objective to its `POLICY_LOSS_REGISTRY`, under pgrpo-prefixed names so
they never shadow verl's own:

    algorithm.adv_estimator=pgrpo_sign            (pgrpo_grpo, pgrpo_dr_grpo, pgrpo_rloo, ...)
    actor_rollout_ref.actor.policy_loss.loss_mode=pgrpo_clipped   (or pgrpo_reinforce)

Estimators have verl's signature
    fn(token_level_rewards [B,T], response_mask [B,T], config=None, index=uid [B], **kw)
        -> (advantages [B,T], returns [B,T])
with the outcome reward of a row = the sum of its token-level rewards, grouped by `index` (verl's
per-prompt `uid`). Options come from an optional `pgrpo` block in verl's algorithm config
(`+algorithm.pgrpo.options.num_constraints=3`, `+algorithm.pgrpo.transform=prospect`, ...), see
`VerlAdvantageOptions`. Keyword arguments a custom caller passes (e.g. `num_constraints=[B]`)
override it.

Policy losses have verl's signature
    fn(old_log_prob [B,T], log_prob [B,T], advantages [B,T], response_mask [B,T],
       loss_agg_mode, config: ActorConfig, rollout_is_weights [B,T] | None) -> (loss, metrics)
The per-token objective is pgrpo's (`POLICY_LOSSES`), with log(ratio) clamped to +-20 and the
dual clip at `clip_ratio_c` as in verl's `vanilla`; the aggregation is verl's `agg_loss` with
verl's global-batch info, because only verl knows the token and sequence counts of the whole
data-parallel batch (with one process it equals pgrpo's aggregator of the same name: tested).
KL regularisation stays verl's (`actor.use_kl_loss`): verl's policy-loss call does not pass the
reference log-probs, so pgrpo's asymmetric KL is not available here (use the TRL adapter).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from pgrpo.core.advantages import ADVANTAGE_ESTIMATORS, compute_advantages
from pgrpo.core.losses import POLICY_LOSSES, check_dual_clip, gradient_token_fraction, token_mean
from pgrpo.core.rewardinput import NonFiniteRewards

PREFIX = "pgrpo_"
SUPPORTED_VERL_VERSIONS = ("0.9.1",)

# verl's aggregation names -> pgrpo's (same quantity with one process; tested).
AGG_MODES = {
    "token-mean": "token_mean",
    "seq-mean-token-mean": "seq_mean_token_mean",
    "seq-mean-token-sum-norm": "seq_sum_constant_norm",
}

# How a verl user passes nan="mask" (said by the error of a NaN reward under the default).
NAN_SETTING = "set +algorithm.pgrpo.nan=mask in verl's config"

# verl's `vanilla` clamps log(ratio) to +-20 "for stability"; pgrpo_clipped does the same.
VERL_MAX_LOG_RATIO = 20.0

# verl's default `clip_ratio_c` (`vanilla` reads `config.get("clip_ratio_c", 3.0)`): the dual clip.
VERL_CLIP_RATIO_C = 3.0

# verl's own default where pgrpo's differs: verl's std-normalised estimators use eps 1e-6
# (pgrpo's follow TRL, 1e-4); given to every estimator whose signature takes `eps`.
VERL_EPS = 1e-6


@dataclass(frozen=True)
class VerlAdvantageOptions:
    """The optional `algorithm.pgrpo` block of a verl config (all fields optional)."""

    options: dict[str, Any] = field(default_factory=dict)
    """Estimator options, e.g. {num_constraints: 3, alpha: 0.2} for dual_anchor, {eps: 1e-6}."""
    transform: str | None = "default"
    """Advantage transform name ('prospect'), None for none, 'default' for the paper default."""
    transform_options: dict[str, Any] = field(default_factory=dict)
    """Options of the transform, e.g. {lambda_neg: 2.0}."""
    nan: str = "error"
    """'error' (a NaN reward stops the step) or 'mask' (advantage 0, left out of group stats)."""

    @classmethod
    def from_config(cls, config: Any) -> VerlAdvantageOptions:
        """Read `config.pgrpo` from verl's AlgoConfig, an OmegaConf DictConfig, a dict or None."""
        block = None if config is None else _get(config, "pgrpo")
        if block is None:
            return cls()
        block = _to_container(block)
        if not isinstance(block, Mapping):
            raise TypeError(f"algorithm.pgrpo must be a mapping, got {type(block).__name__}")
        unknown = set(block) - {"options", "transform", "transform_options", "nan"}
        if unknown:
            raise ValueError(
                f"unknown key(s) {sorted(unknown)} in algorithm.pgrpo; valid keys: options, "
                "transform, transform_options, nan"
            )
        return cls(**block)


def _get(config: Any, key: str) -> Any:
    if isinstance(config, Mapping) or hasattr(config, "get"):
        try:
            return config.get(key, None)
        except Exception:  # noqa: BLE001 - OmegaConf struct mode raises on missing keys
            return None
    return getattr(config, key, None)


def _to_container(value: Any) -> Any:
    """OmegaConf containers -> plain dicts/lists (no-op for plain Python values)."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf
    except ImportError:  # pragma: no cover - verl always ships omegaconf
        return value
    if isinstance(value, DictConfig | ListConfig):
        return OmegaConf.to_container(value, resolve=True)
    return value


# ---------------------------------------------------------------------------------------------
# Advantage estimators
# ---------------------------------------------------------------------------------------------


def outcome_advantages(
    name: str,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    config: Any = None,
    **overrides: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """pgrpo estimator `name` on verl's token-level batch.

    token_level_rewards, response_mask: [B,T]; index: [B] group ids (verl's `uid`), or None (then
    every row is its own group: only group-free estimators such as `sign` accept that).
    Returns (advantages, returns): both [B,T], the row's advantage on its response tokens, 0 on
    padding (verl's outcome-estimator convention).
    """
    opts = VerlAdvantageOptions.from_config(config)
    unscaled = ADVANTAGE_ESTIMATORS.get(name).unscaled_variant
    if unscaled is not None and _get(config, "norm_adv_by_std_in_grpo") is False:
        name = unscaled  # verl's switch for the estimator without std scaling (Dr. GRPO)
    options = {**_verl_defaults(name), **opts.options, **overrides}
    scores = token_level_rewards.sum(dim=-1)
    group_ids = np.arange(scores.shape[0]) if index is None else index
    with torch.no_grad():
        try:
            result = compute_advantages(
                name,
                scores,
                group_ids=group_ids,
                transform=opts.transform,
                transform_options=opts.transform_options,
                nan=opts.nan,
                **options,
            )
        except NonFiniteRewards as exc:  # the fix in a verl user's terms
            raise exc.with_setting(NAN_SETTING) from None
        advantages = result.advantages.unsqueeze(-1) * response_mask.to(scores.dtype)
    return advantages, advantages


def _verl_defaults(name: str) -> dict[str, Any]:
    """verl's default options for estimator `name`: eps 1e-6 where its signature takes eps."""
    takes = inspect.signature(ADVANTAGE_ESTIMATORS.get(name).fn).parameters
    return {"eps": VERL_EPS} if "eps" in takes else {}


def make_verl_estimator(name: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """verl-signature wrapper of the pgrpo estimator `name` (validated now, not at call time)."""
    ADVANTAGE_ESTIMATORS.get(name)

    def estimator(
        token_level_rewards: torch.Tensor,
        response_mask: torch.Tensor,
        config: Any = None,
        index: Any = None,
        reward_baselines: Any = None,  # passed by verl when present; unused by pgrpo
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return outcome_advantages(name, token_level_rewards, response_mask, index, config, **kwargs)

    estimator.__name__ = f"{PREFIX}{name}_outcome_advantage"
    estimator.__doc__ = f"pgrpo's {name!r} advantage on verl's token-level batch (see pgrpo docs)."
    return estimator


# ---------------------------------------------------------------------------------------------
# Policy losses
# ---------------------------------------------------------------------------------------------


def _loss_kwargs(token_fn: Callable[..., Any], config: Any) -> dict[str, Any]:
    """verl's clip ranges, log-ratio clamp and dual clip, for a per-token loss whose signature
    takes them."""
    takes = inspect.signature(token_fn).parameters
    kwargs: dict[str, Any] = {}
    if "max_log_ratio" in takes:
        kwargs["max_log_ratio"] = VERL_MAX_LOG_RATIO
    if "dual_clip" in takes:
        clip_ratio_c = _get(config, "clip_ratio_c")
        clip_ratio_c = VERL_CLIP_RATIO_C if clip_ratio_c is None else clip_ratio_c
        check_dual_clip(clip_ratio_c, "actor_rollout_ref.actor.clip_ratio_c", off=False)
        kwargs["dual_clip"] = float(clip_ratio_c)
    if "epsilon_low" not in takes and "epsilon_high" not in takes:
        return kwargs
    clip = _get(config, "clip_ratio")
    low = _get(config, "clip_ratio_low")
    high = _get(config, "clip_ratio_high")
    low = clip if low is None else low
    high = clip if high is None else high
    if low is not None and "epsilon_low" in takes:
        kwargs["epsilon_low"] = float(low)
    if high is not None and "epsilon_high" in takes:
        kwargs["epsilon_high"] = float(high)
    return kwargs


def make_verl_policy_loss(name: str) -> Callable[..., tuple[torch.Tensor, dict[str, Any]]]:
    """verl-signature wrapper of pgrpo's per-token objective `name` from `POLICY_LOSSES`."""
    token_fn = POLICY_LOSSES.get(name)

    def policy_loss_fn(
        old_log_prob: torch.Tensor,
        log_prob: torch.Tensor,
        advantages: torch.Tensor,
        response_mask: torch.Tensor,
        loss_agg_mode: str = "token-mean",
        config: Any = None,
        rollout_is_weights: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        from verl.trainer.ppo.core_algos import agg_loss

        token = token_fn(log_prob, old_log_prob, advantages, **_loss_kwargs(token_fn, config))
        per_token = token.loss
        if rollout_is_weights is not None:
            per_token = per_token * rollout_is_weights
        batch_info = dict(_get(config, "global_batch_info") or {})
        loss = agg_loss(per_token, response_mask, loss_agg_mode, **batch_info)
        mask = response_mask.to(log_prob.dtype)
        log_ratio = (
            (log_prob - old_log_prob).detach().clamp(-VERL_MAX_LOG_RATIO, VERL_MAX_LOG_RATIO)
        )
        metrics: dict[str, Any] = {
            "actor/ppo_kl": float(token_mean(-log_ratio, mask)),  # verl's, of the clamped ratio
            "actor/pgrpo/frac_gradient_tokens": gradient_token_fraction(advantages, mask),
        }
        if token.low_clipped is not None and token.high_clipped is not None:
            low = float(token_mean(token.low_clipped.double(), mask))
            high = float(token_mean(token.high_clipped.double(), mask))
            metrics["actor/pg_clipfrac"] = low + high
            metrics["actor/pgrpo/clip_ratio/low_mean"] = low
            metrics["actor/pgrpo/clip_ratio/high_mean"] = high
        if token.dual_clipped is not None:
            lower = token_mean(token.dual_clipped.double(), mask)
            metrics["actor/pg_clipfrac_lower"] = float(lower)  # verl's: the dual-clipped share
        return loss, metrics

    policy_loss_fn.__name__ = f"{PREFIX}{name}_policy_loss"
    policy_loss_fn.__doc__ = f"pgrpo's {name!r} per-token objective, aggregated by verl's agg_loss."
    return policy_loss_fn


# ---------------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------------

_ESTIMATORS: dict[str, Callable[..., Any]] = {}
_LOSSES: dict[str, Callable[..., Any]] = {}


@dataclass(frozen=True)
class Registered:
    """The verl names added by `register()`."""

    advantage_estimators: list[str]
    policy_losses: list[str]


def register() -> Registered:
    """Register every pgrpo estimator and policy loss with verl. Idempotent: calling it again (or
    after pgrpo registered a new estimator) adds only what is missing and never re-wraps."""
    try:
        import verl
        from verl.trainer.ppo import core_algos
    except ImportError as exc:
        raise ImportError(
            "pgrpo.integrations.verl needs verl (tested: 0.9.1). verl pins transformers<5.11, so "
            "install it in its own environment: see docs/integrations.md ('verl')"
        ) from exc
    version = getattr(verl, "__version__", "unknown")
    if version not in SUPPORTED_VERL_VERSIONS:
        import warnings

        warnings.warn(
            f"pgrpo's verl adapter is tested with verl {', '.join(SUPPORTED_VERL_VERSIONS)}, found "
            f"{version}; if registration or the estimator signature fails, install verl==0.9.1",
            stacklevel=2,
        )
    for name in ADVANTAGE_ESTIMATORS.names():
        fn = _ESTIMATORS.setdefault(name, make_verl_estimator(name))
        core_algos.register_adv_est(PREFIX + name)(fn)
    for name in POLICY_LOSSES.names():
        fn = _LOSSES.setdefault(name, make_verl_policy_loss(name))
        core_algos.register_policy_loss(PREFIX + name)(fn)
    return Registered(
        advantage_estimators=[PREFIX + n for n in ADVANTAGE_ESTIMATORS.names()],
        policy_losses=[PREFIX + n for n in POLICY_LOSSES.names()],
    )


try:  # registration at import: `import pgrpo.integrations.verl` is all a verl worker needs
    REGISTERED: Registered | None = register()
except ImportError:
    REGISTERED = None
