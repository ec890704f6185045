"""The workers of bench/gpu_trainer.py (issue #14.5), each run in a fresh process by
`gpu_trainer.py --worker NAME`: the random model, the matmul rate, one pgrpo or TRL variant in one
cell. Each returns a JSON-able dict; bench/gpu_trainer.py derives the rates from it."""

from __future__ import annotations

import dataclasses
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import trainer as cpu_bench  # bench/trainer.py: prompts, their order, the result record


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


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


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
            _sync(device)
            t = time.perf_counter()
            metrics = train_step(run, step)
            _sync(device)
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
    """bench/trainer.py's TRL worker with the device left to TRL (use_cpu only on a CPU), CUDA
    synchronised at each step boundary; TRL's defaults otherwise (bf16=True)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from pgrpo.train.policies import HFTokenizer

    B, G, T = cell["B"], cell["G"], cell["T"]
    examples, task = cpu_bench._task_prompts(200)
    ordered = [e for batch in cpu_bench._step_batches(examples, steps, B) for e in batch]
    rows = [
        {"prompt": [{"role": "user", "content": task.prompt(e)}], "answer": e["answer"]}
        for e in ordered
    ]

    def reward(completions, answer, **kwargs):
        pairs = zip(completions, answer, strict=True)
        return [task.reward(c[0]["content"], {"answer": a}) for c, a in pairs]

    stamps: list[float] = []
    generated: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            _sync(device)
            stamps.append(time.perf_counter())

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "completions/mean_length" in logs:
                generated.append(logs["completions/mean_length"] * B * G)

    args = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="pgrpo-gpu-trl-"),
        num_generations=G,
        per_device_train_batch_size=B * G,
        max_completion_length=T,
        learning_rate=cpu_bench.LR,
        max_steps=steps + 1,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=device == "cpu",
        seed=0,
        shuffle_dataset=False,  # the rows are already in pgrpo's order
        temperature=1.0,
        dataloader_num_workers=0,
        bf16=True,  # TRL's default, written out
    )
    tok = AutoTokenizer.from_pretrained(model_dir)
    net = AutoModelForCausalLM.from_pretrained(model_dir)
    trainer = GRPOTrainer(
        model=net,
        processing_class=tok,
        reward_funcs=reward,
        args=args,
        train_dataset=Dataset.from_list(rows),
        callbacks=[Clock()],
    )
    trainer.train()
    _sync(device)
    stamps.append(time.perf_counter())
    times = [b - a for a, b in zip(stamps[:-1], stamps[1:], strict=True)]
    prompt_len = cpu_bench._prompt_tokens(HFTokenizer(tok), task, examples)
    params = sum(p.numel() for p in net.parameters())
    out = cpu_bench._result(times, generated, prompt_len * B, params, "bf16-autocast", [])
    out["trl_args"] = {"gradient_checkpointing": args.gradient_checkpointing, "bf16": args.bf16}
    out["param_device"] = str(next(trainer.model.parameters()).device)
    return out


WORKERS = {"pgrpo": worker_pgrpo, "trl": worker_trl}
