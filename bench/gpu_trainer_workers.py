"""The workers of bench/gpu_trainer.py (issue #14.5), each run in a fresh process by
`gpu_trainer.py --worker NAME`: the random model, the matmul rate, one pgrpo or TRL variant in one
cell. Each returns a JSON-able dict; bench/gpu_trainer.py derives the rates from it."""

from __future__ import annotations

import dataclasses
import shutil
import statistics
import time
from pathlib import Path

import trainer_workers as cpu_bench  # bench/trainer.py's workers: prompts, order, TRL, result


def worker_model(assets: str, out_dir: str, sizes: dict) -> dict:
    """A randomly initialised model of SmolLM2-135M's config (seed 0; `sizes` override it: the
    dry run's 2 layers), fp32, saved with SmolLM2's tokenizer to out_dir."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(assets, **sizes)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(out_dir)
    AutoTokenizer.from_pretrained(assets).save_pretrained(out_dir)
    shutil.copy(Path(assets) / "generation_config.json", Path(out_dir) / "generation_config.json")
    return {"params": sum(p.numel() for p in model.parameters()), "config": config.to_dict()}


def worker_matmul(device: str) -> dict:
    """TFLOP/s of an n^3 bf16 matmul on random data (n = 8192 on CUDA, 512 on a CPU): 3
    warm-ups, the median of 10 timed products (CUDA events on a GPU)."""
    import torch

    n = 8192 if device == "cuda" else 512
    a = torch.randn(n, n, dtype=torch.bfloat16, device=device)
    b = torch.randn(n, n, dtype=torch.bfloat16, device=device)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(10):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            a @ b
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - t)
    s = statistics.median(times)
    return {"n": n, "median_s": s, "tflops": 2 * n**3 / s / 1e12, "times": times}


def _pgrpo_run(cell: dict, model_dir: str, device: str):
    """(run, which device path): the run of bench/trainer.py's pgrpo worker at precision bf16,
    on `device` through `model.device` if pgrpo has one, else moved there after set-up."""

    from pgrpo.train.config import ModelConfig, load_config
    from pgrpo.train.trainer import build_run

    native = "device" in {f.name for f in dataclasses.fields(ModelConfig)}
    overrides = [
        "task.options={levels: [1], n: 200}",
        f"model.name={model_dir}",
        "model.precision=bf16",
        f"group_size={cell['G']}",
        f"batch_prompts={cell['B']}",
        f"max_new_tokens={cell['T']}",
        f"lr={cpu_bench.LR}",
        "forecast_every=0",
        *([f"model.device={device}"] if native else []),
    ]
    run = build_run(load_config(None, overrides), resume=False)
    if native:
        return run, f"model.device={device}"
    # No device setting: the parameters move in place (the optimizer's references stay valid,
    # its state is created at the first step), autocast follows the device.
    run.policy.model.to(device)
    run.policy.precision = dataclasses.replace(run.policy.precision, device_type=device)
    return run, f"moved to {device} after build_run, steps under torch.device({device!r})"


def worker_pgrpo(cell: dict, steps: int, model_dir: str, device: str) -> dict:
    import torch

    from pgrpo.train.trainer import train_step

    torch.manual_seed(0)
    run, path = _pgrpo_run(cell, model_dir, device)
    examples, task = cpu_bench._task_prompts(200)
    prompt_len = cpu_bench._prompt_tokens(run.policy.tokenizer, task, examples)
    times, generated, precision = [], [], set()
    with torch.device(device):
        for step in range(1, steps + 2):
            cpu_bench._sync(device)
            t = time.perf_counter()
            metrics = train_step(run, step)
            cpu_bench._sync(device)
            times.append(time.perf_counter() - t)
            generated.append(metrics["completions/mean_length"] * cell["B"] * cell["G"])
            precision.add(metrics["precision"])
    params = sum(p.numel() for p in run.policy.model.parameters())
    out = cpu_bench._result(
        times, generated, prompt_len * cell["B"], params, "/".join(precision), []
    )
    return {
        **out,
        "device_path": path,
        "param_device": str(next(run.policy.model.parameters()).device),
    }


def worker_trl(cell: dict, steps: int, model_dir: str, device: str) -> dict:
    """bench/trainer.py's TRL worker at TRL's defaults (bf16), on `device` (CUDA synchronised at
    each step boundary); its CPU times are the host process's, not the GPU's."""
    out = cpu_bench.worker_trl(cell, steps, model_dir, "bf16", device=device)
    out["cpu_times"] = []  # host CPU time says nothing about a GPU step
    return out


WORKERS = {"pgrpo": worker_pgrpo, "trl": worker_trl}
