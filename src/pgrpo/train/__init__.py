"""The GRPO trainer for Hugging Face causal LMs (CPU out of the box).

    from pgrpo.train import load_config, train
    result = train(load_config("run.yaml", ["steps=20", "optim.lr=2e-5"]))
    result.run_dir / "metrics.jsonl"

See docs/trainer.md: config sections, the step, the log's metric names, checkpoints and resume.
"""

from __future__ import annotations

from pgrpo.train.config import RunConfig, load_config, save_config
from pgrpo.train.rollout import load_task_and_policy
from pgrpo.train.trainer import TrainResult, train

__all__ = [
    "RunConfig",
    "TrainResult",
    "load_config",
    "load_task_and_policy",
    "save_config",
    "train",
]
