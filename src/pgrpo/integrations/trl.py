"""pgrpo's advantages, asymmetric KL, multi-temperature sampling and diagnostics inside TRL.

Tested with trl 1.16.0 (`pip install "pgrpo[trl]"`). Use `PgrpoGRPOTrainer` with a
`PgrpoGRPOConfig` wherever TRL's `GRPOTrainer` / `GRPOConfig` go (accelerate, DeepSpeed, vLLM
launchers are unchanged):

    args = PgrpoGRPOConfig(output_dir="out", num_generations=4, pgrpo_advantage="sign")
    PgrpoGRPOTrainer(model=..., reward_funcs=..., args=args, train_dataset=...).train()

The hooks, all thin overrides of TRL methods (TRL's ~600-line `_generate_and_score_completions`
is not copied):
- advantages: `_calculate_rewards` keeps the rewards TRL gathered from all processes;
  `_generate_and_score_completions` then replaces TRL's advantages with
  `compute_advantages(pgrpo_advantage, rewards, group_size=num_generations, ...)` and slices this
  process's part exactly as TRL does. TRL's `scale_rewards` is not used. dual_anchor's constraint
  counts come from the dataset column `pgrpo_num_constraints_column` (default `num_constraints`)
  or a constant `pgrpo_advantage_options={"num_constraints": C}`. `pgrpo_reward_range=[lo, hi]`
  (the bounds of one summed reward, like `task.reward_range` in `pgrpo train`) is the range sign
  maps to [-1, 1] and the ends at which all-pass / all-fail groups are counted (unset: 0 / 1).
- asymmetric KL (MDP-GRPO): during `_compute_loss` TRL's scalar `beta` is swapped for a float
  that multiplies the per-token KL by the per-completion coefficient of
  `asymmetric_kl_weights(advantages, kl_coef=beta, kl_coef_negative=pgrpo_kl_coef_negative)`.
- multi-temperature sampling: `_generate_single_turn` generates each slot of the group at its own
  temperature (transformers generation paths; not vLLM), its rows' images and processor outputs
  selected by `trl_rows.select_rows`. Log-probs are recomputed at TRL's single `temperature`, as
  in MDP-GRPO's public code (see docs/integrations.md).
- diagnostics: `degeneracy/*`, `reward_within_group_std`, `frac_gradient_tokens`,
  `advantages/*`, `group_size` are appended to TRL's `_metrics`, so they reach `log_history` in
  `trainer_state.json`, W&B and TensorBoard like TRL's own metrics.

`PgrpoGRPOConfig` lives in `pgrpo.integrations.trl_config`, re-exported here.
`PgrpoCallback` (defined in `pgrpo.integrations.callback`, re-exported here) brings the live
forecast, verdict and stop rules to TRL's own GRPOTrainer or any subclass (Unsloth's) instead.
"""

from __future__ import annotations

import copy
import json
import warnings
from typing import Any

import torch
import trl
from accelerate.utils import gather_object
from trl import GRPOTrainer

from pgrpo.core.advantages import (
    ADVANTAGE_ESTIMATORS,
    compute_advantages,
)
from pgrpo.core.degeneracy import group_stats
from pgrpo.core.losses import asymmetric_kl_weights, gradient_token_fraction
from pgrpo.core.rewardrange import checked_reward_range
from pgrpo.integrations.callback import PgrpoCallback
from pgrpo.integrations.trl_config import PgrpoGRPOConfig
from pgrpo.integrations.trl_rows import select_rows

__all__ = [
    "PgrpoCallback",
    "PgrpoGRPOConfig",
    "PgrpoGRPOTrainer",
    "task_dataset",
    "task_reward_func",
]

SUPPORTED_TRL_VERSIONS = ("1.16.0",)
if trl.__version__ not in SUPPORTED_TRL_VERSIONS:
    warnings.warn(
        f"pgrpo's TRL adapter overrides private GRPOTrainer methods of trl "
        f"{', '.join(SUPPORTED_TRL_VERSIONS)}; found trl {trl.__version__}. If training fails or "
        "the pgrpo metrics are missing, install trl==1.16.0 (pip install 'pgrpo[trl]')",
        stacklevel=2,
    )

# group_stats metrics added to TRL's logs (TRL logs reward, reward_std itself).
GROUP_METRICS = (
    "frac_reward_zero_std",
    "degeneracy/all_pass",
    "degeneracy/all_fail",
    "degeneracy/iid_prediction",
    "degeneracy/excess",
    "reward_within_group_std",
)


class _PerCompletionKLCoef(float):
    """TRL's `beta` (a float, so TRL's `beta != 0` checks hold) whose product `beta * kl` with the
    per-token KL [B,T] applies one coefficient per completion: weights [B] (asymmetric KL).
    Only the left product is intercepted, the order TRL 1.16's `_compute_loss` uses (tested)."""

    weights: torch.Tensor

    def __new__(cls, value: float, weights: torch.Tensor) -> _PerCompletionKLCoef:
        obj = super().__new__(cls, value)
        obj.weights = weights
        return obj

    def __mul__(self, other: Any) -> Any:
        if isinstance(other, torch.Tensor):
            return self.weights.to(other).unsqueeze(-1) * other
        return float(self) * other


class PgrpoGRPOTrainer(GRPOTrainer):
    """TRL's GRPOTrainer with pgrpo's advantages, asymmetric KL, multi-temperature sampling and
    diagnostics (see the module docstring for the hooks)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(self.args, PgrpoGRPOConfig):
            raise TypeError(
                f"PgrpoGRPOTrainer needs args=PgrpoGRPOConfig(...), got {type(self.args).__name__}"
            )
        if self.args.pgrpo_temperatures is not None and (self.tools or self.rollout_func):
            raise ValueError(
                "pgrpo_temperatures is not supported with tools or rollout_func (their extra "
                "generation calls do not map to group slots); drop one of them"
            )
        for cb in self.callback_handler.callbacks:  # its frac_reward_zero_std is per group
            if isinstance(cb, PgrpoCallback):  # whatever scale_rewards (review 41, F1)
                cb.share_per_group = True
        self._pgrpo_batch: tuple[list[dict[str, Any]], torch.Tensor] | None = None
        self._pgrpo_sampled_at_temperatures = False  # set by _generate_single_turn per batch

    # ---- advantages ------------------------------------------------------------------------

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):  # noqa: ANN001
        rewards_per_func = super()._calculate_rewards(
            inputs, prompts, completions, completion_ids_list
        )
        self._pgrpo_batch = (inputs, rewards_per_func)  # rewards of all processes, local inputs
        return rewards_per_func

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self._pgrpo_sampled_at_temperatures = False
        output = super()._generate_and_score_completions(inputs)
        if self._pgrpo_batch is None:  # pragma: no cover - TRL always scores before returning
            raise RuntimeError("TRL did not call _calculate_rewards; is this trl 1.16.0?")
        local_inputs, rewards_per_func = self._pgrpo_batch
        self._pgrpo_batch = None
        mode = "train" if self.model.training else "eval"
        group_size = self.num_generations if mode == "train" else self.num_generations_eval
        rewards = self.pgrpo_rewards(rewards_per_func)
        result = compute_advantages(
            self.args.pgrpo_advantage,
            rewards.double().cpu(),
            group_size=group_size,
            transform=self.args.pgrpo_transform,
            transform_options=self.args.pgrpo_transform_options,
            nan="mask",  # TRL's convention: an unscorable completion gets advantage 0
            **self._advantage_options(local_inputs),
        )
        all_advantages = result.advantages.to(output["advantages"])
        n_local = output["advantages"].shape[0]
        start = self.accelerator.process_index * n_local
        output["advantages"] = all_advantages[start : start + n_local]
        self._replace_logged_advantages(all_advantages)
        self._log_pgrpo_metrics(mode, rewards, group_size, result.metrics, output)
        return output

    def pgrpo_rewards(self, rewards_per_func: torch.Tensor) -> torch.Tensor:
        """[N, n_funcs] -> [N]: TRL's weighted sum; NaN where every reward function gave None."""
        weights = self.reward_weights.to(rewards_per_func.device)
        rewards = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
        rewards[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan
        return rewards

    def _advantage_options(self, local_inputs: list[dict[str, Any]]) -> dict[str, Any]:
        """The estimator's options, plus each per-completion column it declares (e.g.
        `num_constraints`) gathered from the dataset unless given as a constant option."""
        options = dict(self.args.pgrpo_advantage_options)
        estimator = ADVANTAGE_ESTIMATORS.get(self.args.pgrpo_advantage)
        if estimator.takes_reward_range and self.args.pgrpo_reward_range is not None:
            options.setdefault("reward_range", tuple(self.args.pgrpo_reward_range))
        for name in estimator.columns:
            if name in options:
                continue
            column = self._dataset_column(name)
            if any(column not in row for row in local_inputs):
                raise ValueError(
                    f"{self.args.pgrpo_advantage} needs each prompt's {name}: add a {column!r} "
                    f"column to the dataset, set pgrpo_{name}_column to its name, or give a "
                    f"constant with pgrpo_advantage_options={{'{name}': C}}"
                )
            options[name] = gather_object([row[column] for row in local_inputs])
        return options

    def _reward_range(self) -> tuple[float, float] | None:
        """The bounds of one reward: pgrpo_reward_range, else the estimator's own reward_range
        option (sign's), else None (the 0/1 reading)."""
        given = self.args.pgrpo_reward_range or self.args.pgrpo_advantage_options.get(
            "reward_range"
        )
        return None if given is None else checked_reward_range(given)

    def _dataset_column(self, name: str) -> str:
        """The dataset column holding the estimator's column `name` (`pgrpo_<name>_column`)."""
        return str(getattr(self.args, f"pgrpo_{name}_column", name))

    def _replace_logged_advantages(self, all_advantages: torch.Tensor) -> None:
        """TRL's completions table shows the advantages used: swap in pgrpo's."""
        logged = self._logs["advantages"]
        n = all_advantages.numel()
        if len(logged) >= n:
            for _ in range(n):
                logged.pop()
            logged.extend(all_advantages.tolist())

    def _log_pgrpo_metrics(
        self,
        mode: str,
        rewards: torch.Tensor,
        group_size: int,
        advantage_metrics: dict[str, float],
        output: dict[str, Any],
    ) -> None:
        metrics = self._metrics[mode]
        stats = group_stats(
            rewards.double().cpu(),
            group_size=group_size,
            nan="mask",
            reward_range=self._reward_range(),
        ).metrics
        if metrics["frac_reward_zero_std"]:
            # TRL's figure is per group only with scale_rewards="group"; pgrpo's always is
            metrics["frac_reward_zero_std"].pop()
        for name in GROUP_METRICS:
            metrics[name].append(stats[name])
        for name, value in advantage_metrics.items():
            metrics[name].append(value)
        metrics["group_size"].append(float(group_size))
        temps = self.args.pgrpo_temperatures
        if temps is not None and self._pgrpo_sampled_at_temperatures:  # sampled at `temps`
            # same name as `pgrpo train`: mean reward of the slots sampled at each temperature
            slot_temps = torch.tensor(temps, dtype=torch.float64).repeat(
                rewards.numel() // group_size
            )
            r = rewards.double().cpu()
            for t in sorted(set(temps)):
                metrics[f"reward/temperature_{t:g}"].append(float(r[slot_temps == t].nanmean()))
        mask = output["completion_mask"]
        if "tool_mask" in output:
            mask = mask * output["tool_mask"]
        n_tokens = mask.sum().double()
        n_signal = gradient_token_fraction(output["advantages"], mask) * n_tokens
        totals = self.accelerator.gather(torch.stack([n_signal, n_tokens]).to(mask.device))
        totals = totals.view(-1, 2).sum(0)
        metrics["frac_gradient_tokens"].append(float(totals[0] / totals[1].clamp(min=1.0)))

    # ---- asymmetric KL -----------------------------------------------------------------------

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        neg = self.args.pgrpo_kl_coef_negative
        if neg is None or self.beta == 0.0:
            return super()._compute_loss(model, inputs)
        beta = float(self.beta)
        weights = asymmetric_kl_weights(inputs["advantages"], kl_coef=beta, kl_coef_negative=neg)
        self.beta = _PerCompletionKLCoef(beta, weights)
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self.beta = beta

    # ---- multi-temperature sampling ------------------------------------------------------------

    def _generate_single_turn(
        self,
        prompt_ids: list[list[int]],
        images: Any,
        multimodal_fields: dict[str, Any],
        num_generations: int,
        has_tool_images: bool = False,
    ) -> tuple[list[list[int]], Any]:
        temps = self.args.pgrpo_temperatures
        if temps is None or num_generations != len(temps):
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        # global position of each local row -> its slot in the group (groups are contiguous
        # in the gathered batch, processes hold consecutive slices)
        offset = self.accelerator.process_index * len(prompt_ids)
        slots = [(offset + i) % num_generations for i in range(len(prompt_ids))]
        completions: list[list[int] | None] = [None] * len(prompt_ids)
        saved = self.generation_config, self.generation_kwargs
        try:
            for slot, temperature in enumerate(temps):
                rows = [i for i, s in enumerate(slots) if s == slot]
                if not rows:
                    continue
                # images and processor outputs follow their rows (text prompts have them too)
                slot_images, slot_fields = select_rows(prompt_ids, images, multimodal_fields, rows)
                self.generation_config = copy.deepcopy(saved[0])
                self.generation_config.temperature = temperature
                self.generation_kwargs = {**saved[1], "temperature": temperature}
                ids, _ = super()._generate_single_turn(
                    [prompt_ids[i] for i in rows], slot_images, slot_fields, num_generations
                )
                for i, c in zip(rows, ids, strict=True):
                    completions[i] = c
        finally:
            self.generation_config, self.generation_kwargs = saved
        self._pgrpo_sampled_at_temperatures = True  # read by _log_pgrpo_metrics
        return completions, None  # type: ignore[return-value]

    # ---- end of training -----------------------------------------------------------------------

    def train(self, *args: Any, **kwargs: Any) -> Any:
        result = super().train(*args, **kwargs)
        if self.args.pgrpo_save_state and self.is_world_process_zero():
            self.save_state()  # output_dir/trainer_state.json: `pgrpo fit OUTPUT_DIR` reads it
        return result


# ---------------------------------------------------------------------------------------------
# pgrpo tasks as TRL datasets and reward functions
# ---------------------------------------------------------------------------------------------

EXAMPLE_COLUMN = "pgrpo_example"


def task_dataset(task: Any, split_or_path: str, *, conversational: bool = True) -> Any:
    """A `datasets.Dataset` for TRL from a pgrpo task (`pgrpo.tasks.get_task(name)`).

    Columns: `prompt` (a user message, so TRL applies the model's chat template; a plain string
    with conversational=False), `pgrpo_example` (the example as JSON, read back by
    `task_reward_func`) and, for tasks with constraint counts (ifeval), `num_constraints`.
    """
    import datasets

    examples = task.load(split_or_path)
    counts = getattr(task, "num_constraints", None)
    rows = []
    for example in examples:
        text = task.prompt(example)
        row = {
            "prompt": [{"role": "user", "content": text}] if conversational else text,
            EXAMPLE_COLUMN: json.dumps(example),
        }
        if counts is not None:
            row["num_constraints"] = int(counts(example))
        rows.append(row)
    return datasets.Dataset.from_list(rows)


def task_reward_func(task: Any, *, timeout_s: float = 5.0) -> Any:
    """A TRL reward function scoring with `task.reward` through pgrpo's safe scorer (timeouts,
    errors scored the low end of the task's reward range, 0 without one). Logs `reward_errors`
    and `reward_timeouts` through TRL's `log_metric`."""
    from pgrpo.tasks.scoring import score_completions

    def reward(completions: list[Any], **kwargs: Any) -> list[float]:
        if EXAMPLE_COLUMN not in kwargs:
            raise ValueError(
                f"task_reward_func needs the {EXAMPLE_COLUMN!r} column: build the dataset with "
                "pgrpo.integrations.trl.task_dataset(task, split)"
            )
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        examples = [json.loads(e) for e in kwargs[EXAMPLE_COLUMN]]
        result = score_completions(task, texts, examples, timeout_s=timeout_s)
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            log_metric("reward_errors", float(result.errors))
            log_metric("reward_timeouts", float(result.timeouts))
        return list(result.rewards)

    reward.__name__ = f"{task.name}_reward"
    return reward
