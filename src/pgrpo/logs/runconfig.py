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


def hyperparameters_from_config(cfg: Any, notes: list[str] | None = None) -> dict[str, float]:
    """Map a run config (pgrpo, TRL args, verl hydra config, OpenRLHF args) to lr, beta1,
    refresh_interval, group_size, batch_prompts, and reward_min / reward_max from a
    `reward_range: [lo, hi]`.
    TRL (`trl_batch`): K = num_iterations x steps_per_generation / grad accum, B = prompts per
    optimizer step and steps_per_logged_point = the rollouts behind a logged reward / (G x B);
    verl: K = ppo_epochs x train_batch_size / ppo_mini_batch_size. notes: where a size cannot
    be determined from the config, why (appended)."""
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
    spg = _steps_per_generation(get, notes)
    if out["refresh_interval"] is None:
        iters = get("num_iterations", "ppo_epochs")
        ga = get("gradient_accumulation_steps")
        tb, mb = get("train_batch_size"), get("ppo_mini_batch_size")
        if iters is not None:
            per = spg / ga if spg and ga else (tb / mb if tb and mb else 1.0)
            out["refresh_interval"] = max(1.0, round(iters * per))
    # pgrpo: task.reward_range; PgrpoGRPOConfig: pgrpo_reward_range (review 41: not read)
    bounds = find_key(cfg, ("reward_range", "pgrpo_reward_range"))  # [lo, hi]
    if isinstance(bounds, list | tuple):
        with contextlib.suppress(ValueError):  # a bad range in a config is no range
            out["reward_min"], out["reward_max"] = checked_reward_range(bounds)
    out.update(trl_batch(cfg, out["group_size"], out["batch_prompts"], spg))
    rollout = _find_mapping(cfg, "rollout")  # verl: actor_rollout_ref.rollout.n is G
    if rollout is not None:
        if out["group_size"] is None:
            out["group_size"] = as_number(rollout.get("n"))
        if out["batch_prompts"] is None:
            out["batch_prompts"] = get("train_batch_size")
    return {k: float(v) for k, v in out.items() if v is not None and math.isfinite(v)}


def _steps_per_generation(get: Any, notes: list[str] | None) -> float | None:
    """TRL's steps_per_generation as its GRPOConfig resolves it (`__post_init__`): given, else
    generation_batch_size / (per_device_train_batch_size x world size), else (neither set)
    gradient_accumulation_steps. None when not a TRL config or not determinable."""
    spg, gbs, ga = (get("steps_per_generation"), get("generation_batch_size"),
                    get("gradient_accumulation_steps"))  # fmt: skip
    if spg or ga is None:
        return spg
    if gbs is None:
        return ga  # TRL's default: one generation per optimizer step
    per, ws = get("per_device_train_batch_size"), get("world_size")
    if per and ws:
        return gbs / (per * ws)
    if notes is not None:
        notes.append(f"generation_batch_size {gbs:g} without steps_per_generation or the world "
                     "size: the rollouts behind each logged reward are unknown; give "
                     "--batch-prompts (prompts per logged point)")  # fmt: skip
    return None


def trl_batch(cfg: Any, g: float | None, b: float | None, spg: float | None) -> dict[str, float]:
    """TRL's batch arithmetic (trl 1.16 `GRPOConfig.__post_init__`, `GRPOTrainer._prepare_inputs`
    and `log`): a generation of generation_batch_size = per_device x world x spg completions
    every K = num_iterations x spg / ga optimizer steps, whose mean reward is appended once; a
    log every L = logging_steps steps averages the appended means (a log with none has no
    reward). So a logged reward covers max(1, L / K) generations, i.e. max(K, L) / num_iterations
    x (G x B) rollouts with B = per_device x world x ga / G prompts per optimizer step:
    steps_per_logged_point = max(K, L) / num_iterations (L / num_iterations at TRL's default
    spg = ga; spg / ga at L = 1). B needs the world size (live `TrainingArguments.world_size`,
    which PgrpoCallback adds) or the resolved generation_batch_size with spg. A review, session
    41: with ga 1, spg 4 a logged reward held 4 x the rollouts read."""
    get = lambda *names: as_number(find_key(cfg, names))  # noqa: E731
    out: dict[str, float] = {}
    per, ga, ws = (get("per_device_train_batch_size"), get("gradient_accumulation_steps"),
                   get("world_size"))  # fmt: skip
    gbs = get("generation_batch_size")
    if b is None and g and g >= 2 and ga and spg:
        completions = per * ws * ga if per and ws else (gbs * ga / spg if gbs else None)
        if completions is not None and completions % g == 0:
            out["batch_prompts"] = completions / g
    every, strategy = get("logging_steps"), find_key(cfg, ("logging_strategy",))
    by_steps = strategy is None or str(strategy).lower().endswith("steps")
    if every is None or every < 1 or not float(every).is_integer() or not by_steps:
        return out  # by epoch, or a float below 1 (a share of the run): unknown here
    if spg is None and gbs is not None:
        return out  # the generation's size is unknown (`_steps_per_generation` notes it)
    iters = max(1.0, get("num_iterations") or 1.0)
    k = iters * spg / ga if spg and ga else iters  # optimizer steps per generation
    per_point = max(k, every) / iters
    if per_point > 1:
        out["steps_per_logged_point"] = per_point
    return out


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
