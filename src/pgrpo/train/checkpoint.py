"""Atomic checkpoints and exact resume.

A checkpoint is a folder `RUN_DIR/checkpoints/step-<n>/` holding `state.pt`: the trainable weights
(all parameters for a full fine-tune, the adapter for LoRA), optimizer and scheduler states, the
RNG states (python, numpy, torch), the data position, the step and the byte offset of
metrics.jsonl. It is written to a temporary folder and moved into place with `os.replace`; then
`RUN_DIR/checkpoints/latest` (a one-line file, itself replaced atomically) names it, and older
checkpoints are deleted. A run killed at any instant leaves either the previous or the new
checkpoint, never a torn one.
"""

from __future__ import annotations

import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

CHECKPOINT_DIR = "checkpoints"


@dataclass(frozen=True)
class Checkpoint:
    """What `load_checkpoint` returns: the step done, the data position and the log offset."""

    step: int
    data_position: dict[str, int]
    metrics_offset: int
    path: Path


def rng_state() -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The parameters that training changes (LoRA: only the adapter)."""
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def save_checkpoint(
    run_dir: Path,
    *,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    data_position: dict[str, int],
    metrics_offset: int,
) -> Path:
    """Write checkpoint `step` atomically and make it the latest; returns its folder."""
    root = Path(run_dir) / CHECKPOINT_DIR
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step}"
    tmp = root / f".tmp-step-{step}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    state = {
        "step": step,
        "model": trainable_state(model),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng": rng_state(),
        "data_position": dict(data_position),
        "metrics_offset": int(metrics_offset),
    }
    torch.save(state, tmp / "state.pt")
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    pointer = root / f".latest-{os.getpid()}"
    pointer.write_text(final.name + "\n")
    os.replace(pointer, root / "latest")
    for old in root.iterdir():
        if old.name.startswith("step-") and old != final:
            shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(run_dir: Path) -> Path | None:
    pointer = Path(run_dir) / CHECKPOINT_DIR / "latest"
    if not pointer.is_file():
        return None
    path = pointer.parent / pointer.read_text().strip()
    return path if (path / "state.pt").is_file() else None


def load_checkpoint(
    path: Path, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any
) -> Checkpoint:
    """Restore weights, optimizer, scheduler and RNG states in place."""
    state = torch.load(Path(path) / "state.pt", weights_only=False)
    params = dict(model.named_parameters())
    missing = sorted(set(state["model"]) - set(params))
    if missing:
        raise ValueError(
            f"checkpoint {path} has weights the model lacks ({missing[:3]}...): resume with the "
            "same model.name and model.lora_rank as the run that wrote it"
        )
    with torch.no_grad():
        for name, value in state["model"].items():
            params[name].copy_(value)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    set_rng_state(state["rng"])
    return Checkpoint(
        step=int(state["step"]),
        data_position=dict(state["data_position"]),
        metrics_offset=int(state["metrics_offset"]),
        path=Path(path),
    )
