"""Shared test settings: offline hub, quiet tokenizers, the hypothesis profile, the shared data
folder."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from scipy.signal import lfilter

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")

# Hypothesis: under CI (CI=true, as .ci/run and most CI services set it) every run draws the
# same examples (derandomize: a red CI run reproduces, bit for bit, on a developer's machine)
# and keeps no example database; developers keep hypothesis' default profile (random examples,
# the local database that replays past failures). Loaded here, before the test modules are
# imported, so that each @settings(...) inherits it; --hypothesis-profile NAME still wins.
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def hypothesis_profile(environ: dict[str, str]) -> str:
    """ "ci" when `environ` says CI (CI=true or 1, any case), else HYPOTHESIS_PROFILE or
    "default"."""
    if environ.get("CI", "").strip().lower() in ("true", "1"):
        return "ci"
    return environ.get("HYPOTHESIS_PROFILE", "default")


settings.load_profile(hypothesis_profile(dict(os.environ)))

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


def ar1(rng: np.random.Generator, shape: int | tuple[int, ...], rho: float) -> np.ndarray:
    """Stationary Gaussian AR(1) noise at lag-1 autocorrelation rho, marginal sd 1, along the
    last axis of `shape` (300 steps of burn-in); tests import it by name."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    e = rng.standard_normal((*shape[:-1], shape[-1] + 300))
    return lfilter([1.0], [1.0, -rho], e, axis=-1)[..., 300:] * np.sqrt(1.0 - rho * rho)


@pytest.fixture
def shared_data() -> Path:
    """`../shared/data` beside the repository (CI lays it there); skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


def corpus_folder(path: Path, names) -> Path:
    """A folder in the corpus layout (index.json with `runs`, one CSV per run) holding the runs
    of ../shared/data/curves named in `names`, in index order; tests import it by name."""
    curves = SHARED_DATA / "curves"
    kept = [dict(m) for m in json.loads((curves / "index.json").read_text())["runs"]
            if m["name"] in names]  # fmt: skip
    path.mkdir(parents=True)
    for m in kept:
        shutil.copy(curves / m["csv"], path / m["csv"])
    (path / "index.json").write_text(json.dumps({"runs": kept}))
    return path


@pytest.fixture
def fake_sampling(monkeypatch):
    """install(completion): `pgrpo eval`'s evaluate() builds no model and every completion of a
    prompt is completion(prompt); returns the list of sampled batch sizes (empty: nothing
    sampled). For the eval tests (tests/test_eval_review*.py)."""
    from types import SimpleNamespace

    import pgrpo.train.rollout as rollout

    calls: list[int] = []

    def install(completion):
        def sample(policy, prompts, *, group_size, temperatures, max_new_tokens):
            calls.append(len(prompts))
            return SimpleNamespace(
                texts=[completion(p) for p in prompts for _ in range(group_size)]
            )

        monkeypatch.setattr(rollout, "sample", sample)
        monkeypatch.setattr(rollout, "load_task_and_policy", lambda config, **kw: (None, object()))
        return calls

    return install
