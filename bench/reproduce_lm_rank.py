"""Issue 16 item 3 on SmolLM2-135M-Instruct: per-layer gradient rank and sparsity over a run that
learns. Run through `bench/reproduce_lm_mdp.py --part rank` (or `bench/reproduce_lm.py --part
rank`), which holds the shared helpers and the CLI.

Rank (arXiv 2606.29238): the demo run (arithmetic level 1, B = 8 x G = 4, 16 new tokens, AdamW
lr 2e-5) trained `--steps` steps per seed; at step 0, the middle and the end one batch of the
training distribution (the same prompts at every stage of a seed) is sampled and every rollout's
score gradient s_i = grad sum_t log pi is taken exactly, then (a) sketched per layer (one
seeded signed sketch of `--dim` buckets per decoder layer and for the tied embedding) to get the
effective ranks of diag(A) S per layer and estimator with the random-advantage control
(`pgrpo.measure.gradrank.gradient_rank`), and (b) accumulated exactly into the batch gradient
g = sum_i A_i s_i per estimator, whose per-layer sparsity (Hoyer; share of the squared mass in the
top 1% of entries) tests the paper's "sparsity intensifies over training" claim.
"""

from __future__ import annotations

import argparse
import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from reproduce_lm_mdp import (
    RESULTS,
    RUN_LOGS,
    SCRATCH,
    _keep_log,
    _load,
    _read_history,
    _save,
    _train,
    mean_interval,
    sparsity_growth,
)

from pgrpo.demo import DEMO_OVERRIDES

DEMO = [
    *(o for o in DEMO_OVERRIDES if not o.startswith("run.")),  # the demo's run, as `pgrpo demo`
    "model.precision=bf16",
    "run.torch_threads=1",
    "run.forecast_every=0",
]
WEIGHT_RANK_ESTIMATORS = ("grpo", "sign", "random_control")
RANK_SHOWN = ("rank/entropy", "rank/participation_ratio", "rank/stable", "rank/energy_90")


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
    from pgrpo.measure.rank import effective_ranks
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
    # per-layer blocks: no control draws; the random_control row is this stage's one seeded draw
    # (the one the recorded results and docs/reproductions_lm.md hold; `pgrpo gradrank` now
    # reports 200 draws of three controls instead)
    cfg = GradRankConfig(estimators=estimators, projection_dim=args.dim, seed=seed, n_controls=0)
    ranks = {}
    for group in [*sketch.groups, "all"]:
        block = rows_t if group == "all" else sketch.block(rows_t, group)
        res = gradient_rank(block, rewards.tolist(), G, cfg)
        ranks[group] = {e: {k: m[k] for k in RANK_SHOWN} for e, m in res.ranks.items()}
        one_draw = effective_ranks(adv["random_control"][:, None] * block.double()).metrics
        ranks[group]["random_control"] = {k: one_draw[k] for k in RANK_SHOWN}
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
