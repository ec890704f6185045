"""Issue 16 items 2 and 3 on SmolLM2-135M-Instruct: MDP-GRPO vs GRPO on generated multi-constraint
instruction prompts (`--part mdp`), and per-layer gradient rank and sparsity over a run that
learns (`--part rank`). Resumable: every finished cell is written to the results JSON at once and
skipped on restart.

    OMP_NUM_THREADS=1 nice -n 5 python bench/reproduce_lm_mdp.py --part rank
    OMP_NUM_THREADS=1 nice -n 5 python bench/reproduce_lm_mdp.py --part mdp
    python bench/reproduce_lm_mdp.py --part rank --report   # tables from the JSON, no model


The rank part (`--part rank`) is `bench/reproduce_lm_rank.py`; this module holds the shared
helpers, the MDP part and the CLI of both; the pure analysis of both is `bench/lm_stats.py`.

MDP (arXiv 2606.06058): the recipe (temperatures [0.1, 0.4, 0.7, 1.0] scored at their own
temperature, dual_anchor + prospect, asymmetric KL 0.01 / 0.025) vs plain GRPO (T = 1, z-score,
no KL) at the same G, B, steps, lr; seeds interleaved across arms; final checkpoints evaluated
greedily (T = 1e-3) on held-out generated prompts (task seed 1, disjoint from the seed-0 training
set) and the first IFEval prompts, SSR and HSR by constraint count; checkpoints deleted after.
Generated word-count targets are capped at `--max-words` (30) so that they fit the completion
length (`--max-new-tokens` 48); IFEval's own prompts keep theirs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path("bench/results")
RUN_LOGS = RESULTS / "reproduce_lm_runs"
SCRATCH = Path(os.environ.get("PGRPO_BENCH_SCRATCH", "/tmp/pgrpo_reproduce_lm_mdp"))
IFEVAL_DATA = "../shared/data/ifeval"


sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling bench modules
# the pure analysis (tested in tests/test_bench_reproduce_lm_mdp.py), re-exported: it lived here
from lm_stats import (  # noqa: E402
    by_count,
    hoyer,  # noqa: F401
    mean_interval,
    prompt_interval,
    show_ci,
    sparsity_growth,  # noqa: F401
    ssr_hsr,  # noqa: F401
    top_share,  # noqa: F401
    welch,
    zero_variance_rate,
)

# ---------------------------------------------------------------- bookkeeping


def _machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "load_avg_at_start": list(os.getloadavg()),
    }


def _load(path: Path, args: argparse.Namespace) -> dict[str, Any]:
    if path.is_file():  # a resumed or extended run: record this invocation too
        doc = json.loads(path.read_text())
        doc.setdefault("commands", []).append(
            {
                "command": " ".join(["python", *sys.argv]),
                "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "load_avg_at_start": list(os.getloadavg()),
            }
        )
        return doc
    return {
        "command": " ".join(["python", *sys.argv]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": _machine(),
        "args": {k: v for k, v in vars(args).items() if k != "report"},
        "cells": {},
    }


def _save(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=float))
    os.replace(tmp, path)


def _keep_log(run_dir: Path, dest: Path) -> None:
    """metrics.jsonl + config.yaml only (never checkpoints)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("metrics.jsonl", "config.yaml"):
        if (run_dir / name).is_file():
            shutil.copy(run_dir / name, dest / name)


def _read_history(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines if x.strip()]


def _train(overrides: list[str], on_step: Any = None) -> Path:
    """Train (or resume) a run; returns its folder."""
    from pgrpo.train.config import load_config
    from pgrpo.train.trainer import train

    config = load_config(None, overrides)
    run_dir = Path(config.run.output_dir) / config.run.name
    resume = (run_dir / "checkpoints" / "latest").is_file()
    if run_dir.is_dir() and not resume:
        shutil.rmtree(run_dir)
    train(config, resume=resume, on_step=on_step, on_note=lambda t: print("  note:", t))
    return run_dir


# ---------------------------------------------------------------- MDP part


def mdp_arms(args: argparse.Namespace) -> dict[str, list[str]]:
    """Every arm's overrides beyond the shared ones: the recipe, plain GRPO, and the ablations
    that remove one component of the recipe each. Temperatures: linspace(0.1, 1, G) (the
    paper's [0.1, 0.4, 0.7, 1.0] at G = 4)."""
    temps = "[" + ",".join(f"{t:.3g}" for t in np.linspace(0.1, 1.0, args.group_size)) + "]"
    multi = [f"generation.temperatures={temps}", "generation.score_temperature=sampled"]
    dual = ["grpo.advantage=dual_anchor"]  # its paper-default transform is prospect
    asym = ["loss.kl_coef=0.01", "loss.kl_coef_negative=0.025"]
    arms = {
        "mdp_grpo": [*dual, *multi, *asym],
        "grpo": ["grpo.advantage=grpo"],
        "no_multitemp": [*dual, *asym],
        "no_dual_anchor": ["grpo.advantage=grpo", "grpo.transform=prospect", *multi, *asym],
        "no_prospect": [*dual, "grpo.transform=null", *multi, *asym],
        "no_asym_kl": [*dual, *multi, "loss.kl_coef=0.01"],
    }
    chosen = args.arms.split(",")
    unknown = sorted(set(chosen) - set(arms))
    if unknown:
        raise SystemExit(f"unknown arm(s) {unknown}: choose from {sorted(arms)}")
    return {a: arms[a] for a in chosen}


def _shared(args: argparse.Namespace) -> list[str]:
    return [
        f"model.name={args.model}",
        "task.name=ifeval",
        "task.split=generated",
        f"task.options={{max_words: {args.max_words}, data: {IFEVAL_DATA}}}",
        f"grpo.group_size={args.group_size}",
        f"grpo.batch_prompts={args.batch_prompts}",
        f"generation.max_new_tokens={args.max_new_tokens}",
        f"optim.lr={args.lr}",
        f"run.steps={args.steps}",
        f"run.checkpoint_every={args.steps}",
        "model.precision=bf16",
        "run.torch_threads=1",
        "run.forecast_every=0",
        f"run.output_dir={SCRATCH / 'mdp'}",
        *args.set,
    ]


def heldout_sets(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """Held-out prompts: generated with task seed 1 (the training set is task seed 0; prompt
    texts that also occur in training are dropped) and the first IFEval prompts."""
    from pgrpo.tasks.ifeval import IFEvalTask

    train = IFEvalTask(seed=0, max_words=args.max_words).load("generated")
    texts = {e["prompt"] for e in train}
    gen = IFEvalTask(seed=1, max_words=args.max_words).load("generated")
    gen = [e for e in gen if e["prompt"] not in texts]
    ife = IFEvalTask(data=IFEVAL_DATA).load("test")
    return {"generated": gen[: args.heldout], "ifeval": ife[: args.heldout]}


def greedy_eval(policy: Any, task: Any, examples: list, args: argparse.Namespace) -> dict:
    """Greedy (T = 1e-3) completions of `examples`, scored through the trainer's path."""
    import torch

    from pgrpo.train.rollout import sample_and_score

    torch.manual_seed(0)
    rewards: list[float] = []
    for s in range(0, len(examples), args.eval_batch):
        scored = sample_and_score(
            policy,
            task,
            examples[s : s + args.eval_batch],
            group_size=1,
            temperatures=[1e-3],
            max_new_tokens=args.max_new_tokens,
            reward_timeout_s=30.0,
        )
        rewards += scored.rewards.double().tolist()
    counts = [task.num_constraints(e) for e in examples]
    return {"rewards": rewards, "counts": counts, "by_count": by_count(rewards, counts)}


def _evaluate_policy(policy: Any, sets: dict[str, list], args: argparse.Namespace) -> dict:
    from pgrpo.tasks.ifeval import IFEvalTask

    task = IFEvalTask(data=IFEVAL_DATA)
    return {name: greedy_eval(policy, task, ex, args) for name, ex in sets.items()}


def run_mdp(args: argparse.Namespace) -> dict[str, Any]:
    """Item 2: base evaluation, then arms x seeds interleaved (seed-major), each trained, logged,
    evaluated and its checkpoint deleted; resumable per cell."""
    from pgrpo.train.config import load_config
    from pgrpo.train.rollout import load_checkpoint_weights, load_task_and_policy

    out = Path(args.out or RESULTS / "reproduce_lm_mdp.json")
    doc = _load(out, args)
    sets = heldout_sets(args)
    # one evaluation policy (no reference model) whose weights each checkpoint replaces
    _, policy = load_task_and_policy(load_config(None, [*_shared(args), "run.name=eval"]))
    if "base" not in doc["cells"]:
        t0 = time.time()
        doc["cells"]["base"] = {"eval": _evaluate_policy(policy, sets, args)}
        doc["cells"]["base"]["eval_seconds"] = time.time() - t0
        _save(out, doc)
    arms = mdp_arms(args)
    for seed in [int(s) for s in args.seeds.split(",")]:
        for arm, extra in arms.items():
            key = f"{arm}/seed{seed}"
            if key in doc["cells"]:
                continue
            over = [*_shared(args), *extra, f"run.seed={seed}", f"run.name={arm}_seed{seed}"]
            t0 = time.time()
            run_dir = _train(over)
            train_s = time.time() - t0
            history = _read_history(run_dir)
            _keep_log(run_dir, RUN_LOGS / "mdp" / f"{arm}_seed{seed}")
            t1 = time.time()
            load_checkpoint_weights(policy, run_dir / "checkpoints" / f"step-{args.steps}")
            ev = _evaluate_policy(policy, sets, args)
            shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
            shutil.rmtree(run_dir / "final", ignore_errors=True)
            doc["cells"][key] = {
                "arm": arm,
                "seed": seed,
                "train_seconds": train_s,
                "eval_seconds": time.time() - t1,
                "train_reward": [h["reward"] for h in history],
                "zero_std_groups": [h["frac_reward_zero_std"] for h in history],
                "zero_variance_rate": zero_variance_rate(history),
                "eval": ev,
            }
            doc["analysis"] = mdp_analysis(doc["cells"])
            _save(out, doc)
            print(f"{key}: train {train_s:.0f} s, eval {time.time() - t1:.0f} s")
    doc["analysis"] = mdp_analysis(doc["cells"])
    _save(out, doc)
    print_mdp(doc)
    return doc


def mdp_analysis(cells: dict[str, Any]) -> dict[str, Any]:
    """Per arm: seed mean +- t interval of SSR/HSR per held-out set and constraint count,
    interval over prompts (per-prompt reward / all-followed averaged over seeds), zero-variance
    rate; Welch's t of mdp_grpo vs grpo seed means."""
    arms: dict[str, list[dict]] = {}
    for key, c in cells.items():
        if key != "base":
            arms.setdefault(c["arm"], []).append(c)
    out: dict[str, Any] = {"arms": {}, "welch_mdp_minus_grpo": {}}
    for arm, cs in arms.items():
        row: dict[str, Any] = {
            "seeds": [c["seed"] for c in cs],
            "zero_variance_rate": mean_interval([c["zero_variance_rate"] for c in cs]),
            "train_reward_last3": mean_interval([np.mean(c["train_reward"][-3:]) for c in cs]),
            "train_seconds": mean_interval([c["train_seconds"] for c in cs]),
        }
        for set_name in cs[0]["eval"]:
            for group in cs[0]["eval"][set_name]["by_count"]:
                for metric in ("ssr", "hsr"):
                    vals = [c["eval"][set_name]["by_count"][group][metric] for c in cs]
                    row[f"{set_name}/{group}/{metric}"] = mean_interval(vals)
            r = np.array([c["eval"][set_name]["rewards"] for c in cs])  # [S, P]
            row[f"{set_name}/all/reward_prompt_ci"] = prompt_interval(r.mean(0))
            row[f"{set_name}/all/hsr_prompt_ci"] = prompt_interval((r >= 1 - 1e-9).mean(0))
        out["arms"][arm] = row
    if {"mdp_grpo", "grpo"} <= set(arms):
        out["welch_mdp_minus_grpo"] = compare_arms(arms["mdp_grpo"], arms["grpo"])
        out["prompt_paired_mdp_minus_grpo"] = paired_prompts(arms["mdp_grpo"], arms["grpo"])
    out["welch_ablation_minus_mdp_grpo"] = {
        arm: compare_arms(cs, arms["mdp_grpo"])
        for arm, cs in arms.items()
        if arm not in ("mdp_grpo", "grpo") and "mdp_grpo" in arms
    }
    return out


def compare_arms(a: list[dict], b: list[dict]) -> dict[str, dict[str, float]]:
    """Welch's t of arm a minus arm b on seed values: SSR and HSR per held-out set, and the
    zero-variance group rate. a, b: the arms' cells."""
    out = {}
    for set_name in b[0]["eval"]:
        for metric in ("ssr", "hsr"):
            va = [c["eval"][set_name]["by_count"]["all"][metric] for c in a]
            vb = [c["eval"][set_name]["by_count"]["all"][metric] for c in b]
            out[f"{set_name}/{metric}"] = welch(va, vb)
    out["zero_variance_rate"] = welch(
        [c["zero_variance_rate"] for c in a], [c["zero_variance_rate"] for c in b]
    )
    return out


def paired_prompts(a: list[dict], b: list[dict]) -> dict[str, dict[str, Any]]:
    """Per held-out set: mean over prompts of (a's seed-mean reward - b's), t interval over
    prompts."""
    out = {}
    for set_name in b[0]["eval"]:
        ra = np.array([c["eval"][set_name]["rewards"] for c in a]).mean(0)  # [P]
        rb = np.array([c["eval"][set_name]["rewards"] for c in b]).mean(0)
        out[f"{set_name}/reward"] = mean_interval(ra - rb)
    return out


LOG_MEANS = (
    "frac_reward_zero_std",
    "degeneracy/all_fail",
    "degeneracy/all_pass",
    "frac_gradient_tokens",
    "reward_within_group_std",
    "completions/clipped_ratio",
    "kl",
)


def log_summary(history: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Step means of a run log's group and length columns, and per-temperature rewards."""

    def mean(k: str) -> float:
        vals = [h[k] for h in history if h.get(k) is not None]
        return float(np.mean(vals)) if vals else float("nan")

    out = {k: mean(k) for k in LOG_MEANS}
    for k in sorted({k for h in history for k in h if k.startswith("reward/temperature_")}):
        out[k] = float(np.mean([h[k] for h in history if k in h]))
    out["reward_first3"] = float(np.mean([h["reward"] for h in history[:3]]))
    out["reward_last3"] = float(np.mean([h["reward"] for h in history[-3:]]))
    return out


def mdp_markdown(doc: dict[str, Any], logs: Path = RUN_LOGS / "mdp") -> str:
    """The docs' tables: held-out SSR/HSR per arm (seed mean [t interval over seeds]; base
    model for reference), by constraint count, and the training-log group statistics."""
    a = mdp_analysis(doc["cells"])
    base = doc["cells"].get("base", {}).get("eval", {})
    lines = ["| held-out set | C | prompts | base | " + " | ".join(a["arms"]) + " |"]
    lines.append("|---|---|---|---|" + "---|" * len(a["arms"]))
    for set_name, ev in base.items():
        for group, b in ev["by_count"].items():
            for metric in ("ssr", "hsr"):
                cells = []
                for row in a["arms"].values():
                    v = row.get(f"{set_name}/{group}/{metric}")
                    cells.append("-" if v is None else f"{v['mean']:.3f} {show_ci(v['ci'])}")
                lines.append(
                    f"| {set_name} {metric.upper()} | {group} | {b['prompts']} | "
                    f"{b[metric]:.3f} | " + " | ".join(cells) + " |"
                )
    per_temp: list[str] = []
    lines += ["", "| arm | seed | " + " | ".join(LOG_MEANS) + " | reward first 3 / last 3 |"]
    lines.append("|---|---|" + "---|" * (len(LOG_MEANS) + 1))
    for key, c in sorted(doc["cells"].items()):
        path = logs / f"{c.get('arm')}_seed{c.get('seed')}" / "metrics.jsonl"
        if key == "base" or not path.is_file():
            continue
        m = log_summary([json.loads(x) for x in path.read_text().splitlines() if x.strip()])
        lines.append(
            f"| {c['arm']} | {c['seed']} | "
            + " | ".join("-" if np.isnan(m[k]) else f"{m[k]:.3g}" for k in LOG_MEANS)
            + f" | {m['reward_first3']:.3f} / {m['reward_last3']:.3f} |"
        )
        temps = {k: v for k, v in m.items() if k.startswith("reward/temperature_")}
        if temps:
            head = " | ".join(f"T = {k.rsplit('_', 1)[1]}" for k in temps)
            values = " | ".join(f"{v:.3f}" for v in temps.values())
            per_temp.append((head, f"| {c['arm']} | {c['seed']} | {values} |"))
    if per_temp:
        head = per_temp[0][0]
        lines += ["", f"| arm | seed | {head} (training reward, step means) |"]
        lines += ["|---|---|" + "---|" * (head.count("|") + 1), *[r for _, r in per_temp]]
    return "\n".join(lines)


def print_mdp(doc: dict[str, Any]) -> None:
    a = mdp_analysis(doc["cells"])
    base = doc["cells"].get("base", {}).get("eval", {})
    for set_name, ev in base.items():
        b = ev["by_count"]["all"]
        print(f"base {set_name}: ssr {b['ssr']:.3f} hsr {b['hsr']:.3f} ({b['prompts']} prompts)")
    for arm, row in a["arms"].items():
        print(
            f"{arm} (seeds {row['seeds']}): zero-variance {row['zero_variance_rate']['mean']:.2f}"
        )
        for k, v in row.items():
            if k.endswith(("/ssr", "/hsr")) and "/all/" in k:
                print(f"  {k:<24}{v['mean']:.3f} {show_ci(v['ci'])}")
    for k, v in a["welch_mdp_minus_grpo"].items():
        print(f"welch {k:<24} diff {v['diff']:+.3f} t {v['t']:.2f} p {v['p']:.3g}")
    for arm, rows in a.get("welch_ablation_minus_mdp_grpo", {}).items():
        for k, v in rows.items():
            print(f"{arm} - mdp_grpo {k:<24} diff {v['diff']:+.3f} t {v['t']:.2f} p {v['p']:.3g}")
    for k, v in a.get("prompt_paired_mdp_minus_grpo", {}).items():
        ci = show_ci(v["ci"], "+.3f")
        print(f"paired over prompts {k:<18} {v['mean']:+.3f} {ci} ({v['n']})")


# ---------------------------------------------------------------- CLI


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=("mdp", "rank"), required=True)
    ap.add_argument("--report", action="store_true", help="print the tables from the JSON")
    ap.add_argument("--model", default="smollm2", help="'tiny' for a smoke run")
    ap.add_argument("--set", action="append", default=[], help="extra config override")
    ap.add_argument("--out", default="", help="results JSON (default per part)")
    ap.add_argument("--seeds", default="", help="default: rank 0,1; mdp 0,1,2")
    ap.add_argument("--steps", type=int, default=0, help="default: rank 12; mdp 6")
    ap.add_argument("--dim", type=int, default=1024, help="rank: sketch buckets per layer")
    ap.add_argument("--estimators", default="grpo,sign,dr_grpo")
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--batch-prompts", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--max-words", type=int, default=30, help="mdp: cap on word-count targets")
    ap.add_argument("--arms", default="mdp_grpo,grpo", help="mdp: arms, run seed-major")
    ap.add_argument("--heldout", type=int, default=32, help="mdp: prompts per held-out set")
    ap.add_argument("--eval-batch", type=int, default=32)
    return ap


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    args.seeds = args.seeds or ("0,1" if args.part == "rank" else "0,1,2")
    args.steps = args.steps or (12 if args.part == "rank" else 6)
    if args.part == "rank":  # the rank part imports this module's helpers: import it here
        from reproduce_lm_rank import print_rank, rank_markdown, run_rank
    if args.report:
        out = Path(args.out or RESULTS / f"reproduce_lm_{args.part}.json")
        doc = json.loads(out.read_text())
        (print_rank if args.part == "rank" else print_mdp)(doc)
        print(rank_markdown(doc) if args.part == "rank" else mdp_markdown(doc))
        return
    (run_rank if args.part == "rank" else run_mdp)(args)


if __name__ == "__main__":
    main()
