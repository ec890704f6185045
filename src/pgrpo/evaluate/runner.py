"""Evaluate a model or a training checkpoint on a task split: n samples per problem, scored
safely, as per-problem counts (`EvalRun`); read and write the eval JSON that
`pgrpo diagnose --eval-log` and `pgrpo report` read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pgrpo.errors import check_seed
from pgrpo.evaluate.metrics import EvalRun, aggregate, compare, search_compression

EVAL_KIND = "pgrpo.eval"


@dataclass(frozen=True)
class EvalConfig:
    """What to evaluate and how."""

    model: str = "smollm2"
    """'tiny', 'smollm2', a Hugging Face path, or a pgrpo RUN_DIR (its latest checkpoint)."""
    task: str = "arithmetic"
    """Registered task name (`pgrpo.tasks.TASKS`)."""
    task_options: dict[str, Any] | None = None
    """Task options (e.g. `{levels: [1, 2]}`, `{data: data/gsm8k}`); None: a RUN_DIR
    trained on the same task is evaluated with the run's own options, anything else with none."""
    split: str = "test"
    """Task split, or a path to a JSONL file of problems."""
    problems: int = 50
    """Problems drawn (without replacement, seeded by problem_seed) from the split; 0 = all."""
    problem_seed: int = 0
    """Seed of the problem draw: keep it fixed to compare systems on the same problems."""
    samples: int = 8
    """n samples per problem (pass@k for k up to n)."""
    temperature: float = 1.0
    """Sampling temperature (> 0), or 0 for greedy decoding (every sample is then the argmax
    path: use samples=1)."""
    max_new_tokens: int = 64
    """Completion length limit."""
    batch_prompts: int = 4
    """Problems generated together (each with `samples` completions)."""
    tiny_warmup_steps: int = 200
    """The tiny model's supervised warm-up steps (other models ignore it)."""
    model_seed: int = 0
    """Seed of the model's construction (the tiny model's init and warm-up); sampling seeds vary
    separately, so every seed evaluates the same network."""

    def __post_init__(self) -> None:
        for name in ("samples", "max_new_tokens", "batch_prompts"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        check_seed(self.problem_seed, "problem_seed")
        check_seed(self.model_seed, "model_seed")
        if self.problems < 0:
            raise ValueError(f"problems must be >= 0 (0 = the whole split), got {self.problems}")
        if not (self.temperature >= 0 and math.isfinite(self.temperature)):
            raise ValueError(
                f"temperature must be >= 0 and finite (0 = greedy), got {self.temperature}"
            )
        if self.temperature == 0 and self.samples > 1:
            raise ValueError(
                f"temperature 0 (greedy) gives {self.samples} identical samples; use samples=1"
            )


def _run_config(cfg: EvalConfig) -> tuple[Any, Path | None]:
    """(RunConfig, checkpoint or None) of the policy to evaluate: a model by name, or a run
    directory's model config, task (its base is warmed up on it) and latest checkpoint. The
    evaluation's task is always cfg.task (`evaluate`)."""
    from pgrpo.train.config import ModelConfig, RunConfig, RunSettings, TaskConfig

    task = TaskConfig(name=cfg.task, split=cfg.split)
    run_dir = Path(cfg.model)
    if not (run_dir / "config.yaml").is_file():
        model = ModelConfig(name=cfg.model, tiny_warmup_steps=cfg.tiny_warmup_steps)
        return RunConfig(model=model, task=task, run=RunSettings(seed=cfg.model_seed)), None
    from pgrpo.train.checkpoint import latest_checkpoint
    from pgrpo.train.config import load_config

    run_cfg = load_config(run_dir / "config.yaml")
    ckpt = latest_checkpoint(run_dir)
    if ckpt is None:
        raise FileNotFoundError(
            f"{run_dir} has no checkpoint (checkpoints/latest); train with checkpointing on, or "
            "evaluate the base model by name"
        )
    # the run's own task and options: a LoRA run's frozen base is warmed up on them
    config = RunConfig(
        model=run_cfg.model, task=run_cfg.task, run=RunSettings(seed=run_cfg.run.seed)
    )
    return config, ckpt


def task_options(cfg: EvalConfig, config: Any) -> dict[str, Any]:
    """The evaluation task's options: cfg.task_options when given; else the run's own when
    cfg.model is a RUN_DIR trained on cfg.task (its levels, its data folder), else none."""
    if cfg.task_options is not None:
        return dict(cfg.task_options)
    same_task = config.task.name == cfg.task  # a task name, not a registry dispatch
    return dict(config.task.options) if same_task else {}


def problem_draw(cfg: EvalConfig, n_examples: int) -> tuple[np.ndarray, str | None]:
    """(indices of the problems to evaluate [P], note): cfg.problems drawn without replacement
    (seeded by problem_seed) from a split of n_examples, or all of them when cfg.problems is 0
    or more than the split holds; the note then says so (None otherwise)."""
    idx = np.arange(n_examples)
    if cfg.problems and cfg.problems < n_examples:
        drawn = np.random.default_rng(cfg.problem_seed).choice(idx, cfg.problems, replace=False)
        return np.sort(drawn), None
    if cfg.problems > n_examples:
        return idx, (
            f"problems={cfg.problems} but the {cfg.task} {cfg.split!r} split holds {n_examples}: "
            f"evaluating all {n_examples} (a bigger split, e.g. a generated task's test size "
            "option, gives more)"
        )
    return idx, None


def evaluate(
    cfg: EvalConfig,
    *,
    seed: int = 0,
    name: str | None = None,
    on_note: Callable[[str], None] | None = None,
) -> EvalRun:
    """Sample cfg.samples completions per problem at `seed` and count the correct ones (reward
    >= 1), through the trainer's rollout path (safe scoring with the task's timeout, an empty
    completion scores 0). The split is read before the model loads (a bad split costs nothing);
    `on_note` gets what the user should know (fewer problems than asked: `problem_draw`)."""
    from pgrpo.tasks import get_task
    from pgrpo.train.rollout import (
        import_tasks,
        load_checkpoint_weights,
        load_task_and_policy,
        sample_and_score,
    )

    config, checkpoint = _run_config(cfg)
    import_tasks()
    task = get_task(cfg.task, **task_options(cfg, config))
    examples = task.load(cfg.split)
    idx, note = problem_draw(cfg, len(examples))
    if note is not None and on_note is not None:
        on_note(note)
    _, policy = load_task_and_policy(config, warm_up=checkpoint is None)
    step = 0
    if checkpoint is not None:
        step = int(load_checkpoint_weights(policy, checkpoint)["step"])
    torch.manual_seed(seed)
    n, c = [], []
    for start in range(0, idx.size, cfg.batch_prompts):
        batch = [examples[i] for i in idx[start : start + cfg.batch_prompts]]
        scored = sample_and_score(
            policy,
            task,
            batch,
            group_size=cfg.samples,
            temperatures=[cfg.temperature] * cfg.samples,
            max_new_tokens=cfg.max_new_tokens,
            reward_timeout_s=config.task.reward_timeout_s,
        )
        rewards = scored.rewards.double().numpy()
        correct = (rewards.reshape(len(batch), cfg.samples) >= 1.0 - 1e-9).sum(1)
        n += [cfg.samples] * len(batch)
        c += [int(x) for x in correct]
    return EvalRun(
        name=name or f"{Path(cfg.model).name}@{step}/seed{seed}",
        ids=[str(i) for i in idx],
        n=n,
        c=c,
        step=step,
        seed=seed,
        task=cfg.task,
        split=cfg.split,
        model=cfg.model,
    )


def eval_document(runs: list[EvalRun], baseline: list[EvalRun] | None = None) -> dict[str, Any]:
    """The eval JSON: results (one per run/seed), their aggregate, and (with a baseline) the
    paired comparison and the search-compression analysis."""
    doc: dict[str, Any] = {
        "kind": EVAL_KIND,
        "results": [r.summary() for r in runs],
        "aggregate": aggregate(runs),
    }
    if baseline:
        doc["baseline"] = [r.summary() for r in baseline]
        doc["comparison"] = compare(runs, baseline)
        doc["search_compression"] = search_compression(baseline, runs)
    return json_safe(doc)


def json_safe(value: Any) -> Any:
    """NaN/inf -> None (JSON null), recursively: e.g. Welch's t of two zero-variance samples."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def read_eval(path: str | Path) -> list[EvalRun]:
    """The EvalRuns of an eval JSON written by `pgrpo eval --out`."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or data.get("kind") != EVAL_KIND:
        raise ValueError(f"{path} is not a `pgrpo eval` JSON (kind != {EVAL_KIND!r})")
    return [EvalRun.from_summary(rec) for rec in data["results"]]


def write_eval(doc: dict[str, Any], path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, allow_nan=False))
    tmp.replace(out)
    return out
