"""Issue 16 items 2 and 3 on SmolLM2-135M-Instruct: MDP-GRPO vs GRPO on generated multi-constraint
instruction prompts (`--part mdp`), and per-layer gradient rank and sparsity over a run that
learns (`--part rank`). Resumable: every finished cell is written to the results JSON at once and
skipped on restart.

    OMP_NUM_THREADS=1 nice -n 5 python bench/reproduce_lm_mdp.py --part rank
    OMP_NUM_THREADS=1 nice -n 5 python bench/reproduce_lm_mdp.py --part mdp
    python bench/reproduce_lm_mdp.py --part rank --report   # tables from the JSON, no model

Rank (arXiv 2606.29238): the demo run (arithmetic level 1, B = 8 x G = 4, 16 new tokens, AdamW
lr 2e-5) trained `--steps` steps per seed; at step 0, the middle and the end one batch of the
training distribution (the same prompts at every stage of a seed) is sampled and every rollout's
score gradient s_i = grad sum_t log pi is taken exactly, then (a) sketched per layer (one
seeded signed sketch of `--dim` buckets per decoder layer and for the tied embedding) to get the
effective ranks of diag(A) S per layer and estimator with the random-advantage control
(`pgrpo.measure.gradrank.gradient_rank`), and (b) accumulated exactly into the batch gradient
g = sum_i A_i s_i per estimator, whose per-layer sparsity (Hoyer; share of the squared mass in the
top 1% of entries) tests the paper's "sparsity intensifies over training" claim.

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
import re
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from pgrpo.demo import DEMO_OVERRIDES

RESULTS = Path("bench/results")
RUN_LOGS = RESULTS / "reproduce_lm_runs"
SCRATCH = Path(os.environ.get("PGRPO_BENCH_SCRATCH", "/tmp/pgrpo_reproduce_lm_mdp"))
IFEVAL_DATA = "../shared/data/ifeval"
DEMO = [
    *(o for o in DEMO_OVERRIDES if not o.startswith("run.")),  # the demo's run, as `pgrpo demo`
    "model.precision=bf16",
    "run.torch_threads=1",
    "run.forecast_every=0",
]
WEIGHT_RANK_ESTIMATORS = ("grpo", "sign", "random_control")
RANK_SHOWN = ("rank/entropy", "rank/participation_ratio", "rank/stable", "rank/energy_90")


# ---------------------------------------------------------------- pure analysis (tested)


def hoyer(x: np.ndarray) -> float:
    """Hoyer sparsity (sqrt(n) - |x|_1 / |x|_2) / (sqrt(n) - 1) of x: [n]; 0 for a constant-
    magnitude vector, 1 for a single non-zero entry; 0 for the zero vector (no direction)."""
    x = np.abs(np.asarray(x, dtype=np.float64).ravel())
    n, l2 = x.size, float(np.sqrt((x * x).sum()))
    if n < 2 or l2 == 0.0:
        return 0.0
    return float((np.sqrt(n) - x.sum() / l2) / (np.sqrt(n) - 1.0))


def top_share(x: np.ndarray, q: float = 0.01) -> float:
    """Share of the squared mass sum x^2 held by the ceil(q n) largest |x_j|. x: [n]; 0 for the
    zero vector. q n entries of equal magnitude give q; one non-zero entry gives 1."""
    x = np.asarray(x, dtype=np.float64).ravel()
    e = x * x
    total = float(e.sum())
    if total == 0.0:
        return 0.0
    k = max(1, int(np.ceil(q * e.size)))
    return float(np.partition(e, e.size - k)[e.size - k :].sum() / total)


def mean_interval(values: Sequence[float], level: float = 0.95) -> dict[str, Any]:
    """Mean and t interval over values: [n] (n = 1: the interval is the point)."""
    v = np.asarray(values, dtype=np.float64)
    m = float(v.mean())
    if v.size < 2:
        return {"mean": m, "ci": [m, m], "n": int(v.size)}
    half = float(stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size))
    return {"mean": m, "ci": [m - half, m + half], "n": int(v.size)}


def welch(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """Welch's t test of mean(a) vs mean(b) (seed means); nan when either has < 2 values or both
    have zero variance."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    diff = float(a.mean() - b.mean()) if a.size and b.size else float("nan")
    if a.size < 2 or b.size < 2 or (a.std() == 0 and b.std() == 0):
        return {"diff": diff, "t": float("nan"), "p": float("nan")}
    res = stats.ttest_ind(a, b, equal_var=False)
    return {"diff": diff, "t": float(res.statistic), "p": float(res.pvalue)}


def ssr_hsr(rewards: Sequence[float], counts: Sequence[int]) -> dict[str, float]:
    """SSR (constraints followed / constraints) and HSR (share of prompts with all followed) of
    per-prompt rewards r = followed / C. rewards, counts: [P]."""
    r, c = np.asarray(rewards, dtype=np.float64), np.asarray(counts, dtype=np.int64)
    followed = np.round(r * c)
    return {
        "ssr": float(followed.sum() / c.sum()) if c.sum() else float("nan"),
        "hsr": float(np.mean(r >= 1.0 - 1e-9)) if r.size else float("nan"),
        "prompts": int(r.size),
    }


def by_count(rewards: Sequence[float], counts: Sequence[int]) -> dict[str, dict[str, float]]:
    """ssr_hsr per constraint count C (keys 'C=1'..) and over all prompts ('all')."""
    r, c = np.asarray(rewards, dtype=np.float64), np.asarray(counts, dtype=np.int64)
    out = {f"C={k}": ssr_hsr(r[c == k], c[c == k]) for k in sorted(set(c.tolist()))}
    out["all"] = ssr_hsr(r, c)
    return out


def prompt_interval(per_prompt: np.ndarray, level: float = 0.95) -> list[float]:
    """t interval over prompts of the mean of per_prompt: [P] (the per-prompt value averaged over
    seeds), the 'interval over prompts'."""
    return mean_interval(per_prompt, level)["ci"]


def sparsity_growth(cells: dict[str, Any], stage_a: str, stage_b: str) -> dict[str, Any]:
    """Per estimator and measure: per-layer change b - a averaged over seeds, the layers where it
    grows, and a Wilcoxon signed-rank test over layers of the seed-mean changes (layers are not
    independent: read p as descriptive), plus per-seed mean changes.

    cells: "seed{s}/{stage}" -> {"sparsity": {estimator: {measure: {layer: value}}}}."""
    seeds = sorted({k.split("/")[0] for k in cells if k.endswith("/" + stage_a)})
    seeds = [s for s in seeds if f"{s}/{stage_b}" in cells]
    out: dict[str, Any] = {"seeds": seeds}
    if not seeds:
        return out
    first = cells[f"{seeds[0]}/{stage_a}"]["sparsity"]
    for est, measures in first.items():
        for measure, layers in measures.items():
            names = sorted(layers)
            deltas = np.array(
                [
                    [
                        cells[f"{s}/{stage_b}"]["sparsity"][est][measure][n]
                        - cells[f"{s}/{stage_a}"]["sparsity"][est][measure][n]
                        for n in names
                    ]
                    for s in seeds
                ]
            )  # [S, L]
            mean = deltas.mean(0)
            nz = mean[mean != 0]
            p = float(stats.wilcoxon(nz).pvalue) if nz.size >= 6 else float("nan")
            out[f"{est}/{measure}"] = {
                "layers": len(names),
                "layers_growing": int((mean > 0).sum()),
                "median_change": float(np.median(mean)),
                "wilcoxon_p": p,
                "per_seed_mean_change": deltas.mean(1).tolist(),
                "seeds_growing": int((deltas.mean(1) > 0).sum()),
            }
    return out


def zero_variance_rate(history: Sequence[dict[str, Any]]) -> float:
    """Mean over steps of the logged share of groups with zero reward spread."""
    return float(np.mean([h["frac_reward_zero_std"] for h in history]))


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


# ---------------------------------------------------------------- rank part


def layer_of(name: str) -> str:
    """Parameter name -> its layer group: 'layer{i:02d}', 'embed' (the tied embedding / LM head)
    or 'other' (the final norm)."""
    m = re.search(r"layers\.(\d+)\.", name)
    if m:
        return f"layer{int(m.group(1)):02d}"
    return "embed" if "embed" in name or "lm_head" in name else "other"


class LayerSketch:
    """A seeded signed sketch per layer group: coordinate j of parameter p goes to bucket
    offset(layer(p)) + (j mod dim) with a random sign sigma_p(j) (a CountSketch whose hash is
    j mod dim; with independent signs <S a, S b> is still an unbiased estimate of <a, b>, and
    the sum over j mod dim is a reshape instead of a scatter, ~10x cheaper on 135M entries)."""

    def __init__(self, named: Sequence[tuple[str, Any]], dim: int, seed: int) -> None:
        import torch

        self.groups = sorted({layer_of(n) for n, _ in named})
        self.dim = dim
        self.slot = [self.groups.index(layer_of(n)) for n, _ in named]
        self.signs = []
        for idx, (_, p) in enumerate(named):
            gen = torch.Generator().manual_seed(seed * 1_000_003 + idx)
            bits = torch.randint(0, 2, (p.numel(),), generator=gen, dtype=torch.int8)
            self.signs.append(bits.float().mul_(2).sub_(1))

    def __call__(self, grads: Sequence[Any]) -> Any:
        import torch

        out = torch.zeros(len(self.groups), self.dim, dtype=torch.float64)
        for g, sign, slot in zip(grads, self.signs, self.slot, strict=True):
            flat = g.reshape(-1).float() * sign
            m = flat.numel() // self.dim * self.dim
            out[slot] += flat[:m].view(-1, self.dim).sum(0).double()
            out[slot, : flat.numel() - m] += flat[m:].double()
        return out.reshape(-1)

    def block(self, rows: Any, group: str) -> Any:
        """rows: [N, groups * dim] -> that group's [N, dim]."""
        i = self.groups.index(group)
        return rows[:, i * self.dim : (i + 1) * self.dim]


def _advantages(rewards: Any, group_size: int, estimators: Sequence[str], seed: int) -> dict:
    import torch

    from pgrpo.core.advantages import compute_advantages

    out = {n: compute_advantages(n, rewards, group_size=group_size).advantages for n in estimators}
    gen = torch.Generator().manual_seed(seed)  # the same control as gradient_rank's
    out["random_control"] = torch.randn(rewards.numel(), generator=gen, dtype=torch.float64)
    return {k: v.to(torch.float64) for k, v in out.items()}


def measure_stage(policy: Any, task: Any, config: Any, examples: list, args: Any, seed: int):
    """One batch: sample, score, per-row exact score gradients -> per-layer sketch ranks (every
    estimator + random control) and exact per-layer batch-gradient sparsity."""
    import torch

    from pgrpo.measure.gradrank import GradRankConfig, gradient_rank
    from pgrpo.train.logprobs import completion_scores
    from pgrpo.train.rollout import collect

    estimators = tuple(args.estimators.split(","))
    torch.manual_seed(seed)
    batch = collect(policy, task, examples, config)
    rollout, rewards = batch.rollout, batch.rewards.double()
    G = config.grpo.group_size
    adv = _advantages(rewards, G, estimators, seed)
    named = [(n, p) for n, p in policy.model.named_parameters() if p.requires_grad]
    params = [p for _, p in named]
    sketch = LayerSketch(named, args.dim, seed)
    acc = {k: [torch.zeros(p.shape, dtype=torch.float32) for p in params] for k in adv}
    rows, row_hoyer = [], []
    t0 = time.time()
    for i in range(rollout.input_ids.shape[0]):
        scores = completion_scores(
            policy.model,
            rollout.input_ids[i : i + 1],
            rollout.attention_mask[i : i + 1],
            rollout.prompt_len,
            rollout.temperatures[i : i + 1],
        )
        mask = rollout.completion_mask[i : i + 1].to(scores.log_probs.dtype)
        grads = torch.autograd.grad((scores.log_probs * mask).sum(), params, allow_unused=True)
        grads = [
            torch.zeros_like(p) if g is None else g for g, p in zip(grads, params, strict=True)
        ]
        rows.append(sketch(grads))
        for k, a in adv.items():
            if float(a[i]) != 0.0:
                for buf, g in zip(acc[k], grads, strict=True):
                    buf.add_(g.float(), alpha=float(a[i]))
        row_hoyer.append(_layer_sparsity(named, grads, top=False)["hoyer"])
        del grads, scores
    rows_t = torch.stack(rows)
    cfg = GradRankConfig(estimators=estimators, projection_dim=args.dim, seed=seed)
    ranks = {}
    for group in [*sketch.groups, "all"]:
        block = rows_t if group == "all" else sketch.block(rows_t, group)
        res = gradient_rank(block, rewards.tolist(), G, cfg)
        ranks[group] = {e: {k: m[k] for k in RANK_SHOWN} for e, m in res.ranks.items()}
    sparsity = {k: _layer_sparsity(named, bufs) for k, bufs in acc.items()}
    weight_ranks = {k: _weight_ranks(named, acc[k]) for k in WEIGHT_RANK_ESTIMATORS if k in acc}
    groups = rewards.reshape(-1, G)
    return {
        "reward_mean": float(rewards.mean()),
        "zero_std_groups": float((groups.std(1) == 0).float().mean()),
        "rewards": rewards.tolist(),
        "seconds_gradients": time.time() - t0,
        "ranks": ranks,
        "sparsity": sparsity,
        "weight_grad_ranks": weight_ranks,
        "score_row_hoyer_mean": {
            g: float(np.mean([h[g] for h in row_hoyer])) for g in row_hoyer[0]
        },
    }


def _weight_ranks(named: Sequence[tuple[str, Any]], tensors: Sequence[Any]) -> dict:
    """Effective ranks of each decoder weight matrix's batch gradient [out, in] (the other
    reading of the paper's "SVD of GRPO gradients"): {'layer05/mlp.down_proj': {metric: v}}."""
    from pgrpo.measure.rank import effective_ranks

    out = {}
    for (name, _), t in zip(named, tensors, strict=True):
        group = layer_of(name)
        if t.ndim == 2 and group.startswith("layer"):
            short = name.split(f"layers.{int(group[5:])}.", 1)[1].removesuffix(".weight")
            m = effective_ranks(t).metrics
            out[f"{group}/{short}"] = {k: m[k] for k in RANK_SHOWN}
            out[f"{group}/{short}"]["min_dim"] = float(min(t.shape))
    return out


def _layer_sparsity(named: Sequence[tuple[str, Any]], tensors: Sequence[Any], top: bool = True):
    """{'hoyer': {group: value}, 'top1pct': {group: value}} over each layer group's entries
    (top=False: Hoyer only; the top-1% share needs a topk, too slow per rollout)."""
    import torch

    by: dict[str, list] = {}
    for (name, _), t in zip(named, tensors, strict=True):
        by.setdefault(layer_of(name), []).append(t.detach().reshape(-1).float())
    out: dict[str, dict[str, float]] = {"hoyer": {}, "top1pct": {}} if top else {"hoyer": {}}
    for g, parts in by.items():
        if g == "other":
            continue
        x = torch.cat(parts)
        l1, l2 = float(x.abs().sum()), float(x.norm())
        n = x.numel()
        out["hoyer"][g] = 0.0 if l2 == 0 else (n**0.5 - l1 / l2) / (n**0.5 - 1)
        if top:
            e = x * x
            k = max(1, int(np.ceil(0.01 * n)))
            out["top1pct"][g] = 0.0 if l2 == 0 else float(e.topk(k).values.sum() / e.sum())
    return out


def run_rank(args: argparse.Namespace) -> dict[str, Any]:
    """Item 3: train each seed, measure at step 0, the middle and the end; resumable per cell."""
    import torch

    from pgrpo.train.config import load_config
    from pgrpo.train.rollout import load_checkpoint_weights, load_task_and_policy

    out = Path(args.out or RESULTS / "reproduce_lm_rank.json")
    doc = _load(out, args)
    mid = args.steps // 2
    for seed in [int(s) for s in args.seeds.split(",")]:
        stages = {"start": 0, "middle": mid, "end": args.steps}
        if all(f"seed{seed}/{s}" in doc["cells"] for s in stages):
            continue
        name = f"rank_seed{seed}"
        over = [
            *DEMO,
            f"model.name={args.model}",
            f"run.seed={seed}",
            f"run.steps={args.steps}",
            f"run.name={name}",
            *args.set,
        ]
        over += [f"run.checkpoint_every={mid}", f"run.output_dir={SCRATCH / 'rank'}"]
        run_dir = SCRATCH / "rank" / name
        keep = SCRATCH / "rank" / f"{name}_step{mid}"

        def on_step(m: dict[str, Any], keep: Path = keep, run_dir: Path = run_dir) -> None:
            if m["step"] == mid:
                shutil.rmtree(keep, ignore_errors=True)
                shutil.copytree(run_dir / "checkpoints" / f"step-{mid}", keep)

        t0 = time.time()
        if not (run_dir / "final").is_dir():
            _train(over, on_step)
        train_s = time.time() - t0
        history = _read_history(run_dir)
        _keep_log(run_dir, RUN_LOGS / "rank" / f"seed{seed}")
        config = load_config(None, over)
        task, policy = load_task_and_policy(config)
        torch.set_num_threads(1)
        rng = np.random.default_rng(10_000 + seed)
        pool = task.load("train")
        examples = [pool[i] for i in rng.choice(len(pool), config.grpo.batch_prompts, False)]
        for stage, step in stages.items():
            key = f"seed{seed}/{stage}"
            if key in doc["cells"]:
                continue
            if step:
                ckpt = keep if step == mid else run_dir / "checkpoints" / f"step-{step}"
                load_checkpoint_weights(policy, ckpt)
            t1 = time.time()
            cell = measure_stage(policy, task, config, examples, args, seed)
            cell.update(step=step, seconds=time.time() - t1, train_seconds=train_s)
            cell["train_reward"] = [h["reward"] for h in history]
            doc["cells"][key] = cell
            _save(out, doc)
            print(f"{key}: step {step} reward {cell['reward_mean']:.3f} ({cell['seconds']:.0f} s)")
        del policy
        shutil.rmtree(keep, ignore_errors=True)
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
        shutil.rmtree(run_dir / "final", ignore_errors=True)
    doc["analysis"] = rank_analysis(doc["cells"])
    _save(out, doc)
    print_rank(doc)
    return doc


def rank_analysis(cells: dict[str, Any]) -> dict[str, Any]:
    """Seed means of the whole-model and per-layer ranks per stage; sparsity growth tests."""
    out: dict[str, Any] = {"ranks": {}, "sparsity_start_to_end": {}, "sparsity_start_to_mid": {}}
    for stage in ("start", "middle", "end"):
        stage_cells = [c for k, c in cells.items() if k.endswith("/" + stage)]
        if not stage_cells:
            continue
        row: dict[str, Any] = {
            "reward_mean": mean_interval([c["reward_mean"] for c in stage_cells])
        }
        row["zero_std_groups"] = mean_interval([c["zero_std_groups"] for c in stage_cells])
        # rows a zero-sum (group-relative) advantage leaves non-zero: G x non-degenerate groups
        row["rows_nonzero_group_relative"] = mean_interval(
            [len(c["rewards"]) * (1 - c["zero_std_groups"]) for c in stage_cells]
        )
        row["rows"] = len(stage_cells[0]["rewards"])
        for est in stage_cells[0]["ranks"]["all"]:
            whole = [c["ranks"]["all"][est]["rank/entropy"] for c in stage_cells]
            layers = [
                np.mean([v[est]["rank/entropy"] for g, v in c["ranks"].items() if g != "all"])
                for c in stage_cells
            ]
            row[est] = {
                "entropy_rank_all": mean_interval(whole),
                "entropy_rank_layer_mean": mean_interval(layers),
                "stable_rank_all": mean_interval(
                    [c["ranks"]["all"][est]["rank/stable"] for c in stage_cells]
                ),
                "entropy_rank_layer_range": [
                    float(min(v[est]["rank/entropy"] for c in stage_cells for v in _layers(c))),
                    float(max(v[est]["rank/entropy"] for c in stage_cells for v in _layers(c))),
                ],
            }
        out["ranks"][stage] = row
    out["sparsity_start_to_end"] = sparsity_growth(cells, "start", "end")
    out["sparsity_start_to_mid"] = sparsity_growth(cells, "start", "middle")
    rows = {  # the per-rollout score gradients s_i themselves (no advantage): mean Hoyer per layer
        k: {"sparsity": {"scores": {"row_hoyer_mean": c["score_row_hoyer_mean"]}}}
        for k, c in cells.items()
    }
    out["score_sparsity_start_to_end"] = sparsity_growth(rows, "start", "end")
    out["weight_grad_ranks"] = weight_rank_summary(cells)
    return out


WEIGHT_SUMMARY = ("rank/entropy", "rank/participation_ratio", "rank/stable", "min_dim")


def weight_rank_summary(cells: dict[str, Any]) -> dict[str, Any]:
    """Per stage and estimator: mean, min and max over the decoder weight matrices of the batch
    gradient's entropy and stable rank (cells without the measurement are skipped)."""
    out: dict[str, Any] = {}
    for key, c in cells.items():
        stage = key.split("/")[1]
        for est, mats in c.get("weight_grad_ranks", {}).items():
            row = out.setdefault(stage, {}).setdefault(est, {"cells": 0})
            row["cells"] += 1
            for metric in WEIGHT_SUMMARY:
                vals = [m[metric] for m in mats.values()]
                row.setdefault(metric, []).append([np.mean(vals), np.min(vals), np.max(vals)])
    for stage in out.values():
        for row in stage.values():
            for metric in WEIGHT_SUMMARY:
                v = np.array(row[metric])  # [cells, 3]
                row[metric] = {
                    "mean": float(v[:, 0].mean()),
                    "min": float(v[:, 1].min()),
                    "max": float(v[:, 2].max()),
                }
    return out


def _layers(cell: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for g, v in cell["ranks"].items() if g != "all"]


def rank_markdown(doc: dict[str, Any]) -> str:
    """The docs' rank table: per stage and estimator, seed means (n seeds) of the whole-model
    and per-layer entropy rank and the whole-model stable rank."""
    a = rank_analysis(doc["cells"])
    lines = [
        "| stage | reward | rows with gradient (group-relative) of N | estimator | entropy rank, "
        "whole model | entropy rank, layer mean [min, max] | stable rank, whole model |",
        "|---|---|---|---|---|---|---|",
    ]
    for stage, row in a["ranks"].items():
        head = (
            f"| {stage} (n={row['reward_mean']['n']}) | {row['reward_mean']['mean']:.3f} | "
            f"{row['rows_nonzero_group_relative']['mean']:.1f} of {row['rows']} |"
        )
        for e, v in row.items():
            if isinstance(v, dict) and "entropy_rank_all" in v:
                lo, hi = v["entropy_rank_layer_range"]
                lines.append(
                    f"{head} {e} | {v['entropy_rank_all']['mean']:.1f} | "
                    f"{v['entropy_rank_layer_mean']['mean']:.1f} [{lo:.1f}, {hi:.1f}] | "
                    f"{v['stable_rank_all']['mean']:.2f} |"
                )
                head = "| | | |"
    weights = a.get("weight_grad_ranks", {})
    if weights:
        lines += [
            "",
            "| stage | estimator | cells | entropy rank, mean [min, max] over the 210 decoder "
            "weight matrices | participation ratio | stable rank |",
            "|---|---|---|---|---|---|",
        ]
        for stage in ("start", "middle", "end"):
            for est, row in weights.get(stage, {}).items():
                e, p, st = (
                    row[k] for k in ("rank/entropy", "rank/participation_ratio", "rank/stable")
                )
                lines.append(
                    f"| {stage} | {est} | {row['cells']} | {e['mean']:.1f} [{e['min']:.1f}, "
                    f"{e['max']:.1f}] | {p['mean']:.2f} [{p['min']:.2f}, {p['max']:.2f}] | "
                    f"{st['mean']:.2f} [{st['min']:.2f}, {st['max']:.2f}] |"
                )
    return "\n".join(lines)


def print_rank(doc: dict[str, Any]) -> None:
    a = rank_analysis(doc["cells"])
    print(
        f"{'stage':<8}{'reward':>8}{'zero-std':>10}{'rows':>6}  entropy rank (whole / layer mean)"
    )
    for stage, row in a["ranks"].items():
        ests = [k for k in row if isinstance(row[k], dict) and "entropy_rank_all" in row[k]]
        parts = [
            f"{e} {row[e]['entropy_rank_all']['mean']:.1f}"
            f"/{row[e]['entropy_rank_layer_mean']['mean']:.1f}"
            for e in ests
        ]
        print(
            f"{stage:<8}{row['reward_mean']['mean']:>8.3f}{row['zero_std_groups']['mean']:>10.2f}"
            f"{row['rows_nonzero_group_relative']['mean']:>6.1f}  " + "  ".join(parts)
        )
    for stage, ests in a.get("weight_grad_ranks", {}).items():
        for est, row in ests.items():
            e, st, pr = row["rank/entropy"], row["rank/stable"], row["rank/participation_ratio"]
            print(
                f"weight-gradient ranks {stage:<7}{est:<15} entropy {e['mean']:.1f} "
                f"[{e['min']:.1f}, {e['max']:.1f}] participation {pr['mean']:.2f} "
                f"[{pr['min']:.2f}, {pr['max']:.2f}] stable {st['mean']:.2f} "
                f"[{st['min']:.2f}, {st['max']:.2f}] (min dim {row['min_dim']['mean']:.0f} mean)"
            )
    print("sparsity start -> end (layers growing / layers, median change, Wilcoxon p, seeds up)")
    growth = {**a["sparsity_start_to_end"], **a.get("score_sparsity_start_to_end", {})}
    for k, v in growth.items():
        if k == "seeds":
            continue
        print(
            f"  {k:<28}{v['layers_growing']:>3}/{v['layers']:<3}{v['median_change']:>+10.4f}"
            f"{v['wilcoxon_p']:>10.3g}{v['seeds_growing']:>4}/{len(v['per_seed_mean_change'])}"
        )


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
                    cells.append(
                        "-"
                        if v is None
                        else f"{v['mean']:.3f} [{v['ci'][0]:.3f}, {v['ci'][1]:.3f}]"
                    )
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
                print(f"  {k:<24}{v['mean']:.3f} [{v['ci'][0]:.3f}, {v['ci'][1]:.3f}]")
    for k, v in a["welch_mdp_minus_grpo"].items():
        print(f"welch {k:<24} diff {v['diff']:+.3f} t {v['t']:.2f} p {v['p']:.3g}")
    for arm, rows in a.get("welch_ablation_minus_mdp_grpo", {}).items():
        for k, v in rows.items():
            print(f"{arm} - mdp_grpo {k:<24} diff {v['diff']:+.3f} t {v['t']:.2f} p {v['p']:.3g}")
    for k, v in a.get("prompt_paired_mdp_minus_grpo", {}).items():
        lo, hi = v["ci"]
        print(f"paired over prompts {k:<18} {v['mean']:+.3f} [{lo:+.3f}, {hi:+.3f}] ({v['n']})")


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
    if args.report:
        out = Path(args.out or RESULTS / f"reproduce_lm_{args.part}.json")
        doc = json.loads(out.read_text())
        (print_rank if args.part == "rank" else print_mdp)(doc)
        print(rank_markdown(doc) if args.part == "rank" else mdp_markdown(doc))
        return
    (run_rank if args.part == "rank" else run_mdp)(args)


if __name__ == "__main__":
    main()
