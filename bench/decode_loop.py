"""The decode loop's costs, change by change (docs/trainer.md, "The decode loop").

One process, the 8x4x32 cell's sampling (SmolLM2-135M-Instruct, 8 arithmetic level-1 prompts in
the chat template x G = 4 at temperature 1, at most 32 new tokens, bf16 autocast unless
--precision fp32, one thread). Each repetition decodes the same prompts from the same random
state with every variant in turn (interleaved, so load drifts hit all alike), after the same
shared-prompt prefill (not timed); process CPU seconds, medians:
- `generate`: HF `generate` with `RowTemperatureSampler` (pgrpo before 2026-12-02);
- `loop, DynamicCache`: `generation.decode` with transformers' growing cache;
- `loop, preallocated fp32 cache`: a cache written in place, kept in the states' float32;
- `loop` (pgrpo now): the cache kept in the autocast dtype.
Also the sampler alone (`draw_tokens` before and after, [32, 49152] scores, 50 draws), and
whether every variant drew the same tokens as `generate`.

    OMP_NUM_THREADS=1 python bench/decode_loop.py [--reps 3] [--precision bf16]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import trainer as bench  # noqa: E402  (the same prompts as bench/trainer.py)


def _old_draw(scores: torch.Tensor, temperatures: torch.Tensor) -> torch.Tensor:
    """`RowTemperatureSampler`'s draw before 2026-12-02 (normalised softmax, argmax always)."""
    temps = temperatures.double()[:, None]
    greedy = temps == 0
    logits = scores.double() / torch.where(greedy, 1.0, temps)
    cdf = torch.softmax(logits, dim=-1).cumsum(-1)
    u = torch.rand(scores.shape[0], 1, dtype=torch.float64) * cdf[:, -1:]
    token = torch.searchsorted(cdf, u, right=True).clamp(max=scores.shape[1] - 1)
    return torch.where(greedy, scores.argmax(-1, keepdim=True), token).squeeze(-1)


def _sampler_seconds(draw, reps: int = 50) -> float:
    torch.manual_seed(0)
    scores, temps = torch.randn(32, 49152) * 4, torch.ones(32)
    draw(scores, temps)
    t = time.process_time()
    for _ in range(reps):
        draw(scores, temps)
    return (time.process_time() - t) / reps


def _variants() -> dict[str, list | None]:
    """name -> the (module, attribute, replacement) patches that make it (None: `generate`)."""
    from pgrpo.train import generation, kvcache

    def fp32_storage(states, cached):
        return states.dtype if cached is None else torch.promote_types(cached.dtype, states.dtype)

    def dynamic(cache, config, capacity):
        return cache if cache is not None else kvcache.DynamicCache(config=config)

    return {
        "generate": None,
        "loop, DynamicCache": [(generation, "preallocate", dynamic)],
        "loop, preallocated fp32 cache": [(kvcache, "_storage_dtype", fp32_storage)],
        "loop": [],
    }


def _decode_once(policy, encoded, patch, seed: int) -> tuple[float, torch.Tensor]:
    """(CPU s per decode step, tokens [32, T]) of one variant after a fresh shared prefill."""
    from pgrpo.train import generation
    from pgrpo.train.hf_generate import generate_decode

    tok = policy.tokenizer
    ids, mask = generation.left_pad([e for e in encoded for _ in range(4)], tok.pad_token_id)
    fn = generate_decode if patch is None else generation.decode
    with policy.precision.autocast(), contextlib.ExitStack() as stack:
        cache = generation.shared_prompt_cache(policy.model, encoded, tok.pad_token_id, 4)
        for owner, name, replacement in patch or []:
            stack.enter_context(mock.patch.object(owner, name, replacement))
        torch.manual_seed(seed)
        t = time.process_time()
        out = fn(
            policy.model,
            ids,
            mask,
            torch.ones(ids.shape[0]),
            max_new_tokens=32,
            eos_id=tok.eos_token_id,
            pad_id=tok.pad_token_id,
            cache=cache,
        )
        seconds = time.process_time() - t
    return seconds / out.completion_ids.shape[1], out.completion_ids


def main() -> None:
    from pgrpo.train import generation
    from pgrpo.train.config import ModelConfig
    from pgrpo.train.policies import load_policy

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--precision", default="bf16", choices=("bf16", "fp32"))
    parser.add_argument("--out", default=str(HERE / "results" / "decode_loop.json"))
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    examples, task = bench._task_prompts(200)
    policy = load_policy(ModelConfig(name="smollm2", precision=args.precision))
    policy.model.eval()
    encoded = [policy.tokenizer.encode_prompt(task.prompt(e)) for e in examples[:8]]
    variants = _variants()
    times = {name: [] for name in variants}
    same = {name: [] for name in variants}
    load = os.getloadavg()
    for rep in range(args.reps + 1):  # the first repetition warms up
        reference = None
        for name, patch in variants.items():  # `generate` first: the reference
            seconds, tokens = _decode_once(policy, encoded, patch, rep)
            reference = tokens if reference is None else reference
            same[name].append(bool(torch.equal(tokens, reference)))
            if rep:
                times[name].append(seconds)
    result = {
        "command": f"OMP_NUM_THREADS=1 python bench/decode_loop.py --reps {args.reps} "
        f"--precision {args.precision}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average_before": load,
        "load_average_after": os.getloadavg(),
        "precision": policy.precision.name,
        "rows": 32,
        "prompt_len": max(len(e) for e in encoded),
        "cpu_ms_per_decode_step_median": {
            k: round(1e3 * statistics.median(v), 1) for k, v in times.items()
        },
        "cpu_ms_per_decode_step_all": {k: [round(1e3 * x, 1) for x in v] for k, v in times.items()},
        "same_tokens_as_generate": {k: all(v) for k, v in same.items()},
        "sampler_ms_per_draw_32x49152": {
            "before": round(1e3 * _sampler_seconds(_old_draw), 2),
            "after": round(1e3 * _sampler_seconds(generation.draw_tokens), 2),
        },
    }
    print(json.dumps(result, indent=1))
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
