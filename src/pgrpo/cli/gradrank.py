"""`pgrpo gradrank`: effective rank of the per-rollout gradient matrix, per advantage estimator."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from pgrpo.cli.common import (
    check_model,
    command,
    config_fields,
    config_option,
    emit,
    escape,
    json_option,
)
from pgrpo.errors import MAX_SEED

GRADRANK = "pgrpo.measure.gradrank:GradRankConfig"
MODEL = "pgrpo.train.config:ModelConfig"

_SHOWN = (
    "rank/entropy",
    "rank/participation_ratio",
    "rank/stable",
    "rank/energy_90",
    "rank/energy_95",
    "rank/energy_99",
    "group/entropy_mean",
    "nonzero_rows",
)


@command("gradrank")
def gradrank_cmd(
    model: str = config_option(MODEL, "name", "--model", default="tiny"),
    task: str = typer.Option("arithmetic", help="Registered task name."),
    split: str = typer.Option("train", help="Task split (or path) to draw prompts from."),
    prompts: int = typer.Option(4, min=1, help="Prompts in the batch (B)."),
    group_size: int = typer.Option(8, min=2, help="Completions per prompt (G)."),
    max_new_tokens: int = typer.Option(32, min=1, help="Completion length limit."),
    temperature: float = typer.Option(1.0, help="Sampling temperature."),
    estimators: str = typer.Option(
        ",".join(config_fields(GRADRANK)[0]["estimators"]),
        help=config_fields(GRADRANK)[1]["estimators"] + " Comma-separated.",
    ),
    projection_dim: int | None = config_option(GRADRANK, "projection_dim", min=0),
    controls: int = config_option(GRADRANK, "n_controls", "--controls", min=20),
    lora_rank: int = config_option(MODEL, "lora_rank", min=0),
    tiny_warmup_steps: int = config_option(MODEL, "tiny_warmup_steps", min=0),
    seed: int = typer.Option(
        0, min=0, max=MAX_SEED, help="Seed of sampling, sketch and the control draws."
    ),
    as_json: bool = json_option("the ranks per estimator"),
) -> None:
    """Per-rollout gradients of one batch, their effective rank under several definitions for
    each estimator, against --controls seeded draws each of random advantages, random advantages
    on the estimator's non-zero rows, and its own advantages permuted within groups (mean, 5-95%
    interval, share of draws at or below the estimator)."""
    from pgrpo.measure.gradrank import (
        GradRankConfig,
        check_estimator_names,
        check_projection_dim,
        measure_gradrank,
    )
    from pgrpo.tasks import TASKS
    from pgrpo.train.config import ModelConfig

    check_model(model)
    TASKS.get(task)  # an unknown task fails before the model loads, listing the valid ones
    names = tuple(e.strip() for e in estimators.split(",") if e.strip())
    check_estimator_names(names, f"--estimators {estimators}")  # before the model loads
    check_projection_dim(projection_dim, prompts * group_size)  # before the model loads
    cfg = GradRankConfig(
        estimators=names, projection_dim=projection_dim, seed=seed, n_controls=controls
    )
    model_cfg = ModelConfig(name=model, lora_rank=lora_rank, tiny_warmup_steps=tiny_warmup_steps)
    result = measure_gradrank(
        model_cfg,
        task,
        split=split,
        n_prompts=prompts,
        group_size=group_size,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        cfg=cfg,
        seed=seed,
    )
    out = {
        "ranks": result.ranks,
        "controls": result.controls,
        "notes": result.notes,
        "rewards": result.rewards,
        "metrics": result.metrics,
    }
    title = (
        f"gradient effective rank: {escape(model)} on {escape(task)}, B={prompts} G={group_size}"
    )
    emit(out, as_json, lambda console: _print(result, title, console))


_CONTROLLED = ("rank/entropy", "rank/participation_ratio", "rank/stable")


def _print(result: Any, title: str, console: Console) -> None:
    table = Table(title=title)
    table.add_column("advantage", overflow="fold")
    for key in _SHOWN:
        table.add_column(key.replace("rank/", ""), overflow="fold")
    counts = ("rank/energy_90", "rank/energy_95", "rank/energy_99", "nonzero_rows")
    for name, metrics in result.ranks.items():
        table.add_row(name, *(f"{metrics[k]:.0f}" if k in counts else f"{metrics[k]:.2f}"
                              for k in _SHOWN))  # fmt: skip
    console.print(table)
    n = int(result.metrics["n_controls"])
    controls = Table(
        title=f"controls on the same score matrix: mean [5%, 95%] of {n} draws; p = share of "
        "draws at or below the estimator"
    )
    for col in ("advantage", "control", *(k.replace("rank/", "") for k in _CONTROLLED)):
        controls.add_column(col, overflow="fold")
    for name, kinds in result.controls.items():
        for kind, summary in kinds.items():
            cells = [
                f"{s['mean']:.2f} [{s['p05']:.2f}, {s['p95']:.2f}] p={s['share_at_or_below']:.2f}"
                for s in (summary[k] for k in _CONTROLLED)
            ]
            controls.add_row(name if kind == "random" else "", kind, *cells)
    console.print(controls)
    console.print(
        "random: A ~ N(0, 1) on every row; support: the same on the estimator's non-zero rows "
        "only; permutation: its own advantages shuffled within each group"
    )
    for name, metrics in result.ranks.items():
        if metrics["nonzero_rows"] == 0:
            console.print(
                f"note: {escape(name)} gives every rollout a zero advantage on this batch (each "
                "group's rewards are equal: all pass or all fail), so its gradient is 0 and its "
                "ranks read 0; sample more prompts (--prompts) or another --seed"
            )
    for note in result.notes:
        console.print(f"note: {escape(note)}")
    m = result.metrics
    dim = int(m["projection_dim"])
    rows = "exact rows" if not dim else f"CountSketch D={dim}"
    console.print(f"reward mean {m['reward_mean']:.3f}; {int(m['n_params'])} parameters, {rows}")
    if dim:
        console.print(
            f"sketch distortion for N={int(m['n_rollouts'])}, D={dim}: a flat spectrum's stable "
            f"rank reads x{m['sketch/stable_rank_factor']:.3f} and its participation ratio "
            f"x{m['sketch/participation_factor']:.3f} (the top singular value inflated); "
            "concentrated spectra move less (docs/diagnostics.md, `pgrpo gradrank`)"
        )
