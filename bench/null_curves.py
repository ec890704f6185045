"""Null curves for bench/real_runs.py: per corpus run, curves of its length that are pure
batch noise at its own rollouts per step (binomial groups at its mean success rate, clipped to
[0.2, 0.8], with TRL's reward_std and frac_reward_zero_std) or, where N, G or B is unknown,
i.i.d. Gaussian at its mean and noise level; plus the issue's 40 curves of 1 prompt x G = 8.
Each carries the failure modes it holds by construction (`expected_modes`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from corpus_entry import n_rollouts

from pgrpo.diagnose.nullmodel import is_binary_mean, noise_sd
from pgrpo.diagnose.rules import DEGENERACY_MAX
from pgrpo.logs import read_log


def null_p(meta: dict, reward: np.ndarray) -> float | None:
    """The success rate of a run's binomial null curves (its mean, clipped to [0.2, 0.8]), or
    None when its nulls are Gaussian (N, G or B unknown, or not a mean of N 0/1 rewards)."""
    n_roll = n_rollouts(meta)
    g, b = meta.get("G"), meta.get("prompts_per_step")
    if n_roll and g and b and is_binary_mean(reward, n_roll):
        return float(np.clip(np.mean(reward), 0.2, 0.8))
    return None


EXPECTED_MARGIN = 0.1
"""A null curve is degenerate by construction when its zero-spread share clears the mode's
DEGENERACY_MAX by this much: just above it (a G = 2 null at p 0.45 has 0.505), the mode firing
would be chance, and a null that fires there counts against the tool."""


def expected_modes(meta: dict, reward: np.ndarray) -> list[str]:
    """The modes a run's null curves hold by construction: advantage_degeneracy when their
    i.i.d. zero-spread share p^G + (1 - p)^G exceeds DEGENERACY_MAX + EXPECTED_MARGIN."""
    p, g = null_p(meta, reward), meta.get("G")
    if p is None or not (g and p**g + (1 - p) ** g > DEGENERACY_MAX + EXPECTED_MARGIN):
        return []
    return ["advantage_degeneracy"]


def null_curve(rng, n: int, meta: dict, reward: np.ndarray) -> dict[str, np.ndarray]:
    """One null curve of length n for a run: binomial groups at its N, else Gaussian noise."""
    if (p := null_p(meta, reward)) is not None:
        return group_curve(rng, n, int(meta["prompts_per_step"]), int(meta["G"]), p)
    sd = float(noise_sd(reward[None, :])[0]) or 1.0
    return {"reward": float(np.mean(reward)) + sd * rng.standard_normal(n)}


def group_curve(rng, n: int, b: int, g: int, p: float) -> dict[str, np.ndarray]:
    """B prompts x G 0/1 rollouts per step at constant p: reward (batch mean), reward_std
    (TRL: mean over groups of the per-group std) and frac_reward_zero_std."""
    x = rng.random((n, b, g)) < p
    std = x.std(axis=2, ddof=1) if g > 1 else np.zeros((n, b))
    return {
        "reward": x.mean(axis=(1, 2)),
        "reward_std": std.mean(axis=1),
        "frac_reward_zero_std": (std == 0).mean(axis=1),
    }


def write_csv(path: Path, cols: dict[str, np.ndarray], step: np.ndarray) -> None:
    names = list(cols)
    lines = [",".join(["step", *names])]
    for i in range(step.size):
        lines.append(",".join([f"{step[i]:g}", *(f"{cols[k][i]:.6g}" for k in names)]))
    path.write_text("\n".join(lines) + "\n")


def null_suite(
    runs: list[dict], per_run: int, tmp: Path, corpus: Path
) -> list[tuple[dict, Path, dict, list[str]]]:
    """(metadata, csv path, columns, expected modes) for every null curve, seeded."""
    rng = np.random.default_rng(20261201)
    out = []
    for meta in runs:
        log = read_log(corpus / meta["csv"])
        expect = expected_modes(meta, log.reward)  # the run's, the same for each of its curves
        for j in range(per_run):
            cols = null_curve(rng, len(log), meta, log.reward)
            out.append((meta, tmp / f"null_{meta['name']}_{j}.csv", cols, expect))
    lengths = [int(m.get("steps_logged") or len(read_log(corpus / m["csv"]))) for m in runs]
    for j in range(40):
        n = int(rng.choice(lengths))
        meta = {"name": f"issue_G8_{j}", "G": 8, "prompts_per_step": 1, "completions_per_step": 8}
        cols = group_curve(rng, n, 1, 8, rng.uniform(0.2, 0.8))  # share <= 0.17 < DEGENERACY_MAX
        out.append((meta, tmp / f"null_issue_{j}.csv", cols, []))
    for _meta, path, cols, _expect in out:
        write_csv(path, cols, np.arange(1, cols["reward"].size + 1, dtype=float))
    return out
