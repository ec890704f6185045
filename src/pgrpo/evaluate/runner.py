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
from pgrpo.evaluate.pairing import check_one_decoding, check_one_problem_set, pair_problems
from pgrpo.evaluate.records import Decoding

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

    @property
    def decoding(self) -> Decoding:
        """How each sample is drawn (recorded in every result; `pair_problems` checks it)."""
        return Decoding(float(self.temperature), int(self.max_new_tokens))

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
                f"temperature 0 (greedy) gives {self.samples} identical samples; use --samples 1 "
                "(samples=1)"
            )


def _run_config(cfg: EvalConfig) -> tuple[Any, Path | None]:
    """(RunConfig, checkpoint or None) of the policy to evaluate: a model by name (the tiny
    model is warmed up on the evaluation's task and options), or a run directory's model
    config, task (its base is warmed up on it) and latest checkpoint. The evaluation's task is
    always cfg.task (`plan_eval`)."""
    from pgrpo.train.config import ModelConfig, RunConfig, RunSettings, TaskConfig

    run_dir = Path(cfg.model)
    if not (run_dir / "config.yaml").is_file():
        task = TaskConfig(name=cfg.task, split=cfg.split, options=dict(cfg.task_options or {}))
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


def problem_draw(cfg: EvalConfig, n_problems: int) -> tuple[np.ndarray, str | None]:
    """(indices of the problems to evaluate [P], note): cfg.problems drawn without replacement
    (seeded by problem_seed) from the n_problems distinct problems of the split, or all of them
    when cfg.problems is 0 or more than that; the note then says so (None otherwise)."""
    idx = np.arange(n_problems)
    if cfg.problems and cfg.problems < n_problems:
        drawn = np.random.default_rng(cfg.problem_seed).choice(idx, cfg.problems, replace=False)
        return np.sort(drawn), None
    if cfg.problems > n_problems:
        return idx, (
            f"--problems {cfg.problems} but the {cfg.task} {cfg.split!r} split holds "
            f"{n_problems} distinct problems: evaluating all {n_problems}"
        )
    return idx, None


@dataclass(frozen=True)
class EvalPlan:
    """What `evaluate` does, known before any model loads (`plan_eval`): the policy's run
    config and checkpoint, the task and its options, the problems [P] and their ids [P],
    whether the tiny model is warmed up, and what the user should know (`notes`)."""

    config: Any
    checkpoint: Path | None
    task: Any
    options: dict[str, Any]
    examples: list[dict[str, Any]]
    ids: list[str]
    warm_up: bool
    notes: tuple[str, ...]


def plan_eval(cfg: EvalConfig) -> EvalPlan:
    """Read the split, draw its distinct problems and check the model can be built, before any
    model loads (bad input costs nothing; `pgrpo eval` checks a --baseline against the plan)."""
    from pgrpo.evaluate.problems import distinct_problems
    from pgrpo.tasks import get_task
    from pgrpo.train.rollout import import_tasks

    config, checkpoint = _run_config(cfg)
    import_tasks()
    options = task_options(cfg, config)
    task = get_task(cfg.task, **options)
    rows = _load(task, cfg.split)
    examples, ids = distinct_problems(task, rows)
    notes = []
    if len(examples) < len(rows):
        notes.append(
            f"the {cfg.task} {cfg.split!r} split repeats problems ({len(rows)} rows, "
            f"{len(examples)} distinct): each is evaluated once"
        )
    idx, note = problem_draw(cfg, len(examples))
    notes += [note] if note else []
    warm_up, note = _warm_up(cfg, config, checkpoint, task)
    notes += [note] if note else []
    return EvalPlan(
        config, checkpoint, task, options, [examples[i] for i in idx], [ids[i] for i in idx],
        warm_up, tuple(notes),
    )  # fmt: skip


def _load(task: Any, split: str) -> list[dict[str, Any]]:
    """task.load(split), an offline Hub failure's fix in `pgrpo eval`'s own words."""
    from pgrpo.errors import UserError

    try:
        return task.load(split)
    except UserError as exc:
        if "task.options.data" not in exc.fix:
            raise
        raise UserError(
            exc.problem,
            "offline? give a local copy: --task-options '{data: path/to/folder}' (the folder "
            "holding the split's .jsonl file, or the file itself), or a .jsonl file as --split",
        ) from None


def _warm_up(
    cfg: EvalConfig, config: Any, checkpoint: Path | None, task: Any
) -> tuple[bool, str | None]:
    """(whether the tiny model is warmed up, note or None): a model by name is warmed up on the
    task's train split with the evaluation's options; a task without a train split (MATH-500)
    leaves the tiny model random, and says so; one without reference answers is refused."""
    from pgrpo.errors import UserError

    if checkpoint is not None:
        return False, None  # the checkpoint holds the weights (LoRA: `load_policy` warms up)
    if config.model.name != "tiny" or not config.model.tiny_warmup_steps:
        return True, None
    try:
        train = task.load("train")
    except (OSError, ValueError, KeyError) as exc:
        why = exc.problem if isinstance(exc, UserError) else str(exc)
        return False, (
            f"the tiny model is not warmed up: task {cfg.task!r} has no train split to warm it "
            f"up on ({why[:160]}); it samples as a random network (--model smollm2 for a real "
            "model, --tiny-warmup-steps 0 to skip the warm-up on purpose)"
        )
    if not callable(getattr(task, "reference", None)) and any("answer" not in e for e in train):
        raise UserError(
            f"task {cfg.task!r} gives no reference answer (no `reference` method, no 'answer' "
            "field) for the tiny model's warm-up",
            "use --model smollm2, or --tiny-warmup-steps 0 (a random tiny network)",
        )
    return True, None


def planned_run(cfg: EvalConfig, plan: EvalPlan) -> EvalRun:
    """An EvalRun of the planned problems with no correct sample: what a --baseline is checked
    against (`pair_problems`) before sampling."""
    return EvalRun(
        name="planned", ids=plan.ids, n=[1] * len(plan.ids), c=[0] * len(plan.ids),
        task=cfg.task, split=cfg.split, task_options=plan.options,
        problem_seed=cfg.problem_seed, decoding=cfg.decoding,
    )  # fmt: skip


def evaluate(
    cfg: EvalConfig,
    *,
    seed: int = 0,
    name: str | None = None,
    on_note: Callable[[str], None] | None = None,
    plan: EvalPlan | None = None,
) -> EvalRun:
    """Sample cfg.samples completions per problem at `seed` and count the correct ones
    (`pgrpo.tasks.base.is_correct`: the task's `correct`, else reward at its maximum), through
    the trainer's rollout path (safe scoring with the task's timeout, an empty completion is
    wrong). `plan` (`plan_eval`, made here when None) read the split before the model loads;
    `on_note` gets what the user should know: the plan's notes, and a warning when scoring
    raised or timed out (`failure_warning`; the counts are in the run's metrics)."""
    from pgrpo.evaluate.problems import CorrectnessTask
    from pgrpo.train.rollout import load_checkpoint_weights, load_task_and_policy, sample_and_score

    plan = plan or plan_eval(cfg)
    for note in plan.notes:
        if on_note is not None:
            on_note(note)
    _, policy = load_task_and_policy(plan.config, warm_up=plan.warm_up)
    step = 0
    if plan.checkpoint is not None:
        step = int(load_checkpoint_weights(policy, plan.checkpoint)["step"])
    torch.manual_seed(seed)
    view = CorrectnessTask(plan.task)
    n, c, errors, timeouts, messages = [], [], 0, 0, []
    for start in range(0, len(plan.examples), cfg.batch_prompts):
        batch = plan.examples[start : start + cfg.batch_prompts]
        scored = sample_and_score(
            policy, view, batch, group_size=cfg.samples,
            temperatures=[cfg.temperature] * cfg.samples, max_new_tokens=cfg.max_new_tokens,
            reward_timeout_s=plan.config.task.reward_timeout_s,
        )  # fmt: skip
        correct = (scored.rewards.double().numpy().reshape(len(batch), cfg.samples) > 0.5).sum(1)
        n += [cfg.samples] * len(batch)
        c += [int(x) for x in correct]
        errors, timeouts = errors + scored.score.errors, timeouts + scored.score.timeouts
        messages += list(scored.score.error_messages)
    failures = {"reward_errors": float(errors), "reward_timeouts": float(timeouts)}
    run = EvalRun(
        name=name or f"{Path(cfg.model).name}@{step}/seed{seed}",
        ids=list(plan.ids), n=n, c=c, step=step, seed=seed, task=cfg.task, split=cfg.split,
        model=cfg.model, metrics=failures, task_options=plan.options,
        problem_seed=cfg.problem_seed, id_source="problem", decoding=cfg.decoding,
    )  # fmt: skip
    warning = failure_warning(run, messages[0] if messages else "")
    if warning is not None and on_note is not None:
        on_note(f"warning: {warning}")
    return run


def failure_warning(run: EvalRun, example: str = "") -> str | None:
    """What to say when scoring a run raised or timed out (None when it did not): those samples
    count as wrong, so the accuracy is a lower bound."""
    errors = int(run.metrics.get("reward_errors", 0))
    timeouts = int(run.metrics.get("reward_timeouts", 0))
    if not errors and not timeouts:
        return None
    first = f" (first: {example[:160]})" if example else ""
    return (
        f"{run.name}: {errors} of {sum(run.n)} scoring calls raised and {timeouts} timed out"
        f"{first}; they count as wrong, so the accuracy is a lower bound: check the problems' "
        "gold answers and the task's reward"
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
        pairing = pair_problems(runs, baseline)  # UserError: not the same problems
        doc["baseline"] = [r.summary() for r in baseline]
        doc["comparison"] = compare(runs, baseline, pairing=pairing)
        doc["search_compression"] = search_compression(baseline, runs, pairing=pairing)
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
    """The EvalRuns of an eval JSON written by `pgrpo eval --out` (its results: the seeds of one
    evaluation); UserError naming the file, the result and the field when it holds none, a
    record does not read (`EvalRun.from_summary`), its seeds evaluated different problems
    (`check_one_problem_set`) or sampled with different decoding settings
    (`check_one_decoding`)."""
    from pgrpo.errors import UserError

    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or data.get("kind") != EVAL_KIND:
        raise ValueError(f"{path} is not a `pgrpo eval` JSON (kind != {EVAL_KIND!r})")
    results = data.get("results")
    fix = "give the file `pgrpo eval --out` wrote (one result per sampling seed)"
    if not isinstance(results, list) or not results:
        raise UserError(
            f"{path} holds no eval results ('results' is {json.dumps(results)[:40]})", fix
        )
    try:
        runs = [EvalRun.from_summary(rec, i) for i, rec in enumerate(results)]
        check_one_problem_set(runs, "its results")
        check_one_decoding(runs, "its results")
    except UserError as exc:
        raise UserError(f"{path}: {exc.problem}", exc.fix) from None
    except ValueError as exc:
        raise UserError(f"{path}: {exc}", fix) from None
    return runs


def _tmp(path: Path) -> Path:
    return path.with_suffix(path.suffix + ".tmp")


def check_writable(path: str | Path) -> None:
    """Create and remove the file `write_eval` writes first (OSError when it cannot), so that a
    bad --out fails before sampling rather than after."""
    tmp = _tmp(Path(path))
    tmp.write_text("")
    tmp.unlink()


def write_eval(doc: dict[str, Any], path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(out)
    tmp.write_text(json.dumps(doc, indent=1, allow_nan=False))
    tmp.replace(out)
    return out
