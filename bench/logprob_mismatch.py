"""How far the trainer's recomputed log-probs are from the sampler's own, per precision.

For each model and precision: sample B = 4 arithmetic prompts x G = 4 completions (temperatures
0.5, 1, 1, 2; 16 new tokens) keeping the sampler's log-probs of the drawn tokens, recompute them
the way the trainer computes old log-probs, and report |recomputed - sampler| over the completion
tokens (max, mean, p99), plus the seconds of each part. Also checks that the K = 1 importance
ratio is exactly 1 (old = current, bit for bit) in every setting.

    OMP_NUM_THREADS=1 python bench/logprob_mismatch.py        # tiny and smollm2
    -> bench/results/logprob_mismatch.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

import torch

from pgrpo.train.config import load_config
from pgrpo.train.generation import sample
from pgrpo.train.rollout import load_task_and_policy
from pgrpo.train.update import _score_rows, scoring_temperatures, sequence_log_probs

TEMPS = [0.5, 1.0, 1.0, 2.0]


def measure(model: str, precision: str, seed: int) -> dict:
    cfg = load_config(
        None,
        [
            f"model.name={model}",
            f"model.precision={precision}",
            "model.tiny_warmup_steps=0",
            "task.options={levels: [1]}",
            "group_size=4",
            "batch_prompts=4",
            "max_new_tokens=16",
            f"generation.temperatures={TEMPS}",
        ],
    )
    task, policy = load_task_and_policy(cfg)
    prompts = [task.prompt(e) for e in task.load("train")[:4]]
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    ro = sample(
        policy, prompts, group_size=4, temperatures=TEMPS, max_new_tokens=16, with_log_probs=True
    )
    t1 = time.perf_counter()
    temps = scoring_temperatures(ro, cfg)
    old = sequence_log_probs(policy, cfg, ro, temps)
    t2 = time.perf_counter()
    rows = torch.arange(ro.input_ids.shape[0])
    now = _score_rows(policy, cfg, ro, rows, temps, old, False, False).log_probs.detach()
    mask = ro.completion_mask.bool()
    diff = (old - ro.sampler_log_probs)[mask].abs().double()
    return {
        "model": model,
        "precision": policy.precision.name,
        "reason": policy.precision.reason,
        "tokens": int(mask.sum()),
        "max_abs": float(diff.max()),
        "mean_abs": float(diff.mean()),
        "p99_abs": float(diff.quantile(0.99)),
        "ratio_exactly_1_at_lag_0": bool(torch.equal(now[mask], old[mask])),
        "sample_s": t1 - t0,
        "recompute_s": t2 - t1,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny,smollm2")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", default=str(Path(__file__).parent / "results/logprob_mismatch.json")
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = [measure(m, p, args.seed) for m in args.models.split(",") for p in ("fp32", "bf16")]
    doc = {
        "command": "python " + " ".join(sys.argv),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "torch_threads": 1,
        "results": results,
    }
    Path(args.out).write_text(json.dumps(doc, indent=1))
    for r in results:
        print(
            f"{r['model']:8} {r['precision']:14} max {r['max_abs']:.3g} mean {r['mean_abs']:.3g} "
            f"p99 {r['p99_abs']:.3g} ratio==1: {r['ratio_exactly_1_at_lag_0']}"
        )


if __name__ == "__main__":
    main()
