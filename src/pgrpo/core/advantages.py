"""Advantage estimators and advantage transforms, behind two registries.

One entry point for every caller (trainer, bandit testbed, TRL/verl adapters):

    result = compute_advantages("grpo", rewards, group_size=8)
    result.advantages   # same type, length and order as `rewards`
    result.metrics      # stable names, floats

Estimators (`ADVANTAGE_ESTIMATORS`) share one signature:
    fn(rewards: [N] float tensor, groups: Groups, *, valid: [N] bool | None, transform, **options)
        -> advantages: [N]
`transform` is a callable [N] -> [N] (or None); single-anchor estimators apply it to their output,
`dual_anchor` applies it to each anchor before mixing (MDP-GRPO). Each estimator declares its own
default transform (only `dual_anchor`'s is `prospect`, as in the paper).

Transforms (`ADVANTAGE_TRANSFORMS`): fn(values: [N], **options) -> [N].

NaN/inf rewards: `nan="error"` (default) raises naming the bad positions; `nan="mask"` leaves them
out of every group statistic, gives them advantage 0 and reports `advantages/nonfinite_rewards`.
Option values outside an estimator's declared domains (`pgrpo.core.domains`: eps >= 0, alpha in
[0, 1], ...) fail in `check_options`, which `compute_advantages` and the trainer's config call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from pgrpo._registry import Registry, check_keywords
from pgrpo.core import domains as dom
from pgrpo.core.groups import Groups, broadcast, group_moments, make_groups, scale_by_group
from pgrpo.core.rewardinput import as_reward_tensor, check_finite, warn_outside, work_dtype
from pgrpo.core.rewardinput import result_dtype as result_dtype  # re-exported (docs name it)

Transform = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class AdvantageEstimator:
    """A registered estimator: the function, its paper default transform, whether it uses groups."""

    fn: Callable[..., torch.Tensor]
    default_transform: str | None = None
    needs_group_stats: bool = True  # False: per-rollout formula (sign), singleton groups are fine
    columns: tuple[str, ...] = ()
    """Per-completion inputs the estimator takes as options of the same name ([N] values); a
    task provides column c as its method `task.c(example)` (e.g. `num_constraints`)."""
    batch_coupled: bool = False
    """True when a completion's advantage depends on other groups (a batch statistic), so it is
    not a function of its own group's rewards alone (the bandit's exact force needs that)."""
    unscaled_variant: str | None = None
    """The registered estimator that is this one without the std scaling (verl's
    `norm_adv_by_std_in_grpo=False`); None: no such switch applies."""
    binary_force_limit: Callable[[np.ndarray], np.ndarray] | None = None
    """Closed-form G -> infinity limit of the expected force for binary rewards, p: [P] -> [P]
    (docs/dynamics.md); None: computed numerically at a large G."""
    domains: Mapping[str, dom.Domain] = field(default_factory=dict)
    """Option name -> its domain (`pgrpo.core.domains`); `check_options` refuses a value outside
    it in one line (eps < 0, alpha outside [0, 1], ...)."""
    takes_reward_range: bool = False
    """True when the estimator takes `reward_range=(lo, hi)`, the bounds of one reward: the
    trainer passes the run's range (the task's declared one) unless the options give it."""


@dataclass(frozen=True)
class AdvantageResult:
    """advantages: [N], same type (numpy/torch), device and order as the rewards given, in the
    float dtype of `result_dtype` (float32 and float64 rewards keep theirs)."""

    advantages: Any
    metrics: dict[str, float]


ADVANTAGE_ESTIMATORS: Registry[AdvantageEstimator] = Registry("advantage estimator")
ADVANTAGE_TRANSFORMS: Registry[Callable[..., torch.Tensor]] = Registry("advantage transform")

_DEFAULT = "default"


def register_advantage(
    name: str,
    *,
    default_transform: str | None = None,
    needs_group_stats: bool = True,
    columns: tuple[str, ...] = (),
    batch_coupled: bool = False,
    unscaled_variant: str | None = None,
    binary_force_limit: Callable[[np.ndarray], np.ndarray] | None = None,
    domains: Mapping[str, dom.Domain] | None = None,
    takes_reward_range: bool = False,
) -> Callable[[Callable[..., torch.Tensor]], Callable[..., torch.Tensor]]:
    """Decorator registering an estimator `fn(rewards, groups, *, valid, transform, **options)`;
    the keywords are its metadata (see the fields of `AdvantageEstimator`)."""

    def deco(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        entry = AdvantageEstimator(
            fn,
            default_transform,
            needs_group_stats,
            tuple(columns),
            batch_coupled,
            unscaled_variant,
            binary_force_limit,
            dict(domains or {}),
            takes_reward_range,
        )
        ADVANTAGE_ESTIMATORS.add(name, entry)
        return fn

    return deco


# ---------------------------------------------------------------------------------------------
# Estimators
# ---------------------------------------------------------------------------------------------


def _apply(transform: Transform | None, values: torch.Tensor) -> torch.Tensor:
    return values if transform is None else transform(values)


def _standardise(
    centered: torch.Tensor, std: torch.Tensor, eps: float, groups: Groups
) -> torch.Tensor:
    """centered [N] / (std [n_groups] + eps), in place: exactly 0 in a group whose std is 0,
    whatever eps (the notes' z = 0 at sigma = 0; with eps = 0 the formula gives 0/0 = NaN), and
    bit for bit (r - mu) * (1 / (sigma + eps)) in every other group."""
    factor = torch.where(std > 0, 1.0 / (std + eps), torch.zeros_like(std))
    return scale_by_group(centered, factor, groups, inplace=True)


_Z_DOMAINS = {"eps": dom.non_negative, "unbiased": dom.boolean}


@register_advantage(
    "grpo",
    unscaled_variant="dr_grpo",
    binary_force_limit=lambda p: np.sqrt(p * (1.0 - p)),
    domains=_Z_DOMAINS,
)
def grpo(
    rewards: torch.Tensor,
    groups: Groups,
    *,
    valid: torch.Tensor | None = None,
    transform: Transform | None = None,
    unbiased: bool = True,
    eps: float = 1e-4,
) -> torch.Tensor:
    """Z-score within the group: (r - mu) / (sigma + eps) (Shao et al. 2024, DeepSeekMath).

    Defaults match TRL (Bessel-corrected std, eps 1e-4); verl uses eps 1e-6 (`eps=1e-6`) and
    `unbiased=True` too. A zero-variance group gets exactly 0 (gradient starvation), whatever
    eps >= 0: eps = 0 gives the shift- and scale-invariant z-score.
    """
    m = group_moments(rewards, groups, unbiased=unbiased, mask=valid)
    assert m.std is not None
    return _apply(transform, _standardise(m.centered, m.std, eps, groups))


@register_advantage("dr_grpo", binary_force_limit=lambda p: p * (1.0 - p))
def dr_grpo(
    rewards: torch.Tensor,
    groups: Groups,
    *,
    valid: torch.Tensor | None = None,
    transform: Transform | None = None,
) -> torch.Tensor:
    """Mean-centred, no std: r - mu (Liu et al. 2025, "Understanding R1-Zero-like training").

    Pair it with the `seq_sum_constant_norm` aggregator for the full Dr. GRPO objective.
    """
    m = group_moments(rewards, groups, mask=valid, with_std=False)
    return _apply(transform, m.centered)


@register_advantage("rloo", binary_force_limit=lambda p: p * (1.0 - p))
def rloo(
    rewards: torch.Tensor,
    groups: Groups,
    *,
    valid: torch.Tensor | None = None,
    transform: Transform | None = None,
) -> torch.Tensor:
    """Leave-one-out baseline: r_i - mean of the other G - 1 rewards = G/(G-1) (r_i - mu)
    (Ahmadian et al. 2024). Ragged groups use each group's own size."""
    m = group_moments(rewards, groups, mask=valid, with_std=False)
    scale = m.count / (m.count - 1).clamp(min=1)
    return _apply(transform, scale_by_group(m.centered, scale, groups, inplace=True))


@register_advantage(
    "batch_std",
    batch_coupled=True,
    binary_force_limit=lambda p: np.sqrt(p * (1.0 - p)),
    domains=_Z_DOMAINS,
)
def batch_std(
    rewards: torch.Tensor,
    groups: Groups,
    *,
    valid: torch.Tensor | None = None,
    transform: Transform | None = None,
    unbiased: bool = True,
    eps: float = 1e-4,
) -> torch.Tensor:
    """Group mean, batch std: (r - mu_group) / (sigma_batch + eps) (TRL `scale_rewards="batch"`);
    exactly 0 everywhere when sigma_batch is 0, whatever eps >= 0."""
    m = group_moments(rewards, groups, mask=valid, with_std=False)
    pool = rewards if valid is None else rewards[valid]
    sigma = pool.std(correction=1 if unbiased else 0) if pool.numel() > 1 else pool.new_zeros(())
    spread = bool(sigma > 0)
    adv = m.centered / (sigma + eps) if spread else torch.zeros_like(m.centered)
    return _apply(transform, adv)


@register_advantage(
    "sign",
    needs_group_stats=False,
    binary_force_limit=lambda p: 2.0 * p * (1.0 - p),
    domains={"reward_range": dom.reward_range},
    takes_reward_range=True,
)
def sign(
    rewards: torch.Tensor,
    groups: Groups,
    *,
    valid: torch.Tensor | None = None,
    transform: Transform | None = None,
    reward_range: tuple[float, float] = (0.0, 1.0),
) -> torch.Tensor:
    """Fixed-reference Sign advantage A = 2r - 1 (arXiv 2605.07689): +1 for a correct binary
    rollout, -1 for a wrong one, independent of the group, so all-fail groups still push
    (pass@G failure descent) and all-pass groups are reinforced.

    The formula is affine: rewards outside [0, 1] are first mapped by `reward_range=(lo, hi)` to
    (r - lo) / (hi - lo); with the default range a reward of 2 gives A = 3 and a reward of -1 gives
    A = -3 (no clipping), with a RuntimeWarning naming the option (the TRL and verl integrations
    know no range of their own: since session 39 a -1 / +1 reward there is said, not silently
    trained on A in {-3, +1}). Graded rewards in [0, 1] give A in [-1, 1], zero at r = 0.5. The
    trainer passes the run's reward range (the task's declared one) unless the options give one.
    """
    lo, hi = (float(v) for v in reward_range)
    warn_outside(  # |A| > 1: the range is not the rewards'
        "sign advantage", rewards, valid, (lo, hi), "its reward_range",
        "so |A| > 1 (a reward at the range's top should give +1); give the rewards' range as the "
        "estimator's reward_range option (TRL: pgrpo_reward_range=[lo, hi]; verl: "
        "algorithm.pgrpo.options.reward_range; pgrpo train: task.reward_range)",
    )  # fmt: skip
    unit = (rewards - lo) / (hi - lo)
    return _apply(transform, 2.0 * unit - 1.0)


@register_advantage(
    "dual_anchor",
    default_transform="prospect",
    columns=("num_constraints",),
    domains={
        "num_constraints": dom.constraint_counts,
        "alpha": dom.unit_interval,
        "goal_mean": dom.number_or("max_mu"),
        "sigma_goal": dom.one_of("paper", "code"),
        "eps": dom.non_negative,
    },
)
def dual_anchor(
    rewards: torch.Tensor,
    groups: Groups,
    *,
    valid: torch.Tensor | None = None,
    transform: Transform | None = None,
    num_constraints: Any = None,
    alpha: float = 0.2,
    goal_mean: str | float = 0.5,
    sigma_goal: str = "paper",
    eps: float = 1e-6,
) -> torch.Tensor:
    """MDP-GRPO dual-anchor advantage (arXiv 2606.06058):

        z_i     = (r_i - mu) / (sigma_pop + eps)            relative anchor
        delta_i = (r_i - goal) / sigma_goal                  absolute anchor
        A_i     = (1 - alpha) PT(z_i) + alpha PT(delta_i)    PT = `transform` (default: prospect)

    num_constraints: C per completion ([N] or a scalar), the prompt's constraint count.
    sigma_goal="paper": 1 / (2 sqrt(C)), the std of the mean of C fair coins (default);
    sigma_goal="code": sqrt(G / (4 C)), the public code's variant (sqrt(G) smaller delta).
    goal_mean=0.5 (paper); "max_mu": the code's max(0.5, group mean), which gives all-correct
    groups zero absolute advantage again; or any float.
    On a homogeneous group z = 0, so A = alpha PT(delta) takes the sign of r - goal.
    """
    if num_constraints is None:
        raise ValueError(
            "dual_anchor needs num_constraints= (the number of constraints C of each completion's "
            "prompt, one per completion or one for all), e.g. task.num_constraints(example)"
        )
    c = torch.as_tensor(np.asarray(num_constraints, dtype=np.float64)).to(rewards.dtype)
    c = c.expand_as(rewards) if c.ndim == 0 else c.reshape(-1)
    if c.numel() != rewards.numel():
        raise ValueError(
            f"num_constraints has {c.numel()} entries but there are {rewards.numel()} rewards"
        )
    m = group_moments(rewards, groups, unbiased=False, mask=valid)
    assert m.std is not None
    mean, count = m.mean, m.count
    z = _standardise(m.centered, m.std, eps, groups)
    if sigma_goal == "paper":
        sg = 1.0 / (2.0 * c.sqrt())
    else:  # "code" (the option's domain: `check_options`)
        sg = (broadcast(count, groups) / (4.0 * c)).sqrt()
    if goal_mean == "max_mu":
        goal = broadcast(mean.clamp(min=0.5), groups)
    else:
        goal = torch.full_like(rewards, float(goal_mean))
    delta = (rewards - goal) / sg
    warn_outside(
        "dual_anchor", rewards, valid, (0.0, 1.0), "the unit interval",
        "but its absolute anchor reads a reward as the share of the C constraints met (goal "
        "0.5, sigma_goal from C): rescale the rewards to [0, 1] or use a relative estimator",
    )  # fmt: skip
    return (1.0 - alpha) * _apply(transform, z) + alpha * _apply(transform, delta)


# ---------------------------------------------------------------------------------------------
# Transforms
# ---------------------------------------------------------------------------------------------


@ADVANTAGE_TRANSFORMS.register("prospect")
@dom.with_domains(
    lambda_pos=dom.positive,
    lambda_neg=dom.positive,
    beta=dom.positive,
    form=dom.one_of("tanh", "power"),
    exponent=dom.positive,
)
def prospect(
    values: torch.Tensor,
    *,
    lambda_pos: float = 1.25,
    lambda_neg: float = 2.0,
    beta: float = 0.8,
    form: str = "tanh",
    exponent: float = 0.88,
) -> torch.Tensor:
    """Prospect-theoretic shaping (MDP-GRPO): bounded and loss-averse.

    form="tanh" (paper): lambda_pos tanh(beta v) for v >= 0, lambda_neg tanh(beta v) for v < 0;
        output in (-lambda_neg, lambda_pos).
    form="power" (Kahneman & Tversky 1979 value function): lambda_pos v^exponent for v >= 0,
        -lambda_neg (-v)^exponent for v < 0; unbounded.
    values: [N] -> [N].
    """
    if form == "tanh":
        t = torch.tanh(beta * values)
        return torch.where(values >= 0, lambda_pos * t, lambda_neg * t)
    if form == "power":
        mag = values.abs().pow(exponent)
        return torch.where(values >= 0, lambda_pos * mag, -lambda_neg * mag)
    raise ValueError(f"prospect form must be 'tanh' or 'power', got {form!r}")


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


def _resolve_transform(
    estimator: AdvantageEstimator, transform: str | Transform | None, options: dict[str, Any] | None
) -> Transform | None:
    name = estimator.default_transform if transform == _DEFAULT else transform
    if name is None:
        return None
    fn = ADVANTAGE_TRANSFORMS.get(name) if isinstance(name, str) else name
    opts = dict(options or {})
    return lambda v: fn(v, **opts)


def compute_advantages(
    name: str,
    rewards: Any,
    *,
    group_size: int | None = None,
    group_ids: Sequence[Any] | np.ndarray | torch.Tensor | None = None,
    transform: str | Transform | None = _DEFAULT,
    transform_options: dict[str, Any] | None = None,
    nan: str = "error",
    **options: Any,
) -> AdvantageResult:
    """Advantages of `rewards` ([N], numpy or torch) under the registered estimator `name`.

    group_size: contiguous groups of this size; or group_ids: one id per rollout (ragged groups).
    transform: a registered transform name, a callable, None (no transform) or the estimator's
    paper default. nan: "error" or "mask" (see module docstring). Other keyword options go to the
    estimator (unknown ones fail with the estimator's valid options).
    """
    estimator = ADVANTAGE_ESTIMATORS.get(name)
    check_options(name, options, transform=transform, transform_options=transform_options)
    r, kind = as_reward_tensor(rewards)
    groups = make_groups(r.numel(), group_size=group_size, group_ids=group_ids)
    valid, scale = check_finite(r, nan)
    smallest = groups.group_size if groups.group_size is not None else _min_size(groups)
    if estimator.needs_group_stats and r.numel() and smallest < 2:
        bad = int((groups.sizes < 2).sum())
        raise ValueError(
            f"{name!r} compares completions within a group, but {bad} group(s) have a single "
            f"completion (advantage would be 0 or undefined): use group_size >= 2, or the "
            f"group-free 'sign' estimator"
        )
    r_clean = r if valid is None else torch.where(valid, r, torch.zeros_like(r))
    fn = _resolve_transform(estimator, transform, transform_options)
    work = work_dtype(r, scale)
    adv = estimator.fn(r_clean.to(work), groups, valid=valid, transform=fn, **options)
    if valid is not None:
        adv = torch.where(valid, adv, torch.zeros_like(adv))
    adv = adv.to(r.dtype)
    metrics = _advantage_metrics(adv, valid)
    if work != r.dtype and not math.isfinite(metrics["advantages/abs_max"]):
        raise ValueError(
            f"{name!r} advantages overflow {r.dtype} (rewards reach {scale:.3g}): rescale the "
            "rewards (divide them by a constant) or pass them as float64"
        )
    out: Any = adv.to(rewards.device) if kind == "torch" else adv.numpy()
    return AdvantageResult(advantages=out, metrics=metrics)


def check_options(
    name: str,
    options: dict[str, Any] | None = None,
    *,
    transform: str | Transform | None = _DEFAULT,
    transform_options: dict[str, Any] | None = None,
) -> None:
    """TypeError naming the valid options when `options` are not keyword options of estimator
    `name`, or `transform_options` not of the transform that applies; ValueError in one line when
    an option's value is outside the estimator's declared domain (`AdvantageEstimator.domains`).
    The trainer's config calls this before any model is loaded; `compute_advantages` before
    computing."""
    estimator = ADVANTAGE_ESTIMATORS.get(name)
    check_keywords(options, estimator.fn, f"advantage estimator {name!r}", ("valid", "transform"))
    dom.check_values(f"advantage estimator {name!r}", estimator.domains, options)
    chosen = estimator.default_transform if transform == _DEFAULT else transform
    if chosen is None:
        if transform_options:
            raise TypeError(
                f"transform_options {sorted(transform_options)} are given but no transform "
                f"applies ({name!r} has none by default): name a transform (e.g. 'prospect') or "
                "drop the options"
            )
        return
    fn = ADVANTAGE_TRANSFORMS.get(chosen) if isinstance(chosen, str) else chosen
    label = f"advantage transform {chosen!r}" if isinstance(chosen, str) else "advantage transform"
    check_keywords(transform_options, fn, label)
    dom.check_values(label, dom.declared(fn), transform_options)


def _min_size(groups: Groups) -> int:
    return int(groups.sizes.min()) if groups.n_groups else 0


def _advantage_metrics(adv: torch.Tensor, valid: torch.Tensor | None) -> dict[str, float]:
    n = adv.numel()
    if n == 0:
        return {
            "advantages/mean": math.nan,
            "advantages/std": math.nan,
            "advantages/abs_max": math.nan,
            "advantages/frac_zero": math.nan,
            "advantages/nonfinite_rewards": 0.0,
        }
    # One cheap pass each (var_mean on a 1-D tensor is ~10x slower than sum + dot on CPU).
    mean = float(adv.sum()) / n
    sq = float(torch.dot(adv, adv)) / n
    lo, hi = torch.aminmax(adv)
    return {
        "advantages/mean": mean,
        "advantages/std": math.sqrt(max(sq - mean * mean, 0.0)),
        "advantages/abs_max": max(-float(lo), float(hi)),
        "advantages/frac_zero": 1.0 - int(torch.count_nonzero(adv)) / n,
        "advantages/nonfinite_rewards": float(0 if valid is None else int((~valid).sum())),
    }
