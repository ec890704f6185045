"""pgrpo's attention (`train/attention.py`) against transformers' sdpa, on the 8x4x32 cell.

Three measurements, one process, one thread (docs/trainer.md, "Attention in the update"):
1. the kernel alone, forward + backward at the update's shapes (SmolLM2: 9 query heads on 3
   key / value heads, head size 64, bf16 inputs): the completion pass (32 rows x 32 tokens
   against 82 keys) and the prompt pass (8 prompts x 50 tokens); torch's fused kernel on keys /
   values repeated to 9 heads (what transformers does with a padding mask) vs
   `grouped_attention`; CPU ms, median of `--reps` x 20 calls;
2. `trainer.optimize` (the whole update: forward, backward, AdamW) on ONE rollout of the cell,
   the model's attention switched between "sdpa" and "pgrpo" before each call, interleaved;
   process CPU s, median of the repetitions after the first;
3. accuracy under bf16 autocast: each kernel's completion log-probs and full gradient against
   the same model in fp32 with sdpa (mean / max |d log p| over completion tokens, relative
   error and cosine of the whole gradient).

    OMP_NUM_THREADS=1 python bench/attention.py [--reps 4] [--out bench/results/attention.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import trainer as bench  # noqa: E402  (the same prompts as bench/trainer.py)

OUT = HERE / "results" / "attention.json"


def _repeat(x: torch.Tensor, r: int) -> torch.Tensor:
    b, h, n, d = x.shape
    return x[:, :, None].expand(b, h, r, n, d).reshape(b, h * r, n, d)


SHAPES = {"completion 32x32, 82 keys": (32, 32, 82), "prompt 8x50": (8, 50, 50)}


def _kernels(n: int, lq: int, keys: int) -> dict:
    """label -> a function doing one forward + backward at rows n, queries lq, keys."""
    from pgrpo.train.attention import causal, grouped_attention

    torch.manual_seed(0)
    q = torch.randn(n, 9, lq, 64, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(n, 3, keys, 64, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(n, 3, keys, 64, dtype=torch.bfloat16, requires_grad=True)
    mask = causal(lq, keys).expand(n, 1, lq, keys)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def fused():
        sdpa(q, _repeat(k, 3), _repeat(v, 3), attn_mask=mask).float().sum().backward()

    def grouped():
        grouped_attention(q, k, v, mask).float().sum().backward()

    return {"sdpa (flash, repeated k/v)": fused, "pgrpo grouped": grouped}


def kernel_ms(reps: int) -> dict:
    out = {}
    for name, shape in SHAPES.items():
        fns = _kernels(*shape)
        times = {label: [] for label in fns}
        for _ in range(reps):
            for label, fn in fns.items():
                fn()
                t = time.process_time()
                for _ in range(20):
                    fn()
                times[label].append((time.process_time() - t) / 20 * 1e3)
        out[name] = {label: round(statistics.median(ts), 2) for label, ts in times.items()}
    return out


def _run(attention: str):
    from pgrpo.train.config import load_config
    from pgrpo.train.trainer import build_run

    torch.manual_seed(0)
    cfg = load_config(
        None,
        [
            "task.options={levels: [1], n: 200}",
            "model.name=smollm2",
            "model.precision=bf16",
            f"model.attention={attention}",
            "group_size=4",
            "batch_prompts=8",
            "max_new_tokens=32",
            f"lr={bench.LR}",
            "forecast_every=0",
        ],
    )
    return build_run(cfg, resume=False)


def update_seconds(reps: int) -> dict:
    from pgrpo.train.attention import use_attention
    from pgrpo.train.generation import sample
    from pgrpo.train.trainer import optimize

    run = _run("sdpa")
    examples, task = bench._task_prompts(200)
    prompts = [task.prompt(e) for e in examples[8:16]]
    rollout = sample(run.policy, prompts, group_size=4, temperatures=[1.0] * 4, max_new_tokens=32)
    advantages = torch.randn(32, generator=torch.Generator().manual_seed(0))
    times = {"sdpa": [], "pgrpo": []}
    for _ in range(reps):
        for attention in times:
            use_attention(run.policy.model, attention)
            t = time.process_time()
            optimize(run, rollout, advantages)
            times[attention].append(time.process_time() - t)
    median = {a: statistics.median(ts[1:]) for a, ts in times.items()}
    return {
        "completion_tokens": int(rollout.completion_mask.sum()),
        "cpu_s": {a: [round(t, 3) for t in ts] for a, ts in times.items()},
        "median_after_first": {a: round(t, 3) for a, t in median.items()},
        "ratio_pgrpo_to_sdpa": round(median["pgrpo"] / median["sdpa"], 3),
    }, rollout


def accuracy(rollout) -> dict:
    from pgrpo.train.logprobs import completion_scores

    def scored(attention: str, precision: str):
        from pgrpo.train.config import ModelConfig
        from pgrpo.train.policies import load_policy

        policy = load_policy(ModelConfig(precision=precision, attention=attention))
        with policy.precision.autocast():
            scores = completion_scores(
                policy.model, rollout.input_ids, rollout.attention_mask, rollout.prompt_len
            )
            loss = (scores.log_probs.float() * rollout.completion_mask).sum()
        loss.backward()
        grad = torch.cat([p.grad.flatten().double() for p in policy.model.parameters()])
        return scores.log_probs.float().detach(), grad

    mask = rollout.completion_mask.bool()
    ref_lp, ref_grad = scored("sdpa", "fp32")
    out = {}
    for attention in ("sdpa", "pgrpo"):
        lp, grad = scored(attention, "bf16")
        d = (lp - ref_lp)[mask].abs()
        out[f"{attention}-bf16 vs sdpa-fp32"] = {
            "logprob_mean_abs": round(float(d.mean()), 5),
            "logprob_max_abs": round(float(d.max()), 5),
            "grad_rel_err": round(float((grad - ref_grad).norm() / ref_grad.norm()), 5),
            "grad_cosine": round(
                float(torch.nn.functional.cosine_similarity(grad, ref_grad, 0)), 6
            ),
        }
    lp32, grad32 = scored("pgrpo", "fp32")
    out["pgrpo-fp32 vs sdpa-fp32"] = {
        "logprob_max_abs": float((lp32 - ref_lp)[mask].abs().max()),
        "grad_rel_err": float((grad32 - ref_grad).norm() / ref_grad.norm()),
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=4)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    kernels = kernel_ms(args.reps)
    update, rollout = update_seconds(args.reps)
    result = {
        "command": "python " + " ".join(sys.argv),
        "date": started,
        "kernel_fwd_bwd_cpu_ms": kernels,
        "update": update,
        "accuracy_bf16": accuracy(rollout),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print("| kernel, fwd + bwd, CPU ms | sdpa (repeated k/v) | pgrpo |\n|---|---|---|")
    for shape, row in kernels.items():
        print(f"| {shape} | {' | '.join(str(x) for x in row.values())} |")
    med = update["median_after_first"]
    print(
        f"update on one rollout ({update['completion_tokens']} completion tokens): sdpa "
        f"{med['sdpa']} s, pgrpo {med['pgrpo']} s ({update['ratio_pgrpo_to_sdpa']}x)"
    )
    for label, row in result["accuracy_bf16"].items():
        print(label, row)


if __name__ == "__main__":
    main()
