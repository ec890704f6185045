"""pgrpo's trainer vs TRL's GRPOTrainer on one CPU workload, vs a floor and a FLOP roofline
(issue #14.3).

Variants, each labelled with its precision and run in a fresh process:
- `pgrpo-bf16`, `pgrpo-fp32`: `train_step` with model.precision=bf16 (autocast, fp32 master
  weights and optimizer state) / fp32, the default micro-batching (none: the B x G rows in one
  forward/backward, as TRL with per_device_train_batch_size = B x G).
- `pgrpomb-bf16`, `pgrpomb-fp32`: the same with grpo.micro_batch_size = B (exact accumulation
  in G passes of B rows: less activation memory, more time; until 2026-12-02 this was
  `pgrpo-*`).
- `pgrpock-bf16`, `pgrpock-fp32`: the default one pass with grpo.activation_checkpointing = true
  (the opt-in memory setting: decoder layers recomputed in backward).
- `trl-bf16`: TRL 1.16 `GRPOConfig` defaults (bf16=True, also on a CPU); `trl-fp32`: bf16=False.
- `trlkeep-bf16`, `trlkeep-fp32`: the same with the allocator setting pgrpo's trainer makes by
  default (`setup.keep_freed_memory`: glibc keeps freed memory for reuse), to show how much of
  the gap to TRL is that setting (TRL users get it with GLIBC_TUNABLES; docs/trainer.md).
- `floor-bf16`, `floor-fp32`: the same sampling (pgrpo's `sample`: its decode loop with the KV
  cache, temperature 1, no top-k / top-p; HF `generate` until 2026-12-02) and one
  forward/backward of the same tokens in the same precision through a log-softmax; nothing else
  (no scoring, no optimizer, no log-prob recompute), with pgrpo's default allocator setting.
Workload (all): arithmetic level 1 prompts in the chat template, B prompts x G completions, at
most T new tokens, AdamW lr 1e-6, no KL, K = 1, one thread unless OMP_NUM_THREADS says otherwise.
`--model smollm2`: SmolLM2-135M-Instruct (converted, in ~/.cache/pgrpo); `--model tiny`: a
randomly initialised 2-layer Llama (hidden 64) with SmolLM2's tokenizer, saved once to a
temporary folder so that all variants load the same weights (checks the script end to end).

Roofline: 6 x params x trained tokens (prompt + completion, forward + backward) + 2 x params x
generated tokens, divided by the matmul rate measured here (2048 x 2048 x 2048, one thread, fp32
and bf16, best of 5) in the variant's precision. The ratios printed: s/step over the floor and
over the roofline in the same precision, and pgrpo's steps/s and peak RSS against each TRL.

    nice -n 10 python bench/trainer.py                      # full grid, SmolLM2 (slow: quiet box)
    python bench/trainer.py --model tiny --steps 1 --cells 8x4x32   # end-to-end check
    python bench/trainer.py --variants pgrpo-bf16,trl-bf16 --cells 8x4x32,16x4x32 --steps 3

Results (command, date, machine, load average, matmul rates, every step time) go to
bench/results/trainer.json (or --out); a cell's rows are written as soon as they finish.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from trainer_workers import (  # noqa: E402, F401  (re-exported: the other benches import them here)
    LR,
    WORKERS,
    _prompt_tokens,
    _result,
    _step_batches,
    _task_prompts,
    worker_matmul,
)

VARIANTS = (
    "floor-fp32",
    "floor-bf16",
    "pgrpo-fp32",
    "pgrpo-bf16",
    "pgrpomb-fp32",
    "pgrpomb-bf16",
    "pgrpock-fp32",
    "pgrpock-bf16",
    "trl-fp32",
    "trl-bf16",
    "trlkeep-fp32",
    "trlkeep-bf16",
)
DEFAULT_CELLS = tuple(f"{bg}x{t}" for bg in ("8x4", "16x4", "8x8") for t in (32, 64, 128))
TARGETS = {
    "steps_per_s_vs_trl-bf16": ">= 2.5",
    "steps_per_s_vs_trl-fp32": ">= 4",
    "vs_floor_same_precision": "<= 1.15",
    "vs_bf16_roofline": "<= 2",
    "peak_rss_vs_trl": "<= 0.6",
}


# --- workers: bench/trainer_workers.py (run in a fresh process each) ---------------------------

# --- launcher -----------------------------------------------------------------------------------


def parse_cell(text: str) -> dict:
    """'8x4x32' -> {'B': 8, 'G': 4, 'T': 32} (prompts x group size x max new tokens)."""
    try:
        B, G, T = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"bad cell {text!r}: write BxGxT, e.g. 8x4x32") from None
    if min(B, T) < 1 or G < 2:
        raise ValueError(f"bad cell {text!r}: use B >= 1, G >= 2, T >= 1")
    return {"B": B, "G": G, "T": T}


def launch(argv: list[str]) -> tuple[dict, float]:
    """Run `bench/trainer.py --worker ...` in a fresh process through a launcher that reads the
    worker's peak RSS (`RUSAGE_CHILDREN`, MB); returns (the worker's JSON, peak RSS)."""
    code = (
        "import json, resource, subprocess, sys;"
        f"p = subprocess.run([sys.executable, {str(Path(__file__))!r}, *{argv!r}],"
        " capture_output=True, text=True);"
        "sys.stderr.write(p.stderr[-3000:]);"
        "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss;"
        "print(json.dumps({'rc': p.returncode, 'out': p.stdout, 'peak_rss_mb': rss / 1024}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    info = json.loads(done.stdout.strip().splitlines()[-1])
    if info["rc"] != 0:
        raise RuntimeError(f"worker {argv} failed:\n{done.stderr}")
    return json.loads(info["out"].strip().splitlines()[-1]), info["peak_rss_mb"]


def run_variant(variant: str, cell: dict, steps: int, model: str, rates: dict) -> dict:
    """One variant in one cell: medians over the timed steps (the first step is warm-up)."""
    kind, precision = variant.split("-")
    cell_text = f"{cell['B']}x{cell['G']}x{cell['T']}"
    argv = ["--worker", kind, "--precision", precision, "--cells", cell_text]
    out, rss = launch([*argv, "--steps", str(steps), "--model", model])
    times, cpu = out["times"][1:], out.get("cpu_times", [])[1:]
    gen = statistics.median(out["generated_tokens"][-steps:] or [0.0])
    s = statistics.median(times)
    trained = out["prompt_tokens"] + gen
    flops = 6 * out["params"] * trained + 2 * out["params"] * gen
    compute = "fp32" if out["precision"] == "fp32" else "bf16"
    return {
        "variant": variant,
        "cell": cell_text,
        **cell,
        "precision": out["precision"],
        "seconds_per_step": s,
        "steps_per_s": 1.0 / s,
        "step_times": times,
        "cpu_seconds_per_step": statistics.median(cpu) if cpu else None,
        "cpu_step_times": cpu,
        "generated_tokens_per_step": gen,
        "trained_tokens_per_step": trained,
        "params": out["params"],
        "tflop_per_step": flops / 1e12,
        "roofline_s": flops / (rates[compute] * 1e9),
        "bf16_roofline_s": flops / (rates["bf16"] * 1e9),
        "peak_rss_mb": rss,
    }


def cell_ratios(rows: list[dict]) -> dict[str, float]:
    """pgrpo against TRL (steps/s, peak RSS), each variant against its same-precision floor and
    roofline, pgrpo-bf16 against the bf16 roofline."""
    by = {r["variant"]: r for r in rows}
    out: dict[str, float] = {}
    for r in rows:
        kind, prec = r["variant"].split("-")
        out[f"{r['variant']}/vs_roofline"] = r["seconds_per_step"] / r["roofline_s"]
        floor = by.get(f"floor-{prec}")
        if kind != "floor" and floor:
            out[f"{r['variant']}/vs_floor"] = r["seconds_per_step"] / floor["seconds_per_step"]
            if r.get("cpu_seconds_per_step") and floor.get("cpu_seconds_per_step"):
                cpu_ratio = r["cpu_seconds_per_step"] / floor["cpu_seconds_per_step"]
                out[f"{r['variant']}/cpu_vs_floor"] = cpu_ratio
    mine = ("pgrpo", "pgrpomb", "pgrpock")
    for p in (f"{k}-{prec}" for k in mine for prec in ("bf16", "fp32")):
        for t in ("trl-bf16", "trl-fp32", "trlkeep-bf16", "trlkeep-fp32"):
            if p in by and t in by:
                out[f"{p}/steps_per_s_vs_{t}"] = by[p]["steps_per_s"] / by[t]["steps_per_s"]
                out[f"{p}/peak_rss_vs_{t}"] = by[p]["peak_rss_mb"] / by[t]["peak_rss_mb"]
                if by[p].get("cpu_seconds_per_step") and by[t].get("cpu_seconds_per_step"):
                    cpu_ratio = by[t]["cpu_seconds_per_step"] / by[p]["cpu_seconds_per_step"]
                    out[f"{p}/cpu_steps_per_s_vs_{t}"] = cpu_ratio
    for p in (f"{k}-bf16" for k in mine):
        if p in by:
            out[f"{p}/vs_bf16_roofline"] = by[p]["seconds_per_step"] / by[p]["bf16_roofline_s"]
    return out


def tiny_model_dir() -> str:
    """A random 2-layer Llama (hidden 64) with SmolLM2's tokenizer, saved to a temporary folder."""
    code = (
        "import sys, torch; from transformers import AutoTokenizer, LlamaConfig, "
        "LlamaForCausalLM; from pgrpo.train.policies import smollm2_dir;"
        "tok = AutoTokenizer.from_pretrained(str(smollm2_dir())); torch.manual_seed(0);"
        "cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,"
        " num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,"
        " tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,"
        " pad_token_id=tok.pad_token_id);"
        "m = LlamaForCausalLM(cfg); m.generation_config.pad_token_id = tok.pad_token_id;"
        "m.save_pretrained(sys.argv[1]); tok.save_pretrained(sys.argv[1])"
    )
    path = tempfile.mkdtemp(prefix="pgrpo-bench-tiny-")
    subprocess.run([sys.executable, "-c", code, path], check=True)
    return path


def resolve_model(name: str) -> str:
    if name == "tiny":
        return tiny_model_dir()
    if name == "smollm2":
        code = "from pgrpo.train.policies import smollm2_dir; print(smollm2_dir())"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"SmolLM2 is not available: {done.stderr.strip().splitlines()[-1]}")
        return done.stdout.strip().splitlines()[-1]
    return name


def print_table(rows: list[dict], ratios: dict[str, float]) -> None:
    head = f"{'cell':<9} {'variant':<11} {'precision':<14} {'s/step':>8} {'steps/s':>8}"
    print(head + f" {'roof s':>8} {'xfloor':>7} {'xroof':>7} {'RSS MB':>7}")
    for r in rows:
        key = f"{r['cell']}:{r['variant']}"
        vs_floor = ratios.get(f"{key}/vs_floor", float("nan"))
        print(
            f"{r['cell']:<9} {r['variant']:<11} {r['precision']:<14} {r['seconds_per_step']:>8.3f} "
            f"{r['steps_per_s']:>8.3f} {r['roofline_s']:>8.3f} {vs_floor:>7.2f} "
            f"{ratios[f'{key}/vs_roofline']:>7.2f} {r['peak_rss_mb']:>7.0f}"
        )
    for k, v in ratios.items():
        if "vs_trl" in k or "bf16_roofline" in k:
            print(f"{k}: {v:.2f}")


def write(args: argparse.Namespace, meta: dict, rows: list[dict], show: bool = False) -> None:
    ratios: dict[str, float] = {}
    for cell in dict.fromkeys(r["cell"] for r in rows):
        cell_rows = [r for r in rows if r["cell"] == cell]
        ratios.update({f"{cell}:{k}": v for k, v in cell_ratios(cell_rows).items()})
    if show:
        print_table(rows, ratios)
    out = {**meta, "load_average_after": os.getloadavg(), "rows": rows, "ratios": ratios}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"any of {VARIANTS}")
    parser.add_argument("--cells", default=",".join(DEFAULT_CELLS), help="BxGxT,...")
    parser.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up")
    parser.add_argument("--model", default="smollm2", help="smollm2, tiny, or an HF model path")
    parser.add_argument("--out", default=str(HERE / "results" / "trainer.json"))
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        cells = [parse_cell(c) for c in args.cells.split(",")]
    except ValueError as exc:
        parser.error(str(exc))  # one line, exit code 2
    if args.worker:
        result = WORKERS[args.worker](cells[0], args.steps, args.model, args.precision)
        print(json.dumps(result))
        return
    variants = args.variants.split(",")
    if bad := [v for v in variants if v not in VARIANTS]:
        parser.error(f"unknown --variants {bad}: use any of {', '.join(VARIANTS)}")
    if args.steps < 1:
        parser.error(f"--steps {args.steps}: use at least 1 timed step")
    meta = {
        "command": f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} python bench/trainer.py "
        + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {cpu_model()}",
        "load_average_before": os.getloadavg(),
        "model": args.model,
        "timed_steps": args.steps,
        "warmup_steps": 1,
        "targets": TARGETS,
    }
    model = resolve_model(args.model)
    meta["matmul_gflops_1_thread"] = rates = matmul_rates()
    rows: list[dict] = []
    meta["failed"] = failed = []
    for cell in cells:
        for variant in variants:
            try:
                rows.append(run_variant(variant, cell, args.steps, model, rates))
            except RuntimeError as exc:  # recorded; the other variants still run
                print(exc, file=sys.stderr)
                failed.append({"variant": variant, "cell": cell, "error": str(exc)[-800:]})
            write(args, meta, rows)  # partial results survive a later variant's failure
    write(args, meta, rows, show=True)
    if failed:
        raise SystemExit(f"{len(failed)} variant(s) failed: {[f['variant'] for f in failed]}")


def cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "unknown CPU"
    names = [ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")]
    return names[0] if names else platform.processor() or "unknown CPU"


def matmul_rates() -> dict:
    code = "import json, sys; sys.path.insert(0, sys.argv[1]); import trainer_workers as w;"
    code += "print(json.dumps(w.worker_matmul()))"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(HERE)], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
