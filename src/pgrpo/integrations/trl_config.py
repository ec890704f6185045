"""`PgrpoGRPOConfig`: TRL's GRPOConfig plus pgrpo's fields (all prefixed `pgrpo_`), checked
when it is built, before any model (estimator and transform names, their options and values,
the reward range, the KL coefficients, one temperature per group slot). `pgrpo.integrations.trl`
re-exports it beside the trainer that reads it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from trl import GRPOConfig

from pgrpo.core.advantages import ADVANTAGE_ESTIMATORS, ADVANTAGE_TRANSFORMS, check_options
from pgrpo.core.rewardrange import checked_reward_range


@dataclass
class PgrpoGRPOConfig(GRPOConfig):
    """TRL's GRPOConfig plus pgrpo's fields (all prefixed `pgrpo_`)."""

    pgrpo_advantage: str = field(
        default="grpo",
        metadata={"help": "pgrpo advantage estimator: grpo, dr_grpo, rloo, batch_std, sign, ..."},
    )
    pgrpo_advantage_options: dict[str, Any] | str | None = field(
        default=None,
        metadata={"help": "Estimator options (dict or JSON string), e.g. {'alpha': 0.2}."},
    )
    pgrpo_transform: str | None = field(
        default="default",
        metadata={"help": "Advantage transform ('prospect'), 'none', or 'default' (paper's)."},
    )
    pgrpo_transform_options: dict[str, Any] | str | None = field(
        default=None, metadata={"help": "Transform options (dict or JSON string)."}
    )
    pgrpo_reward_range: list[float] | str | None = field(
        default=None,
        metadata={
            "help": "Bounds [lo, hi] of one (weighted, summed) reward: the range the sign "
            "advantage maps to [-1, 1] and the ends all-pass / all-fail groups are counted at "
            "(unset: the 0/1 reading). A list or a JSON string, e.g. '[-1, 1]'."
        },
    )
    pgrpo_num_constraints_column: str = field(
        default="num_constraints",
        metadata={"help": "Dataset column with each prompt's constraint count (dual_anchor)."},
    )
    pgrpo_kl_coef_negative: float | None = field(
        default=None,
        metadata={"help": "Asymmetric KL: coefficient of completions with A < 0 (needs beta > 0)."},
    )
    pgrpo_temperatures: list[float] | None = field(
        default=None,
        metadata={"help": "One sampling temperature per group slot (length num_generations)."},
    )
    pgrpo_save_state: bool = field(
        default=True,
        metadata={"help": "Write output_dir/trainer_state.json after train() for `pgrpo fit`."},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        self.pgrpo_advantage_options = _as_dict(
            self.pgrpo_advantage_options, "pgrpo_advantage_options"
        )
        self.pgrpo_transform_options = _as_dict(
            self.pgrpo_transform_options, "pgrpo_transform_options"
        )
        if isinstance(self.pgrpo_reward_range, str):
            self.pgrpo_reward_range = _as_json(self.pgrpo_reward_range, "pgrpo_reward_range")
        if self.pgrpo_reward_range is not None:
            lo_hi = checked_reward_range(self.pgrpo_reward_range, "pgrpo_reward_range")
            self.pgrpo_reward_range = list(lo_hi)
            own = self.pgrpo_advantage_options.get("reward_range")
            if own is not None and tuple(checked_reward_range(own)) != lo_hi:
                raise ValueError(
                    f"pgrpo_reward_range {list(lo_hi)} and pgrpo_advantage_options' reward_range "
                    f"{own} differ: give the range once, as pgrpo_reward_range"
                )
        ADVANTAGE_ESTIMATORS.get(self.pgrpo_advantage)  # unknown name: lists the valid ones
        if self.pgrpo_transform in ("none", "None", ""):
            self.pgrpo_transform = None
        if self.pgrpo_transform not in (None, "default"):
            ADVANTAGE_TRANSFORMS.get(self.pgrpo_transform)
        check_options(  # options and their values, before any model is loaded
            self.pgrpo_advantage,
            self.pgrpo_advantage_options,
            transform=self.pgrpo_transform,
            transform_options=self.pgrpo_transform_options,
        )
        if self.multi_objective_aggregation != "sum_then_normalize":
            raise ValueError(
                "pgrpo advantages use the weighted sum of the reward functions; set "
                "multi_objective_aggregation='sum_then_normalize' (TRL's default)"
            )
        self._validate_kl()
        self._validate_temperatures()

    def _validate_kl(self) -> None:
        neg = self.pgrpo_kl_coef_negative
        if neg is None:
            return
        if neg < 0:
            raise ValueError(f"pgrpo_kl_coef_negative must be >= 0, got {neg}")
        if self.beta <= 0:
            raise ValueError(
                "pgrpo_kl_coef_negative needs a reference model, which TRL loads only when beta > "
                "0: set beta to the KL coefficient of completions with A >= 0 (MDP-GRPO: "
                "beta=0.01, pgrpo_kl_coef_negative=0.025)"
            )

    def _validate_temperatures(self) -> None:
        temps = self.pgrpo_temperatures
        if temps is None:
            return
        if len(temps) != self.num_generations:
            raise ValueError(
                f"pgrpo_temperatures has {len(temps)} entries but num_generations is "
                f"{self.num_generations}: give one temperature per group slot (MDP-GRPO: "
                "[0.1, 0.4, 0.7, 1.0] at num_generations=4)"
            )
        if any(not (t > 0 and math.isfinite(t)) for t in temps):
            raise ValueError(f"pgrpo_temperatures must be positive and finite, got {temps}")
        if self.use_vllm:
            raise ValueError(
                "pgrpo_temperatures works with transformers generation only: TRL 1.16's vLLM "
                "path samples a whole batch with one SamplingParams; set use_vllm=False or drop "
                "pgrpo_temperatures"
            )


def _as_json(value: str, name: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name} must be valid JSON when given as a string: {exc}") from None


def _as_dict(value: Any, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        value = _as_json(value, name)
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a dict, got {type(value).__name__}")
    return dict(value)
