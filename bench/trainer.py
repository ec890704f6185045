"""pgrpo's trainer vs TRL's GRPOTrainer on the same CPU workload, and the floor.

Workload (both): SmolLM2-135M-Instruct (the converted gguf, float32), arithmetic level 1 prompts in
the chat template, B = 8 prompts x G = 4 completions, at most 32 new tokens, temperature 1, no
top-k / top-p, full fine-tune, AdamW lr 1e-6, token-mean loss, no KL (both frameworks' defaults),
K = 1. One warm-up step, then `--steps` timed steps. pgrpo runs with grpo.micro_batch_size=8
(two groups per forward/backward; the gradient is exactly the full batch's); TRL with its defaults
(which turn on activation checkpointing).
Floor: the same generation (HF generate) plus one forward/backward of the same tokens through a
plain full-logits log-softmax, no optimizer, no scoring.

Each variant runs in a fresh process started by a launcher process that reports the worker's peak
RSS with `resource.getrusage(RUSAGE_CHILDREN)`.

    nice -n 10 python bench/trainer.py            # all three, writes bench/results/trainer.json
    python bench/trainer.py --variants pgrpo --steps 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

BATCH_PROMPTS, GROUP, NEW_TOKENS, LR = 8, 4, 32, 1e-6
HERE = Path(__file__).resolve().parent


def _prompts(n: int) -> tuple[list[dict], object]:
    import pgrpo.tasks.arithmetic  # noqa: F401
    from pgrpo.tasks import get_task

    task = get_task("arithmetic", levels=[1], n=200)
    return task.load("train")[:n], task


def worker_pgrpo(steps: int) -> list[float]:
    from pgrpo.train.config import load_config
    from pgrpo.train.trainer import build_run, train_step

    cfg = load_config(
        None,
        [
            "task.options={levels: [1], n: 200}",
            f"group_size={GROUP}",
            f"batch_prompts={BATCH_PROMPTS}",
            f"max_new_tokens={NEW_TOKENS}",
            f"lr={LR}",
            "forecast_every=0",
            "grpo.micro_batch_size=8",
        ],
    )
    run = build_run(cfg, resume=False)
    times, tokens = [], []
    for step in range(1, steps + 2):
        t = time.perf_counter()
        metrics = train_step(run, step)
        times.append(time.perf_counter() - t)
        tokens.append(metrics["completions/mean_length"] * GROUP * BATCH_PROMPTS)
    return times, tokens


def worker_trl(steps: int) -> tuple[list[float], list[float]]:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from pgrpo.train.policies import smollm2_dir

    examples, task = _prompts(200)
    data = Dataset.from_list(
        [
            {"prompt": [{"role": "user", "content": task.prompt(e)}], "answer": e["answer"]}
            for e in examples
        ]
    )

    def reward(completions, answer, **kwargs):
        return [
            task.reward(c[0]["content"], {"answer": a})
            for c, a in zip(completions, answer, strict=True)
        ]

    stamps: list[float] = []
    lengths: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            stamps.append(time.perf_counter())

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "completions/mean_length" in logs:
                lengths.append(logs["completions/mean_length"] * GROUP * BATCH_PROMPTS)

    path = str(smollm2_dir())
    args = GRPOConfig(
        output_dir="/tmp/pgrpo-bench-trl",
        num_generations=GROUP,
        per_device_train_batch_size=GROUP * BATCH_PROMPTS,
        max_completion_length=NEW_TOKENS,
        learning_rate=LR,
        max_steps=steps + 1,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        seed=0,
        temperature=1.0,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(path),
        processing_class=AutoTokenizer.from_pretrained(path),
        reward_funcs=reward,
        args=args,
        train_dataset=data,
        callbacks=[Clock()],
    )
    trainer.train()
    stamps.append(time.perf_counter())
    times = [b - a for a, b in zip(stamps[:-1], stamps[1:], strict=True)]
    return times, lengths


def worker_floor(steps: int) -> tuple[list[float], list[float]]:
    import torch

    from pgrpo.train.config import ModelConfig
    from pgrpo.train.generation import left_pad
    from pgrpo.train.policies import load_policy

    examples, task = _prompts(200)
    policy = load_policy(ModelConfig())
    model, tok = policy.model, policy.tokenizer
    times, tokens = [], []
    for step in range(steps + 1):
        batch = examples[step * BATCH_PROMPTS : (step + 1) * BATCH_PROMPTS]
        ids = [tok.encode_prompt(task.prompt(e)) for e in batch for _ in range(GROUP)]
        t = time.perf_counter()
        prompt, mask = left_pad(ids, tok.pad_token_id)
        with torch.no_grad():
            out = model.generate(
                input_ids=prompt,
                attention_mask=mask,
                do_sample=True,
                top_k=0,
                top_p=1.0,
                temperature=1.0,
                max_new_tokens=NEW_TOKENS,
                pad_token_id=tok.pad_token_id,
            )
        full_mask = torch.cat([mask, torch.ones_like(out[:, prompt.shape[1] :])], 1)
        logits = model(input_ids=out, attention_mask=full_mask).logits[:, prompt.shape[1] - 1 : -1]
        logp = torch.log_softmax(logits.float(), -1).gather(-1, out[:, prompt.shape[1] :, None])
        logp.mean().backward()
        model.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t)
        tokens.append(float((out[:, prompt.shape[1] :] != tok.pad_token_id).sum()))
    return times, tokens


WORKERS = {"pgrpo": worker_pgrpo, "trl": worker_trl, "floor": worker_floor}


def launch(variant: str, steps: int) -> dict:
    """Run one variant in a fresh worker process; the launcher reads its peak RSS."""
    code = (
        "import json, resource, subprocess, sys;"
        f"p = subprocess.run([sys.executable, {str(Path(__file__))!r}, '--worker', {variant!r},"
        f" '--steps', '{steps}'], capture_output=True, text=True);"
        "sys.stderr.write(p.stderr[-3000:]);"
        "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss;"
        "print(json.dumps({'rc': p.returncode, 'out': p.stdout, 'peak_rss_mb': rss / 1024}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    info = json.loads(done.stdout.strip().splitlines()[-1])
    if info["rc"] != 0:
        raise RuntimeError(f"{variant} failed:\n{done.stderr}")
    result = json.loads(info["out"].strip().splitlines()[-1])
    times, tokens = result["times"][1:], result["tokens"][-steps:]  # drop the warm-up step
    s = sum(times) / len(times)
    return {
        "variant": variant,
        "seconds_per_step": s,
        "step_times": times,
        "completion_tokens_per_second": (sum(tokens) / len(tokens)) / s if tokens else None,
        "peak_rss_mb": info["peak_rss_mb"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="floor,pgrpo,trl")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--worker", default=None)
    parser.add_argument("--out", default=str(HERE / "results" / "trainer.json"))
    args = parser.parse_args()
    if args.worker:
        times, tokens = WORKERS[args.worker](args.steps)
        print(json.dumps({"times": times, "tokens": tokens}))
        return
    rows = []
    for variant in args.variants.split(","):
        rows.append(launch(variant, args.steps))
        write(args, rows)  # partial results survive a later variant's failure


def write(args: argparse.Namespace, rows: list[dict]) -> None:
    by = {r["variant"]: r for r in rows}
    ratios = {}
    if "pgrpo" in by and "trl" in by:
        ratios["speedup_vs_trl"] = by["trl"]["seconds_per_step"] / by["pgrpo"]["seconds_per_step"]
        ratios["memory_vs_trl"] = by["pgrpo"]["peak_rss_mb"] / by["trl"]["peak_rss_mb"]
    if "pgrpo" in by and "floor" in by:
        ratios["vs_floor"] = by["pgrpo"]["seconds_per_step"] / by["floor"]["seconds_per_step"]
    print(f"{'variant':<8} {'s/step':>8} {'compl tok/s':>12} {'peak RSS MB':>12}")
    for r in rows:
        tps = r["completion_tokens_per_second"]
        print(
            f"{r['variant']:<8} {r['seconds_per_step']:>8.2f} {tps or 0:>12.1f} "
            f"{r['peak_rss_mb']:>12.0f}"
        )
    for k, v in ratios.items():
        print(f"{k}: {v:.2f}")
    out = {
        "command": f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')} nice -n 10 "
        "python bench/trainer.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "machine": "2-core CPU, 24 GiB, no GPU (shared with other jobs)",
        "torch_threads": int(os.environ.get("OMP_NUM_THREADS", "0")) or None,
        "workload": {
            "batch_prompts": BATCH_PROMPTS,
            "group_size": GROUP,
            "max_new_tokens": NEW_TOKENS,
            "timed_steps": args.steps,
            "warmup_steps": 1,
        },
        "results": rows,
        "ratios": ratios,
        "targets": {"speedup_vs_trl": ">= 1.3", "memory_vs_trl": "<= 0.7", "vs_floor": "<= 1.2"},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
