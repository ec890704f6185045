"""Shared test settings: offline hub, quiet tokenizers, the shared data folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

TINY_CLI_ARGS = [
    "model.name=tiny",
    "model.tiny_hidden=32",
    "model.tiny_warmup_steps=60",
    "task.options={levels: [1], n: 200}",
    "group_size=4",
    "batch_prompts=4",
    "max_new_tokens=4",
    "lr=3e-3",
    "torch_threads=1",
]
"""`pgrpo train` overrides for a tiny-model run that takes seconds (tests import it by name)."""


@pytest.fixture
def shared_data() -> Path:
    """`../shared/data` beside the repository (CI lays it there); skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA
