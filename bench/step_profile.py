"""Where one trainer step's time goes, part by part, in pgrpo and in bench/trainer.py's floor.

The 8x4x32 cell of bench/trainer.py (SmolLM2-135M-Instruct, arithmetic level 1 in the chat
template, B = 8 x G = 4, at most 32 new tokens, lr 1e-6, K = 1, one pass per minibatch unless
`grpo.micro_batch_size=8` is given, one thread, bf16 autocast unless `model.precision=fp32`).
Each part is timed by wrapping the function that does it (process CPU time, inclusive: the
head's recompute under activation checkpointing runs inside backward, so `head` is also counted
inside `backward`); one warm-up step, then the median of the timed steps. One variant per
process:

    OMP_NUM_THREADS=1 python bench/step_profile.py pgrpo [--steps 2] [key=value ...]
    OMP_NUM_THREADS=1 python bench/step_profile.py floor
    OMP_NUM_THREADS=1 python bench/step_profile.py pgrpo --label NAME --out bench/results/x.json

Each run replaces its label's row (default: the variant) in bench/results/step_profile.json.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import trainer as bench  # noqa: E402  (bench/trainer.py: the same cell and workers' settings)

CLOCK: dict[str, float] = defaultdict(float)
PHASE_HOOKS: list = []  # (enter(label), exit(label)) pairs called at each phase boundary
MEMORY = None  # step_memory.PhaseMemory under --memory


def _wrap(owner: object, name: str, label: str) -> None:
    """Replace owner.name by a version that adds its process CPU time to CLOCK[label]."""
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def timed(*args, **kwargs):
        for enter, _ in PHASE_HOOKS:
            enter(label)
        t = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            CLOCK[label] += time.process_time() - t
            for _, leave in PHASE_HOOKS:
                leave(label)

    setattr(owner, name, timed)


def instrument() -> None:
    """The parts of a step: sampling (shared-prompt prefill, the decode loop, the sampler's
    draw, decoding text), scoring, the update (decoder forward, head, loss,
    backward), the optimizer (clip, AdamW, zero_grad) and the step's metrics."""
    import transformers

    from pgrpo.core import degeneracy
    from pgrpo.train import generation, logprobs, rollout, trainer, update

    _wrap(rollout, "sample", "sample (all)")
    _wrap(generation, "sample", "sample (all)")
    _wrap(generation, "shared_prompt_cache", "sample: shared prompt prefill")
    if hasattr(generation, "decode"):  # pgrpo's own loop (2026-12-02 on)
        _wrap(generation, "decode", "sample: decode loop")
        _wrap(generation, "draw_tokens", "sample: sampler (draw_tokens)")
    else:  # the code before: HF generate with the sampler as a logits processor
        _wrap(transformers.GenerationMixin, "generate", "sample: decode loop")
        _wrap(generation.RowTemperatureSampler, "__call__", "sample: sampler (draw_tokens)")
    _wrap(rollout, "score_completions", "score")
    _wrap(trainer, "batch_advantages", "advantages")
    _wrap(logprobs, "completion_hidden", "update: decoder forward")
    _wrap(logprobs, "_chunk_scores", "update: head + logsumexp (+ entropy), fwd and recompute")
    _wrap(update, "policy_loss", "update: policy_loss (micro-batches + metrics)")
    _wrap(torch.Tensor, "backward", "update: backward")
    _wrap(torch.nn.utils, "clip_grad_norm_", "optimizer: clip_grad_norm_")
    _wrap(torch.optim.Optimizer, "zero_grad", "optimizer: zero_grad")
    _wrap(torch.nn.Module, "zero_grad", "optimizer: zero_grad")
    _wrap(trainer, "group_stats", "metrics: group stats")
    _wrap(trainer, "_task_metrics", "metrics: task metrics")
    _ = degeneracy


def pgrpo_steps(steps: int, overrides: list[str]) -> tuple[list[dict], dict]:
    from pgrpo.train.config import load_config
    from pgrpo.train.trainer import build_run, train_step

    torch.manual_seed(0)
    cfg = load_config(
        None,
        [
            "task.options={levels: [1], n: 200}",
            "model.precision=bf16",
            "group_size=4",
            "batch_prompts=8",
            "max_new_tokens=32",
            f"lr={bench.LR}",
            "forecast_every=0",
            *overrides,
        ],
    )
    run = build_run(cfg, resume=False)
    instrument()
    _wrap(run.optimizer, "step", "optimizer: AdamW step")
    if MEMORY is not None:
        import step_memory

        step_memory.install(MEMORY, PHASE_HOOKS, run)
    out = []
    for step in range(1, steps + 2):
        out.append(_timed_step(lambda step=step: train_step(run, step)))
        if step == 1 and MEMORY is not None:
            MEMORY.reset()  # the timed steps only (the first builds AdamW's state)
    info = {"precision": run.policy.precision.name, "logprob_chunk": cfg.generation.logprob_chunk}
    return out, info


def floor_steps(steps: int, overrides: list[str]) -> tuple[list[dict], dict]:
    from pgrpo.train import generation
    from pgrpo.train.config import ModelConfig
    from pgrpo.train.logprobs import completion_scores
    from pgrpo.train.policies import load_policy

    precision = next((o.split("=", 1)[1] for o in overrides if "precision" in o), "bf16")
    torch.manual_seed(0)
    examples, task = bench._task_prompts(200)
    policy = load_policy(ModelConfig(name="smollm2", precision=precision))
    instrument()
    if MEMORY is not None:
        import step_memory

        step_memory.install(MEMORY, PHASE_HOOKS)

    def one(step: int) -> dict:
        batch = examples[(step * 8) % 192 : (step * 8) % 192 + 8]
        with policy.precision.autocast():
            ro = generation.sample(
                policy,
                [task.prompt(e) for e in batch],
                group_size=4,
                temperatures=[1.0] * 4,
                max_new_tokens=32,
            )
            scores = completion_scores(policy.model, ro.input_ids, ro.attention_mask, ro.prompt_len)
            (scores.log_probs.float() * ro.completion_mask).sum().backward()
        policy.model.zero_grad(set_to_none=True)
        return {"completion_tokens": float(ro.completion_mask.sum())}

    out = []
    for s in range(steps + 1):
        out.append(_timed_step(lambda s=s: one(s)))
        if s == 0 and MEMORY is not None:
            MEMORY.reset()
    return out, {"precision": policy.precision.name, "logprob_chunk": 16}


def _set_malloc(mode: str) -> None:
    """as-is: the code's own rule; mmap-1mb: also serve allocations >= 1 MB with mmap (pgrpo
    until 2026-12-02); no-trim: without the per-step malloc_trim; heap: never mmap (no trim)."""
    import ctypes

    from pgrpo.train import trainer

    libc = ctypes.CDLL("libc.so.6")
    if mode == "mmap-1mb":
        libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD
    if mode in ("no-trim", "heap"):
        trainer.release_freed_memory = lambda *_: None
    if mode == "heap":
        libc.mallopt(-4, 0)  # M_MMAP_MAX: no mmap
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD


def _timed_step(fn) -> dict:
    CLOCK.clear()
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    row = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}
    row.update({k: v for k, v in CLOCK.items()})
    if isinstance(result, dict) and "completions/mean_length" in result:
        row["completion_tokens"] = result["completions/mean_length"] * 32
    elif isinstance(result, dict):
        row.update(result)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant", choices=("pgrpo", "floor"))
    parser.add_argument("overrides", nargs="*", help="pgrpo config overrides (key=value)")
    parser.add_argument("--steps", type=int, default=2, help="timed steps after one warm-up")
    parser.add_argument("--label", default=None)
    parser.add_argument("--out", default=str(HERE / "results" / "step_profile.json"))
    parser.add_argument(
        "--malloc",
        choices=("as-is", "mmap-1mb", "no-trim", "heap"),
        default="as-is",
        help="as-is: the code's rule; mmap-1mb: + M_MMAP_THRESHOLD = 1 MB (pgrpo before "
        "2026-12-02); no-trim: no malloc_trim after the update; heap: never mmap",
    )
    parser.add_argument("--torch-profile", action="store_true", help="print top ops of a step")
    parser.add_argument(
        "--memory",
        action="store_true",
        help="per-phase peak RSS and live malloc bytes, what is alive at backward and AdamW "
        "(bench/step_memory.py; resets VmHWM, so /usr/bin/time's peak is not the run's then)",
    )
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    _set_malloc(args.malloc)
    if args.memory:
        import step_memory

        global MEMORY
        MEMORY = step_memory.PhaseMemory()
    fn = pgrpo_steps if args.variant == "pgrpo" else floor_steps
    load = os.getloadavg()
    ctx = contextlib.nullcontext()
    if args.torch_profile:
        ctx = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    with ctx as prof:
        rows, info = fn(args.steps, args.overrides)
    if prof is not None:
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))
    timed = rows[1:]
    keys = dict.fromkeys(k for r in timed for k in r)
    medians = {k: round(statistics.median(r.get(k, 0.0) for r in timed), 3) for k in keys}
    out = {
        "label": args.label or args.variant,
        "variant": args.variant,
        "overrides": args.overrides,
        "malloc": args.malloc,
        **info,
        "load_average_before": load,
        "load_average_after": os.getloadavg(),
        "median_of_timed_steps": medians,
        "steps": rows,
    }
    if MEMORY is not None:
        MEMORY.stop()
        out["memory"] = MEMORY.report()
        print(json.dumps(out["memory"], indent=1))
    print(json.dumps(medians, indent=1))
    doc = {"results": []}
    if os.path.exists(args.out):
        doc = json.loads(Path(args.out).read_text())
    doc["results"] = [r for r in doc["results"] if r.get("label") != out["label"]] + [out]
    doc["command"] = "OMP_NUM_THREADS=1 python bench/step_profile.py VARIANT [key=value ...]"
    doc["cell"] = "8x4x32 (SmolLM2-135M-Instruct, B=8 x G=4, <= 32 new tokens, one thread)"
    doc["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
