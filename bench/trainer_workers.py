"""The workers of bench/trainer.py: each runs one variant of one cell in its own process
(`bench/trainer.py --worker KIND ...`) and prints its step times, tokens and precision. Also the
prompts, their order and the result record that bench/decode_loop.py, bench/attention.py,
bench/step_profile.py and bench/gpu_trainer.py share with it.
"""

from __future__ import annotations

import statistics
import tempfile
import time

LR = 1e-6


def _task_prompts(n: int) -> tuple[list[dict], object]:
    import pgrpo.tasks.arithmetic  # noqa: F401
    from pgrpo.tasks import get_task

    task = get_task("arithmetic", levels=[1], n=n)
    return task.load("train")[:n], task


def _step_batches(examples: list[dict], steps: int, B: int) -> list[list[dict]]:
    """The B prompts of each of the steps + 1 steps (warm-up first) in pgrpo's own order
    (`PromptStream` at the config's default seed), so that every variant samples the same prompts
    at the same step (since 2026-12-02; before, TRL shuffled with its own seed and the floor read
    the examples in file order, and completion lengths differed by up to 22% between variants)."""
    from pgrpo.train.config import load_config
    from pgrpo.train.data import PromptStream

    stream = PromptStream(examples, load_config(None, []).run.seed)
    return [stream.next_batch(B) for _ in range(steps + 1)]


def _prompt_tokens(tokenizer, task, examples: list[dict]) -> float:
    """Mean prompt length in tokens (chat template included) over the examples."""
    return statistics.fmean(len(tokenizer.encode_prompt(task.prompt(e))) for e in examples)


def worker_pgrpo(
    cell: dict,
    steps: int,
    model: str,
    precision: str,
    micro_batches: bool = False,
    checkpointing: bool = False,
) -> dict:
    import torch

    from pgrpo.train.config import load_config
    from pgrpo.train.trainer import build_run, train_step

    torch.manual_seed(0)
    B, G, T = cell["B"], cell["G"], cell["T"]
    cfg = load_config(
        None,
        [
            "task.options={levels: [1], n: 200}",
            f"model.name={model}",
            f"model.precision={precision}",
            f"group_size={G}",
            f"batch_prompts={B}",
            f"max_new_tokens={T}",
            f"lr={LR}",
            "forecast_every=0",
            *([f"grpo.micro_batch_size={B}"] if micro_batches else []),
            *(["grpo.activation_checkpointing=true"] if checkpointing else []),
        ],
    )
    run = build_run(cfg, resume=False)
    examples, task = _task_prompts(200)
    prompt_len = _prompt_tokens(run.policy.tokenizer, task, examples)
    times, cpu, generated = [], [], []
    for step in range(1, steps + 2):
        t, c = time.perf_counter(), time.process_time()
        metrics = train_step(run, step)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        generated.append(metrics["completions/mean_length"] * B * G)
    params = sum(p.numel() for p in run.policy.model.parameters())
    return _result(times, generated, prompt_len * B, params, run.policy.precision.name, cpu)


def _sync(device: str) -> None:
    """Wait for the device's queued work (CUDA), so that a clock read is the work's end."""
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def worker_trl(cell: dict, steps: int, model: str, precision: str, device: str = "cpu") -> dict:
    """TRL 1.16's GRPOTrainer with its defaults (bf16) or `bf16=False`, on the CPU (`use_cpu`) or
    on the device TRL picks (bench/gpu_trainer.py, device "cuda": synchronised at each step)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from pgrpo.train.policies import HFTokenizer

    B, G, T = cell["B"], cell["G"], cell["T"]
    examples, task = _task_prompts(200)
    ordered = [e for batch in _step_batches(examples, steps, B) for e in batch]
    rows = [
        {"prompt": [{"role": "user", "content": task.prompt(e)}], "answer": e["answer"]}
        for e in ordered
    ]

    def reward(completions, answer, **kwargs):
        pairs = zip(completions, answer, strict=True)
        return [task.reward(c[0]["content"], {"answer": a}) for c, a in pairs]

    stamps: list[float] = []
    cpu_stamps: list[float] = []
    generated: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            _sync(device)
            stamps.append(time.perf_counter())
            cpu_stamps.append(time.process_time())

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "completions/mean_length" in logs:
                generated.append(logs["completions/mean_length"] * B * G)

    precision_args = {} if precision == "bf16" else {"bf16": False}  # bf16: TRL's default
    args = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="pgrpo-bench-trl-"),
        num_generations=G,
        per_device_train_batch_size=B * G,
        max_completion_length=T,
        learning_rate=LR,
        max_steps=steps + 1,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=device == "cpu",
        seed=0,
        shuffle_dataset=False,  # the rows are already in pgrpo's order (`_step_batches`)
        temperature=1.0,
        dataloader_num_workers=0,
        **precision_args,
    )
    tok = AutoTokenizer.from_pretrained(model)
    net = AutoModelForCausalLM.from_pretrained(model)
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
    cpu_stamps.append(time.process_time())
    times = [b - a for a, b in zip(stamps[:-1], stamps[1:], strict=True)]
    cpu = [b - a for a, b in zip(cpu_stamps[:-1], cpu_stamps[1:], strict=True)]
    prompt_len = _prompt_tokens(HFTokenizer(tok), task, examples)
    params = sum(p.numel() for p in net.parameters())
    label = "bf16-autocast" if args.bf16 else "fp32"
    out = _result(times, generated, prompt_len * B, params, label, cpu)
    out["trl_args"] = {"gradient_checkpointing": args.gradient_checkpointing, "bf16": args.bf16}
    out["param_device"] = str(next(trainer.model.parameters()).device)
    return out


def worker_floor(cell: dict, steps: int, model: str, precision: str) -> dict:
    """pgrpo's own sampler, then one forward/backward of the same tokens (each group's prompt once,
    as pgrpo's update runs it) in the same precision; no scoring, recompute or optimizer."""
    import torch

    from pgrpo.train.config import ModelConfig
    from pgrpo.train.generation import sample
    from pgrpo.train.logprobs import completion_scores
    from pgrpo.train.policies import load_policy
    from pgrpo.train.setup import keep_freed_memory

    keep_freed_memory()  # as pgrpo's `build_run` by default
    torch.manual_seed(0)
    B, G, T = cell["B"], cell["G"], cell["T"]
    examples, task = _task_prompts(200)
    batches = _step_batches(examples, steps, B)
    policy = load_policy(ModelConfig(name=model, precision=precision))
    times, cpu, generated = [], [], []
    for step in range(steps + 1):
        batch = batches[step]
        t, c = time.perf_counter(), time.process_time()
        with policy.precision.autocast():
            rollout = sample(
                policy,
                [task.prompt(e) for e in batch],
                group_size=G,
                temperatures=[1.0] * G,
                max_new_tokens=T,
            )
            scores = completion_scores(
                policy.model, rollout.input_ids, rollout.attention_mask, rollout.prompt_len
            )
            (scores.log_probs.float() * rollout.completion_mask).sum().backward()
        policy.model.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        generated.append(float(rollout.completion_mask.sum()))
    prompt_len = _prompt_tokens(policy.tokenizer, task, examples)
    params = sum(p.numel() for p in policy.model.parameters())
    return _result(times, generated, prompt_len * B, params, policy.precision.name, cpu)


def _result(times, generated, prompt_tokens, params, precision, cpu_times) -> dict:
    return {
        "times": times,
        "cpu_times": cpu_times,
        "generated_tokens": generated,
        "prompt_tokens": prompt_tokens,
        "params": params,
        "precision": precision,
    }


def worker_matmul(reps: int = 5) -> dict:
    """GFLOP/s of one 2048^3 matmul, one thread, fp32 and bf16 (best of `reps`)."""
    import torch

    torch.set_num_threads(1)
    n, rates = 2048, {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
        a @ b  # warm-up
        best = min(_timed(torch.matmul, a, b) for _ in range(reps))
        rates[name] = 2 * n**3 / best / 1e9
    return rates


def _timed(fn, *args) -> float:
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def worker_pgrpo_micro_batches(cell: dict, steps: int, model: str, precision: str) -> dict:
    return worker_pgrpo(cell, steps, model, precision, micro_batches=True)


def worker_trl_keep(cell: dict, steps: int, model: str, precision: str) -> dict:
    from pgrpo.train.setup import keep_freed_memory

    keep_freed_memory()
    return worker_trl(cell, steps, model, precision)


def worker_pgrpo_checkpointing(cell: dict, steps: int, model: str, precision: str) -> dict:
    return worker_pgrpo(cell, steps, model, precision, checkpointing=True)


WORKERS = {
    "pgrpo": worker_pgrpo,
    "pgrpomb": worker_pgrpo_micro_batches,
    "pgrpock": worker_pgrpo_checkpointing,
    "trl": worker_trl,
    "trlkeep": worker_trl_keep,
    "floor": worker_floor,
}
