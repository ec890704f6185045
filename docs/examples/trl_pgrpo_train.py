"""Train with TRL's GRPOTrainer + pgrpo's advantages on a pgrpo task (see docs/integrations.md).

One process (CPU or one GPU):
    python docs/examples/trl_pgrpo_train.py --model HuggingFaceTB/SmolLM2-135M-Instruct \
        --task gsm8k --output_dir runs/trl_sign --num_generations 4 --pgrpo_advantage sign
Several GPUs / DeepSpeed ZeRO-3 (TRL ships the accelerate configs):
    TRL_DIR=$(python -c "import trl, os; print(os.path.dirname(trl.__file__))")
    accelerate launch --config_file $TRL_DIR/accelerate_configs/zero3.yaml \
        docs/examples/trl_pgrpo_train.py --model Qwen/Qwen2.5-1.5B-Instruct --task gsm8k ...
Every PgrpoGRPOConfig / GRPOConfig field is a flag (`--help`); dict fields take JSON strings,
e.g. --pgrpo_advantage_options '{"alpha": 0.2}'; lists are space-separated, e.g.
--pgrpo_temperatures 0.1 0.4 0.7 1.0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from transformers import HfArgumentParser

from pgrpo.integrations.trl import (
    PgrpoGRPOConfig,
    PgrpoGRPOTrainer,
    task_dataset,
    task_reward_func,
)
from pgrpo.tasks import get_task


@dataclass
class ScriptArgs:
    model: str = field(metadata={"help": "Model name or local path."})
    task: str = field(default="arithmetic", metadata={"help": "pgrpo task name."})
    split: str = field(default="train", metadata={"help": "Task split or data file."})
    max_examples: int | None = field(default=None, metadata={"help": "Use the first N examples."})
    conversational: bool = field(default=True, metadata={"help": "Apply the chat template."})
    reward_timeout_s: float = field(default=5.0, metadata={"help": "Per-completion timeout."})


def main() -> None:
    script, config = HfArgumentParser((ScriptArgs, PgrpoGRPOConfig)).parse_args_into_dataclasses()
    task = get_task(script.task)
    dataset = task_dataset(task, script.split, conversational=script.conversational)
    if script.max_examples is not None:
        dataset = dataset.select(range(min(script.max_examples, len(dataset))))
    trainer = PgrpoGRPOTrainer(
        model=script.model,
        reward_funcs=task_reward_func(task, timeout_s=script.reward_timeout_s),
        args=config,
        train_dataset=dataset,
    )
    trainer.train()


if __name__ == "__main__":
    main()
