"""A seeded suite of synthetic GRPO reward curves made by the exact recursion, for tests and
benchmarks: warm-up + cosine/linear lr decay, one prompt per step (binomial noise of G samples,
sd 0.2-0.4), and four shapes: slow start, early plateau, still rising, oscillating.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pgrpo.core.schedules import lr_horizon
from pgrpo.dynamics.recursion import simulate_recursion

SHAPES = ("slow_start", "plateau_early", "still_rising", "oscillating")


@dataclass(frozen=True)
class SyntheticCurve:
    """step, reward (noisy observed), mean (noise-free R_n), lr: [n]; truth: the generator's
    parameters (R_0, R_inf, a_peak = peak lr * kappa, beta1, refresh_interval, group_size)."""

    shape: str
    step: np.ndarray
    reward: np.ndarray
    mean: np.ndarray
    lr: np.ndarray
    truth: dict[str, float] = field(default_factory=dict)


def lr_schedule(n: int, peak: float, warmup: int, decay: str = "cosine", floor: float = 0.0):
    """The lr of a whole n-step schedule (`pgrpo.core.schedules.lr_horizon` from step 0):
    warm-up, then cosine, linear or constant decay to floor * peak: [n] (n = 0: empty)."""
    return lr_horizon(decay, peak, n, 0, warmup, floor).lrs if n > 0 else np.zeros(0)


def synthetic_curve(shape: str, rng: np.random.Generator, n_steps: int = 1000) -> SyntheticCurve:
    """One noisy curve of the given shape, its hyperparameters drawn from `rng`."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; valid: {', '.join(SHAPES)}")
    n = n_steps
    R0 = rng.uniform(0.05, 0.35)
    R_inf = rng.uniform(0.55, 0.9)
    beta1, K = 0.9, 1
    warmup = int(n * rng.uniform(0.03, 0.1))
    # a_peak: per-step stiffness at the peak lr; the shape sets the timescale relative to n
    if shape == "slow_start":
        a_peak, warmup = 8.0 / n * rng.uniform(0.7, 1.5), int(n * rng.uniform(0.15, 0.25))
    elif shape == "plateau_early":
        a_peak = 40.0 / n * rng.uniform(0.7, 1.5)
    elif shape == "still_rising":
        a_peak = 1.5 / n * rng.uniform(0.7, 1.5)
    else:
        beta1, a_peak = 0.97, rng.uniform(0.03, 0.06)
    decay = str(rng.choice(["cosine", "linear"]))
    lr = lr_schedule(n, 1e-6, warmup, decay, floor=float(rng.choice([0.0, 0.1])))
    kappa = a_peak / 1e-6
    x = simulate_recursion(kappa * lr, beta1, n, refresh_interval=K)[0, :-1]
    mean = np.clip(R_inf + (R0 - R_inf) * x, 0.0, 1.0)
    G = int(rng.choice([2, 3, 4, 6]))
    reward = rng.binomial(G, mean) / G
    truth = {
        "R_0": R0,
        "R_inf": R_inf,
        "a_peak": a_peak,
        "kappa": kappa,
        "beta1": beta1,
        "refresh_interval": K,
        "group_size": G,
    }
    return SyntheticCurve(shape, np.arange(1, n + 1, dtype=float), reward, mean, lr, truth)


def synthetic_suite(n_per_shape: int = 6, seed: int = 0, n_steps: int = 1000):
    """n_per_shape curves of each shape (list of SyntheticCurve), deterministic in `seed`."""
    rng = np.random.default_rng(seed)
    return [synthetic_curve(s, rng, n_steps) for s in SHAPES for _ in range(n_per_shape)]


OUT_OF_FAMILY = ("logistic", "power_law", "decline", "step")


def out_of_family_curve(shape: str, rng: np.random.Generator, n_steps: int = 1000):
    """A noisy curve NOT made by the model (logistic rise, power law, rise then decline, a step
    jump), with a warm-up + cosine lr logged beside it that does not drive it: a robustness check
    for fits and forecast bands."""
    n = n_steps
    t = np.arange(1, n + 1, dtype=float)
    if shape == "logistic":
        mid, width = rng.uniform(0.05, 0.4) * n, rng.uniform(0.02, 0.1) * n
        mean = 0.2 + 0.5 / (1 + np.exp(-(t - mid) / width))
    elif shape == "power_law":
        mean = np.clip(0.8 - 0.6 * (t / 5) ** -rng.uniform(0.2, 0.6), 0, 1)
    elif shape == "decline":
        rise = 0.2 + 0.5 * (1 - np.exp(-t / (0.1 * n)))
        mean = rise - 0.15 * np.clip((t - 0.5 * n) / (0.5 * n), 0, 1)
    elif shape == "step":
        mean = 0.3 + 0.4 * (t > rng.uniform(0.1, 0.3) * n)
    else:
        raise ValueError(f"unknown shape {shape!r}; valid: {', '.join(OUT_OF_FAMILY)}")
    G = int(rng.choice([2, 4, 8]))
    reward = rng.binomial(G, mean) / G
    lr = lr_schedule(n, 1e-6, int(0.05 * n), "cosine")
    return SyntheticCurve(shape, t, reward, mean, lr, {"group_size": G})


def out_of_family_suite(n_per_shape: int = 6, seed: int = 0, n_steps: int = 1000):
    """n_per_shape curves of each OUT_OF_FAMILY shape, deterministic in `seed`."""
    rng = np.random.default_rng(seed)
    return [out_of_family_curve(s, rng, n_steps) for s in OUT_OF_FAMILY for _ in range(n_per_shape)]
