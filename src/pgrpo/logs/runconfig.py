"""A run's settings from its config (pgrpo's config.yaml, TRL / Hugging Face TrainingArguments,
a verl hydra config): the lookup every log reader and the TRL callback share
(`hyperparameters_from_config`), split from `pgrpo.logs.base`."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from typing import Any

from pgrpo.core.rewardrange import checked_reward_range
from pgrpo.logs.columns import as_number


def find_key(tree: Any, names: tuple[str, ...], _depth: int = 0) -> Any:
    """The first value under any of `names` in a nested dict/list (depth-first, shallow first)."""
    if _depth > 8:
        return None
    if isinstance(tree, Mapping):
        for n in names:
            if n in tree and not isinstance(tree[n], Mapping):
                return tree[n]
        for v in tree.values():
            found = find_key(v, names, _depth + 1)
            if found is not None:
                return found
    elif isinstance(tree, list):
        for v in tree:
            found = find_key(v, names, _depth + 1)
            if found is not None:
                return found
    return None


def hyperparameters_from_config(cfg: Any) -> dict[str, float]:
    """Map a run config (pgrpo, TRL args, verl hydra config, OpenRLHF args) to lr, beta1,
    refresh_interval, group_size, batch_prompts, and reward_min / reward_max from a
    `reward_range: [lo, hi]`.
    TRL: K = num_iterations x steps_per_generation / grad accum, B = per_device_train_batch_size
    x world_size x grad accum / num_generations (when world_size is given), and
    steps_per_logged_point = logging_steps / num_iterations (logging_steps an integer >= 2 and
    logging_strategy "steps" or unset: each logged mean covers that many steps' rollouts);
    verl: K = ppo_epochs x train_batch_size / ppo_mini_batch_size."""
    get = lambda *names: as_number(find_key(cfg, names))  # noqa: E731
    out: dict[str, float | None] = {  # OpenRLHF's args: actor_learning_rate,
        # n_samples_per_prompt (G), adam_betas [beta1, beta2]
        "lr": get("learning_rate", "lr", "actor_learning_rate"),
        "beta1": get("beta1", "adam_beta1"),
        "group_size": get("group_size", "num_generations", "n_samples_per_prompt"),
        "batch_prompts": get("batch_prompts"),
        "refresh_interval": get("refresh_interval"),
        "kappa": get("kappa"),  # a probed curvature (pgrpo probe), read by pgrpo.diagnose
    }
    betas = find_key(cfg, ("betas", "adam_betas"))
    if out["beta1"] is None and isinstance(betas, list) and betas:
        out["beta1"] = as_number(betas[0])
    if out["refresh_interval"] is None:
        iters = get("num_iterations", "ppo_epochs")
        spg, ga = get("steps_per_generation"), get("gradient_accumulation_steps")
        tb, mb = get("train_batch_size"), get("ppo_mini_batch_size")
        if iters is not None:
            per = spg / ga if spg and ga else (tb / mb if tb and mb else 1.0)
            out["refresh_interval"] = max(1.0, round(iters * per))
    # pgrpo: task.reward_range; PgrpoGRPOConfig: pgrpo_reward_range (review 41: not read)
    bounds = find_key(cfg, ("reward_range", "pgrpo_reward_range"))  # [lo, hi]
    if isinstance(bounds, list | tuple):
        with contextlib.suppress(ValueError):  # a bad range in a config is no range
            out["reward_min"], out["reward_max"] = checked_reward_range(bounds)
    per, ga, ws = (get("per_device_train_batch_size"), get("gradient_accumulation_steps"),
                   get("world_size"))  # fmt: skip
    g = out["group_size"]
    if out["batch_prompts"] is None and per and ga and ws and g and g >= 2:
        # TRL: completions per optimizer step / G; only with the world size, which TRL's args
        # record only live (`TrainingArguments.world_size`: PgrpoCallback adds it), not on disk
        completions = per * ws * ga
        if completions % g == 0:
            out["batch_prompts"] = completions / g
    every, strategy = get("logging_steps"), find_key(cfg, ("logging_strategy",))
    by_steps = strategy is None or str(strategy).lower().endswith("steps")
    if every is not None and every >= 2 and float(every).is_integer() and by_steps:
        # Hugging Face Trainer / TRL: a logged reward is the mean over every generation since
        # the last log, and TRL generates once every num_iterations optimizer steps (at the
        # default steps_per_generation), so a logged point holds logging_steps / num_iterations
        # steps' worth of rollouts (TRL's default logging_steps is 10; a float below 1 is a
        # share of the run, unknown here). Read by `starvation.rollouts_per_point` (a hostile
        # user's review, session 35: N = G x B per point tested 320-rollout means as 32-rollout
        # ones, and dropped the binomial null; a review of the fix: num_iterations)
        per_point = every / max(1.0, get("num_iterations") or 1.0)
        if per_point > 1:
            out["steps_per_logged_point"] = per_point
    rollout = _find_mapping(cfg, "rollout")  # verl: actor_rollout_ref.rollout.n is G
    if rollout is not None:
        if out["group_size"] is None:
            out["group_size"] = as_number(rollout.get("n"))
        if out["batch_prompts"] is None:
            out["batch_prompts"] = get("train_batch_size")
    return {k: float(v) for k, v in out.items() if v is not None and math.isfinite(v)}


def _find_mapping(tree: Any, name: str, _depth: int = 0) -> Mapping[str, Any] | None:
    if _depth > 8 or not isinstance(tree, Mapping):
        return None
    if isinstance(tree.get(name), Mapping):
        return tree[name]
    for v in tree.values():
        found = _find_mapping(v, name, _depth + 1)
        if found is not None:
            return found
    return None
